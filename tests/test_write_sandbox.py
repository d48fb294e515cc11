"""Write tasks run in a private scratch state per verification (issue 14, part A).

On SQLite, DuckDB and a throwaway PostgreSQL cluster: submissions that UPDATE, INSERT, DELETE
or CREATE are verified by their test case and leave the corpus database exactly as it was
(file bytes hashed; PostgreSQL: every table's rows, the roles' settings), also when the worker
is killed mid-write or the verifying process is killed; the hostile catalogue holds inside the
sandbox; the official BIRD-Interact sample's Management tasks pass with their own solution and
fail with a wrong one (the Mini-Interact ``alien`` SQLite database loaded into PostgreSQL and
DuckDB); query tasks with upstream ``conditions`` compare by upstream's rules.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)
from write_task_fixtures import HR_SQL, RAISE, RAISE_TEST

from ambitab_gym.corpora import load_corpus
from ambitab_gym.records import parse_record
from ambitab_gym.verify import Limits, Verifier
from ambitab_gym.verify.postgres import PostgresEngine, database_name, load_corpus_databases

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT.parent / "shared" / "upstream" / "bird_interact"
SAMPLE = UPSTREAM / "official_sample" / "bird_interact_data.jsonl"
ALIEN_SQLITE = UPSTREAM / "mini_interact" / "alien" / "alien.sqlite"

# The task: "archive the south region into a new table and remove it from staff".
ARCHIVE = (
    "CREATE TABLE archive AS SELECT * FROM staff WHERE region = 'south'; "
    "DELETE FROM staff WHERE region = 'south'"
)
ARCHIVE_TEST = """
def test_case(pred_sqls, sol_sqls, db_name, conn):
    kept, _, _ = execute_queries("SELECT count(*) FROM staff", db_name, conn)
    moved, error, _ = execute_queries("SELECT name FROM archive ORDER BY name", db_name, conn)
    assert not error and kept[0][0] == 2 and [r[0] for r in moved] == ["Bob", "Dee"]
"""
# The task: "hire Eve (id 5, north, 95)".
HIRE = "INSERT INTO staff VALUES (5, 'Eve', 95, 'north')"
HIRE_TEST = """
def test_case(pred_sqls, sol_sqls, db_name, conn):
    rows, _, _ = execute_queries("SELECT name, salary FROM staff WHERE id = 5", db_name, conn)
    assert rows == [("Eve", 95)], rows
    assert pred_query_result is None  # the submission's last statement returned no rows
"""

ENGINES = ["sqlite", "duckdb", "postgres"]


def _record(rid: str, engine: str, reference: str, tests: list[str], **extra) -> dict:
    verification = {
        "engine": engine,
        "database": "hr",
        "reference_sql": reference,
        "test_cases": tests,
    } | extra.pop("verification", {})
    return {
        "id": rid,
        "avt_id": rid,
        "corpus": "writes",
        "split": "all",
        "spec": {"request": f"task {rid}", "database": "hr"},
        "ambiguities": [],
        "verification": verification,
        "source": extra.pop("source", {"kind": "test"}),
    }


def write_corpus(folder: Path, engine: str, records: list[dict], script: str = HR_SQL) -> Path:
    (folder / "databases").mkdir(parents=True, exist_ok=True)
    (folder / "databases" / "hr.sql").write_text(script)
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    manifest = {
        "name": f"writes_{engine}",
        "version": "0.0.1",
        "oracle": "intent",
        "databases": {
            "hr": {
                "file": "databases/hr.sql",
                "sha256": hashlib.sha256(script.encode()).hexdigest(),
            }
        },
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Setup:
    """A corpus on one engine, its verifier, and how to take a snapshot of its database."""

    def __init__(self, engine: str, folder: Path, records: list[dict], cluster=None, script=HR_SQL):
        self.engine = engine
        self.cluster = cluster
        write_corpus(folder, engine, records, script)
        self.path = folder
        if engine == "postgres":
            base = load_corpus(folder)
            dsn = load_corpus_databases(base, cluster.dsn(), reader="writer_agent")
            self.options = {"dsn": dsn, "admin_dsn": cluster.dsn()}
            self.corpus = load_corpus(folder, engine_override="postgres", options=self.options)
            self.dbname = database_name(self.corpus.name, "hr")
        else:
            self.corpus = load_corpus(folder)
            self.file = Path(self.corpus.database_file("hr", engine))
        self.records = {r.id: r for r in self.corpus.records}

    def verifier(self, timeout_s: float = 3.0) -> Verifier:
        return Verifier(self.corpus.open_engine, limits=Limits(timeout_s=timeout_s))

    def snapshot(self) -> object:
        if self.engine != "postgres":
            return _sha(self.file), sorted(os.listdir(self.file.parent))
        with psycopg.connect(self.cluster.dsn(self.dbname), autocommit=True) as admin:
            relations = admin.execute(
                "SELECT c.relname::text, c.relkind::text FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = 'public' ORDER BY 1"
            ).fetchall()
            functions = admin.execute(
                "SELECT p.proname::text FROM pg_proc p JOIN pg_namespace n "
                "ON n.oid = p.pronamespace WHERE n.nspname = 'public' ORDER BY 1"
            ).fetchall()
            tables = [name for name, kind in relations if kind == "r"]
            rows = {
                name: admin.execute(f'SELECT * FROM "{name}" ORDER BY 1').fetchall()
                for name in tables
            }
            roles = admin.execute(
                "SELECT r.rolname::text, r.rolpassword, s.setconfig FROM pg_authid r "
                "LEFT JOIN pg_db_role_setting s ON s.setrole = r.oid "
                "WHERE r.rolname LIKE 'writer_agent%' ORDER BY 1"
            ).fetchall()
        return relations, functions, rows, roles

    def scratch_databases(self) -> list[str]:
        with psycopg.connect(self.cluster.dsn(), autocommit=True) as admin:
            return [
                r[0]
                for r in admin.execute(
                    "SELECT datname FROM pg_database WHERE datname LIKE 'ambitab\\_s\\_%'"
                ).fetchall()
            ]


TASKS = [
    _record("raise", "", RAISE, [RAISE_TEST]),
    _record("archive", "", ARCHIVE, [ARCHIVE_TEST]),
    _record("hire", "", HIRE, [HIRE_TEST]),
]


def _records(engine: str) -> list[dict]:
    return [r | {"verification": r["verification"] | {"engine": engine}} for r in TASKS]


@pytest.fixture(params=ENGINES)
def setup(request, tmp_path) -> Setup:
    engine = request.param
    cluster = request.getfixturevalue("postgres_cluster") if engine == "postgres" else None
    return Setup(engine, tmp_path / "corpus", _records(engine), cluster)


# (task, submission, expected reason): right answers, wrong ones, several statements.
SUBMISSIONS = [
    ("raise", RAISE, "match"),
    ("raise", RAISE + ";", "match"),
    ("raise", "UPDATE staff SET salary = 150 WHERE name = 'Ann'", "mismatch"),
    ("raise", "UPDATE staff SET salary = 150", "mismatch"),
    ("raise", "DELETE FROM staff WHERE region = 'north'", "mismatch"),
    # several statements, the last one a query: state and result both count
    (
        "raise",
        "UPDATE staff SET salary = 0; UPDATE staff SET salary = 150 WHERE region = "
        "'north'; UPDATE staff SET salary = 120 WHERE id = 2; UPDATE staff SET salary = 110 "
        "WHERE id = 4; SELECT count(*) FROM staff",
        "match",
    ),
    ("archive", ARCHIVE, "match"),
    ("archive", "CREATE TABLE archive AS SELECT * FROM staff WHERE region = 'south'", "mismatch"),
    ("archive", "DELETE FROM staff WHERE region = 'south'", "mismatch"),
    ("hire", HIRE, "match"),
    ("hire", "INSERT INTO staff VALUES (5, 'Eve', 96, 'north')", "mismatch"),
    ("hire", "INSERT INTO staff VALUES (1, 'Eve', 95, 'north')", "runtime"),  # duplicate key
    ("hire", "INSERT INTO nowhere VALUES (1)", "runtime"),
    ("hire", "INSERT INTO staff VALUES (5, 'Eve', 95, 'north'); SELEC 1", "syntax"),
]


def test_writes_are_verified_by_their_test_case_and_leave_the_database_unchanged(setup):
    before = setup.snapshot()
    verifier = setup.verifier()
    try:
        got = {}
        for task, sql, _expected in SUBMISSIONS:
            first = verifier.verify(setup.records[task], sql)
            second = verifier.verify(setup.records[task], sql)  # a fresh scratch state again
            assert (first.success, first.reason) == (second.success, second.reason), sql
            got[(task, sql)] = first.reason
            assert setup.snapshot() == before, sql
    finally:
        verifier.close()
    assert got == {(task, sql): expected for task, sql, expected in SUBMISSIONS}
    assert setup.snapshot() == before
    if setup.engine == "postgres":
        assert setup.scratch_databases() == []  # every clone was dropped


def test_verdict_details_do_not_reveal_the_test_case(setup):
    verifier = setup.verifier()
    try:
        verdict = verifier.verify(setup.records["raise"], "UPDATE staff SET salary = 151")
    finally:
        verifier.close()
    assert verdict.reason == "mismatch"
    assert "150" not in verdict.detail and "Ann" not in verdict.detail
    assert "test_case" not in verdict.detail and "north" not in verdict.detail


# A statement that writes, then runs far past the time limit.
LONG = {
    "sqlite": "UPDATE staff SET salary = 0; WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
    "SELECT x + 1 FROM c) SELECT count(*) FROM c",
    "duckdb": "UPDATE staff SET salary = 0; SELECT count(*) FROM range(1000000000000) a, "
    "range(1000) b",
    "postgres": "UPDATE staff SET salary = 0; SELECT pg_sleep(30)",
}


def test_a_write_cut_by_the_time_limit_or_a_killed_worker_leaves_nothing(setup):
    before = setup.snapshot()
    verifier = setup.verifier(timeout_s=1.5)
    record = setup.records["raise"]
    try:
        assert verifier.verify(record, RAISE).reason == "match"
        timed = verifier.verify(record, LONG[setup.engine])
        assert timed.reason == "timeout", timed
        assert setup.snapshot() == before
        # Kill the task worker while it is in the middle of the long statement.
        engine = verifier.engine(setup.engine, "hr")
        pid = engine.task_worker_pid
        assert pid is not None  # the worker that answered the timeout is still up
        outcome: dict = {}
        thread = threading.Thread(
            target=lambda: outcome.update(v=verifier.verify(record, LONG[setup.engine]))
        )
        baseline = _cpu_ticks(pid)
        thread.start()
        assert _wait_for_long_statement(setup, [pid], baseline)
        os.kill(pid, signal.SIGKILL)
        thread.join(30)
        assert not outcome["v"].success and outcome["v"].reason in ("runtime", "timeout")
        assert setup.snapshot() == before
        # The next verification gets a fresh worker and a fresh scratch state.
        again = verifier.verify(record, RAISE)
        assert again.reason == "match" and engine.task_worker_pid != pid
    finally:
        verifier.close()
    assert setup.snapshot() == before
    if setup.engine == "postgres":
        assert setup.scratch_databases() == []


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _cpu_ticks(pid: int) -> int:
    try:
        fields = _stat(pid)
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat(int(entry.name))[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _wait_for_long_statement(
    setup: Setup, pids: list[int], baseline: int = 0, ticks: int = 50
) -> bool:
    """Whether the long statement is running: PostgreSQL shows the agent's backend in
    ``pg_sleep``; SQLite and DuckDB workers burn half a second of CPU in it."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if setup.engine == "postgres":
            with psycopg.connect(setup.cluster.dsn(), autocommit=True) as admin:
                if admin.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE usename = 'writer_agent' "
                    "AND wait_event = 'PgSleep'"
                ).fetchone():
                    return True
        elif any(_cpu_ticks(pid) - baseline > ticks for pid in pids):
            return True
        time.sleep(0.05)
    return False


KILLED_VERIFIER = r"""
import sys
from ambitab_gym.corpora import load_corpus
from ambitab_gym.verify import Limits, Verifier
import json
folder, engine, options, sql = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
if engine == "postgres":
    corpus = load_corpus(folder, engine_override="postgres", options=options)
else:
    corpus = load_corpus(folder)
verifier = Verifier(corpus.open_engine, limits=Limits(timeout_s=30))
record = next(r for r in corpus.records if r.id == "raise")
print("started", flush=True)
verifier.verify(record, sql)
print("finished", flush=True)
"""


def test_a_process_killed_mid_verification_leaves_the_database_unchanged(setup):
    before = setup.snapshot()
    options = getattr(setup, "options", {})
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            KILLED_VERIFIER,
            str(setup.path),
            setup.engine,
            json.dumps(options),
            LONG[setup.engine],
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 20
        while not _children(process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _children(process.pid)
        # (the worker checks the record's own solution first, then runs the long statement;
        # one second of CPU is well inside it)
        assert _wait_for_long_statement(setup, workers, ticks=100)
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
    time.sleep(0.5)
    assert setup.snapshot() == before
    verifier = setup.verifier()
    try:
        assert verifier.verify(setup.records["raise"], RAISE).reason == "match"
    finally:
        verifier.close()
    assert setup.snapshot() == before
    if setup.engine == "postgres":
        # What the killed verifier left (its clone) was dropped by the next engine's sweep.
        deadline = time.monotonic() + 35
        while setup.scratch_databases() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert setup.scratch_databases() == []


PROBE = "/tmp/ambitab_write_probe"
# Attacks inside a write task: each must fail (never ``match``) and leave no trace.
HOSTILE = {
    "sqlite": [
        f"ATTACH '{PROBE}.sqlite' AS x",
        f"VACUUM INTO '{PROBE}.sqlite'",
        "PRAGMA writable_schema = 1",
        "SELECT load_extension('/lib/x86_64-linux-gnu/libc.so.6')",
        "SELECT readfile('/etc/passwd')",
        f"SELECT writefile('{PROBE}.txt', 'x')",
        "UPDATE staff SET salary = 150 WHERE region = 'north'; DETACH main",
    ],
    "duckdb": [
        f"ATTACH '{PROBE}.duckdb' AS x",
        "SELECT * FROM read_csv('/etc/passwd')",
        f"COPY staff TO '{PROBE}.csv'",
        f"EXPORT DATABASE '{PROBE}'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "SET memory_limit = '100GB'",
        "UPDATE EXTENSIONS",
        "UPDATE staff SET salary = 150 WHERE region = 'north'; DETACH ambitab_source",
        "UPDATE staff SET salary = 150 WHERE region = 'north'; "
        "CREATE TABLE ambitab_source.main.evil AS SELECT 1",
        "UPDATE staff SET salary = 150 WHERE region = 'north'; USE ambitab_source",
    ],
    "postgres": [
        "SELECT pg_read_file('/etc/passwd')",
        f"COPY staff TO '{PROBE}.csv'",
        f"COPY (SELECT 1) TO PROGRAM 'touch {PROBE}.prog'",
        "CREATE EXTENSION dblink",
        "CREATE EXTENSION postgres_fdw",
        "SET ROLE postgres",
        "ALTER SYSTEM SET work_mem = '1GB'",
        "CREATE DATABASE ambitab_escape",
        "CREATE FUNCTION evil() RETURNS int LANGUAGE c AS 'libc.so.6', 'abort'",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
        # committing would make the role changes below outlive the task
        "ALTER ROLE CURRENT_USER SET search_path = 'nowhere'; COMMIT",
        "ALTER ROLE CURRENT_USER SET search_path = 'nowhere'; /* /* */ SELECT */ COMMIT",
        "ALTER ROLE CURRENT_USER SET search_path = 'nowhere'; END",
        "ALTER ROLE CURRENT_USER SET search_path = 'nowhere'; PREPARE TRANSACTION 'x'",
        "ALTER ROLE CURRENT_USER SET search_path = 'nowhere'; DO $$ BEGIN COMMIT; END $$",
        "ALTER ROLE CURRENT_USER SET search_path = 'nowhere'; SELECT 1/0",
        "ALTER ROLE CURRENT_USER PASSWORD 'stolen'; SELECT 1/0",
    ],
}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_hostile_catalogue_holds_inside_the_sandbox(engine, tmp_path, request):
    cluster = request.getfixturevalue("postgres_cluster") if engine == "postgres" else None
    setup = Setup(engine, tmp_path / "corpus", _records(engine), cluster)
    before = setup.snapshot()
    probes_before = sorted(p.name for p in Path("/tmp").glob("ambitab_write_probe*"))
    verifier = setup.verifier(timeout_s=3.0)
    record = setup.records["raise"]
    try:
        verdicts = {sql: verifier.verify(record, sql) for sql in HOSTILE[engine]}
        after = verifier.verify(record, RAISE)
    finally:
        verifier.close()
    for sql, verdict in verdicts.items():
        assert not verdict.success, (sql, verdict)
        assert verdict.reason in ("rejected", "runtime", "syntax", "mismatch"), (sql, verdict)
    assert after.reason == "match"
    assert setup.snapshot() == before
    assert sorted(p.name for p in Path("/tmp").glob("ambitab_write_probe*")) == probes_before
    if engine == "postgres":
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            assert admin.execute(
                "SELECT count(*) FROM pg_database WHERE datname = 'ambitab_escape'"
            ).fetchone() == (0,)
        assert setup.scratch_databases() == []


def test_duckdb_write_task_refusals_name_the_statement_and_hide_the_file(tmp_path):
    setup = Setup("duckdb", tmp_path / "corpus", _records("duckdb"), None)
    record = setup.records["raise"]
    before = setup.snapshot()
    verifier = setup.verifier(timeout_s=3.0)
    try:
        # DuckDB's parser types COPY FROM DATABASE as PRAGMA: the message names it as written
        copy = verifier.verify(record, "COPY FROM DATABASE ambitab_source TO elsewhere")
        leaks = {
            sql: verifier.verify(record, f"{RAISE}; {sql}")
            for sql in [
                "SELECT error(path) FROM duckdb_databases()",
                "SELECT error(file) FROM pragma_database_list",
                "SELECT error(value) FROM duckdb_settings() WHERE name = 'allowed_paths'",
                "CREATE TABLE leak AS SELECT * FROM query('SELECT path FROM duck' || "
                "'db_databases()')",
                "SELECT error(current_setting('allowed_' || 'paths')::VARCHAR)",
            ]
        }
        after = verifier.verify(record, RAISE)
    finally:
        verifier.close()
    assert (copy.reason, copy.detail) == (
        "rejected",
        "not allowed in the sandbox (got COPY FROM DATABASE)",
    ), copy
    secrets = (str(setup.file), str(setup.file.resolve()), str(setup.file.resolve().parent))
    for sql, verdict in leaks.items():
        assert verdict.reason == "rejected", (sql, verdict)
        assert not any(secret in repr(verdict) for secret in secrets), (sql, verdict)
    assert after.reason == "match"
    assert setup.snapshot() == before


# -- the official sample's Management tasks ------------------------------------------------------

needs_sample = pytest.mark.skipif(
    not (SAMPLE.is_file() and ALIEN_SQLITE.is_file()),
    reason=f"the BIRD-Interact upstream sample is absent ({SAMPLE.parent}, {ALIEN_SQLITE})",
)


def _pg_type(declared: str) -> str:
    declared = declared.lower()
    base, _, size = declared.partition("(")
    if base == "real":
        return f"numeric({size}" if size else "double precision"
    if base == "integer":
        return "bigint"
    return "text"


def alien_script() -> str:
    """The Mini-Interact ``alien`` SQLite database as a PostgreSQL/DuckDB SQL script."""
    source = sqlite3.connect(f"file:{ALIEN_SQLITE}?mode=ro", uri=True)
    lines = []
    tables = source.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    ).fetchall()
    for (table,) in tables:
        columns = source.execute(f'PRAGMA table_info("{table}")').fetchall()
        keys = [c[1] for c in sorted(columns, key=lambda c: c[5]) if c[5]]
        body = [f"{c[1]} {_pg_type(c[2])}{' NOT NULL' if c[3] else ''}" for c in columns]
        if keys:
            body.append(f"PRIMARY KEY ({', '.join(keys)})")
        lines.append(f"CREATE TABLE {table} ({', '.join(body)});")
        rows = source.execute(f'SELECT * FROM "{table}"').fetchall()
        for start in range(0, len(rows), 500):
            values = ", ".join(
                "(" + ", ".join(_literal(v) for v in row) + ")" for row in rows[start : start + 500]
            )
            lines.append(f"INSERT INTO {table} VALUES {values};")
    source.close()
    return "\n".join(lines) + "\n"


def _literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _sample_tasks() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def _management_record(task: dict, engine: str) -> dict:
    return {
        "id": task["instance_id"],
        "avt_id": task["instance_id"],
        "corpus": "alien",
        "split": "all",
        "spec": {"request": task["query"], "database": "hr"},
        "ambiguities": [],
        "verification": {
            "engine": engine,
            "database": "hr",
            "reference_sql": "\n;\n".join(task["sol_sql"]),
            "test_cases": task["test_cases"],
            "preprocess_sql": task["preprocess_sql"],
            "cleanup_sql": task["clean_up_sqls"],
        },
        "source": {"category": task["category"], "conditions": task["conditions"]},
    }


# A wrong solution per Management task (each plausible, each caught by the task's test).
WRONG = {
    "alien_M_1": "UPDATE Signals SET SignalClass = 'Weak' "
    "WHERE (SnrRatio - 0.1 * ABS(NoiseFloorDbm)) < -100",
    "alien_M_2": "CREATE OR REPLACE FUNCTION calculate_disf(p_airtemp NUMERIC, p_trans NUMERIC, "
    "p_humidity NUMERIC, p_lunar_deg NUMERIC) RETURNS NUMERIC AS $$ BEGIN RETURN "
    "(10 - ABS(p_airtemp - 15)/10) * p_trans * (1 - p_humidity/100) * ((100 - p_lunar_deg)/100);"
    " END; $$ LANGUAGE plpgsql",
    "alien_M_3": "CREATE OR REPLACE VIEW vw_observation_quality AS SELECT o.ObservStation, "
    "t.TelescRegistry, s.SignalRegistry, 1.0 AS aoi, 0.0 AS lif, 1.0 AS oqf FROM Observatories "
    "o JOIN Telescopes t ON o.ObservStation = t.ObservStation JOIN Signals s "
    "ON s.TelescRef = t.TelescRegistry",
    "alien_M_4": "ALTER TABLE Signals ADD COLUMN IF NOT EXISTS IsAnalyzable BOOLEAN; "
    "CREATE OR REPLACE FUNCTION set_analyzable_flag() RETURNS TRIGGER AS $$ BEGIN "
    "NEW.IsAnalyzable := TRUE; RETURN NEW; END; $$ LANGUAGE plpgsql; "
    "CREATE TRIGGER trg_set_analyzable BEFORE INSERT OR UPDATE ON Signals FOR EACH ROW "
    "EXECUTE FUNCTION set_analyzable_flag();",
}


@needs_sample
def test_official_management_tasks_on_postgres(postgres_cluster, tmp_path):  # noqa: F811
    tasks = [t for t in _sample_tasks() if t["category"] == "Management"]
    assert sorted(t["instance_id"] for t in tasks) == sorted(WRONG)
    records = [_management_record(t, "postgres") for t in tasks]
    setup = Setup("postgres", tmp_path / "alien", records, postgres_cluster, alien_script())
    before = setup.snapshot()
    verifier = setup.verifier(timeout_s=10.0)
    try:
        for task in tasks:
            record = setup.records[task["instance_id"]]
            right = verifier.verify(record, record.verification.reference_sql)
            wrong = verifier.verify(record, WRONG[task["instance_id"]])
            assert (right.reason, wrong.reason) == ("match", "mismatch"), (
                task["instance_id"],
                right,
                wrong,
            )
    finally:
        verifier.close()
    assert setup.snapshot() == before
    assert setup.scratch_databases() == []


@needs_sample
def test_official_management_tasks_on_duckdb(tmp_path):
    tasks = {t["instance_id"]: t for t in _sample_tasks() if t["category"] == "Management"}
    records = [_management_record(t, "duckdb") for t in tasks.values()]
    setup = Setup("duckdb", tmp_path / "alien", records, None, alien_script())
    before = setup.snapshot()
    verifier = setup.verifier(timeout_s=10.0)
    try:
        got = {}
        for name in tasks:
            record = setup.records[name]
            got[name] = (
                verifier.verify(record, record.verification.reference_sql),
                verifier.verify(record, WRONG[name]),
            )
    finally:
        verifier.close()
    # Plain UPDATE and CREATE VIEW run on DuckDB; PL/pgSQL functions and triggers do not, and
    # the verdict says so (for the solution and any submission alike).
    for name in ("alien_M_1", "alien_M_3"):
        assert (got[name][0].reason, got[name][1].reason) == ("match", "mismatch"), got[name]
    for name in ("alien_M_2", "alien_M_4"):
        for verdict in got[name]:
            assert verdict.reason == "unsupported", verdict
            assert "PostgreSQL" in verdict.detail and "PL/pgSQL" in verdict.detail
    assert setup.snapshot() == before


# -- query tasks with upstream conditions --------------------------------------------------------

PRICES_SQL = """
CREATE TABLE item (id INTEGER, cat TEXT, price REAL, sold TEXT);
INSERT INTO item VALUES (1, 'a', 1.004, '2024-01-05'), (2, 'a', 2.5, '2024-01-06'),
  (3, 'b', 3.333, '2024-02-01'), (4, 'b', 3.333, '2024-02-02');
"""


def _query_record(rid: str, reference: str, conditions: dict, decimals: int = 2) -> dict:
    return {
        "id": rid,
        "avt_id": rid,
        "corpus": "cond",
        "split": "all",
        "spec": {"request": rid, "database": "hr"},
        "ambiguities": [],
        "verification": {
            "engine": "sqlite",
            "database": "hr",
            "reference_sql": reference,
            "compare": {
                "order": "ordered" if conditions.get("order") else "set",
                "float_decimals": decimals,
            },
        },
        "source": {"kind": "bird_interact", "category": "Query", "conditions": conditions},
    }


CONDITION_CASES = [
    # (reference, conditions, decimals, submission, expected): worked out by hand on PRICES_SQL
    # ROUND() is removed from both queries, then values are rounded to 2 places: 1.004 -> 1.0
    (
        "SELECT ROUND(price, 1) FROM item WHERE id = 1",
        {"decimal": -1, "distinct": False},
        2,
        "SELECT price FROM item WHERE id = 1",
        "match",
    ),
    # 3.333 and 3.33 agree at 2 places, not at 3
    (
        "SELECT price FROM item WHERE id = 3",
        {"decimal": 2, "distinct": False},
        2,
        "SELECT 3.33",
        "match",
    ),
    (
        "SELECT price FROM item WHERE id = 3",
        {"decimal": 3, "distinct": False},
        3,
        "SELECT 3.33",
        "mismatch",
    ),
    # DISTINCT is removed and rows compare as a set: duplicates never count
    (
        "SELECT DISTINCT price FROM item WHERE cat = 'b'",
        {"decimal": -1, "distinct": True},
        2,
        "SELECT price FROM item WHERE cat = 'b'",
        "match",
    ),
    (
        "SELECT price FROM item WHERE cat = 'b'",
        {"decimal": -1, "distinct": False},
        2,
        "SELECT 3.333",
        "match",
    ),
    # order: without it a reversed result matches, with it it does not
    (
        "SELECT id FROM item ORDER BY id",
        {"decimal": -1, "distinct": False},
        2,
        "SELECT id FROM item ORDER BY id DESC",
        "match",
    ),
    (
        "SELECT id FROM item ORDER BY id",
        {"decimal": -1, "distinct": False, "order": True},
        2,
        "SELECT id FROM item ORDER BY id DESC",
        "mismatch",
    ),
    (
        "SELECT id FROM item ORDER BY id",
        {"decimal": -1, "distinct": False, "order": True},
        2,
        "SELECT id FROM item ORDER BY id",
        "match",
    ),
    # an empty result never matches (upstream's ex_base)
    (
        "SELECT id FROM item WHERE id > 10",
        {"decimal": -1, "distinct": False},
        2,
        "SELECT id FROM item WHERE id > 10",
        "mismatch",
    ),
    # comments are removed before running
    (
        "SELECT cat FROM item -- the categories\n",
        {"decimal": -1, "distinct": False},
        2,
        "/* categories */ SELECT DISTINCT cat FROM item",
        "match",
    ),
]


def test_query_tasks_compare_by_upstream_conditions(tmp_path):
    records = [
        _query_record(f"c{i}", reference, conditions, decimals)
        for i, (reference, conditions, decimals, _, _) in enumerate(CONDITION_CASES)
    ]
    write_corpus(tmp_path / "cond", "sqlite", records, PRICES_SQL)
    corpus = load_corpus(tmp_path / "cond")
    verifier = Verifier(corpus.open_engine, limits=Limits(timeout_s=3.0))
    by_id = {r.id: r for r in corpus.records}
    try:
        got = [
            verifier.verify(by_id[f"c{i}"], case[3]).reason
            for i, case in enumerate(CONDITION_CASES)
        ]
    finally:
        verifier.close()
    assert got == [case[4] for case in CONDITION_CASES]


def test_a_transient_reference_failure_reports_engine_and_is_retried(tmp_path):
    record = parse_record(_query_record("t", "SELECT 1", {}) | {"source": {}})
    engine = PostgresEngine("host=127.0.0.1 port=1 user=nobody", dbname="demo")
    verifier = Verifier(lambda kind, database: engine, limits=Limits(timeout_s=1.0))
    try:
        first = verifier.verify(record, "SELECT 1")
        second = verifier.verify(record, "SELECT 1")
    finally:
        verifier.close()
    assert first.reason == second.reason == "engine"  # not cached as a broken corpus
    assert "retried" in first.detail and "SELECT" not in first.detail


def test_one_huge_row_is_refused_by_the_server_with_bounded_memory(postgres_cluster, tmp_path):  # noqa: F811
    setup = Setup("postgres", tmp_path / "corpus", _records("postgres"), postgres_cluster)
    probe = r"""
import json, sys
from ambitab_gym.verify.base import Limits, QueryError
from ambitab_gym.verify.postgres import PostgresEngine

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

engine = PostgresEngine(sys.argv[1], dbname=sys.argv[2], limits=Limits(timeout_s=120.0))
engine.execute("SELECT 1")
before = hwm()
try:
    engine.execute("SELECT repeat('x', 200000000) AS big")
    out = ["ok"]
except QueryError as error:
    out = [error.category, error.message]
print(json.dumps(out + [hwm() - before, engine.execute("SELECT 42").rows[0][0]]))
"""
    if not Path("/proc/self/status").exists():
        pytest.skip("peak RSS is read from /proc")
    run = subprocess.run(
        [sys.executable, "-c", probe, setup.options["dsn"], setup.dbname],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    category, message, grown, after = json.loads(run.stdout.splitlines()[-1])
    assert category == "too_large" and "64 MiB" in message, message
    assert grown < 64 * 2**20, grown  # the 200 MB row never reached this process
    assert after == 42


# -- SQLite write tasks: the read path's statement limit and result cap ---------------------------


def _sqlite_task_engine(tmp_path: Path, limits: Limits):
    from ambitab_gym.verify.sqlite import SQLiteEngine

    path = tmp_path / "t.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
    connection.commit()
    connection.close()
    return SQLiteEngine(path, limits=limits)


def _sqlite_task(submission: str) -> dict:
    return {"submission": submission, "reference": "SELECT 1", "tests": [], "db_name": "t"}


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize(
    "bomb",
    [
        "SELECT printf('%.*c', 2147483647, 'x')",  # one call that no progress handler reaches
        # quadratic: a 500,000-character needle that almost matches everywhere
        "SELECT instr(printf('%.*c', 999990, 'a'), printf('%.*c', 499995, 'a') || 'b')",
    ],
)
def test_sqlite_write_task_stops_a_long_builtin_call_at_the_statement_limit(tmp_path, bomb):
    # The task budget is 30 s; the statement limit (1 s) holds: the worker answers ``timeout``
    # at the hard stop (1.75 s) and ends; the next task gets a fresh worker.
    engine = _sqlite_task_engine(tmp_path, Limits(timeout_s=1.0))
    try:
        start = time.monotonic()
        reply = engine.run_task(_sqlite_task(bomb), total_s=30)
        took = time.monotonic() - start
        assert reply[:3] == ("task", False, "timeout"), reply
        assert took < 1.75 + 5, took
        assert engine.run_task(_sqlite_task("SELECT 1"), total_s=30)[:3] == ("task", True, "match")
    finally:
        engine.close()


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads VmHWM from /proc")
def test_sqlite_write_task_result_and_error_bombs_stay_under_the_cap(tmp_path):
    cap = 16 * 2**20
    engine = _sqlite_task_engine(tmp_path, Limits(timeout_s=5.0, max_result_bytes=cap))
    try:
        assert engine.run_task(_sqlite_task("SELECT 1"), total_s=30)[1] is True
        pid = engine.task_worker_pid
        before = _peak_rss(pid)
        # 300 rows of a 999,000-byte blob: 300 MB, fetched in chunks that fit the cap.
        reply = engine.run_task(
            _sqlite_task(
                "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 300) "
                "SELECT zeroblob(999000) FROM r"
            ),
            total_s=30,
        )
        assert reply[:3] == ("task", False, "too_large"), reply
        # An error message as long as the SQL text allows.
        message = "m" * 90_000
        reply = engine.run_task(
            _sqlite_task(
                "CREATE TABLE e(x); CREATE TRIGGER g BEFORE INSERT ON e BEGIN "
                f"SELECT RAISE(ABORT, '{message}'); END; INSERT INTO e VALUES (1)"
            ),
            total_s=30,
        )
        assert reply[:3] == ("task", False, "runtime") and len(reply[3]) <= 1_000, reply[:3]
        assert engine.task_worker_pid == pid
        assert _peak_rss(pid) - before < 3 * cap + 16 * 2**20, (before, _peak_rss(pid))
    finally:
        engine.close()
