"""Known answers for the PostgreSQL engine's one-round-trip path (issue 19).

The engine sends ``BEGIN``, the submission wrapped with the server-side row guard and ``LIMIT
max_rows + 1``, the reset and ``ROLLBACK`` as one pipeline (its own three statements prepared
once per connection), sizes flat rows in one pass and reads the first word and parenthesis depths
from the tokens of the whole text. Each of these is checked here against an independent answer:
the same SQL on a plain psycopg connection (rows, column names, value types), result sizes
computed here from ``sys.getsizeof``, and :mod:`ambitab_gym.verify.taskrun`'s lexer.
"""

from __future__ import annotations

import collections
import json
import random
import sys
import threading
import time

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)

from ambitab_gym.corpora import load_corpus
from ambitab_gym.verify.base import Limits, QueryError
from ambitab_gym.verify.postgres import (
    _CHUNK_SHARE,
    _MIN_CHUNK_ROW_CAP,
    PostgresEngine,
    _first_word,
    _flat_row_bytes,
    _guard_fast,
    _row_bytes,
    _tokens,
    database_name,
    load_corpus_databases,
    paren_depths_fast,
    split_one_statement,
)
from ambitab_gym.verify.taskrun import first_keyword, paren_depths, split_statements

EDGE_CASES = [
    "SELECT NULL::int AS a, NULL::text AS b, NULL AS c",
    "SELECT ARRAY[1, 2, NULL]::int[] AS a, ARRAY['x', 'y'] AS b, ARRAY[[1, 2], [3, 4]] AS m",
    """SELECT '{"a": [1, 2, {"b": null}]}'::json AS j, '[1, "x", 2.5]'::jsonb AS jb""",
    "SELECT 1.50::numeric(10, 2) AS n, 'NaN'::numeric AS nan, "
    "123456789012345678901234567890::numeric AS big, 1e-20::float8 AS tiny, "
    "'Infinity'::float8 AS inf, -0.0::float4 AS negzero",
    "SELECT 1 AS a, 2 AS a, 'x' AS \"A b\"",
    "SELECT 1 AS a, 'b' AS b WHERE false",
    "SELECT DATE '2024-02-29' AS d, TIMESTAMP '2024-01-01 12:00' AS ts, "
    "TIMESTAMPTZ '2024-01-01 12:00+02' AS tz, INTERVAL '1 day 2 hours' AS iv, "
    "TIME '23:59:59.5' AS t",
    "SELECT 'héllo ☃' AS s, '\\x00ff'::bytea AS raw, true AS yes, "
    "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS id, 'x'::char(3) AS padded",
    "SELECT ROW(1, 'a') AS r, int4range(1, 5) AS span",
    "SELECT g, g * 1.5 AS half FROM generate_series(1, 40) g ORDER BY g DESC",
    "VALUES (1, 'one'), (2, NULL)",
    "WITH t(x) AS (VALUES (3), (1), (2)) SELECT x FROM t ORDER BY x;",
    "  -- leading comment\n/* block /* nested */ */ SELECT 7 AS seven ;  -- trailing",
    "TABLE pg_catalog.pg_am",
]


@pytest.fixture(scope="module")
def servers(postgres_cluster):  # noqa: F811
    """The reader DSN with BIRD-Interact and Bird loaded, and the corpora."""
    corpora = {name: load_corpus(name) for name in ("bird_interact", "bird")}
    reader = None
    for corpus in corpora.values():
        reader = load_corpus_databases(corpus, postgres_cluster.dsn())
    return reader, corpora


@pytest.fixture(scope="module")
def pair(servers):
    """One engine (one pooled connection) and a plain psycopg connection on the same database."""
    reader, corpora = servers
    dbname = database_name("bird_interact", sorted(corpora["bird_interact"].manifest.databases)[0])
    engine = PostgresEngine(reader, dbname=dbname, pool_size=1, limits=Limits(timeout_s=5.0))
    plain = psycopg.connect(f"{reader} dbname={dbname}", autocommit=True)
    yield engine, plain
    engine.close()
    plain.close()


def _plain(connection: psycopg.Connection, sql: str) -> tuple[tuple[str, ...], list[tuple]]:
    cursor = connection.execute(sql)
    return tuple(d.name for d in cursor.description), cursor.fetchall()


def _kinds(rows: list[tuple]) -> list[tuple[str, ...]]:
    return [tuple(type(value).__name__ for value in row) for row in rows]


def _same_rows(got: list[tuple], expected: list[tuple], sql: str) -> bool:
    if repr(got) == repr(expected) and _kinds(got) == _kinds(expected):
        return True
    # An unordered query may come back in another order under the wrapper's plan.
    unordered = "order by" not in sql.lower()
    return unordered and collections.Counter(map(repr, got)) == collections.Counter(
        map(repr, expected)
    )


def _size(value) -> int:
    """The memory of a loaded value, walked here (the tuple or list and what it holds)."""
    total = sys.getsizeof(value)
    if isinstance(value, (list, tuple)):
        total += sum(_size(item) for item in value)
    elif isinstance(value, dict):
        total += sum(_size(key) + _size(item) for key, item in value.items())
    return total


def _backend_pid(engine: PostgresEngine) -> int:
    return engine.execute("SELECT pg_backend_pid()").rows[0][0]


@pytest.mark.parametrize("sql", EDGE_CASES)
def test_edge_cases_match_a_plain_connection(pair, sql):
    engine, plain = pair
    columns, rows = _plain(plain, sql)
    result = engine.execute(sql)
    assert result.columns == columns
    assert repr(result.rows) == repr(rows)  # (repr: NaN is not equal to itself)
    assert _kinds(result.rows) == _kinds(rows)


def test_one_connection_loads_alternating_column_types_like_a_plain_connection(pair):
    """The connection's one row loader, reused by every query: a column's type changes from
    one query to the next (the same name ``a`` as int, text, array, JSON, date, NULL) and each
    query still loads as a fresh psycopg cursor does."""
    engine, plain = pair
    same_name = [
        "SELECT 1 AS a",
        "SELECT 'x' AS a",
        "SELECT ARRAY[1, 2] AS a",
        """SELECT '{"k": 1}'::jsonb AS a""",
        "SELECT DATE '2024-01-02' AS a",
        "SELECT NULL::int AS a",
        "SELECT 2.5::float8 AS a, 3::int8 AS b",
    ]
    texts = same_name + EDGE_CASES
    order = texts * 3
    random.Random(0).shuffle(order)  # every one three times, the types alternating
    pids = set()
    for sql in order:
        columns, rows = _plain(plain, sql)
        result = engine.execute(sql)
        assert result.columns == columns, sql
        assert repr(result.rows) == repr(rows), sql
        assert _kinds(result.rows) == _kinds(rows), sql
        pids.add(_backend_pid(engine))
    assert len(pids) == 1  # all of them on the one pooled connection


def test_a_query_waiting_for_the_pool_gets_the_connection_put_back(pair):
    """put wakes a thread waiting in get (it notifies only when one waits)."""
    engine, _plain_connection = pair
    held = engine._pool.get(5.0)  # the pool's one connection
    outcome: dict = {}
    waiter = threading.Thread(target=lambda: outcome.update(r=engine.execute("SELECT 41 + 1")))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive() and not outcome  # waiting for the connection
    started = time.monotonic()
    engine._pool.put(held)
    waiter.join(10)
    assert not waiter.is_alive() and time.monotonic() - started < 5
    assert outcome["r"].rows == [(42,)]


@pytest.mark.parametrize("corpus_name", ["bird_interact", "bird"])
def test_bundled_references_match_a_plain_connection(servers, corpus_name):
    reader, corpora = servers
    corpus = corpora[corpus_name]
    engines: dict[str, PostgresEngine] = {}
    plains: dict[str, psycopg.Connection] = {}
    compared = 0
    try:
        for record in corpus.records:
            sql = record.verification.reference_sql
            dbname = database_name(corpus.name, record.verification.database)
            if dbname not in engines:
                engines[dbname] = PostgresEngine(reader, dbname=dbname, pool_size=1)
                plains[dbname] = psycopg.connect(f"{reader} dbname={dbname}", autocommit=True)
            try:
                expected = _plain(plains[dbname], sql)
            except psycopg.Error:
                # (a reference in another dialect) the engine must fail on it too
                with pytest.raises(QueryError):
                    engines[dbname].execute(sql)
                continue
            result = engines[dbname].execute(sql)
            assert result.columns == expected[0], record.id
            assert _same_rows(result.rows, expected[1], sql), record.id
            compared += 1
    finally:
        for engine in engines.values():
            engine.close()
        for connection in plains.values():
            connection.close()
    assert compared >= len(corpus.records) // 2, compared


def test_exactly_max_rows_passes_and_one_more_fails_on_the_same_connection(pair):
    engine, plain = pair
    limits = Limits(max_rows=50, timeout_s=5.0)
    pid = _backend_pid(engine)
    rows = engine.execute("SELECT g FROM generate_series(1, 50) g", limits=limits).rows
    assert rows == [(g,) for g in range(1, 51)]
    with pytest.raises(QueryError) as caught:
        engine.execute("SELECT g FROM generate_series(1, 51) g", limits=limits)
    assert caught.value.category == "too_many_rows"
    # The server stops after max_rows + 1 rows: a huge result fails fast, the connection stays.
    start = time.monotonic()
    with pytest.raises(QueryError) as caught:
        engine.execute(  # (streams: generate_series would be materialized first)
            "SELECT 1 FROM pg_class a, pg_class b, pg_class c, pg_class d", limits=limits
        )
    assert caught.value.category == "too_many_rows"
    assert time.monotonic() - start < 2.0
    assert _backend_pid(engine) == pid


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT repeat('x', g) AS s, g FROM generate_series(1, 30) g ORDER BY g",
        "SELECT ARRAY[g, g + 1] AS a, json_build_object('k', repeat('y', g)) AS j "
        "FROM generate_series(1, 30) g ORDER BY g",
        "SELECT 'é' || repeat('z', 700) AS s",
    ],
)
def test_the_result_cap_is_exact_at_the_byte(pair, sql):
    engine, plain = pair
    _, rows = _plain(plain, sql)
    total = sum(_size(row) for row in rows)
    assert engine.execute(sql, limits=Limits(max_result_bytes=total)).rows == rows
    with pytest.raises(QueryError) as caught:
        engine.execute(sql, limits=Limits(max_result_bytes=total - 1))
    assert caught.value.category == "too_large"
    assert "the result is larger" in caught.value.message


@pytest.mark.parametrize(
    "sql",
    [
        *EDGE_CASES,
        "SELECT g, repeat('v', g % 50) AS s, g::float8 / 3 AS f FROM generate_series(1, 1000) g",
        "SELECT g FROM generate_series(1, 64) g",
        "SELECT g FROM generate_series(1, 65) g",
    ],
)
def test_chunked_rows_match_single_rows(pair, sql):
    engine, plain = pair
    assert engine._chunk_rows > 1
    chunked = engine.execute(sql)
    engine._chunk_rows = 1
    try:
        single = engine.execute(sql)
    finally:
        del engine._chunk_rows  # back to the class's
    assert chunked.columns == single.columns
    assert repr(chunked.rows) == repr(single.rows)
    assert _kinds(chunked.rows) == _kinds(single.rows)


def test_a_row_over_the_chunk_guard_but_within_the_cap_comes_back(pair):
    engine, plain = pair
    limits = Limits(max_result_bytes=2**22, timeout_s=5.0)  # chunk guard: 4 KiB a row
    sql = "SELECT g, repeat('w', 100000 * (g % 2)) AS s FROM generate_series(1, 5) g ORDER BY g"
    pid = _backend_pid(engine)
    result = engine.execute(sql, limits=limits)
    assert result.rows == _plain(plain, sql)[1]
    assert [len(s) for _, s in result.rows] == [100000, 0, 100000, 0, 100000]
    assert _backend_pid(engine) == pid  # (the second run used the same connection)
    # A row beyond the cap itself: over the chunk guard, then refused at the cap.
    with pytest.raises(QueryError) as caught:
        engine.execute("SELECT repeat('w', 1500000) AS s", limits=Limits(max_result_bytes=2**20))
    assert caught.value.category == "too_large"
    assert "the server refused" in caught.value.message


def test_the_second_run_gets_only_the_time_the_first_left(pair):
    engine, _ = pair
    limits = Limits(max_result_bytes=2**22, timeout_s=1.0)  # chunk guard: 4 KiB a row
    sql = "SELECT pg_sleep(0.6) AS pause, repeat('x', 100000) AS s"
    start = time.monotonic()
    with pytest.raises(QueryError) as caught:
        engine.execute(sql, limits=limits)
    assert caught.value.category == "timeout"
    assert time.monotonic() - start < 1.5  # (not 1.2 s of sleep and then a result)
    quick = engine.execute("SELECT repeat('x', 100000) AS s", limits=limits).rows
    assert len(quick[0][0]) == 100000


def test_the_cap_is_exact_across_chunks(pair):
    engine, plain = pair
    sql = "SELECT g, repeat('c', 2000 + g % 7) AS s FROM generate_series(1, 2500) g ORDER BY g"
    _, rows = _plain(plain, sql)
    total = sum(_size(row) for row in rows)
    # (rows come in chunks at this cap)
    assert total // (engine._chunk_rows * _CHUNK_SHARE) >= _MIN_CHUNK_ROW_CAP
    assert engine.execute(sql, limits=Limits(max_result_bytes=total)).rows == rows
    with pytest.raises(QueryError) as caught:
        engine.execute(sql, limits=Limits(max_result_bytes=total - 1))
    assert caught.value.category == "too_large"
    assert "the result is larger" in caught.value.message


def test_the_server_refuses_a_row_one_byte_over_the_cap(pair):
    engine, plain = pair
    sql = "SELECT repeat('x', 5000) AS s, 1 AS n"
    (server_size,) = plain.execute(f"SELECT pg_column_size(q.*) FROM ({sql}) AS q").fetchone()
    pid = _backend_pid(engine)
    with pytest.raises(QueryError) as caught:
        engine.execute(sql, limits=Limits(max_result_bytes=server_size - 1))
    assert caught.value.category == "too_large"
    assert "the server refused" in caught.value.message
    # At the cap the server sends it; its loaded size (larger) is then over the cap here.
    with pytest.raises(QueryError) as caught:
        engine.execute(sql, limits=Limits(max_result_bytes=server_size))
    assert caught.value.category == "too_large"
    assert "the result is larger" in caught.value.message
    row = _plain(plain, sql)[1][0]
    assert engine.execute(sql, limits=Limits(max_result_bytes=_size(row))).rows == [row]
    assert _backend_pid(engine) != pid  # (an oversized result drops the connection)


def test_the_engine_statements_survive_failures_and_cannot_be_dropped(pair):
    engine, _ = pair
    pid = _backend_pid(engine)
    for sql, category in [
        ("SELECT 1 / 0", "runtime"),
        ("DEALLOCATE ALL", "rejected"),
        ("SELECT 1; DEALLOCATE ALL", "rejected"),
        ("SELECT * FROM (DEALLOCATE ALL) x", "syntax"),
    ]:
        with pytest.raises(QueryError) as caught:
            engine.execute(sql)
        assert caught.value.category == category, sql
    assert engine.execute("SELECT 5 AS five").rows == [(5,)]
    assert _backend_pid(engine) == pid
    names = engine.execute("SELECT name FROM pg_prepared_statements ORDER BY name").rows
    assert names == [("ambitab_begin",), ("ambitab_reset",), ("ambitab_rollback",)]


def test_every_query_still_runs_read_only_with_its_timeout(pair):
    engine, _ = pair
    settings_row = engine.execute(
        "SELECT current_setting('transaction_read_only'), current_setting('statement_timeout')"
    ).rows
    assert settings_row == [("on", "5s")]
    start = time.monotonic()
    with pytest.raises(QueryError) as caught:
        engine.execute("SELECT pg_sleep(10)", limits=Limits(timeout_s=0.3))
    assert caught.value.category == "timeout"
    assert time.monotonic() - start < 2.0


def test_flat_row_bytes_agree_with_the_walk(pair):
    engine, _ = pair
    for sql in EDGE_CASES:
        for row in engine.execute(sql).rows:
            assert _row_bytes(row) == _size(row)
            if not any(isinstance(value, (list, tuple, dict)) for value in row):
                assert _flat_row_bytes(row) == _row_bytes(row)


def test_seeds_are_fresh_and_in_range(pair):
    engine, _ = pair
    connection = engine._pool.get(5.0)
    try:
        seeds = [connection.next_seed() for _ in range(300)]
    finally:
        engine._pool.put(connection)
    assert all(-1.0 <= seed < 1.0 for seed in seeds)
    assert len(set(seeds)) == len(seeds)
    assert min(seeds) < -0.5 and max(seeds) > 0.5


TRICKY = [
    "SELECT 1",
    ";SELECT 1",
    " ; /* a /* b */ */ -- c\n  select (1)",
    "/* /* */ SELECT */ COMMIT",
    "-- x\nUPDATE t SET a = 1;",
    "'abc'",
    '"tbl"',
    "$q$ SELECT $q$",
    "E'x' AS y",
    "(SELECT 1)",
    "WITH x AS (SELECT ')' AS p) SELECT * FROM x;",
    "SELECT 1) AS z (SELECT 2",
    "SELECT ((1) -- )\n",
    "select/*(*/1",
    "VALUES (1), (2);;",
    "",
    "  \n ",
]


def _check_lexing(text: str) -> None:
    statements = split_statements(text, dialect="postgres")
    assert split_one_statement(text) == statements
    fast = _guard_fast(text)
    if len(statements) != 1 or "`" in text:
        assert fast is None
        return
    tokens = _tokens(text, '"')
    assert _first_word(text, tokens) == first_keyword(statements[0])
    assert paren_depths_fast(text, tokens) == paren_depths(statements[0], dialect="postgres")
    # The guard's fast path, where it answers, answers the same as taskrun's lexer.
    if fast is not None:
        assert fast == (
            statements[0],
            first_keyword(statements[0]),
            *paren_depths(statements[0], dialect="postgres"),
        )
    # ... and it answers every one-statement text without comments, "$", backslashes and
    # leading semicolons.
    special = ("--", "/*", "$", "\\")
    if not any(mark in text for mark in special) and not text.lstrip().startswith(";"):
        assert fast is not None


@pytest.mark.parametrize("text", TRICKY)
def test_first_word_and_depths_from_the_whole_text(text):
    _check_lexing(text)


def test_first_word_and_depths_on_every_bundled_query():
    for name in ("bird_interact", "bird", "spider"):
        try:
            corpus = load_corpus(name)
        except Exception:  # noqa: BLE001 - a corpus this checkout does not bundle
            continue
        for record in corpus.records:
            _check_lexing(record.verification.reference_sql)
            _check_lexing(record.verification.reference_sql + " ;\n-- done")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=" ;-/*'\"$()\nEeSLCTabcq_1xU", max_size=40))
def test_first_word_and_depths_on_random_text(text):
    _check_lexing(text)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet=" ;'\"()\n\t\u2003EeSLCTabc_1xU", max_size=40))
def test_guard_fast_path_on_random_text_without_comments(text):
    """Texts the fast path answers (quotes, names, semicolons, parentheses, no comments)."""
    _check_lexing(text)


def test_json_values_load_like_a_plain_connection(pair):
    engine, plain = pair
    sql = """SELECT '{"deep": [[[1]]], "s": "t"}'::jsonb AS j"""
    assert engine.execute(sql).rows == _plain(plain, sql)[1]
    assert json.dumps(engine.execute(sql).rows[0][0], sort_keys=True) == (
        '{"deep": [[[1]]], "s": "t"}'
    )
