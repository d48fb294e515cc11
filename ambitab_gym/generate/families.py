"""Ambiguity families of the procedural generator, one per phenomenon of the six corpora.

* :class:`Reading` - one resolution of an ambiguity: its natural-language resolution and frozen
  response, an SQL snippet, the evidence hint (knowledge), and its effect on the query.
* :class:`Slot` - one registered ambiguity: family, id, term (a phrase of the request), kind
  and its readings (the first is the default reading).
* :data:`FAMILIES` - the family names; :func:`compatible` - which families combine;
  :func:`most_combined` - how many of some families one request can hold, and
  :func:`never_combined` - the pairs that never share a request, with the reason.
* one builder per family (``synonym``, ``scope``, ``attachment``, ``vague``, ``knowledge``,
  ``choice``, ``table``, ``time``) returning a :class:`Slot`; the request text around the term
  is built by :mod:`ambitab_gym.generate.tasks`.
* :data:`TERM_ALIASES` - other phrasings of the domains' terms. Every slot carries candidate
  aliases, the words a person uses to ask about it (:mod:`ambitab_gym.aliases`): the columns,
  tables and values that tell its readings apart, its modifier, the cues of a scope, the parts of
  an attachment; :func:`task_aliases` keeps, for one request, those that name no other
  ambiguity of the request and no other phrase of it (the deterministic oracles credit a
  question that names an alias as one that names the term).

| family | mirrors | term (retail) | readings |
|---|---|---|---|
| synonym | AmbiQT | "order value" | the ``total`` or the ``amount`` column |
| scope | Ambrosia (scope) | "across categories" | one figure per category, or one overall |
| attachment | Ambrosia (attachment) | "joined before 2019" | the clause binds both tiers, or the last |
| vague | Bird / Ambrosia (vagueness) | "top customers", "large orders" | top 3 or 5; at least 6 or 9 items |
| knowledge | EW-Bird (masked evidence) | "loyal customers" | at least 3 or 5 orders (kind knowledge) |
| choice | TACO (value choice) | "Portland" | Portland, Oregon or Portland, Maine |
| table | TACO (table choice) | "order records" | the current ``orders`` or the ``orders_archive`` table |
| time | BIRD-Interact (time frames) | "last year" | calendar 2023, or the twelve months to June 2024 |
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ambitab_gym.aliases import (
    attachment_aliases,
    clean_aliases,
    natural_name,
    reading_aliases,
    scope_aliases,
    statistic_aliases,
)
from ambitab_gym.generate.database import GeneratedDatabase
from ambitab_gym.terms import STOP_WORDS, term_problem, words

__all__ = [
    "FAMILIES",
    "SKELETONS",
    "Reading",
    "Slot",
    "attachment",
    "choice",
    "TERM_ALIASES",
    "compatible",
    "knowledge",
    "most_combined",
    "never_combined",
    "scope",
    "slug",
    "synonym",
    "table",
    "task_aliases",
    "time",
    "vague",
]

#: Every family, in the order docs and options list them.
FAMILIES: tuple[str, ...] = (
    "synonym",
    "scope",
    "attachment",
    "vague",
    "knowledge",
    "choice",
    "table",
    "time",
)

#: Other phrasings of each domain term (a singular or plural form, a near synonym).
TERM_ALIASES: dict[str, tuple[str, ...]] = {
    # retail
    "order value": ("order values", "value of an order"),
    "premium products": ("premium product", "premium items"),
    "large orders": ("large order", "big orders"),
    "loyal customers": ("loyal customer", "loyal shoppers"),
    "top customers": ("top customer", "best customers"),
    # library
    "late fees": ("late fee", "overdue fines"),
    "rare books": ("rare book", "rare titles"),
    "long loans": ("long loan", "lengthy loans"),
    "avid readers": ("avid reader", "keen readers"),
    "top members": ("top member", "best members"),
    # hospital
    "visit cost": ("visit costs", "cost of a visit"),
    "senior doctors": ("senior doctor", "senior physicians"),
    "long visits": ("long visit", "lengthy visits"),
    "frequent patients": ("frequent patient", "regular patients"),
    "top patients": ("top patient", "leading patients"),
    # sports
    "points": ("points scored", "point totals"),
    "historic teams": ("historic team", "heritage teams"),
    "long appearances": ("long appearance", "lengthy appearances"),
    "regular players": ("regular player", "frequent players"),
    "top players": ("top player", "best players"),
    # university
    "marks": ("exam marks", "grades"),
    "advanced courses": ("advanced course", "upper-level courses"),
    "long exams": ("long exam", "lengthy exams"),
    "committed students": ("committed student", "dedicated students"),
    "top students": ("top student", "best students"),
    # flights
    "ticket cost": ("ticket costs", "ticket price"),
    "long-haul flights": ("long-haul flight", "long haul flights"),
    "heavy bookings": ("heavy booking", "large bookings"),
    "frequent flyers": ("frequent flyer", "frequent fliers"),
    "top passengers": ("top passenger", "best passengers"),
    # time frames
    "last year": ("past year", "previous year"),
    "past few months": ("last few months", "recent months"),
}

_NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 8: "eight", 10: "ten"}


@dataclass(frozen=True)
class Reading:
    """One resolution of an ambiguity and what it does to the query.

    ``effect`` keys: ``measure`` (the measured column), ``cond`` (a WHERE conjunct), ``group``
    (one row per category), ``limit`` (how many ranked rows), ``members`` (``(column,
    subquery)`` when ``cond`` is ``column IN (subquery)``).

    >>> Reading("the total column", "I mean the total column.", "e.total", None,
    ...         {"measure": "total"}, "total").label
    'total'
    """

    resolution: str
    response: str
    sql_snippet: str
    evidence: str | None
    effect: dict = field(hash=False)
    label: str = ""


@dataclass(frozen=True)
class Slot:
    """One registered ambiguity of a generated request.

    Attributes:
        family: a name from :data:`FAMILIES`.
        id: the ambiguity id (a slug of the term).
        term: the ambiguous phrase, exactly as the request writes it.
        kind: ``critical`` or ``knowledge``.
        readings: the alternatives; the first is the default reading.
        phrase: the request fragment that carries the term (placed by the task builder).
        aliases: the candidate aliases, best first: the words a person would use to ask about
            the ambiguity, without term problems or generic words (a request keeps those
            :func:`task_aliases` allows).

    >>> slot = Slot("time", "last_year", "last year", "critical", (), " in the last year")
    >>> slot.term in slot.phrase
    True
    """

    family: str
    id: str
    term: str
    kind: str
    readings: tuple[Reading, ...]
    phrase: str
    aliases: tuple[str, ...] = ()


def slug(term: str) -> str:
    """An ambiguity id for a term.

    >>> slug("long-haul flights"), slug("joined before 2019")
    ('long_haul_flights', 'joined_before_2019')
    """
    return re.sub(r"[^a-z0-9]+", "_", term.lower()).strip("_")


#: The request skeletons: an aggregate of a measure (total, average), a count, a ranking.
SKELETONS: tuple[str, ...] = ("total", "average", "count", "ranking")

#: Why two families never share a request (the pairs :func:`compatible` never allows).
_NEVER_TOGETHER = {
    frozenset({"table", "time"}): "the archive table holds 2019-2021 only, so the 2023-2024 "
    "time frames would leave its reading without rows",
}


def compatible(family: str, skeleton: str, chosen: set[str]) -> bool:
    """Whether ``family`` can join ``chosen`` in a request of this skeleton (:data:`SKELETONS`).

    >>> compatible("synonym", "count", set()), compatible("choice", "total", {"attachment"})
    (False, True)
    >>> compatible("time", "total", {"table"})
    False
    """
    if family == "synonym":
        return skeleton != "count"
    if family == "scope":
        return skeleton != "ranking"
    if family == "attachment":  # a ranking's vague term and the clause both name the people
        return not (skeleton == "ranking" and "vague" in chosen)
    if family == "vague":
        return not (skeleton == "ranking" and "attachment" in chosen) and not (
            skeleton != "ranking" and "table" in chosen
        )
    if family == "table":  # the archive holds no dates of the time frames
        return "time" not in chosen and not (skeleton != "ranking" and "vague" in chosen)
    if family == "time":
        return "table" not in chosen
    return family in ("knowledge", "choice")


def _fits(order: Sequence[str], skeleton: str) -> bool:
    return all(compatible(f, skeleton, set(order[:i])) for i, f in enumerate(order))


@lru_cache(maxsize=256)
def most_combined(families: tuple[str, ...]) -> int:
    """The most of ``families`` one request can hold (some skeleton, some order of drawing).

    >>> most_combined(("attachment", "choice")), most_combined(("table", "time"))
    (2, 1)
    >>> most_combined(FAMILIES)
    7
    """
    unique = tuple(dict.fromkeys(families))
    for m in range(len(unique), 0, -1):
        for subset in itertools.combinations(unique, m):
            orders = itertools.permutations(subset)
            if any(_fits(order, s) for order in orders for s in SKELETONS):
                return m
    return 0


def never_combined(families: Iterable[str]) -> list[str]:
    """The pairs of ``families`` no request holds, each with the reason.

    >>> never_combined(["time", "scope", "table"])
    ['table and time (the archive table holds 2019-2021 only, so the 2023-2024 time frames would leave its reading without rows)']
    """
    unique = tuple(dict.fromkeys(families))
    out = []
    for a, b in itertools.combinations(sorted(unique, key=FAMILIES.index), 2):
        if most_combined((a, b)) < 2:
            why = _NEVER_TOGETHER.get(frozenset({a, b}), "no request skeleton fits both")
            out.append(f"{a} and {b} ({why})")
    return out


@lru_cache(maxsize=65536)
def _lemmas(text: str) -> tuple[str, ...]:
    return tuple(w.lemma for w in words(text))


def _inside(phrase: tuple[str, ...], lemmas: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(lemmas[i : i + n] == phrase for i in range(len(lemmas) - n + 1))


def _own_aliases(term: str, candidates: Iterable[str]) -> tuple[str, ...]:
    """A slot's candidate aliases without term problems, generic words and repeats."""
    return tuple(clean_aliases(term, [a for a in candidates if term_problem(a) is None]))


@lru_cache(maxsize=65536)
def _cleaned(term: str, candidates: tuple[str, ...], others: tuple[str, ...]) -> tuple[str, ...]:
    # a task's slots recur, so the same cleaning recurs: computed once
    return tuple(clean_aliases(term, candidates, others=others))


def task_aliases(slots: Sequence[Slot], request: str) -> tuple[tuple[str, ...], ...]:
    """Each slot's aliases in one request: its candidates (:attr:`Slot.aliases`) that the
    request does not use outside the slot's own phrase (a word of another part of the request,
    e.g. "total" of "the total order value", names no reading), then
    :func:`~ambitab_gym.aliases.clean_aliases` against every name of the other slots, so that
    no alias names another ambiguity of the request or is generic.

    >>> top = Slot("vague", "top", "top customers", "critical", (), "top customers",
    ...            ("top", "3 customers", "3", "best customers"))
    >>> knowledge = Slot("knowledge", "loyal", "loyal customers", "knowledge", (),
    ...                  "loyal customers", ("loyal", "3 orders", "order count"))
    >>> task_aliases([top, knowledge], "List the 3 top customers among loyal customers.")
    (('top', '3 customers', 'best customers'), ('loyal', 'order count'))
    """
    said = set(_lemmas(request))
    out = []
    for slot in slots:
        phrase = slot.phrase.strip()
        parts = [_lemmas(part) for part in (request.split(phrase) if phrase else [request])]
        kept = tuple(
            alias
            for alias in slot.aliases
            if not (
                said.issuperset(_lemmas(alias))
                and any(_inside(_lemmas(alias), part) for part in parts)
            )
        )
        # only the names that share a word other than a function word with a candidate can
        # name or be named by one (every name holds such a word): the same result, cheaper
        mine = {x for alias in kept for x in _lemmas(alias)} - STOP_WORDS
        others = tuple(
            name
            for other in slots
            if other is not slot
            for name in (other.term, *other.aliases)
            if mine.intersection(_lemmas(name))
        )
        out.append(_cleaned(slot.term, kept, others))
    return tuple(out)


def _shuffled(rng: np.random.Generator, readings: list[Reading]) -> tuple[Reading, ...]:
    order = rng.permutation(len(readings))
    return tuple(readings[int(i)] for i in order)


_MISSING = object()


def _memoized(
    db: GeneratedDatabase, key: tuple, rng: np.random.Generator, build: Callable[[], Slot]
) -> Slot:
    """``build()``'s slot with its readings shuffled by one ``rng.permutation`` draw (the
    draw :func:`_shuffled` makes), kept in ``db.slots`` by ``key`` and the drawn order: a slot
    is a pure function of its domain, the drawn values in ``key`` and the order (``key`` holds
    every value of the database a slot reads), so a repeated draw reuses the frozen slot
    instead of building its readings again, on any database of the domain."""
    order = tuple(int(i) for i in rng.permutation(2))
    memo = db.slots
    slot = memo.get((key, order), _MISSING)
    if slot is _MISSING:
        b = build()
        assert len(b.readings) == len(order)  # every family has two readings
        readings = tuple(b.readings[i] for i in order)
        aliases = _own_aliases(b.term, b.aliases)
        slot = Slot(b.family, b.id, b.term, b.kind, readings, b.phrase, aliases)
        memo[(key, order)] = slot
    return slot  # type: ignore[return-value]


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _distinct_quantiles(
    db: GeneratedDatabase, sql: str, qs: tuple[float, float]
) -> tuple[float, float] | None:
    a, b = (db.quantile(sql, q) for q in qs)
    return (a, b) if a != b else None


def _modifiers(term: str) -> list[str]:
    """The modifiers of a term and of its paraphrases in :data:`TERM_ALIASES` (all words but
    the noun): "large" and "big" of "large orders".

    >>> _modifiers("large orders"), _modifiers("long-haul flights")
    (['large', 'big'], ['long-haul', 'long haul'])
    """
    phrases = (term, *TERM_ALIASES.get(term, ()))
    return list(dict.fromkeys(" ".join(p.split()[:-1]) for p in phrases if len(p.split()) > 1))


def _where(table: str, conds: Iterable[str]) -> list[str]:
    """One query per condition over ``table``: the readings :func:`reading_aliases` compares."""
    return [f"SELECT * FROM {table} AS e WHERE {cond}" for cond in conds]


def synonym(db: GeneratedDatabase, rng: np.random.Generator) -> Slot:
    """AmbiQT: the measure phrase names two synonymous columns."""

    def build() -> Slot:
        d = db.domain
        readings = [
            Reading(
                f"the {col} column of the {d.event_table} table",
                f"I mean the values stored in the {col} column.",
                f"e.{col}",
                None,
                {"measure": col},
                col,
            )
            for col in d.measure_columns
        ]
        term = d.measure_term
        columns = [natural_name(col) for col in d.measure_columns]
        aliases = (
            *TERM_ALIASES[term],
            *reading_aliases(
                [f"SELECT e.{col} FROM {d.event_table} AS e" for col in d.measure_columns]
            ),
            *(f"{name} column" for name in columns),
            term.split()[-1],  # the head noun: "Which cost column?"
        )
        return Slot("synonym", slug(term), term, "critical", tuple(readings), term, aliases)

    return _memoized(db, ("synonym",), rng, build)


def scope(db: GeneratedDatabase, rng: np.random.Generator) -> Slot:
    """Ambrosia scope: one figure per group, or one figure over all groups."""

    def build() -> Slot:
        d = db.domain
        column = d.category_column
        term = f"across {d.category_plural}"
        readings = (
            Reading(
                f"a separate figure for each {column}",
                f"Give me a separate figure for each {column}.",
                f"GROUP BY p.{column}",
                None,
                {"group": True},
                "per_group",
            ),
            Reading(
                f"a single overall figure with all {d.category_plural} combined",
                f"Just one overall figure, with all {d.category_plural} combined.",
                f"no GROUP BY p.{column}",
                None,
                {"group": False},
                "overall",
            ),
        )
        noun, plural = natural_name(column), d.category_plural
        grouped = f"SELECT {column}, COUNT(*) FROM {d.item_table} GROUP BY {column}"
        aliases = (
            f"across all {plural}",
            f"over the {plural}",
            *scope_aliases(noun, plural),
            *reading_aliases([grouped, f"SELECT COUNT(*) FROM {d.item_table}"]),
            f"by {noun}",
            f"broken down by {noun}",
            f"{noun} by {noun}",
            "grand total",
            "overall",
            "one overall figure",
            "single figure",
            "separate figures",
            "combined",
            "altogether",
            "breakdown",
        )
        return Slot("scope", slug(term), term, "critical", readings, f" {term}", aliases)

    return _memoized(db, ("scope",), rng, build)


def attachment(db: GeneratedDatabase, rng: np.random.Generator) -> Slot:
    """Ambrosia attachment: does "who joined before Y" bind both tiers or only the last?"""
    first, second = (db.tiers[int(i)] for i in rng.choice(len(db.tiers), 2, replace=False))
    year = int(rng.integers(2016, 2022))

    def build() -> Slot:
        d = db.domain
        term = f"joined before {year}"
        people = d.entity_plural
        tier, joined = f"c.{d.tier_column}", f"c.{d.joined_column}"
        both = f"{tier} IN ('{first}', '{second}') AND {joined} < {year}"
        last = f"({tier} = '{first}' OR ({tier} = '{second}' AND {joined} < {year}))"
        readings = (
            Reading(
                f"the condition {term} applies to both the {first} and the {second} {people}",
                f"Both groups: only {first} and {second} {people} who joined before {year}.",
                both,
                None,
                {"cond": both},
                "both",
            ),
            Reading(
                f"only the {second} {people} must have joined before {year}; "
                f"every {first} one counts",
                f"All {first} {people}, plus just those {second} {people} who joined before "
                f"{year}.",
                last,
                None,
                {"cond": last},
                "last",
            ),
        )
        phrase = f"{first} and {second} {people} who {term}"
        aliases = (
            f"joined prior to {year}",
            f"joining before {year}",
            *attachment_aliases(f"who {term}", [f"{first} {people}", f"{second} {people}"]),
            f"{first} and {second} {people}",
            f"before {year}",
            f"prior to {year}",
            f"earlier than {year}",
            "joined before",
            "year joined",
            natural_name(d.joined_column),
            first,
            second,
            f"{first} ones",
            f"{second} ones",
            f"only the {second}",
            "both groups",
            f"both {natural_name(d.tier_column)}s",
            natural_name(d.tier_column),
        )
        return Slot("attachment", slug(term), term, "critical", readings, phrase, aliases)

    return _memoized(db, ("attachment", first, second, year), rng, build)


def vague(db: GeneratedDatabase, rng: np.random.Generator, *, ranking: bool) -> Slot | None:
    """Vague quantities: "top customers" (how many?) in rankings, else "large orders"
    (above which size?)."""
    d = db.domain
    if ranking:
        pairs = ((3, 5), (5, 10), (3, 10), (4, 8))
        low, high = pairs[int(rng.integers(len(pairs)))]

        def build_top() -> Slot:
            readings = tuple(
                Reading(
                    f"the {_NUMBER_WORDS[n]} highest-ranked {d.entity_plural}",
                    f"I mean the top {_NUMBER_WORDS[n]}.",
                    f"LIMIT {n}",
                    None,
                    {"limit": n},
                    f"top{n}",
                )
                for n in (low, high)
            )
            term = d.top_term
            limits = [f"SELECT name FROM {d.entity_table} LIMIT {n}" for n in (low, high)]
            counts = [
                name
                for n in (low, high)
                for name in (f"top {n}", f"top {_NUMBER_WORDS[n]}", f"{n} {d.entity_plural}")
            ]
            aliases = (
                *TERM_ALIASES[term],
                *_modifiers(term),
                *counts,
                *(f"{_NUMBER_WORDS[n]} {d.entity_plural}" for n in (low, high)),
                f"how many {d.entity_plural}",
                *reading_aliases(limits),
                *(_NUMBER_WORDS[n] for n in (low, high)),
                "highest-ranked",
            )
            return Slot("vague", slug(term), term, "critical", readings, term, aliases)

        return _memoized(db, ("vague", low, high), rng, build_top)
    sizes = f"SELECT {d.size_column} FROM {d.event_table}"
    thresholds = _distinct_quantiles(db, sizes, (round(float(rng.uniform(0.4, 0.6)), 2), 0.8))
    if thresholds is None:
        return None

    def build() -> Slot:
        term = d.large_term
        adjective = term.split()[0]
        readings = tuple(
            Reading(
                f"{d.event_plural} with a {d.size_phrase} of at least {_num(t)} {d.size_unit}",
                f"{_article(d.event_singular).capitalize()} {d.event_singular} counts as "
                f"{adjective} from {_num(t)} {d.size_unit} of {d.size_phrase} up.",
                f"e.{d.size_column} >= {_num(t)}",
                None,
                {"cond": f"e.{d.size_column} >= {_num(t)}"},
                f"at_least_{_num(t)}",
            )
            for t in thresholds
        )
        sqls = _where(d.event_table, (r.sql_snippet for r in readings))
        aliases = (
            *TERM_ALIASES[term],
            *_modifiers(term),
            f"how many {d.size_unit}",
            *(f"at least {_num(t)} {d.size_unit}" for t in thresholds),
            *(f"{_num(t)} {d.size_unit}" for t in thresholds),
            *reading_aliases(sqls),
            *statistic_aliases(sqls),
            "threshold",
            "cutoff",
            "cut-off",
        )
        return Slot("vague", slug(term), term, "critical", readings, term, aliases)

    return _memoized(db, ("vague", thresholds), rng, build)


def knowledge(db: GeneratedDatabase, rng: np.random.Generator, *, entity: bool) -> Slot | None:
    """EW-Bird: a domain term defined by an evidence hint the agent never sees (kind
    ``knowledge``), about people ("loyal customers") or things ("premium products")."""
    d = db.domain
    if entity:
        counts = f"SELECT COUNT(*) FROM {d.event_table} GROUP BY {d.entity_id}"
        low = round(float(rng.uniform(0.35, 0.55)), 2)
        thresholds = _distinct_quantiles(db, counts, (low, 0.75))
        if thresholds is None:
            return None

        def build_entity() -> Slot:
            term = d.entity_knowledge_term
            readings = []
            for k in thresholds:
                subquery = (
                    f"SELECT {d.entity_id} FROM {d.event_table} "
                    f"GROUP BY {d.entity_id} HAVING COUNT(*) >= {_num(k)}"
                )
                cond = f"c.{d.entity_id} IN ({subquery})"
                readings.append(
                    Reading(
                        f"{term} are {d.entity_plural} with at least {_num(k)} {d.event_plural}",
                        f"I mean {d.entity_plural} who have at least {_num(k)} {d.event_plural} "
                        "on record.",
                        cond,
                        f"{term} refers to {d.entity_plural} with COUNT({d.event_id}) >= {_num(k)}",
                        # "members": the ids the batch query may list instead of the subquery
                        {"cond": cond, "members": (f"c.{d.entity_id}", subquery)},
                        f"at_least_{_num(k)}",
                    )
                )
            aliases = (
                *TERM_ALIASES[term],
                *_modifiers(term),
                f"{d.event_singular} count",
                *(f"at least {_num(k)} {d.event_plural}" for k in thresholds),
                *(f"{_num(k)} {d.event_plural}" for k in thresholds),
                *reading_aliases([r.effect["members"][1] for r in readings]),
                "threshold",
                "cutoff",
                "cut-off",
            )
            return Slot("knowledge", slug(term), term, "knowledge", tuple(readings), term, aliases)

        return _memoized(db, ("knowledge", True, thresholds), rng, build_entity)
    values = f"SELECT {d.item_value_column} FROM {d.item_table}"
    op = d.item_knowledge_op
    qs = (0.5, 0.75) if op == ">=" else (0.25, 0.5)
    item_thresholds = _distinct_quantiles(db, values, qs)
    if item_thresholds is None:
        return None

    def build_item() -> Slot:
        bound = "at least" if op == ">=" else "at most"
        term = d.item_knowledge_term
        readings = []
        for v in item_thresholds:
            cond = f"p.{d.item_value_column} {op} {_num(v)}"
            readings.append(
                Reading(
                    f"{term} are {d.item_plural} whose {d.item_value_phrase} is {bound} {_num(v)}",
                    f"I mean {d.item_plural} with a {d.item_value_phrase} of {bound} {_num(v)}.",
                    cond,
                    f"{term} refers to {d.item_value_column} {op} {_num(v)}",
                    {"cond": cond},
                    f"{op}{_num(v)}",
                )
            )
        sqls = [f"SELECT * FROM {d.item_table} AS p WHERE {r.sql_snippet}" for r in readings]
        aliases = (
            *TERM_ALIASES[term],
            *_modifiers(term),
            natural_name(d.item_value_column),
            d.item_value_phrase,
            *reading_aliases(sqls),
            "threshold",
            "cutoff",
            "cut-off",
        )
        return Slot(
            "knowledge", slug(term), term, "knowledge", tuple(readings), f" for {term}", aliases
        )

    return _memoized(db, ("knowledge", False, item_thresholds), rng, build_item)


def choice(db: GeneratedDatabase, rng: np.random.Generator) -> Slot:
    """TACO value choice: a city name that two cities of the data share."""

    def build() -> Slot:
        d = db.domain
        short, first, second = db.shared_city
        readings = []
        for city in (first, second):
            cond = f"c.{d.city_column} = '{city}'"
            readings.append(
                Reading(
                    f"the {d.entity_plural} from {city}",
                    f"I mean {city}.",
                    cond,
                    None,
                    {"cond": cond},
                    slug(city),
                )
            )
        states = [city.split(",", 1)[-1].strip() for city in (first, second)]
        aliases = (
            f"{short} area",
            f"city of {short}",
            *reading_aliases(_where(d.entity_table, (r.sql_snippet for r in readings))),
            *states,
            natural_name(d.city_column),
            "state",
        )
        return Slot(
            "choice", slug(short), short, "critical", tuple(readings), f" from {short}", aliases
        )

    return _memoized(db, ("choice", db.shared_city), rng, build)


def table(db: GeneratedDatabase, rng: np.random.Generator) -> Slot:
    """TACO table choice: "order records" can mean the current ``orders`` table (January 2022
    to June 2024) or the ``orders_archive`` table (2019 to 2021), both in the schema."""

    def build() -> Slot:
        d = db.domain
        current, archive = d.event_table, d.archive_table
        readings = (
            Reading(
                f"the {current} table, the current {d.event_plural} from January 2022 to June 2024",
                f"I mean the current {d.event_plural}, the ones in the {current} table.",
                f"FROM {current}",
                None,
                {"table": current},
                "current",
            ),
            Reading(
                f"the {archive} table, the archived {d.event_plural} from 2019 to 2021",
                f"I mean the archived {d.event_plural}, from the {archive} table.",
                f"FROM {archive}",
                None,
                {"table": archive},
                "archive",
            ),
        )
        term = f"{d.event_singular} records"
        tables = reading_aliases([f"SELECT COUNT(*) FROM {name}" for name in (current, archive)])
        aliases = (
            f"{d.event_singular} history",
            f"{d.event_singular} data",
            # the current table's name is the events' own noun, which every question may use
            *(name for name in tables if name != natural_name(current)),
            f"{natural_name(current)} table",
            f"{natural_name(archive)} table",
            "archive",
            f"archived {d.event_plural}",
            f"current {d.event_plural}",
            "current table",
            f"old {d.event_plural}",
            "2019-2021",
            "2019 to 2021",
            "2022 to 2024",
            "since 2022",
        )
        return Slot("table", slug(term), term, "critical", readings, term, aliases)

    return _memoized(db, ("table",), rng, build)


def time(db: GeneratedDatabase, rng: np.random.Generator) -> Slot:
    """Time frames: "last year" (calendar or trailing) and "past few months" (three or six)."""
    calendar = bool(rng.random() < 0.5)

    def build() -> Slot:
        date = f"e.{db.domain.date_column}"
        date_name = natural_name(db.domain.date_column)
        if calendar:
            term = "last year"
            specs = [
                (
                    "the calendar year 2023, from January to December",
                    "I mean the calendar year 2023.",
                    f"{date} BETWEEN '2023-01-01' AND '2023-12-31'",
                    "calendar",
                ),
                (
                    "the twelve months up to the last day of data, July 2023 to June 2024",
                    "I mean the most recent twelve months, July 2023 through June 2024.",
                    f"{date} >= '2023-07-01'",
                    "trailing",
                ),
            ]
        else:
            term = "past few months"
            specs = [
                (
                    "the last three months of data, April to June 2024",
                    "The last three months: April to June 2024.",
                    f"{date} >= '2024-04-01'",
                    "three_months",
                ),
                (
                    "the last six months of data, January to June 2024",
                    "The last six months: January to June 2024.",
                    f"{date} >= '2024-01-01'",
                    "six_months",
                ),
            ]
        readings = tuple(Reading(r, s, c, None, {"cond": c}, label) for r, s, c, label in specs)
        frames = (
            ("calendar year", "calendar 2023", "2023", "twelve months", "12 months", "trailing")
            + ("rolling", "July 2023", "June 2024", "January to December")
            if calendar
            else ("three months", "3 months", "six months", "6 months", "quarter", "half a year")
            + ("half year", "April", "January", "how many months")
        )
        aliases = (*TERM_ALIASES[term], *frames, date_name, "how far back")
        return Slot("time", slug(term), term, "critical", readings, f" in the {term}", aliases)

    return _memoized(db, ("time", calendar), rng, build)
