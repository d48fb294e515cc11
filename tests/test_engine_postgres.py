"""The PostgreSQL engine and corpus loader, on a throwaway PostgreSQL cluster."""

from __future__ import annotations

import datetime
import decimal
import re
import threading
import time

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)

from ambitab_gym.corpora import load_corpus
from ambitab_gym.verify.base import Limits, QueryError
from ambitab_gym.verify.duckdb import DuckDBEngine
from ambitab_gym.verify.postgres import (
    PostgresEngine,
    _tokens,
    database_name,
    load_corpus_databases,
    paren_depths_fast,
    split_one_statement,
)
from ambitab_gym.verify.taskrun import paren_depths, split_statements

CORPUS = "bird_interact"


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(CORPUS)


@pytest.fixture(scope="module")
def reader_dsn(postgres_cluster, corpus):  # noqa: F811
    return load_corpus_databases(corpus, postgres_cluster.dsn())


@pytest.fixture(scope="module")
def first_db(corpus):
    return sorted(corpus.manifest.databases)[0]


@pytest.fixture
def engine(reader_dsn, first_db):
    engine = PostgresEngine(
        reader_dsn, dbname=database_name(CORPUS, first_db), limits=Limits(timeout_s=1.5)
    )
    yield engine
    engine.close()


def _admin(cluster, dbname="postgres"):
    return psycopg.connect(cluster.dsn(dbname), autocommit=True)


def _script_tables(corpus, database) -> list[str]:
    script = (corpus.path / corpus.manifest.databases[database].file).read_text()
    return re.findall(r"CREATE TABLE (\w+)", script)


def test_loader_builds_one_database_each_and_skips_up_to_date_ones(
    postgres_cluster,  # noqa: F811
    corpus,
    reader_dsn,
):
    names = {database_name(CORPUS, db): db for db in corpus.manifest.databases}
    with _admin(postgres_cluster) as admin:
        found = dict(
            admin.execute(
                "SELECT datname, oid FROM pg_database WHERE datname = ANY(%s)", [list(names)]
            ).fetchall()
        )
        assert set(found) == set(names)
        load_corpus_databases(corpus, postgres_cluster.dsn())
        again = dict(admin.execute("SELECT datname, oid FROM pg_database").fetchall())
        assert {name: again[name] for name in names} == found  # nothing rebuilt
        rolsuper, createdb = admin.execute(
            "SELECT rolsuper, rolcreatedb FROM pg_roles WHERE rolname = 'ambitab_reader'"
        ).fetchone()
        assert (rolsuper, createdb) == (False, False)
    # Every table holds the same rows as the DuckDB build of the same script.
    for name, database in names.items():
        duck = DuckDBEngine(corpus.database_file(database, "duckdb"))
        with _admin(postgres_cluster, name) as target:
            try:
                for table in _script_tables(corpus, database):
                    expected = duck.execute(f"SELECT count(*) FROM {table}").rows[0][0]
                    got = target.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                    assert (table, got) == (table, expected)
            finally:
                duck.close()


def test_forced_reload_rebuilds(postgres_cluster, reader_dsn):  # noqa: F811
    small = load_corpus(CORPUS)
    name = database_name(CORPUS, sorted(small.manifest.databases)[-1])
    with _admin(postgres_cluster) as admin:
        query = "SELECT oid FROM pg_database WHERE datname = %s"
        before = admin.execute(query, [name]).fetchone()[0]
        load_corpus_databases(small, postgres_cluster.dsn(), force=True)
        after = admin.execute(query, [name]).fetchone()[0]
    assert after != before


def test_refuses_privileged_roles(postgres_cluster, reader_dsn, first_db):  # noqa: F811
    admin_engine = PostgresEngine(postgres_cluster.dsn(), dbname=database_name(CORPUS, first_db))
    with pytest.raises(QueryError) as caught:
        admin_engine.execute("SELECT 1")
    assert caught.value.category == "engine" and "superuser" in caught.value.message
    admin_engine.close()
    with _admin(postgres_cluster) as admin:
        admin.execute("DROP ROLE IF EXISTS file_reader")
        admin.execute("CREATE ROLE file_reader LOGIN IN ROLE pg_read_server_files")
    # (the corpus databases admit only the reader; the maintenance database admits anyone)
    risky = PostgresEngine(postgres_cluster.dsn(user="file_reader"), dbname="postgres")
    with pytest.raises(QueryError) as caught:
        risky.execute("SELECT 1")
    assert "pg_read_server_files" in caught.value.message
    risky.close()


def test_values_types_and_empty_results(engine):
    result = engine.execute(
        "SELECT 1 AS n, 2.50::numeric(5, 2) AS price, DATE '2024-02-29' AS day, 'x' AS s, "
        "NULL::int AS nothing"
    )
    assert result.columns == ("n", "price", "day", "s", "nothing")
    assert result.rows == [(1, decimal.Decimal("2.50"), datetime.date(2024, 2, 29), "x", None)]
    empty = engine.execute("SELECT 1 AS a, 'b' AS b WHERE false")
    assert empty.columns == ("a", "b") and empty.rows == []
    assert engine.execute("VALUES (1), (2)").rows == [(1,), (2,)]
    assert engine.execute("SELECT 3;").rows == [(3,)]


def test_large_results_come_back_in_order_across_chunks(engine):
    rows = engine.execute("SELECT g FROM generate_series(1, 25000) g ORDER BY g").rows
    assert rows == [(g,) for g in range(1, 25001)]
    with pytest.raises(QueryError) as caught:
        engine.execute("SELECT g FROM generate_series(1, 101) g", limits=Limits(max_rows=100))
    assert caught.value.category == "too_many_rows"
    with pytest.raises(QueryError) as caught:
        engine.execute("SELECT repeat('x', 1000000) FROM generate_series(1, 100)")
    assert caught.value.category == "too_large"


@pytest.mark.parametrize(
    ("sql", "category"),
    [
        ("SELECT 1; SELECT 2", "rejected"),
        ("DELETE FROM pg_class", "rejected"),
        ("  -- note\n /* more */ UPDATE x SET a = 1", "rejected"),
        ("WITH d AS (DELETE FROM pg_class RETURNING *) SELECT * FROM d", "rejected"),
        ("SHOW search_path", "rejected"),
        ("SELECT * FROM pg_ls_dir('.')", "rejected"),
        ("SELECT relname FROM pg_class FOR UPDATE", "rejected"),
        ("SELEC 1", "syntax"),
        ("SELECT nosuch_column FROM pg_class", "runtime"),
        ("SELECT 1 / 0", "runtime"),
        ("", "rejected"),
    ],
)
def test_refusals_and_errors(engine, sql, category):
    with pytest.raises(QueryError) as caught:
        engine.execute(sql)
    assert caught.value.category == category
    assert engine.execute("SELECT 7").rows == [(7,)]


def test_every_query_runs_in_its_own_read_only_transaction(postgres_cluster, engine):  # noqa: F811
    settings = engine.execute(
        "SELECT current_setting('transaction_read_only'), current_setting('statement_timeout'), "
        "txid_current_if_assigned() IS NULL"
    ).rows
    assert settings == [("on", "1500ms", True)]
    default_path = engine.execute("SELECT current_setting('search_path')").rows
    engine.execute("SELECT set_config('search_path', 'nowhere', false)")
    assert engine.execute("SELECT current_setting('search_path')").rows == default_path
    engine.execute("SELECT pg_advisory_lock(4242)")
    with _admin(postgres_cluster) as admin:  # (agents may not read pg_locks)
        held = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242"
        ).fetchone()
    assert held == (0,)


def test_timeout_then_the_engine_keeps_working(engine):
    with pytest.raises(QueryError) as caught:
        engine.execute("SELECT pg_sleep(30)", limits=Limits(timeout_s=0.3))
    assert caught.value.category == "timeout"
    assert engine.execute("SELECT 1").rows == [(1,)]


def test_a_connection_that_died_while_idle_is_replaced(postgres_cluster, reader_dsn, first_db):  # noqa: F811
    engine = PostgresEngine(reader_dsn, dbname=database_name(CORPUS, first_db), pool_size=1)
    try:
        pid = engine.execute("SELECT pg_backend_pid()").rows[0][0]
        with _admin(postgres_cluster) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        new_pid = engine.execute("SELECT pg_backend_pid()").rows[0][0]
        assert new_pid != pid
    finally:
        engine.close()


def test_threads_share_the_pool(reader_dsn, first_db):
    engine = PostgresEngine(reader_dsn, dbname=database_name(CORPUS, first_db), pool_size=2)
    results: list = []

    def run(k: int) -> None:
        results.append((k, engine.execute(f"SELECT count(*) FROM generate_series(1, {k})").rows))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.close()
    assert sorted(results) == [(k, [(k,)]) for k in range(1, 9)]


def test_schema_text_lists_every_table_in_creation_order(engine, corpus, first_db):
    text = engine.schema_text()
    tables = re.findall(r"CREATE TABLE (\w+) \(", text)
    assert tables == _script_tables(corpus, first_db)
    assert "PRIMARY KEY (" in text and "REFERENCES" in text
    assert text.endswith(");")


def test_corpus_opener_reads_the_dsn_from_options(postgres_cluster, reader_dsn, first_db):  # noqa: F811
    corpus = load_corpus(CORPUS, engine_override="postgres", options={"dsn": reader_dsn})
    engine = corpus.open_engine("duckdb", first_db)
    try:
        assert isinstance(engine, PostgresEngine)
        assert engine.dbname == database_name(CORPUS, first_db)
        assert engine.execute("SELECT current_user").rows == [("ambitab_reader",)]
    finally:
        engine.close()
    schema = corpus.schema_text(first_db)
    assert re.findall(r"CREATE TABLE (\w+) \(", schema) == _script_tables(corpus, first_db)
    with pytest.raises(ValueError, match="engine_options"):
        load_corpus(CORPUS, engine_override="postgres").open_engine("duckdb", first_db)


def test_corpus_opener_can_load_first(postgres_cluster):  # noqa: F811
    with _admin(postgres_cluster) as admin:
        admin.execute("DROP ROLE IF EXISTS second_reader")
    dsn = postgres_cluster.dsn(user="second_reader")
    options = {"dsn": dsn, "load_dsn": postgres_cluster.dsn()}
    corpus = load_corpus(CORPUS, engine_override="postgres", options=options)
    database = sorted(corpus.manifest.databases)[0]
    engine = corpus.open_engine("postgres", database)
    try:
        assert engine.execute("SELECT current_user").rows == [("second_reader",)]
    finally:
        engine.close()


_LEXEMES = [
    *"aE e_$'\"`;()-/*\\\n\tx1",
    "$q$",
    "E'",
    "--",
    "/*",
    "*/",
    "''",
    "\\'",
    "$$",
    " SELECT ",
]


@settings(max_examples=3000, deadline=None)
@given(sql=st.lists(st.sampled_from(_LEXEMES), max_size=30).map("".join))
def test_statement_guard_lexes_as_taskrun_does(sql):
    """The engine's fast statement split and parenthesis depths are taskrun's, exactly."""
    assert split_one_statement(sql) == split_statements(sql, "postgres")
    assert paren_depths_fast(sql) == paren_depths(sql, "postgres")


@pytest.mark.parametrize(
    ("sql", "pieces", "depths"),
    [
        ("SELECT 1) AS z CROSS JOIN (SELECT 2", ["SELECT 1) AS z CROSS JOIN (SELECT 2"], (-1, 0)),
        ("SELECT ')' AS p; -- ;)\n", ["SELECT ')' AS p"], (0, 0)),
        ("SELECT E'\\';(' AS s; SELECT 2", ["SELECT E'\\';(' AS s", "SELECT 2"], (0, 0)),
        ("SELECT $t$ ; ) $t$ /* /* ) */ ; */ (", ["SELECT $t$ ; ) $t$ /* /* ) */ ; */ ("], (0, 1)),
        ("/* only */ -- a comment", [], (0, 0)),
    ],
)
def test_statement_guard_known_answers(sql, pieces, depths):
    assert split_one_statement(sql) == pieces == split_statements(sql, "postgres")
    assert paren_depths_fast(sql) == depths == paren_depths(sql, "postgres")


# -- one round trip per verification: the pipeline keeps the sandbox ----------------------------

# Attempts to smuggle a second statement past the statement guard (a COMMIT that would end the
# read-only transaction, then a write). Each is refused, or fails, or runs as one harmless query.
_SMUGGLED = [
    "SELECT 1; COMMIT; CREATE TABLE smuggled (x int)",
    "SELECT 1 /* ; */; COMMIT; CREATE TABLE smuggled (x int)",
    "SELECT 1 -- ;\n; COMMIT; CREATE TABLE smuggled (x int)",
    "SELECT $x$;$x$; COMMIT; CREATE TABLE smuggled (x int)",
    "SELECT E'\\';' AS s; COMMIT; CREATE TABLE smuggled (x int)",
    "SELECT E'\\'' AS s; COMMIT; CREATE TABLE smuggled (x int); SELECT '",
    "SELECT 'a'';' AS s; COMMIT; CREATE TABLE smuggled (x int)",
    "SELECT 1 AS a$b$; COMMIT; CREATE TABLE smuggled (x int); SELECT $b$ $b$",
    "SELECT 1) AS q; COMMIT; CREATE TABLE smuggled (x int); SELECT * FROM (SELECT 1",
    "SELECT 1 AS a$b$) AS q; COMMIT; CREATE TABLE smuggled (x int); SELECT * FROM (SELECT $b$ $b$",
    "SELECT U&'\\0027;' AS s; COMMIT; CREATE TABLE smuggled (x int)",
    'SELECT 1 AS ";"; COMMIT; CREATE TABLE smuggled (x int)',
    "SELECT 1 /* /* nested */ ; */; COMMIT; CREATE TABLE smuggled (x int)",
    "COMMIT; CREATE TABLE smuggled (x int)",
    "SELECT * FROM (COMMIT) AS q",
    "SELECT 1 FROM pg_class WHERE false UNION ALL SELECT 1 FROM (ROLLBACK) q",
]


@pytest.mark.parametrize("sql", _SMUGGLED)
def test_smuggled_statements_are_refused_or_harmless(postgres_cluster, reader_dsn, first_db, sql):  # noqa: F811
    dbname = database_name(CORPUS, first_db)
    engine = PostgresEngine(reader_dsn, dbname=dbname, pool_size=1, limits=Limits(timeout_s=1.5))
    try:
        try:
            result = engine.execute(sql)
        except QueryError as error:
            assert error.category in ("rejected", "syntax", "runtime"), error
        else:
            assert len(result.rows) == 1, result  # one query ran, as one query
        # The same connection afterwards: still read-only, still limited, nothing written.
        assert engine.execute(
            "SELECT current_setting('transaction_read_only'), current_setting('statement_timeout')"
        ).rows == [("on", "1500ms")]
    finally:
        engine.close()
    with _admin(postgres_cluster, dbname) as admin:
        assert admin.execute("SELECT to_regclass('smuggled') IS NULL").fetchone() == (True,)


def test_a_failed_query_still_resets_the_session(postgres_cluster, reader_dsn, first_db):  # noqa: F811
    # The error comes after the query took an advisory lock and seeded the generator, so the
    # pipeline's own reset is skipped and the engine's fallback has to do it.
    engine = PostgresEngine(reader_dsn, dbname=database_name(CORPUS, first_db), pool_size=1)
    with _admin(postgres_cluster) as admin:
        admin.execute("SELECT setseed(0.25)")
        seeded = admin.execute("SELECT random()").fetchone()[0]
    try:
        pid = engine.execute("SELECT pg_backend_pid()").rows[0][0]
        with pytest.raises(QueryError) as caught:
            engine.execute(
                "SELECT pg_advisory_lock(4343), setseed(0.25), 1 / (g - 2) "
                "FROM generate_series(1, 2) AS g"
            )
        assert caught.value.category == "runtime"
        (value,) = engine.execute("SELECT random()").rows[0]
        assert engine.execute("SELECT pg_backend_pid()").rows[0][0] == pid  # same connection
        assert value != seeded
        with _admin(postgres_cluster) as admin:
            held = admin.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4343"
            ).fetchone()
        assert held == (0,)
        # And after a success: the pipeline's reset.
        engine.execute("SELECT pg_advisory_lock(4344), setseed(0.25)")
        assert engine.execute("SELECT random()").rows[0][0] != seeded
        with _admin(postgres_cluster) as admin:
            held = admin.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4344"
            ).fetchone()
        assert held == (0,)
    finally:
        engine.close()


def test_a_call_that_ignores_interrupts_is_cut_at_the_limit_plus_grace(reader_dsn, first_db):
    # array_fill checks for no interrupt: statement_timeout waits for it (over a second here);
    # the client stops waiting at the limit plus the grace period and drops the connection.
    engine = PostgresEngine(reader_dsn, dbname=database_name(CORPUS, first_db), pool_size=1)
    try:
        pid = engine.execute("SELECT pg_backend_pid()").rows[0][0]
        begun = time.monotonic()
        with pytest.raises(QueryError) as caught:
            engine.execute(
                "SELECT length(array_to_string(array_fill('xxxxxxxxxx'::text, ARRAY[40000000]), "
                "','))",
                limits=Limits(timeout_s=0.05),
            )
        elapsed = time.monotonic() - begun
        assert caught.value.category == "timeout"
        assert elapsed < 0.05 + (0.5 + 0.005) + 0.6
        # The connection was dropped (statement_timeout alone would have kept it).
        assert engine.execute("SELECT pg_backend_pid()").rows[0][0] != pid
    finally:
        engine.close()


@settings(max_examples=1000, deadline=None)
@given(
    sql=st.lists(st.sampled_from([x for x in _LEXEMES if "`" not in x]), max_size=30).map("".join)
)
def test_one_lexing_serves_both_guards(sql):
    """Without a backtick, the engine lexes once for the split and the depths: same answers."""
    tokens = _tokens(sql, '"')
    assert split_one_statement(sql, tokens) == split_statements(sql, "postgres")
    assert paren_depths_fast(sql, tokens) == paren_depths(sql, "postgres")


def test_changed_limits_reach_the_session_before_the_query(reader_dsn, first_db):
    engine = PostgresEngine(
        reader_dsn,
        dbname=database_name(CORPUS, first_db),
        pool_size=1,
        limits=Limits(timeout_s=1.5),
    )
    check = "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')"
    try:
        assert engine.execute(check).rows == [("1500ms", "1500ms")]
        assert engine.execute(check, limits=Limits(timeout_s=2.0)).rows == [("2s", "2s")]
        with pytest.raises(QueryError) as caught:
            engine.execute("SELECT pg_sleep(5)", limits=Limits(timeout_s=0.25))
        assert caught.value.category == "timeout"
        assert engine.execute(check).rows == [("1500ms", "1500ms")]
    finally:
        engine.close()
