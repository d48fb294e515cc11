"""The DuckDB engine: sandbox settings, one SELECT only, limits, and the killable worker."""

from __future__ import annotations

import contextlib
import datetime
import decimal
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ambitab_gym.corpora import load_corpus
from ambitab_gym.verify.base import Limits, QueryError
from ambitab_gym.verify.duckdb import DuckDBEngine, build_duckdb

SCRIPT = """
CREATE TABLE staff (id INTEGER PRIMARY KEY, name VARCHAR, salary DECIMAL(10, 2),
                    hired DATE, seen TIMESTAMPTZ, tags VARCHAR[]);
INSERT INTO staff VALUES
  (1, 'Ada', 5200.50, DATE '2020-03-01', TIMESTAMPTZ '2024-01-02 03:04:05+00', ['a', 'b']),
  (2, 'Grace', 6100.00, DATE '2019-07-15', NULL, []),
  (3, 'Linus', 4800.25, DATE '2021-11-30', NULL, NULL);
CREATE TABLE numbers AS SELECT range AS n FROM range(200);
"""


def _sha256(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("duckdb") / "staff.duckdb"
    build_duckdb(SCRIPT, path)
    return path


@pytest.fixture
def engine(db_path):
    engine = DuckDBEngine(db_path, limits=Limits(timeout_s=2.0, memory_limit_mb=256))
    yield engine
    engine.close()


def test_build_is_atomic_and_leaves_no_wal(tmp_path):
    target = tmp_path / "x.duckdb"
    with pytest.raises(Exception, match="nosuch"):
        build_duckdb("CREATE TABLE a(x INTEGER); INSERT INTO nosuch VALUES (1);", target)
    assert list(tmp_path.iterdir()) == []  # neither the target nor a temporary file
    build_duckdb("CREATE TABLE a(x INTEGER); INSERT INTO a VALUES (7);", target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.duckdb"]
    engine = DuckDBEngine(target)
    try:
        assert engine.execute("SELECT x FROM a").rows == [(7,)]
    finally:
        engine.close()


def test_values_and_types_come_back(engine):
    result = engine.execute("SELECT id, name, salary, hired, seen, tags FROM staff ORDER BY id")
    assert result.columns == ("id", "name", "salary", "hired", "seen", "tags")
    first = result.rows[0]
    assert first[:4] == (1, "Ada", decimal.Decimal("5200.50"), datetime.date(2020, 3, 1))
    assert first[4] == datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    assert first[5] == ["a", "b"]
    assert result.rows[1][4:] == (None, [])
    assert engine.execute("SELECT sum(n) FROM numbers").rows == [(199 * 200 // 2,)]
    empty = engine.execute("SELECT name FROM staff WHERE id > 99")
    assert empty.columns == ("name",) and empty.rows == []


def test_sandbox_settings_are_applied_and_locked(engine):
    names = (
        "enable_external_access",
        "lock_configuration",
        "autoload_known_extensions",
        "autoinstall_known_extensions",
        "allow_community_extensions",
        "threads",
        "access_mode",
    )
    # (current_setting with a literal name: duckdb_settings() is refused, it lists the file's
    # path in allowed_paths)
    values = engine.execute(
        "SELECT " + ", ".join(f"lower(current_setting('{name}')::VARCHAR)" for name in names)
    ).rows[0]
    settings = dict(zip(names, values, strict=True))
    assert settings == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "autoload_known_extensions": "false",
        "autoinstall_known_extensions": "false",
        "allow_community_extensions": "false",
        "threads": "1",
        "access_mode": "read_only",
    }
    for attempt in ("SET enable_external_access = true", "RESET lock_configuration"):
        with pytest.raises(QueryError) as caught:
            engine.execute(attempt)
        assert caught.value.category == "rejected"


@pytest.mark.parametrize(
    ("sql", "category"),
    [
        ("SELECT 1; SELECT 2", "rejected"),
        ("DELETE FROM staff", "rejected"),
        ("CREATE TABLE t2 AS SELECT 1", "rejected"),
        ("PRAGMA enable_profiling", "rejected"),
        ("EXPLAIN SELECT 1", "rejected"),
        ("SELECT * FROM read_csv('/etc/passwd')", "rejected"),
        ("SELECT * FROM glob('/*')", "rejected"),
        ("SELEC 1", "syntax"),
        ("SELECT nosuch FROM staff", "runtime"),
        ("", "rejected"),
    ],
)
def test_refusals_and_errors(engine, sql, category):
    with pytest.raises(QueryError) as caught:
        engine.execute(sql)
    assert caught.value.category == category
    assert engine.execute("SELECT count(*) FROM staff").rows == [(3,)]


def test_too_many_rows_and_too_large(engine):
    with pytest.raises(QueryError) as caught:
        engine.execute("SELECT n FROM numbers", limits=Limits(max_rows=50, memory_limit_mb=256))
    assert caught.value.category == "too_many_rows"
    assert len(engine.execute("SELECT n FROM numbers WHERE n < 50").rows) == 50
    with pytest.raises(QueryError) as caught:  # 100 rows of 1 MB: over the 64 MiB result cap
        engine.execute("SELECT repeat('x', 1000000) FROM range(100)")
    assert caught.value.category == "too_large"


def test_timeout_interrupts_without_restarting_the_worker(engine):
    engine.execute("SELECT 1")
    pid = engine.worker_pid
    with pytest.raises(QueryError) as caught:
        engine.execute(
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
            limits=Limits(timeout_s=0.5, memory_limit_mb=256),
        )
    assert caught.value.category == "timeout"
    assert engine.execute("SELECT count(*) FROM staff").rows == [(3,)]
    assert engine.worker_pid == pid and engine.restarts == 0


def test_memory_bomb_fails_inside_the_worker(engine):
    with pytest.raises(QueryError) as caught:
        engine.execute("SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(5000)")
    assert caught.value.category in {"too_large", "runtime"}
    assert engine.execute("SELECT name FROM staff WHERE id = 2").rows == [("Grace",)]


def test_a_worker_killed_mid_query_fails_that_query_and_is_replaced(engine):
    engine.execute("SELECT 1")
    pid = engine.worker_pid
    outcome: dict = {}

    def run() -> None:
        try:
            engine.execute(
                "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
                "SELECT count(*) FROM r",
                limits=Limits(timeout_s=60.0, memory_limit_mb=256),
            )
        except QueryError as error:
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.3)
    os.kill(pid, signal.SIGKILL)
    thread.join(30)
    assert not thread.is_alive()
    assert outcome["error"].category == "runtime"
    assert "restarted" in outcome["error"].message
    assert engine.execute("SELECT count(*) FROM staff").rows == [(3,)]
    assert engine.worker_pid != pid and engine.restarts == 1


def test_a_stuck_worker_is_killed_at_the_deadline(engine):
    engine.execute("SELECT 1")
    pid = engine.worker_pid
    os.kill(pid, signal.SIGSTOP)  # a worker that ignores its own interrupt
    try:
        with pytest.raises(QueryError) as caught:
            engine.execute("SELECT 42", limits=Limits(timeout_s=0.2, memory_limit_mb=256))
        assert caught.value.category == "timeout"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert engine.execute("SELECT 42").rows == [(42,)]
    assert engine.worker_pid != pid and engine.restarts == 1


def test_threads_share_one_engine(engine):
    results: list = []

    def run(k: int) -> None:
        results.append((k, engine.execute(f"SELECT count(*) FROM numbers WHERE n < {k}").rows))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [(k, [(k,)]) for k in range(1, 9)]


def test_database_file_is_untouched(engine, db_path):
    before = _sha256(db_path)
    for sql in ("SELECT * FROM staff", "DROP TABLE staff", "SELECT 1; DELETE FROM staff"):
        with contextlib.suppress(QueryError):
            engine.execute(sql)
    engine.close()
    assert _sha256(db_path) == before
    assert not os.path.exists(f"{db_path}.wal")


def test_corpus_builds_and_opens_duckdb_databases():
    corpus = load_corpus("bird_interact")
    database = sorted(corpus.manifest.databases)[0]
    path = corpus.database_file(database, "duckdb")
    assert path.suffix == ".duckdb" and path.is_file()
    engine = corpus.open_engine("duckdb", database)
    try:
        assert isinstance(engine, DuckDBEngine)
        tables = engine.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").rows
        script = (corpus.path / corpus.manifest.databases[database].file).read_text()
        for (table,) in tables:
            assert f"CREATE TABLE {table}" in script
    finally:
        engine.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_process_gets_its_own_worker(engine):
    assert engine.execute("SELECT 1").rows == [(1,)]
    parent_worker = engine.worker_pid
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            rows = engine.execute("SELECT count(*) FROM staff").rows
            os.write(write_end, f"{rows[0][0]} {engine.worker_pid}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    count, child_worker = os.read(read_end, 100).decode().split()
    os.close(read_end)
    os.waitpid(child, 0)
    assert count == "3" and int(child_worker) != parent_worker
    assert engine.execute("SELECT 2").rows == [(2,)] and engine.worker_pid == parent_worker


# -- a cache build killed mid-way (issue 30) ---------------------------------------------------

# A real builder of a corpus's cache file (build_duckdb, as Corpus.database_file runs it) that
# stops after the script ran and before its checkpoint - the temporary file and its WAL are on
# disk - says "building" and waits for a line on stdin: the test kills it there, or lets it go.
_HELD_BUILDER = """
import sys
import duckdb
from ambitab_gym.verify.duckdb import build_duckdb

connect = duckdb.connect


class Held:
    def __init__(self, connection):
        self.connection = connection

    def execute(self, sql, *args):
        if sql == "CHECKPOINT":
            print("building", flush=True)
            sys.stdin.readline()
        return self.connection.execute(sql, *args)

    def close(self):
        self.connection.close()


duckdb.connect = lambda *args, **kwargs: Held(connect(*args, **kwargs))
with open(sys.argv[2], encoding="utf-8") as script:
    build_duckdb(script.read(), sys.argv[1])
"""


def _cache_target(corpus, *, built: bool):
    """A bundled DuckDB database's cache path and script; the file is there when ``built``."""
    database = sorted(corpus.manifest.databases)[0]
    target = corpus.database_file(database, "duckdb")
    if not built:
        target.unlink()
    return database, target, corpus.path / corpus.manifest.databases[database].file


def _held_builder(target, script) -> subprocess.Popen:
    builder = subprocess.Popen(
        [sys.executable, "-c", _HELD_BUILDER, str(target), str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = builder.stdout.readline()
    if line != "building\n":
        builder.kill()
        pytest.fail(f"the builder did not start: {builder.communicate()[1][-2000:]}")
    return builder


def _temporary_files(target) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if p.name != target.name)


def _check_cache(corpus, database, target) -> None:
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]
    engine = corpus.open_engine("duckdb", database)
    try:
        assert engine.execute("SELECT count(*) FROM players").rows[0][0] > 0
    finally:
        engine.close()


@pytest.mark.parametrize("built_meanwhile", [False, True], ids=["rebuilt", "built-meanwhile"])
def test_a_cache_build_killed_mid_way_leaves_nothing_at_the_next_start(data_home, built_meanwhile):
    corpus = load_corpus("bird_interact")
    database, target, script = _cache_target(corpus, built=built_meanwhile)
    builder = _held_builder(target, script)
    builder.send_signal(signal.SIGKILL)
    builder.communicate()
    left = _temporary_files(target)
    # the killed builder's database and its write-ahead log, named after its pid and start time
    assert any(name.endswith(".tmp") for name in left), left
    assert any(name.endswith(".tmp.wal") for name in left), left
    assert all(f".{builder.pid}-" in name for name in left), left
    # The next start: it builds the file (sweeping first), or finds it built by another
    # process and sweeps before opening it.
    assert corpus.database_file(database, "duckdb") == target
    _check_cache(corpus, database, target)


def test_a_running_builders_files_stay(data_home):
    corpus = load_corpus("bird_interact")
    database, target, script = _cache_target(corpus, built=False)
    builder = _held_builder(target, script)
    try:
        theirs = _temporary_files(target)
        assert corpus.database_file(database, "duckdb") == target  # builds its own copy
        assert corpus.database_file(database, "duckdb") == target  # and opens it
        assert _temporary_files(target) == theirs  # the live builder's files are untouched
        builder.stdin.write("go on\n")
        builder.stdin.flush()
        assert builder.wait() == 0, builder.stderr.read()
    finally:
        if builder.poll() is None:
            builder.kill()
        builder.communicate()
    _check_cache(corpus, database, target)  # its rename replaced the file whole


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_a_zombie_builders_files_are_swept(data_home):
    corpus = load_corpus("bird_interact")
    database, target, script = _cache_target(corpus, built=True)
    builder = _held_builder(target, script)
    builder.send_signal(signal.SIGKILL)
    try:
        # killed and not reaped (no wait yet): a zombie, which a signal 0 still reaches
        state, deadline = "", time.monotonic() + 60
        while state != "Z" and time.monotonic() < deadline:
            with open(f"/proc/{builder.pid}/stat", "rb") as stat:
                state = stat.read().rsplit(b")", 1)[1].split()[0].decode()
            time.sleep(0.01)
        assert state == "Z"
        os.kill(builder.pid, 0)
        assert _temporary_files(target)
        assert corpus.database_file(database, "duckdb") == target
        _check_cache(corpus, database, target)
    finally:
        builder.communicate()


def test_a_reused_pid_does_not_keep_a_dead_builders_files(tmp_path):
    from ambitab_gym.verify.sqlite import _HOST, _builder_tag, sweep_stale_builds

    target = tmp_path / "x.duckdb"
    pid, start = _builder_tag().split("-")
    reused = tmp_path / f".x.duckdb.{_HOST}.{pid}-{int(start) + 1}.abcd1234.tmp"
    mine = tmp_path / f".x.duckdb.{_HOST}.{pid}-{start}.abcd1234.tmp"
    for path in (reused, Path(f"{reused}.wal"), mine):
        path.write_text("x")
    removed = sweep_stale_builds(target)
    if start == "0":  # no /proc: only the pid is known
        assert removed == []
    else:
        assert sorted(p.name for p in removed) == sorted([reused.name, f"{reused.name}.wal"])
    assert mine.exists()
