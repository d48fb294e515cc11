"""Oracle protocols: a matcher credits ambiguities, a responder answers.

* :class:`Matcher` - ``match(question, context) -> frozenset of ambiguity ids`` (the credits).
* :class:`Responder` - ``respond(question, credits, context) -> str`` (the answer text).
* :class:`Oracle` - a matcher paired with a responder.
* :class:`OracleContext` - what the oracle may read: the record (privileged) and the dialogue
  so far, including its own earlier credits.
* :class:`Route` - an LLM matcher's recorded routing action (``labeled``/``unlabeled``/
  ``unanswerable``) with its rationale; the env stores it in the trajectory so that a campaign
  can be re-scored offline (paper C.3, :mod:`ambitab_gym.oracles.routes`).

The oracle is on the privileged side of the trust boundary; nothing here reaches the agent
except the answer text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ambitab_gym.records import PublicSpec, TaskRecord

__all__ = ["REFUSAL", "Matcher", "Oracle", "OracleContext", "OracleTurn", "Responder", "Route"]

#: The reply to a question that credits nothing (unmatched or tied).
REFUSAL = "Sorry, I can't help with that."


@dataclass(frozen=True)
class OracleTurn:
    """One earlier exchange as the oracle remembers it.

    >>> OracleTurn("Top how many?", "Three.", frozenset({"top"})).credits
    frozenset({'top'})
    """

    question: str
    answer: str
    credits: frozenset[str]


@dataclass(frozen=True)
class Route:
    """An LLM matcher's routing action for one question, as recorded for scoring (paper C.3).

    Attributes:
        kind: ``labeled``, ``unlabeled`` or ``unanswerable`` (an unreadable reply is recorded as
            ``unanswerable`` with ``parsed=False``).
        argument: the label or SQL segment exactly as the matcher wrote it (not normalized).
        rationale: the matcher's stated reasoning (its JSON ``reasoning`` field, else the prose
            around the action); thinking blocks are not part of it.
        parsed: whether the matcher's reply could be read.

    >>> route = Route("labeled", "Top Customers", "asks how many count as top")
    >>> Route.from_dict(route.to_dict()) == route
    True
    """

    kind: str
    argument: str = ""
    rationale: str = ""
    parsed: bool = True

    def to_dict(self) -> dict:
        """A JSON-ready dict (stored per turn in the results store)."""
        return {
            "kind": self.kind,
            "argument": self.argument,
            "rationale": self.rationale,
            "parsed": self.parsed,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Route:
        """The route of :meth:`to_dict`."""
        return cls(
            str(data.get("kind", "unanswerable")),
            str(data.get("argument") or ""),
            str(data.get("rationale") or ""),
            bool(data.get("parsed", True)),
        )


@dataclass
class OracleContext:
    """Everything an oracle may read for the current question.

    Attributes:
        record: the hidden record (interpretation, ambiguities, reference SQL).
        spec: the public spec as the agent sees it (with the schema read from the database);
            None: the record's own spec.
        turns: the earlier exchanges of this episode, with their credits.
        route: the route of the question being answered, left by an LLM matcher for the env to
            record (see :meth:`take_route`); None for oracles that do not route.

    >>> from ambitab_gym.records import parse_record
    >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
    ...     "spec": {"request": "Top earners", "database": "hr"},
    ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
    >>> context = OracleContext(record, [OracleTurn("q", "a", frozenset({"top"}))])
    >>> context.credited
    frozenset({'top'})
    """

    record: TaskRecord
    turns: list[OracleTurn] = field(default_factory=list)
    route: Route | None = None
    spec: PublicSpec | None = None

    def take_route(self) -> Route | None:
        """The route left for the current question (and forget it).

        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "Top earners", "database": "hr"},
        ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
        >>> context = OracleContext(record, route=Route("unanswerable"))
        >>> context.take_route().kind, context.take_route()
        ('unanswerable', None)
        """
        route, self.route = self.route, None
        return route

    @property
    def credited(self) -> frozenset[str]:
        """Ambiguity ids credited so far in this episode."""
        out: set[str] = set()
        for turn in self.turns:
            out |= turn.credits
        return frozenset(out)


@runtime_checkable
class Matcher(Protocol):
    """Decides which registered ambiguities a question targets (the credits).

    >>> class CreditNothing:
    ...     def match(self, question, context):
    ...         return frozenset()
    >>> isinstance(CreditNothing(), Matcher)
    True
    """

    def match(self, question: str, context: OracleContext) -> frozenset[str]: ...


@runtime_checkable
class Responder(Protocol):
    """Writes the answer to a question, given the credits the matcher assigned.

    >>> class AlwaysRefuse:
    ...     def respond(self, question, credits, context):
    ...         return REFUSAL
    >>> isinstance(AlwaysRefuse(), Responder)
    True
    """

    def respond(self, question: str, credits: frozenset[str], context: OracleContext) -> str: ...


@dataclass(frozen=True)
class Oracle:
    """An oracle O = (match, resp).

    Example:
        >>> from ambitab_gym.oracles import IntentMatcher, ReferenceResponder
        >>> oracle = Oracle(IntentMatcher(), ReferenceResponder())
        >>> oracle.name
        'IntentMatcher+ReferenceResponder'
    """

    matcher: Matcher
    responder: Responder

    def answer(self, question: str, context: OracleContext) -> tuple[frozenset[str], str]:
        """Credit the question, then answer it. Returns ``(credits, answer)``."""
        credits = frozenset(self.matcher.match(question, context))
        return credits, self.responder.respond(question, credits, context)

    async def aanswer(self, question: str, context: OracleContext) -> tuple[frozenset[str], str]:
        """Async :meth:`answer`: awaits ``amatch``/``arespond`` where the parts define them."""
        amatch = getattr(self.matcher, "amatch", None)
        credits = frozenset(
            await amatch(question, context) if amatch else self.matcher.match(question, context)
        )
        arespond = getattr(self.responder, "arespond", None)
        if arespond:
            return credits, await arespond(question, credits, context)
        return credits, self.responder.respond(question, credits, context)

    @property
    def name(self) -> str:
        return f"{type(self.matcher).__name__}+{type(self.responder).__name__}"
