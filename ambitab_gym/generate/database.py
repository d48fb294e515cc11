"""Synthetic SQLite databases of the procedural generator.

* :class:`GeneratedDatabase` - one database: its name, the SQL script that builds it (the form
  corpora ship), the schema text the agent sees, an open in-memory copy for executing readings,
  and the facts the task families draw on (cities, tiers, value ranges).
* :func:`build_database` - a database of a domain from a seed or ``np.random.Generator``.

Values follow realistic shapes: a few people place most of the events (Zipf-like activity),
money is log-normal, sizes are skewed integers, dates span 2022-01-01 to the data's last day
(:data:`LAST_DAY`). Like AmbiQT's databases, the event table holds two synonymous measure
columns: one keeps the drawn values, the other is resampled from them with replacement, so the
two column readings of a request return different results. Every city name is unique except
one pair that shares its name ("Portland, Oregon" and "Portland, Maine"), the value choice of a
TACO-style ambiguity.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ambitab_gym.generate.domains import Domain

__all__ = ["FIRST_DAY", "LAST_DAY", "GeneratedDatabase", "build_database"]

FIRST_DAY = _dt.date(2022, 1, 1)
#: The last day of data in every generated database (stated in the visible external knowledge).
LAST_DAY = _dt.date(2024, 6, 30)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_FIRST_NAMES = _words(
    "Ava Ben Chloe Daniel Elena Farid Grace Hugo Iris Jonas Kira Liam Maya Noah Olga Pedro "
    "Quinn Rosa Samir Tara Umar Vera Wes Xenia Yusuf Zoe Anton Bea Carlos Dana Emil Fatima "
    "Gil Hana Ivan Jade Kofi Lena Marco Nia"
)
_LAST_NAMES = _words(
    "Abbott Becker Castillo Dubois Eriksen Fontaine Garcia Hoffman Ito Jensen Kowalski Larsen "
    "Moreau Novak Okafor Patel Quintero Rossi Schmidt Tanaka Usman Vargas Weber Xu Yilmaz Zimmer "
    "Brennan Costa Dimitrov Esposito"
)
_UNIQUE_CITIES = (
    "Boston, Massachusetts",
    "Denver, Colorado",
    "Austin, Texas",
    "Seattle, Washington",
    "Chicago, Illinois",
    "Atlanta, Georgia",
    "Phoenix, Arizona",
    "Detroit, Michigan",
    "Omaha, Nebraska",
    "Tampa, Florida",
    "Raleigh, North Carolina",
    "Madison, Wisconsin",
)
_RESULT_CACHE = 4096
#: Pairs of cities that share a name: the ambiguous values of the value-choice family.
SHARED_NAME_CITIES = (
    ("Portland", "Portland, Oregon", "Portland, Maine"),
    ("Springfield", "Springfield, Illinois", "Springfield, Missouri"),
    ("Columbus", "Columbus, Ohio", "Columbus, Georgia"),
    ("Kingston", "Kingston, New York", "Kingston, Ontario"),
    ("Richmond", "Richmond, Virginia", "Richmond, California"),
    ("Aurora", "Aurora, Colorado", "Aurora, Illinois"),
)


@dataclass
class GeneratedDatabase:
    """One generated database.

    Attributes:
        name: the database name records use (``<domain>_<index>``).
        domain: its schema family.
        script: the SQL script that builds it (written to ``databases/<name>.sql``).
        schema_text: the ``CREATE`` statements as the corpus shows them to the agent.
        connection: an in-memory SQLite copy, built from ``script``, for executing readings.
        cities: the unique cities (full values) and the shared-name pair
            ``(short name, value a, value b)``.
        tiers, categories: values present in the data.
        entity_count: the number of people.

    Example:
        >>> from ambitab_gym.generate.domains import DOMAINS
        >>> db = build_database(DOMAINS["library"], 3, seed=7)
        >>> db.name, db.connection.execute("SELECT COUNT(*) FROM loans").fetchone()[0] > 100
        ('library_03', True)
    """

    name: str
    domain: Domain
    script: str
    schema_text: str
    connection: sqlite3.Connection
    cities: tuple[str, ...]
    shared_city: tuple[str, str, str]
    tiers: tuple[str, ...]
    categories: tuple[str, ...]
    entity_count: int
    results: OrderedDict[str, list[tuple]] = field(default_factory=OrderedDict)
    quantiles: dict[tuple[str, float], float] = field(default_factory=dict)

    def execute(self, sql: str) -> list[tuple]:
        """Rows of a trusted query on the in-memory copy (the last 4,096 cached by SQL text)."""
        rows = self.results.get(sql)
        if rows is None:
            rows = self.connection.execute(sql).fetchall()
            self.results[sql] = rows
            if len(self.results) > _RESULT_CACHE:
                self.results.popitem(last=False)
        return rows

    def quantile(self, sql: str, q: float) -> float:
        """The ``q`` quantile (the lower data point) of a one-column query's values, cached."""
        key = (sql, round(q, 2))
        value = self.quantiles.get(key)
        if value is None:
            values = [row[0] for row in self.execute(sql)]
            value = float(np.quantile(values, key[1], method="lower"))
            if len(self.quantiles) < _RESULT_CACHE:
                self.quantiles[key] = value
        return value


def _quote(value: object) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float):
        return repr(round(value, 2))
    return str(int(value))  # type: ignore[call-overload]


def _inserts(table: str, rows: list[tuple]) -> str:
    values = ",\n".join("(" + ", ".join(_quote(v) for v in row) + ")" for row in rows)
    return f"INSERT INTO {table} VALUES\n{values};"


def _schema_of(connection: sqlite3.Connection) -> str:
    # the same text Corpus.schema_text reads from a built database
    rows = connection.execute(
        "SELECT sql FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).fetchall()
    return ";\n".join(row[0].strip().rstrip(";") for row in rows) + ";"


def build_database(
    domain: Domain, index: int, *, seed: int | np.random.Generator
) -> GeneratedDatabase:
    """A database of ``domain``; the same ``(domain, index, seed)`` gives the same script.

    Args:
        domain: the schema family.
        index: the database's number within its domain (part of its name).
        seed: an integer seed or a ``np.random.Generator`` (consumed).
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    d = domain
    name = f"{d.name}_{index:02d}"
    n_people = int(rng.integers(36, 61))
    n_items = int(rng.integers(14, 25))
    n_events = int(rng.integers(220, 361))

    # people: unique names, six unique cities plus one shared-name pair
    cities = tuple(
        _UNIQUE_CITIES[i] for i in rng.choice(len(_UNIQUE_CITIES), size=6, replace=False)
    )
    shared = SHARED_NAME_CITIES[int(rng.integers(len(SHARED_NAME_CITIES)))]
    city_values = (*cities, shared[1], shared[2])
    city_weights = rng.dirichlet(np.full(len(city_values), 3.0))
    full_names = [f"{f} {s}" for f in _FIRST_NAMES for s in _LAST_NAMES]
    people_names = [full_names[i] for i in rng.choice(len(full_names), n_people, replace=False)]
    tier_weights = rng.dirichlet(np.full(3, 4.0))
    people = []
    for i in range(n_people):
        # the first eight people cover every city, so both shared-name cities have someone
        city = (
            city_values[i]
            if i < len(city_values)
            else city_values[int(rng.choice(len(city_values), p=city_weights))]
        )
        tier = d.tier_values[int(rng.choice(3, p=tier_weights))]
        joined = int(rng.integers(2012, 2024))
        people.append((i + 1, people_names[i], city, tier, joined))

    # items: unique names from two parts, categories, a numeric value
    first, second = d.item_name_parts
    combos = [f"{a} {b}" for a in first for b in second]
    item_names = [combos[i] for i in rng.choice(len(combos), n_items, replace=False)]
    low, high = d.item_value_range
    items = []
    for i in range(n_items):
        category = (
            d.category_values[i % len(d.category_values)]
            if i < 5
            else d.category_values[int(rng.integers(len(d.category_values)))]
        )
        value = float(np.exp(rng.uniform(np.log(max(low, 1.0)), np.log(high))))
        if d.item_value_column not in ("unit_price", "replacement_cost"):
            value = float(round(value))
        items.append((i + 1, item_names[i], category, float(round(value, 2))))

    # events: Zipf-like activity, log-normal measure, skewed size
    activity = 1.0 / np.arange(1, n_people + 1) ** 0.8
    activity = activity[rng.permutation(n_people)]
    activity /= activity.sum()
    span = (LAST_DAY - FIRST_DAY).days
    m_low, m_high = d.measure_range
    s_low, s_high = d.size_range
    status_weights = np.array([0.55, 0.25, 0.12, 0.08])
    measures = np.round(
        np.clip(np.exp(rng.normal(np.log((m_low + m_high) / 4), 0.7, n_events)), m_low, m_high), 2
    )
    resampled = measures[rng.integers(0, n_events, n_events)]
    sizes = np.clip(
        np.round(s_low + rng.gamma(2.0, (s_high - s_low) / 6.0, n_events)), s_low, s_high
    ).astype(int)
    events = []
    for i in range(n_events):
        person = int(rng.choice(n_people, p=activity)) + 1
        item = int(rng.integers(n_items)) + 1
        day = FIRST_DAY + _dt.timedelta(days=int(rng.integers(span + 1)))
        status = d.status_values[int(rng.choice(4, p=status_weights))]
        events.append(
            (
                i + 1,
                person,
                item,
                day.isoformat(),
                float(measures[i]),
                float(resampled[i]),
                int(sizes[i]),
                status,
            )
        )

    a, b = d.measure_columns
    creates = [
        f"CREATE TABLE {d.entity_table} (\n"
        f"  {d.entity_id} INTEGER PRIMARY KEY,\n"
        "  name TEXT NOT NULL,\n"
        f"  {d.city_column} TEXT NOT NULL,\n"
        f"  {d.tier_column} TEXT NOT NULL,\n"
        f"  {d.joined_column} INTEGER NOT NULL\n"
        ");",
        f"CREATE TABLE {d.item_table} (\n"
        f"  {d.item_id} INTEGER PRIMARY KEY,\n"
        "  name TEXT NOT NULL,\n"
        f"  {d.category_column} TEXT NOT NULL,\n"
        f"  {d.item_value_column} REAL NOT NULL\n"
        ");",
        f"CREATE TABLE {d.event_table} (\n"
        f"  {d.event_id} INTEGER PRIMARY KEY,\n"
        f"  {d.entity_id} INTEGER NOT NULL REFERENCES {d.entity_table}({d.entity_id}),\n"
        f"  {d.item_id} INTEGER NOT NULL REFERENCES {d.item_table}({d.item_id}),\n"
        f"  {d.date_column} TEXT NOT NULL,\n"
        f"  {a} REAL NOT NULL,\n"
        f"  {b} REAL NOT NULL,\n"
        f"  {d.size_column} INTEGER NOT NULL,\n"
        f"  {d.status_column} TEXT NOT NULL\n"
        ");",
    ]
    script = "\n".join(
        [
            f"-- {name}: generated by ambitab_gym.generate (domain {d.name}, database {index})",
            *creates,
            _inserts(d.entity_table, people),
            _inserts(d.item_table, items),
            _inserts(d.event_table, events),
            "",
        ]
    )
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.executescript(script)
    return GeneratedDatabase(
        name=name,
        domain=d,
        script=script,
        schema_text=_schema_of(connection),
        connection=connection,
        cities=cities,
        shared_city=shared,
        tiers=tuple(sorted({p[3] for p in people})),
        categories=tuple(sorted({i[2] for i in items})),
        entity_count=n_people,
    )
