"""What every SQL engine of the verifier shares.

* :class:`QueryResult` - column names and rows of one executed query.
* :class:`QueryError` - a query that was refused or failed, with a category the verdict reports.
* :class:`Engine` - the protocol: ``execute(sql, timeout_s=..., max_rows=...)`` and ``close()``.
* :class:`Limits` - time, size and memory limits applied to every submitted query.
* :func:`bounded_text` - cut an engine's message to a bounded size before it goes anywhere.
* :func:`process_stat`, :func:`process_alive` - whether the process that left a temporary file
  or scratch database still runs (the sweeps of killed builds and verifiers).

Engines run *hostile* SQL: every engine is read-only, runs one statement, enforces a wall-clock
timeout and a bounded result, and leaves the database files byte-identical.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ambitab_gym import defaults
from ambitab_gym.errors import EngineError
from ambitab_gym.vocabulary import QUERY_ERROR_CATEGORIES, QueryErrorCategory, check

__all__ = [
    "MAX_MESSAGE_CHARS",
    "Engine",
    "Limits",
    "QueryError",
    "QueryResult",
    "bounded_text",
    "process_alive",
    "process_stat",
]

#: Longest engine or verdict message kept anywhere (verdict, log, results store).
MAX_MESSAGE_CHARS = 1_000


def bounded_text(text: object, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``str(text)`` cut to at most ``limit`` characters, marking the cut.

    Engines echo agent SQL in their error messages, so a hostile submission can make them
    arbitrarily large; every message is bounded before it reaches a verdict, a log or a store.

    >>> bounded_text("x" * 5, limit=10)
    'xxxxx'
    >>> len(bounded_text("x" * 10_000, limit=100)) <= 100
    True
    >>> bounded_text("y" * 10_000, limit=40)
    'yyyyyyyy... [9,992 more characters cut]'
    """
    text = str(text)
    if len(text) <= limit:
        return text
    marker_template = "... [{:,} more characters cut]"
    keep = max(0, limit - len(marker_template.format(len(text))))
    return text[:keep] + marker_template.format(len(text) - keep)


@dataclass(frozen=True)
class Limits:
    """Limits applied to every query an engine runs.

    Attributes:
        timeout_s: wall-clock limit for executing and fetching one query.
        max_rows: a result with more rows fails (``too_many_rows``).
        max_sql_length: longer SQL text is refused before it reaches the database.
        max_result_bytes: a result whose values take more bytes fails (``too_large``); enforced
            while fetching, so the process never holds much more than this.
        memory_limit_mb: engine memory cap where the engine supports one (DuckDB).
        threads: engine worker threads where the engine supports them (DuckDB).

    >>> Limits(timeout_s=1.0).max_rows
    100000
    """

    timeout_s: float = defaults.QUERY_TIMEOUT_S
    max_rows: int = defaults.MAX_ROWS
    max_sql_length: int = defaults.MAX_SQL_LENGTH
    max_result_bytes: int = defaults.MAX_RESULT_BYTES
    memory_limit_mb: int = defaults.MEMORY_LIMIT_MB
    threads: int = defaults.ENGINE_THREADS


@dataclass(frozen=True)
class QueryResult:
    """The columns and rows of an executed query.

    >>> QueryResult(("n",), [(3,)]).rows
    [(3,)]
    """

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


class QueryError(EngineError):
    """A query was refused or failed (an :class:`~ambitab_gym.errors.EngineError` whose
    ``category`` is the query's).

    Attributes:
        category: one of ``timeout``, ``rejected`` (not a read-only single statement),
            ``syntax``, ``runtime``, ``too_many_rows``, ``too_large``, ``engine``.
        message: a human-readable explanation about the submitted SQL, cut to
            :data:`MAX_MESSAGE_CHARS` characters.

    >>> error = QueryError("timeout", "query ran longer than 5 s")
    >>> error.category, str(error)
    ('timeout', 'timeout: query ran longer than 5 s')
    """

    def __init__(self, category: QueryErrorCategory, message: str) -> None:
        check(category, QUERY_ERROR_CATEGORIES, "query error category")
        message = bounded_text(message)
        super().__init__(f"{category}: {message}")
        self.category = category
        self.message = message


@runtime_checkable
class Engine(Protocol):
    """A sandboxed, read-only connection to one database.

    >>> import os, tempfile
    >>> from ambitab_gym.verify.sqlite import SQLiteEngine, build_sqlite
    >>> path = os.path.join(tempfile.mkdtemp(), "t.sqlite")
    >>> build_sqlite("CREATE TABLE t(x INTEGER);", path)
    >>> isinstance(SQLiteEngine(path), Engine)
    True
    """

    name: str

    def execute(self, sql: str, *, limits: Limits | None = None) -> QueryResult: ...

    def close(self) -> None: ...


def process_stat(pid: int) -> tuple[str, str] | None:
    """``(state, start time)`` of a process from ``/proc/<pid>/stat`` (fields 3 and 22; the
    start time counts clock ticks since boot), or None where that file cannot be read (no such
    process, a system without ``/proc``, ``hidepid``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read()
        # the command name (field 2) is in parentheses and may hold spaces and parentheses
        fields = data[data.rindex(b")") + 2 :].split()
        return fields[0].decode("ascii"), fields[19].decode("ascii")
    except (OSError, ValueError, IndexError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def process_alive(pid: int, start: str = "") -> bool:
    """Whether process ``pid`` (started at ``start``, ``/proc``'s clock ticks, when known) still
    runs: a zombie (killed, not yet reaped) is dead, and so is a pid now held by a process that
    started at another time (pid reuse). Where ``/proc`` cannot tell (another system, another
    user's process under ``hidepid``), a signal 0 decides; without ``start`` the pid decides."""
    stat = process_stat(pid)
    if stat is None:
        return _pid_alive(pid)
    state, started = stat
    if state in ("Z", "X", "x"):
        return False
    return start in ("", "0") or started == start
