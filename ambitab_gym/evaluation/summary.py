"""From stored episodes to the numbers of paper Table 8 (Definition 2-3, C.3).

* :func:`episode_metrics` - p, r, F1 and success of one finished trajectory.
* :func:`summarize` - per seed: SR per condition, macro precision / recall / F1 of the asker,
  asking gain and signed gap; then mean and sample SD over seeds.
* :func:`format_table` - the summary as an aligned text table.

Populations (C.3): precision over episodes with n >= 1, recall and F1 over episodes with
|Amb| >= 1, SR over all episodes. Gains and gaps are computed within each seed before averaging.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ambitab_gym.metrics import episode_precision, episode_recall, question_f1
from ambitab_gym.records import TaskRecord
from ambitab_gym.trajectory import Trajectory

__all__ = ["Stat", "Summary", "episode_metrics", "format_table", "summarize"]

CONDITIONS = ("none", "asker", "full")


def episode_metrics(trajectory: Trajectory, record: TaskRecord) -> dict[str, float | None]:
    """``precision`` (None when n = 0), ``recall`` and ``f1`` (None when |Amb| = 0), ``success``."""
    amb = frozenset(a.id for a in record.counted_ambiguities)
    credits = trajectory.credits
    verdict = trajectory.verdict
    return {
        "precision": episode_precision(credits, amb),
        "recall": episode_recall(credits, amb),
        "f1": question_f1(credits, amb) if amb else None,
        "success": float(bool(verdict and verdict.success)),
    }


@dataclass(frozen=True)
class Stat:
    """Mean and sample standard deviation over seeds (SD is 0 for one seed).

    >>> Stat.of([0.5, 0.7, None]).mean, round(Stat.of([0.5, 0.7]).sd, 4)
    (0.6, 0.1414)
    """

    mean: float | None
    sd: float | None
    per_seed: tuple[float, ...] = ()

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Stat:
        kept = tuple(v for v in values if v is not None)
        if not kept:
            return cls(None, None, ())
        sd = statistics.stdev(kept) if len(kept) > 1 else 0.0
        return cls(statistics.fmean(kept), sd, kept)


@dataclass(frozen=True)
class Summary:
    """Campaign figures: each a :class:`Stat` over seeds (see :func:`summarize`).

    >>> s = summarize([{"condition": "none", "seed": 0, "success": 1.0, "precision": None,
    ...                 "recall": None, "f1": None, "error": None}])
    >>> s.to_json()["sr_none"], s.episodes
    (1.0, 1)
    """

    sr: dict[str, Stat]
    precision: Stat
    recall: Stat
    f1: Stat
    gain: Stat
    gap: Stat
    episodes: int
    errors: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        """The ``--json`` object: rates in [0, 1] (means over seeds), SDs and counts."""

        def mean(stat: Stat) -> float | None:
            return stat.mean

        out = {
            "sr_none": mean(self.sr.get("none", Stat(None, None))),
            "sr_asker": mean(self.sr.get("asker", Stat(None, None))),
            "sr_full": mean(self.sr.get("full", Stat(None, None))),
            "precision": mean(self.precision),
            "recall": mean(self.recall),
            "f1": mean(self.f1),
            "asking_gain": mean(self.gain),
            "gap": mean(self.gap),
            "episodes": self.episodes,
            "errors": dict(self.errors),
        }
        out["sd"] = {
            "sr_none": self.sr.get("none", Stat(None, None)).sd,
            "sr_asker": self.sr.get("asker", Stat(None, None)).sd,
            "sr_full": self.sr.get("full", Stat(None, None)).sd,
            "precision": self.precision.sd,
            "recall": self.recall.sd,
            "f1": self.f1.sd,
        }
        return out


def _macro(rows: list[Mapping], key: str) -> float | None:
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.fmean(values) if values else None


def summarize(rows: Iterable[Mapping]) -> Summary:
    """Aggregate episode rows (dicts with condition, seed, success, precision, recall, f1, error).

    Example:
        >>> rows = [
        ...     {"condition": "none", "seed": 0, "success": 0.0, "precision": None,
        ...      "recall": 0.0, "f1": 0.0, "error": None},
        ...     {"condition": "asker", "seed": 0, "success": 1.0, "precision": 0.5,
        ...      "recall": 1.0, "f1": 2 / 3, "error": None},
        ...     {"condition": "full", "seed": 0, "success": 1.0, "precision": 1.0,
        ...      "recall": 1.0, "f1": 1.0, "error": None}]
        >>> s = summarize(rows)
        >>> s.sr["asker"].mean, s.precision.mean, s.gain.mean, s.gap.mean
        (1.0, 0.5, 1.0, 0.0)
    """
    rows = list(rows)
    seeds = sorted({r["seed"] for r in rows})
    by = {(c, s): [] for c in CONDITIONS for s in seeds}
    errors: dict[str, int] = {}
    for row in rows:
        by.setdefault((row["condition"], row["seed"]), []).append(row)
        if row.get("error"):
            errors[row["error"]] = errors.get(row["error"], 0) + 1
    sr = {}
    for condition in CONDITIONS:
        sr[condition] = Stat.of(
            _macro(by[(condition, s)], "success") if by[(condition, s)] else None for s in seeds
        )
    gains, gaps = [], []
    for seed in seeds:
        j_none = _macro(by[("none", seed)], "success") if by[("none", seed)] else None
        j_ask = _macro(by[("asker", seed)], "success") if by[("asker", seed)] else None
        j_full = _macro(by[("full", seed)], "success") if by[("full", seed)] else None
        gains.append(None if j_ask is None or j_none is None else j_ask - j_none)
        gaps.append(None if j_ask is None or j_full is None else j_full - j_ask)
    asker_rows = {s: by[("asker", s)] for s in seeds}
    return Summary(
        sr=sr,
        precision=Stat.of(_macro(asker_rows[s], "precision") for s in seeds),
        recall=Stat.of(_macro(asker_rows[s], "recall") for s in seeds),
        f1=Stat.of(_macro(asker_rows[s], "f1") for s in seeds),
        gain=Stat.of(gains),
        gap=Stat.of(gaps),
        episodes=len(rows),
        errors=errors,
    )


def _cell(stat: Stat) -> str:
    if stat.mean is None:
        return "-"
    return f"{100 * stat.mean:.1f} ± {100 * (stat.sd or 0.0):.1f}"


def format_table(summaries: Mapping[str, Summary]) -> str:
    """An aligned table with the columns of paper Table 8 (percent, mean ± SD over seeds)."""
    header = [
        "Corpus",
        "SR none",
        "SR asker",
        "SR full",
        "Precision",
        "Recall",
        "F1",
        "Gain",
        "Gap",
    ]
    lines = [header]
    for name, s in summaries.items():
        lines.append(
            [
                name,
                _cell(s.sr["none"]),
                _cell(s.sr["asker"]),
                _cell(s.sr["full"]),
                _cell(s.precision),
                _cell(s.recall),
                _cell(s.f1),
                _cell(s.gain),
                _cell(s.gap),
            ]
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = []
    for i, row in enumerate(lines):
        out.append(
            "  ".join(
                cell.rjust(w) if j else cell.ljust(w)
                for j, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
