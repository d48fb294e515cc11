"""The DuckDB engine, sandboxed for untrusted SQL as DuckDB's "Securing DuckDB" guide asks.

The database file is opened read-only with external access off (no file, network, ATTACH or
COPY), extension installing/auto-loading and community extensions off, a memory limit, a thread
count and no spilling to disk, and then the configuration is locked so a query cannot undo any of
it. Only a single ``SELECT`` statement is admitted (DuckDB's own parser counts and classifies the
statements). A watchdog interrupts queries that pass the timeout.

Queries run in a persistent worker process (:mod:`ambitab_gym.verify.worker`), one per engine,
whose address space is capped: a memory bomb or an engine crash kills only the worker, which the
engine restarts on the next query; a worker that ignores the interrupt is killed.

* :class:`DuckDBEngine` - a sandboxed, read-only DuckDB database in a killable worker.
* :func:`build_duckdb` - build a ``.duckdb`` file from a trusted SQL script, atomically.
* :data:`SANDBOX_CONFIG` - the DuckDB settings every engine connection starts with.

Importing this module registers the ``duckdb`` engine kind with the corpora.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import threading
import uuid
import weakref
from multiprocessing.connection import Connection
from pathlib import Path

from ambitab_gym.corpora.corpus import Corpus, register_engine
from ambitab_gym.verify import worker as _worker
from ambitab_gym.verify.base import Limits, QueryError, QueryResult

__all__ = ["MAX_RESULT_BYTES", "SANDBOX_CONFIG", "DuckDBEngine", "build_duckdb"]

#: Settings from "Securing DuckDB"; ``memory_limit`` and ``threads`` come from :class:`Limits`.
SANDBOX_CONFIG: dict[str, object] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "allow_unredacted_secrets": False,
    "python_enable_replacements": False,
    "max_temp_directory_size": "0B",
    "lock_configuration": True,
}
#: A result whose serialized size exceeds this fails with ``too_large``.
MAX_RESULT_BYTES = 64 * 2**20

_WORKER_FILE = Path(_worker.__file__).resolve()
_START_TIMEOUT_S = 60.0
_ENV_KEEP = ("PATH", "LD_LIBRARY_PATH", "SYSTEMROOT", "TMPDIR", "LANG", "LC_ALL")


class _Worker:
    """One worker process and its two pipes."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.key = (limits.memory_limit_mb, limits.threads)
        self.owner = os.getpid()
        request_r, request_w = os.pipe()
        response_r, response_w = os.pipe()
        env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", str(_WORKER_FILE), str(request_r), str(response_w)],
                pass_fds=(request_r, response_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                close_fds=True,
            )
        except BaseException:
            for fd in (request_r, request_w, response_r, response_w):
                os.close(fd)
            raise
        os.close(request_r)
        os.close(response_w)
        self.requests = Connection(request_w, readable=False)
        self.responses = Connection(response_r, writable=False)
        config = dict(SANDBOX_CONFIG)
        config["memory_limit"] = f"{limits.memory_limit_mb}MB"
        config["threads"] = limits.threads
        # Room above the buffer manager's limit for allocations it does not track.
        headroom_mb = 2 * limits.memory_limit_mb + 256 + 64 * limits.threads
        sys_path = [p for p in sys.path if p and Path(p).resolve() != _WORKER_FILE.parent]
        init = {"path": str(path), "sys_path": sys_path, "config": config}
        init["headroom_mb"] = headroom_mb
        try:
            self.requests.send_bytes(pickle.dumps(init))
            reply = self.receive(_START_TIMEOUT_S)
        except BaseException:
            self.kill()
            raise
        if reply is None or reply[0] != "ready":
            self.kill()
            detail = reply[2] if reply and reply[0] == "error" else "no answer"
            raise QueryError("engine", f"the DuckDB worker did not start: {detail}")
        self.version = reply[1]

    def receive(self, timeout_s: float):
        """The next reply, None on timeout; raises EOFError when the worker died."""
        if not self.responses.poll(timeout_s):
            return None
        return _worker.safe_loads(self.responses.recv_bytes())

    def kill(self) -> None:
        _stop(self.process, self.requests, self.responses, gentle=False)


def _stop(process: subprocess.Popen, *connections: Connection, gentle: bool = True) -> None:
    if gentle and process.poll() is None:
        try:
            connections[0].send_bytes(pickle.dumps(("close",)))
            process.wait(timeout=2.0)
        except Exception:
            pass
    if process.poll() is None:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # pragma: no cover
            process.wait(timeout=5.0)
    for connection in connections:
        with contextlib.suppress(OSError):
            connection.close()


class DuckDBEngine:
    """A sandboxed, read-only DuckDB database whose queries run in a killable worker process.

    Args:
        path: the ``.duckdb`` file; it is opened read-only and never written.
        limits: default limits for :meth:`execute` (``memory_limit_mb`` and ``threads`` configure
            the worker).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "demo.duckdb")
        >>> build_duckdb("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1), (2);", path)
        >>> engine = DuckDBEngine(path)
        >>> engine.execute("SELECT x FROM t ORDER BY x").rows
        [(1,), (2,)]
        >>> engine.execute("DELETE FROM t")
        Traceback (most recent call last):
        ...
        ambitab_gym.verify.base.QueryError: rejected: only read-only single SELECT statements are allowed (got DELETE)
        >>> engine.execute("SELECT * FROM read_csv('/etc/passwd')").rows
        Traceback (most recent call last):
        ...
        ambitab_gym.verify.base.QueryError: rejected: access outside the database is not allowed ...
        >>> engine.close()
    """

    name = "duckdb"

    def __init__(self, path: str | Path, *, limits: Limits | None = None) -> None:
        self.path = Path(path).resolve()
        if not self.path.is_file():
            raise FileNotFoundError(f"DuckDB database {self.path} does not exist")
        self.limits = limits or Limits()
        self.restarts = 0
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._finalizer: weakref.finalize | None = None

    def _ensure_worker(self, limits: Limits) -> _Worker:
        key = (limits.memory_limit_mb, limits.threads)
        if self._worker is not None and self._worker.owner != os.getpid():
            # This process was forked: the worker and its pipes belong to the parent.
            if self._finalizer is not None:
                self._finalizer.detach()
            self._worker, self._finalizer = None, None
        if self._worker is not None and (
            self._worker.key != key or self._worker.process.poll() is not None
        ):
            self._discard()
        if self._worker is None:
            worker = _Worker(self.path, limits)
            self._worker = worker
            self._finalizer = weakref.finalize(
                self, _stop, worker.process, worker.requests, worker.responses
            )
        return self._worker

    def _discard(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
            self.restarts += 1

    @property
    def worker_pid(self) -> int | None:
        """The process id of the current worker (None before the first query)."""
        return self._worker.process.pid if self._worker is not None else None

    def execute(self, sql: str, *, limits: Limits | None = None) -> QueryResult:
        """Run one read-only ``SELECT`` statement in the worker and return its result.

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
        with self._lock:
            worker = self._ensure_worker(limits)
            request = ("query", sql, limits.timeout_s, limits.max_rows, MAX_RESULT_BYTES)
            try:
                worker.requests.send_bytes(pickle.dumps(request))
                # The worker interrupts at the deadline itself; the grace covers the interrupt
                # taking effect and the result travelling back.
                reply = worker.receive(limits.timeout_s + 1.0 + 0.25 * limits.timeout_s)
            except (EOFError, OSError):
                status = worker.process.poll()
                self._discard()
                raise QueryError(
                    "runtime",
                    f"the query crashed the DuckDB engine (exit status {status}, likely out of "
                    "memory); the engine was restarted",
                ) from None
            except pickle.UnpicklingError as error:
                self._discard()
                raise QueryError("engine", str(error)) from None
            if reply is None:
                self._discard()
                raise QueryError("timeout", f"query ran longer than {limits.timeout_s:g} s")
        if reply[0] == "ok":
            return QueryResult(tuple(reply[1]), reply[2])
        raise QueryError(reply[1], reply[2])

    def close(self) -> None:
        """Stop the worker process."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
                self._finalizer = None
            self._worker = None


def build_duckdb(script: str, path: str | Path) -> None:
    """Build a DuckDB database from a trusted SQL script, atomically.

    The file appears at ``path`` only when the whole script succeeded and was checkpointed (no
    write-ahead log is left behind), so concurrent builders never see a half-built database.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "demo.duckdb")
        >>> build_duckdb("CREATE TABLE t AS SELECT 42 AS answer;", path)
        >>> os.path.isfile(path), os.path.exists(path + ".wal")
        (True, False)
    """
    import duckdb

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        connection = duckdb.connect(str(tmp))
        try:
            connection.execute(script)
            connection.execute("CHECKPOINT")
        finally:
            connection.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)


def _open_duckdb(corpus: Corpus, database: str, limits: Limits | None) -> DuckDBEngine:
    return DuckDBEngine(corpus.database_file(database, "duckdb"), limits=limits)


register_engine("duckdb", _open_duckdb, build_duckdb)
