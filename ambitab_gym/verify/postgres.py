"""The PostgreSQL engine (psycopg 3), sandboxed for untrusted SQL.

Every submitted query runs on a pooled connection inside ``BEGIN READ ONLY`` with
``statement_timeout`` and ``lock_timeout``; it is sent through the extended query protocol as
the subquery of the engine's wrapper (``SELECT * FROM (<query>) ... LIMIT max_rows + 1``), so
the server admits exactly one ``SELECT``/``VALUES``/``TABLE``/``WITH`` query (no second
statement, no ``SET``, ``COPY``, DDL or data-modifying ``WITH``), measures every row before
sending it and stops after ``max_rows + 1`` rows. Rows arrive in chunks of at most 64 (libpq's
chunked-rows mode) that the row guard keeps to a small share of ``Limits.max_result_bytes``
(a larger row makes the query run again one row at a time), each chunk measured as it arrives,
so a result over the cap fails before much more than that is in memory. The whole verification
is one libpq pipeline written at once (one round trip): ``BEGIN``, the query, a flush request
(the server sends the query's results at once), the reset, ``ROLLBACK`` and a sync point, each
its own extended-protocol statement (the engine's own three prepared once per connection). The
server runs the reset and ``ROLLBACK`` while the client loads and compares the rows; their
results are read and checked before the connection's next query is sent (or when the pool
hands the connection to anything else): the verdict does not wait for them.
The client waits for results in ``poll`` (the GIL released) and stops waiting at the time limit
plus a grace period: the connection of a query stuck in a built-in function that never checks
for interrupts is dropped. After every query the transaction is rolled back, advisory locks
are released and the random seed is replaced by a fresh one, so no session state reaches the
next query (when the query failed, the pipeline skipped the reset: it then takes a round trip of
its own).

Submissions run as the *agent* role of the DSN; trusted reference queries
(:meth:`PostgresEngine.execute_reference`) run as a separate *reference* role, so an agent
cannot see or signal them. The engine refuses to connect as an agent role that could escape a
read-only transaction (a superuser, or a member of ``pg_read_server_files``,
``pg_write_server_files`` or ``pg_execute_server_program``) or reach other sessions
(:func:`~ambitab_gym.verify.postgres_loader.isolation_problems`):
:func:`load_corpus_databases` creates both roles and hardens the databases.

* :class:`PostgresEngine` - one database on a server, through a small connection pool.
* :func:`load_corpus_databases`, :func:`database_name`, :func:`check_server_setup`,
  :func:`reference_role` - re-exported from :mod:`ambitab_gym.verify.postgres_loader`.

Importing this module registers the ``postgres`` engine kind: the opener reads the DSN from
``corpus.options["dsn"]`` (and the reference role's from ``corpus.options["reference_dsn"]``,
default: the same DSN with user :func:`reference_role`); when ``corpus.options["load_dsn"]``
names a superuser connection, it loads the corpus's databases through it first.
"""

from __future__ import annotations

import array
import contextlib
import functools
import hashlib
import itertools
import os
import queue
import re
import secrets
import select
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING

import psycopg
from psycopg import errors, postgres, pq, sql
from psycopg.adapt import Transformer
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ambitab_gym.errors import UsageError
from ambitab_gym.verify.base import Limits, QueryError, QueryResult, process_alive
from ambitab_gym.verify.postgres_loader import (
    SCRATCH_PREFIX,
    UnsafeServerSetup,
    check_server_setup,
    create_scratch_database,
    database_name,
    isolation_problems,
    load_corpus_databases,
    reference_role,
    template_name,
)
from ambitab_gym.verify.taskrun import first_keyword
from ambitab_gym.verify.worker import WorkerSlot, WorkerStartError
from ambitab_gym.vocabulary import QueryErrorCategory

if TYPE_CHECKING:
    from ambitab_gym.corpora.corpus import Corpus

__all__ = [
    "PostgresEngine",
    "check_server_setup",
    "database_name",
    "load_corpus_databases",
    "reference_role",
]

# Every query runs wrapped, so that the server measures each row before sending it: a row
# larger than the result cap raises there instead of reaching the driver whole, and the server
# stops after max_rows + 1 rows (LIMIT). The wrapped statement must be one statement whose
# parentheses balance, so it cannot close the wrapper's; a subquery admits queries only
# (SELECT, VALUES, TABLE, WITH without data-modifying parts).
#
# The row guard casts what the row leaves of the cap to the built-in domain
# information_schema.cardinal_number (CHECK (VALUE >= 0), usable by every role): a larger row
# fails the domain's check, with the size computed once and no CASE (about 0.013 ms less
# server time per query than the CASE form). Where the domain is not usable as expected for
# the connection's role (_domain_guard_usable, checked when it connects), the CASE form: a
# cast of a row-dependent text to int fails with the marker below (concat() rather than ||:
# one candidate to resolve, about 10 us less parse analysis per query).
_WRAP_HEAD = "SELECT * FROM (\n"
_WRAP_TAIL = (
    "\n) AS ambitab_q WHERE ({cap} - pg_column_size(ambitab_q.*))"
    "::information_schema.cardinal_number IS NOT NULL LIMIT {limit}"
)
_WRAP_TAIL_CASE = (
    "\n) AS ambitab_q WHERE CASE WHEN pg_column_size(ambitab_q.*) <= {cap} THEN true "
    "ELSE pg_catalog.concat('{marker} ', pg_column_size(ambitab_q.*))::int > 0 END LIMIT {limit}"
)
_ROW_MARKER = "ambitab: a result row is larger than the cap"
# The domain's check (its failure is the domain row guard's refusal).
_GUARD_DOMAIN = ("information_schema", "cardinal_number", "cardinal_number_domain_check")
# (the domain is over int4: a cap beyond it is no cap on a row, which is at most 1 GB)
_MAX_DOMAIN_CAP = 2**31 - 1
# The limits are session settings, set once per connection (and again when they change):
# everything a query changes happens inside its transaction, which is always rolled back, so
# they hold for every query on the connection (sent in a pipeline segment of their own).
_SETTINGS = (
    "SET statement_timeout = {ms}",
    "SET lock_timeout = {ms}",
    "SET idle_in_transaction_session_timeout = {idle_ms}",
)
# After every query: end the transaction (which also undoes set_config), then drop
# session-level advisory locks and replace the random seed a query may have set with setseed()
# by an unpredictable one: the session state a read-only SELECT can leave behind on a pooled
# connection (DISCARD ALL keeps the seed).
_RESET = "SELECT pg_catalog.pg_advisory_unlock_all(), pg_catalog.setseed({seed!r})"
# The engine's own fixed statements, prepared once per connection (a submission cannot
# DEALLOCATE them: it runs wrapped in a SELECT): the server skips parsing and planning them on
# every query (about 0.03 ms per verification).
_BEGIN_NAME = b"ambitab_begin"
_RESET_NAME = b"ambitab_reset"
_ROLLBACK_NAME = b"ambitab_rollback"
_PREPARED = (
    (_BEGIN_NAME, b"BEGIN READ ONLY"),
    (
        _RESET_NAME,
        b"SELECT pg_catalog.pg_advisory_unlock_all(), pg_catalog.setseed($1::float8)",
    ),
    (_ROLLBACK_NAME, b"ROLLBACK"),
)
# Rows arrive in chunks of up to _CHUNK_ROWS rows (libpq's chunked-rows mode) while the
# server-side guard holds each row to cap // (_CHUNK_ROWS * _CHUNK_SHARE), so one chunk (held
# twice while it is loaded) is at most 1/_CHUNK_SHARE of the cap before it can be measured; a
# larger row makes the query run again one row at a time with the guard at the cap (single-row
# mode), which decides. Below _MIN_CHUNK_ROW_CAP bytes per row (a small cap), rows come singly
# from the start.
_CHUNK_ROWS = 64
_CHUNK_SHARE = 16
_MIN_CHUNK_ROW_CAP = 4096
# How long the end of a verification's pipeline (the reset, ROLLBACK, the sync; the server
# runs them right after sending the rows) may take to arrive when the connection is next used;
# past it the connection is dropped.
_TAIL_WAIT_S = 10.0
# Bounds of the statement guard's answers an engine keeps (per SQL text).
_CHECKED_TEXTS = 4096
_CHECKED_CHARS = 4_000_000
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
# Scratch databases of write tasks: ambitab_s_<host>_<pid>_<random>.
_SCRATCH_PREFIX = SCRATCH_PREFIX
_HOST_TAG = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]


# -- the statement guard's lexer ----------------------------------------------------------------
#
# The same lexing as taskrun's split_statements / paren_depths (PostgreSQL dialect: nested block
# comments, E'...' escapes, $tag$ bodies), jumping from one special character to the next with a
# regular expression instead of visiting every character in Python: 0.25 ms of a 250-character
# query's verification was spent there. tests/test_engine_postgres.py checks both agree.

_LEX_SPECIAL = re.compile(r"--|/\*|['\"`$]")
_LEX_STRING = re.compile(r"'(?:[^']|'')*'?")
_LEX_ESCAPED_STRING = re.compile(r"'(?:\\.?|[^'\\]|'')*'?", re.S)
_LEX_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")
_LEX_PARENS = re.compile(r"[()]")
_CODE_NOISE = re.compile(r"[\s;]*")
_WORD = re.compile(r"[A-Za-z_]+")


def _end_of_comment(sql: str, i: int) -> int:
    """Index after the (nested) block comment that starts at ``i`` (``len(sql)`` if open)."""
    depth, n = 0, len(sql)
    while i < n:
        opening, closing = sql.find("/*", i), sql.find("*/", i)
        if closing < 0:
            return n
        if 0 <= opening < closing:
            depth, i = depth + 1, opening + 2
        else:
            depth, i = depth - 1, closing + 2
            if depth == 0:
                return i
    return n


def _tokens(sql: str, quotes: str) -> list[tuple[str, int, int]]:
    """``("code" | "solid" | "comment", start, end)`` spans covering ``sql``: solid spans are
    string literals, quoted names (``quotes``) and ``$tag$`` bodies."""
    spans: list[tuple[str, int, int]] = []
    n = len(sql)
    code_start = search = 0
    while True:
        match = _LEX_SPECIAL.search(sql, search)
        if match is None:
            break
        j = match.start()
        c = sql[j]
        if c == "-":
            end = sql.find("\n", j)
            end, kind = (n if end < 0 else end + 1), "comment"
        elif c == "/":
            end, kind = _end_of_comment(sql, j), "comment"
        elif c == "'":
            escaped = (
                j > 0
                and sql[j - 1] in "eE"
                and not (j > 1 and (sql[j - 2].isalnum() or sql[j - 2] in "_$"))
            )
            found = (_LEX_ESCAPED_STRING if escaped else _LEX_STRING).match(sql, j)
            end, kind = found.end() if found else n, "solid"  # type: ignore[union-attr]
        elif c == "$":
            dollar = (
                None
                if j > 0 and (sql[j - 1].isalnum() or sql[j - 1] in "_$")
                else _LEX_DOLLAR.match(sql, j)
            )
            if dollar is None:
                search = j + 1  # a code character
                continue
            close = sql.find(dollar.group(0), dollar.end())
            end, kind = (n if close < 0 else close + len(dollar.group(0))), "solid"
        elif c in quotes:
            close = sql.find(c, j + 1)
            end, kind = (n if close < 0 else close + 1), "solid"
        else:
            search = j + 1  # a quote character this lexing does not know: code
            continue
        if code_start < j:
            spans.append(("code", code_start, j))
        spans.append((kind, j, min(end, n)))
        code_start = search = min(end, n)
        if search >= n:
            break
    if code_start < n:
        spans.append(("code", code_start, n))
    return spans


def split_one_statement(sql: str, tokens: list[tuple[str, int, int]] | None = None) -> list[str]:
    """Exactly :func:`~ambitab_gym.verify.taskrun.split_statements` (PostgreSQL dialect).

    ``tokens``: ``_tokens(sql, '"`')`` when the caller has them already.

    >>> split_one_statement("SELECT ';' AS s; -- done")
    ["SELECT ';' AS s"]
    >>> split_one_statement("SELECT 1; SELECT $x$;$x$")
    ['SELECT 1', 'SELECT $x$;$x$']
    """
    pieces: list[str] = []
    start, content = 0, False
    for kind, a, b in _tokens(sql, '"`') if tokens is None else tokens:
        if kind == "solid":
            content = True
            continue
        if kind == "comment":
            continue
        i = a
        while True:
            semicolon = sql.find(";", i, b)
            if semicolon < 0:
                content = content or not sql[i:b].isspace() and i < b
                break
            content = content or not sql[i:semicolon].isspace() and i < semicolon
            if content:
                pieces.append(sql[start:semicolon].strip())
            start, content, i = semicolon + 1, False, semicolon + 1
    if content:
        pieces.append(sql[start:].strip())
    return pieces


def _first_word(sql: str, tokens: list[tuple[str, int, int]]) -> str:
    """Exactly :func:`~ambitab_gym.verify.taskrun.first_keyword` of the one statement in
    ``sql`` (PostgreSQL dialect), from ``tokens = _tokens(sql, '"')``: the first word of code
    after whitespace, comments and semicolons.

    >>> text = " ; /* a /* b */ */ -- c\\n  select 1"
    >>> _first_word(text, _tokens(text, '"'))
    'SELECT'
    """
    for kind, a, b in tokens:
        if kind == "comment":
            continue
        if kind == "solid":
            return ""
        start = _CODE_NOISE.match(sql, a, b).end()  # type: ignore[union-attr]
        if start < b:
            word = _WORD.match(sql, start, b)
            return word.group(0).upper() if word else ""
    return ""


def paren_depths_fast(
    sql: str, tokens: list[tuple[str, int, int]] | None = None
) -> tuple[int, int]:
    """Exactly :func:`~ambitab_gym.verify.taskrun.paren_depths` (PostgreSQL dialect).

    ``tokens``: ``_tokens(sql, '"')`` when the caller has them already.

    >>> paren_depths_fast("SELECT (1) AS ')' -- )"), paren_depths_fast("SELECT 1) AS z (SELECT 2")
    ((0, 0), (-1, 0))
    """
    depth = lowest = 0
    for kind, a, b in _tokens(sql, '"') if tokens is None else tokens:
        if kind != "code":
            continue
        for paren in _LEX_PARENS.finditer(sql, a, b):
            if paren.group(0) == "(":
                depth += 1
            else:
                depth -= 1
                lowest = min(lowest, depth)
    return lowest, depth


# The guard's fast path (_guard_fast): a text without comments, dollar signs, backslashes and
# backticks holds only code, '...' literals and "..." names; split at its quotes, the even
# pieces are the code. ('it''s' splits as 'it', an empty code piece and 's': the same characters
# as one literal.) About 4 us instead of 12-27 us for a 250-character query.
_FAST_SOLID = re.compile(r"'[^']*'?|\"[^\"]*\"?")


def _guard_fast(sql: str) -> tuple[str, str, int, int] | None:
    """``(statement, first word, lowest depth, final depth)`` of a one-statement text without
    comments, ``$``, backslashes or backticks, exactly as :func:`split_one_statement`,
    :func:`_first_word` and :func:`paren_depths_fast` give them; None for any other text (the
    caller lexes it in full).

    >>> _guard_fast("select f(')') FROM t;  ")
    ("select f(')') FROM t", 'SELECT', 0, 0)
    >>> _guard_fast("SELECT 1 -- note") is None
    True
    """
    if "--" in sql or "/*" in sql or "$" in sql or "\\" in sql or "`" in sql:
        return None
    # The code with every literal and name as one non-space character ("'").
    if '"' in sql:
        code = _FAST_SOLID.sub("'", sql)
    elif "'" in sql:
        pieces = sql.split("'")
        code = "'".join(pieces[0::2]) + ("'" if len(pieces) % 2 == 0 else "")  # (an open one)
    else:
        code = sql
    trimmed = code.rstrip()
    while trimmed.endswith(";"):
        trimmed = trimmed[:-1].rstrip()
    if not trimmed or ";" in trimmed:
        return None  # no statement, or more than one
    statement = sql[: len(sql) - (len(code) - len(trimmed))].strip()
    word = _WORD.match(code, _CODE_NOISE.match(code).end())  # type: ignore[union-attr]
    depth = lowest = 0
    pieces = code.split(")")
    for piece in itertools.islice(pieces, len(pieces) - 1):  # each followed by a ")"
        depth += piece.count("(") - 1
        lowest = min(lowest, depth)
    depth += pieces[-1].count("(")
    return statement, word.group(0).upper() if word else "", lowest, depth


def _statement_guard(sql_text: str) -> str | tuple[QueryErrorCategory, str]:
    """The one statement of a non-empty SQL text, or why it is refused (``(category,
    message)`` for a :class:`QueryError`): a NUL character, not exactly one statement, a
    command (the first word), unbalanced parentheses (so the text cannot close the engine's
    wrapper). A pure function of the text (the engine keeps its answers per text).

    >>> _statement_guard("SELECT (1);  ")
    'SELECT (1)'
    >>> _statement_guard("SET x = 1"), _statement_guard("SELECT 1) x")
    (('rejected', 'only read-only single SELECT statements are allowed (got SET)'), \
('syntax', 'unbalanced parentheses in the SQL text'))
    """
    if "\x00" in sql_text:
        return ("syntax", "SQL text contains a NUL character")
    fast = _guard_fast(sql_text)
    if fast is not None:
        statement, word, lowest, final = fast
    else:
        # Lexed once: without a backtick, both lexings (with and without backtick quotes)
        # agree.
        tokens = None if "`" in sql_text else _tokens(sql_text, '"')
        statements = split_one_statement(sql_text, tokens)
        if len(statements) != 1:
            return ("rejected", "submit exactly one SQL statement" if statements else "empty SQL")
        # Outside its one statement, the text holds only whitespace, comments and
        # semicolons: its tokens give the statement's first word and parenthesis depths.
        statement = statements[0]
        word = first_keyword(statement) if tokens is None else _first_word(sql_text, tokens)
        lowest, final = paren_depths_fast(sql_text, tokens)
    if word in _COMMANDS:
        return ("rejected", f"only read-only single SELECT statements are allowed (got {word})")
    if lowest < 0 or final != 0:
        return ("syntax", "unbalanced parentheses in the SQL text")
    return statement


class _Connection(psycopg.Connection):
    """A pooled agent or reference connection, with the engine's per-connection state."""

    #: the statement budget (ms) the session settings hold (None: not set yet)
    _budget_ms: int | None = None
    #: the last verification succeeded and its pipeline's end (the reset, ``ROLLBACK``, the
    #: sync point) is still to be read: :meth:`settle` reads it before the connection is used
    #: again (the server runs it while the client loads and compares the rows)
    _tail = False
    #: a poll object on the connection's socket (waiting for results releases the GIL)
    _poll: select.poll | None = None
    #: the engine's fixed statements are prepared on the server (``_PREPARED``)
    _own_statements = False
    #: the client encoding (fixed for the session: a query's set_config is rolled back)
    _encoding: str | None = None
    #: unpredictable 64-bit numbers for next_seed, drawn from the OS 64 at a time
    _entropy: list[int] | None = None
    #: reset parameters ready to send (next_seed_param)
    _seed_params: list[list[bytes]] | None = None
    #: the row loader of every query on the connection: its loaders, made per column type
    #: once, are set again from each query's first result (``set_pgresult``); a new one per
    #: query cost about 10 us (psycopg's cursors make one per query)
    _transformer: Transformer | None = None
    #: the row guard is the domain form (``_WRAP_TAIL``; else the CASE form), see
    #: ``_domain_guard_usable``
    _domain_guard = False
    #: the column types the transformer's loaders are for, and whether they load flat rows
    _oids: tuple[int, ...] | None = None
    _flat = False

    def read_tail(self, stop: float) -> bool:
        """Read the end of the last verification's pipeline (``_tail``: the reset, NULL,
        ``ROLLBACK``, NULL, the sync), waiting for it until ``stop`` (``time.monotonic``):
        whether the reset and ``ROLLBACK`` succeeded. False (the connection is not to be used
        again) when they failed or did not arrive in time."""
        self._tail = False
        pgconn = self.pgconn
        poll = self._poll
        if poll is None:
            poll = self._poll = select.poll()
            poll.register(pgconn.socket, select.POLLIN)
        statuses = []
        try:
            pgconn.consume_input()  # (it usually came long ago: read at once, without poll)
            for _result in range(5):
                while pgconn.is_busy():
                    remaining = stop - time.monotonic()
                    if remaining <= 0:
                        return False
                    poll.poll(max(1, int(remaining * 1000) + 1))
                    pgconn.consume_input()
                res = pgconn.get_result()
                statuses.append(res.status if res is not None else None)
        except psycopg.Error:
            return False
        return _tail_ok(statuses)

    def settle(self) -> bool:
        """Read the end of the last verification's pipeline (:meth:`read_tail`, waiting up to
        ``_TAIL_WAIT_S``) and leave pipeline mode: whether the session is idle again. False
        (the connection is not to be used again) when the end failed or did not come."""
        if not self.read_tail(time.monotonic() + _TAIL_WAIT_S):
            return False
        try:
            self.pgconn.exit_pipeline_mode()
        except psycopg.Error:
            return False
        return self.pgconn.transaction_status == _IDLE

    def next_seed(self) -> float:
        """An unpredictable ``setseed`` argument in [-1, 1) (52 random bits)."""
        if not self._entropy:
            self._entropy = list(array.array("Q", secrets.token_bytes(8 * 64)))
        return (self._entropy.pop() >> 12) / 2**51 - 1.0

    def next_seed_param(self) -> list[bytes]:
        """:meth:`next_seed` as the reset statement's parameter list (text format), made 64
        at a time."""
        if not self._seed_params:
            self._seed_params = [[repr(self.next_seed()).encode()] for _ in range(64)]
        return self._seed_params.pop()


class _Pool:
    """A small thread-safe pool of configured connections (created on demand)."""

    def __init__(self, conninfo: str, size: int, setup) -> None:
        self._conninfo = conninfo
        self._size = size
        self._setup = setup
        self._idle: list[_Connection] = []
        self._open = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._closed = False
        self._waiting = 0  # threads waiting in get (put notifies only then)

    def get(self, timeout_s: float, *, settle: bool = True) -> _Connection:
        """An idle connection, else a new one while fewer than ``size`` are open, else the
        next one put back within ``timeout_s``. ``settle``: the end of its last
        verification's pipeline is read and confirmed first (``_Connection.settle``; the
        engine's own queries read it with their results instead)."""
        deadline = None
        while True:
            connection = None
            with self._lock:  # (the common case: an idle connection, no waiting)
                if self._idle and not self._closed:
                    connection = self._idle.pop()
            if connection is None:
                if deadline is None:
                    deadline = time.monotonic() + timeout_s
                connection = self._wait(deadline)
                if connection is None:
                    break  # (a slot for a new connection)
            if not (settle and connection._tail) or connection.settle():
                return connection
            # The last verification's reset failed or did not come: not reusable.
            with contextlib.suppress(Exception):
                connection.close()
            self._forget()
        try:
            connection = _Connection.connect(
                self._conninfo, autocommit=True, prepare_threshold=None
            )
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

    def _wait(self, deadline: float) -> _Connection | None:
        """An idle connection, or None when a new one may be opened (counted open), waiting
        for one to be put back until ``deadline``."""
        with self._cond:
            while True:
                if self._closed:
                    raise QueryError("engine", "the PostgreSQL engine is closed")
                if self._idle:
                    return self._idle.pop()
                if self._open < self._size:
                    self._open += 1
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise QueryError("timeout", "no PostgreSQL connection became free in time")
                self._waiting += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._waiting -= 1

    def put(self, connection: _Connection, *, broken: bool = False) -> None:
        pgconn = connection.pgconn
        # (a connection whose pipeline's end is still to be read is busy until settle)
        if (
            broken
            or pgconn.status == _BAD
            or (not connection._tail and pgconn.transaction_status != _IDLE)
        ):
            with contextlib.suppress(Exception):
                connection.close()
            self._forget()
            return
        with self._lock:  # (the condition's lock: Condition's own methods are Python code)
            if self._closed:
                connection.close()
                self._open -= 1
            else:
                self._idle.append(connection)
            if self._waiting:
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
        dsn: a libpq connection string or URI for the unprivileged agent role (see the module
            doc).
        dbname: the database to use (overrides the DSN's).
        reference_dsn: the role that runs :meth:`execute_reference` (default: ``dsn`` with user
            :func:`reference_role` of the agent role); it must differ from the agent role.
        admin_dsn: a superuser connection that creates and drops the scratch databases of
            write tasks (:meth:`run_task`); None: write tasks are ``unsupported``.
        limits: default limits for :meth:`execute`.
        pool_size: at most this many agent connections are open at once (and two reference
            connections).
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
    #: rows per chunk (``_run``); 1: single-row mode
    _chunk_rows = _CHUNK_ROWS

    def __init__(
        self,
        dsn: str,
        *,
        dbname: str | None = None,
        reference_dsn: str | None = None,
        admin_dsn: str | None = None,
        limits: Limits | None = None,
        pool_size: int = 4,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self._init_args = {  # what a pickled copy is rebuilt from (__reduce__)
            "dsn": dsn,
            "dbname": dbname,
            "reference_dsn": reference_dsn,
            "admin_dsn": admin_dsn,
            "limits": limits,
            "pool_size": pool_size,
            "connect_timeout_s": connect_timeout_s,
        }
        self._params = self._conninfo_params(dsn, dbname, connect_timeout_s)
        self.dbname = str(self._params.get("dbname", ""))
        self.limits = limits or Limits()
        self._connect_timeout_s = connect_timeout_s
        self._agent_user: str | None = self._params.get("user")
        self._reference_params = (
            self._conninfo_params(reference_dsn, dbname, connect_timeout_s)
            if reference_dsn is not None
            else None
        )
        self._pool = _Pool(make_conninfo(**self._params), pool_size, self._check_agent)
        self._references: _Pool | None = None
        self._lock = threading.Lock()
        self._checked = False
        self._agent_domain_guard = False  # (what _domain_guard_usable found for the agent role)
        self._admin_params = (
            {**conninfo_to_dict(admin_dsn), "dbname": "postgres"} if admin_dsn else None
        )
        self._admin: psycopg.Connection | None = None
        self._admin_lock = threading.Lock()
        self._spare_ready = threading.Condition(self._admin_lock)
        self._swept = False
        self._spares: list[str] = []
        self._cloning = 0
        self._closing = False
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._jobs_thread: threading.Thread | None = None
        self._task_slot = WorkerSlot("postgres-task", "", "PostgreSQL")
        # what a query's limits and chunk size make of a run, per (limits, chunk_rows):
        # (limits, timeout_s, grace, budget_ms, cap, chunk, row_cap, (CASE tail, domain tail))
        self._plans: dict[tuple[int, int | None], tuple] = {}
        # the statement guard's answers per SQL text (_statement_guard; the same text is often
        # submitted again), bounded by _CHECKED_TEXTS entries and _CHECKED_CHARS characters
        self._guarded: dict[str, str | tuple] = {}
        self._guarded_chars = 0

    @staticmethod
    def _conninfo_params(dsn: str, dbname: str | None, connect_timeout_s: float) -> dict:
        params = conninfo_to_dict(dsn)
        if dbname is not None:
            params["dbname"] = dbname
        params.setdefault("connect_timeout", str(max(1, round(connect_timeout_s))))
        params.setdefault("application_name", "ambitab-gym-verifier")
        params["options"] = (
            str(params.get("options", "")) + " -c default_transaction_read_only=on"
        ).strip()
        return params

    def _reference_user(self) -> str | None:
        if self._reference_params is not None:
            return self._reference_params.get("user")
        return reference_role(self._agent_user) if self._agent_user else None

    def _check_agent(self, connection: _Connection) -> None:
        # Once per engine: every connection of the pool logs in with the same parameters.
        if self._checked:
            connection._domain_guard = self._agent_domain_guard
            return
        user = connection.execute("SELECT session_user::text").fetchone()[0]
        self._agent_user = self._agent_user or user
        problems = isolation_problems(connection, reference=self._reference_user())
        if not problems:
            self._agent_domain_guard = _domain_guard_usable(connection)
            connection._domain_guard = self._agent_domain_guard
        self._checked = not problems
        if problems:
            raise QueryError(
                "engine",
                f"refusing to run submitted SQL as role {user!r} on database {self.dbname!r}:\n"
                + "\n".join(f"- {problem}" for problem in problems),
            )

    def _check_reference(self, connection: _Connection) -> None:
        user = connection.execute("SELECT session_user::text").fetchone()[0]
        if user == self._agent_user:
            raise QueryError(
                "engine",
                f"the reference queries would run as the agent role {user!r}; give them a role "
                "of their own (load_corpus_databases creates "
                f"{reference_role(user)!r}; or pass reference_dsn)",
            )
        connection._domain_guard = _domain_guard_usable(connection)

    def _reference_pool(self) -> _Pool:
        with self._lock:
            if self._references is None:
                if self._reference_params is None and self._agent_user is None:
                    # The agent role is only known after a first connection (a DSN without user).
                    self._pool.put(self._connection(self._pool))
                params = self._reference_params or {
                    **self._params,
                    "user": reference_role(str(self._agent_user)),
                }
                self._references = _Pool(make_conninfo(**params), 2, self._check_reference)
            return self._references

    def _connection(self, pool: _Pool) -> _Connection:
        try:
            return pool.get(self._connect_timeout_s + 5.0, settle=False)
        except psycopg.Error as error:
            message = _first_line(error)
        hint = ""
        if pool is self._references and "does not exist" in message:
            hint = (
                " (the reference role is missing: run "
                "ambitab_gym.verify.postgres.load_corpus_databases, which creates it, or pass "
                "reference_dsn)"
            )
        raise QueryError(
            "engine", f"cannot connect to PostgreSQL database {self.dbname!r}: {message}{hint}"
        )

    def execute(self, sql_text: str, *, limits: Limits | None = None) -> QueryResult:
        """Run one read-only ``SELECT`` (or ``VALUES``) statement as the agent role.

        Raises:
            QueryError: with category ``rejected``, ``syntax``, ``runtime``, ``timeout``,
                ``too_many_rows``, ``too_large`` or ``engine`` (also when another session
                cancelled or terminated it: a transient failure).
        """
        return self._execute(self._pool, sql_text, limits or self.limits)

    def execute_reference(self, sql_text: str, *, limits: Limits | None = None) -> QueryResult:
        """Run a trusted reference query as the reference role, with the same sandbox.

        Agent sessions run as another role, so they can neither see this query's text nor
        cancel it. Raises :class:`QueryError` like :meth:`execute`.
        """
        return self._execute(self._reference_pool(), sql_text, limits or self.limits)

    def _execute(self, pool: _Pool, sql_text: str, limits: Limits) -> QueryResult:
        if not isinstance(sql_text, str):
            raise QueryError("rejected", "empty SQL")
        checked = self._guarded.get(sql_text)
        if checked is None:
            if not sql_text.strip():
                raise QueryError("rejected", "empty SQL")
            if len(sql_text) > limits.max_sql_length:
                raise QueryError(
                    "too_large", f"SQL text longer than {limits.max_sql_length} characters"
                )
            checked = _statement_guard(sql_text)
            self._remember_check(sql_text, checked)
        elif len(sql_text) > limits.max_sql_length:
            raise QueryError(
                "too_large", f"SQL text longer than {limits.max_sql_length} characters"
            )
        if type(checked) is not str:
            raise QueryError(*checked)
        sql_text = checked
        for attempt in range(2):
            connection = self._connection(pool)
            failure: QueryError | None = None
            broken = False
            try:
                return self._run(connection, sql_text, limits)
            except QueryError as error:
                failure = error
            except psycopg.Error as error:
                broken = _connection_lost(error)
                if broken and attempt == 0:
                    # A pooled connection that died while idle (server restart, terminated
                    # backend): try once more on a fresh one.
                    continue
                failure = _classify(error, sql_text, limits)
            except RecursionError:
                failure = QueryError("runtime", "a result value is nested too deeply")
            except MemoryError:
                failure = QueryError("too_large", "the result does not fit in memory")
            finally:
                broken = broken or not self._reset(connection)
                pool.put(connection, broken=broken)
            # Raised here, outside the handler, so the driver's error (whose message can be
            # as large as the agent made it) is not kept alive as the context.
            raise failure
        raise AssertionError("unreachable")  # pragma: no cover

    def _remember_check(self, sql_text: str, checked: str | tuple) -> None:
        if len(self._guarded) >= _CHECKED_TEXTS or self._guarded_chars > _CHECKED_CHARS:
            self._guarded.clear()  # (no order to keep: the answers are cheap to remake)
            self._guarded_chars = 0
        self._guarded[sql_text] = checked
        self._guarded_chars += len(sql_text)

    def _run(
        self,
        connection: _Connection,
        sql_text: str,
        limits: Limits,
        *,
        chunk_rows: int | None = None,
        started: float | None = None,
    ) -> QueryResult:
        """One verification in one round trip: a libpq pipeline of extended-protocol messages.

        ``BEGIN READ ONLY``, the wrapped query (``LIMIT max_rows + 1``), the reset (advisory
        locks released, a fresh random seed), ``ROLLBACK`` and one sync point, all written at
        once; the engine's own three are prepared statements of the connection. Every message
        is its own extended-protocol statement, so the server still parses the submission as
        exactly one statement; an error skips the rest of the segment (the transaction stays
        open and failed: :meth:`_reset` then rolls back and resets in a round trip of its own).
        Results are read with the GIL released while waiting (``poll``), up to the time limit
        plus :func:`_grace_s` from ``started`` (default: now). A flush request after the query
        has the server send its results at once; when it succeeds, the results of the reset,
        ``ROLLBACK`` and the sync are left to the connection's next query (read and checked
        before it is sent: ``_Connection._tail``) or to ``_Connection.settle``.

        Rows arrive in chunks of ``chunk_rows`` (default ``_chunk_rows``; libpq's chunked-rows
        mode) with the server-side guard at ``max_result_bytes // (chunk_rows *
        _CHUNK_SHARE)`` per row, so a chunk is a small share of the cap (each chunk is measured
        as it arrives); a row over that guard but possibly within the cap makes the query run
        again with one row per chunk and the guard at the cap (single-row mode), which decides,
        within what is left of the time limit (``SET LOCAL statement_timeout``). (libpq drops
        a chunk that an error interrupts: a query that errs within 64 rows after its result
        passed the cap fails with its own error rather than ``too_large``; both are failures
        with the same memory bound.)
        """
        start = time.monotonic() if started is None else started
        plan = self._plans.get((id(limits), chunk_rows))
        if plan is None or plan[0] is not limits:  # (the plan holds its limits: id stays theirs)
            plan = self._plan(limits, chunk_rows)
        _limits, timeout_s, grace_s, budget_ms, cap, chunk, row_cap, tails = plan
        tail = tails[connection._domain_guard]
        deadline = start + timeout_s
        # Past this, the query is stuck where no interrupt reaches it (a long built-in call):
        # the connection is dropped and the query fails with ``timeout``.
        stop = deadline + grace_s
        encoding = connection._encoding
        if encoding is None:
            encoding = connection._encoding = connection.info.encoding
        try:
            query = (_WRAP_HEAD + sql_text + tail).encode(encoding)
        except UnicodeEncodeError as error:
            raise QueryError("syntax", f"the SQL text cannot be encoded: {error.reason}") from None
        left_ms = None
        if started is not None:
            # A second run (a row over the chunk guard): no longer than the first one left.
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                raise QueryError("timeout", f"query ran longer than {limits.timeout_s:g} s")
        pgconn = connection.pgconn
        if connection._poll is None:
            connection._poll = select.poll()
            connection._poll.register(pgconn.socket, select.POLLIN)
        # Each result is read when libpq holds all of it (is_busy false: usually the whole
        # pipeline arrives at once), else after waiting in _await (no closure, no call per
        # result on the common path).
        is_busy, get_result = pgconn.is_busy, pgconn.get_result
        # The end of the previous verification's pipeline (its reset, ROLLBACK and sync),
        # which the server sent while the client was busy with that query's rows: read and
        # checked before anything is sent. (Read here rather than after sending: a client that
        # waits right after sending lets the server process run on its core, which answers
        # sooner than one woken on the other core.) Failed, or not arrived by this query's
        # deadline: the connection is dropped and the query runs again on a fresh one.
        if connection._tail and not connection.read_tail(stop):
            connection.close()
            raise psycopg.OperationalError("the previous query's reset did not finish")
        pgconn.enter_pipeline_mode()  # (a no-op while still in it after a previous end)
        if connection._budget_ms != budget_ms:
            self._set_session(connection, budget_ms, stop, limits)
        pgconn.send_query_prepared(_BEGIN_NAME, None)
        if left_ms is not None:
            pgconn.send_query_params(f"SET LOCAL statement_timeout = {left_ms}".encode(), None)
        pgconn.send_query_params(query, None)
        # The server sends the query's results at once (a flush request) and then runs the
        # reset and ROLLBACK while the client loads and compares the rows; their results are
        # read before the connection's next query is sent (above), or by _Connection.settle
        # when the connection is taken from the pool for anything else.
        pgconn.send_flush_request()
        # The reset inside the transaction (neither advisory locks nor the seed are
        # transactional), then the rollback: one segment. An error skips the rest of the
        # segment; then _reset repeats both in a round trip of their own.
        pgconn.send_query_prepared(_RESET_NAME, connection.next_seed_param())
        pgconn.send_query_prepared(_ROLLBACK_NAME, None)
        pgconn.pipeline_sync()
        failure: psycopg.Error | None = None
        for _statement in range(1 if left_ms is None else 2):  # BEGIN (, SET LOCAL)
            if is_busy():
                _await(connection, stop, limits)
            res = get_result()
            if is_busy():
                _await(connection, stop, limits)
            get_result()  # the NULL that ends its results
            if failure is None and res is not None and res.status == _FATAL:
                failure = errors.error_from_result(res, encoding=encoding)
        if failure is None:
            if chunk > 1:
                # The unit held in memory before it is measured: one chunk, of at most
                # chunk_rows rows that the server-side guard caps at row_cap each.
                pgconn.set_chunked_rows_mode(chunk)
            else:
                pgconn.set_single_row_mode()
        rows: list[tuple] = []
        columns: tuple[str, ...] = ()
        size = 0
        transformer = connection._transformer
        if transformer is None:
            transformer = connection._transformer = Transformer(connection)
        flat: bool | None = None
        getsizeof = sys.getsizeof
        while True:
            if is_busy():
                _await(connection, stop, limits)
            res = get_result()
            if res is None:
                break
            status = res.status
            if status == _CHUNK:
                if flat is None:
                    flat = _first_result(connection, transformer, res)
                else:
                    transformer.set_pgresult(res, set_loaders=False)
                batch = transformer.load_rows(0, res.ntuples, tuple)
                rows += batch
                # (for flat rows, _flat_row_bytes summed in two passes; the tuples of a chunk
                # all have the result's length, so each takes the first one's size)
                size += (
                    len(batch) * getsizeof(batch[0]) + sum(map(getsizeof, _chain(batch)))
                    if flat and batch
                    else sum(map(_row_bytes, batch))
                )
                if size > cap:
                    connection.close()
                    raise QueryError("too_large", f"the result is larger than {_mib(cap)}")
            elif status == _ROW:
                if flat is None:
                    flat = _first_result(connection, transformer, res)
                else:
                    transformer.set_pgresult(res, set_loaders=False)
                row = transformer.load_row(0, tuple)
                rows.append(row)
                # (for a flat row, _flat_row_bytes inline)
                size += getsizeof(row) + sum(map(getsizeof, row)) if flat else _row_bytes(row)
                if size > cap:
                    # Drop the connection rather than drain the rest of the result.
                    connection.close()
                    raise QueryError("too_large", f"the result is larger than {_mib(cap)}")
            elif status == _TUPLES:
                # The end of the rows (in single-row mode, none), with the column names
                # (decoded in one piece: a name holds no NUL).
                count = res.nfields
                if count:
                    columns = tuple(
                        b"\0".join(map(res.fname, range(count))).decode(encoding).split("\0")
                    )
            elif status == _FATAL and failure is None:
                failure = errors.error_from_result(res, encoding=encoding)
        transformer.set_pgresult(None, set_loaders=False)  # (the last chunk's memory)
        if failure is None:
            # The reset SELECT and ROLLBACK (each a result and the NULL after it) and the
            # sync are read before the connection's next query is sent, or by settle.
            connection._tail = True
        else:
            # The rest of the segment was skipped (its results and the sync are read now).
            for _result in range(5):
                if is_busy():
                    _await(connection, stop, limits)
                get_result()
            pgconn.exit_pipeline_mode()
        if failure is not None:
            if chunk > 1 and _row_refused(failure):
                # A row over row_cap: one row at a time, with the guard at the cap.
                del failure
                if not self._reset(connection):
                    raise QueryError("engine", "the PostgreSQL connection failed, try again")
                return self._run(connection, sql_text, limits, chunk_rows=1, started=start)
            raise failure
        if len(rows) > limits.max_rows:
            raise QueryError("too_many_rows", f"result has more than {limits.max_rows} rows")
        return QueryResult(columns, rows)

    @staticmethod
    def _set_session(connection: _Connection, budget_ms: int, stop: float, limits: Limits) -> None:
        """Session settings (and, once per connection, the engine's prepared statements), in a
        segment of their own before BEGIN (so the rollback keeps them), confirmed before the
        query is sent: a query never runs without its limits. (The pipeline is entered.)"""
        pgconn = connection.pgconn
        connection._budget_ms = None
        messages = 0
        if not connection._own_statements:
            for name, command in _PREPARED:
                pgconn.send_prepare(name, command)
            messages += len(_PREPARED)
        for setting in _SETTINGS:
            pgconn.send_query_params(
                setting.format(ms=budget_ms, idle_ms=budget_ms + 10_000).encode(), None
            )
        messages += len(_SETTINGS)
        pgconn.pipeline_sync()
        ok = True
        for index in range(2 * messages + 1):  # each message's result and NULL, the sync
            _await(connection, stop, limits)
            res = pgconn.get_result()
            if index == 2 * messages:
                ok = ok and res is not None and res.status == _SYNC
            elif index % 2 == 0:
                ok = ok and res is not None and res.status == pq.ExecStatus.COMMAND_OK
        if not ok:
            connection.close()
            raise QueryError("engine", "the PostgreSQL session refused the query limits")
        connection._own_statements = True
        connection._budget_ms = budget_ms

    def _plan(self, limits: Limits, chunk_rows: int | None) -> tuple:
        """What ``limits`` and ``chunk_rows`` make of a run (see ``_plans``), kept."""
        cap = int(limits.max_result_bytes)
        chunk = self._chunk_rows if chunk_rows is None else chunk_rows
        row_cap = cap // (chunk * _CHUNK_SHARE) if chunk > 1 else cap
        if row_cap < _MIN_CHUNK_ROW_CAP or not _CHUNKED_ROWS:
            chunk, row_cap = 1, cap
        limit = limits.max_rows + 1
        tails = (
            _WRAP_TAIL_CASE.format(cap=row_cap, marker=_ROW_MARKER, limit=limit),
            _WRAP_TAIL.format(cap=min(row_cap, _MAX_DOMAIN_CAP), limit=limit),
        )
        budget_ms = max(1, int(limits.timeout_s * 1000))
        plan = (limits, limits.timeout_s, _grace_s(limits.timeout_s), budget_ms, cap, chunk)
        plan += (row_cap, tails)
        if len(self._plans) >= 64:  # (limits made per call: keep the latest few)
            self._plans.clear()
        self._plans[id(limits), chunk_rows] = plan
        return plan

    @staticmethod
    def _reset(connection: _Connection) -> bool:
        """Roll back and drop session-level leftovers; False when the connection is unusable."""
        if connection.pgconn.status == _BAD:  # (connection.closed)
            return False
        if connection._tail:
            # The verification's own pipeline ends with the reset (read and confirmed by
            # settle before the connection is used again).
            return True
        if connection.pgconn.pipeline_status != pq.PipelineStatus.OFF:
            # Stopped in the middle of its pipeline (an exception while reading): not reusable.
            connection.close()
            return False
        try:
            # One round trip: end the transaction (which also undoes set_config), drop
            # session-level advisory locks, and replace the random seed a query may have set
            # with setseed() by an unpredictable one: these are the session state a read-only
            # SELECT can leave behind on a pooled connection (DISCARD ALL keeps the seed).
            _simple(connection, "ROLLBACK; " + _RESET.format(seed=connection.next_seed()))
            return connection.info.transaction_status == 0
        except psycopg.Error:
            return False

    # -- write tasks -------------------------------------------------------------------------

    def _admin_connection(self) -> psycopg.Connection:
        if self._admin is None or self._admin.closed:
            assert self._admin_params is not None
            self._admin = psycopg.connect(make_conninfo(**self._admin_params), autocommit=True)
        return self._admin

    def _sweep(self, admin: psycopg.Connection) -> None:
        """Drop scratch databases that verifiers on this host left when they were killed."""
        prefix = f"{_SCRATCH_PREFIX}{_HOST_TAG}_"
        rows = admin.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", [prefix]
        ).fetchall()
        for (name,) in rows:
            pid = name[len(prefix) :].split("_", 1)[0]
            if pid.isdigit() and not process_alive(int(pid)):
                with contextlib.suppress(psycopg.Error):
                    admin.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(name)
                        )
                    )

    def run_task(self, task: dict, *, limits: Limits | None = None, total_s: float) -> tuple:
        """Run a write task (:func:`~ambitab_gym.verify.taskrun.run_task`) on a private
        database cloned from the corpus database's template, then dropped.

        The admin connection clones ``template_name(dbname)`` for the agent role alone
        (:func:`~ambitab_gym.verify.postgres_loader.create_scratch_database`: only that role may
        connect, its tables are owned by the campaign's scratch role; the next clone is made in
        the background after each task, so it is usually ready); a worker process connects to
        the clone as the agent role and runs the whole task in one transaction that is never
        committed; the clone is dropped (``WITH (FORCE)``, in the background) afterwards, also
        when the worker overran and was killed. What a killed verifier left behind (its clone,
        its spare) is dropped by the next engine on this host. The agent role is checked
        (:func:`~ambitab_gym.verify.postgres_loader.isolation_problems`, as for queries) before
        the first clone. Returns ``("task", success, reason, detail)`` or ``("error",
        category, message)``.
        """
        limits = limits or self.limits
        if self._admin_params is None:
            return (
                "task",
                False,
                "unsupported",
                "tasks that write need a scratch database on PostgreSQL: pass "
                "engine_options={'admin_dsn': <a superuser DSN>} (or 'load_dsn')",
            )
        template = template_name(self.dbname)
        if not self._checked or self._agent_user is None:
            # The agent role's checks (and its name, whose clones these are) before any clone.
            try:
                self._pool.put(self._connection(self._pool))
            except QueryError as error:
                return ("error", error.category, error.message)
        try:
            scratch = self._take_scratch()
        except UnsafeServerSetup as error:
            return ("error", "engine", str(error))
        except psycopg.Error as error:
            with contextlib.suppress(Exception):
                if self._admin is not None:
                    self._admin.close()
            self._admin = None
            message = _first_line(error)
            if "does not exist" in message:
                return (
                    "task",
                    False,
                    "unsupported",
                    f"no write-task template {template!r} on the server: load the corpus with "
                    "ambitab_gym.verify.postgres.load_corpus_databases (it builds them)",
                )
            return ("error", "engine", f"cannot create a scratch database: {message}")
        try:
            conninfo = make_conninfo(**{**self._params, "dbname": scratch})
            request = (
                "task",
                {**task, "conninfo": conninfo, "total_s": total_s},
                limits.timeout_s,
                limits.max_rows,
                limits.max_result_bytes,
                total_s,
            )
            headroom_mb = 2 * limits.memory_limit_mb + 3 * limits.max_result_bytes // 2**20 + 256
            key = (limits.memory_limit_mb, limits.max_result_bytes)
            try:
                return self._task_slot.ask(key, {}, headroom_mb, request, total_s)
            except WorkerStartError as error:
                return ("error", "engine", str(error))
        finally:
            # Dropped off the verdict's path, on a connection of its own.
            self._in_background(lambda admin: _drop_database(admin, scratch))

    def _clone(self, admin: psycopg.Connection) -> str:
        """A new scratch database that only the agent role may connect to."""
        assert self._admin_params is not None and self._agent_user is not None
        scratch = f"{_SCRATCH_PREFIX}{_HOST_TAG}_{os.getpid()}_{secrets.token_hex(4)}"
        create_scratch_database(
            admin,
            make_conninfo(**{**self._admin_params, "dbname": scratch}),
            scratch,
            template_name(self.dbname),
            self._agent_user,
        )
        return scratch

    def _take_scratch(self) -> str:
        """A fresh scratch database: the spare cloned in the background after the previous
        task (so the clone is off the verdict's path), else one cloned now; then the next spare
        is started."""
        mine = f"{_SCRATCH_PREFIX}{_HOST_TAG}_{os.getpid()}_"
        with self._admin_lock:
            spare = None
            # A spare being cloned started earlier than a clone started now would: wait for it.
            deadline = time.monotonic() + 30.0
            while not self._spares and self._cloning and time.monotonic() < deadline:
                self._spare_ready.wait(deadline - time.monotonic())
            while self._spares:
                candidate = self._spares.pop()
                if candidate.startswith(mine):  # not a spare of the process this one forked from
                    spare = candidate
                    break
            if spare is None:
                admin = self._admin_connection()
                if not self._swept:
                    self._sweep(admin)
                    self._swept = True
                spare = self._clone(admin)
            start_next = not self._closing and self._cloning == 0
            if start_next:
                self._cloning += 1
        if start_next:
            self._in_background(self._clone_spare)
        return spare

    def _clone_spare(self, admin: psycopg.Connection) -> None:
        name = None
        try:
            name = self._clone(admin)
        finally:
            with self._admin_lock:
                self._cloning -= 1
                keep = name is not None and not self._closing
                if keep:
                    self._spares.append(name)
                self._spare_ready.notify_all()
        if name is not None and not keep:
            _drop_database(admin, name)

    def _in_background(self, job) -> None:
        """Queue ``job(admin_connection)`` for the engine's background thread, which runs the
        jobs in order on an admin connection of its own (clone the next scratch database while
        a task runs, drop the used one after it)."""
        with self._admin_lock:
            if self._jobs_thread is None or not self._jobs_thread.is_alive():
                self._jobs_thread = threading.Thread(
                    target=self._run_jobs, name="ambitab-scratch", daemon=True
                )
                self._jobs_thread.start()
        self._jobs.put(job)

    def _run_jobs(self) -> None:
        params = self._admin_params
        assert params is not None
        admin: psycopg.Connection | None = None
        while True:
            job = self._jobs.get()
            if job is None:
                break
            try:
                if admin is None or admin.closed:
                    admin = psycopg.connect(make_conninfo(**params), autocommit=True)
                job(admin)
            except Exception:  # noqa: BLE001 - the sweep drops whatever was left
                if admin is not None:
                    with contextlib.suppress(Exception):
                        admin.close()
                admin = None
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()

    @property
    def task_worker_pid(self) -> int | None:
        """The process id of the write-task worker (None until a write task ran)."""
        return self._task_slot.pid

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

    def __reduce__(self) -> tuple:
        """Pickling (Ray workers, subprocesses): the connection settings travel (DSNs as
        given, passwords included; prefer a password file); the copy opens its own pool on
        first use, never a pickled connection."""
        return (functools.partial(type(self), **self._init_args), ())

    def close(self) -> None:
        """Close every pooled connection and stop the write-task worker."""
        self._pool.close()
        if self._references is not None:
            self._references.close()
        self._task_slot.close()
        with self._admin_lock:
            self._closing = True
            thread = self._jobs_thread
        if thread is not None and thread.is_alive():
            self._jobs.put(None)
            thread.join(60)
        with self._admin_lock:
            spares, self._spares = self._spares, []
            if spares and self._admin_params is not None:
                with contextlib.suppress(Exception):
                    admin = self._admin_connection()
                    for name in spares:
                        _drop_database(admin, name)
            if self._admin is not None:
                with contextlib.suppress(Exception):
                    self._admin.close()
                self._admin = None


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


def _row_bytes(row: tuple) -> int:
    """The memory a fetched row takes: the tuple and every value in it (arrays, JSON included).

    >>> _row_bytes((1, "x" * 1000)) > 1000
    True
    """
    total = sys.getsizeof(row)
    stack = list(row)
    while stack:
        value = stack.pop()
        total += sys.getsizeof(value)
        if isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
    return total


# Types whose values psycopg loads as scalars (numbers, text, bytes, dates and times, UUIDs,
# booleans): a row of only these holds no nested container, so its size is the tuple's plus
# each value's (_flat_row_bytes), without _row_bytes's walk.
_FLAT_TYPES = frozenset(
    postgres.types[name].oid
    for name in (
        "bool", "bytea", "name", "int2", "int4", "int8", "oid", "text", "varchar",
        "bpchar", "float4", "float8", "numeric", "date", "time", "timetz", "timestamp",
        "timestamptz", "interval", "uuid",
    )
)  # fmt: skip


def _first_result(connection: _Connection, transformer: Transformer, res: pq.abc.PGresult) -> bool:
    """Set the row loader on a query's first rows: its column loaders are kept from the
    previous query when the column types are the same (else made for these types). Whether
    the rows are flat (every column of a type in ``_FLAT_TYPES``), kept with the types."""
    oids = tuple(map(res.ftype, range(res.nfields)))
    if oids == connection._oids:
        transformer.set_pgresult(res, set_loaders=False)
        return connection._flat
    connection._oids = None  # (until the new loaders are all made)
    transformer.set_pgresult(res, set_loaders=True)
    connection._oids, connection._flat = oids, _FLAT_TYPES.issuperset(oids)
    return connection._flat


def _flat_row_bytes(row: tuple) -> int:
    """:func:`_row_bytes` of a row without nested values (lists, tuples, dicts), in one pass.

    >>> row = (1, "x" * 1000, None, 2.5)
    >>> _flat_row_bytes(row) == _row_bytes(row)
    True
    """
    return sys.getsizeof(row) + sum(map(sys.getsizeof, row))


def _mib(size: int) -> str:
    return f"{size / 2**20:g} MiB"


def _grace_s(timeout_s: float) -> float:
    """How long past its limit a query may run before its connection is dropped.

    ``statement_timeout`` stops a query at the next interrupt check; a built-in function that
    runs long without one (``array_fill`` of 50 million elements: 5 s past a 1 s limit) is
    stopped by the client instead: it stops waiting, drops the connection and reports
    ``timeout``.

    >>> _grace_s(1.0)
    0.6
    """
    return 0.5 + 0.1 * timeout_s


def _drop_database(admin: psycopg.Connection, name: str) -> None:
    with contextlib.suppress(psycopg.Error):
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


_chain = itertools.chain.from_iterable
_IDLE = pq.TransactionStatus.IDLE
_BAD = pq.ConnStatus.BAD  # (Connection.closed: the status is BAD)
_CHUNK = pq.ExecStatus.TUPLES_CHUNK
# libpq's chunked-rows mode (libpq 17 and later).
_CHUNKED_ROWS = pq.version() >= 170000
_SIMPLE_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
_FATAL = pq.ExecStatus.FATAL_ERROR
_ROW = pq.ExecStatus.SINGLE_TUPLE
_TUPLES = pq.ExecStatus.TUPLES_OK
_SYNC = pq.ExecStatus.PIPELINE_SYNC


def _simple(connection: psycopg.Connection, command: str) -> None:
    """One simple-protocol round trip straight through libpq (``PQexec``, which releases the
    GIL): for the engine's own reset after a failed query, psycopg's Python layers cost as much
    as the round trip. Raises the psycopg error a failure makes."""
    result = connection.pgconn.exec_(command.encode())
    if result.status not in _SIMPLE_OK:
        raise errors.error_from_result(result, encoding=connection.info.encoding)


def _await(connection: _Connection, stop: float, limits: Limits) -> None:
    """Wait until libpq holds a whole result of the connection's pipeline (``poll`` releases
    the GIL), up to ``stop`` (``time.monotonic``): past it the connection is dropped and the
    query fails with ``timeout`` (a built-in call that no interrupt reaches)."""
    pgconn, poll = connection.pgconn, connection._poll
    assert poll is not None
    while pgconn.is_busy():
        remaining = stop - time.monotonic()
        if remaining <= 0 or not poll.poll(max(1, int(remaining * 1000) + 1)):
            if time.monotonic() >= stop:
                connection.close()
                raise QueryError("timeout", f"query ran longer than {limits.timeout_s:g} s")
            continue
        pgconn.consume_input()


def _tail_ok(statuses: list) -> bool:
    """Whether the results at the end of a verification's pipeline (the reset, NULL,
    ``ROLLBACK``, NULL, the sync) say that the reset and the rollback succeeded."""
    return (
        statuses[0] in _SIMPLE_OK
        and statuses[1] is None
        and statuses[2] in _SIMPLE_OK
        and statuses[3] is None
        and statuses[4] == _SYNC
    )


def _domain_refusal(error: psycopg.Error) -> bool:
    """Whether ``error`` is the failed check of the domain row guard's domain."""
    diag = getattr(error, "diag", None)
    return (
        diag is not None
        and error.sqlstate == "23514"  # check_violation
        and (diag.schema_name, diag.datatype_name, diag.constraint_name) == _GUARD_DOMAIN
    )


def _row_refused(error: psycopg.Error) -> bool:
    """Whether ``error`` is the row guard's (either form): a row larger than the row cap.
    (A query can raise the same error itself: it fails either way.)"""
    diag = getattr(error, "diag", None)
    return _domain_refusal(error) or (
        diag is not None and _ROW_MARKER in (diag.message_primary or "")
    )


def _domain_guard_usable(connection: psycopg.Connection) -> bool:
    """Whether the domain row guard works for the connection's role: the domain is usable, a
    value of 0 passes it and -1 fails its own check (else the engine uses the CASE form)."""
    try:
        passed = connection.execute("SELECT 0::information_schema.cardinal_number = 0").fetchone()
    except psycopg.Error:
        return False
    try:
        connection.execute("SELECT (-1)::information_schema.cardinal_number")
    except psycopg.Error as error:
        return passed == (True,) and _domain_refusal(error)
    return False


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
    if _row_refused(error):
        return QueryError(
            "too_large",
            f"a result row is larger than {_mib(limits.max_result_bytes)} (the server refused "
            "to send it); select fewer or shorter values",
        )
    if isinstance(error, errors.QueryCanceled) and "timeout" not in message:
        # Not this query's doing: an administrator (or the server) cancelled it. Transient.
        return QueryError("engine", f"the query was cancelled by the server, try again ({message})")
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
        # The wrapper's subquery admits queries only: another command fails on its first word.
        position = diag.statement_position if diag is not None else None
        offset = _LEADING_NOISE.match(sql_text).end()
        first_word = sql_text[offset:].split(None, 1)[0].upper() if sql_text[offset:] else ""
        if (
            position is not None
            and int(position) == len(_WRAP_HEAD) + offset + 1
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
        raise UsageError(
            "the postgres engine needs a server: pass engine_options={'dsn': 'postgresql://...'} "
            "(a SELECT-only role; ambitab_gym.verify.postgres.load_corpus_databases loads the "
            "corpus and returns such a DSN)"
        )
    load_dsn = corpus.options.get("load_dsn")
    if load_dsn and not corpus.options.get("_loaded"):
        reader = conninfo_to_dict(dsn).get("user") or "ambitab_reader"
        load_corpus_databases(corpus, load_dsn, reader=str(reader))
        corpus.options["_loaded"] = True
    return PostgresEngine(
        dsn,
        dbname=database_name(corpus.name, database),
        reference_dsn=corpus.options.get("reference_dsn"),
        admin_dsn=corpus.options.get("admin_dsn") or load_dsn,
        limits=limits,
    )
