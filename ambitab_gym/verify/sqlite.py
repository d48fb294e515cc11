"""The SQLite engine, sandboxed for untrusted SQL.

Follows SQLite's "Defense Against the Dark Arts": the database opens through a read-only,
immutable URI; an authorizer admits reads only (no writes, ATTACH, PRAGMA, transactions or
extension loading); length and complexity limits are lowered; a progress handler enforces a
wall-clock timeout; results are fetched in bounded chunks.

* :class:`SQLiteEngine` - one sandboxed connection to one ``.sqlite`` file.
* :func:`build_sqlite` - build a database file from a trusted SQL script (corpus preparation).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from ambitab_gym.verify.base import Limits, QueryError, QueryResult

__all__ = ["SQLiteEngine", "build_sqlite"]

_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}

# (limit id, value): lowered limits from "Defense Against the Dark Arts".
_LIMITS = [
    ("SQLITE_LIMIT_LENGTH", 1_000_000),
    ("SQLITE_LIMIT_SQL_LENGTH", 100_000),
    ("SQLITE_LIMIT_COLUMN", 500),
    ("SQLITE_LIMIT_EXPR_DEPTH", 200),
    ("SQLITE_LIMIT_COMPOUND_SELECT", 50),
    ("SQLITE_LIMIT_VDBE_OP", 250_000),
    ("SQLITE_LIMIT_FUNCTION_ARG", 16),
    ("SQLITE_LIMIT_ATTACHED", 0),
    ("SQLITE_LIMIT_LIKE_PATTERN_LENGTH", 100),
    ("SQLITE_LIMIT_VARIABLE_NUMBER", 10),
    ("SQLITE_LIMIT_TRIGGER_DEPTH", 1),
]
_PROGRESS_EVERY = 2_000  # virtual-machine instructions between timeout checks
_FETCH_CHUNK = 1_000


def _authorizer(action: int, arg1, arg2, db_name, trigger) -> int:
    if action not in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and arg2 and arg2.lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class SQLiteEngine:
    """A sandboxed, read-only SQLite connection.

    Args:
        path: the database file. It is opened ``mode=ro&immutable=1`` and never written.
        limits: default limits for :meth:`execute`.

    Example:
        >>> import sqlite3, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "demo.sqlite")
        >>> build_sqlite("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1), (2);", path)
        >>> engine = SQLiteEngine(path)
        >>> engine.execute("SELECT x FROM t ORDER BY x").rows
        [(1,), (2,)]
        >>> engine.execute("DELETE FROM t")
        Traceback (most recent call last):
        ...
        ambitab_gym.verify.base.QueryError: rejected: only read-only single SELECT statements are allowed (not authorized)
        >>> engine.close()
    """

    name = "sqlite"

    def __init__(self, path: str | Path, *, limits: Limits | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"SQLite database {self.path} does not exist")
        self.limits = limits or Limits()
        self._connection: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            uri = f"file:{quote(str(self.path.resolve()))}?mode=ro&immutable=1"
            connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
            connection.execute("PRAGMA query_only = ON")
            connection.execute("PRAGMA trusted_schema = OFF")
            if hasattr(connection, "setlimit"):  # Python >= 3.11
                for name, value in _LIMITS:
                    if hasattr(sqlite3, name):
                        connection.setlimit(getattr(sqlite3, name), value)
            connection.set_authorizer(_authorizer)
            self._connection = connection
        return self._connection

    def execute(self, sql: str, *, limits: Limits | None = None) -> QueryResult:
        """Run one read-only statement and return its result.

        Raises:
            QueryError: with category ``rejected``, ``syntax``, ``runtime``, ``timeout``,
                ``too_many_rows`` or ``too_large``.
        """
        limits = limits or self.limits
        if not isinstance(sql, str) or not sql.strip():
            raise QueryError("rejected", "empty SQL")
        if len(sql) > limits.max_sql_length:
            raise QueryError(
                "too_large", f"SQL text longer than {limits.max_sql_length} characters"
            )
        connection = self._connect()
        deadline = time.monotonic() + limits.timeout_s
        timed_out = False

        def progress() -> int:
            nonlocal timed_out
            if time.monotonic() > deadline:
                timed_out = True
                return 1
            return 0

        connection.set_progress_handler(progress, _PROGRESS_EVERY)
        cursor = connection.cursor()
        try:
            cursor.execute(sql)
            columns = tuple(d[0] for d in cursor.description or ())
            rows: list[tuple] = []
            while True:
                chunk = cursor.fetchmany(_FETCH_CHUNK)
                if not chunk:
                    break
                rows.extend(chunk)
                if len(rows) > limits.max_rows:
                    raise QueryError(
                        "too_many_rows", f"result has more than {limits.max_rows} rows"
                    )
            return QueryResult(columns, rows)
        except QueryError:
            raise
        except sqlite3.Error as error:
            raise _classify(error, timed_out, limits) from None
        except (OverflowError, MemoryError, ValueError) as error:
            raise QueryError("runtime", str(error)) from None
        finally:
            cursor.close()
            connection.set_progress_handler(None, 0)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()


def _classify(error: sqlite3.Error, timed_out: bool, limits: Limits) -> QueryError:
    message = str(error)
    lowered = message.lower()
    if timed_out or "interrupted" in lowered:
        return QueryError("timeout", f"query ran longer than {limits.timeout_s:g} s")
    if any(w in lowered for w in ("not authorized", "authorization denied", "prohibited", "readonly")):
        return QueryError(
            "rejected", f"only read-only single SELECT statements are allowed ({message})"
        )
    if "one statement at a time" in lowered:
        return QueryError("rejected", "submit exactly one SQL statement")
    if isinstance(error, sqlite3.OperationalError) and (
        "syntax error" in lowered
        or "incomplete input" in lowered
        or "unrecognized token" in lowered
    ):
        return QueryError("syntax", message)
    if "too big" in lowered or "too many" in lowered or "too complex" in lowered:
        return QueryError("too_large", message)
    return QueryError("runtime", message)


def build_sqlite(script: str, path: str | Path) -> None:
    """Build a SQLite database from a trusted SQL script, atomically.

    The file appears at ``path`` only when the whole script succeeded, so concurrent builders
    (vector-env workers) never see a half-built database.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        connection = sqlite3.connect(tmp)
        try:
            connection.executescript(script)
            connection.commit()
        finally:
            connection.close()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
