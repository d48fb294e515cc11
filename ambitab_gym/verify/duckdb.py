"""The DuckDB engine, sandboxed for untrusted SQL as DuckDB's "Securing DuckDB" guide asks.

The database file is opened read-only with external access off (no file, network, ATTACH or
COPY), extension installing/auto-loading and community extensions off, a memory limit, a thread
count and no spilling to disk (no temporary folder), and then the configuration is locked so a
query cannot undo any of it. Only a single ``SELECT`` statement is admitted (DuckDB's own parser
counts and classifies the statements). A watchdog interrupts queries that pass the timeout.

Queries run in a persistent worker process (:mod:`ambitab_gym.verify.worker`), one per engine,
whose address space is capped: a memory bomb or an engine crash kills only the worker, which the
engine restarts on the next query; a worker that ignores the interrupt is killed. Each query runs
on a fresh cursor (a fresh DuckDB client context), so nothing it sets - ``setseed``, variables -
reaches the next one. Results are capped in bytes while the worker fetches them.

* :class:`DuckDBEngine` - a sandboxed, read-only DuckDB database in a killable worker.
* :func:`build_duckdb` - build a ``.duckdb`` file from a trusted SQL script, atomically.
* :data:`SANDBOX_CONFIG` - the DuckDB settings every engine connection starts with.

The ``duckdb`` engine kind (:data:`ambitab_gym.verify.engines.ENGINES`) opens corpus databases
with :func:`_open_duckdb`; this module never imports :mod:`ambitab_gym.corpora` (corpora depend
on engines, not the reverse).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ambitab_gym.verify.base import Limits, QueryError, QueryResult
from ambitab_gym.verify.sqlite import build_atomically
from ambitab_gym.verify.worker import WorkerSlot, WorkerStartError, sql_text_problem

if TYPE_CHECKING:
    from ambitab_gym.corpora.corpus import Corpus

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
    # No spilling to disk: no temporary folder next to the database (a worker killed while
    # spilling would leave it behind), and an operator over the memory limit fails instead.
    "temp_directory": "",
    "max_temp_directory_size": "0B",
    "lock_configuration": True,
}
#: The default result cap (``Limits.max_result_bytes``), kept for callers that import it.
MAX_RESULT_BYTES = Limits().max_result_bytes


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
        self._slot = WorkerSlot("duckdb", self.path, "DuckDB")
        self._task_slot = WorkerSlot("duckdb-task", self.path, "DuckDB")
        self._worker_settings: dict[Limits, tuple[tuple, dict, int]] = {}
        self._last_settings: tuple[Limits | None, tuple] = (None, ())

    def _settings(self, limits: Limits) -> tuple[tuple, dict, int]:
        last, settings = self._last_settings
        if limits is last:  # the same Limits object as last time: no hashing of its fields
            return settings
        settings = self._worker_settings.get(limits)
        if settings is None:  # Limits is frozen: a few values per engine, computed once each
            if len(self._worker_settings) >= 16:
                self._worker_settings.clear()
            settings = self._worker_settings[limits] = _worker_settings(limits)
        self._last_settings = (limits, settings)
        return settings

    @property
    def worker_pid(self) -> int | None:
        """The process id of the current worker (None before the first query)."""
        return self._slot.pid

    @property
    def restarts(self) -> int:
        """How many times the worker was killed (crashed, overran) and replaced."""
        return self._slot.restarts

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
        problem = sql_text_problem(sql)
        if problem is not None:
            raise QueryError(*problem)
        key, config, headroom_mb = self._settings(limits)
        request = (
            "query",
            sql,
            limits.timeout_s,
            limits.max_rows,
            limits.max_result_bytes,
            limits.timeout_s,
        )
        try:
            reply = self._slot.ask(key, config, headroom_mb, request, limits.timeout_s)
        except WorkerStartError as error:
            raise QueryError("engine", str(error)) from None
        if reply[0] == "ok":
            return QueryResult(tuple(reply[1]), reply[2])
        raise QueryError(reply[1], reply[2])

    def run_task(self, task: dict, *, limits: Limits | None = None, total_s: float) -> tuple:
        """Run a write task (:func:`~ambitab_gym.verify.taskrun.run_task`) on a private
        in-memory copy of the database, in a killable worker of its own.

        Per task the worker opens a new in-memory DuckDB instance, attaches the file read-only,
        copies it (``COPY FROM DATABASE``), detaches it, turns external access off and locks
        the configuration. Returns ``("task", success, reason, detail)`` or ``("error",
        category, message)``.
        """
        limits = limits or self.limits
        key, config, headroom_mb = self._settings(limits)
        request = (
            "task",
            task,
            limits.timeout_s,
            limits.max_rows,
            limits.max_result_bytes,
            total_s,
        )
        try:
            return self._task_slot.ask(key, config, headroom_mb, request, total_s)
        except WorkerStartError as error:
            return ("error", "engine", str(error))

    @property
    def task_worker_pid(self) -> int | None:
        """The process id of the write-task worker (None until a write task ran)."""
        return self._task_slot.pid

    def __reduce__(self) -> tuple:
        """Pickling (Ray workers, subprocesses): the path and limits travel; the copy starts
        its own workers on first use."""
        return (type(self), (self.path,), {"limits": self.limits})

    def close(self) -> None:
        """Stop the worker processes."""
        self._slot.close()
        self._task_slot.close()


def _worker_settings(limits: Limits) -> tuple[tuple, dict, int]:
    """``(key, config, headroom_mb)`` of the worker that runs queries under ``limits``.

    ``key`` names the settings a worker starts with (a change starts a fresh worker). An
    engine computes them once per ``Limits`` value (:meth:`DuckDBEngine._settings`).
    """
    config = dict(SANDBOX_CONFIG)
    config["memory_limit"] = f"{limits.memory_limit_mb}MB"
    config["threads"] = limits.threads
    # Room above the buffer manager's limit for allocations it does not track, and for the
    # result and its pickled copy.
    headroom_mb = (
        2 * limits.memory_limit_mb
        + 3 * limits.max_result_bytes // 2**20
        + 256
        + 64 * limits.threads
    )
    key = (limits.memory_limit_mb, limits.threads, limits.max_result_bytes)
    return key, config, headroom_mb


def build_duckdb(script: str, path: str | Path) -> None:
    """Build a DuckDB database from a trusted SQL script, atomically.

    The file appears at ``path`` only when the whole script succeeded and was checkpointed (no
    write-ahead log is left behind), so concurrent builders never see a half-built database;
    what a killed builder left is removed by the next build
    (:func:`~ambitab_gym.verify.sqlite.build_atomically`).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "demo.duckdb")
        >>> build_duckdb("CREATE TABLE t AS SELECT 42 AS answer;", path)
        >>> os.path.isfile(path), os.path.exists(path + ".wal")
        (True, False)
    """
    import duckdb

    def write(tmp: Path) -> None:
        connection = duckdb.connect(str(tmp))
        try:
            connection.execute(script)
            connection.execute("CHECKPOINT")
        finally:
            connection.close()

    build_atomically(path, write)


def _open_duckdb(corpus: Corpus, database: str, limits: Limits | None) -> DuckDBEngine:
    return DuckDBEngine(corpus.database_file(database, "duckdb"), limits=limits)
