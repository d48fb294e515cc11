"""A killable worker process that runs untrusted SQL in a sandboxed DuckDB connection.

The parent (:class:`ambitab_gym.verify.duckdb.DuckDBEngine`) starts this file as a script
(``python -I worker.py REQUEST_FD RESPONSE_FD``) and talks to it over two pipes. A query that
exhausts memory, crashes the engine or ignores the interrupt takes only this process down; the
parent kills it when it overruns and starts a fresh one.

This module imports nothing from ``ambitab_gym`` (the worker starts fast and alone) and is also
imported by the parent for the shared pieces:

* :class:`Watchdog` - one thread that calls an interrupt callback when a deadline passes.
* :func:`safe_loads` - unpickles worker replies, admitting plain data types only.
* :func:`serve` - the worker's request loop (``main`` runs it).

Protocol (pickled tuples): the parent first sends ``{"path", "sys_path", "config",
"headroom_mb"}`` and gets ``("ready", version)``; then ``("query", sql, timeout_s, max_rows,
max_bytes)`` is answered by ``("ok", columns, rows)`` or ``("error", category, message)``.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import io
import math
import os
import pickle
import sys
import threading
import time
import uuid
from collections.abc import Callable

__all__ = ["Watchdog", "safe_loads", "serve"]

_SAFE_CLASSES = {
    ("builtins", name) for name in ("set", "frozenset", "bytearray", "complex", "slice", "range")
} | {
    ("datetime", "date"),
    ("datetime", "time"),
    ("datetime", "datetime"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("decimal", "Decimal"),
    ("uuid", "UUID"),
    ("uuid", "SafeUUID"),
}
_PLAIN = (type(None), bool, int, float, str, bytes)


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: D401 - pickle hook
        if (module, name) in _SAFE_CLASSES:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"worker reply holds a forbidden type {module}.{name}")


def safe_loads(data: bytes):
    """Unpickle a worker reply that may only hold plain data (no code, no arbitrary classes).

    Example:
        >>> import datetime, pickle
        >>> safe_loads(pickle.dumps(("ok", ("d",), [(datetime.date(2024, 1, 2),)])))
        ('ok', ('d',), [(datetime.date(2024, 1, 2),)])
        >>> safe_loads(pickle.dumps(print))
        Traceback (most recent call last):
        ...
        _pickle.UnpicklingError: worker reply holds a forbidden type builtins.print
    """
    return _SafeUnpickler(io.BytesIO(data)).load()


class Watchdog:
    """Calls ``interrupt()`` once a running job passes its deadline (one thread, reused).

    Args:
        interrupt: called from the watchdog thread when the current job overruns.

    Example:
        >>> import threading, time
        >>> fired = threading.Event()
        >>> dog = Watchdog(fired.set)
        >>> with dog.job(0.05):
        ...     _ = fired.wait(2)
        >>> fired.is_set(), dog.fired
        (True, True)
        >>> with dog.job(5):
        ...     pass
        >>> dog.fired
        False
        >>> dog.stop()
    """

    def __init__(self, interrupt: Callable[[], object]) -> None:
        self._interrupt = interrupt
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._wake_at = math.inf  # when the thread wakes next by itself
        self._stopped = False
        self.fired = False
        self._thread = threading.Thread(target=self._loop, name="ambitab-watchdog", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        with self._cond:
            while not self._stopped:
                if self._deadline is None:
                    self._wake_at = math.inf
                    self._cond.wait()
                    continue
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._wake_at = self._deadline
                    self._cond.wait(remaining)
                    continue
                # Deadline passed while the job is still registered: interrupt it (under the
                # lock, so the job cannot finish and a new one start in between).
                self.fired = True
                self._deadline = None
                with contextlib.suppress(Exception):  # interrupting is best effort
                    self._interrupt()

    def job(self, timeout_s: float) -> _Job:
        """A context manager that arms the watchdog for ``timeout_s`` seconds."""
        return _Job(self, timeout_s)

    def _arm(self, timeout_s: float) -> None:
        with self._cond:
            self.fired = False
            self._deadline = time.monotonic() + timeout_s
            # Wake the thread only when it would otherwise sleep past the new deadline: back-to-
            # back quick jobs then cost no thread switch at all.
            if self._deadline < self._wake_at:
                self._cond.notify()

    def _disarm(self) -> None:
        with self._cond:
            self._deadline = None  # a sleeping thread finds no job when it wakes

    def stop(self) -> None:
        """End the watchdog thread."""
        with self._cond:
            self._stopped = True
            self._cond.notify()


class _Job:
    def __init__(self, dog: Watchdog, timeout_s: float) -> None:
        self._dog = dog
        self._timeout = timeout_s

    def __enter__(self) -> _Job:
        self._dog._arm(self._timeout)
        return self

    def __exit__(self, *exc: object) -> None:
        self._dog._disarm()


def _plain(value):
    """A value the parent's :func:`safe_loads` accepts (anything exotic becomes text)."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            offset = value.utcoffset()
            value = value.replace(tzinfo=datetime.timezone(offset or datetime.timedelta(0)))
        return value
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta)):
        if isinstance(value, datetime.time) and value.tzinfo is not None:
            return value.isoformat()
        return value
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return value
    return str(value)


_UNCHANGED = {
    bool,
    int,
    float,
    str,
    bytes,
    datetime.date,
    datetime.timedelta,
    decimal.Decimal,
    uuid.UUID,
}


def _plain_rows(rows: list) -> list:
    """Rows with every cell made acceptable to :func:`safe_loads` (columns checked once each)."""
    if not rows:
        return rows
    convert = []
    for index in range(len(rows[0])):
        sample = next((row[index] for row in rows if row[index] is not None), None)
        if sample is None or type(sample) in _UNCHANGED:
            continue
        if type(sample) in (datetime.datetime, datetime.time) and sample.tzinfo is None:
            continue
        convert.append(index)
    if not convert:
        return rows
    out = []
    for row in rows:
        cells = list(row)
        for index in convert:
            cells[index] = _plain(cells[index])
        out.append(tuple(cells))
    return out


def _vm_bytes() -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _limit_address_space(headroom_mb: int) -> None:
    """Cap this process's address space: a runaway allocation fails instead of the machine."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    current = _vm_bytes()
    if current and headroom_mb > 0:
        cap = current + headroom_mb * 2**20
        with contextlib.suppress(ValueError, OSError):  # a lower hard limit is already set
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _error(category: str, message: str) -> tuple:
    return ("error", category, message)


def _classify(duckdb, error: Exception, watchdog: Watchdog, timeout_s: float) -> tuple:
    message = str(error).strip()
    if watchdog.fired or isinstance(error, (duckdb.InterruptException, KeyboardInterrupt)):
        return _error("timeout", f"query ran longer than {timeout_s:g} s")
    if isinstance(error, (MemoryError, duckdb.OutOfMemoryException)):
        return _error("too_large", f"the query needs more memory than allowed ({message[:200]})")
    if isinstance(error, duckdb.ParserException):
        return _error("syntax", message)
    if isinstance(error, duckdb.PermissionException):
        return _error("rejected", f"access outside the database is not allowed ({message})")
    if "read-only mode" in message or "configuration has been locked" in message:
        return _error(
            "rejected", f"only read-only single SELECT statements are allowed ({message})"
        )
    return _error("runtime", message)


def _run_query(duckdb, connection, watchdog: Watchdog, request: tuple) -> tuple:
    _, sql, timeout_s, max_rows, _max_bytes = request
    try:
        statements = connection.extract_statements(sql)
    except Exception as error:  # parser errors come back here
        return _classify(duckdb, error, watchdog, timeout_s)
    if len(statements) != 1:
        return _error("rejected", "submit exactly one SQL statement")
    if statements[0].type != duckdb.StatementType.SELECT:
        kind = str(statements[0].type).rsplit(".", 1)[-1]
        return _error(
            "rejected", f"only read-only single SELECT statements are allowed (got {kind})"
        )
    rows: list = []
    try:
        with watchdog.job(timeout_s):
            cursor = connection.execute(sql)
            columns = tuple(d[0] for d in cursor.description or ())
            rows = cursor.fetchmany(max_rows + 1)
            if len(rows) > max_rows:
                return _error("too_many_rows", f"result has more than {max_rows} rows")
        if watchdog.fired:
            return _error("timeout", f"query ran longer than {timeout_s:g} s")
        return ("ok", columns, _plain_rows(rows))
    except BaseException as error:  # noqa: BLE001 - every failure becomes a reply
        return _classify(duckdb, error, watchdog, timeout_s)


def serve(request_fd: int, response_fd: int) -> int:
    """The worker's loop: open the database as asked, then answer queries until EOF.

    Returns:
        The process exit status.
    """
    from multiprocessing.connection import Connection

    requests = Connection(request_fd, writable=False)
    responses = Connection(response_fd, readable=False)
    try:
        init = pickle.loads(requests.recv_bytes())
    except EOFError:
        return 0
    for entry in init.get("sys_path", []):
        if entry not in sys.path:
            sys.path.append(entry)
    try:
        import duckdb

        connection = duckdb.connect(init["path"], read_only=True, config=init["config"])
    except BaseException as error:  # noqa: BLE001
        responses.send_bytes(pickle.dumps(_error("engine", f"{type(error).__name__}: {error}")))
        return 1
    _limit_address_space(int(init.get("headroom_mb", 0)))
    watchdog = Watchdog(connection.interrupt)
    responses.send_bytes(pickle.dumps(("ready", duckdb.__version__)))
    while True:
        try:
            request = pickle.loads(requests.recv_bytes())
        except EOFError:
            break
        if request[0] == "close":
            break
        reply = _run_query(duckdb, connection, watchdog, request)
        try:
            payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            payload = pickle.dumps(_error("too_large", "the result is too large to return"))
        if reply[0] == "ok" and len(payload) > request[4]:
            payload = pickle.dumps(
                _error("too_large", f"the result is larger than {request[4] // 2**20} MiB")
            )
        del reply
        responses.send_bytes(payload)
    watchdog.stop()
    connection.close()
    return 0


def main(argv: list[str]) -> int:
    """Entry point: ``worker.py REQUEST_FD RESPONSE_FD``."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # whatever the engine prints goes nowhere
    os.close(devnull)
    return serve(int(argv[1]), int(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
