"""The one campaign engine: work units, the async episode loop, progress, store writes, resume.

Evaluation campaigns (:func:`ambitab_gym.evaluation.run_campaign`) and leakage campaigns
(:func:`ambitab_gym.diagnostics.run_leakage`) differ only in their conditions and in how each
condition's env and asker are built; everything else happens here, once.

* :func:`config_hash` - the campaign id of a configuration (the hash of its canonical JSON).
* :class:`WorkUnit` - one episode to run: (condition, seed, record).
* :class:`CampaignPlan` - what a campaign kind hands the engine: its id, stored config, records,
  seeds, conditions, and how to build a condition's env and asker.
* :func:`run_plan` - register the campaign in the results store, find the units not stored yet
  (resume), run them with many episodes in flight, store each row as it finishes.
* :func:`play_episode`, :func:`episode_seed` - one episode with an asker on an env.

The default executor is local asyncio (:func:`run_units`): ``concurrency`` workers share one
event loop, each with its own env and asker per condition (askers are stateful), so LLM-bound
episodes overlap while scripted ones cost no thread switches. ``run_plan(executor=...)`` runs the
units elsewhere (:class:`~ambitab_gym.evaluation.ray_executor.RayExecutor`: each Ray worker runs
:func:`run_units` on its share); the store, resume and progress stay here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ambitab_gym import registry
from ambitab_gym.corpora import Corpus
from ambitab_gym.errors import ConfigurationError, category_of
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.evaluation.summary import episode_metrics
from ambitab_gym.llm.sampling import EpisodeKey, episode_scope
from ambitab_gym.oracles.base import Oracle
from ambitab_gym.records import TaskRecord

__all__ = [
    "CampaignPlan",
    "EpisodeParts",
    "WorkUnit",
    "config_hash",
    "create_oracle",
    "episode_seed",
    "pending_units",
    "play_episode",
    "run_plan",
    "run_units",
]

#: ``condition -> (env, asker)``: builds one worker's env and asker for a condition.
EpisodeParts = Callable[[str], tuple[Any, Any]]


def config_hash(config: Mapping[str, Any]) -> str:
    """A stable 16-hex-digit id of a configuration: sha256 of its sorted-key JSON.

    >>> config_hash({"b": 1, "a": (0, 1)}) == config_hash({"a": [0, 1], "b": 1})
    True
    >>> len(config_hash({}))
    16
    """
    payload = json.dumps(dict(config), sort_keys=True, default=list)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


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
    units: list[WorkUnit],
    *,
    concurrency: int,
    on_row: Callable[[dict], None],
) -> None:
    """Run units on the current event loop, ``concurrency`` episodes in flight, each worker
    with its own env and asker per condition (built by ``plan.parts``, closed at the end);
    every finished row (campaign fields set, ``plan.finish_row`` applied) goes to ``on_row``.

    The episode loop of a local campaign and of every Ray worker
    (:mod:`ambitab_gym.evaluation.ray_executor`).
    """
    queue: asyncio.Queue[WorkUnit] = asyncio.Queue()
    for unit in units:
        queue.put_nowait(unit)

    async def worker() -> None:
        built: dict[str, tuple[Any, Any]] = {}
        try:
            while True:
                try:
                    unit = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                if unit.condition not in built:
                    built[unit.condition] = plan.parts(unit.condition)
                env, asker = built[unit.condition]
                # LLM calls of this episode derive their seeds from its key (llm/sampling.py);
                # each worker is its own task, so the key is its own
                key = EpisodeKey(plan.campaign_id, unit.condition, unit.seed, unit.record.id)
                with episode_scope(key):
                    row = await play_episode(env, asker, unit.record, seed=unit.seed)
                row.update(campaign_id=plan.campaign_id, condition=unit.condition, seed=unit.seed)
                if plan.finish_row is not None:
                    plan.finish_row(row)
                on_row(row)
        finally:
            for env, _ in built.values():
                env.close()

    count = max(1, min(concurrency, len(units)))
    await asyncio.gather(*(asyncio.create_task(worker()) for _ in range(count)))


def _execute(
    plan: CampaignPlan,
    units: list[WorkUnit],
    store: ResultsStore,
    *,
    concurrency: int,
    progress: bool,
    executor: Any = None,
) -> None:
    """Run the units (here, or on ``executor``) and store every row as it arrives."""
    bar = tqdm(
        total=len(units),
        disable=not progress,
        unit="ep",
        desc=plan.label or plan.corpus.name,
        leave=False,
    )

    def on_row(row: dict) -> None:
        store.add_episode(row)
        bar.update(1)

    try:
        if executor is None:
            asyncio.run(run_units(plan, units, concurrency=concurrency, on_row=on_row))
        else:
            executor.run(plan, units, on_row, concurrency=concurrency)
    finally:
        bar.close()
        store.flush()


def pending_units(plan: CampaignPlan, store: ResultsStore) -> list[WorkUnit]:
    """The plan's units that the store does not hold yet (what a resumed campaign runs)."""
    todo = store.pending(plan.campaign_id, plan.seeds, plan.conditions, plan.records)
    return [WorkUnit(condition, seed, record) for condition, seed, record in todo]


def run_plan(
    plan: CampaignPlan,
    store: ResultsStore,
    *,
    concurrency: int = 1,
    progress: bool = True,
    prepare: Callable[[], None] | None = None,
    executor: Any = None,
) -> int:
    """Register the campaign, run every unit not stored yet, store each row; returns how many
    episodes ran.

    Args:
        plan: the campaign.
        store: the open results store.
        concurrency: episodes in flight at once (useful with LLM servers).
        progress: show a progress bar on stderr.
        prepare: called once before the first episode, only when there is work (builds
            expensive shared parts: solvers, LLM oracles).
        executor: runs the units elsewhere: an object with ``run(plan, units, on_row, *,
            concurrency)`` that calls ``on_row`` here for every row as it arrives (e.g.
            :class:`~ambitab_gym.evaluation.ray_executor.RayExecutor`); None: this process's
            event loop. The store, resume and progress are the same either way.
    """
    store.add_campaign(
        plan.campaign_id,
        plan.config,
        kind=plan.kind,
        corpus=plan.corpus.name,
        env_id=plan.corpus.env_id or "",
    )
    units = pending_units(plan, store)
    if units:
        if prepare is not None:
            prepare()
        _execute(
            plan, units, store, concurrency=concurrency, progress=progress, executor=executor
        )
    return len(units)
