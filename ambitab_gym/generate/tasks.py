"""The procedural task generator: a database, a request with m ambiguities, one AVT.

* :class:`GeneratorConfig` - the curriculum knobs: ambiguity count range, families, domains,
  distractor phrases, database pool, the oracle the corpus declares.
* :class:`GeneratedTask` - one AVT: its records (one per combination of readings, default
  first) and the database they run on.
* :class:`TaskGenerator` - ``generate(seed)`` draws a task; the same seed gives the same task,
  whatever was generated before. Databases are drawn from a fixed pool per domain
  (``databases_per_domain``), each a pure function of ``(domain, index, database_seed)``, and
  kept open in the generator (no module-level state).

Every reading's result is computed on the database (an aggregate task's readings by one
query per event table and grouping, a ranking's by one probe per reading: see
:meth:`TaskGenerator._verified`); a task is kept only when every combination of readings
returns a non-empty, NULL-free result, all pairwise different (and a ranking has no tie at its
cut); otherwise it is drawn again from the same random stream. The rows each reading reads are
known as bit masks (one query per database, table and condition, then kept): a draw those rows
already fail is rejected before any reading's SQL runs, and a count reading's result is its
number of rows (:meth:`TaskGenerator._early_reject`, :meth:`TaskGenerator._count_key`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

import numpy as np
from pydantic import BaseModel

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.generate import families as fam
from ambitab_gym.generate.database import LAST_DAY, GeneratedDatabase, build_database
from ambitab_gym.generate.domains import DOMAINS, TRAIN_DOMAINS, resolve_domains
from ambitab_gym.records import (
    FORMAT_VERSION,
    Ambiguity,
    CompareRules,
    PublicSpec,
    TaskRecord,
    VerificationSpec,
)
from ambitab_gym.verify.compare import normalize_rows

__all__ = [
    "GENERATOR_VERSION",
    "DatabasePool",
    "GeneratedTask",
    "GeneratorConfig",
    "TaskGenerator",
]

#: Bumped whenever the same seed would produce different tasks.
GENERATOR_VERSION = "4"
_GENERATOR = f"ambitab_gym.generate v{GENERATOR_VERSION}"
_MAX_TRIES = 200
#: throwaway tasks :meth:`DatabasePool.warm` generates to fill the databases' memos
_WARM_TASKS = 200
#: A ranking's probe returns this many rows: more than any limit a reading sets (at most 10).
_RANK_PROBE = 11
_SUM = operator.itemgetter(1)  # a probe row's sum
_LITERAL = re.compile(r"'[^']*'")  # a condition's text literals (names and values)
_ALIAS = re.compile(r"\b([cep])\.")  # the table aliases a condition reads
_DATA_NOTE = f"The data runs until {LAST_DAY.day} June {LAST_DAY.year}."
# the fields a validated record marks as set (the fast path marks the same ones)
_SPEC_FIELDS = {"request", "database", "schema_text", "column_meanings", "external_knowledge"}
_AMBIGUITY_FIELDS = {
    "id",
    "term",
    "aliases",
    "kind",
    "resolution",
    "response",
    "sql_snippet",
    "evidence",
}
_VERIFICATION_FIELDS = {"engine", "database", "reference_sql"}
_COMPARE = CompareRules()  # frozen, so shared (every field given: no default deep-copied)
_RECORD_FIELDS = {
    "id",
    "avt_id",
    "corpus",
    "split",
    "spec",
    "ambiguities",
    "verification",
    "source",
}


@dataclass(frozen=True)
class GeneratorConfig:
    """What the generator draws from (a curriculum is a sequence of these).

    Attributes:
        ambiguities: inclusive range of m, the number of registered ambiguities.
        families: the ambiguity families to draw from (:data:`~.families.FAMILIES`); a
            range of m that no request of these families can hold is refused with the reason
            (table and time never meet: :func:`~.families.never_combined`).
        domains: schema families (names, or ``"train"``, ``"test"``, ``"all"``).
        distractors: inclusive range of unambiguous extra phrases (a city, a category, a
            status, a year) that a good asker must learn not to ask about.
        databases_per_domain: the size of each domain's database pool.
        database_seed: selects another pool of databases.
        oracle: the deterministic oracle the records are written for (``intent`` answers
            with the frozen response, ``knowledge`` with the resolution).
        corpus: the records' corpus name.

    >>> GeneratorConfig(ambiguities=(1, 2), domains="test").domains
    ('sports', 'flights')
    """

    ambiguities: tuple[int, int] = (0, 3)
    families: tuple[str, ...] = fam.FAMILIES
    domains: tuple[str, ...] = tuple(DOMAINS)
    distractors: tuple[int, int] = (0, 1)
    databases_per_domain: int = 16
    database_seed: int = 0
    oracle: Literal["intent", "knowledge"] = "intent"
    corpus: str = "procedural"

    def __post_init__(self) -> None:
        lo, hi = (int(v) for v in self.ambiguities)
        if not 0 <= lo <= hi <= 5:
            raise ConfigurationError(
                f"ambiguities must be a range within 0..5, not {self.ambiguities}"
            )
        object.__setattr__(self, "ambiguities", (lo, hi))
        families = (self.families,) if isinstance(self.families, str) else tuple(self.families)
        families = tuple(dict.fromkeys(families))
        unknown = sorted(set(families) - set(fam.FAMILIES))
        if unknown or (hi > 0 and not families):
            raise ConfigurationError(
                f"unknown families {unknown}; choose from {list(fam.FAMILIES)}"
            )
        object.__setattr__(self, "families", families)
        most = fam.most_combined(families)
        if min(hi, len(families)) > most:
            never = fam.never_combined(families)
            raise ConfigurationError(
                f"no request holds {min(hi, len(families))} of the families "
                f"{list(families)}: at most {most} share one"
                + (f"; never together: {'; '.join(never)}" if never else "")
                + f" (lower the ambiguity range to at most {most} or choose other families)"
            )
        object.__setattr__(self, "domains", resolve_domains(self.domains))
        dlo, dhi = (int(v) for v in self.distractors)
        if not 0 <= dlo <= dhi <= 4:
            raise ConfigurationError(
                f"distractors must be a range within 0..4, not {self.distractors}"
            )
        object.__setattr__(self, "distractors", (dlo, dhi))
        if self.databases_per_domain < 1:
            raise ConfigurationError("databases_per_domain must be at least 1")
        if self.oracle not in ("intent", "knowledge"):
            raise ConfigurationError("oracle must be 'intent' or 'knowledge'")

    def digest(self) -> str:
        """A short hash of what the config draws (tells task ids of different configs apart).

        >>> GeneratorConfig().digest() == GeneratorConfig(ambiguities=(0, 3)).digest()
        True
        """
        cached = self.__dict__.get("_digest")
        if cached is None:
            text = json.dumps({**self.as_dict(), "corpus": self.corpus}, sort_keys=True)
            cached = hashlib.blake2b(text.encode("utf-8"), digest_size=4).hexdigest()
            object.__setattr__(self, "_digest", cached)
        return cached

    def as_dict(self) -> dict:
        """JSON-ready parameters (written to a generated corpus's manifest)."""
        return {
            "ambiguities": list(self.ambiguities),
            "families": list(self.families),
            "domains": list(self.domains),
            "distractors": list(self.distractors),
            "databases_per_domain": self.databases_per_domain,
            "database_seed": self.database_seed,
            "oracle": self.oracle,
        }


_M = TypeVar("_M", bound=BaseModel)
#: field names of the record models, in order
_FIELD_NAMES: dict[type, tuple[str, ...]] = {
    model: tuple(model.model_fields)
    for model in (PublicSpec, Ambiguity, VerificationSpec, TaskRecord)
}


def _built(model: type[_M], fields_set: set[str], /, **values: object) -> _M:
    """``model.model_construct(fields_set, **values)`` given every field, without its per-field
    default handling: a model instance holding exactly ``values`` (the fast record path;
    ``tests/test_generate.py`` checks the result equals the validated record)."""
    names = _FIELD_NAMES.get(model) or tuple(model.model_fields)
    ordered = values
    if tuple(values) != names:  # every field, in order
        ordered = {name: values[name] for name in names}
        if len(ordered) != len(values):
            raise TypeError(f"not fields of {model.__name__}: {sorted(set(values) - set(names))}")
    return model_from_state(model, ordered, fields_set)


def model_from_state(
    model: type[_M], state: dict, fields_set: set[str], extra: dict | None = None
) -> _M:
    """A pydantic model instance holding ``state`` as its fields, set as unpickling sets them
    (no validation, no defaults): the generator's fast record path and the prefetching
    workers' records (:mod:`ambitab_gym.generate.prefetch`) build records this way."""
    instance = model.__new__(model)
    object.__setattr__(instance, "__dict__", state)
    object.__setattr__(instance, "__pydantic_fields_set__", fields_set)
    object.__setattr__(instance, "__pydantic_extra__", extra)
    object.__setattr__(instance, "__pydantic_private__", None)
    return instance


@dataclass
class GeneratedTask:
    """One generated AVT.

    Attributes:
        avt_id: shared by its records.
        records: one record per combination of readings; the first is the default reading.
        database: the database the records run on.
        seed: the task seed it was drawn from.

    >>> task = TaskGenerator(ambiguities=(1, 1)).generate(3, task_id="demo")
    >>> task.avt_id, [r.id for r in task.records], task.records[0].avt_id
    ('demo', ['demo-0', 'demo-1'], 'demo')
    """

    avt_id: str
    records: tuple[TaskRecord, ...]
    database: GeneratedDatabase
    seed: int


@dataclass
class _Plan:
    skeleton: str
    agg: str = "SUM"
    measure: str = ""
    measure_phrase: str = ""
    limit: int | None = None
    event_np: str = ""
    entity_np: str = ""
    entity_modified: bool = False
    clause: bool = False  # the people carry the attachment's relative clause
    place: str = ""
    item: str = ""
    status: str = ""
    when: str = ""
    scope: str = ""
    source: str = ""  # a ranking's " in the order records" (the table choice's term)
    top: bool = False
    conds: list[str] = field(default_factory=list)
    distractors: list[str] = field(default_factory=list)


def _column_meanings(db: GeneratedDatabase) -> dict[str, str]:
    """The column meanings a database's records carry (built once per database; the fast
    path's records share the dict, read-only, as the records of one task always did)."""
    meanings = db.memo.get("column_meanings")
    if meanings is None:
        d = db.domain
        a, b = d.measure_columns
        meanings = db.memo["column_meanings"] = {
            f"{d.entity_table}.{d.city_column}": f"City and region, e.g. '{db.cities[0]}'.",
            f"{d.entity_table}.{d.joined_column}": "Year the person joined.",
            f"{d.item_table}.{d.item_value_column}": f"The {d.item_value_phrase}.",
            f"{d.event_table}.{a}": d.measure_meaning,
            f"{d.event_table}.{b}": d.measure_meaning,
            f"{d.event_table}.{d.size_column}": f"The {d.size_phrase}, in {d.size_unit}.",
        }
    return meanings


def _batch_cond(db: GeneratedDatabase, effect: dict) -> str:
    """A reading's condition as a batch query writes it: the reading's own ``cond``, except
    that a membership in a subquery's ids (``c.id IN (SELECT id ... HAVING COUNT(*) >= k)``,
    the entity knowledge family) lists the ids the subquery returns on this database - the
    same truth value on every row, without materializing the subquery once per column."""
    members = effect.get("members")
    if members is None:
        return effect["cond"]
    column, subquery = members
    ids = db.memo.get(("members", subquery))
    if ids is None:
        rows = db.connection.execute(subquery).fetchall()
        ids = ", ".join(str(int(row[0])) for row in rows)
        db.memo[("members", subquery)] = ids
    return f"{column} IN ({ids})"


def _prefilter(db: GeneratedDatabase, combos: list[tuple]) -> list[str]:
    """``WHERE`` conjuncts that keep every row some reading counts: for each ambiguity whose
    readings all set a condition, the disjunction of those conditions. Every reading's
    condition includes one of each such disjunction, so a dropped row is one that no reading's
    ``CASE WHEN`` counts; the kept rows come in the same order, so each column's aggregate is
    unchanged (a group or person left without rows reads NULL either way)."""
    filters = []
    for position in range(len(combos[0]) if combos else 0):
        readings = {id(combo[position]): combo[position] for combo in combos}.values()
        if len(readings) > 1 and all("cond" in r.effect for r in readings):
            either = " OR ".join(f"({_batch_cond(db, r.effect)})" for r in readings)
            filters.append(f"({either})")
    return filters


def _read_by(
    plan: _Plan, combo: tuple[fam.Reading, ...], event_table: str
) -> tuple[str, str, bool, int | None, list[str]]:
    """What a combination of readings makes of the plan: the table, measure, grouping and
    limit it reads by, and its conditions (the plan's, then each reading's)."""
    table, measure, group, limit = event_table, plan.measure, False, plan.limit
    conds = list(plan.conds)
    for reading in combo:
        effect = reading.effect
        table = effect.get("table", table)
        measure = effect.get("measure", measure)
        group = effect.get("group", group)
        limit = effect.get("limit", limit)
        if "cond" in effect:
            conds.append(effect["cond"])
    return table, measure, group, limit, conds


def _row_mask(db: GeneratedDatabase, table: str, cond: str) -> int:
    """The event rows of ``table`` that satisfy ``cond`` (a predicate on an event row joined to
    its person ``c`` and item ``p``), as a bit mask of their ids; one query per database,
    table and condition, kept in the database's memo (a database never changes). A condition
    on the person (or the item) alone selects people (items) - a query on that small table -
    and takes the union of their rows."""
    key = ("rows", table, cond)
    mask = db.memo.get(key)
    if mask is None:
        d = db.domain
        aliases = set(_ALIAS.findall(_LITERAL.sub("''", cond)))
        mask = 0
        if cond == "1":  # every row: each person's rows together
            for rows in _owner_masks(db, table, d.entity_id).values():
                mask |= rows
        elif aliases == {"c"} or aliases == {"p"}:
            person = aliases == {"c"}
            owners = _owner_masks(db, table, d.entity_id if person else d.item_id)
            source = (
                f"SELECT c.{d.entity_id} FROM {d.entity_table} AS c"
                if person
                else f"SELECT p.{d.item_id} FROM {d.item_table} AS p"
            )
            for (owner,) in db.connection.execute(f"{source} WHERE {cond}"):
                mask |= owners.get(owner, 0)
        else:
            source = f"FROM {table} AS e"
            if "c" in aliases:
                source += f" JOIN {d.entity_table} AS c ON c.{d.entity_id} = e.{d.entity_id}"
            if "p" in aliases:
                source += f" JOIN {d.item_table} AS p ON p.{d.item_id} = e.{d.item_id}"
            for (row_id,) in db.connection.execute(f"SELECT e.{d.event_id} {source} WHERE {cond}"):
                mask |= 1 << row_id
        db.memo[key] = mask
    return mask


def _owner_masks(db: GeneratedDatabase, table: str, column: str, *, category: bool = False) -> dict:
    """Each person's (``column`` the person id) or item's event rows in ``table``, as bit masks
    of their ids (those with none left out), built once per database, table and column; with
    ``category``, each item category's rows (``column`` the item id)."""
    key = ("owners", table, column, category)
    masks = db.memo.get(key)
    if masks is None:
        masks = {}
        d = db.domain
        sql = f"SELECT {d.event_id}, {column} FROM {table}"
        if category:
            sql = (
                f"SELECT e.{d.event_id}, p.{d.category_column} FROM {table} AS e "
                f"JOIN {d.item_table} AS p ON p.{d.item_id} = e.{d.item_id}"
            )
        for row_id, owner in db.connection.execute(sql):
            masks[owner] = masks.get(owner, 0) | (1 << row_id)
        db.memo[key] = masks
    return masks


class DatabasePool:
    """Built databases by ``(domain, index, database_seed)``; share one between generators (the
    envs of a vector env) to build each database once. A database is a pure function of its
    key, so sharing never changes a task.

    >>> pool = DatabasePool()
    >>> pool.get("retail", 0, 0) is pool.get("retail", 0, 0), len(pool)
    (True, 1)
    """

    def __init__(self) -> None:
        self._databases: dict[tuple[str, int, int], GeneratedDatabase] = {}
        self._slots: dict[str, dict] = {}  # one slot memo per domain (``GeneratedDatabase.slots``)
        self._warmed: set[tuple] = set()

    def __len__(self) -> int:
        return len(self._databases)

    def get(self, domain: str, index: int, database_seed: int = 0) -> GeneratedDatabase:
        """The database (built on first use)."""
        key = (domain, int(index), int(database_seed))
        db = self._databases.get(key)
        if db is None:
            number = list(DOMAINS).index(domain)
            rng = np.random.default_rng([int(database_seed), number, int(index), 7919])
            db = build_database(DOMAINS[domain], int(index), seed=rng)
            db.slots = self._slots.setdefault(domain, {})
            self._databases[key] = db
        return db

    def warm(
        self,
        config: GeneratorConfig,
        *,
        tasks: int = _WARM_TASKS,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Build every database ``config`` draws from, then generate ``tasks`` throwaway tasks
        (fixed seeds) on them, so that what the databases memoize - row masks, family slots,
        thresholds, results - is there before the first real task; all of it is a cache, so no
        task changes. Once per config; ``stop()``, asked between steps, ends it early. Returns
        whether it finished.

        >>> pool = DatabasePool()
        >>> pool.warm(GeneratorConfig(domains=("retail",), databases_per_domain=2), tasks=3)
        True
        >>> len(pool)
        2
        """
        key = (config.digest(), config.database_seed, config.databases_per_domain)
        if key in self._warmed:
            return True
        for domain in config.domains:
            for index in range(config.databases_per_domain):
                if stop is not None and stop():
                    return False
                self.get(domain, index, config.database_seed)
        generator = TaskGenerator(config, pool=self, validate=False)
        for seed in range(tasks):
            if stop is not None and stop():
                return False
            try:
                generator.generate((0x3A7F << 32) + seed)
            except ConfigurationError:  # no valid task: the real draw will say so
                break
        self._warmed.add(key)
        return True


class TaskGenerator:
    """Draws verified AVTs over synthetic SQLite databases.

    Args:
        config: a :class:`GeneratorConfig` (default: every family and domain, m in 0..3).
        pool: a :class:`DatabasePool` to share (default: its own).
        validate: build each record with ``TaskRecord.model_validate`` (default; what
            ``ambitab-gym generate`` writes). ``False`` is the fast path the env uses: the same
            records built with ``model_construct``, skipping re-validation of what the
            generator builds correctly by construction (``tests/test_generate.py`` checks
            that both paths give equal records and equal JSON).
        row_masks: use the rows each reading reads, as bit masks (default): reject a draw
            before its readings' SQL runs when those rows already show it fails
            (:meth:`_early_reject`), and count a count task's rows off the masks instead of
            querying. ``False`` runs every check by SQL, in full: the same tasks, more SQL
            (``tests/test_generate_speed2.py`` compares).
        **overrides: fields of the config to replace.

    Example:
        >>> generator = TaskGenerator(ambiguities=(2, 2), domains=("retail",))
        >>> task = generator.generate(7)
        >>> record = task.records[0]
        >>> record.m, len(task.records), record.spec.database.startswith("retail_")
        (2, 4, True)
        >>> all(a.term in record.spec.request for a in record.ambiguities)
        True
        >>> generator.generate(7).records == task.records
        True
    """

    def __init__(
        self,
        config: GeneratorConfig | None = None,
        *,
        pool: DatabasePool | None = None,
        validate: bool = True,
        row_masks: bool = True,
        **overrides,
    ) -> None:
        config = config or GeneratorConfig()
        self.config = replace(config, **overrides) if overrides else config
        self.pool = pool if pool is not None else DatabasePool()
        self.validate = bool(validate)
        self.row_masks = bool(row_masks)
        # the fast path's Ambiguity models by (slot, reading) identity and the request's
        # aliases (slots and readings are memoized per database, the aliases a function of the
        # slots and the request's few other phrases, so this stays small)
        self._ambiguity_models: dict[
            tuple[int, int, tuple[str, ...]], tuple[fam.Slot, fam.Reading, Ambiguity]
        ] = {}
        #: tasks returned by :meth:`generate`, and the elapsed and CPU seconds spent in it
        self.generated = 0
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    def configure(self, **overrides) -> GeneratorConfig:
        """Replace config fields (a curriculum step); databases stay cached."""
        self.config = replace(self.config, **overrides)
        return self.config

    # -- databases ----------------------------------------------------------------------------

    def database(self, domain: str, index: int) -> GeneratedDatabase:
        """The ``index``-th database of a domain's pool (built once, then cached)."""
        return self.pool.get(domain, index, self.config.database_seed)

    def database_by_name(self, name: str) -> GeneratedDatabase:
        """A pool database by its name (``retail_03``)."""
        domain, _, index = name.rpartition("_")
        if domain not in DOMAINS or not index.isdigit():
            raise KeyError(f"no generated database {name!r}")
        return self.database(domain, int(index))

    # -- tasks --------------------------------------------------------------------------------

    def generate(
        self,
        seed: int | np.random.Generator,
        *,
        task_id: str | None = None,
        max_records: int | None = None,
    ) -> GeneratedTask:
        """One verified AVT.

        Args:
            seed: a task seed, or a ``np.random.Generator`` from which one is drawn.
            task_id: names the AVT (``<task_id>``) and its records (``<task_id>-<k>``);
                default ``proc-<config digest>-<seed as hex>``.
            max_records: cap on the AVT's size (m is lowered so that 2^m fits).

        Raises:
            ConfigurationError: no valid task within the retry limit (m is capped at the number of
                families; a family that fits no skeleton cannot occur).
        """
        start, cpu_start = time.perf_counter(), time.process_time()
        if isinstance(seed, np.random.Generator):
            seed = int(seed.integers(2**63))
        seed = int(seed)
        rng = np.random.default_rng([seed, 104729])
        task_id = task_id or f"proc-{self.config.digest()}-{seed:016x}"
        # m is drawn once: a retry redraws everything else, so the accepted tasks keep the
        # configured distribution of m (redrawing m would favour the easier small m)
        lo, hi = self.config.ambiguities
        hi = min(hi, len(self.config.families))
        if max_records is not None:
            hi = min(hi, max(0, int(np.floor(np.log2(max(1, max_records))))))
        m = int(rng.integers(min(lo, hi), hi + 1))
        for _ in range(_MAX_TRIES):
            task = self._attempt(rng, m, seed, task_id)
            if task is not None:
                self.generated += 1
                self.seconds += time.perf_counter() - start
                self.cpu_seconds += time.process_time() - cpu_start
                return task
        raise ConfigurationError(
            f"no valid task for seed {seed} in {_MAX_TRIES} draws with {self.config}"
        )

    def _attempt(
        self, rng: np.random.Generator, m: int, seed: int, task_id: str
    ) -> GeneratedTask | None:
        config = self.config
        domain = config.domains[int(rng.integers(len(config.domains)))]
        db = self.database(domain, int(rng.integers(config.databases_per_domain)))
        skeleton = fam.SKELETONS[int(rng.integers(len(fam.SKELETONS)))]
        chosen: list[str] = []
        for _ in range(m):
            taken = set(chosen)
            options = [
                f for f in config.families if f not in taken and fam.compatible(f, skeleton, taken)
            ]
            if not options:
                return None
            chosen.append(options[int(rng.integers(len(options)))])
        plan, slots = self._plan(db, rng, skeleton, chosen)
        if plan is None:
            return None
        request = self._request(plan, rng, db.domain.entity_plural)
        slots.sort(key=lambda s: request.find(s.term))
        if any(request.count(s.term) != 1 for s in slots):
            return None
        combos = list(itertools.product(*(slot.readings for slot in slots)))
        sqls = [self._sql(db, plan, combo) for combo in combos]
        if not self._verified(db, plan, sqls, combos):
            return None
        aliases = fam.task_aliases(slots, request)
        return self._task(db, plan, slots, aliases, combos, sqls, request, seed, task_id)

    def _plan(
        self, db: GeneratedDatabase, rng: np.random.Generator, skeleton: str, chosen: list[str]
    ) -> tuple[_Plan | None, list[fam.Slot]]:
        d = db.domain
        plan = _Plan(skeleton=skeleton, agg="AVG" if skeleton == "average" else "SUM")
        plan.measure, plan.measure_phrase = d.size_column, d.size_phrase
        plan.event_np, plan.entity_np = d.event_plural, d.entity_plural
        if skeleton == "ranking":
            plan.limit = int(rng.integers(3, 7))
        slots: list[fam.Slot] = []
        for family in chosen:
            slot: fam.Slot | None
            if family == "synonym":
                slot = fam.synonym(db, rng)
                plan.measure_phrase = slot.term
            elif family == "scope":
                slot = fam.scope(db, rng)
                plan.scope = slot.phrase
            elif family == "attachment":
                slot = fam.attachment(db, rng)
                plan.entity_np, plan.entity_modified, plan.clause = slot.phrase, True, True
            elif family == "vague":
                slot = fam.vague(db, rng, ranking=skeleton == "ranking")
                if slot is not None and skeleton == "ranking":
                    plan.top, plan.entity_np = True, slot.phrase
                elif slot is not None:
                    plan.event_np = slot.phrase
            elif family == "knowledge":
                entity = "attachment" not in chosen and not (
                    skeleton == "ranking" and "vague" in chosen
                )
                entity = entity and bool(rng.random() < 0.5)
                slot = fam.knowledge(db, rng, entity=entity)
                if slot is not None and entity:
                    plan.entity_np, plan.entity_modified = slot.phrase, True
                elif slot is not None:
                    plan.item = slot.phrase
            elif family == "choice":
                slot = fam.choice(db, rng)
                plan.place = slot.phrase
            elif family == "table":
                slot = fam.table(db, rng)
                if skeleton == "ranking":  # a ranking names no events: the term is a tail
                    plan.source = f" in the {slot.phrase}"
                else:
                    plan.event_np = slot.phrase
            else:
                slot = fam.time(db, rng)
                plan.when = slot.phrase
            if slot is None:
                return None, []
            slots.append(slot)
        self._distractors(db, rng, plan, chosen)
        return plan, slots

    def _distractors(
        self, db: GeneratedDatabase, rng: np.random.Generator, plan: _Plan, chosen: list[str]
    ) -> None:
        d = db.domain
        lo, hi = self.config.distractors
        kinds = ["status"] if "scope" in chosen else ["category", "status"]
        if "choice" not in chosen and "attachment" not in chosen:
            kinds.append("place")
        if "time" not in chosen and "table" not in chosen:
            kinds.append("year")
        count = min(int(rng.integers(lo, hi + 1)), len(kinds))
        # rng.choice(n, size=0 or 1, replace=False) draws what rng.integers(n) draws (one
        # bounded integer; none for size 0) at a fifth of the cost (tests/test_generate_speed.py)
        picks = (
            ()
            if count == 0
            else (int(rng.integers(len(kinds))),)
            if count == 1
            else rng.choice(len(kinds), size=count, replace=False)
        )
        for index in picks:
            kind = kinds[int(index)]
            plan.distractors.append(kind)
            if kind == "place":
                city = db.cities[int(rng.integers(len(db.cities)))]
                plan.place = f" from {city.split(',')[0]}"
                plan.conds.append(f"c.{d.city_column} = '{city}'")
            elif kind == "category":
                value = db.categories[int(rng.integers(len(db.categories)))]
                plan.item += f" in the {value} {d.category_column}"
                plan.conds.append(f"p.{d.category_column} = '{value}'")
            elif kind == "status":
                value = d.status_values[int(rng.integers(2))]
                plan.status = f" with {d.status_column} {value}"
                plan.conds.append(f"e.{d.status_column} = '{value}'")
            else:
                year = int(rng.integers(2022, 2024))
                plan.when = f" in {year}"
                plan.conds.append(f"e.{d.date_column} BETWEEN '{year}-01-01' AND '{year}-12-31'")

    def _request(self, plan: _Plan, rng: np.random.Generator, entity_plural: str) -> str:
        people, events = plan.entity_np + plan.place, plan.event_np
        tail = f"{plan.item}{plan.status}{plan.when}{plan.scope}{plan.source}"
        if plan.clause and plan.place:  # after the relative clause, the place would bind to it
            people = plan.entity_np
            if plan.skeleton == "ranking":
                tail += f" among {entity_plural}{plan.place}"
            else:
                events += plan.place
        if plan.skeleton == "ranking":
            head = people if plan.top else f"{plan.limit} {people}"
            ranked = (
                f" by {plan.measure_phrase}"
                if plan.top
                else f" with the highest total {plan.measure_phrase}"
            )
            verb = ("List the", "Show the", "Which are the")[int(rng.integers(3))]
            text = f"{verb} {head}{ranked}{tail}"
            return text + ("?" if verb.startswith("Which") else ".")
        by = f" by {people}" if plan.entity_modified or plan.place else ""
        if plan.skeleton == "count":
            return f"How many {events}{by}{tail}?"
        word = "total" if plan.agg == "SUM" else "average"
        body = f"the {word} {plan.measure_phrase} of {events}{by}{tail}"
        verb = ("What is", "Show", "Report")[int(rng.integers(3))]
        return f"{verb} {body}" + ("?" if verb == "What is" else ".")

    def _sql(
        self,
        db: GeneratedDatabase,
        plan: _Plan,
        combo: tuple[fam.Reading, ...],
        *,
        cut: bool = False,
    ) -> str:
        """The reading's SQL; with ``cut``, a ranking's names and sums down to the
        :data:`_RANK_PROBE` th row (past every limit a reading can set)."""
        d = db.domain
        table, measure, group, limit, conds = _read_by(plan, combo, d.event_table)
        where = " WHERE " + " AND ".join(conds) if conds else ""
        if plan.skeleton == "ranking":
            selected = f"c.name, SUM(e.{measure})" if cut else "c.name"
            tail = (
                f"{where} GROUP BY c.{d.entity_id} "
                f"ORDER BY SUM(e.{measure}) DESC LIMIT {_RANK_PROBE if cut else limit}"
            )
        else:
            selected = "COUNT(*)" if plan.skeleton == "count" else f"{plan.agg}(e.{measure})"
            tail = where
            if group:
                selected = f"p.{d.category_column}, {selected}"
                tail = f"{where} GROUP BY p.{d.category_column}"
        # join only the tables the query reads (the event table always)
        source = f"FROM {table} AS e"
        if "c." in selected or "c." in tail:
            source += f" JOIN {d.entity_table} AS c ON c.{d.entity_id} = e.{d.entity_id}"
        if "p." in selected or "p." in tail:
            source += f" JOIN {d.item_table} AS p ON p.{d.item_id} = e.{d.item_id}"
        return f"SELECT {selected} {source}{tail}"

    def _verified(
        self, db: GeneratedDatabase, plan: _Plan, sqls: list[str], combos: list[tuple]
    ) -> bool:
        """Whether every reading's result is non-empty, NULL-free and pairwise different.

        Every reading's result is computed on the database (and cached per database by SQL
        text: a database never changes, so a cached result is the result):

        * an aggregate's readings (total, average, count) come from one executed query per
          event table and grouping - each reading's aggregate as a ``CASE WHEN <its
          conditions>`` column over the same rows (:meth:`_batch_keys`) - instead of 2^m
          queries; ``tests/test_generate_speed.py`` checks these equal executing each
          reading's own SQL;
        * a ranking's result is read off its probe - the same query with ``c.name, SUM(...)``
          selected and ``LIMIT`` :data:`_RANK_PROBE` - instead of two queries: its first
          ``limit`` names are the reading's rows whenever there is no tie at the cut, and a
          tie at the cut rejects the task either way; readings that differ only in their limit
          share the probe, and the probes of a ranking's readings come from one query per
          event table (:meth:`_batch_probes`).
        """
        if self.row_masks and self._early_reject(db, plan, combos):
            return False
        if plan.skeleton == "ranking":
            probes = [self._sql(db, plan, combo, cut=True) for combo in combos]
            self._batch_probes(db, plan, combos, probes)
            keys = [
                self._ranking_key(db, plan, combo, probe)
                for combo, probe in zip(combos, probes, strict=True)
            ]
        else:
            keys = self._batch_keys(db, plan, sqls, combos)
        return None not in keys and len(set(keys)) == len(keys)

    def _early_reject(self, db: GeneratedDatabase, plan: _Plan, combos: list[tuple]) -> bool:
        """Whether the draw fails :meth:`_verified` for a reason the rows its readings read
        already show, decided before any reading's SQL runs.

        Every condition a reading or a distractor sets is a predicate on one event row (joined
        to its person and item by foreign keys that every row satisfies), so the rows a
        reading aggregates are the intersection of each condition's rows
        (:func:`_row_mask`, one query per database, table and condition, then kept). A draw
        fails when some reading reads no row (its result is empty, NULL or a count of 0), when
        a ranking reading's rows belong to fewer people than its limit (its probe returns
        fewer names), or when two readings aggregate the same rows the same way (their results
        are equal). Every other draw is checked in full, so the accepted tasks are exactly
        those of the full check (``tests/test_generate_speed2.py``).
        """
        d = db.domain
        ranking = plan.skeleton == "ranking"
        seen = set()
        for combo in combos:
            table, measure, group, limit, conds = _read_by(plan, combo, d.event_table)
            rows = _row_mask(db, table, "1")
            for cond in conds:
                rows &= _row_mask(db, table, cond)
                if not rows:
                    return True
            if ranking:
                owners = _owner_masks(db, table, d.entity_id).values()
                people = sum(1 for mask in owners if mask & rows)
                if limit is None or people < limit:
                    return True
                key: tuple = (table, measure, rows, limit)
            else:
                key = (table, measure, group, rows)
            if key in seen:
                return True
            seen.add(key)
        return False

    def _count_key(
        self, db: GeneratedDatabase, plan: _Plan, sql: str, combo: tuple[fam.Reading, ...]
    ) -> frozenset | None:
        """A count reading's result fingerprint from the rows it counts, without a query:
        ``COUNT(*)`` is the number of rows in its row mask (per category with the scope
        family's grouping, a category's rows being a mask too; a category with none is no
        row of the result), exactly what executing ``sql`` returns
        (``tests/test_generate_speed.py`` compares every one with execution)."""
        cached = db.cached_fingerprint(sql, count=True)
        if cached is not False:
            return cached  # type: ignore[return-value]
        table, group, conds = db.domain.event_table, False, list(plan.conds)
        for reading in combo:
            effect = reading.effect
            table = effect.get("table", table)
            group = effect.get("group", group)
            if "cond" in effect:
                conds.append(effect["cond"])
        rows = _row_mask(db, table, "1")
        for cond in conds:
            rows &= _row_mask(db, table, cond)
        if group:
            categories = _owner_masks(db, table, db.domain.item_id, category=True)
            kept = [
                (category, n)
                for category, mask in categories.items()
                if (n := (rows & mask).bit_count())
            ]
        else:
            kept = [(rows.bit_count(),)]
        return db.remember_fingerprint(sql, kept, count=True)

    def _batch_keys(
        self, db: GeneratedDatabase, plan: _Plan, sqls: list[str], combos: list[tuple]
    ) -> list[frozenset | None]:
        """The result fingerprints of an aggregate task's readings, as
        :meth:`GeneratedDatabase.fingerprint` of each reading's SQL would give them, from one
        query per (event table, grouping).

        A reading ``SELECT [g,] AGG(e.x) FROM t AS e ... WHERE common AND own [GROUP BY g]``
        is the column ``AGG(CASE WHEN own THEN e.x END)`` of ``SELECT [g,] ... FROM t AS e ...
        WHERE common [GROUP BY g]``: the same rows aggregated (joins on foreign keys that every
        row satisfies drop none), a group without matching rows reads NULL (a count 0) where
        the reading's own query has no row for it.
        """
        d = db.domain
        count = plan.skeleton == "count"
        if count and self.row_masks:
            return [
                self._count_key(db, plan, sql, combo)
                for sql, combo in zip(sqls, combos, strict=True)
            ]
        keys: list[frozenset | None] = [None] * len(combos)
        batches: dict[tuple[str, bool], list[tuple[int, str]]] = {}
        for i, (sql, combo) in enumerate(zip(sqls, combos, strict=True)):
            cached = db.cached_fingerprint(sql, count=count)
            if cached is not False:
                keys[i] = cached  # type: ignore[assignment]
                continue
            measure, group, table, conds = plan.measure, False, d.event_table, []
            for reading in combo:
                effect = reading.effect
                table = effect.get("table", table)
                measure = effect.get("measure", measure)
                group = effect.get("group", group)
                if "cond" in effect:
                    conds.append(f"({_batch_cond(db, effect)})")
            when = " AND ".join(conds) or "1"
            column = (
                f"COUNT(CASE WHEN {when} THEN 1 END)"
                if count
                else f"{plan.agg}(CASE WHEN {when} THEN e.{measure} END)"
            )
            batches.setdefault((table, group), []).append((i, column))
        prefilter = _prefilter(db, combos) if batches else []
        for (table, group), members in batches.items():
            columns = ", ".join(column for _, column in members)
            filters = [*plan.conds, *prefilter]
            where = " WHERE " + " AND ".join(filters) if filters else ""
            selected = f"p.{d.category_column}, {columns}" if group else columns
            tail = f"{where} GROUP BY p.{d.category_column}" if group else where
            source = f"FROM {table} AS e"
            if "c." in selected or "c." in tail:
                source += f" JOIN {d.entity_table} AS c ON c.{d.entity_id} = e.{d.entity_id}"
            if "p." in selected or "p." in tail:
                source += f" JOIN {d.item_table} AS p ON p.{d.item_id} = e.{d.item_id}"
            rows = db.connection.execute(f"SELECT {selected} {source}{tail}").fetchall()
            first = 1 if group else 0
            for offset, (i, _) in enumerate(members):
                column = first + offset
                if group:  # the groups the reading's own query returns: some row matched
                    kept = [
                        (row[0], row[column])
                        for row in rows
                        if row[column] is not None and not (count and row[column] == 0)
                    ]
                else:
                    kept = [(row[column],) for row in rows]
                keys[i] = db.remember_fingerprint(sqls[i], kept, count=count)
        return keys

    def _batch_probes(
        self,
        db: GeneratedDatabase,
        plan: _Plan,
        combos: list[tuple],
        probes: list[str] | None = None,
    ) -> None:
        """Put the probe results of a ranking's readings in the database's result cache, from
        one query per event table: each reading's ``SUM(CASE WHEN <its conditions> THEN e.x
        END)`` per person over the same rows, ranked here - the people its own probe returns
        (some row matched) in the same descending order of the same sums (ties in any order:
        a tie at the cut rejects the task either way, and :meth:`_ranking_key` reads only the
        set of names above the cut and the sums at it)."""
        d = db.domain
        batches: dict[str, list[tuple[str, str]]] = {}
        queued: set[str] = set()
        if probes is None:
            probes = [self._sql(db, plan, combo, cut=True) for combo in combos]
        for combo, probe in zip(combos, probes, strict=True):
            if probe in queued or db.has_result(probe):
                continue
            queued.add(probe)
            measure, table, conds = plan.measure, d.event_table, []
            for reading in combo:
                effect = reading.effect
                table = effect.get("table", table)
                measure = effect.get("measure", measure)
                if "cond" in effect:
                    conds.append(f"({_batch_cond(db, effect)})")
            when = " AND ".join(conds) or "1"
            batches.setdefault(table, []).append(
                (probe, f"SUM(CASE WHEN {when} THEN e.{measure} END)")
            )
        prefilter = _prefilter(db, combos) if batches else []
        for table, members in batches.items():
            columns = ", ".join(column for _, column in members)
            filters = [*plan.conds, *prefilter]
            where = " WHERE " + " AND ".join(filters) if filters else ""
            source = (
                f"FROM {table} AS e JOIN {d.entity_table} AS c ON c.{d.entity_id} = e.{d.entity_id}"
            )
            if "p." in columns or "p." in where:
                source += f" JOIN {d.item_table} AS p ON p.{d.item_id} = e.{d.item_id}"
            rows = db.connection.execute(
                f"SELECT c.name, {columns} {source}{where} GROUP BY c.{d.entity_id}"
            ).fetchall()
            for column, (probe, _) in enumerate(members, 1):
                ranked = [(row[0], row[column]) for row in rows if row[column] is not None]
                ranked.sort(key=_SUM, reverse=True)  # stable, as sorted() is
                db.remember_result(probe, ranked[:_RANK_PROBE])

    def _ranking_key(
        self,
        db: GeneratedDatabase,
        plan: _Plan,
        combo: tuple[fam.Reading, ...],
        probe_sql: str | None = None,
    ) -> frozenset | None:
        expected = next((r.effect["limit"] for r in combo if "limit" in r.effect), plan.limit)
        assert expected is not None and expected < _RANK_PROBE
        probe = db.execute(probe_sql or self._sql(db, plan, combo, cut=True))
        rows = [(row[0],) for row in probe[:expected]]
        if not rows or any(row[0] is None for row in rows):
            return None
        limit = len(rows)
        if limit < expected or (len(probe) > limit and probe[limit - 1][1] == probe[limit][1]):
            return None
        if all(type(row[0]) is str for row in rows):
            return frozenset(rows)  # names: what normalize_rows keeps as they are
        return frozenset(normalize_rows(rows, 4))

    def _task(
        self,
        db: GeneratedDatabase,
        plan: _Plan,
        slots: list[fam.Slot],
        aliases: tuple[tuple[str, ...], ...],
        combos: list[tuple],
        sqls: list[str],
        request: str,
        seed: int,
        task_id: str,
    ) -> GeneratedTask:
        d = db.domain
        config = self.config
        spec = {
            "request": request,
            "database": db.name,
            "schema": None,
            "column_meanings": _column_meanings(db),
            "external_knowledge": [_DATA_NOTE],
        }
        split = "train" if d.name in TRAIN_DOMAINS else "test"
        records = []
        if not self.validate:
            spec_model = _built(
                PublicSpec,
                _SPEC_FIELDS,
                request=request,
                database=db.name,
                schema_text=None,
                column_meanings=spec["column_meanings"],
                external_knowledge=(_DATA_NOTE,),
            )
            ambiguity_models = self._ambiguity_models
        validated_spec: PublicSpec | None = None
        validated: dict[tuple[int, int], Ambiguity] = {}
        families = [slot.family for slot in slots]
        for k, (combo, sql) in enumerate(zip(combos, sqls, strict=True)):
            source = {
                "kind": "procedural",
                "generator": _GENERATOR,
                "task_seed": seed,
                "domain": d.name,
                "skeleton": plan.skeleton,
                "families": list(families),  # each record its own lists, as validation makes
                "distractors": list(plan.distractors),
                "readings": {slot.id: r.label for slot, r in zip(slots, combo, strict=True)},
            }
            if not self.validate:
                # the fast path: the same objects validation builds, without re-checking
                # what the generator builds correctly by construction (tests compare the two)
                ambiguities = []
                for slot, names, reading in zip(slots, aliases, combo, strict=True):
                    # slots and readings are memoized per database (families._memoized), so
                    # their models are built once per request's aliases; the entry holds both,
                    # so an id is never reused while its entry lives
                    key = (id(slot), id(reading), names)
                    entry = ambiguity_models.get(key)
                    if entry is None or entry[0] is not slot or entry[1] is not reading:
                        entry = (
                            slot,
                            reading,
                            _built(
                                Ambiguity,
                                _AMBIGUITY_FIELDS,
                                id=slot.id,
                                term=slot.term,
                                aliases=names,
                                kind=slot.kind,
                                resolution=reading.resolution,
                                response=reading.response,
                                sql_snippet=reading.sql_snippet,
                                evidence=reading.evidence,
                            ),
                        )
                        ambiguity_models[key] = entry
                    ambiguities.append(entry[2])
                records.append(
                    _built(
                        TaskRecord,
                        _RECORD_FIELDS,
                        format_version=FORMAT_VERSION,
                        id=f"{task_id}-{k}",
                        avt_id=task_id,
                        corpus=config.corpus,
                        split=split,
                        spec=spec_model,
                        ambiguities=tuple(ambiguities),
                        verification=_built(
                            VerificationSpec,
                            _VERIFICATION_FIELDS,
                            engine="sqlite",
                            database=db.name,
                            reference_sql=sql,
                            compare=_COMPARE,
                            test_cases=(),
                            preprocess_sql=(),
                            cleanup_sql=(),
                        ),
                        source=source,
                    )
                )
                continue
            # the spec and each (ambiguity, reading) are validated once per task and given to
            # the records as models (pydantic accepts a model instance without validating it
            # again): every part validated, none twice
            if validated_spec is None:
                validated_spec = PublicSpec.model_validate(spec)
            ambiguities_validated = []
            for i, (slot, names, reading) in enumerate(zip(slots, aliases, combo, strict=True)):
                model = validated.get((i, id(reading)))
                if model is None:
                    model = validated[(i, id(reading))] = Ambiguity.model_validate(
                        {
                            "id": slot.id,
                            "term": slot.term,
                            "aliases": list(names),
                            "kind": slot.kind,
                            "resolution": reading.resolution,
                            "response": reading.response,
                            "sql_snippet": reading.sql_snippet,
                            "evidence": reading.evidence,
                        }
                    )
                ambiguities_validated.append(model)
            data = {
                "id": f"{task_id}-{k}",
                "avt_id": task_id,
                "corpus": config.corpus,
                "split": split,
                "spec": validated_spec,
                "ambiguities": ambiguities_validated,
                "verification": {"engine": "sqlite", "database": db.name, "reference_sql": sql},
                "source": source,
            }
            records.append(TaskRecord.model_validate(data))
        return GeneratedTask(task_id, tuple(records), db, seed)
