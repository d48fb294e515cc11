"""Prefetching: worker processes generate the next tasks while the training loop runs.

* :class:`PackedRecords` - an AVT's records as a worker sends them.
* :func:`task_seed` - the seed of the ``index``-th task of a task stream (a pure function, so a
  worker can draw task 1,000 without drawing the 999 before it).
* :class:`TaskPrefetcher` - ``workers`` processes, each generating every ``workers``-th task of
  the stream ahead into its own queue, at most ``depth`` tasks ahead of what the consumer has
  received (a counter in shared memory: the consumer never wakes a worker);
  :meth:`TaskPrefetcher.get` hands them out in
  stream order, so the sequence of tasks is exactly the in-process one
  (``TaskGenerator.generate(task_seed(stream, k))`` for k = 0, 1, ...).

A worker sends up to ``batch`` tasks per message: while its queue still holds a message the
consumer has not taken (the consumer is busy), it gathers tasks into one message, which cuts
the consumer's per-task cost of receiving them (one pipe read and one unpickling call for
several tasks); when its queue is empty (the consumer may be waiting) it sends each task at
once.

A worker is a child process (the platform's default start method: ``fork`` on Linux, which
needs no ``if __name__ == "__main__"`` guard in the training script; ``spawn`` or ``forkserver``
can be chosen and need the guard, as every ``multiprocessing`` program does); it holds
its own :class:`~ambitab_gym.generate.tasks.TaskGenerator` and database pool (with ``fork``, a
copy of the one it is given), and sends only records, as :class:`PackedRecords` (unpickled when
read). It ends when :meth:`close` asks, when the prefetcher is garbage-collected, or when it
sees its parent gone (it looks while it is ``depth`` tasks ahead), so no process outlives the
env. ``AmbiTab-Procedural-v0`` uses it with
``prefetch=N`` (``docs/generate.md``).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import io
import multiprocessing
import pickle
import queue
import sys
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from ambitab_gym.errors import AmbiTabError, ConfigurationError
from ambitab_gym.generate.tasks import (
    DatabasePool,
    GeneratorConfig,
    TaskGenerator,
    model_from_state,
)
from ambitab_gym.records import Ambiguity, CompareRules, PublicSpec, TaskRecord, VerificationSpec

__all__ = ["PackedRecords", "PrefetchError", "PrefetchedTask", "TaskPrefetcher", "task_seed"]

_POLL_S = 0.2  # how often a blocked worker looks for a new command or a dead parent
_SWITCH_S = 0.0005  # a worker's GIL switch interval (its feeder thread waits at most this)
_IDLE_S = 0.05  # how often a worker `depth` tasks ahead looks for room (a timer, not a wake-up)
_STOP = None


class PrefetchError(AmbiTabError, RuntimeError):
    """A prefetching worker died or could not start.

    >>> PrefetchError("worker 0 exited").category
    'prefetch'
    """

    category = "prefetch"


def task_seed(stream: int, index: int) -> int:
    """The task seed of the ``index``-th task of the stream ``stream`` (below 2^63).

    >>> task_seed(7, 0) == task_seed(7, 0), task_seed(7, 0) != task_seed(7, 1)
    (True, True)
    """
    state = np.random.SeedSequence([int(stream), int(index), 0x7A5C]).generate_state(1, np.uint64)
    return int(state[0]) >> 1


def _model(kind: int, state: dict, fields_set: set, extra: Any) -> Any:
    """A record model (``_MODELS[kind]``) rebuilt from its fields, as pickling it whole
    restores it (without pydantic's per-model ``__getstate__``/``__setstate__`` round trip)."""
    return model_from_state(_MODELS[kind], state, fields_set, extra)


_MODELS = (TaskRecord, PublicSpec, VerificationSpec, Ambiguity, CompareRules)
_MODEL_KIND = {cls: kind for kind, cls in enumerate(_MODELS)}


def _shared_part(key: int) -> Any:
    """Stands for a shared part in a packed record; :class:`_SharedUnpickler` reads it from
    its table instead."""
    raise PrefetchError("a packed record read without its shared parts")


class _Ref:
    """A shared part inside a model's fields (pickled as its number)."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key

    def __reduce__(self) -> tuple:
        return (_shared_part, (self.key,))


def _shared_parts(record: TaskRecord) -> tuple:
    """The parts of a record that other records share: its spec's column meanings, compare
    rules, ambiguities, and its models' fields-set objects."""
    return (
        record.spec.column_meanings,
        record.verification.compare,
        *record.ambiguities,
        record.__pydantic_fields_set__,
        record.spec.__pydantic_fields_set__,
        record.verification.__pydantic_fields_set__,
    )


def _record_pickler(file: io.BytesIO, sent: dict[int, tuple[object, int]]) -> pickle.Pickler:
    """A pickler of one record: its models as their fields, the parts already in ``sent`` as
    their numbers (a reducer per model class: no Python call for any other object)."""

    def ref(part: Any) -> Any:
        entry = sent.get(id(part))
        return part if entry is None else _Ref(entry[1])

    def model(instance: Any) -> tuple:
        if instance.__pydantic_private__ is not None:  # not a record model: as usual
            return instance.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        state = instance.__dict__
        if type(instance) is PublicSpec:
            meanings = state.get("column_meanings")
            if id(meanings) in sent:
                state = {**state, "column_meanings": ref(meanings)}
        return (
            _model,
            (
                _MODEL_KIND[type(instance)],
                state,
                ref(instance.__pydantic_fields_set__),
                instance.__pydantic_extra__,
            ),
        )

    def shared_or_model(instance: Any) -> tuple:
        entry = sent.get(id(instance))
        return (_shared_part, (entry[1],)) if entry is not None else model(instance)

    pickler = pickle.Pickler(file, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {
        TaskRecord: model,
        PublicSpec: model,
        VerificationSpec: model,
        Ambiguity: shared_or_model,
        CompareRules: shared_or_model,
    }
    return pickler


class _SharedUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, table: dict[int, object]) -> None:
        super().__init__(file)
        self._table = table

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__:  # the two globals a packed record names: no import lookup
            if name == "_model":
                return _model
            if name == "_shared_part":
                return self._table.__getitem__
        return super().find_class(module, name)


class PackedRecords(Sequence[TaskRecord]):
    """An AVT's records as a worker sends them: one pickle per record, unpickled on first
    access - a reset needs one record of the AVT, its siblings only when something asks for
    them (a replay, the interpretation solver) - so the training process builds about a third
    of the objects it would (less CPU, and fewer objects for its garbage collector). The parts
    records share across tasks (ambiguities, column meanings, compare rules) travel once per
    stream (:meth:`pack` lists the new ones) and are referred to by number; the record models travel as their field
    values.

    Equal to the tuple of its records; pickled, it becomes that tuple.

    >>> from ambitab_gym.generate.tasks import TaskGenerator
    >>> records = TaskGenerator(ambiguities=(2, 2), validate=False).generate(5).records
    >>> sent, table = {}, {}
    >>> packed = PackedRecords.pack(records, sent)
    >>> packed.attach(table)
    >>> len(packed), packed.ids == tuple(r.id for r in records), packed == records
    (4, True, True)
    """

    __slots__ = ("_blobs", "_new", "_records", "_table", "avt_id", "ids")

    def __init__(
        self,
        avt_id: str,
        ids: tuple[str, ...],
        blobs: tuple[bytes, ...],
        new: tuple[tuple[int, object], ...] = (),
    ) -> None:
        self.avt_id = avt_id
        self.ids = ids
        self._blobs = blobs
        self._new = new
        self._table: dict[int, object] | None = None
        self._records: list[TaskRecord | None] = [None] * len(blobs)

    @classmethod
    def pack(
        cls, records: Sequence[TaskRecord], sent: dict[int, tuple[object, int]]
    ) -> PackedRecords:
        """Pickle ``records``; ``sent`` (the worker's, per stream) numbers the shared parts
        already sent, and those first sent here travel with the result."""
        new = []
        for record in records:
            for part in _shared_parts(record):
                if id(part) not in sent:
                    key = len(sent)
                    sent[id(part)] = (part, key)  # held, so that its id is never reused
                    new.append((key, part))
        blobs = []
        for record in records:
            buffer = io.BytesIO()
            _record_pickler(buffer, sent).dump(record)
            blobs.append(buffer.getvalue())
        ids = tuple(record.id for record in records)
        return cls(records[0].avt_id if records else "", ids, tuple(blobs), tuple(new))

    def attach(self, table: dict[int, object]) -> None:
        """Receive the shared parts this AVT brought into ``table`` (the consumer's, per
        stream; AVTs attach in stream order) and read the records' parts from it."""
        table.update(self._new)
        self._new = ()
        self._table = table

    def __len__(self) -> int:
        return len(self._blobs)

    @overload
    def __getitem__(self, index: int) -> TaskRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[TaskRecord]: ...

    def __getitem__(self, index: int | slice) -> TaskRecord | list[TaskRecord]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        record = self._records[index]
        if record is None:
            if self._table is None:
                raise PrefetchError("attach() the shared parts before reading the records")
            buffer = io.BytesIO(self._blobs[index])
            record = self._records[index] = _SharedUnpickler(buffer, self._table).load()
        return record

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PackedRecords({self.avt_id!r}, {len(self)} records)"

    def __reduce__(self) -> tuple:
        if self._table is None:  # a worker's message
            return (PackedRecords, (self.avt_id, self.ids, self._blobs, self._new))
        return (tuple, (tuple(self),))


@dataclass(frozen=True)
class PrefetchedTask:
    """One task as a worker sends it: the stream index, its seed and its records
    (:class:`PackedRecords` from a worker).

    >>> PrefetchedTask(0, 5, ()).seed
    5
    """

    index: int
    seed: int
    records: Sequence[TaskRecord]

    @property
    def avt_id(self) -> str:
        """The AVT's id (without reading a record)."""
        packed = self.records
        return packed.avt_id if isinstance(packed, PackedRecords) else packed[0].avt_id


def _parent_alive() -> bool:
    parent = multiprocessing.parent_process()
    return parent is None or parent.is_alive()


def _nothing_queued(results: Any) -> bool:
    """Whether no message waits for the consumer (sent or still in the feeder's buffer)."""
    try:
        return results.qsize() == 0
    except NotImplementedError:  # macOS: no semaphore count; the pipe alone
        return results.empty()


def _send(results: Any, control: Any, message: tuple) -> bool:
    """Put ``message`` on the worker's queue; False when the parent is gone or a new command
    came first (the message is stale)."""
    while True:
        try:
            results.put(message, timeout=_POLL_S)
            return True
        except queue.Full:
            if not _parent_alive() or not control.empty():
                return False


def _work(
    control: Any,
    results: Any,
    worker: int,
    workers: int,
    warm: GeneratorConfig | None,
    batch: int = 1,
    inherited: DatabasePool | None = None,
    taken: Any = None,
    depth: int = 1,
) -> None:
    """A worker's loop: build the database pool of ``warm`` (while the trainer sets up; what
    ``inherited``, the parent's pool copied by ``fork``, holds is not built again), wait
    for a job ``(epoch, config, stream, start)``, then generate its share of the stream
    (indices ``= worker mod workers``) into ``results`` until the next command; ``None`` stops
    it. Messages are ``(epoch, [task, ...])`` (at most ``batch`` tasks, in stream order) or
    ``(epoch, error)``; at most ``depth`` tasks are ahead of ``taken``, the tasks the consumer
    has received (a shared counter it adds to)."""
    # the queue's feeder thread writes to the pipe only once it holds the GIL: switch sooner
    sys.setswitchinterval(_SWITCH_S)
    # kept across jobs: a database depends only on its key
    pool = inherited if inherited is not None else DatabasePool()
    if warm is not None:  # until a job (or a stop) comes: the rest is built on demand
        pool.warm(warm, stop=lambda: not control.empty())
    job: tuple[int, TaskGenerator, int] | None = None
    index = 0
    sent: dict[int, tuple[object, int]] = {}
    sent_tasks = 0
    if taken is None:  # no consumer count: bounded by what was sent alone
        taken = ctypes.c_longlong(0)
    pending: list[PrefetchedTask] = []
    command: Any = ()
    while True:
        if command == ():
            try:
                command = control.get(timeout=_POLL_S) if job is None else control.get_nowait()
            except queue.Empty:
                command = ()
        if command is _STOP:
            return
        if command != ():
            pending = []  # generated for the previous job: stale
            epoch, config, stream, start = command
            command = ()
            job = (epoch, TaskGenerator(config, pool=pool, validate=False), stream)
            index = start + (worker - start) % workers
            sent: dict[int, tuple[object, int]] = {}  # the shared parts sent in this job
        if job is None:
            if not _parent_alive():
                return
            continue
        epoch, generator, stream = job
        # tasks sent and not yet received by the consumer, and those gathered here
        ahead = sent_tasks - taken.value + len(pending)
        if len(pending) < batch and ahead < depth:
            seed = task_seed(stream, index)
            try:
                task = generator.generate(seed)
            except AmbiTabError as error:  # sent on: the env raises it where it asked
                job = None
                messages = [(epoch, pending), (epoch, error)] if pending else [(epoch, error)]
                sent_tasks += len(pending)
                pending = []
                delivered = all(_send(results, control, message) for message in messages)
                if not delivered and not _parent_alive():
                    return
                continue
            pending.append(PrefetchedTask(index, seed, PackedRecords.pack(task.records, sent)))
            index += workers
            ahead += 1
        # gather while the consumer has tasks to take; send at once when it may wait
        if pending and (len(pending) >= batch or ahead >= depth or _nothing_queued(results)):
            waiting = len(pending) < batch  # nothing queued: the consumer may be waiting
            results.put((epoch, pending))
            sent_tasks += len(pending)
            pending = []
            if waiting:
                time.sleep(0)  # let the feeder thread write it now
        elif ahead >= depth:
            # `depth` tasks ahead: look again after a while (or at once on a new command). The
            # consumer counts what it receives in shared memory, it does not signal: taking a
            # message never wakes this process (on a busy machine a woken worker can take the
            # consumer's core in the middle of a reset)
            try:
                command = control.get(timeout=_IDLE_S)
            except queue.Empty:
                command = ()
            if not _parent_alive():
                return


def _shutdown(processes: list, controls: list, results: list) -> None:
    for control in controls:
        with contextlib.suppress(OSError, ValueError):
            control.put(_STOP)
    deadline = time.monotonic() + 5.0
    for process, result in zip(processes, results, strict=True):
        while process.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty, OSError, ValueError, EOFError):
                result.get(timeout=0.05)  # unblock a worker waiting on a full queue
        if process.is_alive():
            process.terminate()
        process.join(timeout=5.0)
        if process.is_alive():
            process.kill()
            process.join()
    for q in (*controls, *results):
        q.cancel_join_thread()
        q.close()


class TaskPrefetcher:
    """Generate tasks ahead in ``workers`` processes, handed out in stream order.

    Args:
        workers: how many worker processes (each generates every ``workers``-th task).
        depth: tasks each worker may have ahead of the consumer (sent and not yet received,
            or gathered).
        context: the multiprocessing start method (default: the platform's; ``spawn`` and
            ``forkserver`` need the script's ``if __name__ == "__main__"`` guard).
        warm: a config whose database pool the workers build and warm
            (:meth:`~ambitab_gym.generate.tasks.DatabasePool.warm`) as soon as they start
            (before the first :meth:`start`), so the first tasks are not slowed by it.
        batch: the most tasks a worker sends in one message (capped at ``depth``); a worker
            gathers tasks only while its previous message waits to be taken.
        pool: a database pool the workers start from, with the ``fork`` start method (each
            worker a copy: the databases it holds, and what they memoized, are not built
            again in every worker); ignored by ``spawn`` and ``forkserver``.

    :meth:`start` (re)starts the stream - a config, a stream seed and the index of the next
    task - and discards whatever was generated for an earlier start; :meth:`get` returns the
    next task. ``wait_seconds`` sums the time :meth:`get` spent blocked (the training loop's
    wait for a task).

    Example:
        >>> from ambitab_gym.generate import GeneratorConfig, TaskGenerator
        >>> config = GeneratorConfig(ambiguities=(1, 1), domains=("retail",))
        >>> with TaskPrefetcher(workers=1, depth=2) as prefetcher:
        ...     prefetcher.start(config, stream=11, index=0)
        ...     task = prefetcher.get()
        >>> local = TaskGenerator(config, validate=False).generate(task_seed(11, 0))
        >>> task.index, task.records == local.records, prefetcher.closed
        (0, True, True)
    """

    def __init__(
        self,
        *,
        workers: int = 1,
        depth: int = 64,
        context: str | None = None,
        warm: GeneratorConfig | None = None,
        batch: int = 8,
        pool: DatabasePool | None = None,
    ) -> None:
        if workers < 1 or depth < 1 or batch < 1:
            raise ConfigurationError(
                "prefetch needs at least one worker, a depth of 1 and a batch of 1"
            )
        if multiprocessing.current_process().daemon:
            raise ConfigurationError(
                "prefetching workers cannot start inside a daemonic process (a SubprocVecEnv or "
                "multiprocessing.Pool worker): prefetch in the main process (sync vector env)"
            )
        ctx = multiprocessing.get_context(context)
        self.workers = int(workers)
        self.depth = int(depth)
        self.batch = min(int(batch), self.depth)
        self._controls = [ctx.Queue() for _ in range(self.workers)]
        # unbounded queues: a worker keeps at most `depth` tasks ahead of what the consumer
        # counts as received in `_taken` (shared memory, no signal)
        self._results = [ctx.Queue() for _ in range(self.workers)]
        self._taken = [ctx.RawValue(ctypes.c_longlong, 0) for _ in range(self.workers)]
        self._ready: list[collections.deque[PrefetchedTask]] = [
            collections.deque() for _ in range(self.workers)
        ]
        # each worker's shared record parts (PackedRecords), by number, for the current start
        self._tables: list[dict[int, object]] = [{} for _ in range(self.workers)]
        self._processes = [
            ctx.Process(
                target=_work,
                args=(
                    self._controls[w],
                    self._results[w],
                    w,
                    self.workers,
                    warm,
                    self.batch,
                    pool if ctx.get_start_method() == "fork" else None,
                    self._taken[w],
                    self.depth,
                ),
                name=f"ambitab-prefetch-{w}",
                daemon=True,
            )
            for w in range(self.workers)
        ]
        for process in self._processes:
            process.start()
        self._finalizer = weakref.finalize(
            self, _shutdown, self._processes, self._controls, self._results
        )
        self._epoch = 0
        self._next: int | None = None
        #: seconds :meth:`get` spent blocked, tasks it returned, and messages they came in
        self.wait_seconds = 0.0
        self.tasks = 0
        self.messages = 0

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids."""
        return [p.pid for p in self._processes if p.pid is not None]

    def start(self, config: GeneratorConfig, *, stream: int, index: int = 0) -> None:
        """Generate the stream ``stream`` under ``config`` from task ``index`` on."""
        if self.closed:
            raise PrefetchError("the prefetcher is closed")
        self._epoch += 1
        self._next = int(index)
        for ready in self._ready:
            ready.clear()
        # new tables: records handed out before keep reading theirs
        self._tables = [{} for _ in range(self.workers)]
        for control in self._controls:
            control.put((self._epoch, config, int(stream), int(index)))

    def get(self) -> PrefetchedTask:
        """The next task of the stream (blocks until a worker has it)."""
        if self._next is None:
            raise PrefetchError("start() the prefetcher first")
        w = self._next % self.workers
        tick = time.perf_counter()
        ready = self._ready[w]
        while not ready:
            try:
                epoch, payload = self._results[w].get(timeout=1.0)
            except queue.Empty:
                if not self._processes[w].is_alive():
                    code = self._processes[w].exitcode
                    self.close()
                    raise PrefetchError(f"prefetching worker {w} exited (code {code})") from None
                continue
            if isinstance(payload, list):
                self._taken[w].value += len(payload)  # received: room for the worker
            if epoch != self._epoch:
                continue  # generated for an earlier start
            if isinstance(payload, BaseException):
                raise payload
            table = self._tables[w]
            for item in payload:
                if isinstance(item.records, PackedRecords):
                    item.records.attach(table)
            ready.extend(payload)
            self.messages += 1
        item = ready.popleft()
        self.wait_seconds += time.perf_counter() - tick
        if item.index != self._next:  # pragma: no cover - a broken invariant, not a user error
            raise PrefetchError(f"expected task {self._next}, got {item.index}")
        self._next += 1
        self.tasks += 1
        return item

    def close(self) -> None:
        """Stop the workers and wait for them (idempotent)."""
        self._finalizer()

    def __enter__(self) -> TaskPrefetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
