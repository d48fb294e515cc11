"""Where a text names a registered ambiguity: the rule of the deterministic oracles.

A *name* is an ambiguity's term or one of its aliases. Names and texts are compared word by word
by lemma (:func:`ambitab_gym.terms.words`): "location" names "locations", "long haul" names
"long-haul", case and possessives do not matter. A name with non-Latin letters (TACO's Chinese
place names) is found as a whole-word pattern instead, as written.

A question *asks about* an ambiguity when it names it and is not a restatement. A name made
only of request words earns nothing when the question

* reads the request back: a confirmation ("So you want ...?") or no word of its own (neither a
  clarification cue such as "mean", "which", "should" nor a content word the request lacks);
* copies most of the request around the name ("Do you mean: list the top earners by region?");
* repeats most, and more than :data:`MAX_REQUEST_WORDS`, of the request's other content words;

unless the asker quotes it ("What is 'revenue'?"): a short quote of the asker's own, not one the
request holds, asks about what it quotes, including the leading modifier of a term ("What counts
as 'recent'?" for "recent albums"). A name the request does not use (a reading's column or
value) counts, except in a confirmation that repeats most of the request. A question that names
more than :data:`MAX_SCHEMA_NAMES` tables and columns of the schema, or every one of three or
more, is a list, not a question about one ambiguity: it names nothing.

Among the ambiguities a text names, a mention inside quotes ranks first, then the earliest,
then the longest; a tie names nothing (paper Table 6).

* :class:`Mention` - one ambiguity named in a text, with its ranking key.
* :class:`NameIndex` - the names of a record's ambiguities, compiled (:func:`name_index`).
* :func:`asked_about` - the ambiguities a question asks about, best first (the matchers).
* :func:`named_in` - the ambiguities a text names, best first, with no restatement rule (the
  C.3 route scorer, which reads labels, rationales and responses as well as questions).
* :func:`best` - the first ambiguity of a ranking, None for an empty ranking or a tie.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ambitab_gym.aliases import GENERIC_NAMES
from ambitab_gym.terms import INSTRUCTION_VERBS, STOP_WORDS, Word, lemma, words

__all__ = [
    "MAX_REQUEST_WORDS",
    "MAX_SCHEMA_NAMES",
    "Mention",
    "NameIndex",
    "asked_about",
    "best",
    "name_index",
    "named_in",
]

#: A question that repeats more than this many content words of the request (outside the name
#: it mentions) restates the request.
MAX_REQUEST_WORDS = 2

#: A question that names more than this many tables and columns of the schema is a list.
MAX_SCHEMA_NAMES = 4

#: A copied run or repeated words covering this share of the request's other content words
#: restate it.
_COVERAGE = 0.6

#: Words of a question that ask for something (a clarification cue), even when the request has
#: none of them.
_CUES = frozenset(
    [
        "who",
        "whom",
        "whose",
        "where",
        "when",
        "why",
        "mean",
        "meaning",
        "clarify",
        "define",
        "definition",
        "count",
        "exactly",
        "specify",
        "specific",
        "refer",
        "which",
        "what",
        "how",
        "whether",
        "or",
        "either",
        "criterion",
        "threshold",
        "cutoff",
        "kind",
        "sort",
        "include",
        "exclude",
        "consider",
        "qualify",
        "measure",
        "use",
        "instead",
        "should",
        "also",
        "only",
        "both",
        "too",
        "any",
        "each",
        "every",
        "all",
        "per",
        "together",
        "separately",
    ]
)

#: Words that frame a restatement without asking anything ("So you want ...?").
_FRAME = frozenset(
    [
        "want",
        "like",
        "would",
        "so",
        "then",
        "just",
        "confirm",
        "right",
        "correct",
        "ok",
        "okay",
        "yes",
        "sure",
        "look",
        "looking",
        "ask",
        "asking",
        "interested",
        "get",
        "number",
        "list",
        "result",
        "thing",
    ]
)

#: The opening of a question that reads the request back for confirmation.
_CONFIRMATION = re.compile(
    r"\W*(?:so\b|ok(?:ay)?\b|(?:just )?to confirm\b|let me confirm\b|just confirming\b|"
    r"you(?:'d| would)? (?:want|need|like)\b|you(?:'re| are) (?:asking|looking)\b|"
    r"in other words\b|i understand\b)",
    re.IGNORECASE,
)

#: Words before "mean" that make it the verb ("do you mean", "I mean", "to mean").
_MEAN_AS_VERB = frozenset(["you", "i", "we", "they", "do", "to", "would", "will", "does", "did"])

_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|‘([^’]+)’|`([^`]+)`|(?<!\w)'([^']+)'(?!\w)")
_FUNCTION_LEMMAS = frozenset(lemma(w) for w in STOP_WORDS - INSTRUCTION_VERBS) | (
    STOP_WORDS - INSTRUCTION_VERBS
)


def _content(word_lemma: str) -> bool:
    return word_lemma not in _FUNCTION_LEMMAS


@dataclass(frozen=True)
class Mention:
    """An ambiguity named in a text.

    Attributes:
        ambiguity_id: the ambiguity named.
        key: ``(0 inside quotes else 1, start, -length)`` in characters: smaller ranks first.
    """

    ambiguity_id: str
    key: tuple[int, int, int]


@dataclass(frozen=True)
class _Name:
    ambiguity_id: str
    lemmas: tuple[str, ...]
    pattern: re.Pattern[str] | None
    in_request: bool = False  # made only of words the request uses
    term: tuple[str, ...] = ()  # the lemmas of its ambiguity's term


@dataclass(frozen=True, eq=False)  # one object per record (record_index): hashed by identity
class NameIndex:
    """The names of one record's ambiguities, with the request and schema they are read against.

    Build it with :func:`name_index`.
    """

    names: tuple[_Name, ...]
    request: tuple[str, ...]
    schema: tuple[tuple[str, ...], ...]
    request_quotes: frozenset[tuple[str, ...]] = frozenset()  # what the request itself quotes


def _compile(ambiguity_id: str, name: str) -> _Name | None:
    if not name.strip():
        return None
    if any(c.isalpha() and ord(c) > 0x24F for c in name):  # beyond Latin: as written
        pattern = re.compile(
            r"(?<!\w)" + r"\s+".join(re.escape(w) for w in name.split()) + r"(?!\w)",
            re.IGNORECASE,
        )
        return _Name(ambiguity_id, (), pattern)
    lemmas = tuple(w.lemma for w in words(name))
    if not lemmas or not any(_content(x) for x in lemmas):
        return None  # a name of function words alone would name every question
    return _Name(ambiguity_id, lemmas, None)


def _identifier_lemmas(identifier: str) -> tuple[str, ...]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", identifier)
    return tuple(w.lemma for w in words(spaced))


def name_index(
    names: tuple[tuple[str, tuple[str, ...]], ...],
    request: str = "",
    schema_identifiers: tuple[str, ...] = (),
) -> NameIndex:
    """Compile the names of a record's ambiguities.

    Args:
        names: ``(ambiguity id, (term, alias, ...))`` in annotation order.
        request: the public request (for the restatement rule; empty: no such rule).
        schema_identifiers: the tables and columns of the public schema (for the list rule).

    Example:
        >>> index = name_index((("top", ("top earners",)),), "List the top earners.")
        >>> index.names[0].lemmas, index.request
        (('top', 'earner'), ('list', 'the', 'top', 'earner'))
    """
    request_lemmas = tuple(w.lemma for w in words(request))
    compiled = []
    for ambiguity_id, group in names:
        term = tuple(w.lemma for w in words(group[0])) if group else ()
        for name in group:
            n = _compile(ambiguity_id, name)
            if n is None:
                continue
            if n.pattern is not None:
                n = _Name(ambiguity_id, (), n.pattern, bool(n.pattern.search(request)), term)
            else:
                in_request = set(n.lemmas) <= set(request_lemmas)
                n = _Name(ambiguity_id, n.lemmas, None, in_request, term)
            compiled.append(n)
    schema = tuple(
        dict.fromkeys(
            lemmas for ident in schema_identifiers if (lemmas := _identifier_lemmas(ident))
        )
    )
    quoted = frozenset(tuple(w.lemma for w in words(m.group(0))) for m in _QUOTED.finditer(request))
    return NameIndex(tuple(compiled), request_lemmas, schema, quoted)


def _occurrences(lemmas: Sequence[str], part: tuple[str, ...]) -> Iterable[int]:
    n = len(part)
    first = part[0]
    for i in range(len(lemmas) - n + 1):
        if lemmas[i] == first and tuple(lemmas[i : i + n]) == part:
            yield i


def _occurs(lemmas: Sequence[str], part: tuple[str, ...]) -> bool:
    return next(iter(_occurrences(lemmas, part)), None) is not None


def _spans(text: str, tokens: tuple[Word, ...], name: _Name) -> Iterable[tuple[int, int, int, int]]:
    """``(first word, end word, start char, end char)`` of each occurrence of a name."""
    if name.pattern is not None:
        for found in name.pattern.finditer(text):
            start, end = found.span()
            inside = [i for i, w in enumerate(tokens) if w.start < end and start < w.end]
            if inside:
                yield inside[0], inside[-1] + 1, start, end
        return
    lemmas = [w.lemma for w in tokens]
    for i in _occurrences(lemmas, name.lemmas):
        j = i + len(name.lemmas)
        yield i, j, tokens[i].start, tokens[j - 1].end


def _copied_run(question: Sequence[str], a: int, b: int, request: Sequence[str]) -> set[str]:
    """The content words of the longest run around ``question[a:b]`` copied from the request."""
    best: set[str] = set()
    part = tuple(question[a:b])
    for j in _occurrences(request, part):
        i, k = a, j
        while i > 0 and k > 0 and question[i - 1] == request[k - 1]:
            i, k = i - 1, k - 1
        e, f = b, j + (b - a)
        while e < len(question) and f < len(request) and question[e] == request[f]:
            e, f = e + 1, f + 1
        run = {x for x in question[i:e] if _content(x)}
        if len(run) > len(best):
            best = run
    return best


def _rank(found: dict[str, tuple[int, int, int]]) -> tuple[Mention, ...]:
    return tuple(Mention(i, key) for i, key in sorted(found.items(), key=lambda item: item[1]))


def _echoes(lemmas: Sequence[str], index: NameIndex, confirms: bool) -> bool:
    """Whether a question only reads the request back: a confirmation ("So you want ...?") or
    no word of its own (a clarification cue or a content word the request does not use)."""
    if confirms:
        return True
    request = set(index.request)
    return not any(
        x not in request and (x in _CUES or (_content(x) and x not in _FRAME)) for x in lemmas
    )


def _restates(
    lemmas: Sequence[str], a: int, b: int, index: NameIndex, request_words: set[str]
) -> bool:
    """Whether the mention ``lemmas[a:b]`` of request words sits in a copy of most of the
    request, or in a question that repeats most (and more than :data:`MAX_REQUEST_WORDS`) of
    the request's other content words."""
    others = request_words - set(lemmas[a:b])
    run = _copied_run(lemmas, a, b, index.request) - set(lemmas[a:b])
    if run and len(run) >= _COVERAGE * len(others):
        return True
    return _repeats(lemmas, a, b, request_words, at_least=MAX_REQUEST_WORDS + 1)


def _repeats(
    lemmas: Sequence[str],
    a: int,
    b: int,
    request_words: set[str],
    at_least: int = 1,
    reworded: Sequence[str] = (),
) -> bool:
    """Whether the question repeats most of the request's content words outside ``[a, b)``
    (and at least ``at_least`` of them); the words ``reworded`` (the term an alias at
    ``[a, b)`` stands for: "crowd" for "average attendance") count as repeated."""
    others = request_words - set(lemmas[a:b])
    repeated = {x for x in [*lemmas[:a], *lemmas[b:], *reworded] if x in others}
    return bool(others) and len(repeated) >= max(at_least, _COVERAGE * len(others))


def _short_quote(quoted: Sequence[str], request_words: set[str]) -> bool:
    """Whether a quote picks out a phrase rather than quoting the request back."""
    return len({x for x in quoted if x in request_words}) < max(2, _COVERAGE * len(request_words))


def _quotes(text: str, tokens: tuple[Word, ...]) -> list[tuple[int, int, int, int]]:
    """``(first word, end word, start char, end char)`` of each quoted part of a text."""
    out = []
    for found in _QUOTED.finditer(text):
        start, end = found.span()
        inside = [i for i, w in enumerate(tokens) if start <= w.start and w.end <= end]
        if inside:
            out.append((inside[0], inside[-1] + 1, start, end))
    return out


@lru_cache(maxsize=65536)  # a pure function of the text and the record's index
def _scan(text: str, index: NameIndex, asked: bool) -> tuple[Mention, ...]:
    tokens = words(text)
    if not tokens or not index.names:
        return ()
    lemmas = [w.lemma for w in tokens]
    if asked and index.schema:
        present = set(lemmas)
        named = sum(1 for i in index.schema if i[0] in present and _occurs(lemmas, i))
        if named > MAX_SCHEMA_NAMES or (named >= 3 and named == len(index.schema)):
            return ()  # a list of the schema, not a question about one ambiguity
    quotes = _quotes(text, tokens)
    confirms = asked and bool(_CONFIRMATION.match(text))
    echo = asked and _echoes(lemmas, index, confirms)
    request_words = {x for x in index.request if _content(x)}
    found: dict[str, tuple[int, int, int]] = {}

    def keep(ambiguity_id: str, key: tuple[int, int, int]) -> None:
        if ambiguity_id not in found or key < found[ambiguity_id]:
            found[ambiguity_id] = key

    for name in index.names:
        for a, b, start, end in _spans(text, tokens, name):
            if name.lemmas[:1] == ("mean",) and a and lemmas[a - 1] in _MEAN_AS_VERB:
                continue  # "what do you mean by ...": the verb, not the statistic
            quote = next((q for q in quotes if q[0] <= a and b <= q[1]), None)
            if asked and index.request and name.in_request:
                # the asker's own short quote picks out what it asks about ("What is
                # 'revenue'?"); a quote the request holds is the request's
                short = (
                    quote
                    and not confirms
                    and tuple(lemmas[quote[0] : quote[1]]) not in index.request_quotes
                    and _short_quote(lemmas[quote[0] : quote[1]], request_words)
                )
                if not short and (echo or _restates(lemmas, a, b, index, request_words)):
                    continue
            elif confirms and _repeats(lemmas, a, b, request_words, reworded=name.term):
                continue  # "You want the flights that leave from Denver?": read back, reworded
            key = (0 if quote else 1, start, start - end)
            keep(name.ambiguity_id, key)
    for qa, qb, start, end in [] if echo else quotes:  # a quoted modifier: "'recent'?"
        part = _trim(lemmas[qa:qb])
        if all(x in GENERIC_NAMES or x in INSTRUCTION_VERBS or not _content(x) for x in part):
            continue  # 'table', 'given': a quoted generic word picks out nothing
        for name in index.names:  # the leading words of a name that starts with a content word
            if (
                len(part) < len(name.lemmas)
                and _content(name.lemmas[0])
                and name.lemmas[: len(part)] == part
            ):
                keep(name.ambiguity_id, (0, start, start - end))
    return _rank(found)


def _trim(part: Sequence[str]) -> tuple[str, ...]:
    part = list(part)
    while part and not _content(part[0]):
        part.pop(0)
    while part and not _content(part[-1]):
        part.pop()
    return tuple(part)


def asked_about(question: str, index: NameIndex) -> tuple[Mention, ...]:
    """The ambiguities a question asks about, best first (see the module docs).

    Example:
        >>> index = name_index((("top", ("top earners", "best paid")),),
        ...                    "List the top earners by region.")
        >>> [m.ambiguity_id for m in asked_about("Who counts as a top earner?", index)]
        ['top']
        >>> asked_about("List the top earners by region?", index)
        ()
        >>> [m.ambiguity_id for m in asked_about("The best paid by region?", index)]
        ['top']
    """
    return _scan(question, index, True)


def named_in(text: str, index: NameIndex) -> tuple[Mention, ...]:
    """The ambiguities a text names, best first: the ranking alone, no restatement rule.

    >>> index = name_index((("top", ("top earners",)), ("reg", ("region",))))
    >>> [m.ambiguity_id for m in named_in("Which region? And the 'top earners'?", index)]
    ['top', 'reg']
    """
    return _scan(text, index, False)


def best(ranking: Sequence[Mention], resolved: frozenset[str] = frozenset()) -> str | None:
    """The first ambiguity of a ranking; ids in ``resolved`` rank after every other id; None
    when the ranking is empty or its first two keys tie.

    >>> ranking = (Mention("a", (1, 0, -3)), Mention("b", (1, 5, -3)))
    >>> best(ranking), best(ranking, frozenset({"a"})), best(ranking[:1] * 2) is None
    ('a', 'b', True)
    """
    if not ranking:
        return None
    keyed = sorted(((m.ambiguity_id in resolved, m.key), m.ambiguity_id) for m in ranking)
    if len(keyed) > 1 and keyed[0][0] == keyed[1][0]:
        return None  # a tie: refuse rather than guess
    return keyed[0][1]
