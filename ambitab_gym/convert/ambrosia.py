"""Ambrosia's CSV -> AmbiTab-Ambrosia (one record per annotated reading).

Ambrosia (``ambrosia.csv``) has one row per ambiguous question (``is_ambiguous`` true, several
``gold_queries`` separated by blank lines) and one row per unambiguous reading (one gold query;
linked to its ambiguous question by ``db_file`` and the gold query). Every row carries the
SQLite script of its database in ``db_dump``.

For every ambiguous question of the test partition (few-shot rows are excluded) this converter
emits one record per reading: the ambiguous question is the request, the reading's own
question is its resolution (and frozen response), its SQL the reference. The ambiguity term
comes from the annotation type: the quantified noun phrase for ``scope``, the attached modifier
for ``attachment`` and the words the readings replace or specialise for ``vague``; its aliases
name the readings (the scope cues with the noun, the modifier's nouns, the columns, values,
statistics and words that tell the readings apart). Items and drops carry their ambiguity
type, so the build report gives the share of items each reason drops per type. Databases are built from the
dumps by SQLite itself, so foreign keys with ``ON DELETE CASCADE``, transactions, pragmas,
indexes, views, updates and deletes all behave as in SQLite; statements SQLite rejects (other
dialects' ``SET`` or ``LOCK`` lines) are skipped and counted. Local train and test slices are
database-disjoint within each ambiguity type, toward a 20% test share, drawn with the seed.

* :func:`convert` - the converter entry point.
* :func:`build_from_dump` - a SQLite database from a dump, robustly.
* :func:`ambiguity_term` - the term of an ambiguous question and the aliases of its readings.
* :func:`split_gold_queries` - the SQL of a ``gold_queries`` cell.
"""

from __future__ import annotations

import csv
import re
import sqlite3
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from pathlib import Path

from ambitab_gym.aliases import (
    attachment_aliases,
    clean_aliases,
    reading_aliases,
    scope_aliases,
    sql_names,
    statistic_aliases,
)
from ambitab_gym.convert.common import (
    MALFORMED,
    BuildError,
    BuildOptions,
    Conversion,
    Drop,
    Item,
    Span,
    TermChoice,
    Workspace,
    compare_for,
    diff_phrase,
    find_term,
    is_stop_word,
    malformed,
    progress,
    seeded_rng,
    sha256_file,
    slug,
    strip_instructions,
    term_problem,
)
from ambitab_gym.records import parse_record
from ambitab_gym.terms import lemma
from ambitab_gym.terms import words as lemma_words

__all__ = [
    "ATTACHMENT_SUFFIX",
    "FEW_SHOT_SPLITS",
    "TEST_SHARE",
    "ambiguity_term",
    "public_request",
    "assign_splits",
    "build_from_dump",
    "convert",
    "split_gold_queries",
]

TEST_SHARE = 0.2

UPSTREAM = {
    "name": "Ambrosia",
    "url": "https://ambrosia-benchmark.github.io/",
    "citation": "Saparina & Lapata, 2024, AMBROSIA: A Benchmark for Parsing Ambiguous "
    "Questions into Database Queries",
    "licence": "see the Ambrosia release; its authors ask that the data not be re-uploaded "
    "to public repositories",
}

#: What both upstream loaders append to attachment questions (the public request carries it
#: exactly once; it is stripped before term extraction).
ATTACHMENT_SUFFIX = "Show them in one table."

#: Split labels of the few-shot rows (official: ``few_shot_examples``); they are excluded.
FEW_SHOT_SPLITS = frozenset({"few_shot_examples", "few_shot_example", "few_shot", "fewshot"})
#: Split labels whose rows are converted (official ``test``; re-splits ``train``/``validation``).
KEPT_SPLITS = frozenset({"test", "train", "validation", "dev", ""})


def split_gold_queries(cell: str) -> list[str]:
    """The SQL statements of a ``gold_queries`` cell (separated by blank lines).

    >>> split_gold_queries("SELECT 1;\\n\\nSELECT\\n  2\\n")
    ['SELECT 1', 'SELECT\\n  2']
    """
    parts = re.split(r"\n\s*\n", (cell or "").strip())
    return [p.strip().rstrip(";").strip() for p in parts if p.strip()]


def _normal_sql(sql: str) -> str:
    return " ".join(sql.replace(";", " ").split()).lower()


def _split_label(value: str | None) -> str:
    return re.sub(r"[\s-]+", "_", str(value or "").strip().lower())


def public_request(question: str, ambig_type: str) -> str:
    """The request as upstream loaders present it: the attachment suffix exactly once.

    >>> public_request("List hotels and restaurants with a pool.", "attachment")
    'List hotels and restaurants with a pool. Show them in one table.'
    >>> public_request("List hotels with a pool. Show them in one table.", "attachment")
    'List hotels with a pool. Show them in one table.'
    >>> public_request("Which shops are popular? Show them in one table.", "vague")
    'Which shops are popular?'
    """
    bare = strip_instructions(question)
    if (ambig_type or "").strip().lower() == "attachment":
        return f"{bare} {ATTACHMENT_SUFFIX}"
    return bare


#: Quantifiers of a scope ambiguity, the distributive ones first ("List all the classes every
#: gym offers": "every gym").
_QUANTIFIERS = (
    re.compile(r"\b(?:each|every|per)\s+", re.IGNORECASE),
    re.compile(r"\b(?:all(?:\s+(?:the|of\s+the))?|any|both)\s+", re.IGNORECASE),
)
_AUXILIARIES = frozenset(
    ["do", "does", "did", "can", "could", "will", "would", "should", "has", "have", "had"]
)
_COPULAS = frozenset(["is", "are", "was", "were", "be"])
_RELATIVES = frozenset(["that", "which", "who", "whom"])
_WH_WORDS = frozenset(["who", "whom", "where", "when"])
_CONJUNCTIONS = frozenset(["and", "or"])
_PARTICIPLES = r"born|made|known|held|built|written|taken|given|led|sold|kept|found|shown|seen|run"
_MODIFIER_WORD = re.compile(
    r"(?:with|without|that|who|which|having|in|on|at|from|of|for|near|whose|"
    rf"[a-z]{{2,}}(?:ed|ing)|{_PARTICIPLES})"  # participles: "born in 1970", "offering yoga"
)
_PARTICIPLE = re.compile(rf"(?:[a-z]{{2,}}ed|{_PARTICIPLES})", re.IGNORECASE)
#: A word: a number keeps its inner "." and "," and its currency sign ("10.11.2018",
#: "$60,000"), a word its hyphens and apostrophes ("Spanish-speaking", "gym's").
_WORD = re.compile(r"[$£€]?[A-Za-z0-9](?:[A-Za-z0-9'’_-]*[A-Za-z0-9_])?(?:[.,:/][0-9]+)*%?")
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)
#: Where a clause ends: "?", "!", ";", or ".", ",", ":" before a space (not inside "$60,000").
_CLAUSE_END = re.compile(r"[?!;]|[.,:](?=\s|$)")
#: The most words of a noun phrase taken after a quantifier, around "and", or after a wh-word.
_MAX_WORDS = 4


@dataclass(frozen=True)
class _Word:
    text: str
    start: int
    end: int
    key: str  # the lemma
    content: bool  # not a function word


def _words(text: str) -> list[_Word]:
    return [
        _Word(m.group(0), m.start(), m.end(), lemma(m.group(0)), not is_stop_word(m.group(0)))
        for m in _WORD.finditer(text)
    ]


def _joined(text: str, left: _Word, right: _Word) -> bool:
    """Whether only spaces separate two words."""
    return text[left.end : right.start].strip() == ""


def _span(text: str, words: list[_Word]) -> Span:
    """The span of consecutive words, without a possessive ending on the last one."""
    start, end = words[0].start, words[-1].end
    if _POSSESSIVE.search(words[-1].text) and len(words[-1].text) > 2:
        end -= 2
    return Span(start, end, text[start:end])


def _run(
    text: str, words: list[_Word], index: int, step: int, keep: Callable[[_Word], bool]
) -> list[_Word]:
    """The joined words from ``index`` on, rightwards (``step`` 1) or leftwards (-1), while
    ``keep(word)`` holds; at most :data:`_MAX_WORDS`, in text order."""
    out: list[_Word] = []
    i = index
    while 0 <= i < len(words) and len(out) < _MAX_WORDS and keep(words[i]):
        if out and not _joined(text, *((out[-1], words[i]) if step > 0 else (words[i], out[-1]))):
            break
        out.append(words[i])
        i += step
    return out if step > 0 else out[::-1]


def _ends_clause(text: str, position: int) -> bool:
    """Whether only the end of a clause follows a position."""
    rest = text[position:].lstrip()
    return not rest or _CLAUSE_END.match(rest) is not None


def _occurrences(keys: list[str], part: list[str]) -> int:
    """How often ``part`` occurs in ``keys``."""
    n = len(part)
    return sum(1 for i in range(len(keys) - n + 1) if n and keys[i : i + n] == part)


# -- scope ---------------------------------------------------------------------------------------


def _quantified(text: str, words: list[_Word], found: re.Match[str]) -> list[_Word]:
    """The noun phrase right after a quantifier: joined content words, up to a possessive."""
    run: list[_Word] = []
    for word in words:
        if word.start < found.end():
            continue
        if (
            not word.content
            or len(run) == _MAX_WORDS
            or (run and not _joined(text, run[-1], word))
            or (not run and word.start != found.end())
        ):
            break
        run.append(word)
        if _POSSESSIVE.search(word.text):
            break
    return run


def _verb_follows(text: str, words: list[_Word], position: int) -> bool:
    """Whether the quantified phrase at ``position`` is a subject whose verb comes right after
    it: an auxiliary ("does every gym offer"), a relative pronoun ("that each student takes")
    or a noun ("the films each service offers") right before the quantifier."""
    before = [w for w in words if w.end <= position]
    if not before or _CLAUSE_END.search(text[before[-1].end : position]):
        return False
    word = before[-1].text.lower()
    if word in _AUXILIARIES or word in _RELATIVES:
        return True
    opens_clause = len(before) == 1 or bool(
        _CLAUSE_END.search(text[before[-2].end : before[-1].start])
    )
    return before[-1].content and not opens_clause


def _quantified_nouns(
    readings: list[tuple[str, list[_Word]]], patterns: tuple[re.Pattern[str], ...] = _QUANTIFIERS
) -> Iterator[tuple[list[str], bool]]:
    """Each reading's quantified phrases: ``(its lemmas, whether a verb follows)``."""
    for text, words in readings:
        for pattern in patterns:
            for found in pattern.finditer(text):
                noun = _quantified(text, words, found)
                if noun:
                    yield [w.key for w in noun], _verb_follows(text, words, found.start())


def _scope_span(question: str, readings: list[str]) -> tuple[Span, list[_Word]] | None:
    """The quantified noun phrase ("each bank statement") and its noun's words.

    The quantifier and the whole noun phrase after it; its last word is left out when it is
    the verb of the phrase ("does every gym offer"), unless a reading quantifies the whole
    phrase where no verb can follow ("For each bank statement, ..."). Without a quantifier
    in the question: the question's noun that a reading quantifies ("gyms" for "For each gym").
    """
    words = _words(question)
    read = [(r, _words(r)) for r in readings]
    for pattern in _QUANTIFIERS:
        for found in pattern.finditer(question):
            noun = _quantified(question, words, found)
            if not noun:
                continue
            keys = [w.key for w in noun]
            if len(noun) > 1 and _verb_follows(question, words, found.start()):
                as_noun = any(
                    theirs[: len(keys)] == keys and not verb
                    for theirs, verb in _quantified_nouns(read)
                )
                if not as_noun:
                    noun = noun[:-1]
            end = _span(question, noun).end
            return Span(found.start(), end, question[found.start() : end]), noun
    for theirs, _ in _quantified_nouns(read, _QUANTIFIERS[:1]):  # "all" also floats: "gyms all"
        for i, word in enumerate(words):
            if word.content and word.key == theirs[-1]:
                noun = _run(question, words, i, -1, lambda w, t=frozenset(theirs): w.key in t)
                return _span(question, noun), noun
    return None


def _plural(noun: list[_Word], readings: list[str]) -> tuple[str, str]:
    """The singular and plural of a noun phrase (its head inflected; a reading's own plural
    first)."""
    head = _POSSESSIVE.sub("", noun[-1].text)
    prefix = " ".join(w.text for w in noun[:-1])
    singular = head if lemma(head) == head.lower() else lemma(head)
    plural = head if singular != head else None
    for reading in readings:
        for word in _words(reading):
            if plural is None and word.key == singular.lower() and word.text.lower() != word.key:
                plural = _POSSESSIVE.sub("", word.text)
    if plural is None:
        if re.search(r"(?:s|x|z|ch|sh)$", singular):
            plural = singular + "es"
        elif re.search(r"[^aeiou]y$", singular):
            plural = singular[:-1] + "ies"
        else:
            plural = singular + "s"
    return (f"{prefix} {singular}".strip(), f"{prefix} {plural}".strip())


# -- attachment ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Attachment:
    span: Span  # the modifier
    nouns: tuple[str, ...]  # the nouns it may attach to
    before: bool  # a pre-modifier ("Spanish-speaking servers and chefs")


def _attachments(question: str) -> list[_Attachment]:
    """The modifiers of "X and Y" (post-modifiers first): the modifier after Y within four
    words after "and"/"or", up to the end of its clause ("with a pool", "whose salary is
    $60,000"); the words before X's head ("Spanish-speaking servers and chefs")."""
    words = _words(question)
    after: list[_Attachment] = []
    before: list[_Attachment] = []
    for i, word in enumerate(words):
        if word.text.lower() not in _CONJUNCTIONS or i == 0:
            continue
        first = _run(question, words, i - 1, -1, lambda w: w.content)
        if not first:
            continue
        for j in range(i + 2, min(i + 6, len(words))):
            if not _MODIFIER_WORD.fullmatch(words[j].text.lower()):
                continue
            second = [w.text for w in words[i + 1 : j] if w.content]
            found = _CLAUSE_END.search(question, words[j].start)
            end = found.start() if found else len(question)
            clause = [w for w in words[j:] if w.end <= end]
            while len(clause) > 1 and not clause[-1].content:
                clause.pop()
            if second:
                nouns = (_span(question, first).phrase, " ".join(second))
                after.append(_Attachment(_span(question, clause), nouns, False))
            break
        second_run = _run(question, words, i + 1, 1, lambda w: w.content)
        if len(first) > 1 and second_run:
            nouns = (first[-1].text, _span(question, second_run).phrase)
            before.append(_Attachment(_span(question, first[:-1]), nouns, True))
    return after + before


def _attachment(question: str, readings: list[str]) -> _Attachment | None:
    """The attachment whose modifier a reading repeats (attached to both nouns), else the first
    post-modifier, else a pre-modifier that reads as one (hyphenated or a participle)."""
    found = _attachments(question)
    read = [[w.key for w in _words(r) if w.content] for r in readings]
    for candidate in found:
        keys = [w.key for w in _words(candidate.span.phrase) if w.content]
        if any(_occurrences(theirs, keys) >= 2 for theirs in read):
            return candidate
    for candidate in found:
        words = _words(candidate.span.phrase)
        if not candidate.before or any(
            "-" in w.text or _PARTICIPLE.fullmatch(w.text) for w in words
        ):
            return candidate
    return None


# -- vagueness -----------------------------------------------------------------------------------


def _wh_phrase(question: str, words: list[_Word], k: int) -> tuple[int, int] | None:
    """The wh-phrase with its noun: the wh-word up to the first content words after it ("Where
    is the Jazz Nights festival"), without a verb at the end of the clause ("held")."""
    end = k + 1
    while (
        end < len(words)
        and not words[end].content
        and _joined(question, words[end - 1], words[end])
    ):
        end += 1
    if end == len(words) or not _joined(question, words[end - 1], words[end]):
        return None
    noun = _run(question, words, end, 1, lambda w: w.content)
    helper = words[k + 1].text.lower() if k + 1 < end else ""
    last = noun[-1]
    if (
        len(noun) > 1
        and _ends_clause(question, last.end)
        and (helper in _AUXILIARIES or (helper in _COPULAS and _PARTICIPLE.fullmatch(last.text)))
    ):
        noun = noun[:-1]
    return k, end + len(noun)


def _name_length(run: list[_Word], names: set[str], *, from_end: bool) -> int:
    """How many words of a run, from its start (or its end), make one noun phrase: up to the
    last word that the readings' tables and columns (``names``, lemmas) use ("commute time",
    "ticket price" for ``adult_price``; "writers", not "writers live"); at least one; all of
    them without ``names``."""
    if not names:
        return len(run)
    keys = [w.key for w in (run[::-1] if from_end else run)]
    return max([1] + [k + 1 for k, key in enumerate(keys) if key in names])


def _edit_target(
    question: str,
    words: list[_Word],
    i1: int,
    i2: int,
    present: set[str],
    names: set[str],
) -> tuple[int, int] | None:
    """The question's words that one edit of a reading resolves (word indexes ``[a, b)``).

    The words it replaces ("writers" -> "novelists"); a wh-word it replaces ("Where" -> "In
    which city"); the phrase it specialises right after it ("mean" + "commute time", as far as
    the readings' tables and columns, ``names``, use its words); the words the reading
    dropped right after it ("trails are hard" -> "trails climb 500 m"); the words the reading
    dropped just before the phrase before it ("most popular shop" -> "shop with the best
    rating"), else that phrase; else the nearest words the reading does not repeat.
    """

    def absent(word: _Word) -> bool:
        return word.content and word.key not in present

    def kept(word: _Word) -> bool:
        return word.content and word.key in present

    best: list[_Word] = []
    for i in range(i1, i2):
        run = [w for w in _run(question, words, i, 1, absent) if w.end <= words[i2 - 1].end]
        if len(run) > len(best):
            best = run
    if best:
        first = words.index(best[0])
        return first, first + len(best)
    for i in range(i1, i2):
        if words[i].text.lower() in _WH_WORDS:
            return _wh_phrase(question, words, i)
    after = _run(question, words, i2, 1, kept)
    if after:
        return i2, i2 + _name_length(after, names, from_end=False)
    skipped = _run(question, words, i2, 1, lambda w: not w.content)
    dropped = _run(question, words, i2 + len(skipped), 1, absent)
    if dropped and (not skipped or _joined(question, skipped[-1], dropped[0])):
        return i2 + len(skipped), i2 + len(skipped) + len(dropped)
    left = _run(question, words, i1 - 1, -1, kept)
    if left:
        a = i1 - len(left)
        dropped = _run(question, words, a - 1, -1, absent)
        if dropped and _joined(question, dropped[-1], words[a]):
            return a - len(dropped), a
        return i1 - _name_length(left, names, from_end=True), i1
    runs = []
    for i, word in enumerate(words):
        if absent(word) and (i == 0 or not absent(words[i - 1])):
            runs.append((i, i + len(_run(question, words, i, 1, absent))))
    return min(runs, key=lambda r: min(abs(r[0] - i1), abs(r[1] - i1)), default=None)


def _vague_span(
    question: str, readings: list[str], sqls: list[str]
) -> list[tuple[Span, list[str]]]:
    """The question's phrases the readings resolve differently, most readings first, each with
    the readings' own words in its place.

    Each reading is aligned with the question word by word (by lemma); an edit counts when the
    reading's side has a word that tells the readings apart (a content word some readings use
    and others do not; among those, the words of the tables, columns, values or statistics
    that the readings' SQL does not share, when there are any). Paraphrases all readings share
    ("sorted" -> "ordered") count for nothing.
    """
    words = _words(question)
    keys = [w.key for w in words]
    read = [_words(r) for r in readings]
    if len(read) < 2:
        return []
    shared = set.intersection(*({w.key for w in r} for r in read))
    distinct = {w.key for r in read for w in r if w.content} - shared
    sql_words = {w.lemma for name in _sql_aliases(sqls) for w in lemma_words(name)}
    names = {
        w.lemma for sql in sqls for name in sql_names(sql, "sqlite") for w in lemma_words(name)
    }
    marks = (distinct & sql_words) or distinct
    votes: dict[tuple[int, int], int] = {}
    said: dict[tuple[int, int], list[str]] = {}
    for reading, text in zip(read, readings, strict=True):
        theirs = [w.key for w in reading]
        targets: dict[tuple[int, int], list[str]] = {}
        matcher = SequenceMatcher(None, keys, theirs, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal" or not any(k in marks for k in theirs[j1:j2]):
                continue
            target = _edit_target(question, words, i1, i2, set(theirs), names)
            if target is None or target[0] >= target[1]:
                continue
            inserted = reading[j1:j2]
            phrases = targets.setdefault(target, [])
            for i, word in enumerate(inserted):
                if word.content and (i == 0 or not inserted[i - 1].content):
                    run = _run(text, inserted, i, 1, lambda w: w.content)
                    if any(w.key in distinct for w in run):
                        phrases.append(_span(text, run).phrase)
        for target, phrases in targets.items():
            votes[target] = votes.get(target, 0) + 1
            said.setdefault(target, []).extend(phrases)
    ranked = sorted(votes, key=lambda t: (-votes[t], t[0]))
    return [(_span(question, words[a:b]), said[(a, b)]) for a, b in ranked]


# -- aliases -------------------------------------------------------------------------------------


def _sql_aliases(sqls: list[str]) -> list[str]:
    """The names and statistics that tell the readings' SQL apart."""
    return reading_aliases(sqls, "sqlite") + statistic_aliases(sqls, "sqlite") if sqls else []


def _verb_phrases(modifier: str) -> list[str]:
    """A compound participle as the verb phrase people say ("Spanish-speaking" -> "speak
    Spanish").

    >>> _verb_phrases("Spanish-speaking"), _verb_phrases("with a pool")
    (['speak Spanish'], [])
    """
    found = re.findall(r"\b([A-Za-z]+)-([A-Za-z]+ing)\b", modifier)
    return [f"{lemma(verb)} {thing}" for thing, verb in found]


def _usable(alias: str) -> bool:
    """An alias a question can name: words a term may be (not "both", "sum"), not a lone digit."""
    return term_problem(alias) is None and not re.fullmatch(r"\d", alias.strip())


def ambiguity_term(
    question: str, ambig_type: str, readings: list[str], sqls: Sequence[str] = ()
) -> TermChoice | None:
    """The phrase of an ambiguous question that its readings disagree on, the words that name
    its readings (aliases), and how the phrase was found.

    The attachment suffix is stripped from the question and the readings first.

    * ``scope``: the quantifier and the whole noun phrase after it, without a verb that
      follows it ("each bank statement", "every gym" of "does every gym offer";
      ``question_diff``); aliases :func:`~ambitab_gym.aliases.scope_aliases` of its noun.
    * ``attachment``: the modifier of "X and Y" - after Y up to the end of its clause, numbers
      whole ("whose salary is $60,000"), or before X ("Spanish-speaking") - preferring the one
      a reading attaches to both nouns (``question_pattern``); aliases
      :func:`~ambitab_gym.aliases.attachment_aliases` of the modifier and the nouns.
    * ``vague``: the question's phrase that the readings replace or specialise in different
      ways ("writers" -> novelists/playwrights, "commute time" -> mean/median commute time; a
      wh-word with its noun, "Where is the festival"), found by aligning each reading with the
      question; else the longest run no reading repeats (``question_diff``); aliases: the
      names that tell the readings' SQL apart (:func:`~ambitab_gym.aliases.reading_aliases`,
      :func:`~ambitab_gym.aliases.statistic_aliases`) and the readings' own words for it.

    Aliases are finished by :func:`~ambitab_gym.aliases.clean_aliases`. None when no phrase
    qualifies (see :func:`~ambitab_gym.convert.common.term_problem`).

    Args:
        question: the ambiguous question.
        ambig_type: ``scope``, ``attachment`` or ``vague``.
        readings: the questions of its unambiguous readings.
        sqls: the readings' gold SQL, in the same order (for the vague aliases and to weigh
            the readings' words).

    >>> ambiguity_term("Which classes does every gym offer?", "scope",
    ...     ["Which classes are offered by all gyms?", "For each gym, which classes does it offer?"]).term
    'every gym'
    >>> ambiguity_term("What transaction types do customers have on each bank statement?", "scope",
    ...     ["For each bank statement, what types do they have?"]).term
    'each bank statement'
    >>> ambiguity_term("What activities does each club run?", "scope",
    ...     ["What activities do all clubs run?", "For each club, what does it run?"]).aliases[:3]
    ('every club', 'per club', 'all clubs')
    >>> ambiguity_term("List hotels and restaurants with a pool. Show them in one table.", "attachment",
    ...     []).term
    'with a pool'
    >>> ambiguity_term("List engineers and managers whose salary is $60,000.", "attachment", []).term
    'whose salary is $60,000'
    >>> choice = ambiguity_term("List the Spanish-speaking servers and chefs.", "attachment", [])
    >>> choice.term, choice.aliases
    ('Spanish-speaking', ('both servers and chefs', 'only the chefs', 'speak Spanish'))
    >>> ambiguity_term("What's the most popular shop?", "vague",
    ...     ["What is the shop with most customers?", "What is the shop with the best rating?"]).term
    'popular'
    >>> choice = ambiguity_term("Show the commute time, sorted by name.", "vague",
    ...     ["Show the mean commute time, ordered by name.",
    ...      "Show the median commute time, ordered by name."],
    ...     ["SELECT AVG(commute_time) FROM c", "SELECT MEDIAN(commute_time) FROM c"])
    >>> choice.term, choice.aliases
    ('commute time', ('mean', 'average', 'median'))
    >>> ambiguity_term("Who runs the fair?", "vague",
    ...     ["Which teacher runs the fair?", "Which department runs the fair?"]).term
    'Who runs'
    >>> ambiguity_term("Show them in one table.", "attachment", []) is None
    True
    """
    kind = (ambig_type or "").strip().lower()
    bare = strip_instructions(question)
    readings = [strip_instructions(r) for r in readings]
    sqls = list(sqls)
    attempts: list[tuple[Span, list[str], str]] = []
    if kind == "scope":
        found = _scope_span(bare, readings)
        if found is not None:
            span, noun = found
            attempts.append((span, scope_aliases(*_plural(noun, readings)), "question_diff"))
    elif kind == "attachment":
        attachment = _attachment(bare, readings)
        if attachment is not None:
            phrase = attachment.span.phrase
            aliases = attachment_aliases(phrase, attachment.nouns) + _verb_phrases(phrase)
            attempts.append((attachment.span, aliases, "question_pattern"))
    else:
        for span, said in _vague_span(bare, readings, sqls):
            attempts.append((span, _sql_aliases(sqls) + said, "question_diff"))
    if readings:
        diff = diff_phrase(bare, readings)
        if diff is not None:
            attempts.append((diff, _sql_aliases(sqls) if kind == "vague" else [], "question_diff"))
    for span, aliases, origin in attempts:
        if term_problem(span.phrase) is None:
            usable = [a for a in aliases if _usable(a)]
            return TermChoice(span.phrase, tuple(clean_aliases(span.phrase, usable)), origin)
    return None


def _execute_statements(connection: sqlite3.Connection, script: str) -> int:
    """Run a script statement by statement, skipping the ones SQLite rejects."""
    skipped = 0
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if not sqlite3.complete_statement(buffer):
            continue
        statement, buffer = buffer.strip(), ""
        if not statement:
            continue
        try:
            connection.execute(statement)
        except sqlite3.Error:
            skipped += 1
    if buffer.strip():
        skipped += 1
    return skipped


def _scratch(path: Path) -> sqlite3.Connection:
    """A connection for building a database file (no fsync: a failed build is rebuilt)."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA synchronous = OFF")
    return connection


def build_from_dump(script: str, path: Path) -> int:
    """Build a SQLite database from an Ambrosia ``db_dump``.

    The whole script runs as SQLite runs it (cascading deletes included when the dump turns
    foreign keys on); when SQLite rejects a statement, the database is rebuilt statement by
    statement and the rejected statements are skipped.

    Returns:
        The number of skipped statements.

    Raises:
        BuildError: when no table came out of the dump.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "d.sqlite"
        >>> build_from_dump("SET NAMES utf8;\\nCREATE TABLE t(x);\\nINSERT INTO t VALUES (1);", path)
        1
        >>> sqlite3.connect(path).execute("SELECT x FROM t").fetchall()
        [(1,)]
    """
    path.unlink(missing_ok=True)
    connection = _scratch(path)
    skipped = 0
    try:
        try:
            connection.executescript(script)
        except sqlite3.Error:
            connection.close()
            path.unlink(missing_ok=True)
            connection = _scratch(path)
            skipped = _execute_statements(connection, script)
        if connection.in_transaction:
            connection.execute("COMMIT")
        tables = connection.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'")
        if not tables.fetchone()[0]:
            raise BuildError(f"the dump for {path.stem} creates no table")
    finally:
        connection.close()
    return skipped


def _truthy(value: str | None) -> bool:
    return str(value or "").strip().lower() in {"true", "1", "yes", "t"}


def _read_rows(path: Path) -> list[dict[str, str]]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = {"question", "gold_queries", "ambig_type", "db_file", "db_dump", "is_ambiguous"}
        missing -= set(reader.fieldnames or [])
        if missing:
            raise BuildError(f"{path}: not an Ambrosia CSV, columns {sorted(missing)} are missing")
        return list(reader)


def _database_names(db_files: list[str]) -> dict[str, str]:
    names: dict[str, str] = {}
    taken: set[str] = set()
    for db_file in sorted(set(db_files)):
        path = Path(db_file)
        for candidate in (
            slug(path.stem),
            slug(f"{path.parent.name}_{path.stem}"),
            slug("_".join(path.with_suffix("").parts[-3:])),
        ):
            if candidate not in taken:
                break
        else:
            candidate = f"{slug(path.stem)}_{len(taken)}"
        names[db_file] = candidate
        taken.add(candidate)
    return names


def assign_splits(items: list[Item], types: dict[str, str], seed: int) -> dict[str, str]:
    """Database -> split: database-disjoint within each ambiguity type, toward 20% test.

    Databases of a type are visited in a seeded order; each goes to ``test`` when that brings
    the type's test records closer to 20%, else to ``train``.

    Args:
        items: the converted items (their first record names the database).
        types: item key -> ambiguity type.
        seed: the build seed.
    """
    sizes: dict[str, dict[str, int]] = {}
    for item in items:
        database = item.records[0].spec.database
        kind = types[item.key]
        sizes.setdefault(kind, {}).setdefault(database, 0)
        sizes[kind][database] += len(item.records)
    split: dict[str, str] = {}
    for kind in sorted(sizes):
        databases = sorted(sizes[kind])
        order = seeded_rng(seed, "ambrosia-split", kind).permutation(len(databases))
        target = TEST_SHARE * sum(sizes[kind].values())
        test = 0
        for index in order:
            database = databases[int(index)]
            n = sizes[kind][database]
            if database in split:
                continue
            if len(databases) > 1 and abs(test + n - target) < abs(test - target):
                split[database] = "test"
                test += n
            else:
                split[database] = "train"
    return split


def convert(options: BuildOptions, workspace: Workspace) -> Conversion:
    """Convert ``ambrosia.csv`` (or a folder holding it).

    Rows whose ``split`` is a few-shot label (official ``few_shot_examples``) are excluded
    (``few_shot_example``); ``test`` and the re-split labels ``train``/``validation`` are
    converted; any other label is dropped (``unknown_split``). A database whose dump yields
    no table drops its items (``database_build_failed``). With ``--llm-url``/``--model`` the
    term fallback asks the model when the question gives no phrase; otherwise such an item is
    dropped (``no_term_in_request``).

    Args:
        options: ``source`` is the CSV or its folder.
        workspace: where the databases built from the dumps go.
    """
    source = options.source
    if source.is_dir():
        candidates = sorted(source.glob("*.csv"))
        if not candidates:
            raise BuildError(f"no Ambrosia CSV in {source}: give ambrosia.csv with --source")
        source = next((c for c in candidates if c.name == "ambrosia.csv"), candidates[0])
    rows = _read_rows(source)
    conversion = Conversion(
        corpus="ambrosia",
        oracle="intent",
        description=(
            "AmbiTab-Ambrosia built from Ambrosia's ambiguous test partition: one record per "
            "annotated reading (scope, attachment, vagueness) with its own SQL."
        ),
        licence=UPSTREAM["licence"],
        upstream=UPSTREAM,
        inputs={source.name: sha256_file(source)},
    )
    rows = [{**row, "_row": str(number)} for number, row in enumerate(rows, start=1)]
    kept_rows = []
    partition: dict[str, str] = {}  # the converted partition's ambiguous items -> their type
    for row in rows:
        label = _split_label(row.get("split"))
        key = f"{source.name}:row{row['_row']}"
        if label in KEPT_SPLITS and _truthy(row.get("is_ambiguous")):
            partition[key] = (row.get("ambig_type") or "").strip().lower() or "unknown"
        if label in FEW_SHOT_SPLITS:
            if _truthy(row.get("is_ambiguous")):
                conversion.drops.append(
                    Drop(key, "few_shot_example", f"split {row.get('split')!r}")
                )
            continue
        if label not in KEPT_SPLITS:
            if _truthy(row.get("is_ambiguous")):
                conversion.drops.append(Drop(key, "unknown_split", f"split {row.get('split')!r}"))
            continue
        missing = [f for f in ("question", "gold_queries", "db_file", "db_dump") if not row.get(f)]
        if missing:
            conversion.drops.append(malformed(key, KeyError(f"empty field(s) {missing}")))
            continue
        kept_rows.append(row)
    rows = kept_rows
    names = _database_names([r["db_file"] for r in rows])
    dumps: dict[str, str] = {}
    for row in rows:
        dumps.setdefault(row["db_file"], row["db_dump"])
    skipped: dict[str, int] = {}
    failed: dict[str, str] = {}
    for db_file, dump in sorted(dumps.items()):
        name = names[db_file]

        def build(target: Path, *, _dump=dump, _name=name) -> None:
            skipped[_name] = build_from_dump(_dump, target)

        workspace.add_built(name, build)
        try:
            workspace.path(name)
        except (BuildError, sqlite3.Error, OSError) as error:
            failed[db_file] = str(error)[:300]
    readings: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        if not _truthy(row["is_ambiguous"]):
            for sql in split_gold_queries(row["gold_queries"])[:1]:
                readings.setdefault((row["db_file"], _normal_sql(sql)), []).append(row)
    finder = None
    if options.llm_url:
        from ambitab_gym.convert.hooks import LLMClient, LLMTermFinder

        finder = LLMTermFinder(
            LLMClient(
                options.llm_url, options.model or "", seed=options.seed, cache=options.llm_cache
            )
        )
    types: dict[str, str] = {}
    ambiguous = [r for r in rows if _truthy(r["is_ambiguous"])]
    for row in progress(ambiguous, desc="ambrosia", enabled=options.show_progress):
        key = f"{source.name}:row{row['_row']}"
        if row["db_file"] in failed:
            conversion.drops.append(Drop(key, "database_build_failed", failed[row["db_file"]]))
            continue
        try:
            item = _item(row, key, int(row["_row"]), names, readings, finder)
        except MALFORMED as error:
            item = malformed(key, error)
        if isinstance(item, Drop):
            conversion.drops.append(item)
            continue
        types[key] = row["ambig_type"].strip().lower()
        conversion.items.append(item)
    split = assign_splits(conversion.items, types, options.seed)
    for item in conversion.items:
        item.records = [
            r.model_copy(update={"split": split[r.spec.database]}) for r in item.records
        ]
    conversion.notes["skipped_dump_statements"] = skipped
    conversion.notes["failed_dumps"] = len(failed)
    conversion.notes["attachment_suffix"] = ATTACHMENT_SUFFIX
    conversion.drops = [replace(d, group=partition.get(d.item, "")) for d in conversion.drops]
    for item in conversion.items:
        item.group = partition.get(item.key, "")
    return conversion


def _item(row, key, index, names, readings, finder=None) -> Item | Drop:
    database = names[row["db_file"]]
    queries = split_gold_queries(row["gold_queries"])
    question = strip_instructions(row["question"])
    linked = []
    for sql in queries:
        candidates = readings.get((row["db_file"], _normal_sql(sql)), [])
        own = [
            c for c in candidates if strip_instructions(c.get("ambig_question") or "") == question
        ]
        chosen = (own or candidates or [None])[0]
        linked.append((sql, chosen))
    unlinked = [sql for sql, reading in linked if reading is None]
    linked = [(sql, reading) for sql, reading in linked if reading is not None]
    if len(linked) < 2:
        detail = f"{len(queries)} gold queries, {len(unlinked)} without a reading question"
        return Drop(key, "fewer_than_two_readings", detail)
    kind = row["ambig_type"].strip().lower()
    request = public_request(question, kind)
    reading_questions = [strip_instructions(reading["question"]) for _, reading in linked]
    choice = ambiguity_term(question, kind, reading_questions, [sql for sql, _ in linked])
    if choice is None and finder is not None:
        found = finder.find(
            question, f"{kind} ambiguity; its readings: " + " | ".join(reading_questions)
        )
        span = find_term(question, found) if found else None
        if span is not None and term_problem(span.phrase) is None:
            choice = TermChoice(span.phrase, (), "llm")
    if choice is None:
        return Drop(key, "no_term_in_request", f"no {kind} phrase found in {question!r}"[:300])
    avt_id = f"ambrosia-{index:05d}"
    ident = slug(kind) or "ambiguity"
    records = []
    for n, (sql, reading) in enumerate(linked, start=1):
        intent = strip_instructions(reading["question"])
        records.append(
            parse_record(
                {
                    "id": f"{avt_id}-{n}",
                    "avt_id": avt_id,
                    "corpus": "ambrosia",
                    "split": "test",
                    "spec": {"request": request, "database": database},
                    "ambiguities": [
                        {
                            "id": ident,
                            "term": choice.term,
                            "aliases": list(choice.aliases),
                            "kind": "critical",
                            "resolution": intent,
                            "response": f"I mean this: {intent}",
                        }
                    ],
                    "verification": {
                        "engine": "sqlite",
                        "database": database,
                        "reference_sql": sql,
                        "compare": compare_for(sql).model_dump(),
                    },
                    "source": {
                        "kind": "ambrosia",
                        "ambig_type": kind,
                        "db_file": row["db_file"],
                        "upstream_split": row.get("split"),
                        "reading": n,
                        "unlinked_gold_queries": len(unlinked),
                        "term_origin": {ident: choice.origin},
                    },
                },
                where=key,
            )
        )
    return Item(key, records, min_records=2)
