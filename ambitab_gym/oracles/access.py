"""What the LLM oracle may read: access policies and the notes its prompts show.

* :func:`sql_segments` - reference SQL cut into clause segments with sqlglot (with the other SQL
  text helpers in :mod:`ambitab_gym.oracles.sqltext`, re-exported here).
* :class:`AccessPolicy` - ``scoped`` / ``unfiltered``, with the "responder reads the reference
  SQL" switch (docs/design.md section 5; paper Table 6).
* :data:`ORACLE_POLICIES` - the policy vocabulary: name -> factory of its :class:`AccessPolicy`
  (``auto``, offered by the command line, picks one of them by the corpus's oracle kind:
  :func:`policy_for_corpus`).
* :class:`NotesBuilder` - fills :class:`~ambitab_gym.oracles.llm_prompts.OracleNotes` from a
  record as a policy allows (segments and contexts cached per record).
* :func:`resolve_term` - the registered ambiguity a ``labeled(...)`` route names, leniently: the
  point whose intent the responder reads. Credits do not follow it but paper C.3
  (:func:`ambitab_gym.oracles.routes.score_route`: an exact term first, else the names found in
  the label, question, rationale and response).

This module is on the privileged side of the trust boundary: it reads hidden record fields.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ambitab_gym.oracles.base import OracleContext
from ambitab_gym.oracles.llm_prompts import NoteEntry, OracleNotes
from ambitab_gym.oracles.sqltext import (
    answer_reveals_sql,
    match_segment,
    normalize_sql,
    redact_sql,
    sql_segments,
)
from ambitab_gym.records import Ambiguity, TaskRecord
from ambitab_gym.trajectory import render_spec

if TYPE_CHECKING:
    from ambitab_gym.corpora import Corpus

__all__ = [
    "ORACLE_POLICIES",
    "ORACLE_POLICY_CHOICES",
    "AccessPolicy",
    "NotesBuilder",
    "policy_for_corpus",
    "answer_reveals_sql",
    "match_segment",
    "normalize_sql",
    "redact_sql",
    "resolve_term",
    "sql_segments",
]

_ENGINE_DIALECT = {"sqlite": "sqlite", "postgres": "postgres", "duckdb": "duckdb"}


@dataclass(frozen=True)
class AccessPolicy:
    """What each oracle stage may read, beyond the request and the registered terms.

    Attributes:
        name: ``scoped`` or ``unfiltered`` (or a custom label).
        matcher_meanings: the matcher sees the resolutions of the registered points.
        matcher_context: the matcher sees schema, column meanings and external knowledge.
        matcher_evidence: the matcher sees withheld evidence hints.
        matcher_sql: the matcher sees reference SQL segments (and may route ``unlabeled``).
        matcher_full_sql: the matcher sees the whole reference SQL.
        matcher_dialogue: the matcher sees the earlier dialogue (default: the current question).
        responder_context: the responder sees schema, column meanings and external knowledge.
        responder_evidence: the responder sees withheld evidence hints.
        responder_sql: the responder reads the reference SQL and its segments (the switch the
            leakage study toggles).

    Example:
        >>> AccessPolicy.scoped().responder_sql, AccessPolicy.unfiltered().responder_sql
        (False, True)
        >>> AccessPolicy.named("unfiltered", responder_reads_sql=False).responder_sql
        False
    """

    name: str
    matcher_meanings: bool = False
    matcher_context: bool = False
    matcher_evidence: bool = False
    matcher_sql: bool = False
    matcher_full_sql: bool = False
    matcher_dialogue: bool = False
    responder_context: bool = False
    responder_evidence: bool = False
    responder_sql: bool = False

    @classmethod
    def scoped(
        cls,
        *,
        responder_reads_sql: bool = False,
        matcher_reads_sql: bool | None = None,
        matcher_reads_dialogue: bool = False,
    ) -> AccessPolicy:
        """Scoped: annotations only; with SQL grounding (``responder_reads_sql``) the responder
        also reads the schema and the reference SQL, and the matcher its segments."""
        grounded = bool(responder_reads_sql)
        return cls(
            "scoped",
            matcher_sql=grounded if matcher_reads_sql is None else bool(matcher_reads_sql),
            matcher_dialogue=matcher_reads_dialogue,
            responder_context=grounded,
            responder_sql=grounded,
        )

    @classmethod
    def unfiltered(
        cls,
        *,
        responder_reads_sql: bool = True,
        matcher_reads_sql: bool | None = None,
        matcher_reads_dialogue: bool = False,
    ) -> AccessPolicy:
        """Unfiltered: task context, withheld evidence and the reference SQL are available."""
        matcher_sql = True if matcher_reads_sql is None else bool(matcher_reads_sql)
        return cls(
            "unfiltered",
            matcher_meanings=True,
            matcher_context=True,
            matcher_evidence=True,
            matcher_sql=matcher_sql,
            matcher_full_sql=matcher_sql,
            matcher_dialogue=matcher_reads_dialogue,
            responder_context=True,
            responder_evidence=True,
            responder_sql=bool(responder_reads_sql),
        )

    @classmethod
    def named(cls, name: str, *, responder_reads_sql: bool | None = None, **options: Any):
        """``scoped`` or ``unfiltered`` by name; ``responder_reads_sql=None`` keeps its default."""
        if name not in ORACLE_POLICIES:
            raise ValueError(f"unknown oracle access policy {name!r}; use 'scoped' or 'unfiltered'")
        factory = cls.scoped if name == "scoped" else cls.unfiltered
        if responder_reads_sql is not None:
            options["responder_reads_sql"] = responder_reads_sql
        return factory(**options)


#: The access-policy vocabulary: name -> the factory of its :class:`AccessPolicy` (keyword
#: options ``responder_reads_sql``, ``matcher_reads_sql``, ``matcher_reads_dialogue``).
ORACLE_POLICIES: Mapping[str, Callable[..., AccessPolicy]] = MappingProxyType(
    {"scoped": AccessPolicy.scoped, "unfiltered": AccessPolicy.unfiltered}
)

#: What ``--oracle-policy`` accepts: ``auto`` (by the corpus's oracle kind) and the policies.
ORACLE_POLICY_CHOICES: tuple[str, ...] = ("auto", *ORACLE_POLICIES)


def policy_for_corpus(oracle_kind: str | None) -> str:
    """The policy ``auto`` stands for: ``unfiltered`` on knowledge corpora (Bird, EW-Bird),
    ``scoped`` on intent corpora, as paper Table 6 pairs them.

    >>> policy_for_corpus("knowledge"), policy_for_corpus("intent"), policy_for_corpus(None)
    ('unfiltered', 'scoped', 'scoped')
    """
    return "unfiltered" if oracle_kind == "knowledge" else "scoped"


class NotesBuilder:
    """Builds the prompts' notes from a record, as an access policy allows.

    Args:
        policy: the access policy.
        corpus: the corpus (for the schema the agent sees and the SQL dialect); optional.
        dialect: the SQL dialect for cutting segments (default: the corpus's, else the record's
            engine).

    Example:
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "List top customers", "database": "shop"},
        ...     "ambiguities": [{"id": "top", "term": "top customers", "resolution": "best 5"}],
        ...     "verification": {"database": "shop",
        ...                      "reference_sql": "SELECT name FROM c LIMIT 5"}})
        >>> scoped = NotesBuilder(AccessPolicy.scoped())
        >>> notes = scoped.matcher_notes(OracleContext(record))
        >>> notes.entries[0].meaning, notes.segments, notes.reference_sql
        (None, (), None)
        >>> NotesBuilder(AccessPolicy.unfiltered()).matcher_notes(OracleContext(record)).segments
        ('SELECT name', 'FROM c', 'LIMIT 5')
    """

    def __init__(
        self, policy: AccessPolicy, corpus: Corpus | None = None, dialect: str | None = None
    ) -> None:
        self.policy = policy
        self.corpus = corpus
        self.dialect = dialect or (corpus.manifest.dialect if corpus is not None else None)
        self._segments: dict[str, tuple[str, ...]] = {}
        self._contexts: dict[str, str] = {}
        self._notes: dict[tuple[str, bool, bool], tuple[TaskRecord, tuple[NoteEntry, ...]]] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # pickling (Ray workers): the caches, not the lock
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_notes")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._notes = {}  # keyed by record identity: rebuilt in the new process
        self._lock = threading.Lock()

    def segments(self, record: TaskRecord) -> tuple[str, ...]:
        """The reference SQL's clause segments (cached per record)."""
        with self._lock:
            found = self._segments.get(record.id)
        if found is None:
            dialect = self.dialect or _ENGINE_DIALECT.get(record.verification.engine, "sqlite")
            found = sql_segments(record.verification.reference_sql, dialect)
            with self._lock:
                self._segments[record.id] = found
        return found

    def context(self, record: TaskRecord) -> str:
        """Schema, column meanings and external knowledge as the agent sees them."""
        with self._lock:
            found = self._contexts.get(record.id)
        if found is None:
            spec = self.corpus.public_spec(record) if self.corpus is not None else record.spec
            found = render_spec(spec).split("\n\n", 1)[-1]
            with self._lock:
                self._contexts[record.id] = found
        return found

    def _entries(self, record: TaskRecord, *, meanings: bool, evidence: bool):
        # the same record gives the same entries on every turn: built once per record object
        # (the record itself is kept with them and compared by identity, so a cached tuple is
        # never handed to another record that shares its id)
        key = (record.id, meanings, evidence)
        found = self._notes.get(key)
        if found is not None and found[0] is record:
            return found[1]
        entries = tuple(
            NoteEntry(
                a.term,
                a.aliases,
                meaning=_meaning(a) if meanings else None,
                evidence=a.evidence if evidence else None,
            )
            for a in record.ambiguities
        )
        with self._lock:
            if len(self._notes) > 4096:
                self._notes.clear()
            self._notes[key] = (record, entries)
        return entries

    def matcher_notes(self, context: OracleContext) -> OracleNotes:
        """What the matcher reads."""
        p, record = self.policy, context.record
        return OracleNotes(
            request=record.spec.request,
            entries=self._entries(record, meanings=p.matcher_meanings, evidence=p.matcher_evidence),
            context=self.context(record) if p.matcher_context else None,
            segments=self.segments(record) if p.matcher_sql else (),
            reference_sql=record.verification.reference_sql if p.matcher_full_sql else None,
            dialogue=_dialogue(context) if p.matcher_dialogue else None,
        )

    def responder_notes(self, context: OracleContext) -> OracleNotes:
        """What the responder reads (every retained annotation, with meanings)."""
        p, record = self.policy, context.record
        return OracleNotes(
            request=record.spec.request,
            entries=self._entries(record, meanings=True, evidence=p.responder_evidence),
            context=self.context(record) if p.responder_context else None,
            segments=self.segments(record) if p.responder_sql else (),
            reference_sql=record.verification.reference_sql if p.responder_sql else None,
        )


def _meaning(ambiguity: Ambiguity) -> str:
    if ambiguity.response and ambiguity.response.strip() != ambiguity.resolution.strip():
        return f"{ambiguity.resolution} (you would put it as: {ambiguity.response})"
    return ambiguity.resolution


def _dialogue(context: OracleContext) -> str | None:
    lines = [f"Q{i}: {t.question}\nA{i}: {t.answer}" for i, t in enumerate(context.turns, 1)]
    return "\n".join(lines) or None


_NORMALIZE = re.compile(r"[^\w]+")


def _norm(text: str) -> str:
    return _NORMALIZE.sub(" ", text.casefold()).strip()


def resolve_term(label: str, record: TaskRecord, *, strict: bool = False) -> Ambiguity | None:
    """The registered ambiguity a ``labeled(...)`` argument names: exact term, alias or id first
    (ignoring case and punctuation), then the only one whose name contains or is contained in it.

    >>> from ambitab_gym.records import parse_record
    >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
    ...     "spec": {"request": "Top earners by region", "database": "hr"},
    ...     "ambiguities": [{"id": "top", "term": "top earners", "resolution": "best paid 3"},
    ...                     {"id": "reg", "term": "region", "resolution": "sales region"}],
    ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
    >>> resolve_term("Top Earners", record).id, resolve_term("the region term", record).id
    ('top', 'reg')
    >>> resolve_term("salary", record) is None, resolve_term("the region term", record, strict=True)
    (True, None)
    """
    wanted = _norm(label)
    if not wanted:
        return None
    if strict:  # a registered term or alias: exact, then normalized (case, spaces, punctuation)
        for ambiguity in record.ambiguities:
            if label.strip() in ambiguity.names:
                return ambiguity
        for ambiguity in record.ambiguities:
            if wanted in {_norm(n) for n in ambiguity.names}:
                return ambiguity
        return None
    for ambiguity in record.ambiguities:
        if wanted in {_norm(n) for n in (*ambiguity.names, ambiguity.id)}:
            return ambiguity
    hits = []
    for ambiguity in record.ambiguities:
        names = [_norm(n) for n in ambiguity.names if _norm(n)]
        if any(re.search(rf"\b{re.escape(n)}\b", wanted) or wanted in n for n in names):
            hits.append(ambiguity)
    return hits[0] if len(hits) == 1 else None
