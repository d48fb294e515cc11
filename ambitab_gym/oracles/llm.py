"""The two-stage LLM oracle (docs/design.md section 5; paper Table 6, Appendix G).

* :func:`sql_segments`, :class:`AccessPolicy`, :class:`NotesBuilder`, :func:`resolve_term` - what
  each stage may read (defined in :mod:`ambitab_gym.oracles.access`, re-exported here): ``scoped`` or
  ``unfiltered``, the "responder reads the reference SQL" switch, and the reference SQL cut into
  clause segments with sqlglot.
* :class:`MatchDecision` - the matcher's route and the credits it implies.
* :class:`LLMMatcher` - picks ``labeled(term)``, ``unlabeled(sql segment)`` or ``unanswerable()``;
  unreadable output counts as ``unanswerable()`` and is counted in ``parse_failures``. Routes are
  validated: a ``labeled`` argument must name a registered term (exactly, or after normalizing
  case, whitespace, punctuation and quotes), an ``unlabeled`` argument must copy a clause segment
  of the reference SQL, or a run of at least three of its tokens (compared after sqlglot
  tokenization: :func:`~ambitab_gym.oracles.sqltext.match_segment`), and placeholders or echoes of the
  prompt (``<sql segment>``, the question itself) are rejected; an invalid route is unreadable.
* :class:`LLMResponder` - writes the reply for a route (a refusal for ``unanswerable()``).
* :class:`LLMOracle` - an :class:`~ambitab_gym.oracles.base.Oracle` that hands the matcher's
  route (not only its credits) to the responder, then credits the question from the route, the
  question, the rationale and the response.

Credits follow paper C.3 (:func:`~ambitab_gym.oracles.routes.score_route`): an exact labeled
term first, otherwise the registered terms and aliases found in the label, question, routing
rationale and response. Every route is left in the :class:`OracleContext` (``route``) for the env
to store in the trajectory, so stored campaigns can be re-scored offline with the same function.
* :func:`make_llm_oracle` - build one for a corpus and a client.

The matcher and the responder are usable on their own too: ``Oracle(LLMMatcher(...),
ReferenceResponder())`` is the hybrid oracle (match, resp*), and an :class:`LLMResponder` behind a
deterministic matcher answers ``labeled`` for credited questions and refuses the rest.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ambitab_gym.llm.client import response_format
from ambitab_gym.llm.sampling import Sampling
from ambitab_gym.oracles.access import (
    AccessPolicy,
    NotesBuilder,
    match_segment,
    policy_for_corpus,
    resolve_term,
    sql_segments,
)
from ambitab_gym.oracles.base import REFUSAL, Oracle, OracleContext, Route
from ambitab_gym.oracles.llm_prompts import (
    MatcherAction,
    OracleNotes,
    matcher_messages,
    matcher_rationale,
    matcher_schema,
    parse_matcher_output,
    parse_responder_output,
    prompt_echo,
    responder_messages,
    responder_schema,
)
from ambitab_gym.oracles.routes import score_route
from ambitab_gym.textutil import find_json_object

if TYPE_CHECKING:
    from ambitab_gym.corpora import Corpus
    from ambitab_gym.llm.client import LLMClient

__all__ = [
    "AccessPolicy",
    "LLMMatcher",
    "LLMOracle",
    "LLMResponder",
    "MatchDecision",
    "NotesBuilder",
    "make_llm_oracle",
    "resolve_term",
    "sql_segments",
]


@dataclass(frozen=True)
class MatchDecision:
    """The matcher's route for one question.

    Attributes:
        action: the route the responder follows (``unanswerable`` when the output was
            unreadable or named no registered point).
        credits: the C.3 credits of the route before the response is known (at most one:
            single-answer mode); :class:`LLMOracle` re-scores with the response.
        parsed: whether the model's output was readable.
        raw: the model's reply.
        route: the route as recorded for scoring: what the matcher wrote, with its rationale.
        target: the ambiguity a ``labeled`` route names for the responder (its intent is what
            the responder reads), found leniently by :func:`resolve_term`.

    >>> MatchDecision(MatcherAction("unanswerable")).credits
    frozenset()
    """

    action: MatcherAction
    credits: frozenset[str] = frozenset()
    parsed: bool = True
    raw: str = ""
    route: Route | None = None
    target: str | None = None


@dataclass(frozen=True)
class _RouteWithReply(Route):
    """A route whose responder reply was not the requested JSON (stored per turn as
    ``responder_parsed: false`` for the per-role unreadable counts)."""

    responder_parsed: bool = True

    def to_dict(self) -> dict:
        out = super().to_dict()
        if not self.responder_parsed:
            out["responder_parsed"] = False
        return out


# the structured-output formats, built once per distinct content (a pure function: the same
# entries and segments give the same schema; nothing record-specific is kept elsewhere)
@functools.lru_cache(maxsize=1024)
def _route_format(entries: tuple, segments: tuple[str, ...]) -> dict:
    return response_format("route", matcher_schema(OracleNotes("", entries, segments=segments)))


_ANSWER_FORMAT = response_format("answer", responder_schema())


class _Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter = Counter()

    def add(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self.counts[key] += 1

    def get(self, key: str) -> int:
        with self._lock:
            return self.counts[key]

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def __getstate__(self) -> dict:  # pickling (Ray workers): the counts, not the lock
        return {"counts": self.snapshot()}

    def __setstate__(self, state: dict) -> None:
        self._lock = threading.Lock()
        self.counts = Counter(state["counts"])


class LLMMatcher:
    """The LLM matcher: routes a question to ``labeled``/``unlabeled``/``unanswerable``.

    Args:
        client: the LLM client.
        notes: what it may read (see :class:`NotesBuilder`).
        max_tokens, temperature, seed: overrides of ``sampling``.
        structured: constrain the reply to a JSON schema whose ``action`` lists the allowed
            routes (default: the client's ``structured_output``).
        sampling: this stage's sampling (default: the client's ``sampling["matcher"]``); each
            call sends a seed derived from the episode, the turn and the attempt.

    Unreadable replies and invalid routes become ``unanswerable()`` and count in ``unreadable``:
    ``parse_failures`` (no action could be read), ``unknown_labels`` (a label naming no registered term),
    ``invalid_segments`` (an ``unlabeled`` argument that is no reference SQL segment) and
    ``prompt_echoes`` (placeholders, the prompt's examples, the question copied back) say why.
    """

    def __init__(
        self,
        client: LLMClient,
        notes: NotesBuilder,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        structured: bool | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        self.client = client
        self.notes = notes
        self.sampling = (sampling or client.sampling["matcher"]).replace(
            max_tokens=max_tokens, temperature=temperature, seed=seed
        )
        self.structured = client.structured_output if structured is None else structured
        self._stats = _Stats()

    @property
    def parse_failures(self) -> int:
        """Replies from which no action could be read (each counted as ``unanswerable()``)."""
        return self._stats.get("parse_failures")

    @property
    def unreadable(self) -> int:
        """Replies that gave no usable route: ``parse_failures`` plus invalid routes
        (``unknown_labels``, ``invalid_segments``, ``prompt_echoes``)."""
        return self._stats.get("unreadable")

    @property
    def unknown_labels(self) -> int:
        """``labeled(...)`` routes that named no registered point."""
        return self._stats.get("unknown_labels")

    @property
    def stats(self) -> dict[str, int]:
        """Counts of routes, parse failures and unknown labels."""
        return self._stats.snapshot()

    async def adecide(self, question: str, context: OracleContext) -> MatchDecision:
        """Route one question (one LLM call)."""
        notes = self.notes.matcher_notes(context)
        messages = matcher_messages(question, notes)
        fmt = _route_format(notes.entries, notes.segments) if self.structured else None
        result = await self.client.achat(
            messages,
            tag="oracle:matcher",
            role="matcher",
            turn=len(context.turns),
            sampling=self.sampling,
            parse=parse_matcher_output,
            response_format=fmt,
        )
        # the client read the reply with parse_matcher_output already (a pure function of the
        # same text); a client without it (parsed None) is read here
        action = result.parsed
        if not isinstance(action, MatcherAction):
            action = parse_matcher_output(result.text)
        record = context.record
        rationale = matcher_rationale(result.text)
        problem = None if action is None else self._invalid(action, question, context)
        if action is None or problem is not None:
            why = problem or "parse_failures"
            self._stats.add("decisions", "unreadable", "unanswerable", why)
            argument = "" if action is None else action.argument
            route = Route("unanswerable", argument, rationale, parsed=False)
            context.route = route
            return MatchDecision(
                MatcherAction("unanswerable"), parsed=False, raw=result.raw, route=route
            )
        target: str | None = None
        if action.kind == "labeled":
            ambiguity = resolve_term(action.argument, record, strict=True)
            assert ambiguity is not None  # checked by _invalid
            if ambiguity.term != action.argument and action.argument not in ambiguity.names:
                # a near miss ("'Top-Customers'") names the term: record the term, so C.3
                # scoring (online and offline) credits what validation accepted
                action = MatcherAction("labeled", ambiguity.term)
            target = ambiguity.id
        route = Route(action.kind, action.argument, rationale)
        context.route = route
        credits = score_route(route, question, None, record)
        if action.kind == "labeled":
            action = MatcherAction("labeled", ambiguity.term)
        self._stats.add("decisions", action.kind)
        return MatchDecision(action, credits, raw=result.raw, route=route, target=target)

    def _dialect(self, record: Any) -> str:
        return str(getattr(self.notes, "dialect", None) or record.verification.engine or "sqlite")

    def _invalid(self, action: MatcherAction, question: str, context: OracleContext) -> str | None:
        """Why a parsed route is not usable (a stats key), or None when it is valid."""
        if action.kind == "unanswerable":
            return None
        if prompt_echo(action.argument, question):
            return "prompt_echoes"
        if action.kind == "labeled":
            if resolve_term(action.argument, context.record, strict=True) is None:
                return "unknown_labels"
            return None
        segments = self.notes.segments(context.record)
        if match_segment(action.argument, segments, self._dialect(context.record)) is None:
            return "invalid_segments"
        return None

    async def amatch(self, question: str, context: OracleContext) -> frozenset[str]:
        """The credits of :meth:`adecide` (C.3 without a response: the hybrid oracle's
        reference responder answers from them)."""
        return (await self.adecide(question, context)).credits

    def match(self, question: str, context: OracleContext) -> frozenset[str]:
        """Blocking :meth:`amatch`."""
        return self.client.run_sync(self.amatch(question, context))


class LLMResponder:
    """The LLM responder: writes the reply for a matcher route.

    Args:
        client: the LLM client.
        notes: what it may read (see :class:`NotesBuilder`).
        answer_unanswerable: also ask the model to word refusals (default: reply
            :data:`~ambitab_gym.oracles.base.REFUSAL` without a call).
        max_tokens, temperature, seed: overrides of ``sampling``.
        sampling: this stage's sampling (default: the client's ``sampling["responder"]``).
        structured: constrain the reply to ``{"answer": ...}`` (default: the client's
            ``structured_output``).

    A reply that is not the requested JSON is used as plain text (counted in
    ``parse_failures``); an empty one, or one that copies the format's placeholder
    (``<your reply>``), becomes the refusal (counted the same way).
    """

    def __init__(
        self,
        client: LLMClient,
        notes: NotesBuilder,
        *,
        answer_unanswerable: bool = False,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        structured: bool | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        self.client = client
        self.notes = notes
        self.answer_unanswerable = answer_unanswerable
        self.sampling = (sampling or client.sampling["responder"]).replace(
            max_tokens=max_tokens, temperature=temperature, seed=seed
        )
        self.structured = client.structured_output if structured is None else structured
        self._stats = _Stats()

    @property
    def parse_failures(self) -> int:
        """Replies that were not the requested JSON."""
        return self._stats.get("parse_failures")

    @property
    def stats(self) -> dict[str, int]:
        return self._stats.snapshot()

    async def areply(self, question: str, decision: MatchDecision, context: OracleContext) -> str:
        """The answer to a routed question."""
        action = decision.action
        if action.kind == "unanswerable" and not self.answer_unanswerable:
            self._stats.add("refusals")
            return REFUSAL
        focus: str | None = None
        if action.kind == "labeled":
            wanted = {decision.target} if decision.target else decision.credits
            for ambiguity in context.record.ambiguities:
                if ambiguity.id in wanted:
                    focus = ambiguity.response or ambiguity.resolution
                    break
        elif action.kind == "unlabeled":
            focus = action.argument
        notes = self.notes.responder_notes(context)
        messages = responder_messages(question, notes, action=action.render(), focus=focus)
        fmt = _ANSWER_FORMAT if self.structured else None
        result = await self.client.achat(
            messages,
            tag="oracle:responder",
            role="responder",
            turn=len(context.turns),
            sampling=self.sampling,
            parse=parse_responder_output,
            response_format=fmt,
        )
        self._stats.add("replies")
        answer = result.parsed
        if not isinstance(answer, str):
            answer = parse_responder_output(result.text)
        # a reply read as plain text is returned whole (parse_responder_output: ``text or None``),
        # one read from JSON is a field inside it: only a whole-text answer needs the JSON check
        if answer is None or (answer == result.text and find_json_object(result.text) is None):
            self._stats.add("parse_failures")  # not the requested JSON: plain text is used
            route = context.route
            if route is not None:
                context.route = _RouteWithReply(
                    route.kind, route.argument, route.rationale, route.parsed, False
                )
        return answer or REFUSAL

    async def arespond(self, question: str, credits: frozenset[str], context: OracleContext) -> str:
        """Answer from credits alone: ``labeled`` for the first credited point, else refuse."""
        for ambiguity in context.record.ambiguities:
            if ambiguity.id in credits:
                decision = MatchDecision(
                    MatcherAction("labeled", ambiguity.term),
                    frozenset({ambiguity.id}),
                    target=ambiguity.id,
                )
                return await self.areply(question, decision, context)
        return await self.areply(question, MatchDecision(MatcherAction("unanswerable")), context)

    def respond(self, question: str, credits: frozenset[str], context: OracleContext) -> str:
        """Blocking :meth:`arespond`."""
        return self.client.run_sync(self.arespond(question, credits, context))


@dataclass(frozen=True)
class LLMOracle(Oracle):
    """The two-stage LLM oracle: the responder sees the matcher's route, including
    ``unlabeled`` segments, not only the credits.

    Example:
        >>> from ambitab_gym.llm import LLMClient
        >>> from ambitab_gym.testing.llm_server import ScriptedServer, ScriptRule
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "List top customers", "database": "shop"},
        ...     "ambiguities": [{"id": "top", "term": "top customers",
        ...                      "resolution": "the five biggest spenders"}],
        ...     "verification": {"database": "shop", "reference_sql": "SELECT 1"}})
        >>> rules = [ScriptRule('{"action": "labeled(\\\\"top customers\\\\")"}',
        ...                     when="route one clarifying question"),
        ...          ScriptRule('{"answer": "The five who spent most."}')]
        >>> with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        ...     oracle = make_llm_oracle(None, client)
        ...     oracle.answer("Top how many?", OracleContext(record))
        (frozenset({'top'}), 'The five who spent most.')
    """

    matcher: LLMMatcher
    responder: Any = field(default=None)
    policy: AccessPolicy = field(default_factory=AccessPolicy.scoped)

    async def aanswer(self, question: str, context: OracleContext) -> tuple[frozenset[str], str]:
        """Route, answer, then credit (paper C.3): ``(credits, answer)``."""
        decision = await self.matcher.adecide(question, context)
        areply = getattr(self.responder, "areply", None)
        arespond = getattr(self.responder, "arespond", None)
        if areply is not None:
            answer = await areply(question, decision, context)
        elif arespond is not None:
            answer = await arespond(question, decision.credits, context)
        else:
            answer = self.responder.respond(question, decision.credits, context)
        return score_route(decision.route, question, answer, context.record), answer

    def answer(self, question: str, context: OracleContext) -> tuple[frozenset[str], str]:
        """Blocking :meth:`aanswer` (runs on the matcher's client loop)."""
        return self.matcher.client.run_sync(self.aanswer(question, context))

    @property
    def stats(self) -> dict[str, int]:
        """Matcher routes and parse failures, and responder counts (prefixed ``responder_``)."""
        out = dict(self.matcher.stats)
        out.setdefault("parse_failures", 0)
        responder_stats = getattr(self.responder, "stats", {})
        out.update({f"responder_{k}": v for k, v in responder_stats.items()})
        return out

    @property
    def name(self) -> str:
        return f"LLMOracle[{self.policy.name}{'+sql' if self.policy.responder_sql else ''}]"


def make_llm_oracle(
    corpus: Corpus | str | None,
    client: LLMClient,
    *,
    policy: str | AccessPolicy = "scoped",
    responder_reads_sql: bool | None = None,
    matcher_reads_sql: bool | None = None,
    matcher_reads_dialogue: bool = False,
    answer_unanswerable: bool = False,
    responder_client: LLMClient | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    seed: int | None = None,
    dialect: str | None = None,
    structured: bool | None = None,
) -> LLMOracle:
    """An LLM oracle for a corpus.

    Args:
        corpus: a :class:`Corpus`, a corpus name or env id, or None (the records' own specs and
            engines are used).
        client: the client both stages call.
        policy: ``scoped``, ``unfiltered``, ``auto`` (scoped on intent corpora, unfiltered on
            knowledge corpora, as paper Table 6 pairs them) or an :class:`AccessPolicy`.
        responder_reads_sql: the responder reads the reference SQL (default: off for scoped, on
            for unfiltered); ignored when ``policy`` is an :class:`AccessPolicy`.
        matcher_reads_sql: the matcher reads SQL segments (default: follows the policy).
        matcher_reads_dialogue: the matcher reads the earlier dialogue (default: only the
            current question).
        answer_unanswerable: let the model word refusals instead of the fixed refusal.
        responder_client: a different client for the responder (default: ``client``).
        max_tokens, temperature, seed: overrides for both stages (default: each stage's
            sampling in the client's ``sampling``: ``matcher``, ``responder``).
        dialect: the SQL dialect for segments (default: the corpus's).
        structured: schema-constrained JSON replies (default: the client's
            ``structured_output``).

    Returns:
        The oracle.
    """
    if isinstance(corpus, str):
        from ambitab_gym.corpora import load_corpus

        corpus = load_corpus(corpus)
    if policy == "auto":
        policy = policy_for_corpus(corpus.manifest.oracle if corpus is not None else "intent")
    if isinstance(policy, str):
        policy = AccessPolicy.named(
            policy,
            responder_reads_sql=responder_reads_sql,
            matcher_reads_sql=matcher_reads_sql,
            matcher_reads_dialogue=matcher_reads_dialogue,
        )
    notes = NotesBuilder(policy, corpus, dialect)
    sampling = {
        "max_tokens": max_tokens,
        "temperature": temperature,
        "seed": seed,
        "structured": structured,
    }
    matcher = LLMMatcher(client, notes, **sampling)
    responder = LLMResponder(
        responder_client or client, notes, answer_unanswerable=answer_unanswerable, **sampling
    )
    return LLMOracle(matcher, responder, policy)
