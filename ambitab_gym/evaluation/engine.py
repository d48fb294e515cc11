"""The one campaign engine: work units, the async episode loop, progress, store writes, resume.

Evaluation campaigns (:func:`ambitab_gym.evaluation.run_campaign`) and leakage campaigns
(:func:`ambitab_gym.diagnostics.run_leakage`) differ only in their conditions and in how each
condition's env and asker are built; everything else happens here, once.

* :class:`WorkUnit` - one episode to run: (condition, seed, record).
* :class:`CampaignPlan` - what a campaign kind hands the engine: its id, stored config, records,
  seeds, conditions, and how to build a condition's env and asker.
* :func:`run_plan` - register the campaign in the results store, find the units not stored yet
  (resume), run them with many episodes in flight, store each row as it finishes.
* :func:`play_episode`, :func:`episode_seed` - one episode with an asker on an env; the row
  carries the episode's LLM tokens (``prompt_tokens``, ``completion_tokens``, ``llm_usage`` per
  role), counted on a :func:`~ambitab_gym.llm.usage.usage_meter` of its own.
* :class:`ProgressLog` - progress on a non-terminal: a line to stderr every few seconds (done /
  total, rate, errors, ETA); terminals (and notebooks) get a tqdm bar.
* :func:`seeds_can_vary` - whether any named component can behave differently under another
  run seed (from the registry's declared tags, without running anything).

Campaign identity: :func:`run_plan` folds the corpus identity (origin, checksum) and the package
version into the plan's id (:class:`~ambitab_gym.evaluation.identity.CampaignIdentity`), and
refuses (:class:`~ambitab_gym.evaluation.identity.CampaignMismatch`) to start a campaign whose
configuration the store holds over other data or another version, unless ``new_campaign``.

The default executor is local asyncio (:func:`run_units`): ``concurrency`` workers share one
event loop, each with its own env and asker per condition (askers are stateful), so LLM-bound
episodes overlap while scripted ones cost no thread switches. ``run_plan(executor=...)`` runs the
units elsewhere (:class:`~ambitab_gym.evaluation.ray_executor.RayExecutor`: each Ray worker runs
:func:`run_units` on its share); the store, resume and progress stay here.

Speed with many episodes in flight (``benchmarks/llm_throughput.py``): rows go to the results
store through :class:`StoreWriter` (one writer thread, rows in arrival order, drained on every
exit), so the event loop never waits for a DuckDB batch; :func:`tune_gc_for_campaigns`, called
at a process's entry, keeps the garbage collector from rescanning long-lived objects; the loop is uvloop's when uvloop is
installed (the ``llm-fast`` extra); the slots start a fraction of a millisecond apart
(``start_interval_s``, :data:`~ambitab_gym.defaults.SLOT_START_INTERVAL_S`), not in one burst
that would keep them moving in waves against a server with regular latency.
"""

from __future__ import annotations

import asyncio
import gc
import queue
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
from tqdm.auto import tqdm

from ambitab_gym import defaults, registry
from ambitab_gym.corpora import Corpus
from ambitab_gym.errors import (
    ConfigurationError,
    LLMServiceError,
    UnknownComponent,
    category_of,
)
from ambitab_gym.evaluation.identity import (
    CampaignIdentity,
    CampaignMismatch,
    config_hash,
    identity_of,
)
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.evaluation.summary import episode_metrics
from ambitab_gym.llm.sampling import EpisodeKey, episode_scope
from ambitab_gym.llm.usage import usage_meter
from ambitab_gym.oracles.base import Oracle
from ambitab_gym.records import TaskRecord

try:  # optional: libuv's event loop costs the campaign loop less CPU per request in flight
    import uvloop
except ImportError:  # pragma: no cover - depends on the environment
    uvloop = None

__all__ = [
    "CampaignAborted",
    "CampaignPlan",
    "EpisodeParts",
    "ProgressLog",
    "StoreWriter",
    "WorkUnit",
    "check_identity",
    "config_hash",
    "create_oracle",
    "episode_seed",
    "pending_units",
    "play_episode",
    "run_loop",
    "run_plan",
    "run_units",
    "seeds_can_vary",
    "tune_gc_for_campaigns",
]


class CampaignAborted(LLMServiceError):
    """A campaign stopped because its server stopped answering: ``abort_after`` episodes in a
    row ended in a server error (:func:`is_outage`). What finished is stored; the rest runs on
    resume.

    >>> CampaignAborted("down").category
    'llm_error'
    """


def is_outage(category: str | None) -> bool:
    """Whether an episode's error category says the server is unavailable (not the episode's
    own fault): a lost connection, a timeout, a 5xx or 429 answer.

    >>> [is_outage(c) for c in ("connection", "timeout", "http_503", "http_429", "http_400",
    ...                         "context_overflow", None)]
    [True, True, True, True, False, False, False]
    """
    if not category:
        return False
    return category in ("connection", "timeout", "http_429") or category.startswith("http_5")


#: ``condition -> (env, asker)``: builds one worker's env and asker for a condition.
EpisodeParts = Callable[[str], tuple[Any, Any]]


def create_oracle(name: str, corpus: Corpus, *, llm_client: Any = None, **options: Any) -> Oracle:
    """The oracle a campaign names (:func:`ambitab_gym.registry.create`), checked to be an
    :class:`~ambitab_gym.oracles.Oracle` (an import path may name anything).

    >>> from ambitab_gym.corpora import load_corpus
    >>> create_oracle("deterministic", load_corpus("bird")).name
    'KnowledgeMatcher+ReferenceResponder'
    """
    oracle = registry.create("oracle", name, corpus=corpus, llm_client=llm_client, **options)
    if not isinstance(oracle, Oracle):
        raise ConfigurationError(f"{name!r} did not give an Oracle (got {type(oracle).__name__})")
    return oracle


@dataclass(frozen=True)
class WorkUnit:
    """One episode of a campaign.

    >>> WorkUnit("asker", 0, None).condition
    'asker'
    """

    condition: str
    seed: int
    record: TaskRecord


@dataclass
class CampaignPlan:
    """A campaign as the engine runs it.

    Attributes:
        kind: the campaign kind stored with it (``evaluate``, ``leakage``).
        campaign_id: its id (:func:`config_hash` of its definition).
        config: the configuration stored with the campaign (JSON-serializable).
        corpus: the corpus.
        records: the records to run.
        seeds: the seeds.
        conditions: the conditions.
        parts: ``condition -> (env, asker)``, called at most once per worker and condition.
        finish_row: adjusts a row before it is stored (e.g. recall-only runs store no success).
        label: the progress bar's label.
        name: the configuration's hash: set by :func:`run_plan`, which moves the given
            ``campaign_id`` here and sets ``campaign_id`` to the id folding in ``identity``.
        identity: the corpus and package identity (set by :func:`run_plan` when None).
    """

    kind: str
    campaign_id: str
    config: dict
    corpus: Corpus
    records: list[TaskRecord]
    seeds: tuple[int, ...]
    conditions: tuple[str, ...]
    parts: EpisodeParts
    finish_row: Callable[[dict], None] | None = None
    label: str = ""
    name: str | None = None
    identity: CampaignIdentity | None = None

    def settle_identity(self) -> str:
        """Fold the corpus identity into the campaign id (once); returns the id."""
        if self.name is None:
            if self.identity is None:
                self.identity = identity_of(self.corpus)
            self.name = self.campaign_id
            self.campaign_id = self.identity.campaign_id(self.name)
        return self.campaign_id


def episode_seed(seed: int, record_id: str) -> int:
    """The asker's seed for one episode: derived from the run seed and the record id.

    >>> episode_seed(0, "bird-0001") == episode_seed(0, "bird-0001") != episode_seed(1, "bird-0001")
    True
    """
    sequence = np.random.SeedSequence([int(seed), zlib.crc32(record_id.encode())])
    return int(sequence.generate_state(1)[0])


async def _call(method: Callable, *args: Any) -> Any:
    result = method(*args)
    if asyncio.iscoroutine(result):
        return await result
    return result


async def play_episode(env: Any, asker: Any, record: TaskRecord, *, seed: int) -> dict:
    """Run one episode; returns its row (without the campaign fields).

    A failure of the asker or the oracle (an LLM server fault, say) ends the episode as a
    failure with the exception's category (:func:`ambitab_gym.errors.category_of`) recorded;
    it never stops the campaign.

    Example:
        >>> import asyncio
        >>> from ambitab_gym.env import AmbiTabEnv
        >>> from ambitab_gym.policies.scripted import FullAsker
        >>> env = AmbiTabEnv("taco")
        >>> row = asyncio.run(play_episode(env, FullAsker(), env.records[0], seed=0))
        >>> row["stop_reason"], row["recall"]
        ('asker', 1.0)
    """
    with usage_meter() as meter:
        row = await _play(env, asker, record, seed=seed)
    row["prompt_tokens"] = meter.prompt_tokens
    row["completion_tokens"] = meter.completion_tokens
    row["llm_usage"] = meter.to_dict() or None
    return row


async def _play(env: Any, asker: Any, record: TaskRecord, *, seed: int) -> dict:
    start = time.perf_counter()
    env.reset(seed=seed, options={"record_id": record.id})
    reset = getattr(asker, "reset", None)
    if reset is not None:
        if getattr(asker, "privileged", False):
            reset(seed=episode_seed(seed, record.id), record=record)
        else:
            reset(seed=episode_seed(seed, record.id))
    act = getattr(asker, "aact", None) or asker.act
    error = None
    try:
        while True:
            action = await _call(act, env.public_view)
            _, _, terminated, truncated, _ = await env.astep(action)
            if terminated or truncated:
                break
    except Exception as exc:  # noqa: BLE001 - recorded, never raised into the campaign
        error = category_of(exc)
    trajectory = env.trajectory
    assert trajectory is not None
    error = error or trajectory.error
    verdict = trajectory.verdict
    metrics = episode_metrics(trajectory, record)
    if error is not None:
        metrics["success"] = 0.0
    elapsed = time.perf_counter() - start
    return {
        "record_id": record.id,
        "avt_id": record.avt_id,
        "split": record.split,
        "m": record.m,
        "n_questions": trajectory.n_questions,
        **metrics,
        "stop_reason": trajectory.stop_reason,
        # a failed Verdict is falsy: test for None, or every failure loses its reason
        "verdict_reason": None if verdict is None else verdict.reason,
        "verdict_detail": None if verdict is None else verdict.detail,
        "error": error,
        "sql": trajectory.sql,
        "dialogue": [
            {
                "question": t.question,
                "answer": t.answer,
                "credits": sorted(t.credits),
                **({"route": t.route} if t.route is not None else {}),  # for re-scoring (C.3)
                **({"answer_reveals_sql": True} if t.answer_reveals_sql else {}),  # privileged
                **({"shown_answer": t.shown_answer} if t.shown_answer is not None else {}),
            }
            for t in trajectory.turns
        ],
        "timings": {**trajectory.timings, "episode_s": elapsed},
        "elapsed_s": elapsed,
    }


async def run_units(
    plan: CampaignPlan,
    units: list[WorkUnit] | asyncio.Queue[WorkUnit | None],
    *,
    concurrency: int,
    on_row: Callable[[dict], None],
    start_offset_s: float = 0.0,
    start_interval_s: float = defaults.SLOT_START_INTERVAL_S,
) -> None:
    """Run units on the current event loop, ``concurrency`` episodes in flight, each worker
    with its own env and asker per condition (built by ``plan.parts``, closed at the end);
    every finished row (campaign fields set, ``plan.finish_row`` applied) goes to ``on_row``.

    ``units`` is a list, or a queue that others keep filling (a process worker's feed): then
    ``concurrency`` workers wait on it, and each stops at a ``None`` it takes.

    Staggered starts: worker ``i`` takes its first unit ``start_offset_s + i *
    start_interval_s`` seconds after the start (0 for both: every worker at once), so the
    first LLM calls of a campaign reach the server spread over time instead of in one burst
    (see :data:`~ambitab_gym.defaults.SLOT_START_INTERVAL_S`). Only timing changes: each
    episode's row depends on its unit alone. A cancelled run (Ctrl-C) cancels the workers
    still waiting for their start like the others.

    The episode loop of a local campaign and of every Ray or process worker
    (:mod:`ambitab_gym.evaluation.ray_executor`, :mod:`ambitab_gym.evaluation.process_executor`).

    Example (4 workers, 20 ms apart: the last one starts about 60 ms after the first):

        >>> import asyncio
        >>> from ambitab_gym.corpora import load_corpus
        >>> from ambitab_gym.env import AmbiTabEnv
        >>> from ambitab_gym.policies.scripted import FullAsker
        >>> corpus = load_corpus("taco")
        >>> plan = CampaignPlan("evaluate", "id", {}, corpus, corpus.records[:4], (0,),
        ...                     ("full",), lambda c: (AmbiTabEnv(corpus), FullAsker()))
        >>> rows = []
        >>> asyncio.run(run_units(plan, [WorkUnit("full", 0, r) for r in plan.records],
        ...                       concurrency=4, on_row=rows.append, start_interval_s=0.02))
        >>> sorted(row["record_id"] for row in rows) == sorted(r.id for r in corpus.records[:4])
        True
    """
    streaming = isinstance(units, asyncio.Queue)
    if streaming:
        queue = units
    else:
        queue = asyncio.Queue()
        for unit in units:
            queue.put_nowait(unit)

    async def worker(index: int) -> None:
        built: dict[str, tuple[Any, Any]] = {}
        try:
            delay = start_offset_s + index * start_interval_s
            if delay > 0:
                await asyncio.sleep(delay)
            while True:
                if streaming:
                    unit = await queue.get()
                    if unit is None:
                        return
                else:
                    try:
                        unit = queue.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                if unit.condition not in built:
                    built[unit.condition] = plan.parts(unit.condition)
                env, asker = built[unit.condition]
                # LLM calls of this episode derive their seeds from its key (llm/sampling.py);
                # each worker is its own task, so the key is its own
                # the configuration's hash, so another corpus or version samples the same seeds
                name = plan.name or plan.campaign_id
                key = EpisodeKey(name, unit.condition, unit.seed, unit.record.id)
                with episode_scope(key):
                    row = await play_episode(env, asker, unit.record, seed=unit.seed)
                row.update(campaign_id=plan.campaign_id, condition=unit.condition, seed=unit.seed)
                if plan.finish_row is not None:
                    plan.finish_row(row)
                on_row(row)
        finally:
            for env, _ in built.values():
                env.close()

    count = max(1, concurrency if streaming else min(concurrency, queue.qsize()))
    await asyncio.gather(*(asyncio.create_task(worker(i)) for i in range(count)))


def _duration(seconds: float) -> str:
    """``1h02m``, ``3m05s``, ``42s``.

    >>> _duration(3725), _duration(185), _duration(42.4)
    ('1h02m', '3m05s', '42s')
    """
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class ProgressLog:
    """Progress as plain lines (for logs and pipes): one line when the run starts, one every
    ``interval_s`` seconds while episodes finish, one at the end.

    Args:
        total: episodes to run.
        label: the line's prefix (the corpus or campaign kind).
        interval_s: seconds between lines.
        stream: where lines go (default ``sys.stderr``).
        clock: the time source (monotonic seconds).

    Example:
        >>> import io
        >>> ticks = iter([0.0, 5.0, 10.0, 10.0])
        >>> out = io.StringIO()
        >>> log = ProgressLog(4, "bird", interval_s=10, stream=out, clock=lambda: next(ticks))
        >>> log.update(error=True)   # at 5 s: too soon for a line
        >>> log.update()             # at 10 s
        >>> log.close()
        >>> print(out.getvalue().strip())
        bird: 4 episode(s) to run
        bird: 2/4 episodes (50%), 0.20 ep/s, 1 error(s), ETA 10s
        bird: 2/4 episodes (50%), 0.20 ep/s, 1 error(s), ended after 10s
    """

    def __init__(
        self,
        total: int,
        label: str,
        *,
        interval_s: float = defaults.PROGRESS_INTERVAL_S,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.label, self.interval_s = total, label, interval_s
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.done = self.errors = 0
        self.started = self._last = clock()
        self._emit(f"{label}: {total} episode(s) to run")

    def _emit(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def _status(self, now: float) -> tuple[str, float]:
        rate = self.done / max(now - self.started, 1e-9)
        percent = 100 * self.done / self.total if self.total else 100.0
        line = (
            f"{self.label}: {self.done}/{self.total} episodes ({percent:.0f}%), "
            f"{rate:.2f} ep/s, {self.errors} error(s)"
        )
        return line, rate

    def update(self, *, error: bool = False) -> None:
        """One episode finished (``error``: it ended in an error)."""
        self.done += 1
        self.errors += int(error)
        now = self.clock()
        if now - self._last >= self.interval_s:
            self._last = now
            line, rate = self._status(now)
            eta = _duration((self.total - self.done) / rate) if rate > 0 else "unknown"
            self._emit(f"{line}, ETA {eta}")

    def close(self) -> None:
        """The last line."""
        now = self.clock()
        line, _ = self._status(now)
        self._emit(f"{line}, ended after {_duration(now - self.started)}")


class _Bar:
    """tqdm with the error count shown."""

    def __init__(self, total: int, label: str) -> None:
        self.bar = tqdm(total=total, unit="ep", desc=label, leave=False)
        self.errors = 0

    def update(self, *, error: bool = False) -> None:
        if error:
            self.errors += 1
            self.bar.set_postfix(errors=self.errors, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


class _Silent:
    def update(self, *, error: bool = False) -> None:
        pass

    def close(self) -> None:
        pass


def _interactive(stream: TextIO) -> bool:
    """A terminal, or a Jupyter kernel (where tqdm draws a widget)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) or "ipykernel" in sys.modules


def _progress(total: int, label: str, progress: bool, interval_s: float | None) -> Any:
    if not progress:
        return _Silent()
    if _interactive(sys.stderr):
        return _Bar(total, label)
    return ProgressLog(total, label, interval_s=interval_s or defaults.PROGRESS_INTERVAL_S)


_STOP = object()


class StoreWriter:
    """Stores rows on one writer thread, so the event loop never waits for DuckDB.

    :meth:`add` queues a row (it returns at once); the thread hands the rows to
    ``store.add_episode`` in the order they were queued (the store batches and flushes them as
    before) and flushes the store whenever no row came for ``store.flush_seconds``. :meth:`close`
    drains the queue, flushes and stops the thread; a campaign interrupted by an exception or
    Ctrl-C closes it on its way out, so every episode queued before is stored. The store is
    used by this thread alone between construction and :meth:`close`.

    A failure of the store (a full disk, say) is raised by the next :meth:`add` and by
    :meth:`close`; the rows after it are not written.

    Example:
        >>> import os, tempfile
        >>> from ambitab_gym.evaluation.store import ResultsStore
        >>> store = ResultsStore(os.path.join(tempfile.mkdtemp(), "r.duckdb"))
        >>> writer = StoreWriter(store)
        >>> writer.add({"campaign_id": "c", "condition": "asker", "seed": 0, "record_id": "r1"})
        >>> writer.close()
        >>> store.done_keys("c")
        {('asker', 0, 'r1')}
    """

    def __init__(self, store: ResultsStore) -> None:
        self.store = store
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="ambitab-store-writer", daemon=True)
        self._thread.start()

    def add(self, row: dict) -> None:
        """Queue one row for the store (raises the store's failure, if one happened)."""
        if self.error is not None:
            raise self.error
        self._queue.put(row)

    def _run(self) -> None:
        idle = max(float(getattr(self.store, "flush_seconds", 2.0)), 0.05)
        while True:
            try:
                row = self._queue.get(timeout=idle)
            except queue.Empty:
                row = None  # a quiet spell: write what is buffered
            if row is _STOP:
                return
            if self.error is not None:
                continue  # drain without writing after a failure
            try:
                if row is None:
                    self.store.flush()
                else:
                    self.store.add_episode(row)
            except BaseException as error:  # noqa: BLE001 - raised in the campaign's thread
                self.error = error

    def close(self) -> None:
        """Store every queued row, flush, stop the thread; raise the store's failure if any."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()
        if self.error is None:
            self.store.flush()
        if self.error is not None:
            raise self.error


def tune_gc_for_campaigns() -> None:
    """Fewer garbage-collector passes for a process that runs campaigns: what is alive now
    (imported modules, corpora) leaves the collector's view (:func:`gc.freeze`) and the youngest
    generation is collected every 20,000 allocations instead of 700. With hundreds of episodes
    in flight the default thresholds rescan every live request many times a second
    (``benchmarks/llm_throughput.py``; figures in benchmarks/RESULTS.md).

    It changes the whole process, so only a process's entry calls it (the command line, a
    campaign worker), never a library function.
    """
    gc.freeze()
    gc.set_threshold(20_000, *gc.get_threshold()[1:])


def run_loop(coro: Any) -> Any:
    """``asyncio.run`` on uvloop's event loop when uvloop is installed (the ``llm-fast`` extra),
    else on asyncio's own: how a campaign runs its units.

    >>> async def two():
    ...     return 2
    >>> run_loop(two())
    2
    """
    factory = uvloop.new_event_loop if uvloop is not None else None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


def _execute(
    plan: CampaignPlan,
    units: list[WorkUnit],
    store: ResultsStore,
    *,
    concurrency: int,
    progress: bool,
    executor: Any = None,
    progress_interval: float | None = None,
    abort_after: int = defaults.ABORT_AFTER_ERRORS,
    start_interval_s: float = defaults.SLOT_START_INTERVAL_S,
) -> None:
    """Run the units (here, or on ``executor``) and store every row as it arrives; stop with
    :class:`CampaignAborted` after ``abort_after`` server errors in a row (0: never). The
    slots start ``start_interval_s`` apart (:func:`run_units`)."""
    bar = _progress(len(units), plan.label or plan.corpus.name, progress, progress_interval)
    streak: list[str] = []  # error categories of the latest episodes, all outages
    stored = [0]
    # DuckDB writes (about 30 ms a batch) happen on a thread of their own, never on the loop
    writer = StoreWriter(store)

    def on_row(row: dict) -> None:
        writer.add(row)
        stored[0] += 1
        error = row.get("error")
        bar.update(error=error is not None)
        if not is_outage(error):
            streak.clear()
            return
        streak.append(str(error))
        if abort_after and len(streak) >= abort_after:
            kinds = ", ".join(sorted(set(streak)))
            raise CampaignAborted(
                f"stopped: the last {len(streak)} episodes ended in a server error ({kinds}); "
                f"is the LLM server down or overloaded? {stored[0]} episode(s) of this run are "
                "stored, the others have not run. Rerun the same command once the server "
                "answers (with --retry-errors to run the errored ones again); --abort-after 0 "
                "never stops."
            )

    try:
        if executor is None:
            run_loop(
                run_units(
                    plan, units, concurrency=concurrency, on_row=on_row,
                    start_interval_s=start_interval_s,
                )
            )  # fmt: skip
        else:
            executor.run(
                plan, units, on_row, concurrency=concurrency, start_interval_s=start_interval_s
            )
    finally:
        bar.close()
        # every row handed over so far is stored, also when the campaign was interrupted
        writer.close()


def pending_units(
    plan: CampaignPlan, store: ResultsStore, *, retry_errors: bool = False
) -> list[WorkUnit]:
    """The plan's units that the store does not hold yet (what a resumed campaign runs); with
    ``retry_errors`` also those stored with an error."""
    todo = store.pending(
        plan.campaign_id, plan.seeds, plan.conditions, plan.records, retry_errors=retry_errors
    )
    return [WorkUnit(condition, seed, record) for condition, seed, record in todo]


def check_identity(plan: CampaignPlan, store: ResultsStore, *, new_campaign: bool = False) -> None:
    """Settle the plan's id (:meth:`CampaignPlan.settle_identity`) and refuse to start its
    campaign in a store that holds episodes of the same configuration over other data or another
    package version (unless ``new_campaign``); resuming a stored campaign is always allowed.

    Raises:
        CampaignMismatch: naming the stored campaign, what differs, and what to do.
    """
    campaign_id = plan.settle_identity()
    assert plan.name is not None and plan.identity is not None
    if new_campaign or store.campaign(campaign_id) is not None:
        return  # asked for a new campaign, or the stored one is resumed
    others = [
        c
        for c in store.campaigns_named(plan.name)
        if c["campaign_id"] != campaign_id and store.episode_count(c["campaign_id"])
    ]
    if not others:
        return
    stored = others[-1]
    theirs = CampaignIdentity.from_columns(stored["corpus"] or plan.corpus.name, stored)
    differs = "; ".join(plan.identity.differences(theirs)) or "its identity"
    raise CampaignMismatch(
        f"{store.path} holds campaign {stored['campaign_id']} with the same configuration over "
        f"other data or another package version ({differs}); its episodes are not mixed with "
        f"this run's. Give a new results file (--results PATH), or start campaign "
        f"{campaign_id} next to it in this file with --new-campaign (new_campaign=True)."
    )


def seeds_can_vary(components: Iterable[tuple[str, str]]) -> bool:
    """Whether another run seed can change what any of the ``(kind, name)`` components does.

    Decided from the registry's declared tags, nothing is run: LLM components (tag ``llm``)
    sample with seeds derived from the run seed; the scripted askers, solvers and oracles of
    the registry ignore it (the env picks each record by id); an import path
    (``module:callable``) is unknown code, so it is assumed to use the seed.

    >>> seeds_can_vary([("asker", "full"), ("solver", "interpretation"),
    ...                 ("oracle", "deterministic")])
    False
    >>> seeds_can_vary([("asker", "llm:direct")]), seeds_can_vary([("asker", "mine:Asker")])
    (True, True)
    """
    for kind, name in components:
        try:
            entry = registry.get(kind, name)
        except UnknownComponent:
            return True
        if "llm" in entry.tags:
            return True
    return False


def run_plan(
    plan: CampaignPlan,
    store: ResultsStore,
    *,
    concurrency: int = 1,
    progress: bool = True,
    prepare: Callable[[], None] | None = None,
    executor: Any = None,
    retry_errors: bool = False,
    new_campaign: bool = False,
    progress_interval: float | None = None,
    abort_after: int | None = None,
    start_interval_s: float = defaults.SLOT_START_INTERVAL_S,
) -> int:
    """Register the campaign, run every unit not stored yet, store each row; returns how many
    episodes ran.

    Args:
        plan: the campaign; its ``campaign_id`` becomes the id that folds in the corpus
            identity and the package version (:meth:`CampaignPlan.settle_identity`): read the
            id from the plan afterwards.
        store: the open results store.
        concurrency: episodes in flight at once (useful with LLM servers).
        progress: show progress on stderr: a tqdm bar on a terminal (or in a notebook), else a
            line every ``progress_interval`` seconds (:class:`ProgressLog`).
        prepare: called once before the first episode, only when there is work (builds
            expensive shared parts: solvers, LLM oracles).
        executor: runs the units elsewhere: an object with ``run(plan, units, on_row, *,
            concurrency, start_interval_s)`` that calls ``on_row`` here for every row as it
            arrives and starts the campaign's slots ``start_interval_s`` apart (e.g.
            :class:`~ambitab_gym.evaluation.ray_executor.RayExecutor`); None: this process's
            event loop. The store, resume and progress are the same either way.
        retry_errors: also run the episodes stored with an error (their rows are replaced).
        new_campaign: start the campaign even when the store holds its configuration over
            other data or another package version (see :func:`check_identity`).
        progress_interval: seconds between progress lines (default
            :data:`~ambitab_gym.defaults.PROGRESS_INTERVAL_S`).
        abort_after: stop after this many episodes in a row ended in a server error (default
            :data:`~ambitab_gym.defaults.ABORT_AFTER_ERRORS`; 0: never).
        start_interval_s: seconds between the first episodes of the slots (default
            :data:`~ambitab_gym.defaults.SLOT_START_INTERVAL_S`; 0: all at once): timing only,
            not part of the campaign's id; the rows are the same.

    Raises:
        CampaignMismatch: see :func:`check_identity`; nothing is stored then.
        CampaignAborted: the server stopped answering (see ``abort_after``); what finished is
            stored.
    """
    if not start_interval_s >= 0:
        raise ConfigurationError(f"start_interval_s must be 0 or more, not {start_interval_s}")
    check_identity(plan, store, new_campaign=new_campaign)
    assert plan.name is not None and plan.identity is not None
    store.add_campaign(
        plan.campaign_id,
        plan.config,
        kind=plan.kind,
        corpus=plan.corpus.name,
        env_id=plan.corpus.env_id or "",
        identity=plan.identity.columns(plan.name),
    )
    units = pending_units(plan, store, retry_errors=retry_errors)
    if units:
        if prepare is not None:
            prepare()
        _execute(
            plan,
            units,
            store,
            concurrency=concurrency,
            progress=progress,
            executor=executor,
            progress_interval=progress_interval,
            abort_after=defaults.ABORT_AFTER_ERRORS if abort_after is None else abort_after,
            start_interval_s=start_interval_s,
        )
    return len(units)
