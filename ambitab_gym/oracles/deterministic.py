"""The deterministic oracles of the AmbiTab corpora (paper Table 6) and the reference responder.

* :class:`IntentMatcher` - BIRD-Interact, Ambrosia, AmbiQT, TACO: credits the ambiguity whose term
  or alias the question names, preferring quoted targets, then the earliest mention (a longer
  name first at the same position); single-answer mode; unmatched questions and ties credit
  nothing.
* :class:`KnowledgeMatcher` - Bird, EW-Bird: the same ranking over terms, aliases and concepts
  derived from evidence hints, but unresolved ambiguities are preferred over ones already credited.
* :class:`ReferenceResponder` - resp*: the stored answers of the credited ambiguities (the frozen
  response, else the resolution), a refusal when nothing was credited; optionally restates.
* :func:`deterministic_oracle` - the corpus's reference oracle by name (``intent``/``knowledge``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ambitab_gym.oracles.base import REFUSAL, Oracle, OracleContext
from ambitab_gym.records import Ambiguity, TaskRecord

__all__ = [
    "IntentMatcher",
    "KnowledgeMatcher",
    "ReferenceResponder",
    "canonical_question",
    "deterministic_oracle",
    "evidence_concept",
]

_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|‘([^’]+)’|`([^`]+)`|(?<!\w)'([^']+)'(?!\w)")
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


def _name_pattern(name: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in name.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


@dataclass(frozen=True)
class _Names:
    """Compiled names of the ambiguities of one record."""

    entries: tuple[tuple[str, re.Pattern[str]], ...]  # (ambiguity id, pattern)


class _RankingMatcher:
    """Shared ranking: quoted first, then earliest, then longest; ties credit nothing."""

    prefer_unresolved = False
    use_evidence = False

    def __init__(self) -> None:
        self._compiled: dict[str, _Names] = {}

    def _names(self, record: TaskRecord) -> _Names:
        names = self._compiled.get(record.id)
        if names is None:
            entries = []
            for ambiguity in record.ambiguities:
                for name in self._names_of(ambiguity):
                    entries.append((ambiguity.id, _name_pattern(name)))
            names = _Names(tuple(entries))
            self._compiled[record.id] = names
        return names

    def _names_of(self, ambiguity: Ambiguity) -> list[str]:
        names = [n for n in ambiguity.names if n.strip()]
        if self.use_evidence:
            concept = evidence_concept(ambiguity.evidence)
            if concept and concept.lower() not in {n.lower() for n in names}:
                names.append(concept)
        return names

    def match(self, question: str, context: OracleContext) -> frozenset[str]:
        question = question if isinstance(question, str) else str(question)
        names = self._names(context.record)
        if not names.entries:
            return frozenset()
        quoted = [m.span() for m in _QUOTED.finditer(question)]
        resolved = context.credited if self.prefer_unresolved else frozenset()
        best: dict[str, tuple[int, int, int, int]] = {}
        for ambiguity_id, pattern in names.entries:
            for found in pattern.finditer(question):
                start, end = found.span()
                in_quotes = any(qs <= start and end <= qe for qs, qe in quoted)
                key = (
                    1 if ambiguity_id in resolved else 0,
                    0 if in_quotes else 1,
                    start,
                    start - end,
                )
                if ambiguity_id not in best or key < best[ambiguity_id]:
                    best[ambiguity_id] = key
        if not best:
            return frozenset()
        ranked = sorted(best.items(), key=lambda item: item[1])
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            return frozenset()  # a tie: refuse rather than guess
        return frozenset({ranked[0][0]})


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

    def __init__(self, *, prefer_response: bool = True, restate_prefix: str = "") -> None:
        self.prefer_response = prefer_response
        self.restate_prefix = restate_prefix

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
            if self.restate_prefix and ambiguity.id in earlier:
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
            ReferenceResponder(prefer_response=False, restate_prefix="As I said before: "),
        )
    raise ValueError(f"unknown deterministic oracle {kind!r}; use 'intent' or 'knowledge'")
