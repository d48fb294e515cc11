"""The deterministic oracles of the AmbiTab corpora (paper Table 6) and the reference responder.

* :class:`IntentMatcher` - BIRD-Interact, Ambrosia, AmbiQT, TACO: credits the ambiguity whose term
  or alias the question names, preferring quoted targets, then the earliest mention (a longer
  name first at the same position); single-answer mode; unmatched questions and ties credit
  nothing.
* :class:`KnowledgeMatcher` - Bird, EW-Bird: the same ranking over terms, aliases and concepts
  derived from evidence hints, but unresolved ambiguities are preferred over ones already credited.
* :class:`ReferenceResponder` - resp*: the stored answers of the credited ambiguities (the frozen
  response, else the resolution), a refusal when nothing was credited. The knowledge oracle's
  answer to a repeat (an ambiguity credited earlier in the episode) restates the ambiguity's
  evidence hint when it has one (paper Table 6: "repeats can restate evidence").
* :func:`best_mention`, :func:`name_pattern` - the ranking of term mentions, shared with the
  C.3 route scorer (:mod:`ambitab_gym.oracles.routes`).
* :func:`deterministic_oracle` - the corpus's reference oracle by name (``intent``/``knowledge``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.oracles.base import REFUSAL, Oracle, OracleContext
from ambitab_gym.records import Ambiguity, TaskRecord

__all__ = [
    "IntentMatcher",
    "KnowledgeMatcher",
    "ReferenceResponder",
    "best_mention",
    "canonical_question",
    "deterministic_oracle",
    "reference_oracle",
    "evidence_concept",
    "name_pattern",
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


def name_pattern(name: str) -> re.Pattern[str]:
    """A name as a case-insensitive pattern: whole words, any run of whitespace between them.

    >>> bool(name_pattern("top earners").search("the TOP   earners?"))
    True
    >>> bool(name_pattern("top").search("topic"))
    False
    """
    words = [re.escape(w) for w in name.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


@dataclass(frozen=True)
class _Names:
    """Compiled names of the ambiguities of one record."""

    entries: tuple[tuple[str, re.Pattern[str]], ...]  # (ambiguity id, pattern)


#: Entries a matcher's memos (compiled names per record, mentions per question) hold before they
#: are emptied: a bound on memory for long campaigns and generated corpora.
_MEMO_SIZE = 4096

#: A question's mentions: ``(ambiguity id, (outside quotes, start, -length))``, best first,
#: and the best id when no ambiguity is resolved (None: no mention or a tie).
_Mentions = tuple[tuple[tuple[str, tuple[int, int, int]], ...], "str | None"]


class _RankingMatcher:
    """Shared ranking: quoted first, then earliest, then longest; ties credit nothing.

    The mentions of a question in a record depend on the text and the record only, so they are
    found once per (record, question) and ranked against the episode's resolved ids each time.
    """

    prefer_unresolved = False
    use_evidence = False

    def __init__(self) -> None:
        self._compiled: dict[str, _Names] = {}
        self._mentions: dict[tuple[str, str], _Mentions] = {}

    def _names(self, record: TaskRecord) -> _Names:
        names = self._compiled.get(record.id)
        if names is None:
            entries = []
            for ambiguity in record.ambiguities:
                for name in self._names_of(ambiguity):
                    entries.append((ambiguity.id, name_pattern(name)))
            names = _Names(tuple(entries))
            if len(self._compiled) >= _MEMO_SIZE:
                self._compiled.clear()
            self._compiled[record.id] = names
        return names

    def _mentions_of(self, question: str, record: TaskRecord) -> _Mentions:
        key = (record.id, question)
        found = self._mentions.get(key)
        if found is None:
            ranked = _mention_keys(question, self._names(record).entries)
            found = (ranked, _best(ranked))
            if len(self._mentions) >= _MEMO_SIZE:
                self._mentions.clear()
            self._mentions[key] = found
        return found

    def _names_of(self, ambiguity: Ambiguity) -> list[str]:
        names = [n for n in ambiguity.names if n.strip()]
        if self.use_evidence:
            concept = evidence_concept(ambiguity.evidence)
            if concept and concept.lower() not in {n.lower() for n in names}:
                names.append(concept)
        return names

    def match(self, question: str, context: OracleContext) -> frozenset[str]:
        question = question if isinstance(question, str) else str(question)
        ranked, best = self._mentions_of(question, context.record)
        if self.prefer_unresolved and ranked and context.turns:
            resolved = context.credited
            if any(ambiguity_id in resolved for ambiguity_id, _ in ranked):
                best = _best(_demote(ranked, resolved))
        return frozenset() if best is None else frozenset({best})


def _mention_keys(
    text: str, entries: tuple[tuple[str, re.Pattern[str]], ...]
) -> tuple[tuple[str, tuple[int, int, int]], ...]:
    """Each mentioned id with its best key (outside quotes, start, -length), best first."""
    if not entries:
        return ()
    quoted = [m.span() for m in _QUOTED.finditer(text)]
    best: dict[str, tuple[int, int, int]] = {}
    for ambiguity_id, pattern in entries:
        for found in pattern.finditer(text):
            start, end = found.span()
            in_quotes = any(qs <= start and end <= qe for qs, qe in quoted)
            key = (0 if in_quotes else 1, start, start - end)
            if ambiguity_id not in best or key < best[ambiguity_id]:
                best[ambiguity_id] = key
    return tuple(sorted(best.items(), key=lambda item: item[1]))


def _demote(
    ranked: tuple[tuple[str, tuple], ...], resolved: frozenset[str]
) -> tuple[tuple[str, tuple], ...]:
    """The ranking with ids in ``resolved`` after every other id (keys gain a leading flag)."""
    keyed = [(i, (1 if i in resolved else 0, *key)) for i, key in ranked]
    return tuple(sorted(keyed, key=lambda item: item[1]))


def _best(ranked: tuple[tuple[str, tuple], ...]) -> str | None:
    """The first id of a ranking, or None when it is empty or its first two keys tie."""
    if not ranked:
        return None
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None  # a tie: refuse rather than guess
    return ranked[0][0]


def best_mention(
    text: str,
    entries: tuple[tuple[str, re.Pattern[str]], ...],
    resolved: frozenset[str] = frozenset(),
) -> str | None:
    """The ambiguity id whose name ``text`` mentions best, or None (no mention, or a tie).

    The ranking of the deterministic oracles (paper Table 6): ambiguities not in ``resolved``
    first, then a mention inside quotes, then the earliest mention, then the longest name.

    Args:
        text: the text searched (a question, a response, a routing rationale).
        entries: ``(ambiguity id, compiled name pattern)`` pairs (:func:`name_pattern`).
        resolved: ids ranked after every other id.

    >>> entries = (("top", name_pattern("top earners")), ("reg", name_pattern("region")))
    >>> best_mention("Which region? And the 'top earners'?", entries)
    'top'
    >>> best_mention("Please elaborate.", entries) is None
    True
    """
    ranked = _mention_keys(text, entries)
    if resolved and any(ambiguity_id in resolved for ambiguity_id, _ in ranked):
        ranked = _demote(ranked, resolved)
    return _best(ranked)


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
