"""Campaigns on local worker processes: the same plan, store and resume, more than one core.

* :class:`ProcessExecutor` - an executor for :func:`~ambitab_gym.evaluation.engine.run_plan`
  (``run_campaign(..., executor=ProcessExecutor(workers=2))``,
  ``ambitab-gym evaluate --executor processes --workers 2``).
* :class:`ProcessWorkerError` - a worker that failed (not one that died: that one is replaced).

Why. A local campaign runs every episode on one event loop, so one core carries the LLM client,
the envs, the askers, the oracle, the verifier and the store; with hundreds of episodes in flight
against a fast server that core is the limit (``benchmarks/llm_throughput.py`` prints the CPU
per LLM call and the ceiling one core allows). This executor spreads the episodes over
``workers`` processes of this machine, each with its own event loop and LLM connection pool.

How it runs. The driver builds the plan as for a local run (its ``prepare`` step included) and
cuts the pending units into chunks (:func:`~ambitab_gym.evaluation.chunks.work_chunks`: condition
x seed x at most ``chunk`` records), as the Ray executor does. It starts ``workers`` fresh
interpreters (not multiprocessing's ``spawn``, which re-imports the caller's ``__main__``; no
lock held by a driver thread is copied into a child as ``fork`` would) and hands each the plan
as bytes (:func:`~ambitab_gym.evaluation.chunks.dumps_plan`; each worker plugs in copies of the
LLM clients, opens its own engines and connection pools). The concurrency C is split across the
workers: each keeps C / workers episodes in flight on its own loop
(:func:`~ambitab_gym.evaluation.engine.run_units` fed from a queue), and the driver keeps every
worker supplied with chunks (as record ids: the worker has the plan's records) ahead of its
slots, so no worker drains between chunks. The campaign's slots start ``start_interval_s``
apart, numbered across the workers in turn (worker k's slot i is the campaign's slot
k + workers x i), so the first calls reach the server spread out as in a local run. Finished rows come back as episodes finish (those
of 50 ms in one message); the driver stores them as they arrive, so the progress
bar, the store, resume and ``--retry-errors`` are those of a local run.

Faults. A worker process that dies (killed, out of memory) is replaced, and the units it had not
returned are run again from the start on the new worker: their rows had not been returned, so
nothing is stored twice (at most :attr:`ProcessExecutor.max_restarts` replacements per run,
then :class:`ProcessWorkerError`). An exception raised inside a worker (not an episode's
failure, which is recorded on its row) stops the run with :class:`ProcessWorkerError`. A driver
that stops (an exception, Ctrl-C, an abort after server errors) ends its workers; rows returned
before are stored, and rerunning the campaign resumes with the episodes the store lacks.

LLM usage. Each message of rows carries the calls the worker's clients made since its previous
one; the driver adds them to the campaign's clients
(:meth:`~ambitab_gym.llm.LLMClient.absorb_usage`), so the calls printed per role are those of a
local run (those of episodes lost with a dead worker are not counted).

Workers outlive a run: the next campaign run with the same executor reuses them (no processes to
start; each imports the package once, about a second here); :meth:`close` (or leaving
``with ProcessExecutor(...)``) ends them, and so does dropping the executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

from ambitab_gym import defaults
from ambitab_gym.errors import AmbiTabError, ConfigurationError
from ambitab_gym.evaluation.chunks import (
    UnitRunner,
    check_executor_settings,
    dumps_plan,
    slot_starts,
    usage_since,
    work_chunks,
)
from ambitab_gym.evaluation.engine import CampaignPlan, WorkUnit, tune_gc_for_campaigns
from ambitab_gym.llm.client import LLMClient

__all__ = ["ProcessExecutor", "ProcessWorkerError"]

#: Seconds a worker gets to finish its run and exit when the executor closes.
_STOP_GRACE_S = 10.0

#: Seconds a worker collects finished rows before it sends them (one message, one wake-up of
#: the driver, for all of them).
_FLUSH_S = 0.05

#: The worker's start: the driver's sys.path, then :func:`main` with the two pipe ends.
_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv.pop()); "
    "from ambitab_gym.evaluation.process_executor import main; main()"
)


class ProcessWorkerError(AmbiTabError, RuntimeError):
    """A campaign worker process failed: an exception inside it, or workers that kept dying
    beyond the replacements allowed. Rows stored before stay; rerunning the campaign resumes."""

    category = "process_worker"


def split_concurrency(concurrency: int, workers: int) -> list[int]:
    """``concurrency`` episodes in flight split across at most ``workers`` processes (each at
    least one).

    >>> split_concurrency(256, 2), split_concurrency(5, 2), split_concurrency(1, 4)
    ([128, 128], [3, 2], [1])
    """
    count = max(1, min(workers, concurrency))
    return [concurrency // count + (i < concurrency % count) for i in range(count)]


# -- the worker process ----------------------------------------------------------------------------


def _serve(tasks: Connection, results: Connection) -> None:
    """A worker process's main: runs one campaign run after another until told to stop.

    Messages in: ``("run", key, plan bytes, clients, concurrency, start_offset_s,
    start_interval_s)`` (the last two: this worker's share of the staggered slot starts,
    :func:`~ambitab_gym.evaluation.chunks.slot_starts`), then ``("chunk", id,
    [(condition, seed, record id), ...])`` any number of times, then ``("end",)``; ``None``
    (or the driver gone) ends the process. Out: ``("rows", rows, usage)`` as episodes
    finish, ``("done",)`` per run, ``("error", text, exception)`` when something raised.
    """
    runner = UnitRunner()
    try:
        while True:
            try:
                message = tasks.recv()
            except EOFError:
                return
            if message is None:
                return
            _, key, data, clients, concurrency, offset, interval = message
            try:
                runner.load(key, lambda data=data: data, clients)
                gone = _run(runner, concurrency, tasks, results, (offset, interval))
            except BaseException as error:  # noqa: BLE001 - reported to the driver, then exit
                with contextlib.suppress(Exception):
                    results.send(("error", f"{type(error).__name__}: {error}", _portable(error)))
                return
            if gone:
                return
            results.send(("done",))
    finally:
        with contextlib.suppress(Exception):
            runner.close()


def main(argv: list[str] | None = None) -> None:
    """The worker process's entry (``python -c ... TASKS_FD RESULTS_FD SYS_PATH_JSON``, started
    by :class:`ProcessExecutor`): its two pipe ends as connections, then :func:`_serve`."""
    # Ctrl-C reaches the whole process group: the driver handles it and ends its workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tune_gc_for_campaigns()
    args = sys.argv[1:] if argv is None else argv
    tasks = Connection(int(args[0]), writable=False)
    results = Connection(int(args[1]), readable=False)
    _serve(tasks, results)


def _portable(error: BaseException) -> BaseException | None:
    """The exception if it survives pickling (it is sent to the driver), else None."""
    import pickle

    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - any exception that does not travel
        return None
    return error


def _run(runner: UnitRunner, concurrency: int, tasks: Connection, results: Connection,
         starts: tuple[float, float]) -> bool:  # fmt: skip
    """One run: chunks from ``tasks`` (read on a thread of their own) feed ``concurrency``
    episode slots on the runner's loop, slot ``i`` starting ``starts[0] + i * starts[1]``
    seconds in; finished rows go back together every :data:`_FLUSH_S`
    seconds (with the LLM calls made since the previous message). Returns whether the driver went away
    (then the process ends)."""
    loop = runner.loop
    feed: asyncio.Queue[WorkUnit | None] = asyncio.Queue()
    outbox: list[dict] = []
    gone = [False]
    baseline = [runner.usage()]
    assert runner.plan is not None
    records = {record.id: record for record in runner.plan.records}

    def accept(keys: list[tuple[str, int, str]]) -> None:
        for condition, seed, record in keys:
            feed.put_nowait(WorkUnit(condition, seed, records[record]))

    def finish() -> None:
        while gone[0] and not feed.empty():  # the driver is gone: nobody takes more rows
            feed.get_nowait()
        for _ in range(concurrency):
            feed.put_nowait(None)

    def receive() -> None:
        try:
            while True:
                message = tasks.recv()
                if message is None or message[0] == "end":
                    gone[0] = message is None
                    break
                loop.call_soon_threadsafe(accept, message[2])
        except (EOFError, OSError):
            gone[0] = True
        loop.call_soon_threadsafe(finish)

    def send() -> None:  # on a thread of its own: a full pipe never stalls the event loop
        while (message := outgoing.get()) is not None:
            try:
                results.send(message)
            except OSError:  # the driver is gone
                gone[0] = True

    def flush() -> None:
        if not outbox:
            return
        batch = outbox.copy()
        outbox.clear()
        now = runner.usage()
        usage = [usage_since(before, after) for before, after in zip(baseline[0], now, strict=True)]
        baseline[0] = now
        outgoing.put(("rows", batch, usage))

    def on_row(row: dict) -> None:
        if not outbox:  # the rows of the next few milliseconds go together
            loop.call_later(_FLUSH_S, flush)
        outbox.append(row)

    outgoing: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()
    threads = [
        threading.Thread(target=receive, name="ambitab-chunk-reader", daemon=True),
        threading.Thread(target=send, name="ambitab-row-sender", daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        offset, interval = starts
        runner.run(feed, concurrency, on_row, start_offset_s=offset, start_interval_s=interval)
        flush()  # rows of the last pass
    finally:
        outgoing.put(None)
        threads[1].join()  # every row handed over before "done" follows
    threads[0].join()
    return gone[0]


# -- the driver ------------------------------------------------------------------------------------


def _cpus() -> int:
    """The CPUs this process may run on (a container's share, not the host's)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


@dataclass
class _Handle:
    """The driver's side of one worker process."""

    process: subprocess.Popen
    tasks: Connection
    results: Connection
    share: int
    #: this worker's share of the staggered slot starts: (start_offset_s, start_interval_s)
    starts: tuple[float, float] = (0.0, 0.0)
    #: chunk -> its units not returned yet, by key
    held: dict[int, dict[tuple[str, int, str], WorkUnit]] = field(default_factory=dict)
    #: a unit's key -> its chunk, for every unit handed over and not returned
    owner: dict[tuple[str, int, str], int] = field(default_factory=dict)
    key: tuple | None = None


def _end(handles: list[_Handle]) -> None:
    """Stop worker processes: ask, wait a little, then kill."""
    for handle in handles:
        with contextlib.suppress(Exception):
            handle.tasks.send(None)
    for handle in handles:
        try:
            handle.process.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            handle.process.kill()
            handle.process.wait()
        for conn in (handle.tasks, handle.results):
            conn.close()


@dataclass
class ProcessExecutor:
    """Runs a campaign's pending units on local worker processes (see the module doc).

    Args:
        workers: worker processes; the campaign's concurrency is split across them (each at
            least one episode in flight). None: one per CPU this process may use.
        chunk: records per work chunk (the units handed to a worker at once); None: a quarter
            of a worker's episodes in flight, between 2 and 32.
        max_restarts: worker processes replaced per run after dying (their units re-run).

    After a run, :attr:`worker_pids` holds the worker processes' ids, :attr:`units` counts the
    chunks of the last run and :attr:`restarts` the workers it replaced.

    >>> executor = ProcessExecutor(workers=2)
    >>> executor.workers, executor.chunk_for(share=128), executor.chunk_for(share=4)
    (2, 32, 2)
    >>> executor.close()
    """

    workers: int | None = None
    chunk: int | None = None
    max_restarts: int = 3
    worker_pids: list[int] = field(default_factory=list, init=False)
    units: int = field(default=0, init=False)
    restarts: int = field(default=0, init=False)
    _handles: list[_Handle] = field(default_factory=list, init=False, repr=False)
    _runs: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        check_executor_settings("process", self.workers, self.chunk)
        if self.max_restarts < 0:
            raise ConfigurationError(f"max_restarts must be 0 or more, not {self.max_restarts}")
        # workers left running when the executor is dropped without close() end with it
        weakref.finalize(self, _end, self._handles)

    def chunk_for(self, *, share: int) -> int:
        """Records per chunk for a worker with ``share`` episodes in flight."""
        return self.chunk or max(2, min(32, share // 4))

    def __enter__(self) -> ProcessExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the worker processes (a later :meth:`run` starts new ones)."""
        handles = list(self._handles)
        self._handles.clear()
        _end(handles)

    def _spawn(self, share: int) -> _Handle:
        # a fresh interpreter (not multiprocessing's spawn, which re-imports the caller's
        # __main__): it imports the package from this process's sys.path and talks over two
        # pipes; its own children (engine workers) do not inherit them, so EOF means it is gone
        task_reader, task_writer = os.pipe()
        result_reader, result_writer = os.pipe()
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(task_reader), str(result_writer),
                 json.dumps(sys.path)],
                pass_fds=(task_reader, result_writer),
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except BaseException:
            for fd in (task_writer, result_reader):
                os.close(fd)
            raise
        finally:
            os.close(task_reader)  # the child's ends
            os.close(result_writer)
        tasks = Connection(task_writer, readable=False)
        return _Handle(process, tasks, Connection(result_reader, writable=False), share)

    def _start(self, shares: list[int], interval_s: float = 0.0) -> None:
        """Workers for this run: the first ``len(shares)`` (started when missing or dead),
        each told its share and its slots' starts; any further ones stay idle for a later
        run."""
        for index, handle in enumerate(self._handles):
            if handle.process.poll() is not None:  # died between runs
                _end([handle])
                self._handles[index] = self._spawn(handle.share)
        while len(self._handles) < len(shares):
            self._handles.append(self._spawn(shares[len(self._handles)]))
        for index, (handle, share) in enumerate(zip(self._handles, shares, strict=False)):
            handle.share = share
            handle.starts = slot_starts(index, len(shares), interval_s)

    def run(
        self,
        plan: CampaignPlan,
        units: list[WorkUnit],
        on_row: Callable[[dict], None],
        *,
        concurrency: int,
        start_interval_s: float = defaults.SLOT_START_INTERVAL_S,
    ) -> None:
        """Run the units on the worker processes; call ``on_row`` here for every row as its
        chunk finishes. The campaign's slots start ``start_interval_s`` apart, numbered across
        the workers in turn (:func:`~ambitab_gym.evaluation.chunks.slot_starts`: worker k's
        slot i is slot k + workers x i), so their first calls interleave as a local run's; a
        worker that replaces a dead one starts its slots the same way.

        Raises:
            ProcessWorkerError: an exception inside a worker, or more than
                :attr:`max_restarts` workers died.
        """
        shares = split_concurrency(concurrency, self.workers or _cpus())
        self.units = self.restarts = 0
        self._start(shares, start_interval_s)
        data, clients = dumps_plan(plan)
        self._runs += 1
        key = (os.getpid(), id(self), self._runs)
        chunk = self.chunk_for(share=min(shares))
        todo: deque[tuple[int, list[WorkUnit]]] = deque(enumerate(work_chunks(units, chunk)))
        finished = False
        try:
            for handle in self._handles[: len(shares)]:
                self._begin(handle, key, data, clients)
            self._drive(todo, len(shares), key, data, clients, on_row)
            finished = True
        finally:
            self.worker_pids = [h.process.pid for h in self._handles]
            if not finished:
                self.close()  # workers mid-run cannot serve another; new ones start next time

    def _begin(self, handle: _Handle, key: tuple, data: bytes, clients: list[LLMClient]) -> None:
        handle.tasks.send(("run", key, data, clients, handle.share, *handle.starts))
        handle.key = key

    def _supply(self, handle: _Handle, todo: deque, chunk: int) -> None:
        # enough queued beyond the worker's slots that none waits for the next chunk
        while todo and len(handle.owner) < handle.share + max(2 * chunk, handle.share // 2):
            number, units = todo.popleft()
            keys = [(u.condition, u.seed, u.record.id) for u in units]
            handle.held[number] = dict(zip(keys, units, strict=True))
            handle.owner.update(dict.fromkeys(keys, number))
            handle.tasks.send(("chunk", number, keys))  # the worker has the plan's records

    def _replace(
        self, handle: _Handle, todo: deque, key: tuple, data: bytes, clients: list
    ) -> None:
        """A worker died: the units it had not returned go back to the front of the queue (as
        their chunks), a new worker takes its place."""
        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise ProcessWorkerError(
                f"campaign worker processes died {self.restarts} times (exit code "
                f"{handle.process.poll()}); see the machine's memory and logs"
            )
        todo.extendleft(reversed([(n, list(units.values())) for n, units in handle.held.items()]))
        handle.held.clear()
        handle.owner.clear()
        _end([handle])
        index = self._handles.index(handle)
        self._handles[index] = self._spawn(handle.share)
        self._handles[index].starts = handle.starts
        self._begin(self._handles[index], key, data, clients)

    def _take(self, handle: _Handle, message: tuple, clients: list[LLMClient],
              on_row: Callable[[dict], None]) -> None:  # fmt: skip
        """Finished episodes: their calls to the campaign's clients, their rows to ``on_row``."""
        _, rows, usage = message
        for client, calls in zip(clients, usage, strict=True):
            client.absorb_usage(calls)  # the campaign's totals, as in a local run
        for row in rows:
            key = (row["condition"], row["seed"], row["record_id"])
            number = handle.owner.pop(key)
            units = handle.held[number]
            del units[key]
            if not units:
                del handle.held[number]
                self.units += 1
            on_row(row)

    def _drive(
        self,
        todo: deque,
        workers: int,
        key: tuple,
        data: bytes,
        clients: list[LLMClient],
        on_row: Callable[[dict], None],
    ) -> None:
        chunk = max((len(units) for _, units in todo), default=1)
        running = set(range(workers))  # workers whose run has not ended
        while running:
            for index in running:
                handle = self._handles[index]
                self._supply(handle, todo, chunk)
                if not todo and not handle.held and handle.key == key:
                    handle.tasks.send(("end",))  # nothing left for it: its "done" comes next
                    handle.key = None
            by_conn = {self._handles[i].results: i for i in running}
            dead: set[int] = set()
            for ready in wait(list(by_conn)):  # a message, or EOF: the worker is gone
                index = by_conn[ready]  # type: ignore[index]
                try:
                    message = self._handles[index].results.recv()
                except (EOFError, OSError):
                    dead.add(index)
                    continue
                if message[0] == "rows":
                    self._take(self._handles[index], message, clients, on_row)
                elif message[0] == "done":
                    running.discard(index)
                    dead.discard(index)
                elif message[0] == "error":
                    raise ProcessWorkerError(f"a campaign worker failed: {message[1]}") from (
                        message[2]
                    )
            for index in dead & running:
                handle = self._handles[index]
                while True:  # what it sent before it died counts
                    try:
                        if not handle.results.poll():
                            break
                        message = handle.results.recv()
                    except (EOFError, OSError):
                        break
                    if message[0] == "rows":
                        self._take(handle, message, clients, on_row)
                self._replace(handle, todo, key, data, clients)
