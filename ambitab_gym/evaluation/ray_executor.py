"""Campaigns on Ray: the same plan, store and resume as a local run, the episodes on a cluster.

* :class:`RayExecutor` - an executor for :func:`~ambitab_gym.evaluation.engine.run_plan`
  (``run_campaign(..., executor=RayExecutor())``, ``ambitab-gym evaluate --executor ray``).
* :func:`work_chunks`, :func:`dumps_plan`, :func:`loads_plan` - re-exported from
  :mod:`ambitab_gym.evaluation.chunks`, which holds what this executor shares with the local
  process executor (:mod:`ambitab_gym.evaluation.process_executor`): the pending units cut into
  chunks (condition x seed x a slice of records), the plan as bytes with its LLM clients left
  out as references, a worker's unit runner and the usage it reports.

How it runs. The driver builds the plan as for a local run (its ``prepare`` step included),
pickles it once with cloudpickle (the plan's ``parts`` is the closure that builds a condition's
env and asker; engines, connection pools and LLM connections are never pickled - each part
re-creates its own on first use) and starts ``workers`` Ray actors. Each actor loads the plan
once, with its own LLM client (on its own server when several are listed), its own engines and
its own PostgreSQL pool, and runs every work unit it gets through the ordinary async episode
loop (:func:`~ambitab_gym.evaluation.engine.run_units`, ``concurrency`` episodes in flight),
returning the unit's rows. The driver hands rows to the store as units finish
(``ray.wait``), so the progress bar, the store and resume are those of a local run.

Staggered starts. Every unit a worker runs starts its slots ``start_interval_s`` apart
(:func:`~ambitab_gym.evaluation.engine.run_units`), not only its first one: an actor runs its
units one after another, so each unit begins with all of its slots idle - one burst of
``concurrency`` requests per unit if they started together, and the waves a burst makes last
the whole unit against a server with regular latency. A ramp costs about
``concurrency x start_interval_s / 2`` of one slot's time per unit, little beside a unit's
rounds of calls; the waves cost about as much on every round. The first units of a campaign, which all
workers start together, are interleaved across the workers (worker k's slot i starts as the
campaign's slot k + workers x i: :func:`~ambitab_gym.evaluation.chunks.slot_starts`); later
ones start whenever their worker is free, each over its own slots.

Faults. A worker process that dies is restarted and its unit re-run from the start (Ray's
actor restart and task retry); its partial rows were never returned, so nothing is stored twice.
A driver that dies loses only rows not yet flushed; rerunning the campaign runs the episodes the
store lacks (:func:`~ambitab_gym.evaluation.engine.pending_units`).

LLM usage. Each unit reports the calls its worker's clients made; the driver adds them to the
campaign's clients (:meth:`~ambitab_gym.llm.LLMClient.absorb_usage`), so the calls printed per
role are those of a local run (the calls of a unit lost with a dead worker are not counted).

Ray is imported when a :class:`RayExecutor` runs, never by importing this module, and the
package imports this module only for ``--executor ray``: without it Ray is not loaded.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ambitab_gym import defaults
from ambitab_gym.errors import AmbiTabError, ConfigurationError, MissingDependency
from ambitab_gym.evaluation.chunks import (
    UnitRunner,
    check_executor_settings,
    dumps_plan,
    loads_plan,
    slot_starts,
    usage_since,
    work_chunks,
)
from ambitab_gym.evaluation.engine import CampaignPlan, WorkUnit, tune_gc_for_campaigns
from ambitab_gym.llm.client import LLMClient
from ambitab_gym.llm.usage import UsageSummary

__all__ = ["RayExecutor", "RayWorkerError", "dumps_plan", "loads_plan", "work_chunks"]

#: Units queued on each worker beyond the one it runs (keeps workers busy between units).
_QUEUED_PER_WORKER = 1


class RayWorkerError(AmbiTabError, RuntimeError):
    """A work unit failed on Ray beyond the restarts allowed (a worker that keeps dying, a
    cluster that went away). Rows stored before it stay; rerunning the campaign resumes."""

    category = "ray_worker"


class _Worker:
    """One Ray actor: a :class:`~ambitab_gym.evaluation.chunks.UnitRunner` (the plan, its LLM
    clients and an event loop kept for as long as the actor lives). A restarted actor starts
    empty and loads the plan again."""

    def __init__(self) -> None:
        tune_gc_for_campaigns()  # the actor's process exists to run campaign units
        self.runner = UnitRunner()

    def run(
        self,
        key: tuple,
        boxed_plan: list,
        clients: list[LLMClient],
        units: list[WorkUnit],
        concurrency: int,
        starts: tuple[float, float] = (0.0, 0.0),
    ) -> tuple[int, list[dict], list[dict[str, UsageSummary]]]:
        """Run one unit, its slot ``i`` starting ``starts[0] + i * starts[1]`` seconds in; its
        rows, and each client's LLM usage during it (by client index)."""
        import ray

        # the plan comes boxed so that Ray hands over the reference, fetched only when new
        self.runner.load(key, lambda: ray.get(boxed_plan[0]), clients)
        before = self.runner.usage()
        rows: list[dict] = []
        offset, interval = starts
        self.runner.run(
            units, concurrency, rows.append, start_offset_s=offset, start_interval_s=interval
        )
        usage = [
            usage_since(earlier, now)
            for earlier, now in zip(before, self.runner.usage(), strict=True)
        ]
        return os.getpid(), rows, usage

    def pid(self) -> int:
        return os.getpid()


@dataclass
class RayExecutor:
    """Runs a campaign's pending units on Ray actors (see the module doc).

    Args:
        address: the cluster to join (``ray.init(address=...)``: ``auto``, ``ray://HOST:10001``);
            None: the cluster this process already joined, else ``$RAY_ADDRESS`` or a new
            local one (shut down again after the run).
        workers: Ray actors, each running ``concurrency`` episodes in flight; None: one per
            CPU of the cluster.
        chunk: records per work unit; None: ``max(8, 2 * concurrency)``.
        llm_urls: servers serving the campaign's model, its LLM client's own URL first:
            worker ``i`` sends the requests of every client of ``llm_urls[0]`` to
            ``llm_urls[i % len(llm_urls)]`` (clients of other servers, e.g. a separate oracle
            server, are kept as they are). Empty: each client's own URL.
        max_restarts: times a dead worker process is restarted (its unit re-run).
        worker_cpus: the CPUs Ray reserves for each worker.
        init_options: further ``ray.init`` keyword arguments (``num_cpus``, ...).

    On a cluster this process had already joined, the workers outlive :meth:`run` and serve
    the next campaign run with this executor (no new processes to start); :meth:`close` (or
    dropping the executor) ends them. After a run, :attr:`worker_pids` holds the worker
    processes' ids and :attr:`units` counts the units of the last run.

    >>> executor = RayExecutor(workers=2, llm_urls=["http://10.0.0.1:8000/v1"])
    >>> executor.workers, executor.chunk_for(concurrency=16)
    (2, 32)
    """

    address: str | None = None
    workers: int | None = None
    chunk: int | None = None
    llm_urls: Sequence[str] = ()
    max_restarts: int = 3
    worker_cpus: float = 1.0
    init_options: dict[str, Any] = field(default_factory=dict)
    worker_pids: list[int] = field(default_factory=list, init=False)
    units: int = field(default=0, init=False)
    _actors: list[Any] = field(default_factory=list, init=False, repr=False)
    _runs: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        check_executor_settings("Ray", self.workers, self.chunk)

    def chunk_for(self, *, concurrency: int) -> int:
        """Records per work unit: the given ``chunk``, else enough to keep ``concurrency``
        episodes in flight for a while."""
        return self.chunk or max(8, 2 * concurrency)

    def _clients_for(self, clients: list[LLMClient], worker: int) -> list[LLMClient]:
        if not self.llm_urls or not clients:
            return clients
        # the campaign's client is the one on the first listed server (URLs compared the way
        # the client normalizes them)
        primary = clients[0].on_server(self.llm_urls[0]).base_url
        url = self.llm_urls[worker % len(self.llm_urls)]
        return [c.on_server(url) if c.base_url == primary else c for c in clients]

    def close(self) -> None:
        """End the worker processes (a later :meth:`run` starts new ones)."""
        actors, self._actors = self._actors, []
        if actors:
            import ray

            if ray.is_initialized():
                for actor in actors:
                    ray.kill(actor)

    def run(
        self,
        plan: CampaignPlan,
        units: list[WorkUnit],
        on_row: Callable[[dict], None],
        *,
        concurrency: int,
        start_interval_s: float = defaults.SLOT_START_INTERVAL_S,
    ) -> None:
        """Run the units on Ray; call ``on_row`` here for every row as its unit finishes. The
        slots of every unit start ``start_interval_s`` apart (see the module doc).

        Raises:
            MissingDependency: Ray is not installed (``pip install 'ambitab-gym[ray]'``).
            RayWorkerError: a unit failed beyond :attr:`max_restarts`.
        """
        try:
            import ray
        except ImportError:
            raise MissingDependency(
                "--executor ray needs Ray: pip install 'ambitab-gym[ray]'"
            ) from None
        started = not ray.is_initialized()
        if started:
            self._actors = []  # any from an earlier cluster are gone
            ray.init(
                address=self.address,
                include_dashboard=False,
                log_to_driver=False,
                **self.init_options,
            )
        try:
            self._run(ray, plan, units, on_row, concurrency, start_interval_s)
        except ray.exceptions.RayError as error:
            raise RayWorkerError(f"a Ray work unit failed: {error}") from error
        finally:
            if started:
                self.close()
                ray.shutdown()

    def _start(self, ray: Any) -> None:
        cpus = float(ray.cluster_resources().get("CPU", 0))
        count = self.workers or max(1, int(cpus / self.worker_cpus) if self.worker_cpus else 1)
        if count * self.worker_cpus > cpus:
            # workers that cannot be placed would hold their units forever
            raise ConfigurationError(
                f"{count} Ray worker(s) of {self.worker_cpus:g} CPU need more than the "
                f"cluster's {cpus:g} CPUs; ask for fewer workers (--ray-workers) or add nodes"
            )
        if len(self._actors) != count:
            self.close()
            remote = ray.remote(_Worker).options(
                num_cpus=self.worker_cpus,
                max_restarts=self.max_restarts,
                max_task_retries=self.max_restarts,
            )
            self._actors = [remote.remote() for _ in range(count)]
        self.worker_pids = ray.get([actor.pid.remote() for actor in self._actors])

    def _run(
        self,
        ray: Any,
        plan: CampaignPlan,
        units: list[WorkUnit],
        on_row: Callable[[dict], None],
        concurrency: int,
        start_interval_s: float,
    ) -> None:
        tasks = deque(work_chunks(units, self.chunk_for(concurrency=concurrency)))
        self.units = 0
        self._start(ray)
        data, clients = dumps_plan(plan)
        boxed = [ray.put(data)]
        self._runs += 1
        key = (id(self), self._runs)
        per_worker = [self._clients_for(clients, i) for i in range(len(self._actors))]
        in_flight: dict[Any, int] = {}
        # every unit ramps its slots up; the first ones, started together, interleave across
        # the workers (see the module doc)
        count = len(self._actors)
        first = {w: slot_starts(w, count, start_interval_s) for w in range(count)}

        def submit(worker: int) -> None:
            if tasks:
                starts = first.pop(worker, (0.0, start_interval_s))
                ref = self._actors[worker].run.remote(
                    key, boxed, per_worker[worker], tasks.popleft(), concurrency, starts
                )
                in_flight[ref] = worker

        for worker in range(len(self._actors)):
            for _ in range(1 + _QUEUED_PER_WORKER):
                submit(worker)
        while in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                worker = in_flight.pop(ref)
                pid, rows, usage = ray.get(ref)
                self.worker_pids[worker] = pid
                self.units += 1
                for client, calls in zip(clients, usage, strict=True):
                    client.absorb_usage(calls)  # the campaign's totals, as in a local run
                for row in rows:
                    on_row(row)
                submit(worker)
