"""The deterministic oracles of the AmbiTab corpora (paper Table 6) and the reference responder.

* :class:`IntentMatcher` - BIRD-Interact, Ambrosia, AmbiQT, TACO: credits the ambiguity the
  question asks about (its term or an alias, compared by lemma; a restatement of the request asks
  about nothing; :mod:`ambitab_gym.oracles.mentions`), preferring quoted targets, then the
  earliest mention (a longer name first at the same position); single-answer mode; unmatched
  questions and ties credit nothing.
* :class:`KnowledgeMatcher` - Bird, EW-Bird: the same ranking over terms, aliases and concepts
  derived from evidence hints, but unresolved ambiguities are preferred over ones already credited.
* :class:`ReferenceResponder` - resp*: the stored answers of the credited ambiguities (the frozen
  response, else the resolution), a refusal when nothing was credited. The knowledge oracle's
  answer to a repeat (an ambiguity credited earlier in the episode) restates the ambiguity's
  evidence hint when it has one (paper Table 6: "repeats can restate evidence").
* :func:`record_index` - the names searched per ambiguity, shared with the C.3 route scorer
  (:mod:`ambitab_gym.oracles.routes`).
* :func:`deterministic_oracle` - the corpus's reference oracle by name (``intent``/``knowledge``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.oracles.base import REFUSAL, Oracle, OracleContext
from ambitab_gym.oracles.mentions import NameIndex, asked_about, best, name_index
from ambitab_gym.records import PublicSpec, TaskRecord
from ambitab_gym.textutil import schema_identifiers

__all__ = [
    "IntentMatcher",
    "KnowledgeMatcher",
    "ReferenceResponder",
    "canonical_question",
    "deterministic_oracle",
    "reference_oracle",
    "evidence_concept",
    "record_index",
]

_EVIDENCE_SPLIT = re.compile(
    r"\s+(?:refers? to|means?|is defined as|stands for|indicates?)\s+|\s*(?:=|:)\s*",
    re.IGNORECASE,
)


def canonical_question(term: str) -> str:
    """The full asker's canonical question about a term (paper C.2).

    >>> canonical_question("top earners")
    'Could you clarify what exactly you mean by top earners?'
    """
    return f"Could you clarify what exactly you mean by {term}?"


def evidence_concept(evidence: str | None) -> str | None:
    """The concept an evidence hint defines: the text before "refers to", "means", "=", ...

    >>> evidence_concept("full name refers to first_name, last_name")
    'full name'
    >>> evidence_concept("no verb here") is None
    True
    """
    if not evidence:
        return None
    parts = _EVIDENCE_SPLIT.split(evidence, maxsplit=1)
    if len(parts) < 2:
        return None
    concept = parts[0].strip().strip("'\"").strip()
    return concept or None


def record_index(
    record: TaskRecord, spec: PublicSpec | None = None, *, use_evidence: bool = False
) -> NameIndex:
    """The compiled names of a record's ambiguities (term, aliases and, with ``use_evidence``,
    the concept of the evidence hint: "X refers to ..." adds "X"), read against the public
    request and schema (``spec``; default the record's own).

    >>> from ambitab_gym.records import parse_record
    >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
    ...     "spec": {"request": "Big orders", "database": "shop"},
    ...     "ambiguities": [{"id": "big", "term": "big orders", "aliases": ["large"],
    ...         "kind": "knowledge", "resolution": "x", "evidence": "high-value order = total > 9"}],
    ...     "verification": {"database": "shop", "reference_sql": "SELECT 1"}})
    >>> [n.lemmas for n in record_index(record, use_evidence=True).names]
    [('big', 'order'), ('large',), ('high', 'value', 'order')]
    """
    spec = spec or record.spec
    return _index(record.name_entries, spec.request, spec.schema_text, use_evidence)


@lru_cache(maxsize=4096)  # one compiled index per record and spec, shared by every question
def _index(
    entries: tuple[tuple[str, tuple[str, ...], str | None], ...],
    request: str,
    schema_text: str | None,
    use_evidence: bool,
) -> NameIndex:
    names = []
    for ambiguity_id, group, evidence in entries:
        kept = [n for n in group if n.strip()]
        concept = evidence_concept(evidence) if use_evidence else None
        if concept and concept.lower() not in {n.lower() for n in kept}:
            kept.append(concept)
        names.append((ambiguity_id, tuple(kept)))
    return name_index(tuple(names), request, tuple(schema_identifiers(schema_text)))


class _RankingMatcher:
    """Credits the ambiguity a question asks about (:mod:`ambitab_gym.oracles.mentions`):
    quoted first, then earliest, then longest; ties and restatements credit nothing."""

    prefer_unresolved = False
    use_evidence = False

    def match(self, question: str, context: OracleContext) -> frozenset[str]:
        question = question if isinstance(question, str) else str(question)
        index = record_index(context.record, context.spec, use_evidence=self.use_evidence)
        resolved = context.credited if self.prefer_unresolved and context.turns else frozenset()
        found = best(asked_about(question, index), resolved)
        return frozenset() if found is None else frozenset({found})


class IntentMatcher(_RankingMatcher):
    """Deterministic intent matcher (BIRD-Interact, Ambrosia, AmbiQT, TACO).

    Example:
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "Top earners by region", "database": "hr"},
        ...     "ambiguities": [
        ...         {"id": "top", "term": "top earners", "resolution": "three best paid"},
        ...         {"id": "region", "term": "region", "resolution": "sales region"}],
        ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
        >>> matcher = IntentMatcher()
        >>> sorted(matcher.match("What is a region? And top earners?", OracleContext(record)))
        ['region']
        >>> sorted(matcher.match("What is a region? And 'top earners'?", OracleContext(record)))
        ['top']
        >>> sorted(matcher.match("Please elaborate.", OracleContext(record)))
        []
    """


class KnowledgeMatcher(_RankingMatcher):
    """Deterministic knowledge matcher (Bird, EW-Bird): prefers ambiguities not yet credited.

    Evidence hints add their concept ("X refers to ..." adds "X") as a further name.

    Example:
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "List big orders", "database": "shop"},
        ...     "ambiguities": [{"id": "big", "term": "big orders", "kind": "knowledge",
        ...         "resolution": "high-value order refers to total > 500",
        ...         "evidence": "high-value order refers to total > 500"}],
        ...     "verification": {"database": "shop", "reference_sql": "SELECT 1"}})
        >>> sorted(KnowledgeMatcher().match("What is a high-value order?", OracleContext(record)))
        ['big']
    """

    prefer_unresolved = True
    use_evidence = True


class ReferenceResponder:
    """The reference responder resp*: stored answers of the credited ambiguities.

    Args:
        prefer_response: answer with the frozen ``response`` when a record has one (intent
            corpora); otherwise with the ``resolution`` (knowledge corpora).
        restate_prefix: prefix for an answer to an ambiguity credited earlier in the episode.
        restate_evidence: answer a repeat with the ambiguity's evidence hint (when it has one)
            instead of the stored answer (the knowledge oracle).

    Example:
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "Top earners", "database": "hr"},
        ...     "ambiguities": [{"id": "top", "term": "top earners",
        ...                      "resolution": "three best paid", "response": "The top 3."}],
        ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
        >>> ReferenceResponder().respond("?", frozenset({"top"}), OracleContext(record))
        'The top 3.'
        >>> ReferenceResponder(prefer_response=False).respond("?", frozenset(), OracleContext(record))
        "Sorry, I can't help with that."
    """

    def __init__(
        self,
        *,
        prefer_response: bool = True,
        restate_prefix: str = "",
        restate_evidence: bool = False,
    ) -> None:
        self.prefer_response = prefer_response
        self.restate_prefix = restate_prefix
        self.restate_evidence = restate_evidence

    def respond(self, question: str, credits: frozenset[str], context: OracleContext) -> str:
        if not credits:
            return REFUSAL
        earlier = context.credited
        parts = []
        for ambiguity in context.record.ambiguities:  # annotation order, deterministic
            if ambiguity.id not in credits:
                continue
            text = ambiguity.resolution
            if self.prefer_response and ambiguity.response:
                text = ambiguity.response
            if ambiguity.id in earlier:
                if self.restate_evidence and ambiguity.evidence:
                    text = ambiguity.evidence
                text = f"{self.restate_prefix}{text}"
            parts.append(text)
        return " ".join(parts) if parts else REFUSAL


def deterministic_oracle(kind: str) -> Oracle:
    """The deterministic (reference) oracle of a corpus, by its manifest's ``oracle`` field.

    Args:
        kind: ``"intent"`` or ``"knowledge"``.

    Example:
        >>> deterministic_oracle("knowledge").name
        'KnowledgeMatcher+ReferenceResponder'
    """
    if kind == "intent":
        return Oracle(IntentMatcher(), ReferenceResponder(prefer_response=True))
    if kind == "knowledge":
        return Oracle(
            KnowledgeMatcher(),
            ReferenceResponder(
                prefer_response=False, restate_prefix="As I said before: ", restate_evidence=True
            ),
        )
    raise ConfigurationError(f"unknown deterministic oracle {kind!r}; use 'intent' or 'knowledge'")


def reference_oracle(corpus: Any) -> Oracle:
    """The reference oracle O* of a corpus: its deterministic oracle (by ``manifest.oracle``).

    Args:
        corpus: a :class:`~ambitab_gym.corpora.Corpus` (anything with ``manifest.oracle``).

    Example:
        >>> from ambitab_gym.corpora import load_corpus
        >>> reference_oracle(load_corpus("taco")).name
        'IntentMatcher+ReferenceResponder'
    """
    return deterministic_oracle(corpus.manifest.oracle)
