"""Known answers for the DuckDB worker's fast path: a SQL text it has seen runs from its kept parse.

The worker keeps the parsed ``SELECT`` statement of a text (``PARSED_CACHE_ENTRIES``, least
recently used out) and runs a copy of it the next time, instead of parsing the text again. A
repeated text must give what its first run gave and what a plain in-process DuckDB connection
returns - same values, same Python types, same columns - for every kind of value, for empty
results and for results over the byte cap; and nothing a kept statement ran may reach the next
query (seeds, variables, prepared statements, temporary objects), nor may it outlive its timeout
or take down more than the worker.
"""

from __future__ import annotations

import datetime
import decimal
import math
import os
import pickle
import uuid

import duckdb
import pytest

from ambitab_gym.verify.base import Limits, QueryError
from ambitab_gym.verify.duckdb import SANDBOX_CONFIG, DuckDBEngine, build_duckdb
from ambitab_gym.verify.worker import (
    PARSED_CACHE_ENTRIES,
    PARSED_CACHE_MAX_CHARS,
    _DuckDBSession,
    result_bytes,
    safe_loads,
)

SCRIPT = """
CREATE TABLE t (
  i INTEGER, h HUGEINT, d DECIMAL(18, 3), f DOUBLE, v VARCHAR, bl BLOB, da DATE,
  ts TIMESTAMP, tz TIMESTAMPTZ, l INTEGER[], st STRUCT(a INTEGER, b VARCHAR),
  m MAP(VARCHAR, INTEGER)
);
INSERT INTO t VALUES
  (1, 170141183460469231731687303715884105727, 12345.678, 0.1, 'Ada ✓ 漢字', '\\x00\\xFF'::BLOB,
   DATE '2020-02-29', TIMESTAMP '2024-01-02 03:04:05.123456', TIMESTAMPTZ '2024-01-02 03:04:05+00',
   [1, NULL, 3], {'a': 1, 'b': 'x'}, MAP {'k': 1}),
  (-2, 0, -0.001, -0.0, '', ''::BLOB, DATE '1970-01-01', TIMESTAMP '1900-01-01 00:00:00',
   TIMESTAMPTZ '1999-12-31 23:00:00+00', [], {'a': NULL, 'b': NULL}, MAP {}),
  (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
CREATE TABLE words AS SELECT range AS n, 'w' || range AS w FROM range(3000);
"""

#: One query per kind of value (and shape of result), each run several times.
QUERIES = {
    "ints": "SELECT i, h FROM t ORDER BY i NULLS LAST",
    "floats": "SELECT f, f * 3 AS g, 1e308 * 10 AS inf, 'nan'::DOUBLE AS nan FROM t ORDER BY i",
    "decimals": "SELECT d, d * 2 AS twice, CAST(1.5 AS DECIMAL(38, 10)) AS wide FROM t ORDER BY i",
    "nulls": "SELECT NULL AS nothing, CAST(NULL AS INTEGER) AS typed, i FROM t ORDER BY i",
    "strings": "SELECT v, bl, upper(v) AS up, v || '|' AS piped FROM t ORDER BY i",
    "dates": "SELECT da, ts, da + INTERVAL 1 DAY AS next, ts - TIMESTAMP '1900-01-01' AS span "
    "FROM t ORDER BY i",
    "nested": "SELECT l, st, m, [st, st] AS structs, {'x': l} AS wrapped FROM t ORDER BY i",
    "empty": "SELECT v AS name, i FROM t WHERE false",
    "many": "SELECT n, w, n / 7 AS q, CAST(n AS DECIMAL(9, 2)) / 3 AS dq FROM words ORDER BY n",
    "aggregate": "SELECT count(*) AS c, sum(n) AS s, avg(n) AS a, string_agg(w, ',') AS all_w "
    "FROM words",
    # statement shapes whose parse trees the binder rewrites (each run binds its own copy)
    "shapes": "WITH c AS (SELECT n % 3 AS k, n FROM words WHERE n < 30) SELECT k, "
    "count(*) OVER (PARTITION BY k) AS per_k, row_number() OVER (ORDER BY n) AS rn FROM c "
    "WHERE n IN (SELECT n FROM words WHERE n % 2 = 0) UNION ALL SELECT 99, 1, 100 "
    "ORDER BY rn LIMIT 20",
    "lambdas": "SELECT list_transform([1, 2, n], lambda x: x * 2) AS doubled, "
    "list_filter([n, n + 1], lambda x: x % 2 = 0) AS even, CASE WHEN n > 1 THEN 'big' END AS size "
    "FROM words WHERE n < 4 ORDER BY n",
    "recursive": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 50) "
    "SELECT sum(i) AS total, max(i) AS top FROM r",
    "values": "SELECT * FROM (VALUES (1, 'a'), (2, NULL)) AS v(x, y) ORDER BY x",
    "struct_star": "SELECT st.*, unnest(l) AS item FROM t WHERE l IS NOT NULL ORDER BY item",
}


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("speed") / "t.duckdb"
    build_duckdb(SCRIPT, path)
    return path


@pytest.fixture(scope="module")
def engine(db_path):
    engine = DuckDBEngine(db_path, limits=Limits(timeout_s=20.0, memory_limit_mb=256))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def direct(db_path):
    connection = duckdb.connect(str(db_path), read_only=True)
    yield connection
    connection.close()


@pytest.fixture
def session(db_path, tmp_path):
    """The worker's DuckDB session, in this process (to look at what it keeps), on a copy of
    the file (DuckDB opens a file with one configuration per process)."""
    copy = tmp_path / "session.duckdb"
    copy.write_bytes(db_path.read_bytes())
    config = dict(SANDBOX_CONFIG, memory_limit="256MB", threads=1)
    session = _DuckDBSession(duckdb, str(copy), config)
    yield session
    session.close()


def _same(a, b) -> bool:
    """Equal values of identical types, nested containers compared element by element."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, float) and a == 0.0:
        return math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


def _plain_tz(rows: list) -> list:
    """DuckDB's rows with a TIMESTAMPTZ as the worker sends it (a fixed offset, same instant)."""
    out = []
    for row in rows:
        cells = []
        for value in row:
            if isinstance(value, datetime.datetime) and value.tzinfo is not None:
                value = value.replace(tzinfo=datetime.timezone(value.utcoffset()))
            cells.append(value)
        out.append(tuple(cells))
    return out


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_a_repeated_text_gives_its_first_answer_and_duckdbs(engine, direct, name):
    sql = QUERIES[name]
    first = engine.execute(sql)  # parsed (possibly kept from an earlier test: the same worker)
    fresh = engine.execute(f"{sql} -- never seen: parsed now")
    expected = direct.execute(sql)
    columns = tuple(d[0] for d in expected.description)
    rows = _plain_tz(expected.fetchall())
    for _ in range(3):  # from the kept parse
        again = engine.execute(sql)
        for result in (first, fresh, again):
            assert result.columns == columns
            assert len(result.rows) == len(rows)
            assert all(type(row) is tuple for row in result.rows)
            assert _same(result.rows, rows), name


def test_known_answers_from_a_kept_parse(engine):
    sql = "SELECT i, h, d, f, v, bl, da, l, st, m FROM t ORDER BY i NULLS LAST"
    for _ in range(3):
        first, second, nulls = engine.execute(sql).rows
        assert first == (
            -2, 0, decimal.Decimal("-0.001"), -0.0, "", b"", datetime.date(1970, 1, 1), [],
            {"a": None, "b": None}, {},
        )  # fmt: skip
        assert second == (
            1, 2**127 - 1, decimal.Decimal("12345.678"), 0.1, "Ada ✓ 漢字", b"\x00\xff",
            datetime.date(2020, 2, 29), [1, None, 3], {"a": 1, "b": "x"}, {"k": 1},
        )  # fmt: skip
        assert type(second[2]) is decimal.Decimal and type(first[3]) is float
        assert nulls == (None,) * 10


def test_results_over_the_byte_cap_fail_every_time_and_under_it_come_back(engine):
    cap = 2**20
    rows = 100
    length = (cap - rows * (56 + 40)) // rows
    assert (
        result_bytes([("x" * length,)] * rows) <= cap < result_bytes([("x" * (length + 1),)] * rows)
    )
    limits = Limits(timeout_s=20.0, memory_limit_mb=256, max_result_bytes=cap)
    under = f"SELECT repeat('x', {length}) AS s FROM range({rows})"
    over = f"SELECT repeat('x', {length + 1}) AS s FROM range({rows})"
    for _ in range(3):
        assert engine.execute(under, limits=limits).rows == [("x" * length,)] * rows
        with pytest.raises(QueryError) as caught:
            engine.execute(over, limits=limits)
        assert caught.value.category == "too_large"
    huge = "SELECT n, repeat(w, 2000) AS long FROM words"  # about 30 MB of text
    for _ in range(2):
        with pytest.raises(QueryError) as caught:
            engine.execute(huge, limits=limits)
        assert caught.value.category == "too_large"


def test_the_session_keeps_the_parse_and_runs_a_copy(session):
    sql = "SELECT n, w FROM words WHERE n < 3 ORDER BY n"
    kept = session.parse(sql, 5.0)
    assert session.parse(sql, 5.0) is kept  # a repeat does not parse again
    for _ in range(3):
        reply = session.run(sql, 5.0, 100, 2**20)
        session.tidy()
        assert reply == ("ok", ("n", "w"), [(0, "w0"), (1, "w1"), (2, "w2")])
    assert kept.query == sql  # executing never changed the kept statement


def test_only_single_selects_are_kept_and_refusals_stay_refusals(session):
    for sql, category in [
        ("DELETE FROM words", "rejected"),
        ("SELECT 1; SELECT 2", "rejected"),
        ("SELEC 1", "syntax"),
        ("SELECT 1\x00; DROP TABLE t", "syntax"),
        ("SET VARIABLE x = 1", "rejected"),
        ("PREPARE p AS SELECT 1", "rejected"),
        ("EXECUTE p", "rejected"),
        ("CREATE TEMP TABLE scratch AS SELECT 1 AS x", "rejected"),
        ("UPDATE EXTENSIONS", "rejected"),
    ]:
        for _ in range(2):
            reply = session.run(sql, 5.0, 100, 2**20)
            session.tidy()
            assert reply[:2] == ("error", category), (sql, reply)
        assert sql not in session._parsed


def test_the_kept_parses_are_bounded(session):
    texts = [f"SELECT {n} AS n" for n in range(PARSED_CACHE_ENTRIES + 40)]
    for sql in texts:
        assert session.run(sql, 5.0, 10, 2**20)[2] == [(int(sql.split()[1]),)]
        session.tidy()
        assert len(session._parsed) <= PARSED_CACHE_ENTRIES
    assert texts[0] not in session._parsed and texts[-1] in session._parsed
    # least recently used out: a text used again stays while newer ones arrive
    session.run(texts[-PARSED_CACHE_ENTRIES], 5.0, 10, 2**20)
    session.tidy()
    for n in range(10):
        session.run(f"SELECT {n} AS again", 5.0, 10, 2**20)
        session.tidy()
    assert texts[-PARSED_CACHE_ENTRIES] in session._parsed
    assert texts[-PARSED_CACHE_ENTRIES + 1] not in session._parsed
    long = "SELECT 1 AS n" + " " * PARSED_CACHE_MAX_CHARS
    assert session.run(long, 5.0, 10, 2**20)[2] == [(1,)]
    session.tidy()
    assert long not in session._parsed


def _random_after_setseed() -> float:
    connection = duckdb.connect()
    connection.execute("SELECT setseed(0.5)")
    return connection.execute("SELECT random()").fetchone()[0]


def test_nothing_a_kept_statement_sets_reaches_the_next_query(engine):
    seeded = _random_after_setseed()
    for _ in range(3):  # the first round parses, the next ones run kept statements
        engine.execute("SELECT setseed(0.5) AS s")
        assert engine.execute("SELECT random() AS r").rows[0][0] != seeded
        engine.execute("SELECT * FROM query('SELECT setseed(0.5)')")
        assert engine.execute("SELECT random() AS r").rows[0][0] != seeded
        assert engine.execute("SELECT getvariable('x') AS x").rows == [(None,)]
        for sql in ("SET VARIABLE x = 1", "PREPARE p AS SELECT 1", "EXECUTE p"):
            with pytest.raises(QueryError) as caught:
                engine.execute(sql)
            assert caught.value.category == "rejected"
        with pytest.raises(QueryError):
            engine.execute("CREATE TEMP TABLE scratch AS SELECT 1 AS x")
        with pytest.raises(QueryError) as caught:
            engine.execute("SELECT * FROM scratch")
        assert caught.value.category == "runtime"  # no such table: nothing was created


def test_a_kept_statement_cannot_outlive_its_timeout(engine):
    slow = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
    limits = Limits(timeout_s=0.5, memory_limit_mb=256)
    engine.execute("SELECT 1", limits=limits)
    pid, restarts = engine.worker_pid, engine.restarts
    for _ in range(2):
        with pytest.raises(QueryError) as caught:
            engine.execute(slow, limits=limits)
        assert caught.value.category == "timeout"
        # the next query's own verdict, not the last one's timeout
        with pytest.raises(QueryError) as caught:
            engine.execute("SELEC 1", limits=limits)
        assert caught.value.category == "syntax"
    assert engine.execute("SELECT count(*) AS c FROM words", limits=limits).rows == [(3000,)]
    assert engine.worker_pid == pid and engine.restarts == restarts


def test_a_kept_memory_bomb_still_fails_inside_the_worker(engine):
    bomb = "SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(5000)"
    for _ in range(2):
        with pytest.raises(QueryError) as caught:
            engine.execute(bomb)
        assert caught.value.category in {"too_large", "runtime"}
        assert engine.execute("SELECT w FROM words WHERE n = 2").rows == [("w2",)]


def test_reply_unpickling_admits_the_plain_types_and_nothing_else():
    values = [
        datetime.date(2024, 1, 2),
        datetime.datetime(
            2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
        ),
        datetime.time(1, 2, 3),
        datetime.timedelta(days=1, microseconds=5),
        decimal.Decimal("-1.50"),
        uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        {1, 2},
        frozenset({3}),
        bytearray(b"ab"),
        complex(1, 2),
        range(3),
        slice(1, 2),
    ]
    reply = ("ok", ("v",), [(value,) for value in values])
    for protocol in (pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL):  # the worker's
        back = safe_loads(pickle.dumps(reply, protocol=protocol))
        assert back == reply
        assert [type(row[0]) for row in back[2]] == [type(value) for value in values]

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    forbidden = [
        Evil(),
        eval,
        getattr,
        datetime.date.fromisoformat,  # a dotted name inside an allowed module
        pickle.loads,
    ]
    for value in forbidden:
        for protocol in (2, pickle.HIGHEST_PROTOCOL):
            with pytest.raises(pickle.UnpicklingError, match="forbidden"):
                safe_loads(pickle.dumps(("ok", ("v",), [(value,)]), protocol=protocol))
