"""A corpus: records, databases and a manifest, found by env id, name or folder.

* :class:`Manifest` - the corpus's ``manifest.json``.
* :class:`Corpus` - records (by split and AVT), databases (built on demand), sandboxed engines,
  and the agent-visible spec of each record with its schema filled in.
* :func:`load_corpus` - resolve an env id, a corpus name or a folder; a corpus built into the data
  home takes precedence over the bundled sample of the same name.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ambitab_gym.corpora.home import built_corpora_dir, cache_dir
from ambitab_gym.errors import ConfigurationError, CorpusError
from ambitab_gym.records import FORMAT_VERSION, PublicSpec, RecordError, TaskRecord, load_records
from ambitab_gym.verify.base import Engine, Limits
from ambitab_gym.verify.engines import EngineKind, engine_kind

__all__ = [
    "BUNDLED_DIR",
    "ENV_IDS",
    "Corpus",
    "CorpusNotFound",
    "DatabaseEntry",
    "Manifest",
    "available_corpora",
    "corpus_name",
    "is_path_reference",
    "load_corpus",
    "resolve_corpus",
]

logger = logging.getLogger("ambitab_gym.corpora")

BUNDLED_DIR = Path(__file__).resolve().parent

#: Gymnasium env id -> corpus name.
ENV_IDS: dict[str, str] = {
    "AmbiTab-Bird-v0": "bird",
    "AmbiTab-EW-Bird-v0": "ew_bird",
    "AmbiTab-BIRD-Interact-v0": "bird_interact",
    "AmbiTab-Ambrosia-v0": "ambrosia",
    "AmbiTab-AmbiQT-v0": "ambiqt",
    "AmbiTab-TACO-v0": "taco",
}


class CorpusNotFound(CorpusError, LookupError):
    """No corpus answers to the given env id, name or path (category ``corpus_not_found``).

    >>> try:
    ...     load_corpus("no-such-corpus")
    ... except CorpusNotFound as error:
    ...     print(str(error)[:28])
    no corpus 'no-such-corpus':
    """

    category = "corpus_not_found"


class DatabaseEntry(BaseModel):
    """One database of a corpus: a file (``.sql`` script, ``.sqlite`` or ``.duckdb``).

    >>> DatabaseEntry(file="databases/hr.sql").file
    'databases/hr.sql'
    """

    model_config = ConfigDict(frozen=True, extra="allow")
    file: str
    sha256: str | None = None


class RecordsEntry(BaseModel):
    """The records file of a corpus.

    >>> RecordsEntry().file
    'records.jsonl'
    """

    model_config = ConfigDict(frozen=True, extra="allow")
    file: str = "records.jsonl"
    sha256: str | None = None


class Manifest(BaseModel):
    """A corpus's ``manifest.json``.

    >>> Manifest(name="demo", oracle="intent").engine
    'sqlite'
    """

    model_config = ConfigDict(frozen=True, extra="allow")
    name: str
    env_id: str | None = None
    version: str = "0.0.0"
    format_version: int = FORMAT_VERSION
    description: str = ""
    oracle: Literal["intent", "knowledge"]
    engine: Literal["sqlite", "duckdb", "postgres"] = "sqlite"
    dialect: Literal["sqlite", "postgres", "duckdb"] = "sqlite"
    databases: dict[str, DatabaseEntry] = Field(default_factory=dict)
    records: RecordsEntry = RecordsEntry()
    licence: str = ""
    provenance: dict = Field(default_factory=dict)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Corpus:
    """Records, databases and manifest of one corpus folder.

    Args:
        path: the corpus folder (holds ``manifest.json``).
        origin: ``bundled``, ``built`` or ``path`` - where it was found.
        limits: default limits of the engines it opens.
        engine_override: run every record on this engine kind instead of the record's own
            (e.g. ``postgres`` for BIRD-Interact when a server is given).
        options: engine options, e.g. ``{"dsn": "postgresql://..."}`` for PostgreSQL.
        engines: engine name -> :class:`~ambitab_gym.verify.engines.EngineKind` (default
            :func:`~ambitab_gym.verify.engines.engine_kind`, the table of SQLite, DuckDB and
            PostgreSQL); pass another lookup to open databases with other engines.

    Example:
        >>> corpus = load_corpus("AmbiTab-Bird-v0")
        >>> corpus.name, corpus.manifest.oracle
        ('bird', 'knowledge')
        >>> len(corpus.split("train")) > 0 and len(corpus.avts) > 0
        True
    """

    def __init__(
        self,
        path: str | Path,
        *,
        origin: str = "path",
        limits: Limits | None = None,
        engine_override: str | None = None,
        options: dict | None = None,
        engines: Callable[[str], EngineKind] = engine_kind,
    ) -> None:
        self.path = Path(path).resolve()
        self.origin = origin
        self.limits = limits
        self.engine_override = engine_override
        self.engines = engines
        self.options = dict(options or {})
        manifest_path = self.path / "manifest.json"
        if not manifest_path.is_file():
            raise CorpusNotFound(_not_a_corpus_folder(self.path))
        try:
            self.manifest = Manifest.model_validate(json.loads(manifest_path.read_text("utf-8")))
        except (ValidationError, json.JSONDecodeError) as error:
            raise RecordError(f"{manifest_path}: invalid manifest: {error}") from None
        self.records: list[TaskRecord] = load_records(self.path / self.manifest.records.file)
        self._by_id = {r.id: r for r in self.records}
        self._schemas: dict[str, str] = {}
        self._public: dict[str, PublicSpec] = {}
        self._databases_checked = False

    def check_databases(self) -> None:
        """Fail unless every record names databases the manifest lists (:func:`load_corpus`
        calls it, so a bad record fails at load, not at ``reset()``; ``validate`` reports it
        as a ``manifest`` violation instead).

        Raises:
            RecordError: naming the records file, the line, the record id and the field.
        """
        if self._databases_checked:
            return
        known = self.manifest.databases
        path = self.path / self.manifest.records.file
        for line, record in enumerate(self.records, start=1):  # record i is on line i + 1
            for field, name in (
                ("spec.database", record.spec.database),
                ("verification.database", record.verification.database),
            ):
                if name not in known:
                    raise RecordError(
                        f"{path}:{line} (record {record.id!r}): {field}: unknown database "
                        f"{name!r}; the manifest lists {sorted(known)} - add it to "
                        "manifest.json 'databases' or correct the record"
                    )
        self._databases_checked = True

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def env_id(self) -> str | None:
        return self.manifest.env_id

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"Corpus({self.name!r}, records={len(self.records)}, origin={self.origin!r})"

    def record(self, record_id: str) -> TaskRecord:
        """The record with this id.

        Raises:
            KeyError: no such record (the message names close or sample ids, see
                :meth:`record_hint`).
        """
        try:
            return self._by_id[record_id]
        except KeyError:
            message = (
                f"corpus {self.name!r} has no record {record_id!r} ({self.record_hint(record_id)})"
            )
            raise KeyError(message) from None

    def record_hint(self, record_id: object) -> str:
        """What to give instead of an unknown record id: the closest ids (else the first
        few) and the file whose ``id`` fields list them all."""
        close = difflib.get_close_matches(str(record_id), list(self._by_id), n=3)
        if close:
            ids = "closest ids: " + ", ".join(repr(i) for i in close)
        else:
            ids = "ids look like " + ", ".join(repr(r.id) for r in self.records[:3])
        where = self.path / self.manifest.records.file
        return f"{ids}; the {len(self.records)} record ids are the 'id' fields of {where}"

    @property
    def splits(self) -> list[str]:
        """Split names in first-appearance order."""
        return list(dict.fromkeys(r.split for r in self.records))

    def split(self, split: str | None) -> list[TaskRecord]:
        """Records of a split (``None`` or ``"all"``: every record)."""
        if split is None or (split == "all" and "all" not in self.splits):
            return list(self.records)
        chosen = [r for r in self.records if r.split == split]
        if not chosen:
            raise ConfigurationError(
                f"corpus {self.name!r} has no split {split!r}; it has {self.splits}"
            )
        return chosen

    @cached_property
    def avts(self) -> dict[str, list[TaskRecord]]:
        """AVT id -> its records in file order (the first is the default reading)."""
        out: dict[str, list[TaskRecord]] = {}
        for record in self.records:
            out.setdefault(record.avt_id, []).append(record)
        return out

    def siblings(self, record: TaskRecord) -> list[TaskRecord]:
        """The records of this record's AVT."""
        return self.avts[record.avt_id]

    # -- databases ---------------------------------------------------------------------------

    def engine_kind(self, record_kind: str) -> str:
        return self.engine_override or record_kind

    def database_file(self, database: str, kind: str) -> Path:
        """A database file for ``kind``, built from the shipped SQL script when needed."""
        entry = self.manifest.databases.get(database)
        if entry is None:
            raise KeyError(f"corpus {self.name!r} has no database {database!r}")
        source = self.path / entry.file
        if not source.is_file():
            raise FileNotFoundError(f"corpus {self.name!r}: database file {source} is missing")
        if source.suffix != ".sql":
            return source
        engine = self.engines(kind)
        if engine.builder is None or engine.suffix is None:
            raise ConfigurationError(f"no builder for {kind!r} databases")
        digest = _sha256(source)[:16]
        target = cache_dir() / "databases" / self.name / f"{database}-{digest}{engine.suffix}"
        if not target.is_file():
            engine.build(source.read_text("utf-8"), target)  # sweeps killed builds first
        else:  # built already (maybe by another process): a builder killed earlier left files
            engine.sweep(target)
        return target

    def open_engine(self, kind: str, database: str) -> Engine:
        """A new sandboxed engine for a database (``kind`` may be overridden by the corpus)."""
        return self.engines(self.engine_kind(kind)).open(self, database, self.limits)

    def schema_text(self, database: str) -> str:
        """The ``CREATE`` statements of a database, as the agent sees them."""
        text = self._schemas.get(database)
        if text is None:
            kind = self.engine_kind(self.manifest.engine)
            engine = self.open_engine(kind, database)
            try:
                text = self.engines(kind).schema_text(engine)
            finally:
                engine.close()
            self._schemas[database] = text
        return text

    def public_spec(self, record: TaskRecord) -> PublicSpec:
        """The record's agent-visible spec, with the schema read from the database if absent."""
        spec = self._public.get(record.id)
        if spec is None:
            spec = record.spec
            if not spec.schema_text:
                spec = spec.model_copy(update={"schema_text": self.schema_text(spec.database)})
            self._public[record.id] = spec
        return spec


def corpus_name(reference: str) -> str:
    """The corpus name for an env id (``AmbiTab-Bird-v0`` or ``ambitab_gym:AmbiTab-Bird-v0``)."""
    reference = reference.split(":", 1)[-1]
    return ENV_IDS.get(reference, reference)


def available_corpora() -> dict[str, Path]:
    """Every corpus available by name: bundled samples, overridden by built corpora.

    The working directory is never searched: a folder there is used only when passed as a path.
    """
    found: dict[str, Path] = {}
    for folder in sorted(BUNDLED_DIR.iterdir()):
        if (folder / "manifest.json").is_file():
            found[folder.name] = folder
    built = built_corpora_dir()
    if built.is_dir():
        for folder in sorted(built.iterdir()):
            if (folder / "manifest.json").is_file():
                found[folder.name] = folder
    return found


def is_path_reference(reference: str | os.PathLike) -> bool:
    """Whether a reference is explicitly a folder path rather than an env id or corpus name.

    A :class:`~pathlib.Path` (any ``os.PathLike``) is a path; so is a string that is absolute,
    starts with ``.`` or ``~``, or contains a path separator. A bare word (``ambiqt``,
    ``AmbiTab-AmbiQT-v0``) is always a name, even when a folder of that name exists in the
    working directory.

    >>> is_path_reference("ambiqt"), is_path_reference("ambitab_gym:AmbiTab-AmbiQT-v0")
    (False, False)
    >>> is_path_reference("./ambiqt"), is_path_reference("corpora/ambiqt"), is_path_reference(Path("ambiqt"))
    (True, True, True)
    """
    if isinstance(reference, os.PathLike):
        return True
    text = str(reference)
    separators = [s for s in (os.sep, os.altsep, "/") if s]
    return os.path.isabs(text) or text.startswith((".", "~")) or any(s in text for s in separators)


def _not_a_corpus_folder(path: Path, shown: str | os.PathLike | None = None) -> str:
    """Why ``path`` (given as a corpus folder, written ``shown``) is not one: nothing there, a
    file, or a folder without a manifest."""
    if not path.exists():
        return (
            f"no such folder: {shown or path} (give a corpus folder, an env id or a corpus name; "
            "`ambitab-gym list` shows the corpora)"
        )
    if not path.is_dir():
        return f"{path} is a file, not a corpus folder (a folder holding manifest.json)"
    return f"{path} is not a corpus folder: manifest.json is missing"


def resolve_corpus(reference: str | os.PathLike) -> tuple[Path, str]:
    """The folder and origin (``path``, ``built`` or ``bundled``) a reference names.

    The one resolver behind :func:`load_corpus`, ``gym.make``, ``ambitab-gym validate`` and every
    other command:

    * a path (see :func:`is_path_reference`) -> that folder (origin ``path``);
    * an env id or corpus name -> ``<data home>/corpora/<name>`` when a corpus was built there
      (origin ``built``), else the bundled sample (origin ``bundled``). The working directory
      is never consulted.

    Args:
        reference: an env id (``AmbiTab-Bird-v0``, ``ambitab_gym:AmbiTab-Bird-v0``), a corpus
            name (``bird``) or a corpus folder given as a path.

    Raises:
        CorpusNotFound: the path is not a corpus folder, or nothing answers to the name (the
            message lists what is available).

    >>> folder, origin = resolve_corpus("AmbiTab-Bird-v0")
    >>> folder.name, origin in ("built", "bundled")
    ('bird', True)
    """
    if is_path_reference(reference):
        path = Path(reference).expanduser()
        if not (path / "manifest.json").is_file():
            raise CorpusNotFound(_not_a_corpus_folder(path, reference))
        return path.resolve(), "path"
    name = corpus_name(str(reference))
    for folder, origin in ((built_corpora_dir() / name, "built"), (BUNDLED_DIR / name, "bundled")):
        if (folder / "manifest.json").is_file():
            return folder.resolve(), origin
    known = ", ".join(sorted(set(available_corpora()) | set(ENV_IDS)))
    hint = ""
    if Path(str(reference)).is_dir():
        hint = f"; to use the folder {str(reference)!r} here, pass it as a path ('./{reference}')"
    raise CorpusNotFound(
        f"no corpus {str(reference)!r}: give an env id, a corpus name or a corpus folder path "
        f"(available: {known}; `ambitab-gym list` shows them with their sizes){hint}"
    )


def load_corpus(
    reference: str | os.PathLike | Corpus,
    *,
    limits: Limits | None = None,
    engine_override: str | None = None,
    options: dict | None = None,
) -> Corpus:
    """Find (with :func:`resolve_corpus`) and load a corpus; logs which one at INFO.

    Args:
        reference: an env id (``AmbiTab-Bird-v0``), a corpus name (``bird``) or a corpus folder
            given as a path (``Path("x")``, ``"./x"``, ``"/data/x"``). A corpus of that name
            built into the data home wins over the bundled sample; the working directory is
            never searched for names.
        limits, engine_override, options: passed to :class:`Corpus`.

    Raises:
        CorpusNotFound: listing the corpora that are available.
        RecordError: a malformed record, or one naming a database the manifest does not list
            (file, line, record id and field).
    """
    if isinstance(reference, Corpus):
        reference.check_databases()
        return reference
    folder, origin = resolve_corpus(reference)
    corpus = Corpus(
        folder, origin=origin, limits=limits, engine_override=engine_override, options=options
    )
    corpus.check_databases()
    logger.info(
        "ambitab-gym: corpus %r resolved from %r: %s, %s",
        corpus.name,
        str(reference),
        origin,
        folder,
    )
    return corpus
