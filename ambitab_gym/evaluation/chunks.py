"""What every campaign executor shares: work chunks, the plan as bytes, a worker's unit runner.

The Ray executor (:mod:`ambitab_gym.evaluation.ray_executor`) and the local process executor
(:mod:`ambitab_gym.evaluation.process_executor`) run a campaign's pending units in other
processes; both cut them the same way, ship the plan the same way and count the LLM calls of
their workers the same way - here, once:

* :func:`work_chunks` - the pending units cut into work chunks: condition x seed x a slice of
  records. The driver stores rows only as they come back (Ray: a whole chunk at a time; local
  processes: as episodes finish), so a worker that dies loses only the units it had not
  returned; they are run again, and nothing is stored twice.
* :func:`check_executor_settings` - the worker count and chunk size every executor refuses
  the same way.
* :func:`dumps_plan`, :func:`loads_plan` - a campaign plan as bytes (cloudpickle: its ``parts``
  closure travels by value), its LLM clients left out as references so that each worker plugs
  in its own; engines, connection pools and LLM connections are never pickled (each part
  re-creates its own on first use).
* :func:`usage_since` - the LLM calls a worker's clients made since an earlier snapshot (what
  the driver adds to the campaign's clients with
  :meth:`~ambitab_gym.llm.LLMClient.absorb_usage`).
* :func:`slot_starts` - a worker's share of the campaign's staggered slot starts.
* :class:`UnitRunner` - a worker's state: the plan it loaded, its clients and its event loop,
  kept from chunk to chunk so that connection pools, engines and cached reference results
  serve them all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation.engine import CampaignPlan, WorkUnit, run_units
from ambitab_gym.llm.client import LLMClient
from ambitab_gym.llm.usage import UsageSummary

try:  # optional (the llm-fast extra): the workers' loops are uvloop's, as a local run's
    import uvloop
except ImportError:  # pragma: no cover - depends on the environment
    uvloop = None

__all__ = [
    "UnitRunner",
    "check_executor_settings",
    "dumps_plan",
    "loads_plan",
    "new_event_loop",
    "slot_starts",
    "usage_since",
    "work_chunks",
]


def check_executor_settings(kind: str, workers: int | None, chunk: int | None) -> None:
    """Refuse fewer than one worker or a chunk of fewer than one record (None: the default).

    >>> check_executor_settings("process", 0, None)
    Traceback (most recent call last):
    ...
    ambitab_gym.errors.ConfigurationError: a process campaign needs at least one worker, not 0
    """
    if workers is not None and workers < 1:
        raise ConfigurationError(f"a {kind} campaign needs at least one worker, not {workers}")
    if chunk is not None and chunk < 1:
        raise ConfigurationError(f"a work unit needs at least one record, not {chunk}")


def work_chunks(units: Sequence[WorkUnit], chunk: int) -> list[list[WorkUnit]]:
    """Cut units into work chunks: one (condition, seed) per chunk, at most ``chunk`` records.

    >>> units = [WorkUnit(c, s, r) for c in ("none", "asker") for s in (0, 1) for r in "abc"]
    >>> [(t[0].condition, t[0].seed, len(t)) for t in work_chunks(units, 2)]
    [('none', 0, 2), ('none', 0, 1), ('none', 1, 2), ('none', 1, 1), ('asker', 0, 2), ('asker', 0, 1), ('asker', 1, 2), ('asker', 1, 1)]
    """
    if chunk < 1:
        raise ConfigurationError(f"a work unit needs at least one record, not {chunk}")
    groups: dict[tuple[str, int], list[WorkUnit]] = {}
    for unit in units:
        groups.setdefault((unit.condition, unit.seed), []).append(unit)
    return [
        group[start : start + chunk]
        for group in groups.values()
        for start in range(0, len(group), chunk)
    ]


def dumps_plan(plan: CampaignPlan) -> tuple[bytes, list[LLMClient]]:
    """The plan as bytes (cloudpickle: its ``parts`` closure travels by value) and the LLM
    clients it refers to, which are left out as references (:func:`loads_plan` takes them)."""
    clients: list[LLMClient] = []

    class _Pickler(cloudpickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            if isinstance(obj, LLMClient):
                for index, known in enumerate(clients):
                    if known is obj:
                        return ("llm-client", index)
                clients.append(obj)
                return ("llm-client", len(clients) - 1)
            return None

    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(plan)
    return buffer.getvalue(), clients


def loads_plan(data: bytes, clients: Sequence[LLMClient]) -> CampaignPlan:
    """The plan of :func:`dumps_plan`, every reference to its n-th LLM client replaced by
    ``clients[n]``.

    >>> from ambitab_gym.corpora import load_corpus
    >>> plan = CampaignPlan("evaluate", "id", {}, load_corpus("bird"), [], (0,), ("none",), dict)
    >>> loads_plan(*dumps_plan(plan)).corpus.name
    'bird'
    """

    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, pid: Any) -> Any:
            kind, index = pid
            if kind != "llm-client":
                raise pickle.UnpicklingError(f"unknown persistent reference {kind!r}")
            return clients[index]

    plan = _Unpickler(io.BytesIO(data)).load()
    if not isinstance(plan, CampaignPlan):
        raise pickle.UnpicklingError(f"expected a CampaignPlan, got {type(plan).__name__}")
    return plan


def usage_since(
    before: dict[str, UsageSummary], after: dict[str, UsageSummary]
) -> dict[str, UsageSummary]:
    """Per role, the calls counted in ``after`` but not in ``before``.

    >>> delta = usage_since({"asker": UsageSummary(calls=1, ok=1)},
    ...                     {"asker": UsageSummary(calls=3, ok=3), "solver": UsageSummary(calls=1)})
    >>> {role: (usage.calls, usage.ok) for role, usage in delta.items()}
    {'asker': (2, 2), 'solver': (1, 0)}
    """
    delta = {}
    for role, total in after.items():
        earlier = before.get(role)
        if earlier is None:
            delta[role] = total
            continue
        fields = (f.name for f in dataclasses.fields(total))
        change = UsageSummary(**{n: getattr(total, n) - getattr(earlier, n) for n in fields})
        if change.calls or change.cache_hits:  # calls the server answered, or the cache
            delta[role] = change
    return delta


def slot_starts(worker: int, workers: int, interval_s: float) -> tuple[float, float]:
    """Worker ``worker`` of ``workers``'s share of a campaign's staggered start, as
    ``(start_offset_s, start_interval_s)`` for its :meth:`UnitRunner.run`: the campaign's slots
    are numbered across the workers in turn (slot ``i`` of worker ``k`` is the campaign's slot
    ``k + workers * i``) and slot ``j`` starts ``j * interval_s`` after the run begins, as in a
    local run; so the workers' first calls interleave instead of arriving in ``workers``
    bursts side by side.

    >>> [slot_starts(k, 2, 0.001) for k in (0, 1)]
    [(0.0, 0.002), (0.001, 0.002)]
    """
    return worker * interval_s, workers * interval_s


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when installed (as :func:`~ambitab_gym.evaluation.engine.run_loop`
    runs a local campaign), else asyncio's."""
    return uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()


class UnitRunner:
    """A worker's campaign state: the plan it loaded (with its own LLM clients), and an event
    loop kept for as long as the worker lives, so that its LLM connection pools, engines and
    cached reference results serve chunk after chunk; another campaign (another plan key) is
    loaded on its first chunk.

    >>> from ambitab_gym.corpora import load_corpus
    >>> plan = CampaignPlan("evaluate", "id", {}, load_corpus("bird"), [], (0,), ("none",), dict)
    >>> runner = UnitRunner()
    >>> runner.load(("run", 1), lambda: dumps_plan(plan)[0], [])
    >>> runner.plan.corpus.name, runner.key
    ('bird', ('run', 1))
    >>> runner.close()
    """

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.plan: CampaignPlan | None = None
        self.clients: list[LLMClient] = []
        self.loop = new_event_loop()

    def load(self, key: tuple, data: Callable[[], bytes], clients: list[LLMClient]) -> None:
        """Load the plan of campaign ``key`` (``data()`` gives its bytes, asked for only when
        the key is new) with these clients in place of the driver's."""
        if key != self.key or self.plan is None:
            self.plan, self.key = loads_plan(data(), clients), key
            self.clients = clients

    def usage(self) -> list[dict[str, UsageSummary]]:
        """Each client's calls so far, by role (snapshots for :func:`usage_since`)."""
        return [client.usage_by_role for client in self.clients]

    def run(self, units: list[WorkUnit] | asyncio.Queue, concurrency: int,
            on_row: Callable[[dict], None], *, start_offset_s: float = 0.0,
            start_interval_s: float = 0.0) -> None:  # fmt: skip
        """Run units (a list, or a queue fed from elsewhere: see
        :func:`~ambitab_gym.evaluation.engine.run_units`) on this worker's loop; its slot
        ``i`` starts after ``start_offset_s + i * start_interval_s`` seconds (this worker's
        share of the campaign's staggered start: :func:`slot_starts`; 0: all at once)."""
        assert self.plan is not None, "load a plan first"
        self.loop.run_until_complete(
            run_units(
                self.plan, units, concurrency=concurrency, on_row=on_row,
                start_offset_s=start_offset_s, start_interval_s=start_interval_s,
            )
        )  # fmt: skip

    def close(self) -> None:
        """Close the worker's LLM pools and its loop."""
        for client in self.clients:
            self.loop.run_until_complete(client.aclose())
        self.loop.close()
