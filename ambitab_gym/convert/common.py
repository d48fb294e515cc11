"""Shared parts of the upstream -> AmbiTab converters.

* :class:`Drop` - one source item (or one reading of it) left out, with its reason.
* :class:`Item` - one retained source item: the records it yields (usually one AVT).
* :class:`Conversion` - what a converter returns: items, drops and manifest facts.
* :class:`BuildOptions` - the user's choices (source, databases, seed, hooks, extras).
* :class:`Workspace` - the databases of the corpus being built, materialised lazily, with a
  trusted executor for the build-time checks.
* :class:`BuildError` - a user-facing failure whose message says what to do.
* helpers: :func:`sha256_file`, :func:`seeded_rng`, :func:`slug`, :func:`progress`,
  :func:`compare_for`, :func:`read_json_or_jsonl`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ambitab_gym.records import CompareRules, TaskRecord
from ambitab_gym.verify.base import Limits, QueryError
from ambitab_gym.verify.sqlite import SQLiteEngine

__all__ = [
    "BuildError",
    "BuildOptions",
    "Conversion",
    "Drop",
    "Item",
    "MALFORMED",
    "Workspace",
    "compare_for",
    "malformed",
    "progress",
    "read_json_or_jsonl",
    "seeded_rng",
    "sha256_file",
    "slug",
]

T = TypeVar("T")


#: Errors that a malformed upstream item raises while it is converted (it becomes a drop).
MALFORMED: tuple[type[Exception], ...] = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
)


def malformed(key: str, error: Exception) -> Drop:
    """The drop for an upstream item the converter could not read.

    >>> malformed("dev.json#3", KeyError("SQL")).as_dict()
    {'item': 'dev.json#3', 'reason': 'malformed_item', 'detail': "KeyError: 'SQL'"}
    """
    return Drop(key, "malformed_item", f"{type(error).__name__}: {error}"[:300])


class BuildError(RuntimeError):
    """A build cannot proceed; the message tells the user what to change.

    Example:
        >>> str(BuildError("give the databases with --databases PATH"))
        'give the databases with --databases PATH'
    """


@dataclass(frozen=True)
class Drop:
    """A source item (or one reading of it) that the converter left out.

    Example:
        >>> Drop("validation.json#3", "equal_results", "both readings return 2 rows").reason
        'equal_results'
    """

    item: str
    reason: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        """JSON form (one line of ``dropped.jsonl``)."""
        return {"item": self.item, "reason": self.reason, "detail": self.detail}


@dataclass
class Item:
    """One source item that yields records (usually the readings of one AVT).

    Attributes:
        key: a stable name of the source item, used in drop reports.
        records: its records, in order (the first is the AVT's default reading).
        min_records: the item is dropped when fewer records survive the build checks.

    Example:
        >>> Item("dev.json#0", []).min_records
        1
    """

    key: str
    records: list[TaskRecord]
    min_records: int = 1


@dataclass
class Conversion:
    """What a converter produced, before the shared build checks.

    Example:
        >>> c = Conversion(corpus="taco", oracle="intent")
        >>> c.engine, c.dialect, c.items, c.drops
        ('sqlite', 'sqlite', [], [])
    """

    corpus: str
    oracle: str
    items: list[Item] = field(default_factory=list)
    drops: list[Drop] = field(default_factory=list)
    engine: str = "sqlite"
    dialect: str = "sqlite"
    description: str = ""
    licence: str = ""
    upstream: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    notes: dict[str, Any] = field(default_factory=dict)
    check_references: bool = True


@dataclass
class BuildOptions:
    """The user's choices for one build.

    Attributes:
        source: the upstream release (file or folder) in its native layout.
        databases: where the upstream databases are, when not inside ``source``.
        seed: seed of every random draw (resampling, copied columns, split assignment).
        show_progress: draw progress bars on stderr.
        llm_url: base URL of an OpenAI-compatible endpoint for the model-based hooks.
        model: model name for that endpoint.
        responses: a frozen-response catalog (BIRD-Interact).
        extra: converter-specific settings (e.g. ``keep_management``, ``dialect``).

    Example:
        >>> BuildOptions(source=Path("x")).seed
        0
    """

    source: Path
    databases: Path | None = None
    seed: int = 0
    show_progress: bool = False
    llm_url: str | None = None
    model: str | None = None
    responses: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file, read in chunks.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "f")
    >>> _ = open(p, "w").write("abc")
    >>> sha256_file(p)[:12]
    'ba7816bf8f01'
    """
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def seeded_rng(seed: int, *keys: str) -> np.random.Generator:
    """A generator that depends only on the seed and the given keys (order matters).

    >>> int(seeded_rng(0, "a").integers(1000)) == int(seeded_rng(0, "a").integers(1000))
    True
    """
    words = [int(seed) & 0xFFFFFFFF]
    for key in keys:
        words.append(int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16))
    return np.random.default_rng(words)


def slug(text: str, *, max_length: int = 48) -> str:
    """A lowercase identifier made of letters, digits and underscores.

    >>> slug("Signal-to-Noise Quality (SNQI)")
    'signal_to_noise_quality_snqi'
    """
    out = re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()
    return out[:max_length].rstrip("_") or "x"


def progress(
    iterable: Iterable[T], *, desc: str, total: int | None = None, enabled: bool = False
) -> Iterator[T]:
    """Iterate with a tqdm bar on stderr when enabled (never on stdout)."""
    if not enabled:
        yield from iterable
        return
    from tqdm import tqdm

    yield from tqdm(iterable, desc=desc, total=total, file=sys.stderr, leave=False)


@functools.lru_cache(maxsize=4096)
def compare_for(
    sql: str, *, dialect: str = "sqlite", float_decimals: int | None = 4
) -> CompareRules:
    """Comparison rules for a reference query: ordered when its outermost query sorts.

    >>> compare_for("SELECT a FROM t ORDER BY a").order
    'ordered'
    >>> compare_for("SELECT a FROM (SELECT a FROM t ORDER BY a)").order
    'set'
    """
    order = "set"
    try:
        import sqlglot

        tree = sqlglot.parse_one(sql, read=dialect)
        if tree is not None and tree.args.get("order") is not None:
            order = "ordered"
    except Exception:  # unparsable: fall back to a textual check of the tail
        tail = re.sub(r"\([^()]*\)", "", sql)
        if re.search(r"\border\s+by\b", tail, re.IGNORECASE):
            order = "ordered"
    return CompareRules(order=order, float_decimals=float_decimals)


def read_json_or_jsonl(path: str | Path) -> list[Any]:
    """A JSON array file or a JSON Lines file as a list.

    Raises:
        BuildError: naming the file and line of malformed JSON.
    """
    path = Path(path)
    text = path.read_text("utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise BuildError(f"{path}: invalid JSON ({error})") from None
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise BuildError(f"{path}:{number}: invalid JSON ({error.msg})") from None
    return out


# -- databases of the corpus being built ------------------------------------------------------


@dataclass
class _Database:
    suffix: str  # ".sqlite" or ".sql"
    engine: str  # "sqlite" or "duckdb"
    source: Path | None = None  # an existing file to copy at the end
    builder: Callable[[Path], None] | None = None  # writes the file
    script: str | None = None  # SQL text (DuckDB scripts)
    built: Path | None = None


class Workspace:
    """The databases of a corpus under construction, and a trusted executor for checks.

    Databases are registered by name and materialised only when needed: existing upstream
    files are read in place for checks and copied into ``databases/`` at the end; built ones
    are written into ``databases/`` on first use.

    Args:
        root: the corpus folder being written.

    Example:
        >>> import tempfile
        >>> ws = Workspace(Path(tempfile.mkdtemp()))
        >>> ws.add_built("demo", lambda p: _sqlite_from_script("CREATE TABLE t(x); INSERT INTO t VALUES (1);", p))
        >>> ws.execute("demo", "SELECT x FROM t")
        [(1,)]
        >>> ws.close()
    """

    def __init__(self, root: Path, *, timeout_s: float = 60.0) -> None:
        self.root = Path(root)
        self.db_dir = self.root / "databases"
        self.timeout_s = timeout_s
        self._dbs: dict[str, _Database] = {}
        self._sqlite: dict[str, SQLiteEngine] = {}
        self._duckdb: dict[str, Any] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._dbs

    @property
    def names(self) -> list[str]:
        return sorted(self._dbs)

    def engine_of(self, name: str) -> str:
        return self._dbs[name].engine

    def add_file(self, name: str, source: Path, *, engine: str = "sqlite") -> None:
        """Register an existing database file (copied into the corpus when used)."""
        self._dbs[name] = _Database(suffix=source.suffix or ".sqlite", engine=engine, source=source)

    def add_built(
        self, name: str, builder: Callable[[Path], None], *, suffix: str = ".sqlite"
    ) -> None:
        """Register a SQLite database that ``builder(path)`` writes."""
        self._dbs[name] = _Database(suffix=suffix, engine="sqlite", builder=builder)

    def add_script(self, name: str, script: str, *, engine: str = "duckdb") -> None:
        """Register a database shipped as a SQL script (built by the engine on first use)."""
        self._dbs[name] = _Database(suffix=".sql", engine=engine, script=script)

    def relative_file(self, name: str) -> str:
        return f"databases/{name}{self._dbs[name].suffix}"

    def path(self, name: str) -> Path:
        """A readable file of the database (the upstream file itself, or the built one)."""
        entry = self._dbs[name]
        if entry.source is not None:
            return entry.source
        if entry.built is None:
            target = self.root / self.relative_file(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            if entry.builder is not None:
                entry.builder(target)
            else:
                target.write_text(entry.script or "", encoding="utf-8")
            entry.built = target
        return entry.built

    def execute(self, name: str, sql: str, *, timeout_s: float | None = None) -> list[tuple]:
        """Run a trusted read-only query on a database; raises :class:`QueryError`."""
        entry = self._dbs[name]
        timeout = timeout_s or self.timeout_s
        if entry.engine == "sqlite":
            engine = self._sqlite.get(name)
            if engine is None:
                engine = SQLiteEngine(self.path(name), limits=Limits(timeout_s=timeout))
                self._sqlite[name] = engine
            limits = Limits(timeout_s=timeout, max_rows=1_000_000, max_sql_length=1_000_000)
            return engine.execute(sql, limits=limits).rows
        return self._execute_duckdb(name, sql, timeout)

    def _execute_duckdb(self, name: str, sql: str, timeout: float) -> list[tuple]:
        import duckdb

        connection = self._duckdb.get(name)
        if connection is None:
            connection = duckdb.connect(":memory:")
            connection.execute(self._dbs[name].script or self.path(name).read_text("utf-8"))
            self._duckdb[name] = connection
        timer = threading.Timer(timeout, connection.interrupt)
        timer.start()
        try:
            cursor = connection.cursor()
            try:
                return cursor.execute(sql).fetchall()
            finally:
                cursor.close()
        except duckdb.Error as error:
            category = "timeout" if "interrupt" in str(error).lower() else "runtime"
            raise QueryError(category, str(error).splitlines()[0]) from None
        finally:
            timer.cancel()

    def schema_text(self, name: str) -> str | None:
        """The ``CREATE`` statements of a SQLite database as the agent sees them (else None)."""
        if self._dbs[name].engine != "sqlite":
            return None
        query = (
            "SELECT sql FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        )
        try:
            rows = self.execute(name, query)
        except (QueryError, sqlite3.Error):
            return None
        return ";\n".join(row[0].strip().rstrip(";") for row in rows) + ";"

    def finalize(self, used: set[str]) -> dict[str, str]:
        """Write the used databases into ``databases/``, delete unused ones.

        Returns:
            database name -> file path relative to the corpus folder.
        """
        self.close()
        out: dict[str, str] = {}
        for name in sorted(self._dbs):
            entry = self._dbs[name]
            target = self.root / self.relative_file(name)
            if name not in used:
                if entry.built is not None:
                    entry.built.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if entry.source is not None:
                shutil.copyfile(entry.source, target)
            else:
                self.path(name)
            out[name] = self.relative_file(name)
        return out

    def close(self) -> None:
        """Close every connection opened for checks."""
        for engine in self._sqlite.values():
            engine.close()
        self._sqlite.clear()
        for connection in self._duckdb.values():
            connection.close()
        self._duckdb.clear()


def _sqlite_from_script(script: str, path: Path) -> None:
    """Write a SQLite database from a trusted script (deterministic bytes)."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA synchronous = OFF")
    try:
        connection.executescript(script)
        connection.commit()
    finally:
        connection.close()
