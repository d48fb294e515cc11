"""Loading a corpus's SQL-script databases into a PostgreSQL server for the verifier.

* :func:`load_corpus_databases` - one PostgreSQL database per corpus database (named by
  :func:`database_name`), built idempotently, plus two SELECT-only login roles: the *agent* role
  (``reader``) that submissions run as, and the *reference* role (:func:`reference_role`) that
  the trusted reference queries run as.
* :func:`database_name` - ``<corpus>__<database>``.
* :func:`reference_role` - ``<reader>_reference``.
* :func:`scratch_role` - ``<reader>_scratch``: the NOLOGIN role that owns the tables of one
  campaign's write-task scratch databases (:func:`create_scratch_database`).
* :func:`isolation_problems`, :func:`check_server_setup` - what would let an agent session
  disturb or observe other sessions (signal functions, activity and statistics views, role
  memberships, server-log settings) or reach another campaign's databases (database ACLs,
  scratch-role memberships); the engine runs the same check on its first connection.
* :data:`DANGEROUS_ROLES` - roles that could escape a read-only transaction.

Isolation (docs/security.md): in every corpus database the loader revokes from ``PUBLIC`` the
``EXECUTE`` privilege on ``pg_cancel_backend``/``pg_terminate_backend`` and on every
``pg_stat_*`` function, ``pg_lock_status`` and ``pg_blocking_pids``, and ``SELECT`` on every
``pg_stat_*``/``pg_statio_*`` view and ``pg_locks`` (privileges on built-in objects are per
database, so nothing changes elsewhere on the server). The agent role's server-log settings keep
agent-sized messages and statements out of the server log; the reference role does not report
its query text or table-access counts to the statistics system.

Tenants (docs/security.md): a campaign is a tenant, identified by its agent role (``reader``).
Every database the loader or an engine creates starts with ``ALLOW_CONNECTIONS false`` and gets
its ACL (``REVOKE ALL ... FROM PUBLIC``, ``CONNECT`` for its readers only) before any
connection is allowed. A write task's scratch database is connectable by its campaign's agent
role alone, and its tables are owned by that campaign's :func:`scratch_role`, of which no other
role is a member.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ambitab_gym.errors import EngineError

if TYPE_CHECKING:
    from ambitab_gym.corpora.corpus import Corpus

__all__ = [
    "DANGEROUS_ROLES",
    "OBSERVER_ROLES",
    "SCRATCH_OWNER",
    "SCRATCH_PREFIX",
    "UnsafeServerSetup",
    "check_server_setup",
    "create_scratch_database",
    "database_name",
    "isolation_problems",
    "load_corpus_databases",
    "reference_role",
    "scratch_role",
    "template_name",
]

#: Members of these roles can read or write server files or run programs even read-only.
DANGEROUS_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program")
#: Members of these roles can signal other backends or read every session's query text and the
#: server's statistics.
OBSERVER_ROLES = ("pg_signal_backend", "pg_read_all_stats", "pg_stat_scan_tables", "pg_monitor")
_COMMENT_PREFIX = "ambitab:"
#: The NOLOGIN role that owns the objects of the write-task templates (shared by every campaign
#: that loads a corpus); nobody is a member: each clone's objects are handed to the campaign's own
#: :func:`scratch_role` when it is made.
SCRATCH_OWNER = "ambitab_scratch_owner"
#: Names of write-task scratch databases: ``ambitab_s_<host>_<pid>_<random>``.
SCRATCH_PREFIX = "ambitab_s_"
_REFERENCE_SUFFIX = "_reference"
_SCRATCH_SUFFIX = "_scratch"
# Comments that mark a scratch database (``ambitab:scratch:<agent role>``) and a campaign's
# scratch role (``ambitab:scratch-owner:<agent role>``); only superusers and owners can set them.
_SCRATCH_TAG = f"{_COMMENT_PREFIX}scratch:"
_SCRATCH_OWNER_TAG = f"{_COMMENT_PREFIX}scratch-owner:"

# Built-in functions and views an agent session must not use: they signal other backends or show
# other sessions' query text, locks and table-access statistics.
_SIGNAL_FUNCTIONS = ("pg_cancel_backend", "pg_terminate_backend")
_OBSERVER_FUNCTIONS = (
    "pg_lock_status",
    "pg_blocking_pids",
    "pg_safe_snapshot_blocking_pids",
    "pg_isolation_test_session_is_blocked",
)
_GUARDED_FUNCTIONS = f"""
SELECT p.oid::regprocedure::text FROM pg_proc p
WHERE p.proname IN ({", ".join(f"'{name}'" for name in _SIGNAL_FUNCTIONS + _OBSERVER_FUNCTIONS)})
   OR (p.proname LIKE 'pg\\_stat\\_%' AND p.proname NOT LIKE 'pg\\_stat\\_file%')
ORDER BY 1
"""
_GUARDED_RELATIONS = """
SELECT c.oid::regclass::text FROM pg_class c
WHERE c.relkind IN ('v', 'r', 'm')
  AND (c.relname LIKE 'pg\\_stat\\_%' OR c.relname LIKE 'pg\\_statio\\_%'
       OR c.relname = 'pg_locks')
ORDER BY 1
"""
# Server-log settings of the agent role: no agent-sized error message, statement or duration
# line reaches the log (ERROR messages echo agent input; a 400 MB message was written per query).
_AGENT_LOG_SETTINGS = (
    ("log_min_messages", "fatal"),
    ("log_min_error_statement", "panic"),
    ("log_min_duration_statement", "-1"),
    ("log_statement", "none"),
    ("log_duration", "off"),
    ("log_error_verbosity", "terse"),
)
_QUIET_LEVELS = ("fatal", "panic")
# The reference role's sessions do not publish their query text or table-access counts.
_REFERENCE_SETTINGS = (("track_activities", "off"), ("track_counts", "off"))


class UnsafeServerSetup(EngineError, ValueError):
    """The PostgreSQL setup would let one agent disturb or observe other sessions (an
    :class:`~ambitab_gym.errors.EngineError` with category ``unsafe_server_setup``, and a
    ``ValueError``).

    The message lists each problem with what to change.

    >>> str(UnsafeServerSetup(["role 'x' is a superuser"])).splitlines()[0]
    'unsafe PostgreSQL setup for running untrusted SQL:'
    """

    category = "unsafe_server_setup"

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            "unsafe PostgreSQL setup for running untrusted SQL:\n"
            + "\n".join(f"- {problem}" for problem in self.problems)
        )


def reference_role(reader: str) -> str:
    """The login role that runs the trusted reference queries next to agent role ``reader``.

    Example:
        >>> reference_role("ambitab_reader")
        'ambitab_reader_reference'
    """
    return reader + _REFERENCE_SUFFIX


def scratch_role(reader: str) -> str:
    """The NOLOGIN role that owns the tables of agent role ``reader``'s scratch databases (the
    agent role is its only member).

    Example:
        >>> scratch_role("campaign_a")
        'campaign_a_scratch'
    """
    return reader + _SCRATCH_SUFFIX


def database_name(corpus: str, database: str) -> str:
    """The PostgreSQL database that holds a corpus database.

    Example:
        >>> database_name("bird_interact", "esports_league")
        'bird_interact__esports_league'
    """
    name = f"{corpus}__{database}".lower()
    if len(name) > 55:  # identifiers stop at 63 bytes; keep room for the loader's suffix
        name = name[:46] + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return name


def template_name(name: str) -> str:
    """The template database that write tasks clone a scratch copy of ``name`` from.

    Example:
        >>> template_name("bird_interact__alien")
        'bird_interact__alien__tpl'
    """
    return name + "__tpl"


def _script_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_corpus_databases(
    corpus: Corpus,
    admin_dsn: str,
    *,
    reader: str = "ambitab_reader",
    reader_password: str | None = None,
    force: bool = False,
) -> str:
    """Load a corpus's SQL-script databases into a PostgreSQL server, one database each.

    Each corpus database becomes the PostgreSQL database :func:`database_name` ``(corpus,
    database)``, built under a temporary name and renamed into place, and tagged with the
    script's sha256 so a later call skips databases that are up to date. Two SELECT-only login
    roles are created (or checked) and granted ``CONNECT`` and ``SELECT`` on each database:
    ``reader``, which agent submissions run as, and :func:`reference_role` ``(reader)``, which
    the trusted reference queries run as. Every database is hardened (see the module doc) and
    checked with :func:`isolation_problems`, also when it was up to date. The campaign's
    :func:`scratch_role` is created (or checked) with ``reader`` as its only member, and
    ``reader``'s membership in :data:`SCRATCH_OWNER` (which older versions granted) is revoked.
    Last, the server is checked for databases that another campaign could connect to.

    Args:
        corpus: the corpus whose manifest lists ``.sql`` databases.
        admin_dsn: a superuser connection (creating databases and roles, revoking privileges on
            built-in functions and setting the agent role's log settings need one).
        reader: the agent role the verifier connects as; one per campaign keeps campaigns
            apart even on a server whose databases were hardened by hand.
        reader_password: set as the password of both roles (None: leave it unchanged / none).
        force: rebuild every database even when it is up to date.

    Returns:
        A DSN for the reader (``admin_dsn`` with the reader's user and password and no
        database); pass it as ``engine_options={"dsn": ...}``. The engine derives the reference
        role's DSN from it (same parameters, user :func:`reference_role` ``(reader)``).

    Raises:
        UnsafeServerSetup: the loading role could not harden a database or the roles, or a
            database of the loader's or an engine's making is open to other campaigns.
    """
    admin = conninfo_to_dict(admin_dsn)
    reference = reference_role(reader)
    if len(reference.encode()) > 63:  # PostgreSQL would silently cut the name
        raise ValueError(
            f"reader name {reader!r} is too long: {reference!r} must fit PostgreSQL's 63-byte "
            "identifiers; choose a shorter reader name"
        )
    with psycopg.connect(admin_dsn, autocommit=True) as connection:
        _ensure_reader(connection, reader, reader_password, reference=reference)
        _ensure_reader(connection, reference, reader_password, reference=None)
        _ensure_scratch_owner(connection, reader)
        for database, entry in corpus.manifest.databases.items():
            source = corpus.path / entry.file
            if source.suffix != ".sql":
                raise ValueError(
                    f"corpus {corpus.name!r}: database {database!r} is {source.name}; only SQL "
                    "scripts can be loaded into PostgreSQL"
                )
            _load_one(
                connection,
                admin,
                database_name(corpus.name, database),
                source,
                (reader, reference),
                force=force,
            )
            _load_template(
                connection, admin, database_name(corpus.name, database), source, force=force
            )
        problems = _tenant_problems(connection)
    if problems:
        raise UnsafeServerSetup(problems)
    params = {k: v for k, v in admin.items() if k not in ("dbname", "password", "user")}
    params["user"] = reader
    if reader_password is not None:
        params["password"] = reader_password
    return make_conninfo(**params)


def _ensure_reader(
    connection: psycopg.Connection, reader: str, password: str | None, *, reference: str | None
) -> None:
    """Create or check one SELECT-only login role; ``reference`` set: it is the agent role."""
    role = sql.Identifier(reader)
    exists = connection.execute(
        "SELECT coalesce(shobj_description(oid, 'pg_authid'), '') FROM pg_roles WHERE rolname = %s",
        [reader],
    ).fetchone()
    if reader == SCRATCH_OWNER or (exists is not None and exists[0].startswith(_SCRATCH_OWNER_TAG)):
        raise ValueError(
            f"role {reader!r} owns write-task scratch tables; choose another reader name"
        )
    if exists is None:
        connection.execute(
            sql.SQL(
                "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
            ).format(role)
        )
    privileged = connection.execute(
        "SELECT coalesce(bool_or(rolsuper OR rolcreaterole), false) "
        "OR coalesce(bool_or(rolname = ANY(%s)), false) "
        "FROM pg_roles WHERE pg_has_role(%s, oid, 'MEMBER')",
        [list(DANGEROUS_ROLES + OBSERVER_ROLES), reader],
    ).fetchone()[0]
    if privileged:
        raise ValueError(
            f"role {reader!r} exists and is privileged (a superuser, CREATEROLE, or a member of "
            f"{', '.join(DANGEROUS_ROLES + OBSERVER_ROLES)}); choose another reader name"
        )
    if reference is not None and connection.execute(
        "SELECT pg_has_role(%s, oid, 'MEMBER') FROM pg_roles WHERE rolname = %s",
        [reader, reference],
    ).fetchone() == (True,):
        raise ValueError(
            f"role {reader!r} is a member of {reference!r}, the role that runs the reference "
            f"queries; revoke that membership (REVOKE {reference} FROM {reader})"
        )
    if password is not None:
        connection.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(role, sql.Literal(password)))
    connection.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(role))
    settings = [("temp_file_limit", "1GB")]  # caps the temporary files one query may write
    settings += list(_AGENT_LOG_SETTINGS if reference is not None else _REFERENCE_SETTINGS)
    for name, value in settings:
        try:
            connection.execute(
                sql.SQL("ALTER ROLE {} SET {} = {}").format(
                    role, sql.Identifier(name), sql.Literal(value)
                )
            )
        except psycopg.errors.InsufficientPrivilege:
            raise UnsafeServerSetup(
                [
                    f"the loading role may not set {name} for role {reader!r}; load with a "
                    f"superuser connection, or have a superuser run "
                    f"ALTER ROLE {reader} SET {name} = '{value}'"
                ]
            ) from None


def _lock_database_name(connection: psycopg.Connection, name: str) -> int:
    """Take the server-wide advisory lock of one database name (concurrent loaders of the same
    corpus wait for each other); returns the lock key for ``pg_advisory_unlock``."""
    lock = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
    connection.execute("SELECT pg_advisory_lock(%s)", [lock])
    return lock


def _database_tag(connection: psycopg.Connection, name: str) -> str | None:
    """The loader's comment on database ``name`` (script digest), or None."""
    row = connection.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        [name],
    ).fetchone()
    return None if row is None else row[0]


def _load_one(
    connection: psycopg.Connection,
    admin: dict,
    name: str,
    source: Path,
    readers: tuple[str, str],
    *,
    force: bool,
) -> None:
    digest = _script_digest(source)
    tag = f"{_COMMENT_PREFIX}{digest}"
    lock = _lock_database_name(connection, name)
    try:
        if _database_tag(connection, name) == tag and not force:
            _grant_database(connection, admin, name, readers)
            return
        staging = f"{name}__loading"
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(staging))
        )
        _create_database(connection, staging, "template0", encoding="UTF8")
        with psycopg.connect(make_conninfo(**{**admin, "dbname": staging})) as target:
            target.execute(source.read_text("utf-8"))  # trusted script, simple protocol
            schemas = target.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname <> 'information_schema' "
                "AND nspname NOT LIKE 'pg\\_%'"
            ).fetchall()
            for (schema,) in schemas:
                ident = sql.Identifier(schema)
                target.execute(sql.SQL("REVOKE CREATE ON SCHEMA {} FROM PUBLIC").format(ident))
            target.commit()
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        connection.execute(
            sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                sql.Identifier(staging), sql.Identifier(name)
            )
        )
        connection.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(tag))
        )
        _grant_database(connection, admin, name, readers)
    finally:
        connection.execute("SELECT pg_advisory_unlock(%s)", [lock])


def _ensure_scratch_owner(connection: psycopg.Connection, reader: str) -> None:
    """The NOLOGIN roles that own write-task tables: :data:`SCRATCH_OWNER` owns the templates'
    objects and has no members (older versions made every agent role one: revoked here for
    ``reader``); :func:`scratch_role` ``(reader)`` is handed each clone's objects, with
    ``reader`` as its only member (other members are revoked)."""
    own = scratch_role(reader)
    for role in (SCRATCH_OWNER, own):
        row = connection.execute(
            "SELECT rolcanlogin OR rolsuper OR rolcreaterole OR rolcreatedb OR rolreplication "
            "OR rolbypassrls FROM pg_roles WHERE rolname = %s",
            [role],
        ).fetchone()
        if row is None:
            with contextlib.suppress(psycopg.errors.DuplicateObject):  # a concurrent loader
                connection.execute(
                    sql.SQL(
                        "CREATE ROLE {} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                        "NOBYPASSRLS"
                    ).format(sql.Identifier(role))
                )
        elif row[0]:
            raise ValueError(
                f"role {role!r} exists and can log in or has privileges; it would own write-task "
                f"scratch tables: choose another reader name (or drop role {role!r})"
            )
    connection.execute(
        sql.SQL("COMMENT ON ROLE {} IS {}").format(
            sql.Identifier(own), sql.Literal(_SCRATCH_OWNER_TAG + reader)
        )
    )
    members = connection.execute(
        "SELECT r.rolname::text, g.rolname::text FROM pg_auth_members m "
        "JOIN pg_roles r ON r.oid = m.member JOIN pg_roles g ON g.oid = m.roleid "
        "WHERE (g.rolname = %s AND r.rolname = %s) OR (g.rolname = %s AND r.rolname <> %s)",
        [SCRATCH_OWNER, reader, own, reader],
    ).fetchall()
    for member, group in members:
        connection.execute(
            sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(group), sql.Identifier(member))
        )
    connection.execute(
        sql.SQL("GRANT {} TO {}").format(sql.Identifier(own), sql.Identifier(reader))
    )


def _create_database(
    connection: psycopg.Connection,
    name: str,
    template: str,
    *,
    readers: tuple[str, ...] = (),
    tag: str | None = None,
    encoding: str | None = None,
) -> None:
    """``CREATE DATABASE name TEMPLATE template`` that only superusers and ``readers`` (``CONNECT``
    and ``TEMPORARY``) can ever connect to.

    PostgreSQL gives a new database the default ACL whatever the template's (``datacl`` NULL:
    ``PUBLIC`` may connect and create temporary objects), so the database is created with
    ``ALLOW_CONNECTIONS false`` and its ACL, comment and ``ALLOW_CONNECTIONS true`` are set in
    one transaction afterwards: no session can start in it before its ACL is in place.
    """
    ident = sql.Identifier(name)
    connection.execute(
        sql.SQL("CREATE DATABASE {} TEMPLATE {}{} ALLOW_CONNECTIONS false").format(
            ident,
            sql.Identifier(template),
            sql.SQL(" ENCODING {}").format(sql.Literal(encoding)) if encoding else sql.SQL(""),
        )
    )
    statements = [sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(ident)]
    statements += [
        sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(ident, sql.Identifier(r))
        for r in readers
    ]
    if tag is not None:
        statements.append(sql.SQL("COMMENT ON DATABASE {} IS {}").format(ident, sql.Literal(tag)))
    statements.append(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS true").format(ident))
    # One simple-protocol query: one implicit transaction.
    connection.execute(sql.SQL("; ").join(statements))


def create_scratch_database(
    connection: psycopg.Connection, conninfo: str, name: str, template: str, reader: str
) -> None:
    """Clone write-task ``template`` into database ``name`` for agent role ``reader`` alone.

    ``reader`` (and superusers) alone may connect to the clone (``CONNECT``, ``TEMPORARY``; no
    ``CREATE``); its comment says whose it is (``ambitab:scratch:<reader>``, read by
    :func:`check_server_setup`); the objects the template's :data:`SCRATCH_OWNER` owns are
    handed to :func:`scratch_role` ``(reader)``, which also gets ``ALL`` on the clone's schemas,
    so the agent role may alter, index and trigger on its own clone's tables and nobody else's.

    Args:
        connection: a superuser connection (autocommit) to any database of the server.
        conninfo: the same superuser's connection string for database ``name``.
        name: the clone's name.
        template: the write-task template (:func:`template_name`).
        reader: the campaign's agent role.

    Raises:
        UnsafeServerSetup: ``reader`` is not a member of its scratch role (the corpus was
            loaded by an older version, or never for this reader); nothing is created.
        psycopg.Error: the server refused; a clone made halfway is dropped.
    """
    owner = scratch_role(reader)
    member = connection.execute(
        "SELECT pg_has_role(%s, oid, 'MEMBER') FROM pg_roles WHERE rolname = %s", [reader, owner]
    ).fetchone()
    if member != (True,):
        raise UnsafeServerSetup(
            [
                f"role {reader!r} has no scratch role {owner!r} (which owns its write-task "
                "scratch databases); run ambitab_gym.verify.postgres.load_corpus_databases "
                f"with reader={reader!r} and a superuser connection"
            ]
        )
    _create_database(connection, name, template, readers=(reader,), tag=_SCRATCH_TAG + reader)
    try:
        with psycopg.connect(conninfo, autocommit=True) as target:
            schemas = target.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname <> 'information_schema' "
                "AND nspname NOT LIKE 'pg\\_%'"
            ).fetchall()
            role = sql.Identifier(owner)
            statements = [
                sql.SQL("REASSIGN OWNED BY {} TO {}").format(sql.Identifier(SCRATCH_OWNER), role)
            ]
            statements += [
                sql.SQL("GRANT ALL ON SCHEMA {} TO {}").format(sql.Identifier(schema), role)
                for (schema,) in schemas
            ]
            target.execute(sql.SQL("; ").join(statements))
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        raise


_OWNED_OBJECTS = """
SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW'
                      WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE'
                      ELSE 'TABLE' END,
       c.oid::regclass::text
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND n.nspname <> 'information_schema'
  AND n.nspname NOT LIKE 'pg\\_%'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                  AND d.objid = c.oid AND d.deptype IN ('a', 'i'))
UNION ALL
SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE' WHEN 'a' THEN 'AGGREGATE' ELSE 'FUNCTION' END,
       p.oid::regprocedure::text
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                  AND d.objid = p.oid AND d.deptype = 'e')
UNION ALL
SELECT 'TYPE', t.oid::regtype::text
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE t.typtype IN ('e', 'd', 'r') AND n.nspname <> 'information_schema'
  AND n.nspname NOT LIKE 'pg\\_%'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_type'::regclass
                  AND d.objid = t.oid AND d.deptype = 'e')
"""


def _load_template(
    connection: psycopg.Connection, admin: dict, name: str, source: Path, *, force: bool
) -> None:
    """Build (or keep) ``template_name(name)``: the same script, every object owned by
    :data:`SCRATCH_OWNER`, hardened like the corpus database, marked as a template that nobody
    may connect to. Write tasks clone their scratch databases from it."""
    template = template_name(name)
    tag = f"{_COMMENT_PREFIX}{_script_digest(source)}"
    lock = _lock_database_name(connection, template)
    try:
        if _database_tag(connection, template) == tag and not force:
            return
        staging = template + "_l"
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(staging))
        )
        _create_database(connection, staging, "template0", encoding="UTF8")
        owner = sql.Identifier(SCRATCH_OWNER)
        with psycopg.connect(make_conninfo(**{**admin, "dbname": staging})) as target:
            target.execute(source.read_text("utf-8"))  # trusted script, simple protocol
            schemas = target.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname <> 'information_schema' "
                "AND nspname NOT LIKE 'pg\\_%'"
            ).fetchall()
            for (schema,) in schemas:
                ident = sql.Identifier(schema)
                target.execute(sql.SQL("REVOKE CREATE ON SCHEMA {} FROM PUBLIC").format(ident))
                target.execute(sql.SQL("GRANT ALL ON SCHEMA {} TO {}").format(ident, owner))
            for kind, item in target.execute(_OWNED_OBJECTS).fetchall():
                target.execute(sql.SQL(f"ALTER {kind} {item} OWNER TO {{}}").format(owner))
            _harden(target, (SCRATCH_OWNER,))
            target.commit()
        ident = sql.Identifier(template)
        exists = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [template]
        ).fetchone()
        if exists is not None:
            connection.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE false").format(ident))
            connection.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(ident))
        connection.execute(
            sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(staging), ident)
        )
        connection.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(ident))
        connection.execute(
            sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false").format(ident)
        )
        connection.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(ident, sql.Literal(tag)))
    finally:
        connection.execute("SELECT pg_advisory_unlock(%s)", [lock])


def _grant_database(
    connection: psycopg.Connection, admin: dict, name: str, readers: tuple[str, str]
) -> None:
    """Grant both roles read access to database ``name`` and harden it (idempotent)."""
    ident = sql.Identifier(name)
    connection.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(ident))
    for reader in readers:
        connection.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(ident, sql.Identifier(reader))
        )
    with psycopg.connect(make_conninfo(**{**admin, "dbname": name}), autocommit=True) as target:
        with target.transaction():
            schemas = target.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname <> 'information_schema' "
                "AND nspname NOT LIKE 'pg\\_%'"
            ).fetchall()
            for (schema,) in schemas:
                for reader in readers:
                    role = sql.Identifier(reader)
                    target.execute(
                        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                            sql.Identifier(schema), role
                        )
                    )
                    target.execute(
                        sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
                            sql.Identifier(schema), role
                        )
                    )
            _harden(target, readers)
        problems = isolation_problems(target, role=readers[0], reference=readers[1], tenants=False)
    if problems:
        raise UnsafeServerSetup([f"database {name!r}: {problem}" for problem in problems])


def _harden(connection: psycopg.Connection, readers: tuple[str, str]) -> None:
    """Revoke the functions and views that reach other sessions from PUBLIC and both roles.

    (From the roles too: ``GRANT SELECT ON ALL TABLES IN SCHEMA public`` also grants the views
    of an extension installed there, such as ``pg_stat_statements``.)
    """
    grantees = sql.SQL(", ").join(
        [sql.SQL("PUBLIC"), *(sql.Identifier(reader) for reader in readers)]
    )
    for (function,) in connection.execute(_GUARDED_FUNCTIONS).fetchall():
        connection.execute(
            sql.SQL(f"REVOKE EXECUTE ON FUNCTION {function} FROM {{}}").format(grantees)
        )
    for (relation,) in connection.execute(_GUARDED_RELATIONS).fetchall():
        connection.execute(sql.SQL(f"REVOKE SELECT ON {relation} FROM {{}}").format(grantees))


_ROLE_CHECK = """
SELECT r.rolname::text, r.rolsuper, r.rolcreaterole,
       array(SELECT g.rolname::text FROM pg_roles g
             WHERE g.rolname = ANY(%(watched)s) AND pg_has_role(r.oid, g.oid, 'MEMBER')
             ORDER BY 1),
       coalesce((SELECT pg_has_role(r.oid, x.oid, 'MEMBER') FROM pg_roles x
                 WHERE x.rolname = %(reference)s), false),
       array(SELECT s FROM unnest(coalesce(
                 (SELECT setconfig FROM pg_db_role_setting
                  WHERE setrole = r.oid AND setdatabase = 0), '{}')) s)
FROM pg_roles r WHERE r.rolname = coalesce(%(role)s, session_user::text)
"""


# Every database of the loader's or an engine's making (tagged, or named like a scratch
# database): whether it accepts connections, whether PUBLIC may connect, and which login roles
# (superusers aside, who bypass ACLs) may.
_TENANT_DATABASES = """
SELECT d.datname::text, d.datistemplate, d.datallowconn, t.tag,
       has_database_privilege('public', d.oid, 'CONNECT'),
       array(SELECT r.rolname::text FROM pg_roles r
             WHERE r.rolcanlogin AND NOT r.rolsuper
               AND has_database_privilege(r.oid, d.oid, 'CONNECT') ORDER BY 1)
FROM pg_database d,
     LATERAL (SELECT coalesce(shobj_description(d.oid, 'pg_database'), '') AS tag) t
WHERE starts_with(t.tag, %(prefix)s) OR starts_with(d.datname, %(scratch)s)
ORDER BY 1
"""
# The roles that own scratch tables (the templates' owner, each campaign's scratch role), with
# the login roles (superusers aside) that are members, directly or not.
_TENANT_OWNERS = """
SELECT g.rolname::text, t.tag,
       array(SELECT r.rolname::text FROM pg_roles r
             WHERE r.rolcanlogin AND NOT r.rolsuper AND r.oid <> g.oid
               AND pg_has_role(r.oid, g.oid, 'MEMBER') ORDER BY 1)
FROM pg_roles g,
     LATERAL (SELECT coalesce(shobj_description(g.oid, 'pg_authid'), '') AS tag) t
WHERE g.rolname = %(owner)s OR starts_with(t.tag, %(owner_tag)s)
ORDER BY 1
"""


def _tenant_problems(connection: psycopg.Connection) -> list[str]:
    """What would let one campaign (an agent role with its own login) reach another campaign's
    databases, on the whole server: an ``ambitab`` database (corpus database, write-task
    template, scratch database) that ``PUBLIC`` may connect to, a template that accepts
    connections, a scratch database that a login role other than its campaign's may connect to,
    a login role that is a member of :data:`SCRATCH_OWNER` or of another campaign's
    :func:`scratch_role`. Readable by any role (``pg_database``, ``pg_roles`` and comments are
    public catalogs)."""
    problems = []
    rows = connection.execute(
        _TENANT_DATABASES, {"prefix": _COMMENT_PREFIX, "scratch": SCRATCH_PREFIX}
    ).fetchall()
    for name, template, allowed, tag, public, logins in rows:
        scratch = tag.startswith(_SCRATCH_TAG) or name.startswith(SCRATCH_PREFIX)
        if template and allowed:
            problems.append(
                f"write-task template database {name!r} accepts connections, so a role that may "
                "connect could change what every campaign's write tasks are verified against; "
                f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false"
            )
        if not allowed:
            continue
        if public:
            fix = f"REVOKE CONNECT, TEMPORARY ON DATABASE {name} FROM PUBLIC"
            if scratch:
                fix = f"drop it (DROP DATABASE {name} WITH (FORCE)), or {fix}"
            else:
                fix += " (or run load_corpus_databases with a superuser connection)"
            problems.append(
                f"database {name!r} accepts connections from every role (PUBLIC has CONNECT), "
                f"so any campaign's login could connect to it; {fix}"
            )
            continue
        if tag.startswith(_SCRATCH_TAG):
            owner = tag[len(_SCRATCH_TAG) :]
            others = [login for login in logins if login != owner]
            if others:
                listed = ", ".join(others)
                problems.append(
                    f"scratch database {name!r} of campaign role {owner!r} accepts connections "
                    f"from {listed}, another campaign's role; REVOKE CONNECT, TEMPORARY ON "
                    f"DATABASE {name} FROM {listed}"
                )
    rows = connection.execute(
        _TENANT_OWNERS, {"owner": SCRATCH_OWNER, "owner_tag": _SCRATCH_OWNER_TAG}
    ).fetchall()
    for group, tag, members in rows:
        owner = tag[len(_SCRATCH_OWNER_TAG) :] if tag.startswith(_SCRATCH_OWNER_TAG) else None
        others = [member for member in members if member != owner]
        if not others:
            continue
        listed = ", ".join(others)
        whose = (
            f"which owns campaign role {owner!r}'s scratch tables"
            if owner is not None and group != SCRATCH_OWNER
            else "which owns the write-task templates' tables"
        )
        problems.append(
            f"role(s) {listed} are members of {group!r}, {whose}, so they would own them in "
            f"every scratch database they reach; REVOKE {group} FROM {listed} (load_corpus_"
            "databases does this for its reader)"
        )
    return problems


def isolation_problems(
    connection: psycopg.Connection,
    *,
    role: str | None = None,
    reference: str | None = None,
    tenants: bool = True,
) -> list[str]:
    """What would let agent role ``role`` disturb or observe other sessions in this database,
    or (``tenants``) reach another campaign's databases anywhere on the server.

    Checks, in the connection's database: the role is no superuser, has no ``CREATEROLE``, is
    no member of :data:`DANGEROUS_ROLES`, ``pg_signal_backend``, ``pg_read_all_stats``,
    ``pg_stat_scan_tables``, ``pg_monitor`` or of the ``reference`` role; it cannot execute
    ``pg_cancel_backend``/``pg_terminate_backend``, any ``pg_stat_*`` function,
    ``pg_lock_status`` or ``pg_blocking_pids``; it cannot read any ``pg_stat_*``/``pg_statio_*``
    view (``pg_stat_statements`` included, wherever it is installed) or ``pg_locks``; it cannot
    call a ``SECURITY DEFINER`` function outside the system schemas; and its role settings keep
    agent-sized messages out of the server log. On the whole server (``tenants``): no database
    of the loader's or an engine's making (a corpus database, a write-task template, a scratch
    database) accepts connections from ``PUBLIC``, no template accepts connections at all, no
    scratch database accepts them from a login role other than its campaign's agent role, and
    no login role is a member of :data:`SCRATCH_OWNER` or of another campaign's
    :func:`scratch_role`.

    Args:
        connection: any connection to the database to check (the agent's own, or an admin's).
        role: the agent role (default: the connection's ``session_user``).
        reference: the role that runs reference queries (not checked when None).
        tenants: also run the server-wide checks between campaigns.

    Returns:
        One line per problem, each saying what to change; empty when the setup is safe.
    """
    who = {"role": role, "reference": reference, "watched": list(DANGEROUS_ROLES + OBSERVER_ROLES)}
    row = connection.execute(_ROLE_CHECK, who).fetchone()
    if row is None:
        return [f"role {role!r} does not exist; run load_corpus_databases to create it"]
    name, superuser, createrole, memberships, in_reference, config = row
    fix = (
        "run ambitab_gym.verify.postgres.load_corpus_databases with a superuser connection "
        "to harden the database"
    )
    problems = []
    if superuser:
        problems.append(f"role {name!r} is a superuser; connect as an unprivileged role")
    if createrole:
        problems.append(f"role {name!r} has CREATEROLE; ALTER ROLE {name} NOCREATEROLE")
    for member_of in memberships:
        problems.append(
            f"role {name!r} is a member of {member_of} (it could signal other backends, read "
            f"their query text or server files); REVOKE {member_of} FROM {name}"
        )
    if reference is not None and (name == reference or in_reference):
        problems.append(
            f"role {name!r} is or belongs to {reference!r}, the role that runs the reference "
            "queries, so it could see and cancel them; give agents a role of their own"
        )
    # (No query parameters here: the LIKE patterns hold '%'.)
    who_literal = sql.Literal(name).as_string(connection)
    granted = connection.execute(
        f"SELECT f FROM ({_GUARDED_FUNCTIONS}) q(f) "
        f"WHERE has_function_privilege({who_literal}, f, 'EXECUTE') UNION ALL "
        f"SELECT r FROM ({_GUARDED_RELATIONS}) q(r) "
        f"WHERE has_table_privilege({who_literal}, r, 'SELECT')"
    ).fetchall()
    signals = [item for (item,) in granted if item.split("(")[0] in _SIGNAL_FUNCTIONS]
    if signals:
        problems.append(
            f"role {name!r} may call {', '.join(signals)}, so it could cancel or terminate "
            f"other sessions of its own role; {fix} (or REVOKE EXECUTE ON FUNCTION ... FROM "
            "PUBLIC in this database)"
        )
    observers = [item for (item,) in granted if item.split("(")[0] not in _SIGNAL_FUNCTIONS]
    if observers:
        more = f" and {len(observers) - 6} more" if len(observers) > 6 else ""
        problems.append(
            f"role {name!r} may use {', '.join(observers[:6])}{more}, which show other "
            f"sessions' query text, locks or table statistics; {fix} (or REVOKE EXECUTE/SELECT "
            "on them FROM PUBLIC in this database)"
        )
    definers = connection.execute(
        "SELECT p.oid::regprocedure::text FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        f"AND has_function_privilege({who_literal}, p.oid, 'EXECUTE') ORDER BY 1"
    ).fetchall()
    if definers:
        listed = ", ".join(item for (item,) in definers[:6])
        problems.append(
            f"role {name!r} may call SECURITY DEFINER functions ({listed}), which run with their "
            "owner's privileges; REVOKE EXECUTE on them FROM PUBLIC (and the role)"
        )
    settings = dict(item.split("=", 1) for item in config if "=" in item)
    for setting in ("log_min_messages", "log_min_error_statement"):
        if settings.get(setting, "").strip("'\"").lower() not in _QUIET_LEVELS:
            problems.append(
                f"role {name!r} would write agent-sized error messages and statements to the "
                f"server log; ALTER ROLE {name} SET {setting} = 'fatal' (or {fix})"
            )
    if tenants:
        problems += _tenant_problems(connection)
    return problems


def check_server_setup(dsn: str, *, role: str | None = None, reference: str | None = None) -> None:
    """Refuse an unsafe setup: raise :class:`UnsafeServerSetup` with what to fix.

    Checks the role in the DSN's database and, on the whole server, that no campaign can reach
    another's databases (:func:`isolation_problems`): each problem names the database or role
    and the statement that fixes it.

    Args:
        dsn: a connection to a corpus database (as the agent role, or as an admin with
            ``role`` naming the agent role).
        role: the agent role (default: the DSN's role).
        reference: the role that runs reference queries (default: :func:`reference_role` of
            the agent role).
    """
    with psycopg.connect(dsn, autocommit=True) as connection:
        if role is None:
            role = connection.execute("SELECT session_user::text").fetchone()[0]
        problems = isolation_problems(
            connection, role=role, reference=reference or reference_role(role)
        )
    if problems:
        raise UnsafeServerSetup(problems)
