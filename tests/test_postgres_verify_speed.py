"""The PostgreSQL engine's deferred pipeline end, on a real server.

A verification's pipeline asks the server to send the query's results at once (a flush
request) and leaves the rest (the reset, ``ROLLBACK`` and the sync point) to be read and checked
before the connection's next query is sent, or by ``_Connection.settle`` when the pool hands
the connection to anything else. These tests check the claims this rests on:

* no session state of a query (advisory locks, the random seed, ``set_config``) reaches the
  next query, and the server has released it once the connection is settled;
* a server session whose reset failed (its transaction aborted) would refuse a next pipeline:
  its ``BEGIN`` and query do not run (checked straight through libpq; the engine never sends
  one there);
* a connection whose pending end failed or does not come is dropped, and the query runs on a
  fresh connection (a new backend) with the right answer;
* every result of a mixed sequence (matches, failures, too many rows, refusals) on one pooled
  connection equals what a plain psycopg connection returns;
* the comparison's fast path (exact rows before the width check, ``Decimal`` columns with and
  without NULLs) agrees with the slow path on known answers.
"""

from __future__ import annotations

import decimal
import math
import time

import psycopg
import pytest
from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)
from psycopg import pq

from ambitab_gym.corpora import load_corpus
from ambitab_gym.records import CompareRules
from ambitab_gym.verify import Limits, QueryError
from ambitab_gym.verify import postgres as postgres_module
from ambitab_gym.verify.compare import (
    NormalizedReference,
    normalize_rows,
    normalize_rows_reference,
    results_match,
    results_match_reference,
)
from ambitab_gym.verify.postgres import PostgresEngine, database_name, load_corpus_databases

CORPUS = "bird_interact"


@pytest.fixture(scope="module")
def server(postgres_cluster):  # noqa: F811
    corpus = load_corpus(CORPUS)
    reader = load_corpus_databases(corpus, postgres_cluster.dsn())
    database = database_name(CORPUS, sorted(corpus.manifest.databases)[0])
    plain = psycopg.connect(f"{reader} dbname={database}", autocommit=True)
    yield postgres_cluster, reader, database, plain
    plain.close()


@pytest.fixture
def engine(server):
    _cluster, reader, database, _plain = server
    engine = PostgresEngine(reader, dbname=database, pool_size=1)
    yield engine
    engine.close()


def _idle_connection(engine: PostgresEngine):
    """The pool's one idle connection, as it lies in the pool (not settled)."""
    assert len(engine._pool._idle) == 1
    return engine._pool._idle[0]


def _pid(engine: PostgresEngine) -> int:
    return engine.execute("SELECT pg_backend_pid()").rows[0][0]


def _run_pipeline(pgconn, commands: list[bytes]) -> list:
    """Send ``commands`` as one pipeline with a sync; the status of each result (None for the
    NULL after each command's results) up to and including the sync."""
    pgconn.enter_pipeline_mode()
    for command in commands:
        pgconn.send_query_params(command, None)
    pgconn.pipeline_sync()
    statuses = []
    while True:
        result = pgconn.get_result()
        statuses.append(result.status if result is not None else None)
        if result is not None and result.status == pq.ExecStatus.PIPELINE_SYNC:
            break
    pgconn.exit_pipeline_mode()
    return statuses


def test_a_query_leaves_its_end_pending_and_no_state_reaches_the_next(server, engine):
    cluster, _reader, _database, plain = server
    plain.execute("SELECT setseed(0.5)")
    seeded = plain.execute("SELECT random()").fetchone()[0]
    default_work_mem = plain.execute("SHOW work_mem").fetchone()[0]
    pid = _pid(engine)
    engine.execute(
        "SELECT pg_advisory_lock(9191), setseed(0.5), set_config('work_mem', '1234kB', false)"
    )
    connection = _idle_connection(engine)
    # The end of the pipeline is not read yet: the connection is still in pipeline mode.
    assert connection._tail
    assert connection.pgconn.pipeline_status != pq.PipelineStatus.OFF
    (value, work_mem, same_pid) = engine.execute(
        f"SELECT random(), current_setting('work_mem'), pg_backend_pid() = {pid}"
    ).rows[0]
    assert same_pid  # the same connection, its previous end read before this query
    assert value != seeded
    assert work_mem == default_work_mem
    engine.execute("SELECT pg_advisory_lock(9192)")
    # Settled (the pool's get for anything but the engine's own query): idle, lock released.
    held = engine._pool.get(5.0)
    try:
        assert not held._tail
        assert held.pgconn.pipeline_status == pq.PipelineStatus.OFF
        assert held.pgconn.transaction_status == pq.TransactionStatus.IDLE
    finally:
        engine._pool.put(held)
    with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
        locks = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid IN (9191, 9192)"
        ).fetchone()[0]
        state = admin.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    assert locks == 0
    assert state == ("idle",)


def test_a_session_whose_reset_failed_runs_no_next_query(server):
    """The server-side claim the deferred end rests on: after a failed statement inside the
    transaction (the reset, say), the next pipeline's BEGIN and query are refused."""
    _cluster, reader, database, _plain = server
    with psycopg.connect(f"{reader} dbname={database}", autocommit=True) as connection:
        pgconn = connection.pgconn
        ok, sync = pq.ExecStatus.COMMAND_OK, pq.ExecStatus.PIPELINE_SYNC
        fatal, aborted = pq.ExecStatus.FATAL_ERROR, pq.ExecStatus.PIPELINE_ABORTED
        assert _run_pipeline(pgconn, [b"BEGIN READ ONLY"]) == [ok, None, sync]
        # the failing reset; the ROLLBACK after it is skipped, the transaction stays aborted
        assert _run_pipeline(pgconn, [b"SELECT 1 / 0", b"ROLLBACK"]) == [
            fatal, None, aborted, None, sync,
        ]  # fmt: skip
        assert pgconn.transaction_status == pq.TransactionStatus.INERROR
        # the next verification's pipeline: nothing in it runs
        assert _run_pipeline(
            pgconn, [b"BEGIN READ ONLY", b"SELECT pg_advisory_lock(9393)", b"ROLLBACK"]
        ) == [fatal, None, aborted, None, aborted, None, sync]
        assert pgconn.transaction_status == pq.TransactionStatus.INERROR


def _fail_the_pending_end(engine: PostgresEngine) -> int:
    """Put the pool's connection into the state of a failed reset (transaction aborted, the
    end of the pipeline pending and failed); its backend pid."""
    connection = engine._pool.get(5.0)
    pgconn = connection.pgconn
    assert _run_pipeline(pgconn, [b"BEGIN READ ONLY"])[-1] == pq.ExecStatus.PIPELINE_SYNC
    pgconn.enter_pipeline_mode()
    pgconn.send_query_params(b"SELECT 1 / 0", None)
    pgconn.send_query_params(b"ROLLBACK", None)
    pgconn.pipeline_sync()
    connection._tail = True
    pid = pgconn.backend_pid
    engine._pool.put(connection)
    return pid


def test_a_failed_pending_end_drops_the_connection_before_the_next_query(engine):
    pid = _fail_the_pending_end(engine)
    rows = engine.execute("SELECT pg_backend_pid(), 41 + 1").rows
    assert rows[0][0] != pid and rows[0][1] == 42  # run again on a fresh connection
    pid = _fail_the_pending_end(engine)
    held = engine._pool.get(5.0)  # (settle, for anything but the engine's own query)
    try:
        assert held.pgconn.backend_pid != pid
        assert held.pgconn.transaction_status == pq.TransactionStatus.IDLE
    finally:
        engine._pool.put(held)
    assert engine.execute("SELECT 1").rows == [(1,)]


def test_a_pending_end_that_does_not_come_drops_the_connection(engine, monkeypatch):
    monkeypatch.setattr(postgres_module, "_TAIL_WAIT_S", 0.3)
    connection = engine._pool.get(5.0)
    pid = connection.pgconn.backend_pid
    pgconn = connection.pgconn
    pgconn.enter_pipeline_mode()
    pgconn.send_query_params(b"SELECT pg_sleep(5)", None)  # (an end that takes 5 s)
    pgconn.send_query_params(b"SELECT 1", None)
    pgconn.pipeline_sync()
    connection._tail = True
    engine._pool.put(connection)
    started = time.monotonic()
    held = engine._pool.get(10.0)
    try:
        assert time.monotonic() - started < 3.0
        assert held.pgconn.backend_pid != pid
    finally:
        engine._pool.put(held)
    assert engine.execute("SELECT 2").rows == [(2,)]


SEQUENCE = [
    "SELECT 1 AS x",
    "SELECT x, x * 1.5 AS y FROM generate_series(1, 5) x ORDER BY x DESC",
    "SELECT 1 / 0",
    "SELECT * FROM generate_series(1, 20)",  # too many rows under max_rows=10
    "SELECT 'a' AS s, NULL::int AS n",
    "SET work_mem = '1MB'",  # refused before anything is sent
    "SELECT pg_advisory_lock(9494), setseed(0.25)",
    "SELECT repeat('x', 3000) AS s",
    "SELECT (1",
    "SELECT current_setting('work_mem') AS w",
]


def test_results_of_a_mixed_sequence_equal_a_plain_connection(server, engine):
    _cluster, _reader, _database, plain = server
    limits = Limits(max_rows=10)
    expected_work_mem = plain.execute("SHOW work_mem").fetchone()[0]
    for _round in range(3):
        for sql in SEQUENCE:
            try:
                rows = engine.execute(sql, limits=limits).rows
            except QueryError as error:
                outcome = error.category
            else:
                outcome = rows
            if sql.startswith("SELECT 1 /"):
                assert outcome == "runtime"
            elif "generate_series(1, 20)" in sql:
                assert outcome == "too_many_rows"
            elif sql.startswith("SET"):
                assert outcome == "rejected"
            elif sql == "SELECT (1":
                assert outcome == "syntax"
            elif "current_setting" in sql:
                assert outcome == [(expected_work_mem,)]
            elif "setseed" in sql:
                assert outcome == [("", "")]  # (void values; the lock is released afterwards)
            else:
                assert outcome == plain.execute(sql).fetchall(), sql


# -- the comparison's fast path (no server) --------------------------------------------------

D = decimal.Decimal


def _rules(order="set", decimals=2, column_order=True) -> CompareRules:
    return CompareRules(order=order, float_decimals=decimals, column_order=column_order)


# (submitted, reference, rules, expected), each answer from the rules alone: rows compared
# exactly before their width is checked, a Decimal column with and without NULLs, the set of a
# reference made on first use.
FAST_PATH_KNOWN = {
    "wider-rows-never-match": ([(1, "a", None)], [(1, "a")], _rules(), False),
    "narrower-rows-never-match": ([(1,)], [(1, "a")], _rules(column_order=False), False),
    "ragged-rows": ([(1, "a"), (1,)], [(1, "a")], _rules(), False),
    "ragged-rows-multiset": ([(1, "a"), (1,)], [(1, "a"), (1, "a")], _rules("multiset"), False),
    "exact-set-with-duplicates": ([(1, "a"), (1, "a")], [(1, "a")], _rules(), True),
    "exact-ordered": ([(2, "b"), (1, "a")], [(2, "b"), (1, "a")], _rules("ordered"), True),
    "exact-ordered-other-order": ([(1, "a"), (2, "b")], [(2, "b"), (1, "a")],
                                  _rules("ordered"), False),
    "decimal-column-no-null": ([("x", D("22.566")), ("y", D("1.004"))],
                               [("y", 1.0), ("x", 22.57)], _rules(), True),
    "decimal-column-with-null": ([("x", D("22.566")), ("y", None)],
                                 [("y", None), ("x", 22.57)], _rules(), True),
    "decimal-column-null-differs": ([("x", D("22.566")), ("y", None)],
                                    [("y", 0.0), ("x", 22.57)], _rules(), False),
    "decimal-nan-no-null": ([(D("NaN"),), (D("1.5"),)], [(1.5,), (math.nan,)], _rules(), True),
    "decimal-permuted": ([(D("1.004"), "a")], [("a", 1.0)], _rules(column_order=False), True),
    "float-needs-rounding": ([(0.30000000000000004,)], [(0.3,)], _rules(), True),
    "bool-is-not-exact-safe": ([(True,)], [(1,)], _rules(), True),
}  # fmt: skip


@pytest.mark.parametrize("case", list(FAST_PATH_KNOWN))
def test_fast_comparison_known_answers_agree_with_the_slow_path(case):
    submitted, reference, rule, expected = FAST_PATH_KNOWN[case]
    assert results_match_reference(submitted, reference, rule) is expected
    assert results_match(submitted, reference, rule) is expected
    prepared = NormalizedReference(reference, rule.float_decimals)
    for _call in range(2):  # the reference's set / multiset made on the first call, then kept
        assert results_match(submitted, prepared, rule, reference_normalized=True) is expected
    assert (
        repr(normalize_rows(submitted, rule.float_decimals))
        == repr(normalize_rows_reference(submitted, rule.float_decimals))
        or len({len(row) for row in submitted}) > 1
    )
