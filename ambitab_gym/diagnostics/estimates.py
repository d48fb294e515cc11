"""From leakage-campaign episodes to the four diagnostics (paper Definitions 5-7, Table 14).

* :data:`CONDITIONS` - the runs of a leakage campaign: which asker, under which oracle.
* :data:`DIAGNOSTICS` - each diagnostic as a difference of two conditions' macro means.
* :class:`Diagnostic` - one diagnostic: pooled estimate with its AVT-cluster bootstrap interval,
  and the per-seed values with their mean and sample SD.
* :class:`LeakageReport` - the four diagnostics, the reference terms of Theorem 1 part 2 and the
  Definition 7 checks on the reference runs (with the restatement and shotgun probes, whose
  recall must stay under :data:`PROBE_RECALL_LIMIT`); ``to_json()`` in percentage points.
* :func:`leakage_report` - compute a report from episode rows.
* :func:`format_leakage_table` - reports as an aligned table like paper Table 14.

Populations: success over every episode, recall over episodes with at least one counted
ambiguity that did not end in a fallback stop (paper C.3;
:func:`ambitab_gym.metrics.eligible_value`, the same rule evaluation summaries use). All runs of a comparison use the same records and seeds; intervals pool
the seeds and resample AVT clusters (for dRec_spec^Q, AVTs linked by a shared replacement).
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ambitab_gym.diagnostics.bootstrap import Interval, cluster_bootstrap, union_clusters
from ambitab_gym.metrics import macro_means

__all__ = [
    "CONDITIONS",
    "DIAGNOSTICS",
    "PROBE_RECALL_LIMIT",
    "RECALL_ONLY",
    "REFERENCE_TERMS",
    "Diagnostic",
    "DiagnosticSpec",
    "LeakageReport",
    "format_leakage_table",
    "leakage_report",
]

#: condition -> (asking policy, oracle). ``actual`` is O = (match, resp); ``hybrid`` is
#: (match, resp*); ``reference`` is the corpus's deterministic oracle O*.
CONDITIONS: dict[str, tuple[str, str]] = {
    "asker:actual": ("asker", "actual"),
    "asker:hybrid": ("asker", "hybrid"),
    "spec:hybrid": ("asker^Q", "hybrid"),
    "spec:reference": ("asker^Q", "reference"),
    "full_adv:actual": ("full^adv", "actual"),
    "full_adv:reference": ("full^adv", "reference"),
    "generic:hybrid": ("none^adv", "hybrid"),
    "generic:reference": ("none^adv", "reference"),
    "restatement:reference": ("restatement", "reference"),
    "shotgun:reference": ("shotgun", "reference"),
}

#: Conditions whose diagnostics read recall only: they run ask-only (no solver, no
#: verification) and store ``success`` as None.
RECALL_ONLY = frozenset(
    {
        "spec:hybrid",
        "spec:reference",
        "generic:hybrid",
        "generic:reference",
        "restatement:reference",
        "shotgun:reference",
    }
)

#: The most recall the restatement and shotgun probes may earn under the reference oracle: they
#: ask about no ambiguity, so a matcher that credits them credits words, not questions.
PROBE_RECALL_LIMIT = 0.05


@dataclass(frozen=True)
class DiagnosticSpec:
    """A diagnostic as ``mean(metric | minuend) - mean(metric | subtrahend)``.

    ``clusters`` is ``"avt"`` (each AVT alone) or ``"replacement"`` (AVTs linked by a shared
    specification replacement resample together). ``needs_answer_reader`` says that the
    diagnostic compares success rates that only a solver reading the answers can separate
    (:func:`ambitab_gym.policies.base.reads_answers`): with the ``interpretation`` solver extra
    words in an answer never change a verdict, so the diagnostic cannot show a response leak.
    Recall diagnostics run ask-only and need no solver.
    """

    name: str
    label: str
    metric: str
    minuend: str
    subtrahend: str | None
    clusters: str = "avt"
    needs_answer_reader: bool = False


#: The four diagnostics, in the column order of paper Table 14.
DIAGNOSTICS: tuple[DiagnosticSpec, ...] = (
    DiagnosticSpec(
        "d_j_resp", "dJ_resp", "success", "asker:actual", "asker:hybrid", needs_answer_reader=True
    ),
    DiagnosticSpec("d_rec_spec", "dRec_spec^Q", "recall", "spec:hybrid", None, "replacement"),
    DiagnosticSpec(
        "d_j_full",
        "dJ_full",
        "success",
        "full_adv:actual",
        "full_adv:reference",
        needs_answer_reader=True,
    ),
    DiagnosticSpec("d_rec_none", "dRec_none", "recall", "generic:hybrid", "generic:reference"),
)

#: Theorem 1 part 2: dRec_spec^Q - Leak_Rec(pi^Q; match) = Rec(pi^Q; O*).
REFERENCE_TERMS: tuple[DiagnosticSpec, ...] = (
    DiagnosticSpec(
        "rec_spec_reference", "Rec(pi^Q; O*)", "recall", "spec:reference", None, "replacement"
    ),
    DiagnosticSpec(
        "leak_rec_spec",
        "Leak_Rec(pi^Q; match)",
        "recall",
        "spec:hybrid",
        "spec:reference",
        "replacement",
    ),
)


def _macro(rows: Iterable[Mapping], condition: str, metric: str) -> float | None:
    return macro_means(r for r in rows if r["condition"] == condition)[metric]


def _difference(rows: Sequence[Mapping], spec: DiagnosticSpec) -> float | None:
    first = _macro(rows, spec.minuend, spec.metric)
    if spec.subtrahend is None or first is None:
        return first
    second = _macro(rows, spec.subtrahend, spec.metric)
    return None if second is None else first - second


@dataclass(frozen=True)
class Diagnostic:
    """One diagnostic (fractions; see :meth:`LeakageReport.to_json` for points).

    Attributes:
        spec: what it compares.
        interval: the estimate over all seeds with its cluster-bootstrap interval.
        per_seed: the estimate within each seed, by seed.
    """

    spec: DiagnosticSpec
    interval: Interval
    per_seed: dict[int, float | None] = field(default_factory=dict)

    @property
    def mean(self) -> float | None:
        return self.interval.mean

    @property
    def sd(self) -> float | None:
        """Sample SD of the per-seed values (0 for one seed)."""
        kept = [v for v in self.per_seed.values() if v is not None]
        if not kept:
            return None
        return statistics.stdev(kept) if len(kept) > 1 else 0.0


@dataclass(frozen=True)
class LeakageReport:
    """The leakage diagnostics of one campaign.

    Attributes:
        diagnostics: ``d_j_resp``, ``d_rec_spec``, ``d_j_full``, ``d_rec_none``.
        reference_terms: ``rec_spec_reference`` (Rec(pi^Q; O*)) and ``leak_rec_spec``.
        checks: Definition 7 on the reference runs: ``full_adv_recall``,
            ``full_adv_precision`` (both should be 1) and ``none_adv_recall`` (should be 0);
            the same check of the restatement and shotgun probes: ``restatement_recall`` and
            ``shotgun_recall`` (at most :data:`PROBE_RECALL_LIMIT`).
        episodes: rows used; errors: error category -> count.
    """

    diagnostics: dict[str, Diagnostic]
    reference_terms: dict[str, Diagnostic]
    checks: dict[str, float | None]
    episodes: int
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def reference_ok(self) -> bool | None:
        """Whether the reference runs meet Definition 7 (None when they were not run)."""
        values = (
            self.checks.get("full_adv_recall"),
            self.checks.get("full_adv_precision"),
            self.checks.get("none_adv_recall"),
        )
        if any(v is None for v in values):
            return None
        probes = [self.checks.get(k) for k in ("restatement_recall", "shotgun_recall")]
        return (
            values[0] == 1.0
            and values[1] == 1.0
            and values[2] == 0.0
            and all(v is None or v <= PROBE_RECALL_LIMIT for v in probes)
        )

    def to_json(self) -> dict:
        """``{name: {"mean", "lo", "hi"}}`` for the four diagnostics, in percentage points
        (rounded to 1e-10 points)."""

        def points(value: float | None) -> float | None:
            # 1e-10 points is far below any reported digit; it removes float noise (57.49999...)
            return None if value is None else round(100.0 * value, 10) + 0.0

        return {
            name: {
                "mean": points(d.interval.mean),
                "lo": points(d.interval.lo),
                "hi": points(d.interval.hi),
            }
            for name, d in self.diagnostics.items()
        }


def leakage_report(
    rows: Iterable[Mapping],
    *,
    replacement_links: Iterable[tuple[Hashable, Hashable]] = (),
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> LeakageReport:
    """Compute the diagnostics from leakage-campaign rows.

    Args:
        rows: episode rows (``condition``, ``seed``, ``avt_id``, ``success``, ``recall``,
            ``precision``, ``error``), conditions named as in :data:`CONDITIONS`.
        replacement_links: ``(receiver avt, donor avt)`` pairs of the specification
            randomization; they merge AVTs into the clusters of dRec_spec^Q.
        resamples: bootstrap resamples (paper: 2,000).
        seed: the bootstrap seed; every diagnostic draws from a fresh generator on it.
        confidence: the intervals' coverage.

    Example:
        >>> rows = [{"condition": c, "seed": 0, "avt_id": a, "success": s, "recall": r,
        ...          "precision": 1.0, "error": None}
        ...         for c in ("asker:actual", "asker:hybrid") for a, s, r in [("x", 1.0, 1.0)]]
        >>> leakage_report(rows, resamples=10).to_json()["d_j_resp"]
        {'mean': 0.0, 'lo': 0.0, 'hi': 0.0}
    """
    rows = list(rows)
    avts = {r["avt_id"] for r in rows}
    replacement = union_clusters(avts, replacement_links)
    seeds = sorted({int(r["seed"]) for r in rows})

    def compute(spec: DiagnosticSpec) -> Diagnostic:
        interval = cluster_bootstrap(
            rows,
            spec.metric,
            spec.minuend,
            spec.subtrahend,
            clusters=replacement if spec.clusters == "replacement" else None,
            resamples=resamples,
            seed=seed,
            confidence=confidence,
        )
        per_seed = {s: _difference([r for r in rows if r["seed"] == s], spec) for s in seeds}
        return Diagnostic(spec, interval, per_seed)

    errors: dict[str, int] = {}
    for row in rows:
        if row.get("error"):
            errors[row["error"]] = errors.get(row["error"], 0) + 1
    return LeakageReport(
        diagnostics={spec.name: compute(spec) for spec in DIAGNOSTICS},
        reference_terms={spec.name: compute(spec) for spec in REFERENCE_TERMS},
        checks={
            "full_adv_recall": _macro(rows, "full_adv:reference", "recall"),
            "full_adv_precision": _macro(rows, "full_adv:reference", "precision"),
            "none_adv_recall": _macro(rows, "generic:reference", "recall"),
            "restatement_recall": _macro(rows, "restatement:reference", "recall"),
            "shotgun_recall": _macro(rows, "shotgun:reference", "recall"),
        },
        episodes=len(rows),
        errors=errors,
    )


def _cell(diagnostic: Diagnostic) -> str:
    if diagnostic.mean is None:
        return "-"
    text = f"{100 * diagnostic.mean:.2f} ± {100 * (diagnostic.sd or 0.0):.2f}"
    lo, hi = diagnostic.interval.lo, diagnostic.interval.hi
    if lo is not None and hi is not None:
        text += f" [{100 * lo:.2f}, {100 * hi:.2f}]"
    return text


def format_leakage_table(reports: Mapping[tuple[str, str], LeakageReport]) -> str:
    """An aligned table like paper Table 14: one row per (oracle, dataset).

    Cells are percentage points: mean ± sample SD over seeds, then the 95% AVT-cluster
    bootstrap interval of the pooled estimate.
    """
    header = ["Oracle", "Dataset", *(spec.label for spec in DIAGNOSTICS)]
    lines = [header]
    for (oracle, dataset), report in reports.items():
        lines.append(
            [oracle, dataset, *(_cell(report.diagnostics[spec.name]) for spec in DIAGNOSTICS)]
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = []
    for i, row in enumerate(lines):
        out.append(
            "  ".join(
                cell.ljust(w) if j < 2 else cell.rjust(w)
                for j, (cell, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
