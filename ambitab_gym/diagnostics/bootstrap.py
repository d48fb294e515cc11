"""Cluster bootstrap for the leakage diagnostics (paper A.4, "Pairing and uncertainty").

* :class:`Interval` - a point estimate with its percentile interval.
* :func:`union_clusters` - union-find over AVTs: AVTs linked (directly or through others) end up
  in one cluster, which is the resampling unit.
* :func:`resample_indices` - the seeded draws: ``resamples`` rows of cluster indices.
* :func:`percentile_interval` - a percentile of the bootstrap distribution (linear
  interpolation between order statistics, NumPy's default).
* :func:`cluster_bootstrap` - a difference of macro means (or one macro mean) over episode rows,
  with its 95% percentile interval from resampling clusters with replacement.

A cluster is resampled whole: every record, seed and condition (the paired runs) of its AVTs
moves together, so a resample keeps each AVT's pairs intact.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.metrics import eligible_value

__all__ = [
    "Interval",
    "cluster_bootstrap",
    "percentile_interval",
    "resample_indices",
    "union_clusters",
]


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap percentile interval (same units as the values).

    Attributes:
        mean: the estimate on the recorded runs (None when no row is eligible).
        lo, hi: the interval's ends (None when no resample could be evaluated).
        units: the number of clusters resampled.
        resamples: resamples drawn; ``valid`` of them had an eligible row in every term.

    Example:
        >>> Interval(0.25, 0.1, 0.4, units=12, resamples=2000, valid=2000).excludes_zero
        True
    """

    mean: float | None
    lo: float | None
    hi: float | None
    units: int = 0
    resamples: int = 0
    valid: int = 0

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies strictly on one side of 0."""
        if self.lo is None or self.hi is None:
            return False
        return self.lo > 0 or self.hi < 0

    def scaled(self, factor: float) -> Interval:
        """The interval with mean and ends multiplied by ``factor`` (e.g. 100 for points)."""

        def scale(value: float | None) -> float | None:
            return None if value is None else value * factor

        return Interval(
            scale(self.mean), scale(self.lo), scale(self.hi), self.units, self.resamples, self.valid
        )


def union_clusters(
    units: Iterable[Hashable], links: Iterable[tuple[Hashable, Hashable]] = ()
) -> dict[Hashable, Hashable]:
    """Merge linked units (union-find); returns unit -> cluster label.

    The label of a cluster is its smallest member (by ``str``), so it does not depend on the
    order of the links. Units named only in links are added.

    >>> union_clusters(["a", "b", "c", "d"], [("a", "c"), ("d", "c")])
    {'a': 'a', 'b': 'b', 'c': 'a', 'd': 'a'}
    """
    parent: dict[Hashable, Hashable] = {}

    def find(x: Hashable) -> Hashable:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for unit in units:
        parent.setdefault(unit, unit)
    for a, b in links:
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        ra, rb = find(a), find(b)
        if ra != rb:
            if str(rb) < str(ra):
                ra, rb = rb, ra
            parent[rb] = ra
    return {unit: find(unit) for unit in parent}


def resample_indices(n_units: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` x ``n_units`` cluster indices drawn uniformly with replacement.

    One call ``rng.integers(0, n_units, size=(resamples, n_units))``: row b is resample b.

    >>> resample_indices(3, 2, np.random.default_rng(0)).shape
    (2, 3)
    """
    if n_units < 1:
        raise ConfigurationError("the bootstrap needs at least one cluster")
    return rng.integers(0, n_units, size=(resamples, n_units))


def percentile_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The central ``confidence`` percentile interval of ``values`` (linear interpolation).

    >>> percentile_interval([0.0, 1.0, 2.0, 3.0, 4.0], confidence=0.5)
    (1.0, 3.0)
    """
    if not 0 < confidence < 1:
        raise ConfigurationError("confidence must lie strictly between 0 and 1")
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(np.asarray(values, dtype=float), [tail, 100 - tail])
    return float(lo), float(hi)


def _sums(
    rows: Sequence[Mapping], condition: str, metric: str, index: Mapping[Hashable, int], unit_of
) -> tuple[np.ndarray, np.ndarray]:
    totals = np.zeros(len(index))
    counts = np.zeros(len(index))
    for row in rows:
        value = eligible_value(row, metric) if row["condition"] == condition else None
        if value is None:
            continue
        k = index[unit_of(row)]
        totals[k] += value
        counts[k] += 1
    return totals, counts


def cluster_bootstrap(
    rows: Sequence[Mapping],
    metric: str,
    minuend: str,
    subtrahend: str | None = None,
    *,
    clusters: Mapping[Hashable, Hashable] | None = None,
    resamples: int = 2000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
    indices: np.ndarray | None = None,
) -> Interval:
    """mean(metric | minuend) - mean(metric | subtrahend), with a cluster-bootstrap interval.

    Each mean is a macro mean over the rows of that condition whose ``metric`` C.3 defines
    (:func:`~ambitab_gym.metrics.eligible_value`: not None, and no recall or F1 of a fallback
    stop; equal weight per record and seed). A resample draws clusters with replacement (as many as
    there are); a cluster drawn k times counts its rows k times in both means. Resamples in
    which a term has no eligible row are left out of the percentiles.

    Args:
        rows: episode rows with ``condition``, ``avt_id`` and the metric.
        metric: the row field (``success``, ``recall``, ...).
        minuend: the condition of the first mean.
        subtrahend: the condition subtracted (None: the minuend's mean alone).
        clusters: avt_id -> cluster label (default: every AVT is its own cluster).
        resamples: number of bootstrap resamples.
        seed: seed or generator for :func:`resample_indices`.
        confidence: the interval's coverage.
        indices: explicit resamples (rows of cluster indices, in the order of the sorted
            cluster labels) instead of random ones - e.g. every resample of a tiny example.

    Returns:
        the :class:`Interval`.

    Example:
        >>> rows = [{"condition": c, "avt_id": a, "success": s}
        ...         for c, a, s in [("on", "x", 1), ("off", "x", 0), ("on", "y", 1), ("off", "y", 1)]]
        >>> cluster_bootstrap(rows, "success", "on", "off", resamples=200).mean
        0.5
    """
    rows = [r for r in rows if r["condition"] in (minuend, subtrahend)]
    avts = {r["avt_id"] for r in rows}
    labels = dict(clusters or {})
    for avt in avts:
        labels.setdefault(avt, avt)
    ordered = sorted({labels[a] for a in avts}, key=str)
    index = {label: k for k, label in enumerate(ordered)}

    def unit_of(row: Mapping) -> Hashable:
        return labels[row["avt_id"]]

    terms = [_sums(rows, minuend, metric, index, unit_of)]
    if subtrahend is not None:
        terms.append(_sums(rows, subtrahend, metric, index, unit_of))
    if any(counts.sum() == 0 for _, counts in terms):
        return Interval(None, None, None, units=len(ordered))
    signs = (1.0, -1.0)[: len(terms)]
    estimate = sum(
        sign * totals.sum() / counts.sum()
        for sign, (totals, counts) in zip(signs, terms, strict=True)
    )
    if indices is None:
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        indices = resample_indices(len(ordered), resamples, rng)
    indices = np.asarray(indices)
    weights = np.zeros((indices.shape[0], len(ordered)))
    np.add.at(weights, (np.arange(indices.shape[0])[:, None], indices), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = sum(
            sign * (weights @ totals) / (weights @ counts)
            for sign, (totals, counts) in zip(signs, terms, strict=True)
        )
    stats = np.atleast_1d(stats)
    kept = stats[np.isfinite(stats)]
    if kept.size == 0:
        return Interval(float(estimate), None, None, len(ordered), int(indices.shape[0]), 0)
    lo, hi = percentile_interval(kept, confidence)
    return Interval(float(estimate), lo, hi, len(ordered), int(indices.shape[0]), int(kept.size))
