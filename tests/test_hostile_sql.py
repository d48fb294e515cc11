"""Hostile SQL as the submission, on SQLite, DuckDB and PostgreSQL, through ``Verifier.verify``.

Every attack must give a failed verdict with the expected reason, end within the time limit
(checked with a loose bound: the point is that it ends, not how fast), leave the engine working
(the record's own reference query still verifies), and leave the data intact: database files
byte-identical (SQLite, DuckDB), or the same tables with the same contents (PostgreSQL), and no
file written outside.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)

from ambitab_gym.corpora import load_corpus
from ambitab_gym.records import TaskRecord
from ambitab_gym.verify import Limits, Verifier
from ambitab_gym.verify.postgres import database_name, load_corpus_databases

TIMEOUT_S = 1.5
LIMITS = Limits(timeout_s=TIMEOUT_S, memory_limit_mb=256)
WRITES = {"rejected"}
ENDLESS = {"timeout"}

# (case id, SQL template, reasons it may fail with). Templates see {t} (the record's largest
# table), {join} (a cross join of it with itself, at least 10^12 rows), {col} (its first column)
# and {tmp} (a scratch folder that must stay empty).
COMMON = [
    ("insert", "INSERT INTO {t} SELECT * FROM {t}", WRITES),
    ("update", "UPDATE {t} SET {col} = NULL", WRITES),
    ("delete", "DELETE FROM {t}", WRITES),
    ("drop", "DROP TABLE {t}", WRITES),
    ("two-statements-write", "SELECT 1; DROP TABLE {t}", WRITES),
    ("two-statements-read", "SELECT * FROM {t}; SELECT 1", WRITES),
    ("load-extension", "SELECT load_extension('{tmp}/evil')", {"rejected", "runtime"}),
    ("pragma-journal", "PRAGMA journal_mode = DELETE", WRITES),
    ("pragma-user-version", "PRAGMA user_version = 7", WRITES),
    ("pragma-writable-schema", "PRAGMA writable_schema = 1", WRITES),
    (
        "recursive-cte",
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
        ENDLESS,
    ),
    ("cross-join", "SELECT count(*) FROM {join}", ENDLESS),
]
ATTACH = {
    "sqlite": "ATTACH DATABASE '{tmp}/evil.db' AS evil",
    "duckdb": "ATTACH '{tmp}/evil.duckdb' AS evil",
    "postgres": "ATTACH DATABASE '{tmp}/evil.db' AS evil",
}
SPECIFIC = {
    "sqlite": [
        ("readfile", "SELECT readfile('/etc/passwd')", {"rejected", "runtime"}),
        ("vacuum-into", "VACUUM INTO '{tmp}/copy.db'", {"rejected", "runtime"}),
        ("create-table", "CREATE TABLE evil (a INTEGER)", WRITES),
    ],
    "duckdb": [
        ("read-csv", "SELECT * FROM read_csv('/etc/passwd', sep = ':')", WRITES),
        ("read-text", "SELECT * FROM read_text('/etc/passwd')", WRITES),
        ("copy-to", "COPY {t} TO '{tmp}/leak.csv'", WRITES),
        ("copy-query-to", "COPY (SELECT * FROM {t}) TO '{tmp}/leak.parquet'", WRITES),
        ("install", "INSTALL httpfs", WRITES),
        ("load", "LOAD httpfs", WRITES),
        ("load-file", "LOAD '{tmp}/evil.duckdb_extension'", WRITES),
        ("set-external-access", "SET enable_external_access = true", WRITES),
        ("export-database", "EXPORT DATABASE '{tmp}/dump'", WRITES),
        (
            "memory-bomb-string",
            "SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(5000)",
            {"too_large", "runtime", "timeout"},
        ),
        (
            "memory-bomb-list",
            "SELECT length(list(range)) FROM range(2000000000)",
            {"too_large", "runtime", "timeout"},
        ),
    ],
    "postgres": [
        ("pg-sleep", "SELECT pg_sleep(30)", ENDLESS),
        ("pg-read-file", "SELECT pg_read_file('/etc/passwd')", WRITES),
        ("copy-to-program", "COPY (SELECT 1) TO PROGRAM 'touch {tmp}/pwned'", WRITES),
        (
            "query-to-xml-copy",
            "SELECT query_to_xml('COPY (SELECT 1) TO PROGRAM ''touch {tmp}/pwned2''', true, false, '')",
            {"rejected", "runtime"},
        ),
        ("set-role", "SET ROLE postgres", WRITES),
        ("set-config-role", "SELECT set_config('role', 'postgres', false)", WRITES),
        ("create-table", "CREATE TABLE evil (a integer)", WRITES),
        ("create-temp-table", "CREATE TEMP TABLE evil (a integer)", WRITES),
        ("lo-import", "SELECT lo_import('/etc/passwd')", WRITES),
        ("drop-database", "DROP DATABASE postgres", WRITES),
        ("commit", "COMMIT", WRITES),
        # (the loader revokes the signal functions from agents: docs/security.md)
        ("terminate-self", "SELECT pg_terminate_backend(pg_backend_pid())", {"rejected"}),
        ("cancel-self", "SELECT pg_cancel_backend(pg_backend_pid())", {"rejected"}),
        ("reload-conf", "SELECT pg_reload_conf()", WRITES),
    ],
}


def _cases():
    params = []
    for engine in ("sqlite", "duckdb", "postgres"):
        cases = [*COMMON, ("attach", ATTACH[engine], WRITES), *SPECIFIC[engine]]
        for case_id, template, reasons in cases:
            params.append(pytest.param(engine, template, reasons, id=f"{engine}-{case_id}"))
    return params


@dataclass
class Target:
    """One engine under attack: a verifier, a record, and a fingerprint of its data."""

    verifier: Verifier
    record: TaskRecord
    fingerprint: Callable[[], object]
    names: dict = field(default_factory=dict)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _describe(verifier: Verifier, record: TaskRecord) -> dict:
    """The record's largest table, its first column, and a cross join of >= 10^12 rows."""
    tables = _table_names(verifier, record)
    sizes = {t: verifier.execute(record, f"SELECT count(*) FROM {t}").rows[0][0] for t in tables}
    table = max(sizes, key=lambda t: (sizes[t], t))
    column = verifier.execute(record, f"SELECT * FROM {table} LIMIT 1").columns[0]
    ways = 2
    while max(sizes[table], 2) ** ways < 10**12:
        ways += 1
    join = ", ".join(f"{table} j{i}" for i in range(ways))
    return {"t": table, "col": column, "join": join}


def _table_names(verifier: Verifier, record: TaskRecord) -> list[str]:
    engine = record.verification.engine
    kind = verifier.engine(engine, record.verification.database).name
    if kind == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    elif kind == "duckdb":
        query = "SELECT table_name FROM duckdb_tables() WHERE NOT internal"
    else:
        query = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    return sorted(row[0] for row in verifier.execute(record, query).rows)


def _file_target(corpus_name: str, kind: str) -> Target:
    corpus = load_corpus(corpus_name, limits=LIMITS)
    record = corpus.records[0]
    verifier = Verifier(corpus.open_engine, limits=LIMITS)
    path = corpus.database_file(record.verification.database, kind)

    def fingerprint() -> object:
        siblings = sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.stem))
        return _sha256(path), siblings

    target = Target(verifier, record, fingerprint)
    target.names = _describe(verifier, record)
    return target


def _postgres_target(cluster) -> Target:
    corpus = load_corpus("bird_interact", limits=LIMITS)
    reader = load_corpus_databases(corpus, cluster.dsn())
    corpus = load_corpus(
        "bird_interact", limits=LIMITS, engine_override="postgres", options={"dsn": reader}
    )
    record = corpus.records[0]
    verifier = Verifier(corpus.open_engine, limits=LIMITS)
    admin_dsn = cluster.dsn(database_name(corpus.name, record.verification.database))

    def fingerprint() -> object:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            relations = admin.execute(
                "SELECT n.nspname || '.' || c.relname, c.relkind FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
                "AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 1"
            ).fetchall()
            contents = {}
            for name, kind in relations:
                if kind == "r":
                    contents[name] = admin.execute(
                        f"SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) "
                        f"FROM {name} x"
                    ).fetchone()[0]
            roles = admin.execute("SELECT rolname, rolsuper FROM pg_roles ORDER BY 1").fetchall()
        return relations, contents, roles

    target = Target(verifier, record, fingerprint)
    target.names = _describe(verifier, record)
    return target


@pytest.fixture(scope="module")
def targets(request):
    built: dict[str, Target] = {}

    def get(engine: str) -> Target:
        if engine not in built:
            if engine == "sqlite":
                built[engine] = _file_target("bird", "sqlite")
            elif engine == "duckdb":
                built[engine] = _file_target("bird_interact", "duckdb")
            else:
                built[engine] = _postgres_target(request.getfixturevalue("postgres_cluster"))
        return built[engine]

    yield get
    for target in built.values():
        target.verifier.close()


@pytest.mark.parametrize(("engine", "template", "reasons"), _cases())
def test_hostile_sql_fails_cleanly(targets, tmp_path, engine, template, reasons):
    target = targets(engine)
    record = target.record
    assert target.verifier.verify(record, record.verification.reference_sql).success
    before = target.fingerprint()
    attack = template.format(tmp=tmp_path, **target.names)

    start = time.monotonic()
    verdict = target.verifier.verify(record, attack)
    elapsed = time.monotonic() - start

    assert not verdict.success
    assert verdict.reason in reasons, (verdict.reason, verdict.detail)
    assert elapsed < 3 * TIMEOUT_S + 5  # it ends: the timeout, with room for a loaded machine
    assert record.verification.reference_sql not in verdict.detail
    # The engine keeps working and nothing changed, inside or outside the database.
    assert target.verifier.verify(record, record.verification.reference_sql).success
    assert target.fingerprint() == before
    assert os.listdir(tmp_path) == []


# Every way found to read the cached DuckDB file's absolute path (issue 30): the catalog
# function, the views over it, the settings (allowed_paths lists the file), and the calls that
# run a name or SQL built at run time; error() puts any value into the verdict's detail.
LOCATION_PROBES = [
    "SELECT * FROM duckdb_databases()",
    "SELECT path FROM duckdb_databases()",
    "SELECT error(path) FROM duckdb_databases()",
    'SELECT CAST(path AS INTEGER) FROM system.main."DuckDB_Databases"()',
    "SELECT error(path) FROM duckdb_databases",
    "SELECT error(file) FROM pragma_database_list",
    "PRAGMA database_list",
    "SELECT error(value) FROM duckdb_settings() WHERE name = 'allowed_paths'",
    "SELECT error(setting) FROM pg_settings WHERE name = 'allowed_paths'",
    "SELECT error(current_setting('allowed_paths')::VARCHAR)",
    "SELECT error(current_setting('allowed_' || 'paths')::VARCHAR)",
    "SELECT error(path) FROM query('SELECT path FROM duck' || 'db_databases()')",
    "SELECT error(path) FROM query(E'SELECT path FROM \\x64uckdb_databases()')",
    "SELECT error(path) FROM query /* a /* nested */ comment */ ('SELECT 1 AS path')",
    "SELECT error(path) FROM query_table(['duckdb_' || 'databases'])",
    "SELECT error(path) FROM json_execute_serialized_sql("
    "json_serialize_sql('SELECT path FROM duck' || 'db_databases()'))",
]


@pytest.mark.parametrize("sql", LOCATION_PROBES)
def test_the_duckdb_file_location_never_reaches_the_agent(targets, sql):
    target = targets("duckdb")
    record = target.record
    path = target.verifier.engine("duckdb", record.verification.database).path
    verdict = target.verifier.verify(record, sql)
    assert (verdict.success, verdict.reason) == (False, "rejected"), verdict
    shown = repr(verdict)
    for secret in (str(path), str(Path(path).resolve()), str(Path(path).resolve().parent)):
        assert secret not in shown, verdict


def test_duckdb_literal_calls_stay_admitted_and_refusals_name_the_statement(targets):
    target = targets("duckdb")
    record = target.record
    admitted = "SELECT * FROM query('SELECT 1 AS x'), (SELECT current_setting('TimeZone')) z"
    assert target.verifier.verify(record, admitted).reason == "mismatch"
    # DuckDB parses these as PRAGMA, CALL and LOAD statements: the message names them as written
    for sql, name in [
        ("COPY FROM DATABASE a TO b", "COPY FROM DATABASE"),
        ("CHECKPOINT", "CHECKPOINT"),
        ("INSTALL httpfs", "INSTALL"),
    ]:
        verdict = target.verifier.verify(record, sql)
        assert verdict.reason == "rejected" and f"(got {name})" in verdict.detail, verdict
