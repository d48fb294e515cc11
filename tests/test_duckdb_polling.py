"""Hybrid polling on the worker pipes (:func:`ambitab_gym.verify.worker.wait_readable`).

Both sides of a worker poll the pipe without blocking for up to a budget (``spin_s``) before they
block. These tests hold the polling path to the blocking one: a reply that arrives while the
parent polls and one that arrives after it blocked give the same results (checked against an
in-process DuckDB connection); a deadline that falls inside the polling budget is kept (a
timeout is reported at the deadline, not at the end of the budget); a worker that dies while the
parent polls is found at once; an exception raised while polling retires the worker; and the
worker's own polling after a reply is bounded (it blocks once the budget is spent).
"""

from __future__ import annotations

import os
import select
import signal
import sqlite3
import threading
import time

import duckdb
import pytest

from ambitab_gym.verify.base import Limits, QueryError
from ambitab_gym.verify.duckdb import DuckDBEngine, _worker_settings, build_duckdb
from ambitab_gym.verify.worker import (
    BLOCKED,
    POLL_SPIN_S,
    SPUN,
    WorkerProcess,
    WorkerSlot,
    wait_readable,
)

SCRIPT = """
CREATE TABLE words AS SELECT range AS n, 'w' || range AS w, range / 7.0 AS f FROM range(20000);
CREATE TABLE t AS SELECT * FROM (VALUES (1, 'Ada', NULL), (2, 'Grace', 1.5)) v(id, name, x);
"""
QUERIES = [
    "SELECT 42 AS answer",
    "SELECT id, name, x FROM t ORDER BY id",
    "SELECT count(*), sum(n), min(w), max(f) FROM words",
    "SELECT n, w, f FROM words ORDER BY n",  # about 500 KiB pickled: many reads
    "SELECT w FROM words WHERE n % 1000 = 3 ORDER BY n DESC",
]
# Runs for seconds in DuckDB (an interrupt stops it); SLOW_SQL about 0.1 s.
LONG_SQL = (
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 100000000)"
    " SELECT count(*) FROM r"
)
SLOW_SQL = "SELECT count(*) FROM range(20000000) a WHERE a.range % 7 = 3"
LIMITS = Limits(timeout_s=20.0, memory_limit_mb=256)


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("polling") / "p.duckdb"
    build_duckdb(SCRIPT, path)
    return path


@pytest.fixture(scope="module")
def direct(db_path):
    connection = duckdb.connect(str(db_path), read_only=True)
    yield connection
    connection.close()


def _worker(db_path, spin_s: float) -> WorkerProcess:
    _, config, headroom_mb = _worker_settings(LIMITS)
    return WorkerProcess("duckdb", db_path, config, headroom_mb=headroom_mb, spin_s=spin_s)


def _request(sql: str, timeout_s: float = 20.0) -> tuple:
    return ("query", sql, timeout_s, 100_000, 2**26, timeout_s)


def _cpu_s(pid: int) -> float:
    """User plus system CPU of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- wait_readable on a bare pipe --------------------------------------------------------------


@pytest.fixture
def pipe():
    read_end, write_end = os.pipe()
    poller = select.poll()
    poller.register(read_end, select.POLLIN)
    ends = {"read": read_end, "write": write_end}
    yield poller, ends
    for fd in ends.values():
        if fd is not None:
            os.close(fd)


def _later(delay_s: float, action) -> threading.Thread:
    thread = threading.Timer(delay_s, action)
    thread.start()
    return thread


def test_data_already_there_is_found_while_polling_or_blocking(pipe):
    poller, ends = pipe
    os.write(ends["write"], b"x")
    assert wait_readable(poller, 5.0, spin_s=1.0) == SPUN
    assert wait_readable(poller, 5.0, spin_s=0) == BLOCKED
    assert wait_readable(poller, 5.0) == (SPUN if POLL_SPIN_S > 0 else BLOCKED)  # the default


def test_data_within_the_budget_is_found_while_polling(pipe):
    poller, ends = pipe
    timer = _later(0.05, lambda: os.write(ends["write"], b"x"))
    start = time.monotonic()
    assert wait_readable(poller, 10.0, spin_s=5.0) == SPUN
    elapsed = time.monotonic() - start
    timer.join()
    assert 0.04 <= elapsed < 4.0, elapsed  # woke for the data, not at the end of the budget


def test_data_after_the_budget_is_found_by_blocking(pipe):
    poller, ends = pipe
    timer = _later(0.1, lambda: os.write(ends["write"], b"x"))
    start = time.monotonic()
    assert wait_readable(poller, 10.0, spin_s=0.001) == BLOCKED
    elapsed = time.monotonic() - start
    timer.join()
    assert 0.09 <= elapsed < 5.0, elapsed


@pytest.mark.parametrize(
    ("timeout_s", "spin_s"),
    [(0.05, 2.0), (0.2, 0.05), (0.2, 0.0), (0.0, 1.0)],
    ids=["deadline-inside-the-budget", "deadline-after-the-budget", "no-polling", "zero"],
)
def test_the_deadline_is_kept_whatever_the_budget(pipe, timeout_s, spin_s):
    poller, _ = pipe
    start = time.monotonic()
    assert wait_readable(poller, timeout_s, spin_s) == 0
    elapsed = time.monotonic() - start
    assert timeout_s <= elapsed < timeout_s + 0.9, elapsed  # not early, not at the budget's end


def test_a_writer_gone_while_polling_is_seen_while_polling(pipe):
    poller, ends = pipe

    def close_writer():
        os.close(ends["write"])
        ends["write"] = None

    timer = _later(0.05, close_writer)
    start = time.monotonic()
    assert wait_readable(poller, 10.0, spin_s=5.0) == SPUN  # POLLHUP: readable (end of file)
    timer.join()
    assert time.monotonic() - start < 4.0
    assert os.read(ends["read"], 1) == b""


# -- a real worker -----------------------------------------------------------------------------


def test_replies_within_and_after_the_budget_are_the_same_rows(db_path, direct):
    expected = [direct.execute(sql).fetchall() for sql in QUERIES]
    columns = [tuple(d[0] for d in direct.execute(sql).description) for sql in QUERIES]
    got = {}
    for name, spin_s in (("polled", 30.0), ("blocked", 0.0), ("after-budget", 1e-6)):
        worker = _worker(db_path, spin_s)
        try:
            got[name] = []
            for sql in QUERIES:
                got[name].append(worker.query(_request(sql), wait_s=30))
                # how the reply was waited for: the path under test was taken (a reply that a
                # 1 us budget would catch only if this process had been descheduled: either)
                expected_wait = {"polled": {SPUN}, "blocked": {BLOCKED}}.get(name, {SPUN, BLOCKED})
                assert worker.last_wait in expected_wait, (name, sql)
            # a reply that comes well after a 1 us budget (a 0.1 s query), then a quick one
            slow = worker.query(_request(SLOW_SQL), wait_s=30)
            assert worker.last_wait == (SPUN if name == "polled" else BLOCKED)
            assert slow == ("ok", ("count_star()",), direct.execute(SLOW_SQL).fetchall())
            assert worker.query(_request("SELECT 7 AS seven"), wait_s=30) == (
                "ok",
                ("seven",),
                [(7,)],
            )
        finally:
            worker.kill()
    for name, replies in got.items():
        for sql, reply, rows, names in zip(QUERIES, replies, expected, columns, strict=True):
            assert reply[0] == "ok", (name, sql, reply)
            assert tuple(reply[1]) == names and reply[2] == rows, (name, sql)
    assert got["polled"] == got["blocked"] == got["after-budget"]


def test_a_timeout_inside_the_polling_budget_is_a_timeout_at_the_deadline(db_path):
    worker = _worker(db_path, spin_s=30.0)
    try:
        worker.send(_request(LONG_SQL))
        start = time.monotonic()
        assert worker.receive(0.3, 2**20) is None  # no reply by the deadline
        elapsed = time.monotonic() - start
        assert 0.3 <= elapsed < 1.5, elapsed  # at the deadline, not after the 30 s budget
    finally:
        worker.kill()


def test_the_engine_reports_a_timeout_at_the_limit_while_polling(db_path):
    # The worker's watchdog stops the statement at its limit and answers while the parent
    # polls (the budget is longer than the limit).
    engine = DuckDBEngine(db_path, limits=Limits(timeout_s=0.5, memory_limit_mb=256))
    engine._slot = WorkerSlot("duckdb", engine.path, "DuckDB", spin_s=30.0)
    try:
        assert engine.execute("SELECT 1 AS one").rows == [(1,)]
        pid = engine.worker_pid
        start = time.monotonic()
        with pytest.raises(QueryError) as caught:
            engine.execute(LONG_SQL)
        elapsed = time.monotonic() - start
        assert caught.value.category == "timeout", caught.value.message
        assert 0.5 <= elapsed < 2.5, elapsed
        assert engine.execute("SELECT 2 AS two").rows == [(2,)]
        assert engine.worker_pid == pid and engine.restarts == 0  # it answered: not killed
    finally:
        engine.close()


def test_a_worker_that_never_answers_is_killed_at_the_deadline_while_polling(tmp_path):
    # One built-in SQLite call that no interrupt reaches: the parent's own deadline
    # (seconds_left + 0.5 + timeout / 4 = 1.0 s) kills the worker, inside a 30 s budget.
    path = tmp_path / "s.sqlite"
    sqlite3.connect(path).executescript("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
    slot = WorkerSlot("sqlite", path, "SQLite", spin_s=30.0)
    try:
        sql = "SELECT length(printf('%.*c', 2000000000, 'x'))"
        start = time.monotonic()
        reply = slot.ask((1,), {}, 512, ("query", sql, 0.4, 10, 2**20, 0.4), 0.4)
        elapsed = time.monotonic() - start
        assert reply[:2] == ("error", "timeout"), reply
        assert 1.0 <= elapsed < 3.0, elapsed
        assert slot.restarts == 1
        assert slot.ask((1,), {}, 512, ("query", "SELECT x + 1 FROM t", 5.0, 10, 2**20, 5.0), 5.0)[
            :3
        ] == ("ok", ("x + 1",), [(2,)])
    finally:
        slot.close()


def test_a_worker_killed_while_the_parent_polls_is_found_at_once(db_path):
    worker = _worker(db_path, spin_s=30.0)
    try:
        worker.send(_request(LONG_SQL))
        timer = _later(0.2, lambda: os.kill(worker.process.pid, signal.SIGKILL))
        start = time.monotonic()
        with pytest.raises(EOFError):
            worker.receive(60.0, 2**20)
        timer.join()
        assert time.monotonic() - start < 3.0  # found by the polling, not after 30 or 60 s
        assert "SIGKILL" in worker.exit_description()
    finally:
        worker.kill()


def test_the_slot_reports_a_worker_killed_while_polling_and_replaces_it(db_path):
    engine = DuckDBEngine(db_path, limits=LIMITS)
    engine._slot = WorkerSlot("duckdb", engine.path, "DuckDB", spin_s=30.0)
    try:
        assert engine.execute("SELECT 1 AS one").rows == [(1,)]
        pid = engine.worker_pid
        timer = _later(0.3, lambda: os.kill(pid, signal.SIGKILL))
        start = time.monotonic()
        with pytest.raises(QueryError) as caught:
            engine.execute(LONG_SQL)
        timer.join()
        assert time.monotonic() - start < 3.0
        assert caught.value.category == "runtime" and "SIGKILL" in caught.value.message
        assert engine.execute("SELECT 3 AS three").rows == [(3,)]
        assert engine.worker_pid != pid and engine.restarts == 1
    finally:
        engine.close()


class _Interrupted(Exception):
    pass


def test_an_exception_while_polling_retires_the_worker(db_path):
    engine = DuckDBEngine(db_path, limits=LIMITS)
    engine._slot = WorkerSlot("duckdb", engine.path, "DuckDB", spin_s=30.0)

    def interrupt(signum, frame):
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        engine.execute("SELECT 1")
        pid = engine.worker_pid
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(_Interrupted):
            engine.execute(LONG_SQL, limits=Limits(timeout_s=5.0, memory_limit_mb=256))
        start = time.monotonic()
        assert engine.execute("SELECT 42 AS answer").rows == [(42,)]
        assert time.monotonic() - start < 4.0  # not the long query's late reply
        assert engine.worker_pid != pid and engine.restarts == 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        engine.close()


def test_the_workers_polling_after_a_reply_is_bounded(db_path):
    # After each reply the worker polls for the next request for spin_s, then blocks: an idle
    # worker uses no CPU once the budget is spent.
    worker = _worker(db_path, spin_s=0.3)
    try:
        pid = worker.process.pid
        assert worker.query(_request("SELECT 1 AS one"), wait_s=30)[2] == [(1,)]
        time.sleep(0.6)  # the budget is spent
        before = _cpu_s(pid)
        time.sleep(1.0)
        assert _cpu_s(pid) - before < 0.1  # blocked, not polling
        # a request that arrives while it polls is answered (back to back) ...
        for n in range(20):
            assert worker.query(_request(f"SELECT {n} AS n"), wait_s=30)[2] == [(n,)]
        # ... and so is one that arrives after it blocked
        time.sleep(0.5)
        assert worker.query(_request("SELECT 'late' AS x"), wait_s=30)[2] == [("late",)]
    finally:
        worker.kill()


def test_a_polling_worker_stops_when_asked_or_when_the_parent_goes(db_path):
    slot = WorkerSlot("duckdb", db_path, "DuckDB", spin_s=30.0)
    key, config, headroom_mb = _worker_settings(LIMITS)
    assert slot.ask(key, config, headroom_mb, _request("SELECT 5 AS five"), 20.0)[2] == [(5,)]
    process = slot._worker.process
    start = time.monotonic()
    slot.close()  # the gentle "close" arrives while the worker polls
    assert process.wait(timeout=5) == 0 and time.monotonic() - start < 2.0
    worker = _worker(db_path, spin_s=30.0)
    assert worker.query(_request("SELECT 6 AS six"), wait_s=30)[2] == [(6,)]
    worker.requests.close()  # end of file while the worker polls
    assert worker.process.wait(timeout=5) == 0
    worker.kill()
