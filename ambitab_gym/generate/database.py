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
TACO-style ambiguity. Next to the event table (2022 to :data:`LAST_DAY`) an archive table of the
same shape holds the events of 2019-2021 (``orders_archive``), the table choice of a TACO-style
ambiguity.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ambitab_gym.generate.domains import Domain
from ambitab_gym.verify.compare import normalize_rows

__all__ = [
    "ARCHIVE_FIRST_DAY",
    "ARCHIVE_LAST_DAY",
    "FIRST_DAY",
    "LAST_DAY",
    "GeneratedDatabase",
    "build_database",
    "schema_text_of",
]

FIRST_DAY = _dt.date(2022, 1, 1)
#: The last day of data in every generated database (stated in the visible external knowledge).
LAST_DAY = _dt.date(2024, 6, 30)
#: The archive table's events span these days (2019-2021).
ARCHIVE_FIRST_DAY = _dt.date(2019, 1, 1)
ARCHIVE_LAST_DAY = _dt.date(2021, 12, 31)


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
#: the quantiles :meth:`GeneratedDatabase.quantile` computes at once: every percentile, as
#: ``round(q, 2)`` keys them
_QUANTILE_GRID = tuple(round(i / 100, 2) for i in range(101))
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
        script: the SQL script that builds it (written to ``databases/<name>.sql``; rendered
            on first use from ``header``, ``creates`` and the rows of ``tables``).
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
    schema_text: str
    connection: sqlite3.Connection
    cities: tuple[str, ...]
    shared_city: tuple[str, str, str]
    tiers: tuple[str, ...]
    categories: tuple[str, ...]
    entity_count: int
    header: str = ""
    creates: tuple[str, ...] = ()
    tables: tuple[tuple[str, list[tuple]], ...] = ()
    results: OrderedDict[str, list[tuple]] = field(default_factory=OrderedDict, repr=False)
    quantiles: dict[tuple[str, float], float] = field(default_factory=dict, repr=False)
    fingerprints: OrderedDict[tuple[str, bool], frozenset | None] = field(
        default_factory=OrderedDict, repr=False
    )
    #: what depends on the database alone, by key (the column meanings records carry, the
    #: ids a knowledge subquery returns)
    memo: dict = field(default_factory=dict, repr=False)
    #: the family builders' slots by their drawn values (``families._memoized``): a slot is a
    #: function of the domain and those values, so a pool shares one dict per domain
    slots: dict = field(default_factory=dict, repr=False)
    _script: str | None = field(default=None, repr=False)

    @property
    def script(self) -> str:
        """The SQL script that builds the database (rendered on first use: the in-memory copy
        is filled from the same rows with ``executemany``, so most pooled databases never
        need it)."""
        if self._script is None:
            self._script = "\n".join(
                [
                    self.header,
                    *self.creates,
                    *(_inserts(table, rows) for table, rows in self.tables),
                    "",
                ]
            )
        return self._script

    def execute(self, sql: str) -> list[tuple]:
        """Rows of a trusted query on the in-memory copy (the last 4,096 cached by SQL text)."""
        rows = self.results.get(sql)
        if rows is None:
            rows = self.connection.execute(sql).fetchall()
            self.results[sql] = rows
            if len(self.results) > _RESULT_CACHE:
                self.results.popitem(last=False)
        return rows

    def has_result(self, sql: str) -> bool:
        """Whether the rows of ``sql`` are cached."""
        return sql in self.results

    def remember_result(self, sql: str, rows: list[tuple]) -> None:
        """Cache ``rows`` as the result of ``sql``, computed another way (one query for
        several readings)."""
        self.results[sql] = rows
        if len(self.results) > _RESULT_CACHE:
            self.results.popitem(last=False)

    def fingerprint(self, sql: str, *, count: bool = False) -> frozenset | None:
        """A reading's result as a set of normalized rows (floats to 4 decimals, the
        verifier's default), or None when the result is empty, holds a NULL or (``count``)
        counts nothing; computed once per SQL text (the last 4,096 kept)."""
        key = (sql, count)
        if key in self.fingerprints:
            self.fingerprints.move_to_end(key)
            return self.fingerprints[key]
        rows = self.connection.execute(sql).fetchall()
        value = _fingerprint_of(rows, count)
        self.fingerprints[key] = value
        if len(self.fingerprints) > _RESULT_CACHE:
            self.fingerprints.popitem(last=False)
        return value

    def cached_fingerprint(self, sql: str, *, count: bool = False) -> frozenset | None | bool:
        """The cached :meth:`fingerprint` of ``sql``, or False when none is cached."""
        key = (sql, count)
        if key in self.fingerprints:
            self.fingerprints.move_to_end(key)
            return self.fingerprints[key]
        return False

    def remember_fingerprint(
        self, sql: str, rows: list[tuple], *, count: bool = False
    ) -> frozenset | None:
        """Cache and return the fingerprint of ``rows``, the result of ``sql`` computed another
        way (one query for several readings)."""
        value = _fingerprint_of(rows, count)
        self.fingerprints[(sql, count)] = value
        if len(self.fingerprints) > _RESULT_CACHE:
            self.fingerprints.popitem(last=False)
        return value

    def quantile(self, sql: str, q: float) -> float:
        """The ``q`` quantile (the lower data point) of a one-column query's values, cached."""
        key = (sql, round(q, 2))
        value = self.quantiles.get(key)
        if value is None:
            values = [row[0] for row in self.execute(sql)]
            if len(self.quantiles) + len(_QUANTILE_GRID) <= _RESULT_CACHE:
                # every percentile of the query at once, in one call: each element is what
                # np.quantile computes for that q alone (tests/test_generate_fastpaths.py)
                grid = np.quantile(values, _QUANTILE_GRID, method="lower")
                for at, point in zip(_QUANTILE_GRID, grid.tolist(), strict=True):
                    self.quantiles[(sql, at)] = float(point)
            value = self.quantiles.get(key)
            if value is None:
                value = float(np.quantile(values, key[1], method="lower"))
        return value


def _fingerprint_of(rows: list[tuple], count: bool) -> frozenset | None:
    """Rows as a set of normalized rows (floats to 4 decimals), or None when they are empty,
    hold a NULL or (``count``) count nothing."""
    if len(rows) == 1 and len(rows[0]) == 1:  # an overall aggregate: one value
        # what normalize_rows makes of one int or float (a known-answer test compares)
        value = rows[0][0]
        kind = type(value)
        if value is None or (count and value == 0):
            return None
        if kind is float:
            value = (round(value, 4) or 0.0) if value == value else "NaN"
        elif kind is not int:
            return frozenset(normalize_rows(rows, 4))
        return frozenset({(value,)})
    null_free = not any(v is None for row in rows for v in row)
    if rows and null_free and not (count and all(row[-1] == 0 for row in rows)):
        return frozenset(normalize_rows(rows, 4))
    return None


def _quote(value: object) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float):
        return repr(round(value, 2))
    return str(int(value))  # type: ignore[call-overload]


def _stored(row: tuple) -> tuple:
    # the values the script's literals parse back to (``repr`` of a float round-trips), so the
    # in-memory copy filled from these rows holds exactly what the script builds
    return tuple(
        v if isinstance(v, str) else round(v, 2) if isinstance(v, float) else int(v) for v in row
    )


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


def _creates(d: Domain) -> list[str]:
    """The ``CREATE TABLE`` statements of a domain's databases (the same for all of them)."""
    return [
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
        *(_event_table(d, name) for name in (d.event_table, d.archive_table)),
    ]


def _event_table(d: Domain, name: str) -> str:
    """An event table's ``CREATE TABLE``: the current and the archive table share it."""
    a, b = d.measure_columns
    return (
        f"CREATE TABLE {name} (\n"
        f"  {d.event_id} INTEGER PRIMARY KEY,\n"
        f"  {d.entity_id} INTEGER NOT NULL REFERENCES {d.entity_table}({d.entity_id}),\n"
        f"  {d.item_id} INTEGER NOT NULL REFERENCES {d.item_table}({d.item_id}),\n"
        f"  {d.date_column} TEXT NOT NULL,\n"
        f"  {a} REAL NOT NULL,\n"
        f"  {b} REAL NOT NULL,\n"
        f"  {d.size_column} INTEGER NOT NULL,\n"
        f"  {d.status_column} TEXT NOT NULL\n"
        ");"
    )


def schema_text_of(domain: Domain) -> str:
    """The schema text of every database of ``domain`` (what :attr:`GeneratedDatabase.schema_text`
    holds), without building one.

    >>> from ambitab_gym.generate.domains import DOMAINS
    >>> schema_text_of(DOMAINS["retail"]) == build_database(DOMAINS["retail"], 0, seed=1).schema_text
    True
    """
    connection = sqlite3.connect(":memory:")
    try:
        connection.executescript("\n".join(_creates(domain)))
        return _schema_of(connection)
    finally:
        connection.close()


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
    # the first eight people cover every city, so both shared-name cities have someone
    n_cities = len(city_values)
    city_index = np.concatenate(
        [np.arange(n_cities), rng.choice(n_cities, size=n_people - n_cities, p=city_weights)]
    )
    tiers = rng.choice(3, size=n_people, p=tier_weights)
    joined = rng.integers(2012, 2024, size=n_people)
    people = [
        (
            i + 1,
            people_names[i],
            city_values[city_index[i]],
            d.tier_values[tiers[i]],
            int(joined[i]),
        )
        for i in range(n_people)
    ]

    # items: unique names from two parts, categories (each one at least once), a numeric value
    first, second = d.item_name_parts
    combos = [f"{a} {b}" for a in first for b in second]
    item_names = [combos[i] for i in rng.choice(len(combos), n_items, replace=False)]
    n_categories = len(d.category_values)
    category_index = np.concatenate(
        [np.arange(n_categories), rng.integers(n_categories, size=n_items - n_categories)]
    )
    low, high = d.item_value_range
    values = np.exp(rng.uniform(np.log(max(low, 1.0)), np.log(high), size=n_items))
    if d.item_value_column not in ("unit_price", "replacement_cost"):
        values = np.round(values)
    items = [
        (i + 1, item_names[i], d.category_values[category_index[i]], float(round(values[i], 2)))
        for i in range(n_items)
    ]

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
    persons = rng.choice(n_people, size=n_events, p=activity) + 1
    things = rng.integers(n_items, size=n_events) + 1
    days = rng.integers(span + 1, size=n_events)
    statuses = rng.choice(4, size=n_events, p=status_weights)
    dates = [(FIRST_DAY + _dt.timedelta(days=int(k))).isoformat() for k in range(span + 1)]
    events = [
        (
            i + 1,
            int(persons[i]),
            int(things[i]),
            dates[days[i]],
            float(measures[i]),
            float(resampled[i]),
            int(sizes[i]),
            d.status_values[statuses[i]],
        )
        for i in range(n_events)
    ]

    # the archive: events of 2019-2021 in a table of the same shape (the table choice of a
    # TACO-style ambiguity); drawn last, so the tables above do not depend on it
    n_archived = int(rng.integers(140, 261))
    archive_span = (ARCHIVE_LAST_DAY - ARCHIVE_FIRST_DAY).days
    archived_measures = np.round(
        np.clip(np.exp(rng.normal(np.log((m_low + m_high) / 4), 0.7, n_archived)), m_low, m_high),
        2,
    )
    archived_resampled = archived_measures[rng.integers(0, n_archived, n_archived)]
    archived_sizes = np.clip(
        np.round(s_low + rng.gamma(2.0, (s_high - s_low) / 6.0, n_archived)), s_low, s_high
    ).astype(int)
    archived_persons = rng.choice(n_people, size=n_archived, p=activity) + 1
    archived_things = rng.integers(n_items, size=n_archived) + 1
    archived_days = np.sort(rng.integers(archive_span + 1, size=n_archived))
    archived_statuses = rng.choice(4, size=n_archived, p=status_weights)
    archived = [
        (
            i + 1,
            int(archived_persons[i]),
            int(archived_things[i]),
            (ARCHIVE_FIRST_DAY + _dt.timedelta(days=int(archived_days[i]))).isoformat(),
            float(archived_measures[i]),
            float(archived_resampled[i]),
            int(archived_sizes[i]),
            d.status_values[archived_statuses[i]],
        )
        for i in range(n_archived)
    ]

    creates = _creates(d)
    header = f"-- {name}: generated by ambitab_gym.generate (domain {d.name}, database {index})"
    tables = (
        (d.entity_table, people),
        (d.item_table, items),
        (d.event_table, events),
        (d.archive_table, archived),
    )
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.executescript("\n".join(creates))
    with connection:  # one transaction
        for table, rows in tables:
            marks = ", ".join("?" * len(rows[0]))
            connection.executemany(
                f"INSERT INTO {table} VALUES ({marks})", [_stored(row) for row in rows]
            )
    return GeneratedDatabase(
        name=name,
        domain=d,
        schema_text=_schema_of(connection),
        connection=connection,
        cities=cities,
        shared_city=shared,
        tiers=tuple(sorted({p[3] for p in people})),
        categories=tuple(sorted({i[2] for i in items})),
        entity_count=n_people,
        header=header,
        creates=tuple(creates),
        tables=tables,
    )
