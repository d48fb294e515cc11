"""The PostgreSQL engine (psycopg 3), sandboxed for untrusted SQL.

Every submitted query runs on a pooled connection inside ``BEGIN READ ONLY`` with
``statement_timeout`` and ``lock_timeout``; it is declared as a server-side cursor through the
extended query protocol, so the server admits exactly one ``SELECT``/``VALUES`` statement (no
second statement, no ``SET``, ``COPY``, DDL or data-modifying ``WITH``), and rows are fetched in
bounded chunks. The transaction is rolled back after every query. The engine refuses to connect
as a role that could escape a read-only transaction (a superuser, or a member of
``pg_read_server_files``, ``pg_write_server_files`` or ``pg_execute_server_program``):
:func:`load_corpus_databases` creates a SELECT-only role for the verifier.

* :class:`PostgresEngine` - one database on a server, through a small connection pool.
* :func:`load_corpus_databases`, :func:`database_name` - re-exported from
  :mod:`ambitab_gym.verify.postgres_loader`.

Importing this module registers the ``postgres`` engine kind: the opener reads the DSN from
``corpus.options["dsn"]`` (and, when ``corpus.options["load_dsn"]`` names a privileged
connection, loads the corpus's databases through it first).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ambitab_gym.corpora.corpus import Corpus, register_engine
from ambitab_gym.verify.base import Limits, QueryError, QueryResult
from ambitab_gym.verify.postgres_loader import (
    DANGEROUS_ROLES,
    database_name,
    load_corpus_databases,
)

__all__ = [
    "MAX_RESULT_BYTES",
    "PostgresEngine",
    "database_name",
    "load_corpus_databases",
]

#: A result whose text size exceeds this fails with ``too_large``.
MAX_RESULT_BYTES = 64 * 2**20

_CURSOR = "ambitab_submission"
_DECLARE = f"DECLARE {_CURSOR} NO SCROLL CURSOR FOR "
_BEGIN = (
    "BEGIN READ ONLY; SET LOCAL statement_timeout = {ms}; SET LOCAL lock_timeout = {ms}; "
    "SET LOCAL idle_in_transaction_session_timeout = {idle_ms}; "
    "SET LOCAL cursor_tuple_fraction = 1.0"
)
_FIRST_CHUNK = 1_000
_MAX_CHUNK = 10_000
_CHUNK_BYTES = 8 * 2**20
_PRIVILEGE_CHECK = """
SELECT session_user,
       coalesce(bool_or(r.rolsuper), false),
       array_remove(array_agg(r.rolname::text) FILTER (WHERE r.rolname = ANY(%s)), NULL)
FROM pg_roles r WHERE pg_has_role(session_user, r.oid, 'MEMBER')
"""
_LEADING_NOISE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.S)
# First words of statements that are not queries (PostgreSQL's and other dialects' commands).
_COMMAND_WORDS = (
    "ABORT ALTER ANALYZE ATTACH BEGIN CALL CHECKPOINT CLOSE CLUSTER COMMENT COMMIT COPY "
    "CREATE DEALLOCATE DECLARE DELETE DETACH DISCARD DO DROP END EXECUTE EXPLAIN EXPORT "
    "FETCH GRANT IMPORT INSERT INSTALL LISTEN LOAD LOCK MERGE MOVE NOTIFY PRAGMA PREPARE "
    "REASSIGN REFRESH REINDEX RELEASE REPLACE RESET REVOKE ROLLBACK SAVEPOINT SECURITY SET "
    "SHOW START TRUNCATE UNLISTEN UPDATE UPSERT USE VACUUM"
)
_COMMANDS = frozenset(_COMMAND_WORDS.split())


class _Pool:
    """A small thread-safe pool of configured connections (created on demand)."""

    def __init__(self, conninfo: str, size: int, setup) -> None:
        self._conninfo = conninfo
        self._size = size
        self._setup = setup
        self._idle: list[psycopg.Connection] = []
        self._open = 0
        self._cond = threading.Condition()
        self._closed = False

    def get(self, timeout_s: float) -> psycopg.Connection:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                if self._closed:
                    raise QueryError("engine", "the PostgreSQL engine is closed")
                if self._idle:
                    return self._idle.pop()
                if self._open < self._size:
                    self._open += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise QueryError("timeout", "no PostgreSQL connection became free in time")
                self._cond.wait(remaining)
        try:
            connection = psycopg.connect(self._conninfo, autocommit=True, prepare_threshold=None)
        except BaseException:
            self._forget()
            raise
        try:
            self._setup(connection)
        except BaseException:
            connection.close()
            self._forget()
            raise
        return connection

    def put(self, connection: psycopg.Connection, *, broken: bool = False) -> None:
        if broken or connection.closed or connection.info.transaction_status != 0:
            with contextlib.suppress(Exception):
                connection.close()
            self._forget()
            return
        with self._cond:
            if self._closed:
                connection.close()
                self._open -= 1
            else:
                self._idle.append(connection)
            self._cond.notify()

    def _forget(self) -> None:
        with self._cond:
            self._open -= 1
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._cond.notify_all()
        for connection in idle:
            with contextlib.suppress(Exception):
                connection.close()


class PostgresEngine:
    """A sandboxed connection pool to one PostgreSQL database.

    Args:
        dsn: a libpq connection string or URI for an unprivileged role (see the module doc).
        dbname: the database to use (overrides the DSN's).
        limits: default limits for :meth:`execute`.
        pool_size: at most this many connections are open at once.
        connect_timeout_s: libpq's ``connect_timeout``.

    Example:
        >>> engine = PostgresEngine("host=127.0.0.1 port=1 user=nobody", dbname="demo")
        >>> engine.execute("SELECT 1")
        Traceback (most recent call last):
        ...
        ambitab_gym.verify.base.QueryError: engine: cannot connect to PostgreSQL database 'demo': ...
        >>> engine.close()
    """

    name = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        dbname: str | None = None,
        limits: Limits | None = None,
        pool_size: int = 4,
        connect_timeout_s: float = 10.0,
    ) -> None:
        params = conninfo_to_dict(dsn)
        if dbname is not None:
            params["dbname"] = dbname
        params.setdefault("connect_timeout", str(max(1, round(connect_timeout_s))))
        params.setdefault("application_name", "ambitab-gym-verifier")
        params["options"] = (
            str(params.get("options", "")) + " -c default_transaction_read_only=on"
        ).strip()
        self.dbname = str(params.get("dbname", ""))
        self.limits = limits or Limits()
        self._connect_timeout_s = connect_timeout_s
        self._pool = _Pool(make_conninfo(**params), pool_size, self._check_role)

    @staticmethod
    def _check_role(connection: psycopg.Connection) -> None:
        row = connection.execute(_PRIVILEGE_CHECK, [list(DANGEROUS_ROLES)]).fetchone()
        user, superuser, dangerous = row
        if superuser or dangerous:
            why = "a superuser" if superuser else f"a member of {', '.join(dangerous)}"
            raise QueryError(
                "engine",
                f"refusing to run submitted SQL as role {user!r}, which is {why} and could read "
                "or write server files; connect as the SELECT-only role that "
                "ambitab_gym.verify.postgres.load_corpus_databases creates",
            )

    def _connection(self) -> psycopg.Connection:
        try:
            return self._pool.get(self._connect_timeout_s + 5.0)
        except psycopg.Error as error:
            raise QueryError(
                "engine",
                f"cannot connect to PostgreSQL database {self.dbname!r}: {_first_line(error)}",
            ) from None

    def execute(self, sql_text: str, *, limits: Limits | None = None) -> QueryResult:
        """Run one read-only ``SELECT`` (or ``VALUES``) statement and return its result.

        Raises:
            QueryError: with category ``rejected``, ``syntax``, ``runtime``, ``timeout``,
                ``too_many_rows``, ``too_large`` or ``engine``.
        """
        limits = limits or self.limits
        if not isinstance(sql_text, str) or not sql_text.strip():
            raise QueryError("rejected", "empty SQL")
        if len(sql_text) > limits.max_sql_length:
            raise QueryError(
                "too_large", f"SQL text longer than {limits.max_sql_length} characters"
            )
        if "\x00" in sql_text:
            raise QueryError("syntax", "SQL text contains a NUL character")
        for attempt in range(2):
            connection = self._connection()
            broken = False
            try:
                return self._run(connection, sql_text, limits)
            except QueryError:
                raise
            except psycopg.Error as error:
                broken = _connection_lost(error)
                if broken and attempt == 0:
                    # A pooled connection that died while idle (server restart, terminated
                    # backend): try once more on a fresh one.
                    continue
                raise _classify(error, sql_text, limits) from None
            finally:
                broken = broken or not self._reset(connection)
                self._pool.put(connection, broken=broken)
        raise AssertionError("unreachable")  # pragma: no cover

    def _run(self, connection: psycopg.Connection, sql_text: str, limits: Limits) -> QueryResult:
        deadline = time.monotonic() + limits.timeout_s
        budget_ms = max(1, int(limits.timeout_s * 1000))
        chunk_rows = min(_FIRST_CHUNK, limits.max_rows + 1)
        connection.execute(_BEGIN.format(ms=budget_ms, idle_ms=budget_ms + 10_000))
        with connection.cursor() as cursor:
            # binary=True forces the extended protocol, so the server parses exactly one
            # statement, and DECLARE ... CURSOR FOR admits only SELECT/VALUES/TABLE queries.
            # (Plain round trips: psycopg's pipeline mode costs more than it saves here.)
            cursor.execute(_DECLARE + sql_text, binary=True)
            cursor.execute(f"FETCH FORWARD {chunk_rows} FROM {_CURSOR}")
            columns = tuple(c.name for c in cursor.description or ())
            rows: list[tuple] = []
            size = 0
            while True:
                chunk = cursor.fetchall()
                rows.extend(chunk)
                if len(rows) > limits.max_rows:
                    raise QueryError(
                        "too_many_rows", f"result has more than {limits.max_rows} rows"
                    )
                row_bytes = _row_bytes(cursor.pgresult)
                size += row_bytes * len(chunk)
                if size > MAX_RESULT_BYTES:
                    raise QueryError(
                        "too_large", f"the result is larger than {MAX_RESULT_BYTES // 2**20} MiB"
                    )
                if len(chunk) < chunk_rows:
                    break
                # Size the next chunk so that it stays within a few MiB of client memory.
                chunk_rows = max(1, min(_MAX_CHUNK, _CHUNK_BYTES // max(row_bytes, 1)))
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0:
                    raise QueryError("timeout", f"query ran longer than {limits.timeout_s:g} s")
                cursor.execute(
                    f"SET LOCAL statement_timeout = {remaining_ms}; "
                    f"FETCH FORWARD {chunk_rows} FROM {_CURSOR}"
                )
                cursor.nextset()
        return QueryResult(columns, rows)

    @staticmethod
    def _reset(connection: psycopg.Connection) -> bool:
        """Roll back and drop session-level leftovers; False when the connection is unusable."""
        if connection.closed:
            return False
        try:
            # One round trip: end the transaction, then drop session-level advisory locks
            # (the only state a read-only SELECT can leave behind on a pooled connection).
            connection.execute("ROLLBACK; SELECT pg_advisory_unlock_all()")
            return connection.info.transaction_status == 0
        except psycopg.Error:
            return False

    def schema_text(self) -> str:
        """``CREATE TABLE``/``CREATE VIEW`` statements of every table the role can read.

        Built from the system catalogs (column types as ``format_type`` prints them, ``NOT
        NULL``, primary, unique, foreign-key and check constraints), in creation order.
        """
        limits = Limits(timeout_s=30.0, max_rows=1_000_000)
        tables = self.execute(_SCHEMA_TABLES, limits=limits).rows
        columns = self.execute(_SCHEMA_COLUMNS, limits=limits).rows
        constraints = self.execute(_SCHEMA_CONSTRAINTS, limits=limits).rows
        by_table: dict[int, list[str]] = {}
        for oid, name, type_name, not_null in columns:
            line = f"{_ident(name)} {type_name}" + (" NOT NULL" if not_null else "")
            by_table.setdefault(oid, []).append(line)
        for oid, definition in constraints:
            by_table.setdefault(oid, []).append(definition)
        statements = []
        for oid, schema, name, kind, view_sql in tables:
            qualified = _ident(name) if schema == "public" else f"{_ident(schema)}.{_ident(name)}"
            if kind in ("v", "m"):
                keyword = "VIEW" if kind == "v" else "MATERIALIZED VIEW"
                statements.append(
                    f"CREATE {keyword} {qualified} AS\n{view_sql.strip().rstrip(';')}"
                )
            else:
                body = ",\n  ".join(by_table.get(oid, []))
                statements.append(f"CREATE TABLE {qualified} (\n  {body}\n)")
        return ";\n".join(statements) + ";" if statements else ""

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()


_SCHEMA_TABLES = """
SELECT c.oid::int8, n.nspname::text, c.relname::text, c.relkind::text,
       CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid) END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm') AND n.nspname <> 'information_schema'
  AND n.nspname NOT LIKE 'pg\\_%' AND has_table_privilege(c.oid, 'SELECT')
ORDER BY c.oid
"""
_SCHEMA_COLUMNS = """
SELECT a.attrelid::int8, a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'
ORDER BY a.attrelid, a.attnum
"""
_SCHEMA_CONSTRAINTS = """
SELECT conrelid::int8, pg_get_constraintdef(oid)
FROM pg_constraint WHERE contype IN ('p', 'u', 'f', 'c') AND conrelid <> 0
ORDER BY conrelid, CASE contype WHEN 'p' THEN 0 WHEN 'u' THEN 1 WHEN 'f' THEN 2 ELSE 3 END, oid
"""


def _row_bytes(pgresult) -> int:
    """The average wire size of a row of a fetched chunk, from up to 8 sampled rows."""
    if pgresult is None or not pgresult.ntuples:
        return 0
    count = pgresult.ntuples
    sample = sorted({0, count - 1, *range(0, count, max(1, count // 8))})[:8]
    total = sum(
        len(pgresult.get_value(r, c) or b"") for r in sample for c in range(pgresult.nfields)
    )
    return total // len(sample) + 8 * pgresult.nfields


def _connection_lost(error: psycopg.Error) -> bool:
    return error.sqlstate is None or error.sqlstate.startswith(("08", "57P"))


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _ident(name: str) -> str:
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", name):
        return name
    return '"' + name.replace('"', '""') + '"'


def _classify(error: psycopg.Error, sql_text: str, limits: Limits) -> QueryError:
    diag = getattr(error, "diag", None)
    primary = (diag.message_primary if diag is not None else None) or str(error)
    message = primary.strip()
    if isinstance(error, errors.QueryCanceled) and "timeout" not in message:
        return QueryError("runtime", f"the query was cancelled ({message})")
    if isinstance(error, (errors.QueryCanceled, errors.LockNotAvailable)):
        return QueryError("timeout", f"query ran longer than {limits.timeout_s:g} s")
    if isinstance(error, (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction)):
        return QueryError(
            "rejected", f"only read-only single SELECT statements are allowed ({message})"
        )
    if "multiple commands" in message:
        return QueryError("rejected", "submit exactly one SQL statement")
    if "data-modifying" in message or "DECLARE CURSOR" in message:
        return QueryError(
            "rejected", f"only read-only single SELECT statements are allowed ({message})"
        )
    if isinstance(error, errors.SyntaxError):
        # DECLARE ... CURSOR FOR admits queries only: another command fails on its first word.
        position = diag.statement_position if diag is not None else None
        offset = _LEADING_NOISE.match(sql_text).end()
        first_word = sql_text[offset:].split(None, 1)[0].upper() if sql_text[offset:] else ""
        if (
            position is not None
            and int(position) == len(_DECLARE) + offset + 1
            and first_word in _COMMANDS
        ):
            return QueryError(
                "rejected",
                f"only read-only single SELECT statements are allowed (got {first_word})",
            )
        return QueryError("syntax", message)
    if isinstance(
        error,
        (
            errors.ProgramLimitExceeded,
            errors.OutOfMemory,
            errors.DiskFull,
            errors.ConfigurationLimitExceeded,
        ),
    ):
        return QueryError("too_large", message)
    if _connection_lost(error):
        return QueryError("engine", f"the PostgreSQL connection failed: {message}")
    return QueryError("runtime", message)


def _open_postgres(corpus: Corpus, database: str, limits: Limits | None) -> PostgresEngine:
    dsn = corpus.options.get("dsn")
    if not dsn:
        raise ValueError(
            "the postgres engine needs a server: pass engine_options={'dsn': 'postgresql://...'} "
            "(a SELECT-only role; ambitab_gym.verify.postgres.load_corpus_databases loads the "
            "corpus and returns such a DSN)"
        )
    load_dsn = corpus.options.get("load_dsn")
    if load_dsn and not corpus.options.get("_loaded"):
        reader = conninfo_to_dict(dsn).get("user") or "ambitab_reader"
        load_corpus_databases(corpus, load_dsn, reader=str(reader))
        corpus.options["_loaded"] = True
    return PostgresEngine(dsn, dbname=database_name(corpus.name, database), limits=limits)


register_engine("postgres", _open_postgres)
