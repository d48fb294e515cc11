"""Hard limits that hold against any single statement, on SQLite and DuckDB.

See docs/design.md section 6, Verifier.

* wall clock: a statement whose cost lies inside one built-in function call (where neither
  SQLite's progress handler nor DuckDB's interrupt reaches it) still stops at the limit;
* result bytes: a result over ``Limits.max_result_bytes`` is refused while it is fetched, and the
  process that fetches it never holds much more than the cap (peak RSS measured);
* error texts: bounded before they cross the worker pipe, in ``QueryError`` and in ``Verdict``;
* session state: a DuckDB query cannot leave a seed for the next one;
* statements that used to crash the DuckDB worker, SQL text with a lone surrogate or a NUL
  character: the right verdict category and a message, and the next query works;
* files: a killed cache build leaves nothing after the next build; DuckDB makes no temporary
  folder next to the database.

The slow statements were measured without the limits (``benchmarks/verify_overhead.py
--hostile`` prints today's figures): ``printf('%.*c', 2000000000, 'x')`` runs about 12 s inside
one SQLite call, ``instr``/``replace`` on 1,000,000-character text about 7-8 s, DuckDB's
``damerau_levenshtein`` on two 12,000-character strings about 6 s, and none of them notices an
interrupt. The tests use a 1 s limit and allow 2 s on top for killing and restarting a worker.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from ambitab_gym.corpora import load_corpus
from ambitab_gym.verify import Limits, QueryError, Verdict, Verifier
from ambitab_gym.verify.base import MAX_MESSAGE_CHARS
from ambitab_gym.verify.duckdb import DuckDBEngine, build_duckdb
from ambitab_gym.verify.sqlite import SQLiteEngine, build_sqlite
from ambitab_gym.verify.worker import WorkerProcess

LIMIT_S = 1.0
MARGIN_S = 2.0
LIMITS = Limits(timeout_s=LIMIT_S, memory_limit_mb=256)

SQLITE_SCRIPT = """
CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT);
INSERT INTO t VALUES (1, 'Ada'), (2, 'Grace'), (3, 'Linus');
"""
DUCKDB_SCRIPT = """
CREATE TABLE t (id INTEGER, name VARCHAR);
INSERT INTO t VALUES (1, 'Ada'), (2, 'Grace'), (3, 'Linus');
CREATE TABLE big AS SELECT range AS x, 'abc' || range AS s FROM range(500000);
"""

MILLION_A = "printf('%.*c', 999990, 'a')"
SQLITE_LONG_CALLS = {
    "printf-precision": "SELECT length(printf('%.*c', 2000000000, 'x'))",
    "instr": f"SELECT instr({MILLION_A}, printf('%.*c', 499995, 'a') || 'b')",
    "replace": f"SELECT length(replace({MILLION_A}, printf('%.*c', 499995, 'a') || 'b', 'x'))",
    "three-columns": "SELECT "
    + ", ".join(f"length(printf('%.*c', 2000000000, '{c}'))" for c in "xyz"),
}
DAMERAU = "damerau_levenshtein(repeat('a', 12000 + id), repeat('b', 12000 + id))"
DUCKDB_LONG_CALLS = {
    "damerau-levenshtein": f"SELECT {DAMERAU} FROM t WHERE id = 1",
    "three-columns": f"SELECT {DAMERAU}, {DAMERAU} + 1, {DAMERAU} + 2 FROM t WHERE id = 1",
}


@pytest.fixture(scope="module")
def sqlite_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sqlite") / "limits.sqlite"
    build_sqlite(SQLITE_SCRIPT, path)
    return path


@pytest.fixture(scope="module")
def duckdb_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("duckdb") / "limits.duckdb"
    build_duckdb(DUCKDB_SCRIPT, path)
    return path


@pytest.fixture
def sqlite_engine(sqlite_path):
    engine = SQLiteEngine(sqlite_path, limits=LIMITS)
    yield engine
    engine.close()


@pytest.fixture
def duckdb_engine(duckdb_path):
    engine = DuckDBEngine(duckdb_path, limits=LIMITS)
    yield engine
    engine.close()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stops_at_the_limit(engine, sql: str) -> QueryError:
    start = time.monotonic()
    with pytest.raises(QueryError) as caught:
        engine.execute(sql)
    elapsed = time.monotonic() - start
    assert caught.value.category == "timeout", caught.value.message
    assert elapsed < LIMIT_S + MARGIN_S, elapsed
    return caught.value


# -- wall clock --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(SQLITE_LONG_CALLS))
def test_sqlite_long_builtin_call_stops_at_the_limit(sqlite_engine, sqlite_path, case):
    before = _sha256(sqlite_path)
    assert sqlite_engine.execute("SELECT count(*) FROM t").rows == [(3,)]
    assert sqlite_engine.worker_pid is None  # plain statements stay in this process
    _stops_at_the_limit(sqlite_engine, SQLITE_LONG_CALLS[case])
    assert sqlite_engine.restarts == 1  # the worker running it was killed
    assert sqlite_engine.execute("SELECT printf('%s!', name) FROM t WHERE id = 2").rows == [
        ("Grace!",)
    ]
    assert _sha256(sqlite_path) == before


@pytest.mark.parametrize("case", sorted(DUCKDB_LONG_CALLS))
def test_duckdb_long_builtin_call_stops_at_the_limit(duckdb_engine, case):
    assert duckdb_engine.execute("SELECT count(*) FROM t").rows == [(3,)]
    error = _stops_at_the_limit(duckdb_engine, DUCKDB_LONG_CALLS[case])
    assert duckdb_engine.restarts <= 1, (duckdb_engine.restarts, error.message)
    assert duckdb_engine.execute("SELECT name FROM t WHERE id = 3").rows == [("Linus",)]


def test_sqlite_fast_path_stops_many_admitted_calls_at_the_limit(sqlite_engine):
    # 400 columns of the costliest admitted calls on 9,000-character text (instr and replace at
    # their quadratic worst, about 0.4 ms a call), over a million rows: admitted in this process,
    # so the progress handler must stop it between calls.
    worst = [
        "length(upper(z))",
        "instr(z, substr(z, 1, 4497) || '1')",
        "length(replace(z, substr(z, 1, 4497) || '1', 'x'))",
    ]
    columns = ", ".join(f"sum({worst[k % 3]})" for k in range(400))
    sql = (
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 1000000), "
        f"s(z) AS (SELECT hex(zeroblob(4500))) SELECT {columns} FROM r, s"
    )
    _stops_at_the_limit(sqlite_engine, sql)
    assert sqlite_engine.worker_pid is None


def test_sqlite_long_values_rerun_in_the_worker(sqlite_engine):
    # Longer than the fast path's 10,000 characters: the same statement reruns in the worker.
    rows = sqlite_engine.execute("SELECT length(hex(zeroblob(50000))) FROM t WHERE id = 1").rows
    assert rows == [(100000,)]
    assert sqlite_engine.worker_pid is not None


# -- result bytes ------------------------------------------------------------------------------

CAP = 16 * 2**20
RESULT_MB = 300  # the result each query would produce without the cap
needs_proc = pytest.mark.skipif(
    not Path("/proc/self/status").is_file(), reason="reads peak RSS (VmHWM) from /proc"
)

_SQLITE_RSS_SCRIPT = """
import json, resource, sys
from ambitab_gym.verify import Limits, QueryError
from ambitab_gym.verify.sqlite import SQLiteEngine

def hwm(pid="self"):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

engine = SQLiteEngine(sys.argv[1])
limits = Limits(timeout_s=60, max_rows=10_000_000, max_result_bytes=int(sys.argv[3]))
engine.execute(sys.argv[2].replace("300000", "3"), limits=limits)  # warm: same path, tiny result
pid = getattr(engine, "worker_pid", None) or "self"
before = hwm(pid)
try:
    engine.execute(sys.argv[2], limits=limits)
    category = "ok"
except QueryError as error:
    category = error.category
print(json.dumps({"category": category, "growth": hwm(pid) - before, "worker": pid != "self"}))
"""
_ROWS = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 300000) "


@needs_proc
@pytest.mark.parametrize(
    ("path", "sql", "in_worker"),
    [
        # ~1 KB per row, 300,000 rows: in the engine's process (hex and zeroblob are admitted)
        ("fast", _ROWS + "SELECT hex(zeroblob(500)) || i FROM r", False),
        # the same through the worker (printf is not admitted in this process)
        ("worker", _ROWS + "SELECT printf('%.1000c', 'x') || i FROM r", True),
    ],
)
def test_sqlite_result_cap_bounds_peak_memory(sqlite_path, path, sql, in_worker):
    out = subprocess.run(
        [sys.executable, "-c", _SQLITE_RSS_SCRIPT, str(sqlite_path), sql, str(CAP)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["category"] == "too_large"
    assert figures["worker"] is in_worker
    # Without a cap while fetching the process would hold the whole RESULT_MB result.
    assert figures["growth"] < 3 * CAP + 16 * 2**20, figures["growth"] / 2**20


def _vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@needs_proc
def test_duckdb_result_cap_is_enforced_in_the_worker_with_bounded_memory(duckdb_engine):
    limits = Limits(timeout_s=60, max_rows=10_000_000, max_result_bytes=CAP, memory_limit_mb=256)
    sql = "SELECT repeat('x', 1000) || range FROM range(300000)"
    duckdb_engine.execute(sql.replace("300000", "3"), limits=limits)
    pid = duckdb_engine.worker_pid
    before = _vm_hwm(pid)
    with pytest.raises(QueryError) as caught:
        duckdb_engine.execute(sql, limits=limits)
    growth = _vm_hwm(pid) - before
    assert caught.value.category == "too_large"
    assert duckdb_engine.worker_pid == pid  # refused by the worker, not by a crash
    assert growth < 3 * CAP + 32 * 2**20, growth / 2**20
    assert "16 MiB" in caught.value.message


def test_results_under_the_cap_come_back_whole(sqlite_engine, duckdb_engine):
    limits = Limits(timeout_s=30, max_result_bytes=CAP, memory_limit_mb=256)
    sql = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 5000) "
    rows = sqlite_engine.execute(sql + "SELECT hex(zeroblob(500)) FROM r", limits=limits).rows
    assert len(rows) == 5000 and rows[0] == ("00" * 500,)
    rows = duckdb_engine.execute("SELECT repeat('ab', 500) FROM range(5000)", limits=limits).rows
    assert len(rows) == 5000 and rows[-1] == ("ab" * 500,)


# -- error texts -------------------------------------------------------------------------------

LONG_NAME = "x" * 60_000


def test_huge_error_messages_are_cut_in_the_worker_and_everywhere(duckdb_path, sqlite_path):
    worker = WorkerProcess("duckdb", duckdb_path, {"threads": 1}, headroom_mb=1024)
    try:  # the raw reply, before any parent-side cut
        reply = worker.query(
            ("query", "SELECT error(repeat('y', 100000))", 5.0, 10, 2**20, 5.0), 10
        )
    finally:
        worker.kill()
    assert reply[:2] == ("error", "runtime")
    assert len(reply[2]) <= MAX_MESSAGE_CHARS and "more characters cut" in reply[2]
    for engine in (DuckDBEngine(duckdb_path), SQLiteEngine(sqlite_path)):
        try:
            with pytest.raises(QueryError) as caught:
                engine.execute(f"SELECT {LONG_NAME} FROM t")
        finally:
            engine.close()
        assert len(caught.value.message) <= MAX_MESSAGE_CHARS
        assert LONG_NAME[:500] in caught.value.message  # cut, not replaced


@pytest.mark.parametrize(("corpus", "engine"), [("bird", "sqlite"), ("bird_interact", "duckdb")])
def test_verdict_detail_is_bounded(corpus, engine):
    corpus = load_corpus(corpus, limits=LIMITS)
    record = corpus.records[0]
    verifier = Verifier(corpus.open_engine, limits=LIMITS)
    try:
        verdict = verifier.verify(record, f"SELECT {LONG_NAME}")
    finally:
        verifier.close()
    assert verdict.reason == "runtime"
    assert 0 < len(verdict.detail) <= MAX_MESSAGE_CHARS
    # Whatever builds a verdict (an engine that raised something else, a comparison that failed).
    assert len(Verdict(False, "engine", f"RuntimeError: {LONG_NAME}").detail) <= MAX_MESSAGE_CHARS


# -- session state, crashing statements, odd text ---------------------------------------------


def _random_after_setseed() -> float:
    connection = duckdb.connect()
    connection.execute("SELECT setseed(0.5)")
    return connection.execute("SELECT random()").fetchone()[0]


@pytest.mark.parametrize(
    "seed_sql", ["SELECT setseed(0.5)", "SELECT * FROM query('SELECT setseed(0.5)')"]
)
def test_duckdb_setseed_does_not_carry_to_the_next_query(duckdb_engine, seed_sql):
    seeded = _random_after_setseed()
    duckdb_engine.execute(seed_sql)
    assert duckdb_engine.execute("SELECT random()").rows[0][0] != seeded
    # Within one statement the seed works as usual (the engine runs real DuckDB).
    both = duckdb_engine.execute("SELECT setseed(0.5) AS s UNION ALL SELECT random()").rows
    assert len(both) == 2


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE EXTENSIONS",
        "UPDATE EXTENSIONS (httpfs)",
        "SELECT * FROM query('UPDATE EXTENSIONS')",
        "SELECT * FROM query('INSTALL httpfs')",
    ],
)
def test_statements_that_crashed_the_duckdb_worker(duckdb_engine, sql):
    duckdb_engine.execute("SELECT 1")
    pid = duckdb_engine.worker_pid
    with pytest.raises(QueryError) as caught:
        duckdb_engine.execute(sql)
    assert caught.value.category in {"rejected", "runtime"}
    assert "crashed" not in caught.value.message and "memory" not in caught.value.message
    if sql.startswith("UPDATE"):
        assert caught.value.category == "rejected"
        assert "SELECT" in caught.value.message
    assert duckdb_engine.worker_pid == pid and duckdb_engine.restarts == 0
    assert duckdb_engine.execute("SELECT count(*) FROM t").rows == [(3,)]


ODD_TEXT = [
    ("lone-surrogate", "SELECT '\ud800'", "lone surrogate"),
    ("surrogate-in-name", 'SELECT 1 AS "\udcff"', "lone surrogate"),
    ("nul-at-end", "SELECT 1\x00", "NUL"),
    ("nul-hides-statement", "SELECT id FROM t\x00; DROP TABLE t", "NUL"),
    ("nul-in-literal", "SELECT 'a\x00b'", "NUL"),
]


@pytest.mark.parametrize("engine_name", ["sqlite", "duckdb"])
@pytest.mark.parametrize(("case", "sql", "words"), ODD_TEXT, ids=[c[0] for c in ODD_TEXT])
def test_odd_sql_text_is_a_syntax_error(
    engine_name, case, sql, words, sqlite_engine, duckdb_engine
):
    engine = sqlite_engine if engine_name == "sqlite" else duckdb_engine
    with pytest.raises(QueryError) as caught:
        engine.execute(sql)
    assert caught.value.category == "syntax"
    assert words in caught.value.message
    assert engine.execute("SELECT count(*) FROM t").rows == [(3,)]


@pytest.mark.parametrize(("corpus", "kind"), [("bird", "sqlite"), ("bird_interact", "duckdb")])
def test_odd_sql_text_verdict(corpus, kind):
    corpus = load_corpus(corpus, limits=LIMITS)
    record = corpus.records[0]
    verifier = Verifier(corpus.open_engine, limits=LIMITS)
    try:
        for sql in ("SELECT '\ud800'", "SELECT 1\x00"):
            verdict = verifier.verify(record, sql)
            assert (verdict.success, verdict.reason) == (False, "syntax"), verdict
        assert verifier.verify(record, record.verification.reference_sql).success
    finally:
        verifier.close()


# -- files -------------------------------------------------------------------------------------

_SLOW_BUILD = """
import sys
from ambitab_gym.verify.{module} import build_{module}
build_{module}(sys.argv[2], sys.argv[1])
"""


@pytest.mark.parametrize(
    ("module", "script"),
    [
        (
            "sqlite",
            "CREATE TABLE n(i INTEGER); WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
            "FROM r) INSERT INTO n SELECT i FROM r;",
        ),
        ("duckdb", "CREATE TABLE n AS SELECT range AS i FROM range(100000000000);"),
    ],
)
def test_a_killed_cache_build_leaves_nothing_after_the_next_build(tmp_path, module, script):
    target = tmp_path / f"cached.{module}"
    builder = subprocess.Popen(
        [sys.executable, "-c", _SLOW_BUILD.format(module=module), str(target), script]
    )
    try:
        deadline = time.monotonic() + 60
        while not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()):
            assert time.monotonic() < deadline and builder.poll() is None
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        builder.send_signal(signal.SIGKILL)
        builder.wait()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left and not target.exists()  # the killed builder left its temporary file(s)
    build = build_sqlite if module == "sqlite" else build_duckdb
    build("CREATE TABLE a AS SELECT 7 AS x;", target)
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]


def test_a_build_in_progress_is_not_swept(tmp_path):
    target = tmp_path / "x.sqlite"
    mine = tmp_path / f".x.sqlite.{os.uname().nodename.replace('.', '_')}.{os.getpid()}.ab.tmp"
    mine.write_text("a live builder's file")
    build_sqlite("CREATE TABLE a(x);", target)
    assert mine.exists()  # this process is alive: its file is not stale


def test_duckdb_makes_no_temporary_folder_next_to_the_database(duckdb_path):
    # Grouping 20 million rows in 64 MB must spill; DuckDB's default would create (and keep)
    # <database>.tmp even with max_temp_directory_size = 0.
    engine = DuckDBEngine(duckdb_path, limits=Limits(timeout_s=30, memory_limit_mb=64))
    try:
        settings = engine.execute(
            "SELECT current_setting('temp_directory'), current_setting('max_temp_directory_size')"
        ).rows
        with pytest.raises(QueryError) as caught:
            engine.execute(
                "SELECT x, list(s) FROM (SELECT x % 500000 AS x, s FROM big, range(40)) "
                "GROUP BY x ORDER BY 2 LIMIT 1"
            )
    finally:
        engine.close()
    assert settings == [("", "0 bytes")]
    assert caught.value.category == "too_large"
    assert sorted(p.name for p in duckdb_path.parent.iterdir()) == [duckdb_path.name]
