"""What an ambiguity term may be, and where it occurs: the rules converters and the validator share.

A term is the request's own words (docs/format.md): found in the request by the deterministic
oracle's rule (:func:`find_term`: words in order, any whitespace between, not inside a word,
any case), and neither only function words, only SQL keywords, an SQL fragment, nor an
instruction (:func:`term_problem`).

* :data:`STOP_WORDS`, :data:`SQL_KEYWORDS`, :data:`INSTRUCTIONS` - the word lists.
* :class:`Span` - a located phrase.
* :func:`term_pattern`, :func:`find_term`, :func:`term_occurs` - where a term occurs.
* :func:`is_stop_word`, :func:`term_problem` - whether a phrase can be a term.
* :class:`Word`, :func:`words`, :func:`lemma` - a text's words compared by lemma (singular and
  plural, verb forms, case, possessives, hyphenation), the reference oracle's unit of matching.
* :data:`INSTRUCTION_VERBS` - request verbs ("list", "show") that are function words for a term
  but content when a question copies the request.

A leaf module: :mod:`ambitab_gym.convert` (which writes terms) and :mod:`ambitab_gym.validate`
(which checks them) both import it, so neither needs the other for these rules. (Moved from
``ambitab_gym.convert.common``, which re-exports every name.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import simplemma

__all__ = [
    "INSTRUCTIONS",
    "SQL_KEYWORDS",
    "STOP_WORDS",
    "TOKEN",
    "INSTRUCTION_VERBS",
    "Span",
    "Word",
    "find_term",
    "is_stop_word",
    "lemma",
    "term_occurs",
    "term_pattern",
    "term_problem",
    "words",
]

#: Function words: determiners, pronouns, prepositions, conjunctions, auxiliaries, question words,
#: politeness and instruction verbs. A term made only of these is never a term.
STOP_WORDS: frozenset[str] = frozenset(
    re.findall(
        r"\S+",
        """
    a an the this that these those some such
    i me my we us our you your he him his she her it its they them their there here
    of in on at to for with without by from into onto about as than per via within along
    among across after before over under between through during against upon off out up down
    and or but nor so yet also too either neither both
    is are was were be been being am do does did doing done have has had having
    can could will would shall should may might must
    what which who whom whose when where why how what's who's where's how's it's that's
    there's let's i'd i'm don't doesn't didn't isn't aren't
    not no yes please kindly thanks
    show list give display find tell return provide get fetch retrieve output print
    each every all any
    many much more most less least very just only even then
    if whether
    """,
    )
)

#: Request verbs and politeness words among :data:`STOP_WORDS`: never a term on their own, but a
#: question that copies them with a term copies the request.
INSTRUCTION_VERBS: frozenset[str] = frozenset(
    [
        "show",
        "list",
        "give",
        "display",
        "find",
        "tell",
        "return",
        "provide",
        "get",
        "fetch",
        "retrieve",
        "output",
        "print",
        "please",
        "kindly",
    ]
)

#: SQL keywords and functions that are not also plain English nouns or adjectives (``order``,
#: ``length`` or ``total`` may well be the request's words). A term made only of these and
#: function words (``count``, ``select distinct``), or an SQL clause opener such as
#: ``order by``, is SQL, not the request's words.
SQL_KEYWORDS: frozenset[str] = frozenset(
    re.findall(
        r"\S+",
        """
    select join having limit offset union intersect except distinct asc desc null iif ifnull
    coalesce substr substring strftime nullif glob cast avg sum count min max
    """,
    )
)
_SQL_CLAUSES = re.compile(
    r"^(?:order|group|partition)\s+by$|^(?:inner|outer|left|right|full|cross|natural)\s+join$"
)

#: Instructions the upstream loaders add to a request; never a term.
INSTRUCTIONS: tuple[str, ...] = ("show them in one table",)

#: A word of a text (letters, digits, inner apostrophes, dots, dashes, slashes).
TOKEN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_']*[A-Za-z0-9_]|)(?:[-./][A-Za-z0-9_']+)*")
_SQL_SIGNS = re.compile(
    r"[=<>*]|\b[A-Za-z_][A-Za-z0-9_]*\(|\b[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]+\b"
)


@dataclass(frozen=True)
class Span:
    """A span of a text: ``text[start:end]`` is ``phrase``.

    Example:
        >>> Span(6, 11, "world").phrase
        'world'
    """

    start: int
    end: int
    phrase: str


def term_pattern(term: str) -> re.Pattern[str]:
    """The pattern a term is found with: the deterministic oracle's rule.

    Words in order, separated by any whitespace, not starting or ending inside a word,
    case-insensitive.

    >>> bool(term_pattern("each  streaming service").search("What does Each streaming service cost?"))
    True
    >>> bool(term_pattern("stream").search("each streaming service"))
    False
    """
    words = [re.escape(w) for w in term.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


def find_term(text: str, term: str) -> Span | None:
    """Where a term occurs in a text (the first occurrence), by :func:`term_pattern`.

    >>> find_term("Which shops are popular?", "Popular")
    Span(start=16, end=23, phrase='popular')
    >>> find_term("Which shops are popular?", "pop") is None
    True
    """
    if not term or not term.split():
        return None
    found = term_pattern(term).search(text)
    return Span(found.start(), found.end(), found.group(0)) if found else None


def term_occurs(text: str, term: str) -> bool:
    """Whether a term occurs in a text by the deterministic oracle's rule.

    >>> term_occurs("List hotels and restaurants with a pool.", "with a pool")
    True
    >>> term_occurs("List hotels and restaurants with a pool.", "pools")
    False
    """
    return find_term(text, term) is not None


def _words_of(text: str) -> list[str]:
    return [w.lower() for w in TOKEN.findall(text)]


def is_stop_word(word: str) -> bool:
    """Whether a word is a function word (:data:`STOP_WORDS`), case-insensitive.

    >>> is_stop_word("What's"), is_stop_word("gym")
    (True, False)
    """
    return word.lower().replace("\u2019", "'") in STOP_WORDS


def term_problem(term: str) -> str | None:
    """Why a phrase cannot be an ambiguity term, or None when it can.

    Returns ``"empty"``, ``"stop_word"`` (only function words), ``"sql_keyword"`` (only SQL
    keywords), ``"sql_fragment"`` (an operator, a function call, a qualified column or ``*``)
    or ``"instruction"`` (an instruction such as "Show them in one table").

    >>> [term_problem(t) for t in ["each streaming service", "What's", "Please", "along"]]
    [None, 'stop_word', 'stop_word', 'stop_word']
    >>> [term_problem(t) for t in ["count", "order by", "label = '+'", "COUNT(id)", "T1.label"]]
    ['sql_keyword', 'sql_keyword', 'sql_fragment', 'sql_fragment', 'sql_fragment']
    >>> term_problem("in one table"), term_problem("Show them in one table.")
    ('instruction', 'instruction')
    >>> term_problem("Signal-to-Noise Quality Indicator (SNQI)") is None
    True
    >>> term_problem("length"), term_problem("order"), term_problem("the max")
    (None, None, 'sql_keyword')
    """
    words = _words_of(term)
    if not words:
        return "empty"
    folded = " ".join(words)
    for instruction in INSTRUCTIONS:
        if (folded in instruction and len(words) > 1) or instruction in folded:
            return "instruction"
    if all(is_stop_word(w) for w in words):
        return "stop_word"
    if _SQL_CLAUSES.match(folded) or (
        any(w in SQL_KEYWORDS for w in words)
        and all(w in SQL_KEYWORDS or is_stop_word(w) for w in words)
    ):
        return "sql_keyword"
    if _SQL_SIGNS.search(term):
        return "sql_fragment"
    return None


_WORD = re.compile(r"\d+(?:[.,:/]\d+)+|[^\W_]+(?:['\u2019][^\W_]+)*")
_POSSESSIVE = re.compile(r"['\u2019]s$")


@dataclass(frozen=True)
class Word:
    """A word of a text: ``text[start:end]`` with its lemma.

    Example:
        >>> Word("customer", 4, 13)
        Word(lemma='customer', start=4, end=13)
    """

    lemma: str
    start: int
    end: int


@lru_cache(maxsize=65536)
def lemma(word: str) -> str:
    """A word's English lemma, lower-cased, without a possessive ("'s").

    simplemma's English dictionary; a word it does not know (a column name, a number, a
    non-English word) is its own lemma.

    >>> [lemma(w) for w in ["Locations", "customer's", "offered", "Ran", "biggest", "北京"]]
    ['location', 'customer', 'offer', 'run', 'big', '北京']
    """
    folded = _POSSESSIVE.sub("", word.lower().replace("\u2019", "'"))
    if not folded.isascii():
        return folded
    return simplemma.lemmatize(folded, lang="en").lower()


@lru_cache(maxsize=65536)
def words(text: str) -> tuple[Word, ...]:
    """The words of a text with their lemmas: letters and digits, split at hyphens, underscores,
    dots, slashes and spaces alike (so "long-haul", "long haul" and "long_haul" are the same two
    words); a number keeps its inner separators ("60,000", "10.11.2018").

    >>> [w.lemma for w in words("The long-haul routes' arrival_date values?")]
    ['the', 'long', 'haul', 'route', 'arrival', 'date', 'value']
    >>> [w.lemma for w in words("A salary of $60,000 on 10.11.2018")][-3:]
    ['60,000', 'on', '10.11.2018']
    >>> words("Top earners")[1]
    Word(lemma='earner', start=4, end=11)
    """
    return tuple(Word(lemma(m.group(0)), m.start(), m.end()) for m in _WORD.finditer(text))
