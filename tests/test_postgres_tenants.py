"""Campaigns as tenants of one PostgreSQL server: write-task scratch databases (issue 30).

Two campaigns load the same write-task corpus into one throwaway PostgreSQL 15 cluster, each
with a login of its own (``tenant_a``, ``tenant_b``; the cluster trusts every login, so "A's
login" is simply connecting as ``tenant_a``). Campaign A, with nothing but its own logins, tries
what the issue did: connect to campaign B's spare and in-use clones, plant a trigger that turns
B's correct submission into ``rejected`` and one that writes B's reference SQL (through
``current_query()``) into a sequence it polls, and take on B's or the shared scratch-owner
role. None of it gets in, and B's verdicts are what they are without A. ``check_server_setup``
refuses a server where a clone is open to ``PUBLIC`` or to another campaign's role, a template
accepts connections, or a role is a member of another campaign's scratch role, naming the
database or role and the fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from pathlib import Path

import psycopg
import pytest
from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)
from write_task_fixtures import HR_SQL, RAISE, RAISE_TEST

from ambitab_gym.corpora import load_corpus
from ambitab_gym.verify import Limits, Verifier
from ambitab_gym.verify.base import QueryError
from ambitab_gym.verify.postgres import (
    PostgresEngine,
    check_server_setup,
    database_name,
    load_corpus_databases,
)
from ambitab_gym.verify.postgres_loader import (
    SCRATCH_OWNER,
    UnsafeServerSetup,
    scratch_role,
    template_name,
)

SECRET = "tenant-b-secret-7d1e"
SCRIPT = HR_SQL
# While B's task runs (the in-use clone is what A goes for then).
SLOW_RAISE = RAISE + "; SELECT pg_sleep(1.5)"
WRONG = "UPDATE staff SET salary = 150"
TENANTS = ("tenant_a", "tenant_b")


def _write_corpus(folder: Path) -> Path:
    (folder / "databases").mkdir(parents=True)
    (folder / "databases" / "hr.sql").write_text(SCRIPT)
    records = []
    for rid in ("raise_1", "raise_2", "raise_3"):
        verification = {
            "engine": "postgres",
            "database": "hr",
            # The reference B's verifier runs (trusted) once per record: A must never see it.
            "reference_sql": f"{RAISE} AND name <> '{SECRET} {rid}'",
            "test_cases": [RAISE_TEST],
        }
        records.append(
            {
                "id": rid,
                "avt_id": rid,
                "corpus": "tenants",
                "split": "all",
                "spec": {"request": "raise the north to 150", "database": "hr"},
                "ambiguities": [],
                "verification": verification,
                "source": {"kind": "test"},
            }
        )
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    manifest = {
        "name": "tenants",
        "version": "0.0.1",
        "oracle": "intent",
        "databases": {
            "hr": {
                "file": "databases/hr.sql",
                "sha256": hashlib.sha256(SCRIPT.encode()).hexdigest(),
            }
        },
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


class Campaign:
    """One tenant: its agent DSN (from the loader) and a verifier that runs write tasks."""

    def __init__(self, folder: Path, cluster, reader: str) -> None:
        self.reader = reader
        self.dsn = load_corpus_databases(load_corpus(folder), cluster.dsn(), reader=reader)
        options = {"dsn": self.dsn, "admin_dsn": cluster.dsn()}
        self.corpus = load_corpus(folder, engine_override="postgres", options=options)
        self.records = {r.id: r for r in self.corpus.records}
        self.verifier = Verifier(self.corpus.open_engine, limits=Limits(timeout_s=5.0))

    def verify(self, record_id: str, sql: str) -> str:
        return self.verifier.verify(self.records[record_id], sql).reason


@pytest.fixture(scope="module")
def setup(postgres_cluster, tmp_path_factory):  # noqa: F811
    folder = _write_corpus(tmp_path_factory.mktemp("tenants") / "corpus")
    campaigns = {reader: Campaign(folder, postgres_cluster, reader) for reader in TENANTS}
    dbname = database_name("tenants", "hr")
    yield postgres_cluster, campaigns, dbname
    for campaign in campaigns.values():
        campaign.verifier.close()


def _admin(cluster, dbname: str = "postgres") -> psycopg.Connection:
    return psycopg.connect(cluster.dsn(dbname), autocommit=True)


def _spare_of(campaign: Campaign) -> str:
    """The spare clone campaign's engine keeps ready for its next write task (made in the
    background after a task starts)."""
    engine = campaign.verifier.engine("postgres", "hr")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        spares = list(engine._spares)
        if spares:
            return spares[0]
        time.sleep(0.01)
    raise AssertionError("no spare clone appeared")


class Attacker:
    """Campaign A with its own logins: what the issue did to campaign B's clones."""

    def __init__(self, cluster, victim: str) -> None:
        self.cluster = cluster
        self.victim = victim
        self.tried: set[str] = set()
        self.refusals: list[str] = []
        self.entered: list[str] = []
        self.captured: list[int] = []
        self.sessions: list[psycopg.Connection] = []

    def attack(self, names: list[str]) -> None:
        for name in names:
            for login in ("tenant_a", "tenant_a_reference"):
                self.tried.add(name)
                try:
                    connection = psycopg.connect(
                        self.cluster.dsn(name, user=login), autocommit=True, connect_timeout=5
                    )
                except psycopg.OperationalError as error:
                    self.refusals.append(str(error))
                    continue
                self.entered.append(f"{login}@{name}")
                self.sessions.append(connection)
                with contextlib.suppress(psycopg.Error):  # (what its privileges there allow)
                    self._plant(connection)

    def attack_all(self) -> None:
        """Every scratch database on the server that is not A's own (names are public)."""
        with psycopg.connect(self.cluster.dsn("postgres", user="tenant_a")) as lister:
            names = [
                name
                for (name,) in lister.execute(
                    "SELECT datname::text FROM pg_database WHERE datname LIKE 'ambitab\\_s\\_%' "
                    "AND coalesce(shobj_description(oid, 'pg_database'), '') "
                    "<> 'ambitab:scratch:tenant_a'"
                ).fetchall()
            ]
        self.attack(names)

    def _plant(self, connection: psycopg.Connection) -> None:
        """The issue's attack: a trigger that rejects B's submission, and one that writes where
        B's reference SQL holds the secret into a sequence (setval outlives B's rollback),
        polled from this session until the clone is dropped."""
        connection.execute("SET default_transaction_read_only = off")
        connection.execute("CREATE SEQUENCE public.leak MINVALUE 0 START 0")
        connection.execute("GRANT ALL ON SEQUENCE public.leak TO PUBLIC")
        connection.execute(
            "CREATE FUNCTION public.spy() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF strpos(current_query(), '{SECRET}') > 0 THEN "
            f"PERFORM setval('public.leak', strpos(current_query(), '{SECRET}')); "
            "ELSE RAISE EXCEPTION 'no' USING ERRCODE = '42501'; END IF; RETURN NEW; END $$"
        )
        connection.execute(
            "CREATE TRIGGER spy BEFORE UPDATE ON staff FOR EACH ROW EXECUTE FUNCTION spy()"
        )

        def poll() -> None:
            try:
                while True:
                    value = connection.execute("SELECT last_value FROM public.leak")
                    position = value.fetchone()[0]
                    if position:
                        self.captured.append(position)
                        return
                    time.sleep(0.002)
            except psycopg.Error:
                return  # the clone was dropped

        threading.Thread(target=poll, daemon=True).start()


def test_a_campaign_cannot_enter_or_change_another_campaigns_scratch_databases(setup):
    cluster, campaigns, dbname = setup
    victim, attacker = campaigns["tenant_b"], Attacker(cluster, "tenant_b")
    verdicts = [victim.verify("raise_1", RAISE)]  # a clone each, and a spare left ready
    spares = []
    # At B's spare, before B's next task uses it: the reference of a record B has not checked
    # yet (raise_2), a correct answer, a wrong one.
    for record, sql in (("raise_2", RAISE), ("raise_1", RAISE), ("raise_1", WRONG)):
        spares.append(_spare_of(victim))
        attacker.attack_all()
        verdicts.append(victim.verify(record, sql))

    # The clone B's task is running in, while it runs.
    done = threading.Event()
    result: list[str] = []

    def run_slow() -> None:
        result.append(victim.verify("raise_2", SLOW_RAISE))
        done.set()

    spares.append(_spare_of(victim))
    thread = threading.Thread(target=run_slow)
    thread.start()
    in_use = None
    deadline = time.monotonic() + 10
    with _admin(cluster) as admin:
        while in_use is None and time.monotonic() < deadline:
            row = admin.execute(
                "SELECT datname::text FROM pg_stat_activity WHERE usename = 'tenant_b' "
                "AND wait_event = 'PgSleep'"
            ).fetchone()
            in_use = row[0] if row else None
            time.sleep(0.01)
    assert in_use is not None and in_use.startswith("ambitab_s_")
    attacker.attack([in_use])
    thread.join(30)
    assert done.is_set()
    verdicts += result
    time.sleep(0.3)  # (what a poller would have read by now)
    for session in attacker.sessions:
        session.close()

    assert verdicts == ["match", "match", "match", "mismatch", "match"]
    assert attacker.entered == [] and attacker.captured == []
    assert set(spares) <= attacker.tried and in_use in attacker.tried
    # (a used clone may be dropped between listing and connecting)
    denied = [r for r in attacker.refusals if "permission denied for database" in r]
    gone = [r for r in attacker.refusals if "does not exist" in r]
    assert len(denied) >= 2 * len({*spares, in_use}) and len(denied) + len(gone) == len(
        attacker.refusals
    ), attacker.refusals

    # B's own login reaches B's clones; their tables are B's scratch role's, not a shared one.
    spare = _spare_of(victim)
    with psycopg.connect(cluster.dsn(spare, user="tenant_b")) as own:
        owner = own.execute("SELECT tableowner::text FROM pg_tables WHERE tablename = 'staff'")
        assert owner.fetchone() == (scratch_role("tenant_b"),)
    # Nor can A take on B's scratch role or the templates' owner, or reach the template.
    with psycopg.connect(cluster.dsn(dbname, user="tenant_a"), autocommit=True) as own:
        for role in (scratch_role("tenant_b"), SCRATCH_OWNER):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                own.execute(f"SET ROLE {role}")
    with pytest.raises(psycopg.OperationalError, match="not currently accepting connections"):
        psycopg.connect(cluster.dsn(template_name(dbname), user="tenant_a"))
    # The corpus database is unchanged: no trigger, nothing of A's.
    with _admin(cluster, dbname) as admin:
        triggers = admin.execute("SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal")
        assert triggers.fetchone() == (0,)
        assert admin.execute("SELECT sum(salary) FROM staff").fetchone() == (420,)


def _refusal(dsn: str, *needles: str) -> str:
    with pytest.raises(UnsafeServerSetup) as caught:
        check_server_setup(dsn)
    message = str(caught.value)
    for needle in needles:
        assert needle in message, message
    return message


def test_check_server_setup_refuses_databases_open_to_other_campaigns(setup):
    cluster, campaigns, dbname = setup
    a_dsn = f"{campaigns['tenant_a'].dsn} dbname={dbname}"
    campaigns["tenant_b"].verify("raise_1", RAISE)
    spare = _spare_of(campaigns["tenant_b"])
    check_server_setup(a_dsn)
    check_server_setup(cluster.dsn(dbname), role="tenant_b")
    stale = "ambitab_s_000000_1_deadbeef"
    try:
        with _admin(cluster) as admin:
            # A clone whose ACL was left at PostgreSQL's default, as clones were made before.
            admin.execute(f"GRANT CONNECT ON DATABASE {spare} TO PUBLIC")
            _refusal(
                a_dsn,
                f"database '{spare}' accepts connections from every role",
                f"DROP DATABASE {spare} WITH (FORCE)",
                f"REVOKE CONNECT, TEMPORARY ON DATABASE {spare} FROM PUBLIC",
            )
            # The engine refuses to run A's submissions on such a server.
            engine = PostgresEngine(campaigns["tenant_a"].dsn, dbname=dbname)
            with pytest.raises(QueryError) as caught:
                engine.execute("SELECT 1")
            engine.close()
            assert caught.value.category == "engine" and spare in caught.value.message
            admin.execute(f"REVOKE CONNECT ON DATABASE {spare} FROM PUBLIC")
            # Open to one other campaign's role.
            admin.execute(f"GRANT CONNECT ON DATABASE {spare} TO tenant_a")
            _refusal(
                a_dsn,
                f"scratch database '{spare}' of campaign role 'tenant_b'",
                f"REVOKE CONNECT, TEMPORARY ON DATABASE {spare} FROM tenant_a",
            )
            admin.execute(f"REVOKE CONNECT ON DATABASE {spare} FROM tenant_a")
            # A member of another campaign's scratch role, or of the templates' owner.
            for group in (scratch_role("tenant_b"), SCRATCH_OWNER):
                admin.execute(f"GRANT {group} TO tenant_a")
                _refusal(a_dsn, f"'{group}'", f"REVOKE {group} FROM tenant_a")
                admin.execute(f"REVOKE {group} FROM tenant_a")
            # A template that accepts connections.
            template = template_name(dbname)
            admin.execute(f"ALTER DATABASE {template} WITH ALLOW_CONNECTIONS true")
            _refusal(a_dsn, f"ALTER DATABASE {template} WITH ALLOW_CONNECTIONS false")
            admin.execute(f"ALTER DATABASE {template} WITH ALLOW_CONNECTIONS false")
            # A clone made the old way (default ACL), left by a verifier of an older version.
            admin.execute(f"CREATE DATABASE {stale} TEMPLATE {template}")
            _refusal(a_dsn, f"'{stale}'", f"DROP DATABASE {stale} WITH (FORCE)")
            admin.execute(f"DROP DATABASE {stale}")
        check_server_setup(a_dsn)
        # The loader revokes a membership in the templates' owner that older versions granted.
        with _admin(cluster) as admin:
            admin.execute(f"GRANT {SCRATCH_OWNER} TO tenant_a")
        load_corpus_databases(campaigns["tenant_a"].corpus, cluster.dsn(), reader="tenant_a")
        check_server_setup(a_dsn)
    finally:
        with _admin(cluster) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {stale}")
            admin.execute(f"REVOKE CONNECT ON DATABASE {spare} FROM PUBLIC, tenant_a")
            admin.execute(f"ALTER DATABASE {template_name(dbname)} WITH ALLOW_CONNECTIONS false")
            for group in (scratch_role("tenant_b"), SCRATCH_OWNER):
                admin.execute(f"REVOKE {group} FROM tenant_a")
    assert campaigns["tenant_b"].verify("raise_2", RAISE) == "match"
