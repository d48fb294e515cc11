"""Episode quantities, the one episode scorer and the one aggregation (paper Definition 2,
eq. 1-3, C.3).

* :func:`episode_precision` - p(tau): share of questions that credit a not-yet-credited ambiguity.
* :func:`episode_recall` - r(tau): share of the counted ambiguities credited by the end.
* :func:`question_f1` - R_F1 of eq. 2, with its conventions for m = 0 and no productive question.
* :class:`EpisodeScore`, :func:`score_episode`, :func:`score_credits` - the C.3 scores of one
  episode: precision (omitted when n = 0), recall and F1 (omitted when |Amb| = 0 and for
  fallback stops), success.
* :func:`eligible_value` - one metric of a stored episode row, None where C.3 omits it.
* :func:`macro_means` - macro means over episodes, each over its own eligible population, with
  the counts (episodes, fallback stops, eligible episodes per metric).
* :func:`question_f1_reward`, :func:`outcome_reward` - reward functions over a finished
  trajectory; any ``Callable[[Trajectory, TaskRecord], float]`` can replace them.

Only counted ambiguities (critical and knowledge) enter credits; a stop decision is not a question.
Every consumer - evaluation summaries, leakage diagnostics and their bootstrap, trainer
integrations, benchmarks - scores episodes with :func:`score_episode` and aggregates with
:func:`macro_means` (or :func:`eligible_value` for per-row sums).

Populations (C.3): precision over episodes with n >= 1; recall and F1 over episodes with
|Amb| >= 1 that did not end in a fallback stop; success over episodes with a verdict. F1 is the
mean of episode-level R_F1 values (0 for an ambiguity-bearing episode without a productive
question), not the harmonic mean of macro precision and recall. The reward R_F1 keeps its m = 0
convention (1 for abstaining); the reported F1 does not include m = 0 episodes, where recall is
undefined.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ambitab_gym.records import TaskRecord

if TYPE_CHECKING:
    from ambitab_gym.trajectory import Trajectory

__all__ = [
    "FALLBACK",
    "REWARDS",
    "EpisodeScore",
    "RewardFn",
    "eligible_value",
    "episode_precision",
    "episode_recall",
    "macro_means",
    "outcome_reward",
    "question_f1",
    "question_f1_reward",
    "score_credits",
    "score_episode",
]

#: The stop reason of an episode whose asker reply could not be read (see
#: :data:`ambitab_gym.trajectory.FALLBACK_STOP`).
FALLBACK = "fallback"

RewardFn = Callable[["Trajectory", TaskRecord], float]


def _counted(credits: Iterable[frozenset[str]], amb: frozenset[str]) -> list[frozenset[str]]:
    return [frozenset(c) & amb for c in credits]


def episode_precision(credits: Sequence[frozenset[str]], amb: frozenset[str]) -> float | None:
    """p(tau) = |{i : cred_i not a subset of cred_<=i-1}| / n; None when n = 0.

    Args:
        credits: the credits of each question, in order.
        amb: the ids of the counted ambiguities (Amb).

    >>> episode_precision([{"a"}, {"a"}, set(), {"b"}], frozenset({"a", "b"}))
    0.5
    >>> episode_precision([], frozenset({"a"})) is None
    True
    """
    if not credits:
        return None
    seen: set[str] = set()
    productive = 0
    for cred in _counted(credits, amb):
        if not cred <= seen:
            productive += 1
        seen |= cred
    return productive / len(credits)


def episode_recall(credits: Sequence[frozenset[str]], amb: frozenset[str]) -> float | None:
    """r(tau) = |cred_<=n| / |Amb|; None when |Amb| = 0.

    >>> episode_recall([{"a"}, {"a"}], frozenset({"a", "b"}))
    0.5
    """
    if not amb:
        return None
    covered: set[str] = set()
    for cred in _counted(credits, amb):
        covered |= cred
    return len(covered) / len(amb)


def question_f1(credits: Sequence[frozenset[str]], amb: frozenset[str]) -> float:
    """R_F1 (paper eq. 2).

    1 when |Amb| = 0 and no question was asked; the harmonic mean of p and r when |Amb| > 0,
    n > 0 and p + r > 0; 0 otherwise (asking on m = 0, stopping at once on m > 0, no productive
    question).

    >>> question_f1([], frozenset())
    1.0
    >>> question_f1([set()], frozenset())
    0.0
    >>> question_f1([], frozenset({"a"}))
    0.0
    >>> round(question_f1([{"a"}, set()], frozenset({"a", "b"})), 4)  # p = 1/2, r = 1/2
    0.5
    """
    n = len(credits)
    if not amb:
        return 1.0 if n == 0 else 0.0
    if n == 0:
        return 0.0
    p = episode_precision(credits, amb)
    r = episode_recall(credits, amb)
    assert p is not None and r is not None
    if p + r == 0:
        return 0.0
    return 2 * p * r / (p + r)


@dataclass(frozen=True)
class EpisodeScore:
    """The C.3 scores of one episode (None where C.3 omits a metric).

    Attributes:
        record_id: the record.
        precision: p(tau); None when n = 0.
        recall: r(tau); None when |Amb| = 0 or the episode ended in a fallback stop.
        f1: R_F1 (eq. 2) of an ambiguity-bearing episode; None when recall is None.
        success: V(theta, s) as 0/1; None when no SQL was verified.
        n_questions: n.
        fallback: whether the asking phase ended in a fallback stop.

    >>> EpisodeScore("r", 0.5, 0.5, 0.5, 1.0, 2).to_dict()["f1"]
    0.5
    """

    record_id: str
    precision: float | None
    recall: float | None
    f1: float | None
    success: float | None
    n_questions: int
    fallback: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> EpisodeScore:
        """The score of a stored episode row (``precision``, ``recall``, ``f1``, ``success``,
        ``n_questions``, ``stop_reason``); C.3's omissions are applied to the row's values.

        >>> EpisodeScore.from_row({"record_id": "r", "precision": 1.0, "recall": 0.5,
        ...     "f1": 2 / 3, "success": 0.0, "n_questions": 1, "stop_reason": "fallback"}).recall is None
        True
        """
        return cls(
            str(row.get("record_id", "")),
            eligible_value(row, "precision"),
            eligible_value(row, "recall"),
            eligible_value(row, "f1"),
            eligible_value(row, "success"),
            int(row.get("n_questions") or 0),
            row.get("stop_reason") == FALLBACK,
        )


def score_credits(
    credits: Sequence[frozenset[str]], amb: frozenset[str], *, fallback: bool = False
) -> tuple[float | None, float | None, float | None]:
    """``(precision, recall, f1)`` of an episode from its credits, as C.3 reports them.

    >>> score_credits([{"a"}, set()], frozenset({"a", "b"}))
    (0.5, 0.5, 0.5)
    >>> score_credits([], frozenset({"a"}))  # no question on m > 0: F1 0, precision omitted
    (None, 0.0, 0.0)
    >>> score_credits([set()], frozenset())  # m = 0: recall and F1 omitted
    (0.0, None, None)
    >>> score_credits([{"a"}], frozenset({"a"}), fallback=True)
    (1.0, None, None)
    """
    precision = episode_precision(credits, amb)
    if not amb or fallback:
        return precision, None, None
    return precision, episode_recall(credits, amb), question_f1(credits, amb)


def score_episode(trajectory: Trajectory, record: TaskRecord) -> EpisodeScore:
    """The C.3 scores of a finished episode (counted ambiguities only).

    Args:
        trajectory: the env's trajectory after the episode (privileged:
            ``env.get_wrapper_attr("trajectory")`` or ``env.unwrapped.trajectory``).
        record: the episode's record (``env.get_wrapper_attr("record")``).
    """
    amb = frozenset(a.id for a in record.counted_ambiguities)
    fallback = trajectory.stop_reason == FALLBACK
    precision, recall, f1 = score_credits(trajectory.credits, amb, fallback=fallback)
    verdict = trajectory.verdict
    return EpisodeScore(
        trajectory.record_id,
        precision,
        recall,
        f1,
        None if verdict is None else float(bool(verdict.success)),
        trajectory.n_questions,
        fallback,
    )


def eligible_value(row: Mapping[str, Any], metric: str) -> float | None:
    """One metric of a stored episode row, None where C.3 omits it (a missing value; recall
    and F1 of a fallback stop).

    >>> eligible_value({"recall": 1.0, "stop_reason": "fallback"}, "recall") is None
    True
    >>> eligible_value({"recall": 1.0, "stop_reason": "asker"}, "recall")
    1.0
    """
    value = row.get(metric)
    if value is None:
        return None
    if metric in ("recall", "f1") and row.get("stop_reason") == FALLBACK:
        return None
    return float(value)


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def macro_means(scores: Iterable[EpisodeScore | Mapping[str, Any]]) -> dict[str, Any]:
    """Macro means over episodes, each metric over its own eligible population (C.3).

    Args:
        scores: :class:`EpisodeScore` objects or stored episode rows.

    Returns:
        ``precision``, ``recall``, ``f1``, ``success`` (means, None when no episode is
        eligible), ``questions`` (mean n), ``episodes``, ``fallback_stops``, and the eligible
        counts ``precision_episodes``, ``recall_episodes`` (also F1's), ``success_episodes``.

    Example:
        >>> m0 = EpisodeScore("a", None, None, None, 1.0, 0)  # m = 0, nothing asked
        >>> m2 = EpisodeScore("b", 0.5, 0.5, 0.5, 0.0, 2)
        >>> fb = EpisodeScore("c", 1.0, None, None, 0.0, 1, fallback=True)
        >>> out = macro_means([m0, m2, fb])
        >>> out["f1"], out["precision"], out["success"], out["fallback_stops"]
        (0.5, 0.75, 0.3333333333333333, 1)
    """
    items = [s if isinstance(s, EpisodeScore) else EpisodeScore.from_row(s) for s in scores]
    columns: dict[str, list[float]] = {"precision": [], "recall": [], "f1": [], "success": []}
    for item in items:
        for metric, values in columns.items():
            value = getattr(item, metric)
            if value is not None and not (item.fallback and metric in ("recall", "f1")):
                values.append(float(value))
    return {
        "precision": _mean(columns["precision"]),
        "recall": _mean(columns["recall"]),
        "f1": _mean(columns["f1"]),
        "success": _mean(columns["success"]),
        "questions": _mean([float(i.n_questions) for i in items]),
        "episodes": len(items),
        "fallback_stops": sum(1 for i in items if i.fallback),
        "precision_episodes": len(columns["precision"]),
        "recall_episodes": len(columns["recall"]),
        "success_episodes": len(columns["success"]),
    }


def question_f1_reward(trajectory: Trajectory, record: TaskRecord) -> float:
    """Question-F1 reward of a finished trajectory (counted ambiguities only)."""
    amb = frozenset(a.id for a in record.counted_ambiguities)
    return question_f1([t.credits for t in trajectory.turns], amb)


def outcome_reward(trajectory: Trajectory, record: TaskRecord) -> float:
    """Outcome reward V(theta, s) (paper eq. 3): 1 when the verifier accepts the final SQL."""
    return 1.0 if trajectory.verdict is not None and trajectory.verdict.success else 0.0


#: Rewards by name.
REWARDS: dict[str, RewardFn] = {"question_f1": question_f1_reward, "outcome": outcome_reward}
