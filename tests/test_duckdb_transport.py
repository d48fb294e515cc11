"""Known answers for the worker transport: what crosses the pipe comes back unchanged.

The DuckDB worker fetches rows in its own process and sends them back as length-prefixed
pickles (:func:`ambitab_gym.verify.worker.write_message`, :class:`MessageReader`). Every value
that reaches the verifier must equal - same value, same Python type, same column names - what an
in-process DuckDB connection on the same file returns, for every type the engine can return, at
the edges of the row and byte caps and across the 64 KiB single-read boundary of the framing.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import math
import os
import pickle
import signal
import threading
import time
import uuid

import duckdb
import pytest

from ambitab_gym.verify.base import Limits, QueryError
from ambitab_gym.verify.duckdb import DuckDBEngine, build_duckdb
from ambitab_gym.verify.worker import (
    MessageReader,
    WorkerProcess,
    result_bytes,
    safe_loads,
    write_message,
)

SCRIPT = """
CREATE TABLE t (
  i INTEGER, b BIGINT, h HUGEINT, u UBIGINT, d DECIMAL(38, 10), s DECIMAL(4, 1),
  f DOUBLE, r REAL, v VARCHAR, bl BLOB, bo BOOLEAN, da DATE, ts TIMESTAMP, tz TIMESTAMPTZ,
  ti TIME, iv INTERVAL, id UUID, l INTEGER[], st STRUCT(a INTEGER, b VARCHAR),
  m MAP(VARCHAR, INTEGER), e ENUM('red', 'green')
);
INSERT INTO t VALUES
  (1, 9223372036854775807, 170141183460469231731687303715884105727, 18446744073709551615,
   1234567890123456789012345678.0123456789, -999.9, 0.1, 1.5, 'Ada ✓ 漢字 👩🏽‍💻',
   '\\x00\\xFF\\x10abc'::BLOB, true, DATE '2020-02-29', TIMESTAMP '2024-01-02 03:04:05.123456',
   TIMESTAMPTZ '2024-01-02 03:04:05+00', TIME '23:59:59.999999', INTERVAL 3 DAY + INTERVAL 4 HOUR,
   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', [1, NULL, 3], {'a': 1, 'b': 'x'}, MAP {'k': 1},
   'green'),
  (-2147483648, -9223372036854775808, -170141183460469231731687303715884105727, 0,
   -0.0000000001, 0.0, -0.0, -3.25, '', ''::BLOB, false, DATE '1970-01-01',
   TIMESTAMP '1900-01-01 00:00:00', TIMESTAMPTZ '1999-12-31 23:00:00+00', TIME '00:00:00',
   INTERVAL 0 SECOND, '00000000-0000-0000-0000-000000000000', [], {'a': NULL, 'b': NULL},
   MAP {}, 'red'),
  (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL);
CREATE TABLE words AS SELECT range AS n, 'w' || range AS w FROM range(3000);
"""

COLUMNS = ("i", "b", "h", "u", "d", "s", "f", "r", "v", "bl", "bo", "da", "ts", "tz", "ti", "iv",
           "id", "l", "st", "m", "e")  # fmt: skip


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("transport") / "t.duckdb"
    build_duckdb(SCRIPT, path)
    return path


@pytest.fixture(scope="module")
def engine(db_path):
    engine = DuckDBEngine(db_path, limits=Limits(timeout_s=20.0, memory_limit_mb=256))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def direct(db_path):
    """The same file in this process, as the ``bare`` floor reads it (read-only)."""
    connection = duckdb.connect(str(db_path), read_only=True)
    yield connection
    connection.close()


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


def test_every_column_type_comes_back_as_duckdb_returns_it(engine, direct):
    sql = f"SELECT {', '.join(COLUMNS)} FROM t ORDER BY i NULLS LAST"
    result = engine.execute(sql)
    expected = direct.execute(sql).fetchall()
    assert result.columns == COLUMNS
    assert len(result.rows) == len(expected) == 3
    for got, want in zip(result.rows, expected, strict=True):
        assert type(got) is tuple
        for name, g, w in zip(COLUMNS, got, want, strict=True):
            if name == "tz":  # the only cell the worker rewrites: a fixed offset, same instant
                assert g is None if w is None else g == w and g.utcoffset() == w.utcoffset()
                continue
            assert _same(g, w), (name, g, w)


def test_known_answers_written_out(engine):
    """The values spelled out by hand, not read back through DuckDB."""
    first, second, nulls = engine.execute(
        f"SELECT {', '.join(COLUMNS)} FROM t ORDER BY i NULLS LAST"
    ).rows
    # ordered by i: -2147483648 first
    assert second[:4] == (1, 2**63 - 1, 2**127 - 1, 2**64 - 1)
    assert first[:4] == (-(2**31), -(2**63), -(2**127) + 1, 0)
    assert second[4] == decimal.Decimal("1234567890123456789012345678.0123456789")
    assert type(second[4]) is decimal.Decimal and second[5] == decimal.Decimal("-999.9")
    assert first[4] == decimal.Decimal("-1E-10") and str(first[5]) == "0.0"
    assert second[6] == 0.1 and second[7] == 1.5 and first[6] == 0.0 and first[7] == -3.25
    assert {type(second[6]), type(first[7])} == {float}
    assert second[8] == "Ada ✓ 漢字 👩🏽‍💻" and first[8] == ""
    assert second[9] == b"\x00\xff\x10abc" and first[9] == b""
    assert second[10] is True and first[10] is False
    assert second[11] == datetime.date(2020, 2, 29)
    assert second[12] == datetime.datetime(2024, 1, 2, 3, 4, 5, 123456)
    assert second[13] == datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    assert second[14] == datetime.time(23, 59, 59, 999999)
    assert second[15] == datetime.timedelta(days=3, hours=4)
    assert second[16] == uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    assert second[17] == [1, None, 3] and first[17] == []
    assert second[18] == {"a": 1, "b": "x"} and first[18] == {"a": None, "b": None}
    assert second[19] == {"k": 1} and first[19] == {}
    assert second[20] == "green"
    assert nulls == (None,) * len(COLUMNS)


def test_empty_result_keeps_its_columns(engine):
    result = engine.execute("SELECT v AS name, b FROM t WHERE false")
    assert result.columns == ("name", "b") and result.rows == []


def test_max_rows_exactly_and_one_more(engine):
    limits = Limits(timeout_s=20.0, memory_limit_mb=256, max_rows=7)
    rows = engine.execute("SELECT n FROM words ORDER BY n LIMIT 7", limits=limits).rows
    assert rows == [(n,) for n in range(7)]
    with pytest.raises(QueryError) as caught:
        engine.execute("SELECT n FROM words ORDER BY n LIMIT 8", limits=limits)
    assert caught.value.category == "too_many_rows"
    # a larger cap: the whole table, across the worker's fetch chunks
    limits = Limits(timeout_s=20.0, memory_limit_mb=256, max_rows=3000)
    assert len(engine.execute("SELECT n FROM words", limits=limits).rows) == 3000
    with pytest.raises(QueryError, match="more than 2999 rows"):
        engine.execute("SELECT n FROM words", limits=Limits(timeout_s=20.0, max_rows=2999))


@pytest.mark.parametrize("rows", [1, 100, 2000])
def test_a_result_just_under_the_byte_cap_comes_back_and_one_byte_more_fails(engine, rows):
    cap = 2**20
    # result_bytes of `rows` one-cell text rows of `length` characters
    length = (cap - rows * (56 + 40)) // rows
    under = [("x" * length,)] * rows
    assert result_bytes(under) <= cap < result_bytes([("x" * (length + 1),)] * rows)
    limits = Limits(timeout_s=20.0, memory_limit_mb=256, max_result_bytes=cap)
    sql = "SELECT repeat('x', {}) AS s FROM range({})"
    result = engine.execute(sql.format(length, rows), limits=limits)
    assert result.columns == ("s",) and result.rows == under
    with pytest.raises(QueryError) as caught:
        engine.execute(sql.format(length + 1, rows), limits=limits)
    assert caught.value.category == "too_large"


def test_results_across_the_single_read_boundary_are_whole(engine, direct):
    # 64 KiB is what one read takes: replies around it and far above it (several reads and a
    # body read straight into its buffer) come back byte for byte.
    for count in (1, 60, 61, 62, 63, 64, 65, 70, 3000):
        sql = f"SELECT n, w, repeat(w, 200) AS long FROM words ORDER BY n LIMIT {count * 10}"
        result = engine.execute(sql)
        assert result.columns == ("n", "w", "long")
        assert result.rows == direct.execute(sql).fetchall()


def test_many_queries_in_a_row_stay_in_step(engine, direct):
    # A reply never leaks into the next one (the reader keeps no stray bytes).
    for n in (0, 5, 2999, 17, 1):
        sql = f"SELECT w FROM words WHERE n = {n}"
        assert engine.execute(sql).rows == direct.execute(sql).fetchall() == [(f"w{n}",)]
    with pytest.raises(QueryError):
        engine.execute("SELECT nosuch FROM words")
    assert engine.execute("SELECT 42 AS answer").rows == [(42,)]


# -- the framing itself ----------------------------------------------------------------------


@pytest.fixture
def pipe():
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):  # a test closed it already
            os.close(fd)


def _write_in_thread(fd: int, payloads: list[bytes], pieces: int = 1) -> threading.Thread:
    """Write framed payloads from a thread (a pipe holds only 64 KiB), optionally split into
    several raw writes so the reader sees partial messages."""

    def run() -> None:
        for payload in payloads:
            if pieces == 1:
                write_message(fd, payload)
                continue
            whole = _framed(payload)
            step = max(1, len(whole) // pieces)
            for start in range(0, len(whole), step):
                os.write(fd, whole[start : start + step])

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _framed(payload: bytes) -> bytes:
    """The framing written out by hand: a big-endian signed 32-bit length, then the bytes."""
    return len(payload).to_bytes(4, "big", signed=True) + payload


@pytest.mark.parametrize(
    "size", [0, 1, 65_531, 65_532, 65_533, 65_536, 65_540, 200_000, 3 * 2**20 + 7]
)
@pytest.mark.parametrize("pieces", [1, 3])
def test_messages_of_every_size_arrive_whole(pipe, size, pieces):
    read_end, write_end = pipe
    payloads = [bytes(range(256)) * (size // 256) + b"z" * (size % 256), b"next", b""]
    thread = _write_in_thread(write_end, payloads, pieces)
    reader = MessageReader(read_end)
    got = [reader.read(2**30) for _ in payloads]
    thread.join()
    assert [bytes(g) for g in got] == payloads
    assert not reader.buffered


def test_the_framing_is_multiprocessing_connections(pipe):
    from multiprocessing.connection import Connection

    read_end, write_end = pipe
    write_message(write_end, b"abc")
    assert os.read(read_end, 100) == _framed(b"abc")
    sender = Connection(os.dup(write_end), readable=False)
    sender.send_bytes(b"from a Connection")
    sender.close()
    assert MessageReader(read_end).read(100) == b"from a Connection"


def test_a_message_over_the_limit_is_refused(pipe):
    read_end, write_end = pipe
    write_message(write_end, b"x" * 1000)
    with pytest.raises(OSError, match="bad message length"):
        MessageReader(read_end).read(999)


def test_a_writer_gone_mid_message_is_end_of_file(pipe):
    read_end, write_end = pipe
    os.write(write_end, _framed(b"0123456789")[:9])  # header and five of ten bytes
    os.close(write_end)
    reader = MessageReader(read_end)
    with pytest.raises(EOFError):
        reader.read(100)
    with pytest.raises(EOFError):
        MessageReader(read_end).read(100)


def test_a_header_split_across_writes_is_read(pipe):
    read_end, write_end = pipe
    whole = _framed(b"split header")

    def run() -> None:
        for byte in whole:
            os.write(write_end, bytes([byte]))

    thread = threading.Thread(target=run)
    thread.start()
    assert MessageReader(read_end).read(100) == b"split header"
    thread.join()


def test_replies_unpickle_only_plain_data(pipe):
    read_end, write_end = pipe
    reply = ("ok", ("a",), [(decimal.Decimal("1.5"), datetime.date(2024, 1, 2), b"\x00")])
    write_message(write_end, pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
    write_message(write_end, pickle.dumps(os.system))
    reader = MessageReader(read_end)
    assert safe_loads(reader.read(2**20)) == reply
    with pytest.raises(pickle.UnpicklingError, match="forbidden"):
        safe_loads(reader.read(2**20))


# -- a worker that ended between two queries ---------------------------------------------------


def _wait_until_gone(pid: int) -> None:
    """Until every thread of the process has exited (a zombie leader alone, or reaped)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except (FileNotFoundError, ProcessLookupError):
            return
        if fields["State"].split()[0] in ("Z", "X") and int(fields["Threads"]) <= 1:
            return
        time.sleep(0.01)
    raise AssertionError(f"worker {pid} still running")


@pytest.mark.parametrize("wait", [True, False], ids=["gone", "dying"])
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_a_worker_that_ended_between_queries_is_replaced_for_the_next(db_path, how, wait):
    # No waitpid per query: the next request's write finds the ended worker (EPIPE), or its
    # bytes are still unread in the pipe when the dying worker's end closes; either way the
    # request never reached it, and a fresh worker answers that same request.
    engine = DuckDBEngine(db_path, limits=Limits(timeout_s=20.0, memory_limit_mb=256))
    try:
        assert engine.execute("SELECT count(*) FROM words").rows == [(3000,)]
        pid = engine.worker_pid
        os.kill(pid, how)
        if wait:
            _wait_until_gone(pid)
        assert engine.execute("SELECT max(n) FROM words").rows == [(2999,)]
        assert engine.worker_pid != pid and engine.restarts == 1
        assert engine.execute("SELECT 1 AS one").rows == [(1,)]
        assert engine.restarts == 1
    finally:
        engine.close()


def test_the_worker_counts_the_requests_it_took(db_path):
    # The parent decides "never ran, run it again" from the worker's own count, not from the
    # pipe: a stopped worker has not taken the request; once it runs, it has.
    worker = WorkerProcess("duckdb", db_path, {}, headroom_mb=512)
    try:
        request = ("query", "SELECT count(*) FROM words", 5.0, 10, 2**20, 5.0)
        assert worker.query(request, wait_s=10) == ("ok", ("count_star()",), [(3000,)])
        assert worker.took_last_request()
        os.kill(worker.process.pid, signal.SIGSTOP)
        worker.send(request)
        time.sleep(0.1)
        assert not worker.took_last_request()  # still in the pipe
        os.kill(worker.process.pid, signal.SIGCONT)
        assert worker.receive(10, 2**20) == ("ok", ("count_star()",), [(3000,)])
        assert worker.took_last_request()
    finally:
        worker.kill()


def test_a_worker_killed_inside_a_query_reports_the_crash_and_is_not_rerun(db_path):
    # The worker took the request, then died: the query is what killed it (out of memory, as far
    # as the parent can tell), so it fails as "runtime" instead of running again.
    engine = DuckDBEngine(db_path, limits=Limits(timeout_s=20.0, memory_limit_mb=256))
    try:
        engine.execute("SELECT 1")
        pid = engine.worker_pid
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
        with pytest.raises(QueryError) as caught:
            engine.execute(
                "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 100000000)"
                " SELECT count(*) FROM r",
                limits=Limits(timeout_s=15.0, memory_limit_mb=256),
            )
        assert caught.value.category == "runtime" and "SIGKILL" in str(caught.value)
        assert engine.restarts == 1 and engine.worker_pid != pid
        assert engine.execute("SELECT 1 AS one").rows == [(1,)]
    finally:
        engine.close()


class _Interrupted(Exception):
    pass


def test_an_exception_while_waiting_retires_the_worker(db_path):
    # A signal handler raises while the engine waits for a long query: that query's reply would
    # otherwise be read as the answer to the next request.
    engine = DuckDBEngine(db_path, limits=Limits(timeout_s=20.0, memory_limit_mb=256))

    def interrupt(signum, frame):
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        engine.execute("SELECT 1")
        pid = engine.worker_pid
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(_Interrupted):
            engine.execute(
                "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 10000000)"
                " SELECT count(*) FROM r",
                limits=Limits(timeout_s=5.0, memory_limit_mb=256),
            )
        start = time.monotonic()
        assert engine.execute("SELECT 42 AS answer").rows == [(42,)]
        assert time.monotonic() - start < 4.0  # not after the long query's own timeout
        assert engine.worker_pid != pid and engine.restarts == 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        engine.close()
