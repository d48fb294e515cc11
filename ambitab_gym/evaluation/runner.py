"""Evaluation campaigns: the none / asker / full conditions over a corpus split and seeds.

* :class:`CampaignConfig` - what a campaign runs; its hash is the campaign id, so rerunning the
  same config resumes it.
* :func:`play_episode` - one episode with an asker on an env (async; works for sync parts too).
* :func:`run_campaign` - every (condition, seed, record) not yet stored, many in flight at once
  against LLM servers, each stored as it finishes; returns the campaign's :class:`Summary`.

Conditions (paper C.1): ``none`` (pi_none), ``asker`` (the evaluated asker), ``full`` (pi_full),
all with the same solver and oracle. Records with m = 0 skip clarification.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ambitab_gym.corpora import Corpus, load_corpus
from ambitab_gym.env import AmbiTabEnv
from ambitab_gym.evaluation.components import make_asker, make_oracle, make_solver
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.evaluation.summary import Summary, episode_metrics, summarize
from ambitab_gym.records import TaskRecord
from ambitab_gym.verify.base import Limits

__all__ = ["CampaignConfig", "episode_seed", "play_episode", "run_campaign"]


@dataclass(frozen=True)
class CampaignConfig:
    """A campaign's definition.

    Attributes:
        corpus: env id, corpus name or folder.
        asker: the evaluated asker (``none``, ``full``, ``full-adv``, ``generic``,
            ``llm:STRATEGY`` or ``module:callable``).
        solver: ``interpretation``, ``llm`` or ``module:callable``.
        oracle: ``deterministic``, ``llm``, a leaky oracle name or ``module:callable``.
        seeds: evaluation seeds.
        split: a split name, or None for every record.
        conditions: which of ``none``, ``asker``, ``full`` to run.
        budget_slack: decisions allowed beyond m (paper: 3).
        limit: run only the first ``limit`` records of the split.
        llm: LLM server options that identify the model (url, model, sampling).
        limits: verifier limits for the submitted SQL, as keyword arguments of
            :class:`~ambitab_gym.verify.Limits` (e.g. ``{"timeout_s": 2.0}``); None for the
            defaults. Part of the campaign id only when given, so earlier ids stay valid.

    >>> a = CampaignConfig("AmbiTab-Bird-v0", asker="generic", seeds=(0, 1))
    >>> a.campaign_id == CampaignConfig("AmbiTab-Bird-v0", asker="generic", seeds=(0, 1)).campaign_id
    True
    >>> a.campaign_id == CampaignConfig("AmbiTab-Bird-v0", asker="full", seeds=(0, 1)).campaign_id
    False
    """

    corpus: str
    asker: str = "full"
    solver: str = "interpretation"
    oracle: str = "deterministic"
    seeds: tuple[int, ...] = (0,)
    split: str | None = None
    conditions: tuple[str, ...] = ("none", "asker", "full")
    budget_slack: int = 3
    limit: int | None = None
    llm: dict = field(default_factory=dict)
    limits: dict | None = None

    def __post_init__(self) -> None:
        unknown = set(self.conditions) - {"none", "asker", "full"}
        if unknown:
            raise ValueError(f"unknown conditions {sorted(unknown)}; use none, asker, full")
        if not self.seeds:
            raise ValueError("a campaign needs at least one seed")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be a positive number of records, not {self.limit}")
        if self.limits is not None:
            self.verifier_limits()  # fail here, not in the middle of a campaign

    def verifier_limits(self) -> Limits | None:
        """The :class:`~ambitab_gym.verify.Limits` of :attr:`limits` (None: the defaults)."""
        if self.limits is None:
            return None
        try:
            return Limits(**self.limits)
        except TypeError as error:
            raise ValueError(f"invalid verifier limits {self.limits!r}: {error}") from None

    @property
    def campaign_id(self) -> str:
        """A stable id: the hash of the configuration."""
        data = asdict(self)
        if data["limits"] is None:
            del data["limits"]  # ids of campaigns from before the field existed stay the same
        payload = json.dumps(data, sort_keys=True, default=list)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


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


async def play_episode(env: AmbiTabEnv, asker: Any, record: TaskRecord, *, seed: int) -> dict:
    """Run one episode; returns its row (without the campaign fields).

    A failure of the asker or the oracle (an LLM server fault, say) ends the episode as a
    failure with the exception's ``category`` recorded; it never stops the campaign.
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
        error = getattr(exc, "category", None) or type(exc).__name__
    trajectory = env.trajectory
    assert trajectory is not None
    error = error or trajectory.error
    verdict = trajectory.verdict
    metrics = episode_metrics(trajectory, record)
    if error is not None:
        metrics["success"] = 0.0
    elapsed = time.perf_counter() - start
    row = {
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
            }
            for t in trajectory.turns
        ],
        "timings": {**trajectory.timings, "episode_s": elapsed},
        "elapsed_s": elapsed,
    }
    return row


def _asker_for(condition: str, config: CampaignConfig, corpus: Corpus, llm_client: Any) -> Any:
    if condition == "none":
        return make_asker("none")
    if condition == "full":
        return make_asker("full")
    return make_asker(config.asker, corpus=corpus, llm_client=llm_client)


async def _run(
    config: CampaignConfig,
    corpus: Corpus,
    store: ResultsStore,
    todo: list[tuple[str, int, TaskRecord]],
    *,
    concurrency: int,
    llm_client: Any,
    progress: bool,
    make_env: Callable[[], AmbiTabEnv],
) -> None:
    queue: asyncio.Queue = asyncio.Queue()
    for item in todo:
        queue.put_nowait(item)
    bar = tqdm(total=len(todo), disable=not progress, unit="ep", desc=corpus.name, leave=False)

    campaign_id = config.campaign_id

    async def worker() -> None:
        env = make_env()
        askers: dict[str, Any] = {}
        try:
            while True:
                try:
                    condition, seed, record = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                asker = askers.get(condition)
                if asker is None:
                    asker = askers[condition] = _asker_for(condition, config, corpus, llm_client)
                row = await play_episode(env, asker, record, seed=seed)
                row.update(campaign_id=campaign_id, condition=condition, seed=seed)
                store.add_episode(row)
                bar.update(1)
        finally:
            env.close()

    try:
        workers = [
            asyncio.create_task(worker()) for _ in range(max(1, min(concurrency, len(todo))))
        ]
        await asyncio.gather(*workers)
    finally:
        bar.close()
        store.flush()


def run_campaign(
    config: CampaignConfig,
    results: str | Path | ResultsStore,
    *,
    concurrency: int = 1,
    llm_client: Any = None,
    progress: bool = True,
    oracle_options: dict | None = None,
) -> Summary:
    """Run (or resume) a campaign and return its summary.

    Args:
        config: the campaign.
        results: a DuckDB results file or an open :class:`ResultsStore`.
        concurrency: episodes in flight at once (useful with LLM servers).
        llm_client: the LLM client for ``llm`` askers, solvers and oracles.
        progress: show a progress bar on stderr.
        oracle_options: extra options for the oracle factory (LLM access policy, ...).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "results.duckdb")
        >>> config = CampaignConfig("AmbiTab-Bird-v0", asker="full", seeds=(0,), limit=6)
        >>> summary = run_campaign(config, path, progress=False)
        >>> summary.sr["full"].mean >= summary.sr["none"].mean, summary.recall.mean
        (True, 1.0)
    """
    corpus = load_corpus(config.corpus)
    records = corpus.split(config.split)
    if config.limit is not None:
        records = records[: config.limit]
    own_store = not isinstance(results, ResultsStore)
    store = ResultsStore(results) if own_store else results
    try:
        campaign_id = config.campaign_id
        store.add_campaign(
            campaign_id,
            asdict(config),
            kind="evaluate",
            corpus=corpus.name,
            env_id=corpus.env_id or "",
        )
        todo = store.pending(campaign_id, config.seeds, config.conditions, records)
        if todo:
            solver = make_solver(config.solver, corpus, llm_client=llm_client)
            oracle = make_oracle(
                config.oracle, corpus, llm_client=llm_client, **(oracle_options or {})
            )

            def make_env() -> AmbiTabEnv:
                return AmbiTabEnv(
                    corpus,
                    split=config.split,
                    oracle=oracle,
                    solver=solver,
                    budget_slack=config.budget_slack,
                    zero_ambiguity="skip",
                    limits=config.verifier_limits(),
                )

            asyncio.run(
                _run(
                    config,
                    corpus,
                    store,
                    todo,
                    concurrency=concurrency,
                    llm_client=llm_client,
                    progress=progress,
                    make_env=make_env,
                )
            )
        return summarize(store.episodes(campaign_id))
    finally:
        if own_store:
            store.close()
