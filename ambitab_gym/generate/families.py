"""Ambiguity families of the procedural generator, one per phenomenon of the six corpora.

* :class:`Reading` - one resolution of an ambiguity: its natural-language resolution and frozen
  response, an SQL snippet, the evidence hint (knowledge), and its effect on the query.
* :class:`Slot` - one registered ambiguity: family, id, term (a phrase of the request), kind
  and its readings (the first is the default reading).
* :data:`FAMILIES` - the family names; :func:`compatible` - which families combine.
* one builder per family (``synonym``, ``scope``, ``attachment``, ``vague``, ``knowledge``,
  ``choice``, ``table``, ``time``) returning a :class:`Slot`; the request text around the term
  is built by :mod:`ambitab_gym.generate.tasks`.
* :data:`TERM_ALIASES` - other phrasings of the domains' terms; every slot carries aliases
  (the real corpora's records do, and the deterministic oracle's matcher credits a question
  that names an alias as one that names the term).

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

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ambitab_gym.generate.database import GeneratedDatabase

__all__ = [
    "FAMILIES",
    "Reading",
    "Slot",
    "attachment",
    "choice",
    "TERM_ALIASES",
    "compatible",
    "knowledge",
    "scope",
    "slug",
    "synonym",
    "table",
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
        aliases: other phrasings of the term a user could use.

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


def compatible(family: str, skeleton: str, chosen: set[str]) -> bool:
    """Whether ``family`` can join ``chosen`` in a request of this skeleton.

    Skeletons: ``total``/``average`` (an aggregate of a measure), ``count``, ``ranking``.

    >>> compatible("synonym", "count", set()), compatible("choice", "total", {"attachment"})
    (False, False)
    """
    if family == "synonym":
        return skeleton != "count"
    if family == "scope":
        return skeleton != "ranking"
    if family == "choice":
        return "attachment" not in chosen
    if family == "attachment":
        return "choice" not in chosen and not (skeleton == "ranking" and "vague" in chosen)
    if family == "vague":
        return not (skeleton == "ranking" and "attachment" in chosen) and not (
            skeleton != "ranking" and "table" in chosen
        )
    if family == "table":  # the archive holds no dates of the time frames
        return "time" not in chosen and not (skeleton != "ranking" and "vague" in chosen)
    if family == "time":
        return "table" not in chosen
    return family == "knowledge"


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
        slot = Slot(b.family, b.id, b.term, b.kind, readings, b.phrase, b.aliases)
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
        return Slot(
            "synonym", slug(term), term, "critical", tuple(readings), term, TERM_ALIASES[term]
        )

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
        aliases = (f"across all {d.category_plural}", f"over the {d.category_plural}")
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
        aliases = (f"joined prior to {year}", f"joining before {year}")
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
            return Slot(
                "vague", slug(term), term, "critical", readings, term, TERM_ALIASES[term]
            )

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
        return Slot("vague", slug(term), term, "critical", readings, term, TERM_ALIASES[term])

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
            return Slot(
                "knowledge",
                slug(term),
                term,
                "knowledge",
                tuple(readings),
                term,
                TERM_ALIASES[term],
            )

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
        return Slot(
            "knowledge",
            slug(term),
            term,
            "knowledge",
            tuple(readings),
            f" for {term}",
            TERM_ALIASES[term],
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
        aliases = (f"{short} area", f"city of {short}")
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
                f"the {current} table, the current {d.event_plural} from January 2022 to "
                "June 2024",
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
        aliases = (f"{d.event_singular} history", f"{d.event_singular} data")
        return Slot("table", slug(term), term, "critical", readings, term, aliases)

    return _memoized(db, ("table",), rng, build)


def time(db: GeneratedDatabase, rng: np.random.Generator) -> Slot:
    """Time frames: "last year" (calendar or trailing) and "past few months" (three or six)."""
    calendar = bool(rng.random() < 0.5)

    def build() -> Slot:
        date = f"e.{db.domain.date_column}"
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
        return Slot(
            "time",
            slug(term),
            term,
            "critical",
            readings,
            f" in the {term}",
            TERM_ALIASES[term],
        )

    return _memoized(db, ("time", calendar), rng, build)
