"""A reply cache for LLM calls: the same request gets the same reply, whatever the server does.

* :class:`ReplyCache` - one SQLite file (WAL mode, a busy timeout) that many threads, worker
  processes and Ray workers on one machine read and write at once. It maps a request's key
  (:func:`request_key`) to the chat completion the server sent for it.
* :class:`CachedReply` - one stored reply.
* :func:`request_key` - the key: a SHA-256 of the request body as canonical JSON (model name,
  messages, sampling, seed, ``response_format``, ``chat_template_kwargs``, ...); the server's URL,
  the API key and timing are not part of it.
* :class:`ReplyCacheError` - a file that is not a usable reply cache (foreign, damaged, written
  by a newer version, or opened from another machine).

:class:`~ambitab_gym.llm.client.LLMClient` consults it (``LLMClient(..., cache=...)``, on the
command line ``--llm-cache PATH``): a call whose request is stored returns the stored reply
without a request, and every reply a server sends is stored before the caller reads it. When two
calls with one key race, the first stored reply wins and both return it, so every reply a run
uses is the one the cache holds. Failed calls are not stored.

This module imports nothing outside the standard library and :mod:`ambitab_gym.errors`.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ambitab_gym.errors import ConfigurationError

try:  # optional (the llm-fast extra): the stored request text is written faster
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None

__all__ = [
    "CACHE_FORMAT",
    "CACHE_VERSION",
    "CachedReply",
    "ReplyCache",
    "ReplyCacheError",
    "request_key",
]

#: What the ``cache_meta`` table of every reply cache says under ``format``.
CACHE_FORMAT = "ambitab-gym reply cache"
#: The layout version this code reads and writes (``cache_meta`` ``version``).
CACHE_VERSION = 1

_SQLITE_HEADER = b"SQLite format 3\x00"
_KEY_PREFIX = "ambitab-reply-cache/v1\n"

_SCHEMA = (
    "CREATE TABLE cache_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE replies ("
    " key TEXT PRIMARY KEY,"  # request_key(): SHA-256 hex of the canonical request body
    " model TEXT NOT NULL,"  # the request's model name (also inside request)
    " request TEXT NOT NULL,"  # the body of the attempt that was answered (JSON)
    " response TEXT NOT NULL,"  # the server's answer body, as sent
    " seed INTEGER,"  # the seed of the answered attempt (None: none sent)
    " attempts INTEGER NOT NULL,"  # HTTP attempts the call took
    " created_at REAL NOT NULL"  # seconds since the epoch
    ")",
)


class ReplyCacheError(ConfigurationError):
    """A file that cannot be used as a reply cache (the message says why and what to do).

    A :class:`~ambitab_gym.errors.ConfigurationError` (and so a ``ValueError``): the commands
    print it and exit with status 2 before any episode runs.
    """

    category = "reply_cache"


def canonical_json(body: Mapping[str, Any]) -> str:
    """A request body as canonical JSON: keys sorted, no spaces, non-ASCII kept (the standard
    library's encoder, so every machine writes the same text for the same body).

    >>> canonical_json({"b": 1, "a": [0.7, "é"]})
    '{"a":[0.7,"é"],"b":1}'
    """
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _request_text(body: Mapping[str, Any]) -> str:
    """A request body as JSON for the ``request`` column (for reading; not part of the key)."""
    if orjson is not None:
        try:
            return orjson.dumps(body).decode("utf-8")
        except TypeError:
            pass  # e.g. integers beyond 64 bits: the standard library takes them
    return json.dumps(body, ensure_ascii=False)


def request_key(body: Mapping[str, Any]) -> str:
    """The cache key of a chat-completions request body: SHA-256 (hex) of its canonical JSON.

    Everything in the body counts (model, messages, sampling, seed, ``response_format``,
    ``chat_template_kwargs``, extra fields); nothing outside it does (URL, API key, timing).

    >>> body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 1}
    >>> request_key(body) == request_key(dict(reversed(body.items())))
    True
    >>> request_key(body) == request_key({**body, "seed": 2})
    False
    """
    return hashlib.sha256((_KEY_PREFIX + canonical_json(body)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedReply:
    """One stored reply.

    Attributes:
        key: the request's key.
        response: the server's answer body (a chat completion, JSON text).
        request: the body of the attempt that was answered (JSON text).
        seed: that attempt's seed (None when none was sent).
        attempts: HTTP attempts the call took when it was made.
    """

    key: str
    response: str
    request: str
    seed: int | None
    attempts: int


class ReplyCache:
    """LLM replies stored by request, in one SQLite file shared by every process of a campaign.

    Args:
        path: the cache file; created (with its folders) when missing. An existing file must be
            a reply cache: a file that is not SQLite, a damaged one, another program's SQLite
            database or one written by a newer layout is refused (:class:`ReplyCacheError`).
        offline: answer only from the cache: a call it does not hold fails (``cache_miss``)
            instead of going to the server (``--llm-cache-only``).
        busy_timeout_s: how long a write waits for another process's write to finish.

    Concurrency: WAL mode lets readers and one writer work at once; each write is one short
    transaction, and a writer that finds the file locked waits up to ``busy_timeout_s``. Each
    thread of each process has its own connection, opened on first use; pickling keeps the path
    and settings only, so worker processes and Ray workers open the file themselves. SQLite's WAL
    mode needs every process on one machine (no network file system): a copy unpickled on
    another host refuses to open the file.

    Example:
        >>> import tempfile
        >>> cache = ReplyCache(Path(tempfile.mkdtemp()) / "replies.sqlite")
        >>> body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        >>> key = request_key(body)
        >>> cache.get(key) is None
        True
        >>> cache.put(key, body, '{"choices": []}', seed=None, attempts=1) is None  # stored
        True
        >>> cache.get(key).response, len(cache)
        ('{"choices": []}', 1)
    """

    def __init__(
        self, path: str | Path, *, offline: bool = False, busy_timeout_s: float = 60.0
    ) -> None:
        self.path = Path(path).expanduser()
        self.offline = bool(offline)
        self.busy_timeout_s = float(busy_timeout_s)
        self._host = socket.gethostname()
        self._local = threading.local()
        self._checked_pid: int | None = None
        self._lock = threading.Lock()
        self._connection()  # create or check the file now: a bad file fails before any call

    def __repr__(self) -> str:
        mode = ", offline=True" if self.offline else ""
        return f"ReplyCache({str(self.path)!r}{mode})"

    # -- pickling (worker processes, Ray workers) -------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "offline": self.offline,
            "busy_timeout_s": self.busy_timeout_s,
            "host": self._host,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = Path(state["path"])
        self.offline = bool(state["offline"])
        self.busy_timeout_s = float(state["busy_timeout_s"])
        self._host = state["host"]
        self._local = threading.local()
        self._checked_pid = None
        self._lock = threading.Lock()

    # -- opening ----------------------------------------------------------------------------------

    def _refuse(self, why: str) -> ReplyCacheError:
        return ReplyCacheError(
            f"{self.path} is not a usable ambitab-gym reply cache: {why}; pass another --llm-cache "
            "path (a missing file is created), or move this one away"
        )

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection (opened, and the file checked once per process, on first
        use)."""
        pid = os.getpid()
        local = self._local
        connection = getattr(local, "connection", None)
        if connection is not None and getattr(local, "pid", None) == pid:
            return connection
        here = socket.gethostname()
        if here != self._host:
            raise ReplyCacheError(
                f"the reply cache {self.path} was opened on {self._host} and cannot be shared "
                f"with {here}: SQLite's WAL mode needs every process on one machine; run a "
                "campaign with --llm-cache on one machine (--executor processes, or Ray workers "
                "on the driver's host)"
            )
        with self._lock:
            if self._checked_pid != pid:
                self._check()
                self._checked_pid = pid
        try:
            connection = sqlite3.connect(
                self.path, timeout=self.busy_timeout_s, isolation_level=None
            )
            connection.execute("PRAGMA synchronous=NORMAL")  # WAL: durable once committed
        except sqlite3.DatabaseError as exc:
            raise self._refuse(f"SQLite cannot open it ({exc})") from None
        local.connection = connection
        local.pid = pid
        return connection

    def _check(self) -> None:
        """Create the cache when the file is missing or empty; otherwise make sure it is one."""
        path = self.path
        try:
            with path.open("rb") as handle:
                header = handle.read(len(_SQLITE_HEADER))
        except FileNotFoundError:
            header = b""
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ReplyCacheError(f"cannot create the reply cache {path}: {exc}") from None
        except OSError as exc:
            raise ReplyCacheError(f"cannot read the reply cache {path}: {exc}") from None
        if header and header != _SQLITE_HEADER:
            raise self._refuse("it is not an SQLite database")
        try:
            connection = sqlite3.connect(path, timeout=self.busy_timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise ReplyCacheError(f"cannot open the reply cache {path}: {exc}") from None
        try:
            tables = self._tables(connection)
            if not tables:
                self._create(connection)
                tables = self._tables(connection)
            self._check_meta(connection, tables)
        except sqlite3.DatabaseError as exc:
            raise self._refuse(f"the file is damaged ({exc})") from None
        finally:
            connection.close()

    @staticmethod
    def _tables(connection: sqlite3.Connection) -> set[str]:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {str(row[0]) for row in rows}

    def _create(self, connection: sqlite3.Connection) -> None:
        """Lay out a new cache (one process does; the others find it laid out)."""
        connection.execute("PRAGMA journal_mode=WAL")  # kept in the file: every opener uses it
        connection.execute("BEGIN IMMEDIATE")
        try:
            if not self._tables(connection):  # another process may have laid it out meanwhile
                for statement in _SCHEMA:
                    connection.execute(statement)
                connection.executemany(
                    "INSERT INTO cache_meta (name, value) VALUES (?, ?)",
                    [
                        ("format", CACHE_FORMAT),
                        ("version", str(CACHE_VERSION)),
                        ("created_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
                    ],
                )
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise

    def _check_meta(self, connection: sqlite3.Connection, tables: set[str]) -> None:
        if "cache_meta" not in tables or "replies" not in tables:
            listed = ", ".join(sorted(tables))
            raise self._refuse(f"it is an SQLite database of something else (tables: {listed})")
        meta = dict(connection.execute("SELECT name, value FROM cache_meta").fetchall())
        if meta.get("format") != CACHE_FORMAT:
            raise self._refuse(
                f"its cache_meta table names the format {meta.get('format')!r}, not "
                f"{CACHE_FORMAT!r}"
            )
        version = str(meta.get("version"))
        if version != str(CACHE_VERSION):
            raise ReplyCacheError(
                f"the reply cache {self.path} has layout version {version}; this ambitab-gym "
                f"reads version {CACHE_VERSION}: use the ambitab-gym that wrote it, or another "
                "--llm-cache path"
            )

    # -- reading and writing ---------------------------------------------------------------------

    def get(self, key: str) -> CachedReply | None:
        """The reply stored for ``key``, or None."""
        try:
            row = (
                self._connection()
                .execute(
                    "SELECT response, request, seed, attempts FROM replies WHERE key = ?", (key,)
                )
                .fetchone()
            )
        except sqlite3.DatabaseError as exc:
            raise self._refuse(f"reading it failed ({exc})") from None
        return None if row is None else CachedReply(key, row[0], row[1], row[2], row[3])

    def put(
        self,
        key: str,
        request: Mapping[str, Any],
        response: str,
        *,
        seed: int | None,
        attempts: int,
    ) -> CachedReply | None:
        """Store the reply to the request of ``key`` (``request``: the body that was answered).

        Returns:
            None when this reply was stored; the reply stored before it when another call with
            the same key stored one first (the caller then uses that one, so every run reads the
            same reply for the key).
        """
        connection = self._connection()
        try:
            cursor = connection.execute(
                "INSERT OR IGNORE INTO replies "
                "(key, model, request, response, seed, attempts, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    str(request.get("model", "")),
                    _request_text(request),
                    response,
                    seed,
                    int(attempts),
                    time.time(),
                ),
            )
        except sqlite3.DatabaseError as exc:
            raise self._refuse(f"writing to it failed ({exc})") from None
        if cursor.rowcount == 1:
            return None
        return self.get(key)

    def __len__(self) -> int:
        """Replies stored."""
        try:
            return int(self._connection().execute("SELECT count(*) FROM replies").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise self._refuse(f"reading it failed ({exc})") from None

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            self._local.connection = None
            connection.close()

    def __enter__(self) -> ReplyCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
