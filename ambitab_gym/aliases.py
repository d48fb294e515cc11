"""Aliases: the words a person would use to ask about an ambiguity, beside its term.

The deterministic oracles credit a question that names an ambiguity's term or one of its aliases
(:mod:`ambitab_gym.oracles.mentions`). The term is the request's own words; aliases name the
*readings*: what tells them apart (columns and tables in natural form, the values or statistics
that differ), the cues of a scope ambiguity, the parts of an attachment. Converters, the
generator and the bundled samples build them with these functions; the validator checks them
with :func:`alias_problem`.

* :func:`natural_name` - an identifier as words ("years_old" -> "years old").
* :func:`sql_names` - the tables, columns and literal values an SQL text uses, in natural form.
* :func:`reading_aliases` - the names that tell readings apart, from each reading's SQL.
* :func:`statistic_aliases` - the words of the aggregates that differ between readings.
* :func:`scope_aliases`, :func:`attachment_aliases` - the cue phrases of scope and attachment
  ambiguities.
* :func:`term_parts` - the head and modifiers of a short compound term.
* :func:`clean_aliases` - drop duplicates, the term itself, generic words and words another
  ambiguity of the same task uses.
* :func:`alias_problem` - why a phrase cannot be an alias of an ambiguity, or None.
* :data:`GENERIC_NAMES` - schema words that say nothing on their own ("id", "name", "value").
* :data:`AGGREGATE_WORDS` - the words of an aggregate, by its SQL function name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import sqlglot
from sqlglot import exp

from ambitab_gym.terms import STOP_WORDS, lemma, term_problem, words

__all__ = [
    "AGGREGATE_WORDS",
    "GENERIC_NAMES",
    "alias_problem",
    "attachment_aliases",
    "clean_aliases",
    "natural_name",
    "reading_aliases",
    "scope_aliases",
    "sql_names",
    "statistic_aliases",
    "term_parts",
]

#: Schema words that name nothing in particular: an alias made only of these (and function words)
#: would be credited for questions about anything.
GENERIC_NAMES: frozenset[str] = frozenset(
    re.findall(
        r"\S+",
        """
    id ids name names type types value values code codes number numbers key keys data info
    information text flag flags status description details detail record records row rows
    column columns table tables field fields item items entry entries t1 t2 t3 t4
    """,
    )
)

_AGGREGATES: dict[type, tuple[str, ...]] = {
    exp.Avg: ("mean", "average"),
    exp.Median: ("median",),
    exp.Sum: ("sum", "total"),
    exp.Count: ("count", "number of"),
    exp.Max: ("maximum", "highest", "largest"),
    exp.Min: ("minimum", "lowest", "smallest"),
}
#: The words of each aggregate by its SQL function name ("AVG": "mean", "average").
AGGREGATE_WORDS: dict[str, tuple[str, ...]] = {
    name: found for kind, found in _AGGREGATES.items() for name in kind.sql_names()
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def natural_name(identifier: str) -> str:
    """An identifier as lower-case words: underscores, dots and camel case become spaces.

    >>> natural_name("years_old"), natural_name("AirportName"), natural_name("crashes_2019")
    ('years old', 'airport name', 'crashes 2019')
    """
    spaced = _CAMEL.sub(" ", identifier.strip().strip('"`[]'))
    return " ".join(re.split(r"[\s_.]+", spaced)).strip().lower()


def _literal(node: exp.Literal) -> str | None:
    text = str(node.this).strip()
    if node.is_string:
        return text if text and len(text.split()) <= 4 else None
    try:
        number = float(text)
    except ValueError:
        return None
    return None if number in (0.0, 1.0) else text


def sql_names(sql: str, dialect: str | None = None) -> list[str]:
    """The tables, columns and literal values of an SQL text, in order, natural form, unique.

    Numbers 0 and 1 and strings of more than four words are left out; an SQL text that does not
    parse gives its identifiers and quoted strings.

    >>> sql_names("SELECT s.Name FROM singer AS s WHERE s.years_old > 30 AND s.genre = 'Pop'")
    ['name', 'singer', 'years old', '30', 'genre', 'Pop']
    >>> sql_names("a broken ( sql 'x'")
    ['a', 'broken', 'sql', 'x']
    """
    names: list[str] = []
    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        trees = []
    if not trees:
        names = [natural_name(m) for m in _IDENTIFIER.findall(re.sub(r"'[^']*'", " ", sql))]
        names += [m for m in re.findall(r"'([^']*)'", sql) if m.strip()]
        return list(dict.fromkeys(n for n in names if n))
    for tree in trees:
        for node in tree.walk():
            if isinstance(node, (exp.Column, exp.Table)) and node.name:
                names.append(natural_name(node.name))
            elif isinstance(node, exp.Literal):
                value = _literal(node)
                if value:
                    names.append(value)
    return list(dict.fromkeys(n for n in names if n))


def statistic_aliases(readings: Sequence[str], dialect: str | None = None) -> list[str]:
    """The words of the aggregate functions that some readings use and others do not.

    >>> statistic_aliases(["SELECT AVG(x) FROM t", "SELECT MEDIAN(x) FROM t"])
    ['mean', 'average', 'median']
    >>> statistic_aliases(["SELECT AVG(x) FROM t", "SELECT AVG(y) FROM t"])
    []
    """
    used: list[set[type]] = []
    for sql in readings:
        try:
            trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
        except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
            trees = []
        used.append({type(n) for t in trees for n in t.walk() if type(n) in _AGGREGATES})
    if len(used) < 2:
        return []
    differing = set().union(*used) - set.intersection(*used)
    return [w for kind, found in _AGGREGATES.items() if kind in differing for w in found]


def reading_aliases(readings: Sequence[str], dialect: str | None = None) -> list[str]:
    """The names (:func:`sql_names`) that tell the readings apart: with two readings or more,
    the names some readings use and others do not; with one reading, every name it uses.

    Args:
        readings: one SQL text per reading (whole queries or the ambiguity's snippets).
        dialect: their sqlglot dialect.

    >>> reading_aliases(["SELECT age FROM singer", "SELECT years_old FROM singer"])
    ['age', 'years old']
    >>> reading_aliases(["duration > 1800"])
    ['duration', '1800']
    """
    per_reading = [sql_names(sql, dialect) for sql in readings if sql and sql.strip()]
    if not per_reading:
        return []
    if len(per_reading) == 1:
        return per_reading[0]
    shared = set.intersection(*(set(names) for names in per_reading))
    return list(dict.fromkeys(n for names in per_reading for n in names if n not in shared))


def scope_aliases(noun: str, plural: str | None = None) -> list[str]:
    """The phrases a person uses to ask whether a scope is collective or distributive, for the
    noun and, of a compound noun, for its head ("each service" of "streaming service").

    >>> scope_aliases("gym", "gyms")  # doctest: +NORMALIZE_WHITESPACE
    ['each gym', 'every gym', 'per gym', 'all gyms', 'all the gyms', 'any gym',
     'every single gym', 'individual gyms', 'each of the gyms', 'every one of the gyms',
     'all of the gyms', 'in common', 'common to all', 'common to every', 'shared by all',
     'separately', 'individually', 'for each one']
    >>> scope_aliases("streaming service", "streaming services")[8:12]
    ['each of the streaming services', 'every one of the streaming services', 'all of the streaming services', 'each service']
    """
    plural = plural or noun
    forms = [(noun, plural)]
    if len(noun.split()) > 1 and len(plural.split()) > 1:
        forms.append((noun.split()[-1], plural.split()[-1]))
    out = []
    for one, many in forms:
        out += [
            f"each {one}",
            f"every {one}",
            f"per {one}",
            f"all {many}",
            f"all the {many}",
            f"any {one}",
            f"every single {one}",
            f"individual {many}",
            f"each of the {many}",
            f"every one of the {many}",
            f"all of the {many}",
        ]
    return [
        *out,
        "in common",
        "common to all",
        "common to every",
        "shared by all",
        "separately",
        "individually",
        "for each one",
    ]


def term_parts(term: str) -> list[str]:
    """The words of a short compound term that a question names it by alone: its head noun,
    then its modifiers ("metric", "quality" of "quality metric"). Not of a phrase with function
    words or of more than three words, and never a generic word ("type" of "signal type").
    Give the result to :func:`clean_aliases` with the other ambiguities' names, which drops a
    part two terms share.

    >>> term_parts("quality metric"), term_parts("signal type"), term_parts("count of events")
    (['metric', 'quality'], ['signal'], [])
    """
    parts = re.findall(r"[^\W_]+(?:[-'][^\W_]+)*", term)
    if not 2 <= len(parts) <= 3 or any(w.lower() in STOP_WORDS for w in parts):
        return []
    return [w for w in reversed(parts) if lemma(w) not in GENERIC_NAMES and not w.isdigit()]


def attachment_aliases(modifier: str, nouns: Iterable[str]) -> list[str]:
    """The phrases of an attachment ambiguity: the modifier (whole and its content words) and
    the two attachments ("both X and Y", "only the Y"). A bare noun is not one: a question about
    the hotels alone asks nothing about what "with a pool" attaches to.

    >>> attachment_aliases("with a pool", ["hotels", "restaurants"])
    ['with a pool', 'pool', 'both hotels and restaurants', 'only the restaurants']
    >>> attachment_aliases("working in the cardiology ward", ["doctors", "nurses"])[:4]
    ['working in the cardiology ward', 'working cardiology ward', 'cardiology', 'ward']
    """
    nouns = [n for n in nouns if n.strip()]
    content = [w.strip(".,;:!?") for w in modifier.split() if w.lower() not in STOP_WORDS]
    # each content word of the modifier but verb forms ("working"): "cardiology", "$60,000"
    single = [w for w in content if not re.search(r"(?:ing|ed)$", w.lower())]
    out = [modifier, " ".join(content), *(single if len(content) > 1 else [])]
    if nouns:
        out += [f"both {' and '.join(nouns)}", f"only the {nouns[-1]}"]
    return list(dict.fromkeys(x for x in out if x.strip()))


def _lemmas(text: str) -> tuple[str, ...]:
    return tuple(w.lemma for w in words(text))


def alias_problem(alias: str, *, others: Iterable[str] = ()) -> str | None:
    """Why a phrase cannot be an alias of an ambiguity, or None when it can.

    ``"empty"``; ``"stop_word"`` (only function words, which every question contains);
    ``"generic"`` (only :data:`GENERIC_NAMES` and function words); ``"sql_keyword"`` (only
    SQL keywords, which a record may not name: "sum"); ``"other_ambiguity"`` (it
    names, or is named by, a name of another ambiguity of the same task, given in ``others``).
    ``"in common"`` is kept: a scope cue.

    >>> alias_problem("years old"), alias_problem("the"), alias_problem("name")
    (None, 'stop_word', 'generic')
    >>> alias_problem("given name") is None  # "given" as written is no function word
    True
    >>> alias_problem("region", others=["sales region"]), alias_problem("both"), alias_problem("sum")
    ('other_ambiguity', 'stop_word', 'sql_keyword')
    """
    lemmas = _lemmas(alias)
    if not lemmas:
        return "empty"
    if alias.strip().lower() == "in common":
        return None
    written = [m.lower() for m in re.findall(r"[^\W_]+(?:'[^\W_]+)*", alias)]
    if all(x in STOP_WORDS for x in written):  # as written: "given" is no function word
        return "stop_word"
    if all(x in GENERIC_NAMES or y in STOP_WORDS for x, y in zip(lemmas, written, strict=False)):
        return "generic"
    if term_problem(alias) == "sql_keyword":
        return "sql_keyword"  # "sum": validate refuses the record
    for other in others:
        theirs = _lemmas(other)
        if theirs and (_contains(theirs, lemmas) or _contains(lemmas, theirs)):
            return "other_ambiguity"
    return None


def _contains(outer: tuple[str, ...], inner: tuple[str, ...]) -> bool:
    n = len(inner)
    return any(outer[i : i + n] == inner for i in range(len(outer) - n + 1))


def clean_aliases(term: str, aliases: Iterable[str], others: Iterable[str] = ()) -> list[str]:
    """The usable aliases, in order: without the term itself, duplicates (by lemma) and
    phrases :func:`alias_problem` refuses.

    Args:
        term: the ambiguity's term.
        aliases: candidate aliases, best first.
        others: every name (term and aliases) of the task's other ambiguities.

    >>> clean_aliases("old", ["age", "Age", "old", "id", "singer"], others=["singer"])
    ['age']
    """
    others = list(others)
    seen = {_lemmas(term)}
    out = []
    for alias in aliases:
        alias = " ".join(str(alias).split())
        key = _lemmas(alias)
        if key in seen or alias_problem(alias, others=others):
            continue
        seen.add(key)
        out.append(alias)
    return out
