"""What an episode leaves behind, split along the trust boundary.

* :class:`DialogueTurn` and :class:`PublicView` - what the agent sees: the public spec, the
  visible dialogue (questions and answers), the questions left and the phase. A ``PublicView``
  has no field that could carry ambiguities, resolutions, credits or reference SQL.
* :class:`Turn` and :class:`Trajectory` - the full record of an episode for evaluation: credits,
  stop reason, SQL, verdict, reward and timings. Read it from ``env.unwrapped.trajectory``.
* :data:`STOP_REASONS` / :data:`StopReason`, :data:`Phase` - re-exported from
  :mod:`ambitab_gym.vocabulary`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ambitab_gym.records import PublicSpec
from ambitab_gym.verify.verifier import Verdict
from ambitab_gym.vocabulary import PHASES, STOP_REASONS, Phase, StopReason, check

__all__ = [
    "FALLBACK_STOP",
    "STOP_REASONS",
    "DialogueTurn",
    "Phase",
    "PublicView",
    "StopReason",
    "Trajectory",
    "Turn",
    "is_fallback_stop",
]


#: The stop action of an asker whose own reply could not be read (a fallback stop). Any stop
#: parser reads it as a stop; the env records the episode's stop reason as ``fallback``.
FALLBACK_STOP = json.dumps({"type": "done", "output": None, "fallback": True})


def is_fallback_stop(action: Any) -> bool:
    """Whether an action is :data:`FALLBACK_STOP` (a JSON ``done`` with ``"fallback": true``).

    >>> is_fallback_stop(FALLBACK_STOP), is_fallback_stop('{"type": "done", "output": null}')
    (True, False)
    """
    if not isinstance(action, str) or '"fallback"' not in action:
        return False
    try:
        value = json.loads(action)
    except (ValueError, RecursionError):
        return False
    return (
        isinstance(value, dict)
        and str(value.get("type", "")).strip().lower() in {"done", "stop"}
        and value.get("fallback") is True
    )


@dataclass(frozen=True)
class DialogueTurn:
    """One visible exchange: the asker's question and the oracle's answer.

    >>> DialogueTurn("Top how many?", "Three.").answer
    'Three.'
    """

    question: str
    answer: str


@dataclass(frozen=True)
class PublicView:
    """Everything the agent (asker or solver) may read at one point of an episode.

    Example:
        >>> view = PublicView(PublicSpec(request="List the top earners.", database="hr"),
        ...                   (DialogueTurn("Top how many?", "Three."),), questions_left=2)
        >>> print(view.render_dialogue())
        Q1: Top how many?
        A1: Three.
    """

    spec: PublicSpec
    dialogue: tuple[DialogueTurn, ...] = ()
    questions_left: int = 0
    phase: Phase = "ask"

    def __post_init__(self) -> None:
        check(self.phase, PHASES, "phase")

    def render_task(self) -> str:
        """The public spec as text: request, database, schema, column meanings, knowledge."""
        return render_spec(self.spec)

    def render_dialogue(self) -> str:
        """The visible dialogue as ``Q1: ... / A1: ...`` lines."""
        return "".join(
            f"Q{i}: {t.question}\nA{i}: {t.answer}\n" for i, t in enumerate(self.dialogue, 1)
        ).rstrip("\n")


def render_spec(spec: PublicSpec) -> str:
    """Render a public spec as the text the agent reads."""
    parts = [f"Request: {spec.request}", f"Database: {spec.database}"]
    if spec.schema_text:
        parts.append(f"Schema:\n{spec.schema_text}")
    if spec.column_meanings:
        meanings = "\n".join(f"- {k}: {v}" for k, v in spec.column_meanings.items())
        parts.append(f"Column meanings:\n{meanings}")
    if spec.external_knowledge:
        knowledge = "\n".join(f"- {k}" for k in spec.external_knowledge)
        parts.append(f"External knowledge:\n{knowledge}")
    return "\n\n".join(parts)


@dataclass
class Turn:
    """One question of an episode as the evaluator sees it.

    Attributes:
        action: the raw action text the asker emitted.
        question: the question put to the oracle (the parsed action).
        answer: the oracle's answer.
        credits: ambiguity ids the matcher credited (never shown to the agent).
        route: an LLM matcher's recorded route (``kind``, ``argument``, ``rationale``,
            ``parsed``; see :class:`ambitab_gym.oracles.Route`), kept for offline re-scoring;
            None for oracles that do not route. Never shown to the agent.
        answer_reveals_sql: the answer shows SQL or a fragment of the reference query
            (:func:`ambitab_gym.oracles.sqltext.answer_reveals_sql`). Never shown to the agent.
        shown_answer: what the agent was shown instead of ``answer`` (a response guard redacted
            it); None when it saw ``answer``.

    >>> Turn("Top how many?", "Top how many?", "Three.", frozenset({"top"})).credits
    frozenset({'top'})
    """

    action: str
    question: str
    answer: str
    credits: frozenset[str]
    route: dict | None = None
    answer_reveals_sql: bool = False
    shown_answer: str | None = None


@dataclass
class Trajectory:
    """The full record of an episode (privileged: evaluation only).

    >>> t = Trajectory("bird-0001", "bird-avt-01", stop_reason="budget")
    >>> t.turns.append(Turn("q", "q", "a", frozenset()))
    >>> t.n_questions, t.truncated, t.to_dict()["turns"][0]["credits"]
    (1, True, [])
    """

    record_id: str
    avt_id: str
    seed: int | None = None
    turns: list[Turn] = field(default_factory=list)
    stop_reason: StopReason | None = None
    sql: str | None = None
    verdict: Verdict | None = None
    reward: float | None = None
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.stop_reason is not None:
            check(self.stop_reason, STOP_REASONS, "stop reason")

    @property
    def n_questions(self) -> int:
        return len(self.turns)

    @property
    def truncated(self) -> bool:
        """Whether the budget, not the asker, ended the asking phase."""
        return self.stop_reason == "budget"

    @property
    def fallback(self) -> bool:
        """Whether the asking phase ended in a fallback stop (an unreadable asker reply)."""
        return self.stop_reason == "fallback"

    @property
    def credits(self) -> list[frozenset[str]]:
        return [t.credits for t in self.turns]

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {
            "record_id": self.record_id,
            "avt_id": self.avt_id,
            "seed": self.seed,
            "turns": [
                {
                    "action": t.action,
                    "question": t.question,
                    "answer": t.answer,
                    "credits": sorted(t.credits),
                    **({"route": dict(t.route)} if t.route is not None else {}),
                    **({"answer_reveals_sql": True} if t.answer_reveals_sql else {}),
                    **({"shown_answer": t.shown_answer} if t.shown_answer is not None else {}),
                }
                for t in self.turns
            ],
            "stop_reason": self.stop_reason,
            "sql": self.sql,
            "verdict": None
            if self.verdict is None
            else {
                "success": self.verdict.success,
                "reason": self.verdict.reason,
                "detail": self.verdict.detail,
                "elapsed_s": self.verdict.elapsed_s,
            },
            "reward": self.reward,
            "error": self.error,
            "timings": dict(self.timings),
        }
