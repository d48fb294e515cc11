"""The SQL engine kinds a corpus can run on: how to open, build and read the schema of each.

* :class:`EngineKind` - one kind: an opener ``(corpus, database, limits) -> Engine``, an optional
  builder for databases shipped as SQL scripts, the file suffix it builds, and how the agent's
  schema is read.
* :data:`ENGINES` - ``sqlite``, ``duckdb``, ``postgres``: the one table of engine names (the
  registry's ``engine`` kind lists it; corpora open databases through it).
* :func:`engine_kind` - the kind for a name; an unknown name lists the valid ones.
* :func:`register_engine` - add a kind (a plugin engine).

Openers and builders are ``"module:attr"`` references resolved on first use, so DuckDB and
psycopg are imported only when a corpus needs them. Engine modules receive the corpus as an
argument and never import :mod:`ambitab_gym.corpora`: corpora depend on engines, not the other
way round.

Example:
    >>> engine_kind("duckdb").suffix
    '.duckdb'
    >>> engine_kind("oracle-db")
    Traceback (most recent call last):
    ...
    ambitab_gym.errors.UnknownComponent: unknown engine 'oracle-db'; use one of: sqlite, duckdb, postgres
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ambitab_gym.defaults import SCHEMA_TIMEOUT_S
from ambitab_gym.errors import ConfigurationError, UnknownComponent
from ambitab_gym.verify.base import Engine, Limits

__all__ = ["ENGINES", "EngineKind", "Opener", "engine_kind", "open_sqlite", "register_engine"]

#: ``opener(corpus, database name, limits) -> Engine``; ``corpus`` offers ``database_file(name,
#: kind)``, ``options`` and ``name`` (a :class:`~ambitab_gym.corpora.Corpus`).
Opener = Callable[[Any, str, "Limits | None"], Engine]


def _resolve(target: str | Callable | None) -> Callable | None:
    if target is None or callable(target):
        return target
    module_name, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigurationError(f"cannot load engine part {target!r}: {error}") from None


@dataclass(frozen=True)
class EngineKind:
    """One engine kind.

    Attributes:
        name: ``sqlite``, ``duckdb``, ``postgres``, ...
        description: one line for ``ambitab-gym list --components``.
        factory: the opener, or its ``"module:attr"``.
        builder: ``build(script, path)`` for databases shipped as ``.sql`` scripts (or its
            reference); None when the engine does not build files (a server).
        suffix: the file suffix of built databases.
        schema_sql: the query listing the ``CREATE`` statements the agent sees; None when the
            engine reads its schema itself (``engine.schema_text()``).

    >>> engine_kind("sqlite").schema_sql is not None, engine_kind("postgres").schema_sql
    (True, None)
    """

    name: str
    description: str
    factory: str | Opener
    builder: str | Callable[[str, Path], None] | None = None
    suffix: str | None = None
    schema_sql: str | None = None

    def open(self, corpus: Any, database: str, limits: Limits | None) -> Engine:
        """A new sandboxed engine for one database of the corpus."""
        opener = _resolve(self.factory)
        assert opener is not None
        return opener(corpus, database, limits)

    def build(self, script: str, path: Path) -> None:
        """Build a database file from an SQL script.

        Raises:
            ConfigurationError: when this kind builds no files.
        """
        builder = _resolve(self.builder)
        if builder is None or self.suffix is None:
            raise ConfigurationError(f"no builder for {self.name!r} databases")
        builder(script, path)

    def sweep(self, path: Path) -> list[Path]:
        """Remove what builders of ``path`` left when they were killed mid-build (their
        temporary file, WAL or journal, spill folder); what a builder still running writes
        stays (:func:`~ambitab_gym.verify.sqlite.sweep_stale_builds`). A kind without a
        builder has nothing to sweep. Returns the paths removed."""
        if self.builder is None:
            return []
        from ambitab_gym.verify.sqlite import sweep_stale_builds

        return sweep_stale_builds(path)

    def schema_text(self, engine: Engine) -> str:
        """The ``CREATE`` statements of the engine's database, as the agent sees them."""
        if self.schema_sql is None:
            return engine.schema_text()  # type: ignore[attr-defined]
        rows = engine.execute(self.schema_sql, limits=Limits(timeout_s=SCHEMA_TIMEOUT_S)).rows
        return ";\n".join(row[0].strip().rstrip(";") for row in rows) + ";"


def open_sqlite(corpus: Any, database: str, limits: Limits | None) -> Engine:
    """Open a corpus's database with SQLite (built from its script when needed)."""
    from ambitab_gym.verify.sqlite import SQLiteEngine

    return SQLiteEngine(corpus.database_file(database, "sqlite"), limits=limits)


#: Engine kinds by name.
ENGINES: dict[str, EngineKind] = {
    "sqlite": EngineKind(
        "sqlite",
        "SQLite (stdlib): read-only URI, authorizer, progress-handler timeout",
        "ambitab_gym.verify.engines:open_sqlite",
        builder="ambitab_gym.verify.sqlite:build_sqlite",
        suffix=".sqlite",
        schema_sql=(
            "SELECT sql FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        ),
    ),
    "duckdb": EngineKind(
        "duckdb",
        "DuckDB (embedded, worker process): no external access; PostgreSQL corpora offline",
        "ambitab_gym.verify.duckdb:_open_duckdb",
        builder="ambitab_gym.verify.duckdb:build_duckdb",
        suffix=".duckdb",
        # creation order (object ids grow with creation)
        schema_sql=(
            "SELECT sql FROM (SELECT table_oid AS oid, sql FROM duckdb_tables() WHERE NOT internal "
            "UNION ALL SELECT view_oid, sql FROM duckdb_views() WHERE NOT internal) ORDER BY oid"
        ),
    ),
    "postgres": EngineKind(
        "postgres",
        "PostgreSQL server through psycopg (engine_options={'dsn': ...}): read-only role",
        "ambitab_gym.verify.postgres:_open_postgres",
    ),
}


def engine_kind(name: str) -> EngineKind:
    """The engine kind of a name.

    Raises:
        UnknownComponent: listing the valid names.
    """
    kind = ENGINES.get(name)
    if kind is None:
        raise UnknownComponent("engine", name, ENGINES)
    return kind


def register_engine(kind: EngineKind) -> None:
    """Add (or replace) an engine kind, e.g. a plugin engine.

    >>> import dataclasses
    >>> register_engine(dataclasses.replace(ENGINES["sqlite"], name="sqlite-copy"))
    >>> engine_kind("sqlite-copy").suffix
    '.sqlite'
    >>> del ENGINES["sqlite-copy"]
    """
    ENGINES[kind.name] = kind
