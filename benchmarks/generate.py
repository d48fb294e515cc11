"""Task generation rate next to the env's step rate, measured in one run.

Timed in the same process, interleaved in rounds so machine noise hits them alike:

* the generator: verified AVTs per second (``TaskGenerator.generate`` on fresh seeds, the
  env's default config - train domains, m in 0..3; every reading executed or its result
  known from the database's result cache; the database pool already built), on the env's
  fast record path (``validate=False``) and on the validated path ``ambitab-gym generate``
  writes; the cold figure (pool built on the way) is reported apart;
* the floor: a bare ``sqlite3`` execution of the same 2^m reference queries per task (the
  accepted tasks of the round, on the same in-memory databases, results fetched, nothing
  else) - what verifying each reading by its own execution costs at the least (the generator
  computes an aggregate task's readings with one query per event table and grouping, so it
  can beat this floor);
* the same fast path with every check by SQL (``TaskGenerator(row_masks=False)``: no draw
  rejected from its rows' bit masks, no count read off them; the same tasks), on the same seeds
  in the same rounds, both generators warmed alike with 300 tasks: ``row_masks_speedup``;
* ``AmbiTab-Bird-v0`` (the bundled corpus, nothing generated): steps and episodes per second
  under a driver that asks the canonical question about each term, one unmatched question,
  then stops (about m + 2 steps an episode);
* ``AmbiTab-Procedural-v0`` under the same driver: a fresh task at every reset, so its episode
  rate includes generation.

The per-task cost breakdown comes from a separate generator of the same config whose
databases' connections time each query (so the rate figures above carry no timing overhead):
microseconds per task in SQL (executing and fetching), in Python (everything else: drawing,
text, records, fingerprints), and for validation (the validated path minus the fast path), the
attempts per accepted task (and those rejected before any reading's SQL ran), and the
floors: the bare-SQL floor per task, the per-task cost the target needs, and the floor ratio
with every core of the machine generating.

Then ``--workers`` processes generate at once (each its own generator and pool, built before
the clock starts): the aggregate tasks per elapsed second of a vector env whose subprocess
workers each generate their own tasks (bounded by the free cores).

Prefetching (``AmbiTab-Procedural-v0`` with ``prefetch=N``, ``--prefetch N``), timed in elapsed
seconds since the work runs in other processes: the effective supply rate (tasks per second a
consumer that does nothing else receives from a warm prefetcher; ``prefetch_supply_ratio`` is
it over the Bird env's episodes per elapsed second), and the procedural env under the canonical
driver with prefetching - its episodes/s and the share of its elapsed time spent waiting for a
task (``prefetch_wait_share``; in process, that share is ``generation_share``). The consumer's
CPU cost of receiving one task from a full queue and reading its episode's record (records
come packed and are unpickled when read) is measured with batched messages (the default), one
task per message, and reading every record of each task, side by side: it bounds what any
number of workers can supply to one consumer core.

Rates are per CPU-second of the process by default (``--clock cpu``: everything timed is
single-threaded, so this is the rate on an idle core, and other jobs on a shared machine do
not skew one figure against another); ``--clock wall`` times elapsed seconds.

Target: generation is never the bottleneck, i.e. tasks/s at least 10x the env's episodes/s
(the env's step rate per task). ``ratio`` = tasks/s / Bird episodes/s; ``floor_ratio`` the same
for the bare-SQL floor; ``generation_share`` = the share of a procedural episode's time spent
generating its task.

    python benchmarks/generate.py [--tasks 2000] [--steps 20000] [--rounds 3] [--workers 2]
        [--prefetch 1] [--clock cpu|wall] [--small]

The last line is JSON. ``run(small=True)`` is the ``benchmarks/all.py`` entry (under a minute).
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import sqlite3
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.actions import STOP
from ambitab_gym.generate import GeneratorConfig, TaskGenerator, TaskPrefetcher
from ambitab_gym.oracles import canonical_question
from ambitab_gym.policies.scripted import distinct_terms


def run_env(env, steps: int, seed: int, clock: Callable[[], float]) -> tuple[float, float]:
    """(steps/s, episodes/s) under the canonical-question driver."""
    env.reset(seed=seed)
    inner = env.unwrapped
    queue = [canonical_question(t) for t in distinct_terms(inner.record)] + ["Please elaborate."]
    episodes = 0
    start = clock()
    for _ in range(steps):
        action = queue.pop(0) if queue else STOP
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            episodes += 1
            env.reset()
            queue = [canonical_question(t) for t in distinct_terms(inner.record)]
            queue.append("Please elaborate.")
    elapsed = clock() - start
    return steps / elapsed, episodes / elapsed


def run_generator(
    generator: TaskGenerator, tasks: int, first_seed: int, clock: Callable[[], float]
) -> tuple[float, list[tuple[str, tuple[str, ...]]]]:
    """(tasks/s, each task's database and reference queries). Only the queries are kept:
    holding thousands of tasks would slow the run down with garbage-collector passes. Each run
    starts after a full collection: one full pass over this process's heap (two database
    pools, two envs) costs about 65 ms, a fifth of a --small run, and would land on whichever
    path happened to run when the threshold was crossed."""
    queries = []
    gc.collect()
    start = clock()
    for seed in range(first_seed, first_seed + tasks):
        task = generator.generate(seed)
        queries.append(
            (task.database.name, tuple(r.verification.reference_sql for r in task.records))
        )
    return tasks / (clock() - start), queries


def run_floor(
    queries: list[tuple[str, tuple[str, ...]]],
    copies: dict[str, sqlite3.Connection],
    clock: Callable[[], float],
) -> float:
    """Tasks/s of a bare execution of each task's 2^m reference queries (results fetched)."""
    start = clock()
    for name, sqls in queries:
        connection = copies[name]
        for sql in sqls:
            connection.execute(sql).fetchall()
    return len(queries) / (clock() - start)


class _TimedConnection:
    """A database connection that adds the time of each query (execute and fetch) to
    ``seconds`` - the SQL share of the breakdown."""

    def __init__(self, connection: sqlite3.Connection, clock: Callable[[], float]) -> None:
        self.connection = connection
        self.clock = clock
        self.seconds = 0.0
        self.queries = 0

    def execute(self, sql: str, *args: Any) -> _Rows:
        start = self.clock()
        rows = self.connection.execute(sql, *args).fetchall()
        self.seconds += self.clock() - start
        self.queries += 1
        return _Rows(rows)

    def backup(self, target: sqlite3.Connection) -> None:
        self.connection.backup(target)


class _Rows:
    def __init__(self, rows: list[tuple]) -> None:
        self.rows = rows

    def fetchall(self) -> list[tuple]:
        return self.rows

    def __iter__(self) -> Any:
        return iter(self.rows)

    def fetchone(self) -> tuple | None:
        return self.rows[0] if self.rows else None


def run_breakdown(
    tasks: int, first_seed: int, clock: Callable[[], float]
) -> dict[str, float]:
    """Seconds per task in SQL and in the rest of ``generate``, queries and attempts per task,
    from a generator (the env's config, its own pool) whose connections time every query."""
    generator = TaskGenerator(validate=False, domains="train")
    timed = []
    for domain in generator.config.domains:
        for index in range(generator.config.databases_per_domain):
            db = generator.database(domain, index)
            db.connection = _TimedConnection(db.connection, clock)  # type: ignore[assignment]
            timed.append(db.connection)
    attempts = 0
    attempt = generator._attempt

    def counted(*args: Any) -> Any:
        nonlocal attempts
        attempts += 1
        return attempt(*args)

    generator._attempt = counted  # type: ignore[method-assign]
    early = 0
    early_reject = generator._early_reject

    def counted_early(*args: Any) -> bool:
        nonlocal early
        verdict = early_reject(*args)
        early += verdict
        return verdict

    generator._early_reject = counted_early  # type: ignore[method-assign]
    for seed in range(first_seed - 300, first_seed):  # warm up: thresholds, slot memos
        generator.generate(seed)
    attempts = early = 0
    sql_before = sum(c.seconds for c in timed)
    queries_before = sum(c.queries for c in timed)
    start = clock()
    for seed in range(first_seed, first_seed + tasks):
        generator.generate(seed)
    total = clock() - start
    sql = sum(c.seconds for c in timed) - sql_before
    return {
        "seconds": total / tasks,
        "sql": sql / tasks,
        "python": (total - sql) / tasks,
        "queries": (sum(c.queries for c in timed) - queries_before) / tasks,
        "attempts": attempts / tasks,
        "rejected_before_sql": early / tasks,
    }


def run_receive(batch: int, depth: int = 64, rounds: int = 3, every: bool = False) -> float:
    """The consumer's CPU seconds per task received from a full queue (one worker,
    ``batch`` tasks per message at most) and its episode's record read, as a reset reads it
    (records come packed and are unpickled when read): what one consumer core pays per
    prefetched task. ``every``: every record of the task read (what a consumer that needs the
    siblings too, or a prefetcher that unpickled whole tasks, pays)."""
    config = GeneratorConfig(domains="train")
    spent, received = 0.0, 0
    with TaskPrefetcher(workers=1, depth=depth, batch=batch) as prefetcher:
        prefetcher.start(config, stream=7)
        for _ in range(100):  # warm up: the worker's database pool
            prefetcher.get()
        messages = max(1, depth // min(batch, depth))
        for _ in range(rounds):
            deadline = time.perf_counter() + 60
            queued = prefetcher._results[0]  # the worker's queue: wait until it is full
            while queued.qsize() < messages and time.perf_counter() < deadline:
                time.sleep(0.02)
            start = time.process_time()
            for _ in range(depth):
                records = prefetcher.get().records
                if every:
                    list(records)
                else:
                    records[len(records) // 2]
            spent += time.process_time() - start
            received += depth
    return spent / received


def _worker(args: tuple[int, int, int, Any]) -> tuple[int, float]:
    index, tasks, first_seed, barrier = args
    generator = TaskGenerator(validate=False, domains="train")
    for domain in generator.config.domains:
        for i in range(generator.config.databases_per_domain):
            generator.database(domain, i)
    barrier.wait()
    start = time.perf_counter()
    for seed in range(first_seed + index * tasks, first_seed + (index + 1) * tasks):
        generator.generate(seed)
    return tasks, time.perf_counter() - start


def run_workers(workers: int, tasks: int) -> float:
    """Aggregate tasks/s of ``workers`` processes generating at once (pools built first)."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(workers)
        with context.Pool(workers) as pool:
            results = pool.map(_worker, [(i, tasks, 5 * 10**8, barrier) for i in range(workers)])
    return sum(n for n, _ in results) / max(s for _, s in results)


def run_supply(workers: int, tasks: int) -> float:
    """Tasks per elapsed second a consumer receives from a warm prefetcher (nothing else to do:
    the supply rate a training loop can draw on)."""
    config = GeneratorConfig(domains="train")
    with TaskPrefetcher(workers=workers, depth=32) as prefetcher:
        prefetcher.start(config, stream=3)
        for _ in range(100 * workers):  # warm up: each worker builds its database pool
            prefetcher.get()
        start = time.perf_counter()
        for _ in range(tasks):
            prefetcher.get()
        return tasks / (time.perf_counter() - start)


def run_prefetched_env(workers: int, steps: int) -> tuple[float, float]:
    """(episodes per elapsed second, share of the elapsed time spent waiting for a task) of
    ``AmbiTab-Procedural-v0`` with ``prefetch=workers`` under the canonical driver."""
    env = gym.make("AmbiTab-Procedural-v0", prefetch=workers, prefetch_depth=32)
    try:
        run_env(env, min(2_000, steps), 0, time.perf_counter)  # warm up: pools, matchers
        inner = env.unwrapped
        waited = inner.wait_seconds
        start = time.perf_counter()
        _, episodes = run_env(env, steps, 1, time.perf_counter)
        elapsed = time.perf_counter() - start
        return episodes, (inner.wait_seconds - waited) / elapsed
    finally:
        env.close()


def measure(
    tasks: int = 2000,
    steps: int = 20_000,
    rounds: int = 3,
    workers: int = 2,
    prefetch: int = 1,
    clock_name: str = "cpu",
    cold_tasks: int = 500,
) -> dict[str, Any]:
    """Every figure of the module docstring, as a dict (the JSON line)."""
    clock = time.process_time if clock_name == "cpu" else time.perf_counter
    cold_generator = TaskGenerator(validate=False, domains="train")
    start = clock()
    for seed in range(cold_tasks):
        cold_generator.generate(10**9 + seed)
    cold = cold_tasks / (clock() - start)

    # what AmbiTab-Procedural-v0 draws by default: the train domains, the fast record path
    fast = TaskGenerator(validate=False, domains="train")
    # its own pool: the result caches of a pool warm up as it generates, so sharing one would
    # favour whichever generator runs second
    validated = TaskGenerator(validate=True, domains="train")
    # the fast path with every check by SQL (no row masks): the same tasks, side by side
    by_sql = TaskGenerator(validate=False, domains="train", row_masks=False)
    copies = {}  # the floor runs on its own copies of the databases: no result caches
    for domain in fast.config.domains:  # build the database pool first
        for index in range(fast.config.databases_per_domain):
            db = fast.database(domain, index)
            validated.database(domain, index)
            by_sql.database(domain, index)
            copies[db.name] = sqlite3.connect(":memory:")
            db.connection.backup(copies[db.name])
    for generator in (fast, by_sql):  # warm up alike: thresholds, slot memos, row masks
        for seed in range(300):
            generator.generate(10**8 + seed)
    bird = gym.make("AmbiTab-Bird-v0")
    procedural = gym.make("AmbiTab-Procedural-v0")
    warm = min(2_000, steps)
    run_env(bird, warm, 0, clock)  # warm up: compile matchers, build databases
    run_env(procedural, warm, 0, clock)
    gen, gen_valid, floor, bird_steps, bird_eps, proc_steps, proc_eps = ([] for _ in range(7))
    gen_sql = []
    for round_ in range(rounds):
        rate, queries = run_generator(fast, tasks, round_ * tasks, clock)
        gen.append(rate)
        gen_sql.append(run_generator(by_sql, tasks, round_ * tasks, clock)[0])
        floor.append(run_floor(queries, copies, clock))
        seeds = 10**6 + round_ * tasks  # fresh seeds: no cached results
        gen_valid.append(run_generator(validated, tasks, seeds, clock)[0])
        s, e = run_env(bird, steps, round_, clock)
        bird_steps.append(s)
        bird_eps.append(e)
        s, e = run_env(procedural, steps, round_, clock)
        proc_steps.append(s)
        proc_eps.append(e)
    procedural.close()
    breakdown = run_breakdown(min(tasks, 1000), 5 * 10**6, clock)
    tasks_per_s = statistics.median(gen)
    floor_per_s = statistics.median(floor)
    bird_eps_per_s = statistics.median(bird_eps)
    proc_eps_per_s = statistics.median(proc_eps)
    aggregate = run_workers(workers, tasks // 2) if workers > 0 else None
    prefetched: dict[str, Any] = {"prefetch": prefetch}
    if prefetch > 0:
        receive = [
            run_receive(8),
            run_receive(1),
            run_receive(8, every=True),
            run_receive(8),
            run_receive(1),
            run_receive(8, every=True),
        ]
        prefetched.update(
            prefetch_receive_us_per_task=round(1e6 * min(receive[0::3]), 1),
            prefetch_receive_us_per_task_unbatched=round(1e6 * min(receive[1::3]), 1),
            prefetch_receive_us_per_task_every_record=round(1e6 * min(receive[2::3]), 1),
        )
        supply = run_supply(prefetch, tasks)
        episodes, wait_share = run_prefetched_env(prefetch, steps)
        # the Bird env in elapsed seconds too, next to the prefetched figures
        bird_wall = statistics.median(
            run_env(bird, steps, r, time.perf_counter)[1] for r in range(rounds)
        )
        prefetched.update(
            prefetch_supply_tasks_per_s=round(supply, 1),
            bird_episodes_per_wall_s=round(bird_wall, 1),
            prefetch_supply_ratio=round(supply / bird_wall, 3),
            procedural_prefetch_episodes_per_wall_s=round(episodes, 1),
            prefetch_wait_share=round(wait_share, 4),
        )
    bird.close()
    # the per-task cost at the measured rate, split by the breakdown run's shares
    per_task = 1e6 / tasks_per_s
    sql_share = breakdown["sql"] / breakdown["seconds"]
    cores = os.cpu_count() or 1
    receive_floor = prefetched.get("prefetch_receive_us_per_task")
    return {
        "benchmark": "generate",
        "tasks_per_s": round(tasks_per_s, 1),
        "tasks_per_s_validated": round(statistics.median(gen_valid), 1),
        # the same tasks with every check by SQL (TaskGenerator(row_masks=False)), same rounds
        "tasks_per_s_sql_checks": round(statistics.median(gen_sql), 1),
        "row_masks_speedup": round(
            statistics.median(a / b for a, b in zip(gen, gen_sql, strict=True)), 3
        ),
        "tasks_per_s_cold": round(cold, 1),
        "floor_tasks_per_s": round(floor_per_s, 1),
        "share_of_floor": round(tasks_per_s / floor_per_s, 3),
        "workers": workers,
        "tasks_per_s_workers": round(aggregate, 1) if aggregate else None,
        "bird_steps_per_s": round(statistics.median(bird_steps), 1),
        "bird_episodes_per_s": round(bird_eps_per_s, 1),
        "bird_steps_per_episode": round(statistics.median(bird_steps) / bird_eps_per_s, 2),
        "procedural_steps_per_s": round(statistics.median(proc_steps), 1),
        "procedural_episodes_per_s": round(proc_eps_per_s, 1),
        "ratio": round(tasks_per_s / bird_eps_per_s, 3),
        "floor_ratio": round(floor_per_s / bird_eps_per_s, 3),
        "workers_ratio": round(aggregate / bird_eps_per_s, 3) if aggregate else None,
        "ratio_to_steps": round(tasks_per_s / statistics.median(bird_steps), 3),
        "generation_share": round(proc_eps_per_s / tasks_per_s, 3),
        **prefetched,
        "us_per_task": round(per_task, 1),
        "us_sql_per_task": round(per_task * sql_share, 1),
        "us_python_per_task": round(per_task * (1 - sql_share), 1),
        "us_validation_per_task": round(1e6 / statistics.median(gen_valid) - per_task, 1),
        "queries_per_task": round(breakdown["queries"], 2),
        "attempts_per_task": round(breakdown["attempts"], 3),
        # attempts per accepted task rejected from their rows' masks, before any reading's SQL
        "attempts_rejected_before_sql_per_task": round(breakdown["rejected_before_sql"], 3),
        "floor_us_per_task": round(1e6 / floor_per_s, 1),
        # what the target asks: a task in a tenth of a Bird episode
        "target_us_per_task": round(1e6 / (10 * bird_eps_per_s), 2),
        "cores": cores,
        # the bare-SQL floor with every core generating (nothing left for training)
        "floor_ratio_all_cores": round(cores * floor_per_s / bird_eps_per_s, 3),
        # receiving alone, on the consumer's core: what any number of workers can supply
        "prefetch_receive_ratio": (
            round(1e6 / receive_floor / bird_eps_per_s, 3) if receive_floor else None
        ),
        "target_ratio": 10,
        "meets_target": tasks_per_s >= 10 * bird_eps_per_s,
        "rounds": rounds,
        "clock": clock_name,
    }


#: ``run(small=True)``: one short round, no multi-process run, one prefetching worker.
SMALL = {"tasks": 300, "steps": 4_000, "rounds": 1, "workers": 0, "prefetch": 1, "cold_tasks": 100}


def run(small: bool = True) -> dict:
    """The ``benchmarks/all.py`` entry: ``{metric: {"ratio", "target", "better"}}``. (The
    share of a training run's time spent waiting for tasks is ``train_procedural``'s metric:
    this driver does no work between episodes, so a prefetched env here waits on the
    workers' generation rate by construction.)"""
    result = measure(**SMALL) if small else measure()
    return {
        "generate: generated tasks/s over AmbiTab-Bird-v0 episodes/s (CPU time)": {
            "ratio": result["ratio"],
            "target": result["target_ratio"],
            "better": "higher",
        },
        "generate: prefetched supply tasks/s over Bird episodes/s (elapsed time)": {
            "ratio": result["prefetch_supply_ratio"],
            "target": result["target_ratio"],
            "better": "higher",
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per round")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="0 skips the multi-process run")
    parser.add_argument(
        "--prefetch", type=int, default=1, help="prefetching workers (0 skips those figures)"
    )
    parser.add_argument("--small", action="store_true", help="the run(small=True) sizes")
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu (default): rates per CPU-second of this process, unaffected by other jobs on "
        "a shared machine (the code is single-threaded); wall: per elapsed second",
    )
    args = parser.parse_args(argv)
    sizes = (
        dict(SMALL)
        if args.small
        else {
            "tasks": args.tasks,
            "steps": args.steps,
            "rounds": args.rounds,
            "workers": args.workers,
            "prefetch": args.prefetch,
        }
    )
    result = measure(**sizes, clock_name=args.clock)
    print(
        f"generator: {result['tasks_per_s']:,.0f} tasks/s (validated "
        f"{result['tasks_per_s_validated']:,.0f}; cold, pool included: "
        f"{result['tasks_per_s_cold']:,.0f}; bare-SQL floor {result['floor_tasks_per_s']:,.0f}; "
        f"{result['workers']} workers: {result['tasks_per_s_workers']}); "
        f"Bird env: {result['bird_steps_per_s']:,.0f} steps/s = "
        f"{result['bird_episodes_per_s']:,.0f} episodes/s; procedural env: "
        f"{result['procedural_steps_per_s']:,.0f} steps/s = "
        f"{result['procedural_episodes_per_s']:,.0f} episodes/s; tasks/s / Bird episodes/s = "
        f"{result['ratio']} (floor {result['floor_ratio']}); prefetch={result['prefetch']}: "
        f"supply {result.get('prefetch_supply_tasks_per_s')} tasks/s (ratio "
        f"{result.get('prefetch_supply_ratio')}), procedural env "
        f"{result.get('procedural_prefetch_episodes_per_wall_s')} episodes/s with "
        f"{result.get('prefetch_wait_share')} of its time waiting for tasks"
    )
    print(
        f"per task: {result['us_per_task']:,.0f} us = SQL {result['us_sql_per_task']:,.0f} us "
        f"({result['queries_per_task']} queries) + Python {result['us_python_per_task']:,.0f} us"
        f" (fast path; validation adds {result['us_validation_per_task']:,.0f} us); "
        f"{result['attempts_per_task']} attempts per accepted task "
        f"({result['attempts_rejected_before_sql_per_task']} rejected before any reading's SQL)"
        f"; row masks: {result['row_masks_speedup']}x the tasks/s of every check by SQL "
        f"({result['tasks_per_s_sql_checks']:,.0f}, same rounds); floors: bare SQL "
        f"{result['floor_us_per_task']:,.0f} us per task, target {result['target_us_per_task']}"
        f" us per task; with all {result['cores']} cores at the bare-SQL floor the ratio is "
        f"{result['floor_ratio_all_cores']} (target {result['target_ratio']})"
    )
    if result.get("prefetch_receive_us_per_task") is not None:
        print(
            f"prefetch: the consumer pays {result['prefetch_receive_us_per_task']} us of CPU per "
            f"task received and its episode's record read (batched messages; "
            f"{result['prefetch_receive_us_per_task_unbatched']} us one task per message; "
            f"{result['prefetch_receive_us_per_task_every_record']} us reading every record of "
            "the task), so "
            f"one consumer core receives at most {result['prefetch_receive_ratio']} x the Bird "
            "env's episodes/s, whatever the workers"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
