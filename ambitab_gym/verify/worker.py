"""Killable worker processes that run untrusted SQL, and the pieces both sides share.

An engine (:class:`ambitab_gym.verify.duckdb.DuckDBEngine`, and
:class:`ambitab_gym.verify.sqlite.SQLiteEngine` for statements outside its in-process fast path)
starts this file as a script (``python -I worker.py REQUEST_FD RESPONSE_FD``) through
:class:`WorkerProcess` and talks to it over two pipes. A query that exhausts memory, crashes the
engine, or runs long inside one built-in function call (where no interrupt reaches it) takes only
this process down: the parent kills it when it overruns and starts a fresh one.

Run as the worker script, this module imports nothing from ``ambitab_gym`` (the worker starts
fast and alone; only the parent's :class:`WorkerStartError` joins the package's exception tree).
It is also imported by the parent for the shared pieces:

* :class:`WorkerProcess` - the parent's handle on one worker: start, query with a deadline, kill.
* :class:`SQLiteSession` - a sandboxed SQLite connection (in the engine's process or a worker's).
* :class:`Watchdog` - one thread that calls an interrupt callback when a deadline passes.
* :func:`safe_loads` - unpickles worker replies, admitting plain data types only.
* :func:`sql_text_problem` - SQL text no engine should see (lone surrogates, NUL characters).
* :func:`cut` - an engine message cut to a bounded size before it crosses the pipe.
* :func:`serve` - the worker's request loop (``main`` runs it).
* :func:`write_message`, :class:`MessageReader` - the framing both sides use on the pipes.

Protocol (pickled tuples): the parent first sends ``{"kind", "path", "sys_path", "config",
"headroom_mb"}`` and gets ``("ready", version)``; then ``("query", sql, timeout_s, max_rows,
max_bytes, seconds_left)`` is answered by ``("ok", columns, rows)`` or ``("error", category,
message)``. Each message is one length-prefixed pickle (:mod:`multiprocessing.connection`'s
framing): one ``write`` per message, one ``read`` for a reply up to 64 KiB. A query costs the
parent four system calls (the fork check's ``getpid``, a write, a poll, a read) and no
``waitpid``: a worker that ended between two queries is found by the next request (its write
fails, or the worker's end closes before the worker took it), which a fresh worker then runs.
Whether the worker took a request is exact, not guessed from the pipe: the worker counts the
requests it has read into a shared 8-byte page (one store per request), so a request that a
killed worker's last ``read`` swallowed in the kernel - a fatal signal is acted on only when the
read returns - counts as never run, and a query that crashed the worker counts as run. The
worker frees the result and closes the query's cursor after the reply has left.

Each side blocks in ``poll`` until the other writes: polling the pipe before blocking bought
nothing (benchmarks/RESULTS.md, DuckDB transport), since a wake-up costs less than the polling.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import io
import math
import mmap
import os
import pickle
import re
import select
import struct
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from urllib.parse import quote

__all__ = [
    "SQLITE_FAST_FUNCTIONS",
    "MessageReader",
    "SQLiteSession",
    "Watchdog",
    "WorkerProcess",
    "WorkerSlot",
    "WorkerStartError",
    "cut",
    "result_bytes",
    "safe_loads",
    "serve",
    "sql_text_problem",
    "write_message",
]

#: Longest message a worker sends (the same bound as ``ambitab_gym.verify.base``).
MAX_MESSAGE_CHARS = 1_000


def cut(text: object, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``str(text)`` cut to at most ``limit`` characters, marking the cut.

    Engines echo the submitted SQL in their messages, so a message is cut before it crosses the
    pipe (``ambitab_gym.verify.base.bounded_text`` does the same on the parent's side).

    >>> cut("short")
    'short'
    >>> cut("y" * 10_000, limit=40)
    'yyyyyyyy... [9,992 more characters cut]'
    """
    text = str(text)
    if len(text) <= limit:
        return text
    marker_template = "... [{:,} more characters cut]"
    keep = max(0, limit - len(marker_template.format(len(text))))
    return text[:keep] + marker_template.format(len(text) - keep)


def sql_text_problem(sql: str) -> tuple[str, str] | None:
    """``(category, message)`` when SQL text cannot be handed to an engine as it is, else None.

    A lone surrogate cannot be encoded as UTF-8 and a NUL character ends the text early for
    some engines (DuckDB would run only what comes before it), so both are refused up front as
    ``syntax`` errors on every engine.

    >>> sql_text_problem("SELECT 1") is None
    True
    >>> sql_text_problem("SELECT '\\ud800'")
    ('syntax', 'the SQL text is not valid Unicode (a lone surrogate U+D800 at character 8); submit plain UTF-8 text')
    >>> sql_text_problem("SELECT 1\\x00; DROP TABLE t")
    ('syntax', 'the SQL text contains a NUL character (at character 8); remove it')
    """
    if "\x00" in sql:
        where = sql.index("\x00")
        return "syntax", f"the SQL text contains a NUL character (at character {where}); remove it"
    if not sql.isascii():
        try:
            sql.encode("utf-8")
        except UnicodeEncodeError as error:
            code = ord(sql[error.start])
            return (
                "syntax",
                f"the SQL text is not valid Unicode (a lone surrogate U+{code:04X} at character "
                f"{error.start}); submit plain UTF-8 text",
            )
    return None


_PER_CELL_BYTES = 40  # a pointer and a small Python object (int, float, None shares one)
_PER_ROW_BYTES = 56  # the row's tuple


def result_bytes(rows: list) -> int:
    """An estimate of the memory ``rows`` take: text and blob lengths plus a per-cell overhead.

    This is what ``Limits.max_result_bytes`` caps; it is computed chunk by chunk while fetching.

    >>> result_bytes([("abc", 1), (None, b"xy")])
    277
    """
    if not rows:
        return 0
    widths = set(map(len, rows))
    if len(widths) != 1:  # ragged (never a query result): row by row
        return sum(_row_bytes(row) for row in rows)
    total = len(rows) * (_PER_ROW_BYTES + _PER_CELL_BYTES * widths.pop())
    for column in zip(*rows, strict=True):  # column by column: numbers and NULLs cost no more
        kinds = set(map(type, column))
        if not kinds & _SIZED:
            continue
        if kinds <= _TEXT:
            total += sum(map(len, filter(None, column)))
        else:
            total += sum(_cell_bytes(value) for value in column)
    return total


_TEXT = frozenset({str, bytes, type(None)})
_SIZED = frozenset({str, bytes, list, tuple, dict})


def _cell_bytes(value) -> int:
    kind = type(value)
    if kind is str or kind is bytes:
        return len(value)
    if kind is list or kind is tuple or kind is dict:
        return _nested_bytes(value)
    return 0


def _row_bytes(row) -> int:
    return _PER_ROW_BYTES + _PER_CELL_BYTES * len(row) + sum(_cell_bytes(v) for v in row)


def _nested_bytes(value) -> int:
    if isinstance(value, dict):
        return sum(_nested_bytes(k) + _nested_bytes(v) for k, v in value.items()) + 64
    if isinstance(value, (list, tuple)):
        return sum(_nested_bytes(v) for v in value) + 56
    if isinstance(value, (str, bytes)):
        return len(value) + _PER_CELL_BYTES
    return _PER_CELL_BYTES


def _too_large(max_bytes: int) -> tuple:
    return _error(
        "too_large",
        f"the result is larger than {max_bytes / 2**20:g} MiB; select fewer or shorter values "
        "(aggregate, filter or LIMIT)",
    )


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


# The allowed classes themselves, looked up once (a reply names a few of them each time).
_SAFE_OBJECTS = {
    (module, name): getattr(sys.modules[module], name) for module, name in _SAFE_CLASSES
}


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: D401 - pickle hook
        found = _SAFE_OBJECTS.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"worker reply holds a forbidden type {module}.{name}")
        return found


def safe_loads(data: bytes):
    """Unpickle a worker reply that may only hold plain data (no code, no arbitrary classes).

    Example:
        >>> import datetime, pickle
        >>> safe_loads(pickle.dumps(("ok", ("d",), [(datetime.date(2024, 1, 2),)])))
        ('ok', ('d',), [(datetime.date(2024, 1, 2),)])
        >>> safe_loads(pickle.dumps(eval))
        Traceback (most recent call last):
        ...
        _pickle.UnpicklingError: worker reply holds a forbidden type builtins.eval
    """
    return _SafeUnpickler(io.BytesIO(data)).load()


_LENGTH = struct.Struct("!i")  # multiprocessing.connection's framing: a signed 32-bit length,
_LONG_LENGTH = struct.Struct("!Q")  # or -1 and then an unsigned 64-bit one
_READ_SIZE = 1 << 16  # one read takes a whole small message (header and payload together)
_COUNT = struct.Struct("Q")  # the worker's count of requests read, in the shared page


def write_message(fd: int, payload: bytes) -> None:
    """Write one length-prefixed message to a blocking file descriptor (a pipe).

    The framing is :mod:`multiprocessing.connection`'s; a message up to 64 KiB leaves in one
    ``write`` (header and payload together), a longer one without copying its payload.

    Raises:
        OSError: the reader is gone (``BrokenPipeError``).

    Example:
        >>> read_end, write_end = os.pipe()
        >>> write_message(write_end, b"hello")
        >>> os.read(read_end, 100)
        b'\\x00\\x00\\x00\\x05hello'
        >>> os.close(read_end); os.close(write_end)
    """
    size = len(payload)
    header = _LENGTH.pack(size) if size < 0x7FFFFFFF else _LENGTH.pack(-1) + _LONG_LENGTH.pack(size)
    if size <= _READ_SIZE:
        _write_all(fd, header + payload)
    else:
        _write_all(fd, header)
        _write_all(fd, payload)


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written < len(data):  # a blocking pipe writes everything unless a signal cut it short
        view = memoryview(data)
        while written < len(data):
            written += os.write(fd, view[written:])


class MessageReader:
    """Reads length-prefixed messages (:func:`write_message`) from a blocking file descriptor.

    A small message costs one ``read``: the reader takes up to 64 KiB at once and keeps what
    belongs to the next message; a large one is read straight into a buffer of its size.

    Args:
        fd: the read end of a pipe.

    Example:
        >>> read_end, write_end = os.pipe()
        >>> write_message(write_end, b"one"); write_message(write_end, b"two")
        >>> reader = MessageReader(read_end)
        >>> reader.read(100), reader.buffered, reader.read(100), reader.buffered
        (b'one', True, b'two', False)
        >>> os.close(write_end)
        >>> reader.read(100)
        Traceback (most recent call last):
        ...
        EOFError
        >>> os.close(read_end)
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._data = b""

    @property
    def buffered(self) -> bool:
        """Whether bytes of a next message were already read (a poll would not see them)."""
        return bool(self._data)

    def _more(self, data: bytes, need: int) -> bytes:
        while len(data) < need:
            chunk = os.read(self.fd, _READ_SIZE)
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def read(self, max_bytes: int) -> bytes | bytearray:
        """The next message's payload (blocks until it is complete).

        Raises:
            EOFError: the writer closed its end (before or inside a message).
            OSError: the message is longer than ``max_bytes`` (as ``Connection.recv_bytes``).
        """
        data = self._data or os.read(self.fd, _READ_SIZE)
        if not data:
            raise EOFError
        data = self._more(data, 4)
        (size,) = _LENGTH.unpack_from(data)
        start = 4
        if size == -1:
            data = self._more(data, 12)
            (size,) = _LONG_LENGTH.unpack_from(data, 4)
            start = 12
        if size < 0 or size > max_bytes:
            self._data = b""
            raise OSError("bad message length")
        end = start + size
        if len(data) >= end:
            self._data = data[end:]
            return data[start:end]
        self._data = b""
        body = bytearray(size)
        view = memoryview(body)
        have = len(data) - start
        view[:have] = data[start:]
        while have < size:  # exactly the rest: nothing of a next message is taken
            count = os.readv(self.fd, [view[have:]])
            if not count:
                raise EOFError
            have += count
        return body


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
        # Condition's own lock (an RLock, as by default); arming takes it directly, without the
        # Condition's Python-level __enter__ (a few microseconds per query with cold caches).
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
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

    def arm(self, timeout_s: float) -> None:
        """Start a job of at most ``timeout_s`` seconds (what :meth:`job` does on entry)."""
        with self._lock:
            self.fired = False
            self._deadline = time.monotonic() + timeout_s
            # Wake the thread only when it would otherwise sleep past the new deadline: back-to-
            # back quick jobs then cost no thread switch at all.
            if self._deadline < self._wake_at:
                self._cond.notify()

    def disarm(self) -> None:
        """End the current job (what :meth:`job` does on exit)."""
        with self._lock:
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
        self._dog.arm(self._timeout)
        return self

    def __exit__(self, *exc: object) -> None:
        self._dog.disarm()


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


# -- SQLite ------------------------------------------------------------------------------------

#: Functions whose cost per call stays below about half a millisecond with arguments no longer
#: than :data:`SQLITE_FAST_LENGTH` (measured; ``instr`` and ``replace`` are quadratic in the
#: length, 0.4 ms at 10,000 characters but 8 s at 1,000,000). A statement that calls any other
#: function (``printf``/``format``, whose ``%.*c`` loops over a precision no length limit bounds;
#: ``trim`` with a character set, 22 ms at 10,000; the JSON functions, ...) runs in a killable
#: worker process instead of the engine's own process.
SQLITE_FAST_FUNCTIONS = frozenset(
    {
        # aggregates and window functions: one virtual-machine step per row
        "avg", "count", "group_concat", "string_agg", "max", "min", "sum", "total",
        "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
        "first_value", "last_value", "nth_value",
        # scalar functions, bounded through the length of their arguments
        "abs", "char", "coalesce", "glob", "hex", "ifnull", "iif", "instr", "length", "octet_length",
        "like", "likelihood", "likely", "unlikely", "lower", "upper", "nullif", "quote", "random",
        "randomblob", "replace", "round", "sign", "substr", "substring", "typeof", "unicode",
        "zeroblob",
        # dates
        "date", "time", "datetime", "julianday", "strftime", "unixepoch", "timediff",
        # math
        "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "ceiling", "cos",
        "cosh", "degrees", "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow",
        "power", "radians", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
    }
)  # fmt: skip
_SQLITE_DENIED_FUNCTIONS = frozenset(
    {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
)
#: The longest text or blob in the fast path: with it every admitted call takes at most about
#: half a millisecond. A statement that needs longer values (a longer value read from the
#: database included) reruns in the worker, with :data:`SQLITE_LENGTH`.
SQLITE_FAST_LENGTH = 10_000
#: The longest text or blob in the worker (and so anywhere).
SQLITE_LENGTH = 1_000_000
# Lowered limits from SQLite's "Defense Against the Dark Arts" (besides the length).
_SQLITE_LIMITS = [
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
#: Virtual-machine instructions between deadline checks. In the fast path a check is at most
#: this many admitted calls (each bounded by the short length) away: under half a second.
SQLITE_PROGRESS_EVERY = 1_000
_FETCH_CHUNK = 1_000
_SQLITE_SLOW = ("slow",)
_SQLITE_RECURSIVE = 33  # SQLITE_RECURSIVE, missing from older ``sqlite3`` modules


def sqlite_fetch(cursor, width: int, length_limit: int, max_rows: int, max_bytes: int):
    """Fetch a SQLite cursor's rows under the row and byte caps (the read path and write tasks).

    Rows come in chunks small enough that one chunk of the longest possible values (every cell
    at ``length_limit``) stays within ``max_bytes``, so the fetching process holds little more
    than the cap. Returns the rows, or an ``("error", category, message)`` tuple.
    """
    widest_row = max(1, width) * (length_limit + _PER_CELL_BYTES)
    chunk = max(1, min(_FETCH_CHUNK, max_bytes // widest_row))
    rows: list[tuple] = []
    # No value is longer than the length limit, so while the rows fetched so far would fit
    # even at that width, their exact size (result_bytes) need not be counted.
    per_row_bound = widest_row + _PER_ROW_BYTES
    size = 0
    exact = False
    part = cursor.fetchmany(chunk)
    while part:
        rows.extend(part)
        if len(rows) > max_rows:
            return _error("too_many_rows", f"result has more than {max_rows} rows")
        if exact:
            size += result_bytes(part)
        elif len(rows) * per_row_bound > max_bytes:
            size, exact = result_bytes(rows), True
        if size > max_bytes:
            return _too_large(max_bytes)
        if len(part) < chunk:  # fetchmany returns a short chunk only at the end
            break
        part = cursor.fetchmany(chunk)
    return rows


class SQLiteSession:
    """A sandboxed, read-only SQLite connection, following "Defense Against the Dark Arts".

    The file opens through a ``mode=ro&immutable=1`` URI; an authorizer admits reads only (no
    writes, ATTACH, PRAGMA, transactions, extension or file functions); length and complexity
    limits are lowered; a progress handler stops a query at its deadline; rows are fetched in
    chunks sized so that the result never takes much more than ``max_bytes``.

    Args:
        path: the database file.
        fast: the engine's in-process fast path: only :data:`SQLITE_FAST_FUNCTIONS` and values up
            to :data:`SQLITE_FAST_LENGTH` long; :meth:`run` answers ``("slow",)`` for a statement
            that needs more (the caller reruns it in a worker, where the session is not fast).
        heap_limit_mb: cap SQLite's heap (process-wide, so only in a worker process).

    Example:
        >>> import os, sqlite3, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "s.sqlite")
        >>> sqlite3.connect(path).executescript("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);")
        <sqlite3.Cursor object at ...>
        >>> session = SQLiteSession(path, fast=True)
        >>> session.run("SELECT sum(x) FROM t", 5.0, 100, 2**20)
        ('ok', ('sum(x)',), [(3,)])
        >>> session.run("SELECT printf('%d', x) FROM t", 5.0, 100, 2**20)
        ('slow',)
        >>> session.run("DELETE FROM t", 5.0, 100, 2**20)[:2]
        ('error', 'rejected')
        >>> session.close()
    """

    def __init__(self, path: str | os.PathLike, *, fast: bool, heap_limit_mb: int = 0) -> None:
        import sqlite3

        self._sqlite3 = sqlite3
        self.fast = fast
        self.length_limit = SQLITE_FAST_LENGTH if fast else SQLITE_LENGTH
        self._deadline = math.inf
        self.timed_out = False
        self._refused = False
        self._slow = False
        uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro&immutable=1"
        connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            connection.execute("PRAGMA query_only = ON")
            connection.execute("PRAGMA trusted_schema = OFF")
            if heap_limit_mb > 0:
                connection.execute(f"PRAGMA hard_heap_limit = {int(heap_limit_mb) * 2**20}")
            if hasattr(connection, "setlimit"):  # Python >= 3.11
                for name, value in _SQLITE_LIMITS:
                    if hasattr(sqlite3, name):
                        connection.setlimit(getattr(sqlite3, name), value)
                connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.length_limit)
            connection.set_authorizer(self._authorize)
            connection.set_progress_handler(self._progress, SQLITE_PROGRESS_EVERY)
        except BaseException:
            connection.close()
            raise
        self.connection = connection

    def _authorize(self, action: int, arg1, arg2, db_name, trigger) -> int:
        sqlite3 = self._sqlite3
        if action == sqlite3.SQLITE_FUNCTION:
            name = (arg2 or "").lower()
            if name in _SQLITE_DENIED_FUNCTIONS:
                self._refused = True
                return sqlite3.SQLITE_DENY
            if self.fast and name not in SQLITE_FAST_FUNCTIONS:
                self._slow = True
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, _SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        self._refused = True
        return sqlite3.SQLITE_DENY

    def _progress(self) -> int:
        if time.monotonic() > self._deadline:
            self.timed_out = True
            return 1
        return 0

    def run(
        self,
        sql: str,
        timeout_s: float,
        max_rows: int,
        max_bytes: int,
        seconds_left: float | None = None,
    ) -> tuple:
        """Run one statement: ``("ok", columns, rows)``, ``("error", category, message)``, or
        ``("slow",)`` (fast path only) when it must run in a worker."""
        left = timeout_s if seconds_left is None else seconds_left
        self.timed_out = self._refused = self._slow = False
        self._deadline = time.monotonic() + max(0.0, left)
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql)
            columns = tuple(d[0] for d in cursor.description or ())
            rows = sqlite_fetch(cursor, len(columns), self.length_limit, max_rows, max_bytes)
            if rows[:1] == ("error",):
                return rows
            return ("ok", columns, rows)
        except self._sqlite3.Error as error:
            return self._classify(error, timeout_s)
        except MemoryError:
            return _error("too_large", "the query needs more memory than allowed")
        except (OverflowError, ValueError) as error:
            return _error("runtime", str(error))
        finally:
            self._deadline = math.inf
            cursor.close()

    def _classify(self, error: Exception, timeout_s: float) -> tuple:
        message = str(error)
        lowered = message.lower()
        if self.timed_out or "interrupted" in lowered:
            return _error("timeout", f"query ran longer than {timeout_s:g} s")
        if self._refused or any(
            w in lowered for w in ("authorization denied", "prohibited", "readonly")
        ):
            return _error(
                "rejected", f"only read-only single SELECT statements are allowed ({message})"
            )
        if self._slow:
            return _SQLITE_SLOW
        if "one statement at a time" in lowered:
            return _error("rejected", "submit exactly one SQL statement")
        if self.fast and ("too big" in lowered or lowered == "sql logic error"):
            # The worker admits values up to SQLITE_LENGTH. A bare "SQL logic error" is what
            # SQLite says when its own message outgrew the short length (a 60,000-character
            # name in "no such column: ..."): the worker gives the real message.
            return _SQLITE_SLOW
        if isinstance(error, self._sqlite3.OperationalError) and (
            "syntax error" in lowered
            or "incomplete input" in lowered
            or "unrecognized token" in lowered
        ):
            return _error("syntax", message)
        if any(w in lowered for w in ("too big", "too many", "too complex", "too large")):
            return _error("too_large", message)
        if "out of memory" in lowered:
            return _error("too_large", f"the query needs more memory than allowed ({message})")
        if "not authorized" in lowered:
            return _error(
                "rejected", f"only read-only single SELECT statements are allowed ({message})"
            )
        return _error("runtime", message)

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


def _error(category: str, message: str) -> tuple:
    return ("error", category, cut(message))


# -- DuckDB ------------------------------------------------------------------------------------


def _duckdb_classify(duckdb, error: BaseException, timed_out: bool, timeout_s: float) -> tuple:
    message = str(error).strip()
    if timed_out or isinstance(error, (duckdb.InterruptException, KeyboardInterrupt)):
        return _error("timeout", f"query ran longer than {timeout_s:g} s")
    if isinstance(error, (MemoryError, duckdb.OutOfMemoryException)):
        return _error("too_large", f"the query needs more memory than allowed ({message[:200]})")
    if isinstance(error, duckdb.ParserException):
        if "single SELECT statement" in message:  # query('<not a SELECT>')
            return _error(
                "rejected", f"only read-only single SELECT statements are allowed ({message})"
            )
        return _error("syntax", message)
    if isinstance(error, duckdb.PermissionException):
        return _error("rejected", f"access outside the database is not allowed ({message})")
    if "read-only mode" in message or "configuration has been locked" in message:
        return _error(
            "rejected", f"only read-only single SELECT statements are allowed ({message})"
        )
    return _error("runtime", message)


def _skip_blank(text: str, pos: int = 0) -> int:
    """The position of the first character at or after ``pos`` that is neither whitespace nor
    inside a comment (``--`` to the line end; ``/* */``, nested as DuckDB and PostgreSQL
    nest them; an unclosed one runs to the end). Linear in the text."""
    end = len(text)
    while pos < end:
        if text[pos].isspace():
            pos += 1
        elif text.startswith("--", pos):
            newline = text.find("\n", pos)
            pos = end if newline < 0 else newline + 1
        elif text.startswith("/*", pos):
            depth, pos = 1, pos + 2
            opening = closing = -1  # the next "/*" and "*/" at or after pos, found once each
            while depth:
                if closing < pos:
                    closing = text.find("*/", pos)
                    if closing < 0:
                        return end
                if 0 <= opening < pos or opening == -1:
                    opening = text.find("/*", pos)
                    if opening < 0:
                        opening = end
                if opening < closing:
                    depth, pos = depth + 1, opening + 2
                else:
                    depth, pos = depth - 1, closing + 2
        else:
            break
    return pos


_WORD = re.compile(r"[A-Za-z_]+")
#: Words that belong to a statement's name after its first word (``COPY FROM DATABASE``,
#: ``IMPORT DATABASE``, ``UPDATE EXTENSIONS``, ``FORCE CHECKPOINT``, ``SET VARIABLE``).
_NAME_WORDS = frozenset({"FROM", "DATABASE", "EXTENSIONS", "CHECKPOINT", "VARIABLE"})


def _statement_name(kind: str | None, sql: str) -> str:
    """The name of a refused statement, for its message: DuckDB's statement type, or the
    statement's own first words where that type names another statement (``COPY FROM
    DATABASE`` and ``IMPORT DATABASE`` parse as ``PRAGMA``, ``CHECKPOINT`` as ``CALL``,
    ``INSTALL`` as ``LOAD``, ``USE`` as ``SET``) or has no name in this API (``UPDATE
    EXTENSIONS``).

    >>> _statement_name("PRAGMA", "/* x */ copy from database a to b"), _statement_name("DELETE", "DELETE FROM t")
    ('COPY FROM DATABASE', 'DELETE')
    >>> _statement_name(None, "UPDATE EXTENSIONS (httpfs)"), _statement_name("INSERT", "WITH a AS (SELECT 1) INSERT INTO t FROM a")
    ('UPDATE EXTENSIONS', 'INSERT')
    """
    words: list[str] = []
    pos = _skip_blank(sql)
    while len(words) < 3:
        found = _WORD.match(sql, pos)
        if found is None or (words and found.group().upper() not in _NAME_WORDS):
            break
        words.append(found.group().upper())
        pos = _skip_blank(sql, found.end())
    if kind is not None and (not words or words[0] in ("WITH", kind.split("_")[0])):
        return kind
    return " ".join(words)[:40] or str(kind or "an unnamed statement")


#: Catalog functions, views and settings whose values hold the database file's absolute path
#: (the cache under the user's data home): ``duckdb_databases()`` and the views over it
#: (``duckdb_databases``, ``pragma_database_list``), ``duckdb_settings()`` and ``pg_settings``
#: (the setting ``allowed_paths`` lists the file when external access is off); and the calls
#: that run a name or SQL built at run time (``query_table``, ``json_execute_serialized_sql``).
#: ``query(...)`` and ``current_setting(...)`` are admitted with one plain string literal only,
#: whose text this same search has read.
_LOCATION = re.compile(
    r"duckdb_databases|database_list|duckdb_settings|pg_settings|allowed_paths"
    r"|allowed_directories|query_table|json_execute_serialized_sql|\b(?:query|current_setting)\b"
)
#: One of these is in every text :data:`_LOCATION` finds anything in: most texts hold none and
#: skip the search (a pattern of many alternatives, tried at every character).
_LOCATION_HINTS = ("duckdb_", "database_list", "setting", "allowed_", "query", "json_execute")
_LITERAL_CALL = re.compile(r"\(\s*'(?:[^']|'')*'\s*\)")


def _location_probe(sql: str) -> str | None:
    """The name in ``sql`` that could read where the database file lies, or None.

    >>> _location_probe("SELECT path FROM duckdb_databases()"), _location_probe("SELECT 1")
    ('duckdb_databases', None)
    >>> _location_probe("SELECT * FROM query('SELECT setseed(0.5)')") is None
    True
    >>> _location_probe("SELECT * FROM query('SELECT path FROM duck' || 'db_databases()')")
    'query'
    >>> _location_probe("SELECT query, current_setting('TimeZone') FROM log") is None
    True
    """
    sql = sql.lower()  # names are case-insensitive, also in quotes
    if not any(hint in sql for hint in _LOCATION_HINTS):
        return None
    for found in _LOCATION.finditer(sql):
        name = found.group()
        if name not in ("query", "current_setting"):
            return name
        pos = found.end()
        if sql.startswith('"', pos):  # a quoted name: "query"(...)
            pos += 1
        while pos < len(sql) and sql[pos].isspace():
            pos += 1
        if sql.startswith(("/*", "--"), pos):  # a comment between a name and its call
            return name
        if sql.startswith("(", pos) and _LITERAL_CALL.match(sql, pos) is None:
            return name  # called with anything but one plain literal ('..' || .., E'\x..')
    return None


def _location_refusal(name: str) -> tuple:
    return _error("rejected", f"reading where the database file lies is not allowed (got {name})")


#: Parsed ``SELECT`` statements a DuckDB worker keeps, by SQL text (least recently used out).
#: The parse and its verdict depend only on the text and DuckDB's version (the parsing
#: connection never runs a query and its settings are locked); executing a kept statement runs
#: a copy of it (DuckDB's ``Statement`` hands out a copy per execution), so nothing a query
#: does reaches the kept one. A repeated text skips DuckDB's parser (65-240 us a query).
PARSED_CACHE_ENTRIES = 256
#: Longest text whose parse is kept: at most 256 x 4,096 characters of SQL, about 18 MB of
#: parse trees (measured: 18 bytes per character of SQL text).
PARSED_CACHE_MAX_CHARS = 4_096


class _DuckDBSession:
    """The worker's DuckDB database; every query runs on a fresh cursor (no session state).

    The cursor a query used is closed, and the next query's fresh one opened, in :meth:`tidy`,
    which the worker calls after the reply is sent: the parent is not kept waiting for them.
    A ``SELECT`` statement's parse is kept by its text (:data:`PARSED_CACHE_ENTRIES`).
    """

    def __init__(self, duckdb, path: str, config: dict) -> None:
        self.duckdb = duckdb
        self.connection = duckdb.connect(path, read_only=True, config=config)
        self._cursor = None
        self._spent = None  # the last query's cursor, until tidy() closes it
        self._fresh = self.connection.cursor()  # nothing ever ran on it
        self._parsed: dict[str, object] = {}  # SQL text -> its SELECT statement, oldest first
        self.watchdog = Watchdog(self._interrupt)

    def tidy(self) -> None:
        """Close the last query's cursor and open the next one (after the reply left)."""
        spent, self._spent = self._spent, None
        if spent is not None:
            with contextlib.suppress(Exception):
                spent.close()
        if self._fresh is None:
            self._fresh = self.connection.cursor()

    def _interrupt(self) -> None:
        cursor = self._cursor
        if cursor is not None:
            cursor.interrupt()

    def parse(self, sql: str, timeout_s: float):
        """The single ``SELECT`` statement ``sql`` holds (kept for its next use), or an error
        reply: DuckDB's own parser counts and classifies the statements."""
        statement = self._parsed.pop(sql, None)
        if statement is None:
            problem = sql_text_problem(sql)
            if problem is not None:
                return _error(*problem)
            duckdb = self.duckdb
            try:
                statements = self.connection.extract_statements(sql)
            except Exception as error:  # parser errors come back here
                return _duckdb_classify(duckdb, error, False, timeout_s)
            if len(statements) != 1:
                return _error("rejected", "submit exactly one SQL statement")
            try:
                kind = statements[0].type
            except ValueError:  # a statement type this DuckDB's Python API has no name for
                kind = None
            if kind != duckdb.StatementType.SELECT:
                # kind None: e.g. UPDATE EXTENSIONS, which used to kill the worker
                name = _statement_name(None if kind is None else kind.name, sql)
                return _error(
                    "rejected",
                    f"only read-only single SELECT statements are allowed (got {name})",
                )
            probe = _location_probe(sql)
            if probe is not None:
                return _location_refusal(probe)
            statement = statements[0]
            if len(sql) > PARSED_CACHE_MAX_CHARS:
                return statement
            if len(self._parsed) >= PARSED_CACHE_ENTRIES:
                del self._parsed[next(iter(self._parsed))]
        self._parsed[sql] = statement  # the most recently used last
        return statement

    def run(self, sql: str, timeout_s: float, max_rows: int, max_bytes: int) -> tuple:
        statement = self.parse(sql, timeout_s)
        if type(statement) is tuple:
            return statement
        duckdb, watchdog = self.duckdb, self.watchdog
        # A fresh cursor is a fresh client context: nothing a query sets (setseed, variables,
        # prepared statements) reaches the next one; the database settings stay locked.
        self.tidy()  # a no-op after the worker's own tidy()
        cursor, self._fresh = self._fresh, None
        try:
            self._cursor = cursor
            watchdog.arm(timeout_s)
            try:
                cursor.execute(statement)  # parsed once, above: not again from the text
                columns = tuple(d[0] for d in cursor.description or ())
                reply = self._fetch(cursor, columns, max_rows, max_bytes)
            finally:
                watchdog.disarm()
            if watchdog.fired:
                return _error("timeout", f"query ran longer than {timeout_s:g} s")
            return reply
        except BaseException as error:  # noqa: BLE001 - every failure becomes a reply
            return _duckdb_classify(duckdb, error, watchdog.fired, timeout_s)
        finally:
            self._cursor = None
            self._spent = cursor  # closed by tidy(), once the reply is on its way

    @staticmethod
    def _fetch(cursor, columns: tuple, max_rows: int, max_bytes: int) -> tuple:
        rows: list = []
        size = 0
        chunk = 256
        while True:
            part = cursor.fetchmany(chunk)
            if not part:
                break
            rows.extend(part)
            if len(rows) > max_rows:
                return _error("too_many_rows", f"result has more than {max_rows} rows")
            part_size = result_bytes(part)
            size += part_size
            if size > max_bytes:
                return _too_large(max_bytes)
            if len(part) < chunk:  # fetchmany returns a short chunk only at the end
                break
            # Next chunk: what the rows so far suggest fits in a quarter of what is left.
            per_row = max(1, part_size // len(part))
            chunk = max(1, min(_FETCH_CHUNK * 2, (max_bytes - size) // (4 * per_row)))
        return ("ok", columns, _plain_rows(rows))

    def close(self) -> None:
        self.watchdog.stop()
        self.tidy()
        self.connection.close()


# -- write tasks: scratch states ------------------------------------------------------------------


def load_taskrun():
    """:mod:`ambitab_gym.verify.taskrun`, loaded by path (the worker imports no package)."""
    import importlib.util

    name = "_ambitab_taskrun"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, _WORKER_FILE.parent / "taskrun.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def _capped_rows(cursor, max_rows: int, max_bytes: int, fail) -> list:
    rows: list = []
    size = 0
    while True:
        part = cursor.fetchmany(256)
        if not part:
            return rows
        rows.extend(part)
        if len(rows) > max_rows:
            raise fail("too_many_rows", f"result has more than {max_rows} rows")
        size += result_bytes(part)
        if size > max_bytes:
            raise fail("too_large", _too_large(max_bytes)[2])


# Read-only PRAGMAs a test case may use to look at a scratch schema (their argument names a
# table or index; they never write).
_SQLITE_TASK_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
     "foreign_key_list", "table_list"}
)  # fmt: skip


class _SQLiteScratch:
    """A private in-memory copy of a SQLite database (``deserialize`` of the file's bytes).

    Writes are admitted on the copy only: the authorizer refuses ``ATTACH`` (also ``VACUUM
    INTO``, which attaches its target), ``DETACH``, every ``PRAGMA`` but a few read-only
    schema ones, extension loading and the file functions; temporary tables stay in memory.
    """

    dialect = "sqlite"

    def __init__(self, taskrun, data: bytes, limits: tuple, hard_stop: Watchdog) -> None:
        import sqlite3

        self._sqlite3 = sqlite3
        self._fail = taskrun.StatementError
        self.max_rows, self.max_bytes = limits
        self._hard_stop = hard_stop
        self._deadline = math.inf
        self.timed_out = self._refused = False
        connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        connection.deserialize(data)
        connection.execute("PRAGMA trusted_schema = OFF")
        connection.execute("PRAGMA temp_store = MEMORY")
        for name, value in _SQLITE_LIMITS:
            if hasattr(sqlite3, name) and name not in (
                "SQLITE_LIMIT_TRIGGER_DEPTH",
                "SQLITE_LIMIT_VARIABLE_NUMBER",
            ):
                connection.setlimit(getattr(sqlite3, name), value)
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_LENGTH)
        connection.set_authorizer(self._authorize)
        connection.set_progress_handler(self._progress, SQLITE_PROGRESS_EVERY)
        self.conn = connection

    def _authorize(self, action: int, arg1, arg2, db_name, trigger) -> int:
        sqlite3 = self._sqlite3
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _SQLITE_DENIED_FUNCTIONS:
            self._refused = True
            return sqlite3.SQLITE_DENY
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            self._refused = True
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() not in _SQLITE_TASK_PRAGMAS:
            self._refused = True
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def _progress(self) -> int:
        if time.monotonic() > self._deadline:
            self.timed_out = True
            return 1
        return 0

    def split(self, sql: str) -> list[str]:
        return load_taskrun().split_statements(sql, "sqlite")

    def check(self, statement: str) -> None:
        pass  # the authorizer and the limits hold on every statement

    def savepoint(self):
        return lambda: None

    def explain_cost(self, statement: str, timeout_s: float) -> float:
        return 0.0

    def run(self, statement: str, timeout_s: float):
        self.timed_out = self._refused = False
        self._deadline = time.monotonic() + timeout_s
        cursor = self.conn.cursor()
        # The progress handler stops the statement at its deadline; a built-in call that no
        # progress handler reaches (printf with a huge precision, instr on long text) meets the
        # read path's hard stop instead: the worker answers timeout and exits.
        self._hard_stop.arm(hard_stop_s(timeout_s))
        try:
            cursor.execute(statement)
            if cursor.description is None:
                return None
            rows = sqlite_fetch(
                cursor, len(cursor.description), SQLITE_LENGTH, self.max_rows, self.max_bytes
            )
            if rows[:1] == ("error",):
                raise self._fail(rows[1], rows[2])
            return rows
        except self._sqlite3.Error as error:
            message = str(error)
            lowered = message.lower()
            if self.timed_out or "interrupted" in lowered:
                raise self._fail("timeout", f"query ran longer than {timeout_s:g} s") from None
            if self._refused or "not authorized" in lowered or "prohibited" in lowered:
                raise self._fail(
                    "rejected", cut(f"not allowed in the sandbox ({message})")
                ) from None
            if "one statement at a time" in lowered:
                raise self._fail("rejected", "submit one statement at a time") from None
            if isinstance(error, self._sqlite3.OperationalError) and (
                "syntax error" in lowered
                or "incomplete input" in lowered
                or "unrecognized token" in lowered
            ):
                raise self._fail("syntax", cut(message)) from None
            if any(w in lowered for w in ("too big", "too many", "too large", "out of memory")):
                raise self._fail("too_large", cut(message)) from None
            raise self._fail("runtime", cut(message)) from None
        except MemoryError:
            raise self._fail("too_large", "the query needs more memory than allowed") from None
        except (OverflowError, ValueError) as error:
            raise self._fail("runtime", cut(error)) from None
        finally:
            self._hard_stop.disarm()
            self._deadline = math.inf
            cursor.close()

    def close(self) -> None:
        self.conn.close()


# Statement types refused in a DuckDB scratch copy (besides what its locked settings refuse).
_DUCKDB_TASK_REFUSED = ("ATTACH", "DETACH", "LOAD", "EXPORT", "COPY", "COPY_DATABASE",
                        "PRAGMA", "SET", "EXTENSION")  # fmt: skip


#: A write's first word, after what :func:`_skip_blank` skips (one pattern with the comments
#: in it backtracked exponentially through the ways of splitting ``/**//**/...``).
_DML_HEAD = re.compile(r"(?:INSERT|UPDATE|DELETE)\b", re.I)


class _DuckDBScratch:
    """A private in-memory copy of a DuckDB database for one task.

    The worker's DuckDB instance (sandboxed as the read path is: no external access, no
    extensions, settings locked) holds only the corpus file, attached read-only (its default
    in-memory database is detached, so nothing writable outlives a task); per task
    a fresh in-memory database is attached, the file copied into it (``COPY FROM DATABASE``),
    made the default of a fresh cursor, and detached afterwards.
    """

    dialect = "duckdb"

    def __init__(self, taskrun, session: _TaskSession, limits: tuple) -> None:
        self.duckdb = session.duckdb
        self._fail = taskrun.StatementError
        self.max_rows, self.max_bytes = limits
        session.scratch_count += 1
        self._name = f"ambitab_scratch_{session.scratch_count}"
        self._instance = session.instance
        self._instance.execute(f"ATTACH ':memory:' AS {self._name}")
        try:
            self._instance.execute(f"COPY FROM DATABASE ambitab_source TO {self._name}")
            cursor = self._instance.cursor()
            cursor.execute(f"USE {self._name}")
        except BaseException:
            self.close()
            raise
        self.conn = cursor
        self._dog = session

    def split(self, sql: str) -> list[str]:
        try:
            return [s.query for s in self.conn.extract_statements(sql) if s.query.strip()]
        except Exception:  # a parser error: run() reports it with its category
            return [sql] if sql.strip() else []

    def check(self, statement: str) -> None:
        try:
            parsed = self.conn.extract_statements(statement)
        except Exception:
            return  # run() reports the parser error
        for item in parsed:
            try:
                kind = item.type.name
            except ValueError:  # a statement type this API cannot name (UPDATE EXTENSIONS)
                name = _statement_name(None, statement)
                raise self._fail("rejected", f"not allowed in the sandbox (got {name})") from None
            if kind in _DUCKDB_TASK_REFUSED:
                name = _statement_name(kind, item.query)
                raise self._fail("rejected", f"not allowed in the sandbox (got {name})")
        probe = _location_probe(statement)
        if probe is not None:
            raise self._fail(*_location_refusal(probe)[1:])

    def savepoint(self):
        return lambda: None

    def explain_cost(self, statement: str, timeout_s: float) -> float:
        return 0.0

    def run(self, statement: str, timeout_s: float):
        duckdb = self.duckdb
        cursor = self.conn
        dog = self._dog
        dog.current = cursor
        try:
            with dog.watchdog.job(timeout_s):
                cursor.execute(statement)
                description = cursor.description
                if description is None or (
                    len(description) == 1
                    and description[0][0] == "Count"
                    and _DML_HEAD.match(statement, _skip_blank(statement)) is not None
                ):
                    rows = None  # a write's row count: no result rows (as upstream's driver)
                else:
                    rows = _capped_rows(cursor, self.max_rows, self.max_bytes, self._fail)
            if dog.watchdog.fired:
                raise self._fail("timeout", f"query ran longer than {timeout_s:g} s")
            return rows
        except self._fail:
            raise
        except BaseException as error:  # noqa: BLE001
            reply = _duckdb_classify(duckdb, error, dog.watchdog.fired, timeout_s)
            raise self._fail(reply[1], reply[2]) from None
        finally:
            dog.current = None

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        self._instance.execute(f"DETACH DATABASE IF EXISTS {self._name}")


class _PostgresScratch:
    """A session on a scratch PostgreSQL database (cloned from a template by the parent) as the
    agent role: one transaction, never committed; each statement under a savepoint (a failed
    one is undone alone, as upstream's commit-per-statement runner does); transaction control
    and ``COPY`` refused."""

    dialect = "postgres"

    def __init__(self, taskrun, conninfo: str, limits: tuple, total_s: float) -> None:
        import psycopg

        self.psycopg = psycopg
        self.taskrun = taskrun
        self._fail = taskrun.StatementError
        self.max_rows, self.max_bytes = limits
        connection = psycopg.connect(conninfo, autocommit=True)
        idle_ms = int(total_s * 1000) + 10_000
        connection.execute(
            f"BEGIN READ WRITE; SET LOCAL idle_in_transaction_session_timeout = {idle_ms}"
        )
        self._raw = connection
        self.conn = _NoCommit(connection)
        self._savepoints = 0

    def split(self, sql: str) -> list[str]:
        return self.taskrun.split_statements(sql, "postgres")

    def check(self, statement: str) -> None:
        word = self.taskrun.first_keyword(statement)
        rest = statement
        if word == "PREPARE":
            rest = statement.upper()
        if (
            word in self.taskrun.TRANSACTION_WORDS
            or word == "COPY"
            or (word == "PREPARE" and re.search(r"\bTRANSACTION\b", rest))
        ):
            raise self._fail(
                "rejected",
                f"not allowed in the sandbox (got {word}): the task runs as one "
                "transaction that the verifier ends",
            )

    def _execute(self, statement: str, timeout_s: float):
        cursor = self._raw.cursor()
        try:
            self._raw.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
            # binary=True: the extended protocol, so the server parses exactly this one
            # statement (the transaction-control check above cannot be bypassed by a second
            # one). The result is held by libpq, inside this process's address-space cap.
            cursor.execute(statement, binary=True)
            if cursor.description is None:
                return None
            return _capped_rows(cursor, self.max_rows, self.max_bytes, self._fail)
        finally:
            cursor.close()

    def run(self, statement: str, timeout_s: float):
        psycopg = self.psycopg
        self._savepoints += 1
        name = f"ambitab_{self._savepoints}"
        self._raw.execute(f"SAVEPOINT {name}")
        try:
            rows = self._execute(statement, timeout_s)
        except self._fail:
            self._undo(name)
            raise
        except psycopg.Error as error:
            self._undo(name)
            raise self._classify(error, timeout_s) from None
        except MemoryError:
            self._undo(name)
            raise self._fail("too_large", "the query needs more memory than allowed") from None
        if self._raw.info.transaction_status not in (2, 3):  # INTRANS, INERROR
            raise self._fail("engine", "the scratch transaction ended early")
        self._raw.execute(f"RELEASE SAVEPOINT {name}")
        return rows

    def _undo(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self._raw.execute(f"ROLLBACK TO SAVEPOINT {name}")

    def savepoint(self):
        self._savepoints += 1
        name = f"ambitab_{self._savepoints}"
        self._raw.execute(f"SAVEPOINT {name}")
        return lambda: self._undo(name)

    def explain_cost(self, statement: str, timeout_s: float) -> float:
        rows = self.run("EXPLAIN (FORMAT JSON) " + statement, timeout_s) or []
        plan = rows[0][0] if rows else None
        if isinstance(plan, str):
            import json

            plan = json.loads(plan)
        if isinstance(plan, list) and plan:
            return float(plan[0].get("Plan", {}).get("Total Cost", 0.0))
        return 0.0

    def _classify(self, error, timeout_s: float):
        errors = self.psycopg.errors
        diag = getattr(error, "diag", None)
        message = cut(((diag.message_primary if diag is not None else None) or str(error)).strip())
        if isinstance(error, (errors.QueryCanceled, errors.LockNotAvailable)):
            return self._fail("timeout", f"query ran longer than {timeout_s:g} s")
        if isinstance(error, (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction)):
            return self._fail("rejected", f"not allowed in the sandbox ({message})")
        if isinstance(error, errors.SyntaxError):
            return self._fail("syntax", message)
        if isinstance(
            error,
            (
                errors.ProgramLimitExceeded,
                errors.OutOfMemory,
                errors.DiskFull,
                errors.ConfigurationLimitExceeded,
            ),
        ):
            return self._fail("too_large", message)
        if error.sqlstate is None or error.sqlstate.startswith(("08", "57P")):
            return self._fail("engine", f"the PostgreSQL connection failed: {message}")
        return self._fail("runtime", message)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._raw.close()  # never committed: the server rolls the transaction back


class _NoCommit:
    """The scratch connection as test cases get it: ``commit()``/``rollback()`` do nothing (the
    verifier ends the one transaction)."""

    def __init__(self, connection) -> None:
        self._connection = connection

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __getattr__(self, name: str):
        return getattr(self._connection, name)


class _TaskSession:
    """The worker's side of write tasks: a fresh scratch state per task, then
    :func:`~ambitab_gym.verify.taskrun.run_task`."""

    def __init__(self, kind: str, path: str, config: dict) -> None:
        self.kind = kind
        self.path = path
        self.config = config
        self.taskrun = load_taskrun()
        self.current = None
        self.watchdog = Watchdog(self._interrupt)
        self._data: bytes | None = None
        self.retire = False
        if kind == "sqlite-task":
            import sqlite3

            self.hard_stop = Watchdog(self._stop_overrun)
            self._timeout_s = 0.0

            self.version = sqlite3.sqlite_version
            heap_limit_mb = int(config.get("heap_limit_mb", 0))
            if heap_limit_mb > 0:
                probe = sqlite3.connect(":memory:")
                probe.execute(f"PRAGMA hard_heap_limit = {heap_limit_mb * 2**20}")
                probe.close()
            # The file is immutable while a corpus is in use: its bytes are read once.
            with open(path, "rb") as source:
                self._data = source.read()
        elif kind == "duckdb-task":
            import duckdb

            self.duckdb = duckdb
            self.version = duckdb.__version__
            self.scratch_count = 0
            settings = {
                k: v
                for k, v in config.items()
                if k not in ("enable_external_access", "lock_configuration")
            }
            instance = duckdb.connect(":memory:", config=settings)
            quoted = "'" + path.replace("'", "''") + "'"
            instance.execute(f"ATTACH {quoted} AS ambitab_source (READ_ONLY)")
            # No writable database outlives a task: the default in-memory one goes, and each
            # task's scratch copy is detached when the task ends.
            instance.execute("USE ambitab_source")
            instance.execute("DETACH memory")
            instance.execute("SET enable_external_access = false")
            instance.execute("SET lock_configuration = true")
            self.instance = instance
        else:
            import psycopg

            self.version = psycopg.__version__

    def _interrupt(self) -> None:
        cursor = self.current
        if cursor is not None:
            cursor.interrupt()

    def _stop_overrun(self) -> None:
        """The hard stop of a SQLite statement in a write task (from the watchdog thread, while
        the statement still runs): answer ``timeout`` and end the worker, as the parent kills
        the read path's worker; the parent starts a fresh one for the next task."""
        reply = ("task", False, "timeout", f"query ran longer than {self._timeout_s:g} s")
        try:
            if _RESPONSE_FD is not None:
                write_message(_RESPONSE_FD, pickle.dumps(reply))
        finally:
            os._exit(0)

    def run(self, task: dict, timeout_s: float, max_rows: int, max_bytes: int, seconds_left=None):
        taskrun = self.taskrun
        limits = (max_rows, max_bytes)
        try:
            if self.kind == "sqlite-task":
                self._timeout_s = timeout_s
                adapter = _SQLiteScratch(taskrun, self._data, limits, self.hard_stop)
            elif self.kind == "duckdb-task":
                adapter = _DuckDBScratch(taskrun, self, limits)
            else:
                adapter = _PostgresScratch(
                    taskrun, task["conninfo"], limits, float(task.get("total_s", timeout_s))
                )
        except MemoryError:
            return ("task", False, "too_large", "the database copy needs more memory than allowed")
        except Exception as error:  # noqa: BLE001
            return ("task", False, "engine", cut(f"the scratch copy could not be made: {error}"))
        try:
            return taskrun.run_task(adapter, task, timeout_s)
        except taskrun.StatementError as error:
            return ("task", False, error.category, cut(error.message))
        except MemoryError:
            return ("task", False, "too_large", "the task needs more memory than allowed")
        finally:
            try:
                adapter.close()
            finally:
                if self.kind == "duckdb-task" and not self._clean():
                    self.retire = True

    def _clean(self) -> bool:
        """Whether the DuckDB instance holds nothing but the read-only source (a task that left
        another database attached retires the worker)."""
        try:
            databases = {
                row[0]
                for row in self.instance.execute(
                    "SELECT database_name FROM duckdb_databases()"
                ).fetchall()
            }
        except Exception:  # noqa: BLE001
            return False
        return databases == {"ambitab_source", "system", "temp"}

    def close(self) -> None:
        self.watchdog.stop()
        hard_stop = getattr(self, "hard_stop", None)
        if hard_stop is not None:
            hard_stop.stop()
        instance = getattr(self, "instance", None)
        if instance is not None:
            instance.close()


# -- the parent's side -------------------------------------------------------------------------

_WORKER_FILE = Path(__file__).resolve()
_ENV_KEEP = ("PATH", "LD_LIBRARY_PATH", "SYSTEMROOT", "TMPDIR", "LANG", "LC_ALL")


if __name__ == "__main__":  # the worker script imports nothing from ambitab_gym (starts fast)

    class WorkerStartError(RuntimeError):
        """A worker process could not start (never raised inside the worker itself)."""

else:  # the parent: the package's one exception tree
    from ambitab_gym.errors import EngineError

    class WorkerStartError(EngineError, RuntimeError):
        """A worker process could not start (or open its database); an
        :class:`~ambitab_gym.errors.EngineError` (category ``engine``) and a ``RuntimeError``."""


def _shared_page() -> int:
    """A file descriptor of an anonymous 8-byte file that parent and worker both map (the
    worker's count of requests read): a memfd where the platform has one, else an unlinked
    temporary file."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("ambitab-worker-count", os.MFD_CLOEXEC)
    else:  # pragma: no cover - macOS
        import tempfile

        with tempfile.TemporaryFile() as file:
            fd = os.dup(file.fileno())
    os.ftruncate(fd, _COUNT.size)
    return fd


class WorkerProcess:
    """The parent's handle on one worker process and its two pipes.

    Args:
        kind: ``"duckdb"`` or ``"sqlite"``.
        path: the database file the worker opens read-only.
        config: DuckDB settings (ignored for SQLite).
        headroom_mb: address space the worker may use above what it uses after start-up.
        start_timeout_s: how long to wait for ``("ready", version)``.

    Example:
        >>> import os, sqlite3, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "w.sqlite")
        >>> sqlite3.connect(path).executescript("CREATE TABLE t(x); INSERT INTO t VALUES (7);")
        <sqlite3.Cursor object at ...>
        >>> worker = WorkerProcess("sqlite", path, {}, headroom_mb=512)
        >>> worker.query(("query", "SELECT x FROM t", 5.0, 10, 2**20, 5.0), wait_s=10)
        ('ok', ('x',), [(7,)])
        >>> worker.kill()
    """

    def __init__(
        self,
        kind: str,
        path: str | os.PathLike,
        config: dict,
        *,
        headroom_mb: int,
        start_timeout_s: float = 60.0,
    ) -> None:
        self.kind = kind
        self.owner = os.getpid()
        request_r, request_w = os.pipe()
        response_r, response_w = os.pipe()
        counter = _shared_page()
        env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
        try:
            self._taken = mmap.mmap(counter, _COUNT.size)
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    str(_WORKER_FILE),
                    str(request_r),
                    str(response_w),
                    str(counter),
                ],
                pass_fds=(request_r, response_w, counter),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                close_fds=True,
            )
        except BaseException:
            for fd in (request_r, request_w, response_r, response_w, counter):
                os.close(fd)
            raise
        os.close(request_r)
        os.close(response_w)
        os.close(counter)  # the mapping stays
        self.sent = 0  # requests written after the init message (the worker counts them read)
        self.requests = Connection(request_w, readable=False)
        self.responses = Connection(response_r, writable=False)
        # The pipes' own fds carry the messages (one write each way, one read for a small
        # reply); the Connection objects own the fds (closing, the gentle "close" request).
        self._request_fd = request_w
        self._reader = MessageReader(response_r)
        # One poll object for the worker's life (Connection.poll builds a selector per call).
        self._poller = select.poll()
        self._poller.register(response_r, select.POLLIN)
        sys_path = [p for p in sys.path if p and Path(p).resolve() != _WORKER_FILE.parent]
        init = {
            "kind": kind,
            "path": str(path),
            "sys_path": sys_path,
            "config": config,
            "headroom_mb": headroom_mb,
        }
        try:
            self.requests.send_bytes(pickle.dumps(init))
            reply = self.receive(start_timeout_s, 2**20)
        except BaseException:
            self.kill()
            raise
        if reply is None or reply[0] != "ready":
            self.kill()
            detail = reply[2] if reply and reply[0] == "error" else "no answer"
            raise WorkerStartError(f"the {kind} worker process did not start: {detail}")
        self.version = reply[1]

    def receive(self, timeout_s: float, max_bytes: int):
        """The next reply, None on timeout; raises EOFError/OSError when the worker died."""
        if not self._reader.buffered and not self._poller.poll(max(0, math.ceil(timeout_s * 1000))):
            return None
        return safe_loads(self._reader.read(max_bytes))

    def query(self, request: tuple, wait_s: float, max_reply_bytes: int = 2**31) -> tuple | None:
        """Send a request and wait up to ``wait_s`` for its reply (None: no reply in time).

        Raises:
            EOFError, OSError: the worker died (or sent more than ``max_reply_bytes``).
            pickle.UnpicklingError: the reply held something other than plain data.
        """
        self.send(request)
        return self.receive(wait_s, max_reply_bytes)

    def send(self, request: tuple) -> None:
        """Send a request (one write).

        Raises:
            BrokenPipeError: the worker had ended before it (nothing reached it).
        """
        write_message(self._request_fd, pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))
        self.sent += 1

    def took_last_request(self) -> bool:
        """Whether the worker's own code got the last request sent (it stores its count of
        requests read in the shared page before acting on one). False for a request still in
        the pipe, and for one a worker killed inside ``read`` took out of the pipe but never
        saw (the kernel copies the bytes, then acts on the pending fatal signal)."""
        return _COUNT.unpack_from(self._taken)[0] >= self.sent

    def exit_description(self) -> str:
        """How the worker ended, for a message (waits briefly for it to be reaped)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=1.0)
        status = self.process.poll()
        if status is None:
            return "it stopped answering"
        if status < 0:
            import signal

            try:
                name = signal.Signals(-status).name
            except ValueError:
                name = f"signal {-status}"
            if -status == signal.SIGKILL:
                return f"killed by {name}, likely the kernel's out-of-memory killer"
            return f"killed by {name}"
        return f"exit status {status}"

    def kill(self) -> None:
        """Kill the process and close the pipes."""
        stop_worker(self.process, self.requests, self.responses, gentle=False)


def stop_worker(process: subprocess.Popen, *connections: Connection, gentle: bool = True) -> None:
    """Stop a worker (asking it first when ``gentle``) and close its pipes."""
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


class WorkerSlot:
    """One engine's worker process, started on first use and replaced when needed.

    A new process starts when there is none, when the last one died or overran, when this
    process was forked (the worker and its pipes belong to the parent), or when the settings
    (``key``) change. :meth:`ask` turns every way a query can fail into a reply tuple.

    Args:
        kind: ``"duckdb"`` or ``"sqlite"``.
        path: the database file.
        label: the engine's name in messages.

    Example:
        >>> import os, sqlite3, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "w.sqlite")
        >>> sqlite3.connect(path).executescript("CREATE TABLE t(x); INSERT INTO t VALUES (7);")
        <sqlite3.Cursor object at ...>
        >>> slot = WorkerSlot("sqlite", path, "SQLite")
        >>> slot.ask((1,), {}, 512, ("query", "SELECT x + 1 FROM t", 5.0, 10, 2**20, 5.0), 5.0)
        ('ok', ('x + 1',), [(8,)])
        >>> slot.close()
    """

    def __init__(self, kind: str, path: str | os.PathLike, label: str) -> None:
        self.kind = kind
        self.path = path
        self.label = label
        self.restarts = 0
        self._lock = threading.Lock()
        self._worker: WorkerProcess | None = None
        self._key: object = None
        self._finalizer: weakref.finalize | None = None

    @property
    def pid(self) -> int | None:
        """The current worker's process id (None before the first query)."""
        return self._worker.process.pid if self._worker is not None else None

    def _ensure(self, key: object, config: dict, headroom_mb: int) -> WorkerProcess:
        if self._worker is not None and self._worker.owner != os.getpid():
            if self._finalizer is not None:
                self._finalizer.detach()
            self._worker, self._finalizer = None, None
        # A worker that ended since its last reply is found by the next request's write
        # (ask()), not by a waitpid per query here.
        if self._worker is not None and self._key != key:
            self._discard()
        if self._worker is None:
            worker = WorkerProcess(self.kind, self.path, config, headroom_mb=headroom_mb)
            self._worker, self._key = worker, key
            self._finalizer = weakref.finalize(
                self, stop_worker, worker.process, worker.requests, worker.responses
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

    def ask(
        self, key: object, config: dict, headroom_mb: int, request: tuple, seconds_left: float
    ) -> tuple:
        """Run ``request`` (``("query", sql, timeout_s, max_rows, max_bytes, ...)``) in the worker.

        The worker stops the query at its deadline itself; a worker that has not answered
        ``seconds_left + 0.5 + timeout_s / 4`` seconds after the request (a built-in call that no
        interrupt reaches, a stuck process) is killed and the query fails with ``timeout``.

        Raises:
            WorkerStartError: the worker could not start.
        """
        timeout_s, max_bytes = request[2], request[4]
        with self._lock:
            for attempt in (1, 2):
                worker = self._ensure(key, config, headroom_mb)
                try:
                    worker.send(request)
                    reply = worker.receive(
                        hard_stop_s(timeout_s) - timeout_s + seconds_left, max_bytes + 2**20
                    )
                except pickle.UnpicklingError as error:
                    self._discard()
                    return _error("engine", str(error))
                except (EOFError, OSError) as error:
                    # A worker that ended after its last reply (killed, crashed, retired) is
                    # found here, not by a waitpid before every request: the write fails, or
                    # the worker's count says it never took the request. The request never
                    # ran, so a fresh worker runs it.
                    missed = isinstance(error, BrokenPipeError) or not worker.took_last_request()
                    if attempt == 1 and missed:
                        self._discard()
                        continue
                    how = worker.exit_description()
                    self._discard()
                    return _error(
                        "runtime",
                        f"the query crashed the {self.label} engine process ({how}); the "
                        "engine was restarted",
                    )
                except BaseException:  # KeyboardInterrupt while waiting: its reply would be
                    self._discard()  # read as the next request's, so the worker goes
                    raise
                if reply is None:
                    self._discard()
                    return _error("timeout", f"query ran longer than {timeout_s:g} s")
                return reply
            raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Stop the worker process (asking it first)."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
                self._finalizer = None
            self._worker = None


# -- the worker's side -------------------------------------------------------------------------


#: The worker's reply pipe (set by :func:`serve`): a write task's hard stop answers on it.
_RESPONSE_FD: int | None = None


def hard_stop_s(timeout_s: float) -> float:
    """When a statement that ignores its deadline is stopped by force: ``timeout_s + 0.5 s +
    timeout_s / 4`` (the parent kills a read-path worker then; a write task's worker ends
    itself)."""
    return timeout_s + 0.5 + 0.25 * timeout_s


def serve(request_fd: int, response_fd: int, counter_fd: int) -> int:
    """The worker's loop: open the database as asked, then answer queries until EOF; each
    request read is counted in the shared page of ``counter_fd`` (see
    :meth:`WorkerProcess.took_last_request`).

    Returns:
        The process exit status.
    """
    global _RESPONSE_FD
    _RESPONSE_FD = response_fd
    requests = Connection(request_fd, writable=False)
    responses = Connection(response_fd, readable=False)
    try:
        init = pickle.loads(requests.recv_bytes())
    except EOFError:
        return 0
    for entry in init.get("sys_path", []):
        if entry not in sys.path:
            sys.path.append(entry)
    kind = init.get("kind", "duckdb")
    headroom_mb = int(init.get("headroom_mb", 0))
    try:
        if kind.endswith("-task"):
            session = _TaskSession(kind, init["path"], init.get("config", {}))
            version = session.version
            run = session.run
        elif kind == "sqlite":
            import sqlite3

            heap_limit_mb = int(init.get("config", {}).get("heap_limit_mb", 0))
            session = SQLiteSession(init["path"], fast=False, heap_limit_mb=heap_limit_mb)
            version = sqlite3.sqlite_version
            run = session.run
        else:
            import duckdb

            session = _DuckDBSession(duckdb, init["path"], init["config"])
            version = duckdb.__version__

            def run(sql, timeout_s, max_rows, max_bytes, seconds_left=None):
                return session.run(sql, timeout_s, max_rows, max_bytes)

    except BaseException as error:  # noqa: BLE001
        responses.send_bytes(pickle.dumps(_error("engine", f"{type(error).__name__}: {error}")))
        return 1
    _limit_address_space(headroom_mb)
    responses.send_bytes(pickle.dumps(("ready", version)))
    reader = MessageReader(request_fd)
    tidy = getattr(session, "tidy", None)  # work that can wait until the reply was sent
    taken = mmap.mmap(counter_fd, _COUNT.size)
    count = 0
    while True:
        try:
            data = reader.read(2**31)
        except EOFError:
            break
        count += 1
        _COUNT.pack_into(taken, 0, count)
        request = pickle.loads(data)
        if request[0] == "close":
            break
        max_bytes = request[4]
        try:
            reply = run(*request[1:6])
        except MemoryError:
            reply = _error("too_large", "the query needs more memory than allowed")
        except BaseException as error:  # noqa: BLE001 - the worker answers, whatever happened
            reply = _error("runtime", f"{type(error).__name__}: {error}")
        try:
            payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            payload = pickle.dumps(_too_large(max_bytes))
        except Exception as error:  # a value pickle cannot write (nesting too deep, ...)
            payload = pickle.dumps(_error("runtime", f"the result cannot be returned ({error})"))
        if reply[0] == "ok" and len(payload) > max_bytes:
            payload = pickle.dumps(_too_large(max_bytes))
        write_message(response_fd, payload)
        del reply, payload  # the result's objects are freed while the parent reads it
        if tidy is not None:
            with contextlib.suppress(Exception):  # the next query's run() tidies up again
                tidy()
        if getattr(session, "retire", False):
            break  # the parent starts a fresh worker for the next request
    session.close()
    return 0


def main(argv: list[str]) -> int:
    """Entry point: ``worker.py REQUEST_FD RESPONSE_FD COUNTER_FD``."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # whatever the engine prints goes nowhere
    os.close(devnull)
    return serve(int(argv[1]), int(argv[2]), int(argv[3]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
