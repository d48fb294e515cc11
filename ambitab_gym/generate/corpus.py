"""Generated tasks as corpora: an ordinary corpus folder, or a corpus that grows at every reset.

* :func:`write_corpus` - N records as a corpus folder (``records.jsonl``, ``databases/*.sql``,
  ``manifest.json`` with counts and the generator's parameters), byte-identical for the same
  seed; what ``ambitab-gym generate`` writes and ``ambitab-gym validate`` accepts.
* :class:`ProceduralCorpus` - the in-memory corpus behind ``AmbiTab-Procedural-v0``: it holds the
  AVTs drawn for the last few episodes (the interpretation solver needs an episode's siblings)
  and builds a database file only when an engine is opened on it (solver and agent modes).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ambitab_gym.corpora.corpus import Corpus
from ambitab_gym.corpora.home import cache_dir
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.generate.database import schema_text_of
from ambitab_gym.generate.domains import DOMAINS, TRAIN_DOMAINS
from ambitab_gym.generate.tasks import (
    GENERATOR_VERSION,
    GeneratedTask,
    GeneratorConfig,
    TaskGenerator,
)
from ambitab_gym.records import FORMAT_VERSION, TaskRecord, dump_records
from ambitab_gym.verify.base import Limits
from ambitab_gym.verify.sqlite import build_sqlite

__all__ = ["ProceduralCorpus", "generate_tasks", "write_corpus"]


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _key(record: TaskRecord) -> tuple[str, str]:
    return (" ".join(record.spec.request.lower().split()), record.spec.database)


def generate_tasks(
    records: int, *, seed: int, config: GeneratorConfig | None = None, name: str = "generated"
) -> tuple[list[GeneratedTask], TaskGenerator]:
    """Exactly ``records`` records as AVTs; no two AVTs share request and database.

    Task ``i`` is drawn from the seed ``[seed, attempt]`` (NumPy seed sequence), so the tasks
    depend on ``seed`` and the config only. The last AVTs have a lower m when only a few
    records are left to fill.

    >>> tasks, _ = generate_tasks(10, seed=3, name="demo")
    >>> sum(len(t.records) for t in tasks), tasks[0].records[0].corpus
    (10, 'demo')
    """
    if records < 1:
        raise ConfigurationError("records must be at least 1")
    generator = TaskGenerator(config, validate=True, corpus=name)
    tasks: list[GeneratedTask] = []
    seen: set[tuple[str, str]] = set()
    total, attempt = 0, 0
    while total < records:
        task_seed = int(np.random.default_rng([int(seed), attempt]).integers(2**63))
        attempt += 1
        task = generator.generate(
            task_seed, task_id=f"{name}-{len(tasks):05d}", max_records=records - total
        )
        key = _key(task.records[0])
        if key in seen:
            continue
        seen.add(key)
        tasks.append(task)
        total += len(task.records)
    return tasks, generator


def write_corpus(
    out: str | Path,
    *,
    records: int,
    seed: int,
    config: GeneratorConfig | None = None,
    name: str = "generated",
) -> dict:
    """Write a corpus folder of ``records`` generated records; returns its manifest.

    Args:
        out: the folder (created; files of the same names are replaced).
        records: how many records (not AVTs) to write.
        seed: the corpus seed; the same seed and config give byte-identical files.
        config: what to draw (default :class:`GeneratorConfig`).
        name: the corpus name (records' ``corpus`` and the manifest's ``name``).
    """
    config = config or GeneratorConfig()
    tasks, generator = generate_tasks(records, seed=seed, config=config, name=name)
    out = Path(out)
    (out / "databases").mkdir(parents=True, exist_ok=True)
    all_records = [r for t in tasks for r in t.records]
    dump_records(all_records, out / "records.jsonl")
    databases = {}
    for db_name in sorted({t.database.name for t in tasks}):
        script = generator.database_by_name(db_name).script.encode("utf-8")
        (out / "databases" / f"{db_name}.sql").write_bytes(script)
        databases[db_name] = {"file": f"databases/{db_name}.sql", "sha256": _sha256_bytes(script)}
    splits: dict[str, dict] = {}
    for split in ("train", "test"):
        chosen = [t for t in tasks if t.records[0].split == split]
        if chosen:
            splits[split] = {
                "records": sum(len(t.records) for t in chosen),
                "avts": len(chosen),
                "databases": sorted({t.database.name for t in chosen}),
            }
    by_m: dict[str, int] = {}
    by_family: dict[str, int] = {}
    for task in tasks:
        first = task.records[0]
        by_m[str(first.m)] = by_m.get(str(first.m), 0) + 1
        for family in first.source["families"]:
            by_family[family] = by_family.get(family, 0) + 1
    records_bytes = (out / "records.jsonl").read_bytes()
    manifest = {
        "name": name,
        "env_id": None,
        "version": "0.1.0",
        "format_version": FORMAT_VERSION,
        "description": "Procedurally generated AVTs over synthetic SQLite databases "
        "(ambitab_gym.generate): every reading executed, the readings of an AVT pairwise "
        "result-distinct. Split by schema family: train domains "
        f"{list(TRAIN_DOMAINS)}, the others test.",
        "oracle": config.oracle,
        "engine": "sqlite",
        "dialect": "sqlite",
        "splits": splits,
        "counts": {
            "records": len(all_records),
            "avts": len(tasks),
            "ambiguities": sum(t.records[0].m for t in tasks),
            "zero_ambiguity_controls": sum(1 for t in tasks if t.records[0].m == 0),
            "avts_by_m": dict(sorted(by_m.items())),
            "ambiguities_by_family": dict(sorted(by_family.items())),
        },
        "databases": databases,
        "records": {"file": "records.jsonl", "sha256": _sha256_bytes(records_bytes)},
        "licence": "MIT (generated by ambitab-gym)",
        "provenance": {"kind": "procedural", "generator": "ambitab_gym.generate"},
        "generator": {
            "version": GENERATOR_VERSION,
            "seed": int(seed),
            "records": int(records),
            **config.as_dict(),
        },
    }
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    (out / "manifest.json").write_text(text, encoding="utf-8")
    return manifest


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.read_text("utf-8") == text:
        return
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


class ProceduralCorpus(Corpus):
    """A corpus whose records are drawn by a :class:`TaskGenerator` as episodes need them.

    It keeps the last ``keep`` AVTs (older ones are forgotten, so memory stays bounded over any
    number of episodes). Schemas come from the generator; a database file is built in the
    data home's cache only when an engine is opened on it.

    Args:
        generator: draws the tasks (its config names the corpus and the oracle).
        keep: how many recent AVTs to hold.
        limits: default limits of the engines it opens.

    Example:
        >>> corpus = ProceduralCorpus(TaskGenerator(ambiguities=(1, 1)), keep=2)
        >>> for seed in range(3):
        ...     _ = corpus.add(corpus.generator.generate(seed))
        >>> len(corpus.avts), corpus.name, corpus.manifest.oracle
        (2, 'procedural', 'intent')
    """

    def __init__(
        self, generator: TaskGenerator, *, keep: int = 64, limits: Limits | None = None
    ) -> None:
        config = generator.config
        folder = (
            cache_dir() / "procedural" / f"{config.corpus}-v{GENERATOR_VERSION}-{config.oracle}"
        )
        manifest = {
            "name": config.corpus,
            "env_id": "AmbiTab-Procedural-v0",
            "version": "0.1.0",
            "format_version": FORMAT_VERSION,
            "description": "Tasks drawn by ambitab_gym.generate at every reset.",
            "oracle": config.oracle,
            "engine": "sqlite",
            "dialect": "sqlite",
            "provenance": {"kind": "procedural", "generator": "ambitab_gym.generate"},
        }
        _write_atomic(folder / "manifest.json", json.dumps(manifest, indent=2) + "\n")
        _write_atomic(folder / "records.jsonl", "")
        super().__init__(folder, origin="procedural", limits=limits)
        self.generator = generator
        self.keep = max(1, int(keep))
        self._recent: OrderedDict[str, Sequence[TaskRecord]] = OrderedDict()
        self._schemas: dict[str, str] = {}

    @property  # type: ignore[override]
    def records(self) -> list[TaskRecord]:
        """The held AVTs' records, oldest AVT first (this reads every held record; a reset
        reads only its own: :meth:`add_records` keeps records sent packed as they came)."""
        recent = self.__dict__.get("_recent")
        if recent is None:  # the base class, loading the (empty) records file
            return self.__dict__.get("_loaded", [])
        return [record for records in recent.values() for record in records]

    @records.setter
    def records(self, value: list[TaskRecord]) -> None:
        self.__dict__["_loaded"] = list(value)  # the base class's load: the empty file

    def __len__(self) -> int:
        return sum(len(records) for records in self._recent.values())

    def record(self, record_id: str) -> TaskRecord:
        """A held record by id (``<AVT id>-<k>``, the k-th record of its AVT)."""
        avt_id, _, k = record_id.rpartition("-")
        records = self._recent.get(avt_id)
        if records is not None and k.isdigit() and int(k) < len(records):
            ids = getattr(records, "ids", None)
            if (ids[int(k)] if ids is not None else records[int(k)].id) == record_id:
                return records[int(k)]
        for records in self._recent.values():  # ids of another form (never generated ones)
            ids = getattr(records, "ids", None) or [record.id for record in records]
            if record_id in ids:
                return records[list(ids).index(record_id)]
        raise KeyError(f"corpus {self.name!r} has no record {record_id!r}")

    def add(self, task: GeneratedTask) -> Sequence[TaskRecord]:
        """Hold a task's records (forgetting the oldest AVT beyond ``keep``); returns them."""
        return self.add_records(task.avt_id, task.records)

    def add_records(self, avt_id: str, records: Sequence[TaskRecord]) -> Sequence[TaskRecord]:
        """Hold an AVT's records, e.g. as a prefetching worker sent them (no database needed:
        one is built here only when an engine is opened on it; records sent packed,
        :class:`~ambitab_gym.generate.prefetch.PackedRecords`, stay packed until read)."""
        held = self._recent.get(avt_id)
        if held is not None:
            return held
        if getattr(records, "ids", None) is None:
            records = list(records)
        self._recent[avt_id] = records
        while len(self._recent) > self.keep:
            _, old = self._recent.popitem(last=False)
            if self._public:  # the specs shown for its records (the drawn ones)
                for record_id in getattr(old, "ids", None) or [record.id for record in old]:
                    self._public.pop(record_id, None)
        return records

    @property
    def avts(self) -> dict[str, list[TaskRecord]]:  # type: ignore[override]
        """The held AVTs (oldest first)."""
        return {avt_id: list(records) for avt_id, records in self._recent.items()}

    def siblings(self, record: TaskRecord) -> list[TaskRecord]:
        return list(self._recent[record.avt_id])

    def check_databases(self) -> None:
        """Every record runs on a database of the generator's pool (none is in a manifest)."""
        for record in self.records:
            for name in (record.spec.database, record.verification.database):
                self.generator.database_by_name(name)

    def schema_text(self, database: str) -> str:
        # every database of a domain has the same schema: no database is built for it
        domain, _, index = database.rpartition("_")
        if domain not in DOMAINS or not index.isdigit():
            raise KeyError(f"no generated database {database!r}")
        text = self._schemas.get(domain)
        if text is None:
            text = self._schemas[domain] = schema_text_of(DOMAINS[domain])
        return text

    def database_file(self, database: str, kind: str) -> Path:
        if kind != "sqlite":
            raise ValueError(f"generated databases are SQLite, not {kind!r}")
        script = self.generator.database_by_name(database).script
        digest = _sha256_bytes(script.encode("utf-8"))[:16]
        target = cache_dir() / "databases" / self.name / f"{database}-{digest}.sqlite"
        if not target.is_file():
            build_sqlite(script, target)
        return target
