"""Episode quantities and rewards (paper Definition 2, eq. 1-3, C.3).

* :func:`episode_precision` - p(tau): share of questions that credit a not-yet-credited ambiguity.
* :func:`episode_recall` - r(tau): share of the counted ambiguities credited by the end.
* :func:`question_f1` - R_F1 of eq. 2, with its conventions for m = 0 and no productive question.
* :func:`question_f1_reward`, :func:`outcome_reward` - reward functions over a finished
  trajectory; any ``Callable[[Trajectory, TaskRecord], float]`` can replace them.

Only counted ambiguities (critical and knowledge) enter credits; a stop decision is not a question.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ambitab_gym.records import TaskRecord

if TYPE_CHECKING:
    from ambitab_gym.trajectory import Trajectory

__all__ = [
    "REWARDS",
    "RewardFn",
    "episode_precision",
    "episode_recall",
    "outcome_reward",
    "question_f1",
    "question_f1_reward",
]

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


def question_f1_reward(trajectory: Trajectory, record: TaskRecord) -> float:
    """Question-F1 reward of a finished trajectory (counted ambiguities only)."""
    amb = frozenset(a.id for a in record.counted_ambiguities)
    return question_f1([t.credits for t in trajectory.turns], amb)


def outcome_reward(trajectory: Trajectory, record: TaskRecord) -> float:
    """Outcome reward V(theta, s) (paper eq. 3): 1 when the verifier accepts the final SQL."""
    return 1.0 if trajectory.verdict is not None and trajectory.verdict.success else 0.0


#: Rewards by name.
REWARDS: dict[str, RewardFn] = {"question_f1": question_f1_reward, "outcome": outcome_reward}
