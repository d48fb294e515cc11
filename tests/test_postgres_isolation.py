"""Isolation between episodes, verifiers and campaigns on one real PostgreSQL server.

Two campaigns load the same corpus into one throwaway PostgreSQL 15 cluster, each with an agent
role of its own (``camp_a``, ``camp_b``) and a reference role next to it. Agent SQL of one must
not cancel, terminate or observe the other's sessions (query text, locks, table statistics); a
reference query that is cancelled or terminated is retried; results over the byte cap fail while
fetching with bounded memory; agent-sized error messages stay out of the verdict and the server
log; no session state (random seed, settings) reaches the next query; a single long built-in
call stops within the time limit plus a small margin; and the setup check refuses a role or
database that would allow any of this.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
import psycopg
import pytest
from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)

import ambitab_gym
from ambitab_gym.corpora import load_corpus
from ambitab_gym.verify import Limits, Verifier
from ambitab_gym.verify.base import MAX_MESSAGE_CHARS, QueryError
from ambitab_gym.verify.postgres import (
    PostgresEngine,
    check_server_setup,
    database_name,
    load_corpus_databases,
    reference_role,
)
from ambitab_gym.verify.postgres_loader import UnsafeServerSetup

CORPUS = "bird_interact"
SECRET = "victim-secret-3f9c"
# A reference query that runs for a while (so that an attacker can try to reach it) and whose
# text carries a marker that must never show up on the attacker's side.
SLOW_REFERENCE = (
    f"SELECT g, g * g AS sq FROM generate_series(1, 5) g CROSS JOIN pg_sleep(1.2) /* {SECRET} */"
)
FAST_ANSWER = "SELECT g, g * g AS sq FROM generate_series(1, 5) g"


@pytest.fixture(scope="module")
def campaigns(postgres_cluster):  # noqa: F811
    """Agent DSNs of two campaigns sharing the server (and the corpus databases)."""
    corpus = load_corpus(CORPUS)
    return {
        name: load_corpus_databases(corpus, postgres_cluster.dsn(), reader=name)
        for name in ("camp_a", "camp_b")
    }


@pytest.fixture(scope="module")
def database():
    return sorted(load_corpus(CORPUS).manifest.databases)[0]


def _admin(cluster, dbname: str = "postgres") -> psycopg.Connection:
    return psycopg.connect(cluster.dsn(dbname), autocommit=True)


def _verifier(dsn: str, timeout_s: float = 3.0) -> tuple:
    corpus = load_corpus(CORPUS, engine_override="postgres", options={"dsn": dsn})
    return corpus, Verifier(corpus.open_engine, limits=Limits(timeout_s=timeout_s))


def _record(corpus, database: str, record_id: str, reference_sql: str):
    base = next(r for r in corpus.records if r.verification.database == database)
    verification = base.verification.model_copy(update={"reference_sql": reference_sql})
    return base.model_copy(update={"id": record_id, "verification": verification})


def _wait_for_backend(cluster, user: str, *, sleeping: bool, timeout_s: float = 10.0) -> int:
    """The pid of a backend of ``user`` (waiting in pg_sleep when ``sleeping``)."""
    deadline = time.monotonic() + timeout_s
    with _admin(cluster) as admin:
        while time.monotonic() < deadline:
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE usename = %s"
                + (" AND wait_event = 'PgSleep'" if sleeping else ""),
                [user],
            ).fetchone()
            if row:
                return row[0]
            time.sleep(0.01)
    raise AssertionError(f"no backend of {user} appeared")


def _attempt(engine: PostgresEngine, sql: str) -> tuple[str, list]:
    """(category or 'ok', rows) of an attack statement."""
    try:
        return "ok", engine.execute(sql).rows
    except QueryError as error:
        return error.category, [error.message]


def test_agents_cannot_signal_or_observe_another_campaign(
    postgres_cluster,  # noqa: F811
    campaigns,
    database,
):
    corpus_b, victim = _verifier(campaigns["camp_b"])
    record = _record(corpus_b, database, "isolation-victim", SLOW_REFERENCE)
    attacker = PostgresEngine(campaigns["camp_a"], dbname=database_name(CORPUS, database))
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.update(v=victim.verify(record, FAST_ANSWER)))
    try:
        thread.start()
        pid = _wait_for_backend(postgres_cluster, reference_role("camp_b"), sleeping=True)
        attacks = {
            "activity": "SELECT pid, usename, query FROM pg_stat_activity",
            "backend-text": "SELECT pg_stat_get_backend_activity(b) "
            "FROM pg_stat_get_backend_idset() b",
            "activity-function": "SELECT * FROM pg_stat_get_activity(NULL)",
            "locks": "SELECT * FROM pg_locks",
            "lock-function": "SELECT * FROM pg_lock_status()",
            "blocking": f"SELECT pg_blocking_pids({pid})",
            "table-stats": "SELECT relname, seq_scan, idx_scan FROM pg_stat_user_tables",
            "table-io": "SELECT * FROM pg_statio_user_tables",
            "scan-counter": "SELECT pg_stat_get_numscans(c.oid) FROM pg_class c "
            "WHERE c.relkind = 'r' LIMIT 1",
            "cancel": f"SELECT pg_cancel_backend({pid})",
            "terminate": f"SELECT pg_terminate_backend({pid})",
        }
        results = {name: _attempt(attacker, sql) for name, sql in attacks.items()}
        thread.join(30)
    finally:
        attacker.close()
        victim.close()
    assert {name: category for name, (category, _) in results.items()} == dict.fromkeys(
        attacks, "rejected"
    ), results
    assert all("permission denied" in rows[0] for _, rows in results.values()), results
    assert SECRET not in repr(results)
    # The victim's verdict is what it is without an attacker: its reference ran to the end.
    assert outcome["v"].reason == "match", outcome
    assert outcome["v"].elapsed_s >= 1.0


def test_two_envs_of_one_campaign_cannot_cancel_each_other(postgres_cluster, campaigns, database):  # noqa: F811
    dbname = database_name(CORPUS, database)
    first = PostgresEngine(campaigns["camp_a"], dbname=dbname)
    second = PostgresEngine(campaigns["camp_a"], dbname=dbname)
    result: dict = {}

    def victim() -> None:
        try:
            result["rows"] = first.execute(
                "SELECT g FROM generate_series(1, 3) g CROSS JOIN pg_sleep(1.0)",
                limits=Limits(timeout_s=5.0),
            ).rows
        except QueryError as error:
            result["error"] = error

    thread = threading.Thread(target=victim)
    try:
        thread.start()
        pid = _wait_for_backend(postgres_cluster, "camp_a", sleeping=True)
        # Same role: PostgreSQL would let it signal the other backend unless the function is
        # revoked, and show its query text unless the view is.
        cancel = _attempt(second, f"SELECT pg_cancel_backend({pid})")
        terminate = _attempt(second, f"SELECT pg_terminate_backend({pid})")
        activity = _attempt(second, f"SELECT query FROM pg_stat_activity WHERE pid = {pid}")
        thread.join(30)
    finally:
        first.close()
        second.close()
    assert (cancel[0], terminate[0], activity[0]) == ("rejected", "rejected", "rejected")
    assert result == {"rows": [(1,), (2,), (3,)]}


def test_references_run_as_their_own_role_and_leave_no_table_statistics(
    postgres_cluster,  # noqa: F811
    campaigns,
    database,
):
    dbname = database_name(CORPUS, database)
    table = "isolation_probe_counts"
    with _admin(postgres_cluster, dbname) as admin:
        admin.execute(f"DROP TABLE IF EXISTS {table}")
        admin.execute(f"CREATE TABLE {table} AS SELECT g FROM generate_series(1, 10) g")
        admin.execute(f"GRANT SELECT ON {table} TO camp_a, {reference_role('camp_a')}")

    def scans() -> int:
        with _admin(postgres_cluster, dbname) as admin:
            return admin.execute(
                "SELECT coalesce(seq_scan, 0) FROM pg_stat_user_tables WHERE relname = %s",
                [table],
            ).fetchone()[0]

    sql = f"SELECT count(*) FROM {table}"
    engine = PostgresEngine(campaigns["camp_a"], dbname=dbname)
    try:
        before = scans()
        assert engine.execute_reference(sql).rows == [(10,)]
        roles = engine.execute_reference("SELECT session_user::text").rows
        engine.close()  # a backend reports its counters when it ends
        time.sleep(1.0)
        after_reference = scans()
        engine = PostgresEngine(campaigns["camp_a"], dbname=dbname)
        assert engine.execute(sql).rows == [(10,)]
        agent_role = engine.execute("SELECT session_user::text").rows
        engine.close()
        deadline = time.monotonic() + 10
        while (after_agent := scans()) == after_reference and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        engine.close()
        with _admin(postgres_cluster, dbname) as admin:
            admin.execute(f"DROP TABLE IF EXISTS {table}")
    assert roles == [(reference_role("camp_a"),)] and agent_role == [("camp_a",)]
    assert after_reference == before  # the reference role does not count its scans
    assert after_agent > after_reference  # (the agent role does: the probe can see scans)


@pytest.mark.parametrize("how", ["cancel", "terminate"])
def test_a_reference_interrupted_once_is_retried_and_matches(
    postgres_cluster,  # noqa: F811
    campaigns,
    database,
    how,
):
    corpus, verifier = _verifier(campaigns["camp_b"])
    record = _record(corpus, database, f"isolation-retry-{how}", SLOW_REFERENCE)
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.update(v=verifier.verify(record, FAST_ANSWER)))
    try:
        start = time.monotonic()
        thread.start()
        pid = _wait_for_backend(postgres_cluster, reference_role("camp_b"), sleeping=True)
        with _admin(postgres_cluster) as admin:
            signalled = admin.execute(f"SELECT pg_{how}_backend(%s)", [pid]).fetchone()[0]
        interrupted_at = time.monotonic() - start
        thread.join(30)
        elapsed = time.monotonic() - start
        # Cached after the retry: a second verification is quick and still matches.
        again = verifier.verify(record, FAST_ANSWER)
    finally:
        verifier.close()
    assert signalled is True
    assert outcome["v"].reason == "match", outcome
    assert elapsed >= interrupted_at + 1.15  # the 1.2 s reference ran again after that
    assert again.reason == "match" and again.elapsed_s < 1.0


def test_results_over_the_byte_cap_fail_while_fetching_with_bounded_memory(campaigns, database):
    # 1,000 rows of 1 MB (1 GB in all) against a 64 MiB cap; and a result of 99 MB whose rows at
    # the positions a sampling estimate would look at (0, every 125th, the last) are tiny.
    probe = r"""
import json, sys
from ambitab_gym.verify.base import Limits, QueryError
from ambitab_gym.verify.postgres import PostgresEngine

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

engine = PostgresEngine(sys.argv[1], dbname=sys.argv[2], limits=Limits(timeout_s=60.0))
engine.execute("SELECT 1")
out = {"before": hwm()}
for name, sql in json.loads(sys.argv[3]).items():
    try:
        rows = engine.execute(sql).rows
        out[name] = ("ok", len(rows))
    except QueryError as error:
        out[name] = (error.category, error.message)
    out[name + "_hwm"] = hwm()
out["after"] = engine.execute("SELECT 42").rows[0][0]
print(json.dumps(out))
"""
    queries = {
        "huge": "SELECT repeat('x', 1000000) FROM generate_series(1, 1000)",
        "sampled_small": "SELECT CASE WHEN g % 125 = 0 OR g = 999 THEN 'x' "
        "ELSE repeat('x', 100000) END FROM generate_series(0, 999) g ORDER BY g",
    }
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            probe,
            campaigns["camp_a"],
            database_name(CORPUS, database),
            json.dumps(queries),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.splitlines()[-1])
    cap = 64 * 2**20
    assert out["huge"][0] == "too_large" and "64 MiB" in out["huge"][1]
    assert out["sampled_small"][0] == "too_large"
    # Peak memory grew by about the cap (values held plus one row), far below the 1 GB result.
    assert out["huge_hwm"] - out["before"] < 2.5 * cap, out
    assert out["sampled_small_hwm"] - out["before"] < 2.5 * cap, out
    assert out["after"] == 42


def test_a_huge_error_message_is_cut_and_kept_out_of_the_server_log(
    postgres_cluster,  # noqa: F811
    campaigns,
    database,
):
    log = Path(postgres_cluster.base) / "server.log"
    corpus, verifier = _verifier(campaigns["camp_a"], timeout_s=20.0)
    record = next(r for r in corpus.records if r.verification.database == database)
    try:
        size = log.stat().st_size
        verdict = verifier.verify(record, "SELECT repeat('x', 50000000)::int")
        time.sleep(0.3)
        agent_growth = log.stat().st_size - size
    finally:
        verifier.close()
    assert verdict.reason == "runtime"
    assert "invalid input syntax" in verdict.detail
    assert len(verdict.detail) <= MAX_MESSAGE_CHARS
    assert agent_growth < 10_000
    # The same statement from a role with the server's default log settings does reach the log
    # (so the measurement above can see a logged message).
    with _admin(postgres_cluster, database_name(CORPUS, database)) as admin:
        size = log.stat().st_size
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            admin.execute("SELECT repeat('x', 1000000)::int")
    time.sleep(0.3)
    assert log.stat().st_size - size > 1_000_000


def test_setseed_and_settings_do_not_carry_to_the_next_query(
    postgres_cluster,  # noqa: F811
    campaigns,
    database,
):
    dbname = database_name(CORPUS, database)
    with _admin(postgres_cluster, dbname) as admin:
        admin.execute("SELECT setseed(0.5)")
        seeded = admin.execute("SELECT random()").fetchone()[0]
        default_work_mem = admin.execute("SHOW work_mem").fetchone()[0]
    engine = PostgresEngine(campaigns["camp_a"], dbname=dbname, pool_size=1)
    try:
        pid = engine.execute("SELECT pg_backend_pid()").rows
        engine.execute("SELECT setseed(0.5)")
        engine.execute("SELECT set_config('work_mem', '1234kB', false)")
        after = engine.execute("SELECT random(), current_setting('work_mem')").rows
        same_session = engine.execute("SELECT pg_backend_pid()").rows
        # Within one query the seed does apply (the probe can tell a seeded sequence).
        within = engine.execute("SELECT r FROM (SELECT setseed(0.5)) s, LATERAL random() r").rows
    finally:
        engine.close()
    assert same_session == pid  # one pooled session: the state would have carried over
    assert within == [(seeded,)]
    assert after[0][0] != seeded
    assert after[0][1] == default_work_mem


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT pg_sleep(100)",
        "SELECT length(repeat('x', 500000000))",
        # array_fill does not check for interrupts: statement_timeout alone waits for it
        "SELECT length(array_to_string(array_fill('xxxxxxxxxx'::text, ARRAY[40000000]), ','))",
    ],
)
def test_one_long_builtin_call_stops_within_the_time_limit(campaigns, database, sql):
    limit = 1.0
    engine = PostgresEngine(campaigns["camp_a"], dbname=database_name(CORPUS, database))
    try:
        start = time.monotonic()
        with pytest.raises(QueryError) as caught:
            engine.execute(sql, limits=Limits(timeout_s=limit))
        elapsed = time.monotonic() - start
        assert engine.execute("SELECT 5").rows == [(5,)]
    finally:
        engine.close()
    assert caught.value.category == "timeout"
    assert elapsed < limit + 0.6 + 0.9  # limit + the watchdog's grace + scheduling slack


def test_unsafe_setups_are_refused(postgres_cluster, campaigns, database):  # noqa: F811
    dbname = database_name(CORPUS, database)
    # The setup the loader made passes, from the agent's side and from an admin's.
    check_server_setup(f"{campaigns['camp_a']} dbname={dbname}")
    check_server_setup(postgres_cluster.dsn(dbname), role="camp_b")
    with _admin(postgres_cluster) as admin:
        for role in ("can_signal", "reads_stats", "inside_reference"):
            admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.execute("CREATE ROLE can_signal LOGIN IN ROLE pg_signal_backend")
        admin.execute("CREATE ROLE reads_stats LOGIN IN ROLE pg_read_all_stats")
        admin.execute(f"CREATE ROLE inside_reference LOGIN IN ROLE {reference_role('camp_a')}")
        for role in ("can_signal", "reads_stats", "inside_reference"):
            admin.execute(f"GRANT CONNECT ON DATABASE {dbname} TO {role}")
            admin.execute(f"ALTER ROLE {role} SET log_min_messages = 'fatal'")
            admin.execute(f"ALTER ROLE {role} SET log_min_error_statement = 'panic'")
        admin.execute("DROP DATABASE IF EXISTS isolation_unhardened")
        admin.execute("CREATE DATABASE isolation_unhardened")
        admin.execute("GRANT CONNECT ON DATABASE isolation_unhardened TO camp_a")
    expected = {
        "can_signal": "pg_signal_backend",
        "reads_stats": "pg_read_all_stats",
        "inside_reference": reference_role("camp_a"),
    }
    for role, named in expected.items():
        with pytest.raises(UnsafeServerSetup, match=named):
            check_server_setup(
                postgres_cluster.dsn(dbname), role=role, reference=reference_role("camp_a")
            )
        engine = PostgresEngine(
            postgres_cluster.dsn(dbname, user=role),
            dbname=dbname,
            reference_dsn=postgres_cluster.dsn(dbname, user=reference_role("camp_a")),
        )
        with pytest.raises(QueryError) as caught:
            engine.execute("SELECT 1")
        engine.close()
        assert caught.value.category == "engine" and named in caught.value.message
    # A database nobody hardened: signal functions and statistics views are open to PUBLIC.
    with pytest.raises(UnsafeServerSetup) as caught:
        check_server_setup(f"{campaigns['camp_a']} dbname=isolation_unhardened")
    message = str(caught.value)
    assert "pg_cancel_backend" in message and "load_corpus_databases" in message
    with _admin(postgres_cluster, "isolation_unhardened") as admin:
        admin.execute("REVOKE EXECUTE ON FUNCTION pg_cancel_backend(int) FROM PUBLIC")
    # One fix is not enough; an admin sees the remaining problems for the role.
    with pytest.raises(UnsafeServerSetup, match="pg_terminate_backend"):
        check_server_setup(postgres_cluster.dsn("isolation_unhardened"), role="camp_a")
    # A SECURITY DEFINER function (it would run agent SQL with its owner's, a superuser's,
    # privileges).
    with _admin(postgres_cluster, dbname) as admin:
        admin.execute(
            "CREATE FUNCTION isolation_definer() RETURNS int LANGUAGE sql SECURITY DEFINER "
            "AS 'SELECT 1'"
        )
    try:
        with pytest.raises(UnsafeServerSetup, match="SECURITY DEFINER"):
            check_server_setup(postgres_cluster.dsn(dbname), role="camp_b")
    finally:
        with _admin(postgres_cluster, dbname) as admin:
            admin.execute("DROP FUNCTION isolation_definer()")
    # A role whose errors would reach the server log.
    with _admin(postgres_cluster) as admin:
        admin.execute("ALTER ROLE camp_b RESET log_min_messages")
    try:
        with pytest.raises(UnsafeServerSetup, match="log_min_messages"):
            check_server_setup(postgres_cluster.dsn(dbname), role="camp_b")
    finally:
        load_corpus_databases(load_corpus(CORPUS), postgres_cluster.dsn(), reader="camp_b")
    check_server_setup(postgres_cluster.dsn(dbname), role="camp_b")
    with _admin(postgres_cluster) as admin:
        admin.execute("DROP DATABASE isolation_unhardened")


def test_a_crashed_duckdb_worker_does_not_break_the_reference_for_good():
    # The same rule on every engine: a reference that failed because the engine process died
    # (``runtime``) is run again, and cached only if it fails the same way twice.
    corpus = load_corpus(CORPUS)
    base = corpus.records[0]
    slow = (
        "SELECT g, g * g AS sq FROM generate_series(1, 5) t(g) "
        "WHERE (SELECT count(*) FROM range(3000000000)) > 0"
    )
    verification = base.verification.model_copy(update={"reference_sql": slow})
    record = base.model_copy(update={"id": "isolation-duckdb-crash", "verification": verification})
    verifier = Verifier(corpus.open_engine)
    engine = verifier.engine(record.verification.engine, record.verification.database)
    outcome: dict = {}
    thread = threading.Thread(
        target=lambda: outcome.update(
            v=verifier.verify(record, "SELECT g, g * g AS sq FROM generate_series(1, 5) t(g)")
        )
    )
    try:
        thread.start()
        deadline = time.monotonic() + 20
        while engine.worker_pid is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # the reference is running now
        assert thread.is_alive()
        os.kill(engine.worker_pid, signal.SIGKILL)
        thread.join(120)
        restarts = engine.restarts
    finally:
        verifier.close()
    assert restarts == 1
    assert outcome["v"].reason == "match", outcome


def test_pg_stat_statements_is_closed_where_it_is_installed(postgres_cluster, campaigns, database):  # noqa: F811
    dbname = database_name(CORPUS, database)
    with _admin(postgres_cluster, dbname) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    try:
        # Installed after the load: PostgreSQL grants its view to PUBLIC, and the check says so.
        with pytest.raises(UnsafeServerSetup, match="pg_stat_statements"):
            check_server_setup(postgres_cluster.dsn(dbname), role="camp_a")
        load_corpus_databases(load_corpus(CORPUS), postgres_cluster.dsn(), reader="camp_a")
        check_server_setup(postgres_cluster.dsn(dbname), role="camp_a")
        engine = PostgresEngine(campaigns["camp_a"], dbname=dbname)
        try:
            attempts = [
                _attempt(engine, "SELECT query FROM pg_stat_statements"),
                _attempt(engine, "SELECT query FROM pg_stat_statements(true)"),
            ]
        finally:
            engine.close()
        assert [category for category, _ in attempts] == ["rejected", "rejected"], attempts
    finally:
        with _admin(postgres_cluster, dbname) as admin:
            admin.execute("DROP EXTENSION IF EXISTS pg_stat_statements")


def test_an_attacking_env_does_not_change_another_campaigns_rewards(campaigns):
    # The scenario through the public env API: while one env's agent keeps trying to
    # cancel or terminate every backend on the server (pids guessed, as pg_stat_activity is
    # closed), a perfect agent in another campaign's env still succeeds on every record.
    env_id = "AmbiTab-BIRD-Interact-v0"
    assert ambitab_gym.STOP  # the import registers the env ids
    records = [r for r in load_corpus(CORPUS).records if r.m > 0][:8]

    def make(campaign: str):
        options = {"dsn": campaigns[campaign]}
        return gym.make(env_id, engine="postgres", engine_options=options, mode="agent")

    victim, attacker = make("camp_b"), make("camp_a")
    attacks = [
        "SELECT count(*) FILTER (WHERE pg_cancel_backend(p)) FROM generate_series(1, 4194304) p",
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(p)) FROM generate_series(1, 4194304) p",
        "SELECT string_agg(query, ';') FROM pg_stat_activity",
    ]
    stop = threading.Event()
    verdicts: list[str] = []

    def attack() -> None:
        while not stop.is_set():
            for sql in attacks:
                attacker.reset(options={"record_id": records[0].id})
                attacker.step(ambitab_gym.STOP)
                verdicts.append(attacker.step(sql)[4]["verdict_reason"])

    thread = threading.Thread(target=attack)
    try:
        thread.start()
        successes = []
        for record in records:
            victim.reset(options={"record_id": record.id})
            victim.step(ambitab_gym.STOP)
            _, reward, terminated, _, info = victim.step(record.verification.reference_sql)
            successes.append((record.id, terminated, info["success"]))
    finally:
        stop.set()
        thread.join(60)
        victim.close()
        attacker.close()
    assert successes == [(record.id, True, True) for record in records]
    assert len(verdicts) >= len(attacks) and set(verdicts) == {"rejected"}, verdicts
