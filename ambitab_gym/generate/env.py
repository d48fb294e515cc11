"""``AmbiTab-Procedural-v0``: the ask-then-solve env over a fresh generated task at every reset.

* :class:`ProceduralEnv` - :class:`~ambitab_gym.env.AmbiTabEnv` whose record source is a
  :class:`~ambitab_gym.generate.tasks.TaskGenerator`: same protocol, oracles, verifier, wrappers
  and rewards; the curriculum (ambiguity count range, families, domains, distractor phrases)
  is set with ``gym.make`` keyword arguments and changed between episodes with
  :meth:`ProceduralEnv.configure`.
* :class:`ProceduralInterpretationSolver` - the offline interpretation solver over the
  procedural corpus's recent AVTs (for ``mode="solver"``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from gymnasium import spaces

from ambitab_gym.env import AmbiTabEnv
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.generate.corpus import ProceduralCorpus
from ambitab_gym.generate.families import FAMILIES
from ambitab_gym.generate.prefetch import TaskPrefetcher, task_seed
from ambitab_gym.generate.tasks import DatabasePool, GeneratorConfig, TaskGenerator
from ambitab_gym.oracles import deterministic_oracle
from ambitab_gym.policies.interpretation import InterpretationSolver
from ambitab_gym.records import TaskRecord
from ambitab_gym.trajectory import PublicView, render_spec
from ambitab_gym.verify import Verifier

__all__ = ["ProceduralEnv", "ProceduralInterpretationSolver"]

#: The largest m the generator draws; the observation space holds its budget.
MAX_AMBIGUITIES = 5
_REFRESH_EVERY = 512  # resets between fresh env-owned oracles and verifiers (bounded caches)


class ProceduralEnv(AmbiTabEnv):
    """Ask-then-solve over procedurally generated AVTs: a new task at every reset.

    ``reset(seed=s)`` draws the task from the env's RNG, so the same seed gives the same
    task (and the same hidden reading); ``options={"record_id": ...}`` replays a record of
    one of the last ``keep`` AVTs. The tasks form a stream: a seeded reset (or the first
    reset) draws a stream seed from the env's RNG, and the k-th task after it is
    ``generate(task_seed(stream, k))`` (:func:`~ambitab_gym.generate.prefetch.task_seed`); the
    env's RNG then picks the episode's record among the task's readings.

    Args:
        ambiguities: inclusive range of m (0..5).
        families: ambiguity families (default all of :data:`~.families.FAMILIES`).
        domains: schema families: ``"train"`` (default; the held-out ``"test"`` domains are
            never drawn), ``"test"``, ``"all"`` or a sequence of names.
        distractors: inclusive range of unambiguous extra phrases per request.
        databases_per_domain, database_seed: the database pool.
        oracle_kind: the deterministic oracle the records are written for (``intent`` or
            ``knowledge``); ``oracle=`` still replaces the oracle itself.
        keep: recent AVTs held for replay and for the interpretation solver.
        pool: a :class:`~ambitab_gym.generate.tasks.DatabasePool` shared by the envs of a
            vector env, so that each database is built once (a database depends only on its
            name and ``database_seed``, so sharing never changes a task); with ``prefetch``, it
            is built and warmed (``DatabasePool.warm``) when the env is made and the workers
            start from a copy of it (``fork``).
        prefetch: worker processes that generate the next tasks ahead of the training loop
            (:class:`~ambitab_gym.generate.prefetch.TaskPrefetcher`; 0, the default, generates
            in the env's process). The tasks are the same as without prefetching; the workers
            end with ``env.close()``. Not inside a daemonic process (a ``SubprocVecEnv``
            worker): there, the env's process already runs beside the trainer.
        prefetch_depth: tasks each worker holds ready.
        prefetch_context: the workers' multiprocessing start method (default: the platform's,
            ``fork`` on Linux; ``spawn`` needs the script's ``__main__`` guard).
        solver: any solver, or ``"interpretation"`` for :class:`ProceduralInterpretationSolver`
            (implies ``mode="solver"``).
        **kwargs: every other :class:`AmbiTabEnv` argument (``oracle``, ``solver``, ``mode``,
            ``reward``, ``budget_slack``, ``zero_ambiguity``, ``info_keys``, ...).

    Example:
        >>> import gymnasium as gym
        >>> import ambitab_gym, ambitab_gym.generate
        >>> env = gym.make("AmbiTab-Procedural-v0", ambiguities=(1, 2), domains="test")
        >>> obs, info = env.reset(seed=3)
        >>> again, _ = env.reset(seed=3)
        >>> domain = env.unwrapped.record.spec.database.rsplit("_", 1)[0]
        >>> obs["task"] == again["task"], domain in ambitab_gym.generate.TEST_DOMAINS
        (True, True)
        >>> obs, reward, terminated, truncated, info = env.step(ambitab_gym.STOP)
        >>> terminated, reward
        (True, 0.0)
    """

    def __init__(
        self,
        *,
        ambiguities: tuple[int, int] = (0, 3),
        families: Sequence[str] = FAMILIES,
        domains: str | Sequence[str] = "train",
        distractors: tuple[int, int] = (0, 1),
        databases_per_domain: int = 16,
        database_seed: int = 0,
        oracle_kind: str = "intent",
        keep: int = 64,
        pool: DatabasePool | None = None,
        prefetch: int = 0,
        prefetch_depth: int = 64,
        prefetch_context: str | None = None,
        **kwargs: Any,
    ) -> None:
        for name in ("corpus", "split", "record_ids", "engine", "engine_options"):
            if name in kwargs:
                raise TypeError(
                    f"AmbiTab-Procedural-v0 generates its records: {name!r} does not apply "
                    "(write a corpus with `ambitab-gym generate` to use those)"
                )
        config = GeneratorConfig(
            ambiguities=tuple(ambiguities),  # type: ignore[arg-type]
            families=tuple(families),
            domains=domains,  # type: ignore[arg-type]
            distractors=tuple(distractors),  # type: ignore[arg-type]
            databases_per_domain=databases_per_domain,
            database_seed=database_seed,
            oracle=oracle_kind,  # type: ignore[arg-type]
        )
        # the fast record path: records equal to validated ones (tested), built without
        # re-validating what the generator builds correctly by construction
        self.generator = TaskGenerator(config, pool=pool, validate=False)
        corpus = ProceduralCorpus(self.generator, keep=keep, limits=kwargs.get("limits"))
        corpus.add(self.generator.generate(0))  # the base env wants one record to start
        if kwargs.get("solver") == "interpretation":
            kwargs["solver"] = ProceduralInterpretationSolver(corpus)
        self._own_oracle = kwargs.get("oracle") is None
        self._resets = 0
        self._stream: int | None = None  # the task stream's seed (drawn at the first draw)
        self._next_task = 0
        #: elapsed and CPU seconds the env's resets spent getting tasks (generating them, or
        #: blocked on the prefetcher and unpickling what it sent)
        self.wait_seconds = 0.0
        self.wait_cpu_seconds = 0.0
        self.prefetcher: TaskPrefetcher | None = None
        if prefetch:
            if pool is not None:
                # a pool the caller shares (the envs of a vector env): built and warmed here,
                # once for every env sharing it, and copied into the workers when they fork,
                # instead of built again by each worker while the trainer sets up
                pool.warm(config)
            self.prefetcher = TaskPrefetcher(
                workers=int(prefetch),
                depth=prefetch_depth,
                context=prefetch_context,
                warm=config,
                pool=self.generator.pool,
            )
        super().__init__(corpus, split="all", **kwargs)  # the domains are its split
        self.corpus: ProceduralCorpus
        budget = MAX_AMBIGUITIES + self.budget_slack - 1
        self.observation_space = spaces.Dict(
            {**self.observation_space.spaces, "questions_left": spaces.Discrete(budget + 1)}
        )

    def configure(self, **overrides: Any) -> GeneratorConfig:
        """Change what the next episodes draw (a curriculum step).

        ``env.unwrapped.configure(ambiguities=(1, 3), distractors=(0, 2))``; on a vector env
        ``envs.call("configure", ambiguities=(1, 3))``. Keys are :class:`GeneratorConfig`
        fields; ``domains`` also takes ``"train"``, ``"test"`` or ``"all"``. The oracle kind
        and the corpus name are fixed when the env is made.
        """
        fixed = sorted({"oracle", "corpus"} & set(overrides))
        if fixed:
            raise ConfigurationError(f"{fixed} cannot change after the env is made")
        config = self.generator.configure(**overrides)
        if self.prefetcher is not None and self._stream is not None:
            # what the workers generated under the old config is discarded
            self.prefetcher.start(config, stream=self._stream, index=self._next_task)
        return config

    def generation_stats(self) -> dict[str, float]:
        """Tasks generated in this process so far and the elapsed and CPU seconds spent
        generating them, tasks received from prefetching workers, and ``wait_seconds``: the
        time resets waited for a task (generating it in-process, or blocked on the
        prefetcher), and ``wait_cpu_seconds``, this process's CPU time in it (with prefetching:
        receiving the records) - the generator's share of a training run
        (``envs.env_method("generation_stats")`` on a vector env)."""
        generator = self.generator
        prefetcher = self.prefetcher
        return {
            "tasks": generator.generated,
            "seconds": generator.seconds,
            "cpu_seconds": generator.cpu_seconds,
            "prefetched": prefetcher.tasks if prefetcher is not None else 0,
            "wait_seconds": self.wait_seconds,
            "wait_cpu_seconds": self.wait_cpu_seconds,
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self._resets += 1
        if seed is not None:
            self._stream = None  # a new stream, drawn from the reseeded RNG
        if self._resets % _REFRESH_EVERY == 0:
            # the oracle's matchers and the verifier cache per record id; records here are
            # never seen again, so start afresh instead of growing without bound
            if self._own_oracle:
                self.oracle = deterministic_oracle(self.corpus.manifest.oracle)
            if getattr(self, "_owns_verifier", True):  # a shared verifier is the caller's
                self.verifier.close()
                self.verifier = Verifier(self.corpus.open_engine, limits=self.corpus.limits)
        return super().reset(seed=seed, options=options)

    def _draw_record(self, options: dict[str, Any]) -> TaskRecord:
        record_id = options.get("record_id")
        if record_id is not None:
            try:
                return self.corpus.record(record_id)
            except KeyError:
                raise ValueError(
                    f"record {record_id!r} is not among the last {self.corpus.keep} generated AVTs"
                ) from None
        # the CPU clock is read outside the timed span: reading it is a system call, where a
        # busy machine's scheduler may switch processes (a pause that is not the task's)
        cpu_tick = time.process_time()
        tick = time.perf_counter()
        if self._stream is None:
            self._stream, self._next_task = int(self.np_random.integers(2**63)), 0
            if self.prefetcher is not None:
                self.prefetcher.start(self.generator.config, stream=self._stream)
        if self.prefetcher is not None:
            item = self.prefetcher.get()
            records = self.corpus.add_records(item.avt_id, item.records)
        else:
            task = self.generator.generate(task_seed(self._stream, self._next_task))
            records = self.corpus.add(task)
        self._next_task += 1
        # the episode's record, read inside the timed span (records a worker sent are
        # unpickled as they are read: that is part of getting the task)
        record = records[int(self.np_random.integers(len(records)))]
        self.wait_seconds += time.perf_counter() - tick
        self.wait_cpu_seconds += time.process_time() - cpu_tick
        return record

    def close(self) -> None:
        """Close the env, and stop its prefetching workers."""
        if self.prefetcher is not None:
            self.prefetcher.close()
        super().close()

    def _task(self, record: TaskRecord) -> str:
        return render_spec(self.corpus.public_spec(record))  # no per-record cache


def _fold(text: str) -> str:
    return " ".join(text.split()).lower()


class ProceduralInterpretationSolver(InterpretationSolver):
    """:class:`InterpretationSolver` over the AVTs a :class:`ProceduralCorpus` holds now.

    Example:
        >>> import gymnasium as gym
        >>> import ambitab_gym
        >>> env = gym.make("AmbiTab-Procedural-v0", ambiguities=(1, 1), solver="interpretation")
        >>> _ = env.reset(seed=0)
        >>> term = env.unwrapped.record.ambiguities[0].term
        >>> _ = env.step(f"Could you clarify what exactly you mean by {term}?")
        >>> env.step(ambitab_gym.STOP)[4]["success"]
        True
    """

    def __init__(self, corpus: ProceduralCorpus) -> None:
        self.corpus = corpus

    def candidates(self, view: PublicView) -> list[TaskRecord]:
        request, database = _fold(view.spec.request), view.spec.database
        for siblings in reversed(list(self.corpus.avts.values())):
            spec = siblings[0].spec
            if spec.database == database and _fold(spec.request) == request:
                return siblings
        return []
