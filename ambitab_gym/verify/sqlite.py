"""The SQLite engine, sandboxed for untrusted SQL.

Follows SQLite's "Defense Against the Dark Arts": the database opens through a read-only,
immutable URI; an authorizer admits reads only (no writes, ATTACH, PRAGMA, transactions or
extension loading); length and complexity limits are lowered; a progress handler enforces a
wall-clock timeout; results are fetched in chunks under a byte cap.

A progress handler only runs between virtual-machine instructions, and some built-in functions
run for many seconds inside one call (``printf('%.*c', 2000000000, 'x')``, ``instr`` and
``replace`` on long text). So a statement runs in this process only when every function it
calls is one whose cost per call stays small with the fast path's shorter length limit
(:data:`~ambitab_gym.verify.worker.SQLITE_FAST_FUNCTIONS`, values up to
:data:`~ambitab_gym.verify.worker.SQLITE_FAST_LENGTH` characters); anything else runs in a
killable worker process (:mod:`ambitab_gym.verify.worker`), which is killed when it overruns.

* :class:`SQLiteEngine` - one sandboxed connection to one ``.sqlite`` file.
* :func:`build_sqlite` - build a database file from a trusted SQL script (corpus preparation).
* :func:`build_atomically` - the atomic build both file engines use (no stale temporary files).
* :func:`sweep_stale_builds` - remove what killed builders left (called before builds and opens).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ambitab_gym.verify.base import Limits, QueryError, QueryResult, process_alive, process_stat
from ambitab_gym.verify.worker import (
    SQLiteSession,
    WorkerSlot,
    WorkerStartError,
    sql_text_problem,
)

__all__ = ["SQLiteEngine", "build_atomically", "build_sqlite", "sweep_stale_builds"]


class SQLiteEngine:
    """A sandboxed, read-only SQLite connection, with a killable worker for costly statements.

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
        >>> engine.execute("SELECT printf('%03d', x) FROM t ORDER BY x").rows  # in the worker
        [('001',), ('002',)]
        >>> engine.execute("DELETE FROM t")
        Traceback (most recent call last):
        ...
        ambitab_gym.verify.base.QueryError: rejected: only read-only single SELECT statements are allowed (not authorized)
        >>> engine.close()
    """

    name = "sqlite"

    def __init__(self, path: str | Path, *, limits: Limits | None = None) -> None:
        self.path = Path(path).resolve()
        if not self.path.is_file():
            raise FileNotFoundError(f"SQLite database {self.path} does not exist")
        self.limits = limits or Limits()
        self._session: SQLiteSession | None = None
        self._lock = threading.Lock()
        self._slot = WorkerSlot("sqlite", self.path, "SQLite")
        self._task_slot = WorkerSlot("sqlite-task", self.path, "SQLite")

    @property
    def worker_pid(self) -> int | None:
        """The process id of the worker for costly statements (None until one was needed)."""
        return self._slot.pid

    @property
    def restarts(self) -> int:
        """How many times a worker was killed (overran, crashed) and replaced."""
        return self._slot.restarts

    def execute(self, sql: str, *, limits: Limits | None = None) -> QueryResult:
        """Run one read-only statement and return its result.

        Raises:
            QueryError: with category ``rejected``, ``syntax``, ``runtime``, ``timeout``,
                ``too_many_rows``, ``too_large`` or ``engine``.
        """
        limits = limits or self.limits
        if not isinstance(sql, str) or not sql.strip():
            raise QueryError("rejected", "empty SQL")
        if len(sql) > limits.max_sql_length:
            raise QueryError(
                "too_large", f"SQL text longer than {limits.max_sql_length} characters"
            )
        problem = sql_text_problem(sql)
        if problem is not None:
            raise QueryError(*problem)
        start = time.monotonic()
        with self._lock:
            if self._session is None:
                self._session = SQLiteSession(self.path, fast=True)
            reply = self._session.run(
                sql, limits.timeout_s, limits.max_rows, limits.max_result_bytes
            )
        if reply[0] == "slow":
            reply = self._in_worker(sql, limits, limits.timeout_s - (time.monotonic() - start))
        if reply[0] == "ok":
            return QueryResult(tuple(reply[1]), reply[2])
        raise QueryError(reply[1], reply[2])

    def _in_worker(self, sql: str, limits: Limits, seconds_left: float) -> tuple:
        if seconds_left <= 0:
            return ("error", "timeout", f"query ran longer than {limits.timeout_s:g} s")
        request = (
            "query",
            sql,
            limits.timeout_s,
            limits.max_rows,
            limits.max_result_bytes,
            seconds_left,
        )
        # SQLite's heap in the worker is capped at the memory limit; its address space has room
        # for that, the result and its pickled copy.
        config = {"heap_limit_mb": limits.memory_limit_mb}
        headroom_mb = 2 * limits.memory_limit_mb + 3 * limits.max_result_bytes // 2**20 + 256
        try:
            return self._slot.ask(
                (limits.memory_limit_mb, limits.max_result_bytes),
                config,
                headroom_mb,
                request,
                seconds_left,
            )
        except WorkerStartError as error:
            return ("error", "engine", str(error))

    def run_task(self, task: dict, *, limits: Limits | None = None, total_s: float) -> tuple:
        """Run a write task (:func:`~ambitab_gym.verify.taskrun.run_task`) on a private
        in-memory copy of the database, in a killable worker of its own.

        The copy is made with ``deserialize`` from the file's bytes (read once per worker); the
        file is never opened for writing. Returns ``("task", success, reason, detail)`` or
        ``("error", category, message)`` (the worker overran ``total_s`` and was killed, or
        crashed).
        """
        limits = limits or self.limits
        size_mb = self.path.stat().st_size // 2**20
        config = {"heap_limit_mb": limits.memory_limit_mb + size_mb}
        headroom_mb = (
            2 * limits.memory_limit_mb + 2 * size_mb + 3 * limits.max_result_bytes // 2**20 + 256
        )
        request = (
            "task",
            task,
            limits.timeout_s,
            limits.max_rows,
            limits.max_result_bytes,
            total_s,
        )
        key = (limits.memory_limit_mb, limits.max_result_bytes)
        try:
            return self._task_slot.ask(key, config, headroom_mb, request, total_s)
        except WorkerStartError as error:
            return ("error", "engine", str(error))

    @property
    def task_worker_pid(self) -> int | None:
        """The process id of the write-task worker (None until a write task ran)."""
        return self._task_slot.pid

    def __reduce__(self) -> tuple:
        """Pickling (Ray workers, subprocesses): the path and limits travel; the copy opens
        its own connection and workers on first use."""
        return (type(self), (self.path,), {"limits": self.limits})

    def close(self) -> None:
        """Close the connection and stop the workers (if any were started)."""
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None
        self._slot.close()
        self._task_slot.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()


# -- building cache databases ------------------------------------------------------------------

_HOST = socket.gethostname().replace(".", "_") or "host"


def _builder_tag() -> str:
    """``<pid>-<start time>`` of this process: the pid and start time name a builder, so a
    later process that got the same pid is not taken for it ("0" where there is no
    ``/proc``)."""
    pid = os.getpid()
    stat = process_stat(pid)
    return f"{pid}-{stat[1] if stat else 0}"


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{_HOST}.{_builder_tag()}.{uuid.uuid4().hex[:8]}.tmp")


def sweep_stale_builds(path: str | Path) -> list[Path]:
    """Remove what builders of ``path`` on this host left when they were killed: their
    temporary file ``.<name>.<host>.<pid>-<start>.<random>.tmp``, a journal or WAL beside it,
    an engine's spill folder. What a builder that still runs is writing stays. Never raises
    (a file that cannot be removed stays). Returns the paths removed.

    :func:`build_atomically` calls it before each build, and a corpus before it opens a
    database it finds built (the build another process finished): leftovers go at the next
    start either way.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> dead = Path(folder) / f".x.db.{_HOST}.999999999-1.abcd1234.tmp"
        >>> live = Path(folder) / f".x.db.{_HOST}.{_builder_tag()}.abcd1234.tmp"
        >>> _ = dead.write_text("left by a killed builder"), live.write_text("being built")
        >>> [p.name for p in sweep_stale_builds(Path(folder) / "x.db")] == [dead.name]
        True
        >>> os.listdir(folder) == [live.name]
        True
    """
    path = Path(path)
    removed = []
    prefix = f".{path.name}.{_HOST}."
    with contextlib.suppress(OSError):
        for entry in path.parent.iterdir():
            if not entry.name.startswith(prefix) or ".tmp" not in entry.name:
                continue
            pid, _, start = entry.name[len(prefix) :].split(".", 1)[0].partition("-")
            if not pid.isdigit() or process_alive(int(pid), start):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed


def build_atomically(path: str | Path, write: Callable[[Path], None]) -> None:
    """Build a file at ``path`` by ``write(temporary_path)``, then rename it into place.

    The file appears only when ``write`` succeeded, so concurrent builders never see a half-built
    database. The temporary file is named ``.<name>.<host>.<pid>-<start>.<random>.tmp`` next to
    ``path`` (``<start>``: the builder's start time, so a reused pid is not taken for it); what a
    builder leaves when it is killed (the file, a journal or WAL beside it, an engine's spill
    folder) is removed by the next build or corpus open on the same host once that process is
    gone or a zombie (:func:`sweep_stale_builds`).

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> target = Path(folder) / "x.db"
        >>> stale = Path(folder) / f".x.db.{_HOST}.999999999.abcd1234.tmp"
        >>> _ = stale.write_text("left by a killed builder")
        >>> build_atomically(target, lambda tmp: tmp.write_text("built"))
        >>> sorted(os.listdir(folder)), target.read_text()
        (['x.db'], 'built')
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_builds(path)
    tmp = _temp_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        for leftover in path.parent.glob(f"{tmp.name}*"):
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def build_sqlite(script: str, path: str | Path) -> None:
    """Build a SQLite database from a trusted SQL script, atomically (:func:`build_atomically`).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "demo.sqlite")
        >>> build_sqlite("CREATE TABLE t AS SELECT 42 AS answer;", path)
        >>> os.listdir(os.path.dirname(path))
        ['demo.sqlite']
    """

    def write(tmp: Path) -> None:
        connection = sqlite3.connect(tmp)
        try:
            connection.executescript(script)
            connection.commit()
        finally:
            connection.close()

    build_atomically(path, write)
