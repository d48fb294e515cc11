"""Task generation rate next to the env's step rate, measured in one run.

Timed in the same process, interleaved in rounds so machine noise hits them alike:

* the generator: verified AVTs per second (``TaskGenerator.generate`` on fresh seeds, the
  env's default config - train domains, m in 0..3; every reading executed or its result
  known from the database's result cache; the database pool already built), on the env's
  fast record path (``validate=False``) and on the validated path ``ambitab-gym generate``
  writes; the cold figure (pool built on the way) is reported apart;
* the floor: a bare ``sqlite3`` execution of the same 2^m reference queries per task (the
  accepted tasks of the round, on the same in-memory databases, results fetched, nothing
  else) - what verifying by execution costs at the least;
* ``AmbiTab-Bird-v0`` (the bundled corpus, nothing generated): steps and episodes per second
  under a driver that asks the canonical question about each term, one unmatched question,
  then stops (about m + 2 steps an episode);
* ``AmbiTab-Procedural-v0`` under the same driver: a fresh task at every reset, so its episode
  rate includes generation.

Then ``--workers`` processes generate at once (each its own generator and pool, built before
the clock starts): the aggregate tasks per elapsed second of a vector env whose subprocess
workers each generate their own tasks (bounded by the free cores).

Rates are per CPU-second of the process by default (``--clock cpu``: everything timed is
single-threaded, so this is the rate on an idle core, and other jobs on a shared machine do
not skew one figure against another); ``--clock wall`` times elapsed seconds.

Target: generation is never the bottleneck, i.e. tasks/s at least 10x the env's episodes/s
(the env's step rate per task). ``ratio`` = tasks/s / Bird episodes/s; ``floor_ratio`` the same
for the bare-SQL floor; ``generation_share`` = the share of a procedural episode's time spent
generating its task.

    python benchmarks/generate.py [--tasks 2000] [--steps 20000] [--rounds 3] [--workers 2]
        [--clock cpu|wall]

The last line is JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import sqlite3
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.actions import STOP
from ambitab_gym.generate import TaskGenerator
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
    holding thousands of tasks would slow the run down with garbage-collector passes."""
    queries = []
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per round")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="0 skips the multi-process run")
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu (default): rates per CPU-second of this process, unaffected by other jobs on "
        "a shared machine (the code is single-threaded); wall: per elapsed second",
    )
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    cold_generator = TaskGenerator(validate=False, domains="train")
    start = clock()
    cold_tasks = 500
    for seed in range(cold_tasks):
        cold_generator.generate(10**9 + seed)
    cold = cold_tasks / (clock() - start)

    # what AmbiTab-Procedural-v0 draws by default: the train domains, the fast record path
    fast = TaskGenerator(validate=False, domains="train")
    # its own pool: the result caches of a pool warm up as it generates, so sharing one would
    # favour whichever generator runs second
    validated = TaskGenerator(validate=True, domains="train")
    copies = {}  # the floor runs on its own copies of the databases: no result caches
    for domain in fast.config.domains:  # build the database pool first
        for index in range(fast.config.databases_per_domain):
            db = fast.database(domain, index)
            validated.database(domain, index)
            copies[db.name] = sqlite3.connect(":memory:")
            db.connection.backup(copies[db.name])
    bird = gym.make("AmbiTab-Bird-v0")
    procedural = gym.make("AmbiTab-Procedural-v0")
    run_env(bird, 2_000, 0, clock)  # warm up: compile matchers, build databases
    run_env(procedural, 2_000, 0, clock)
    gen, gen_valid, floor, bird_steps, bird_eps, proc_steps, proc_eps = ([] for _ in range(7))
    for round_ in range(args.rounds):
        rate, queries = run_generator(fast, args.tasks, round_ * args.tasks, clock)
        gen.append(rate)
        floor.append(run_floor(queries, copies, clock))
        seeds = 10**6 + round_ * args.tasks  # fresh seeds: no cached results
        gen_valid.append(run_generator(validated, args.tasks, seeds, clock)[0])
        s, e = run_env(bird, args.steps, round_, clock)
        bird_steps.append(s)
        bird_eps.append(e)
        s, e = run_env(procedural, args.steps, round_, clock)
        proc_steps.append(s)
        proc_eps.append(e)
    tasks_per_s = statistics.median(gen)
    floor_per_s = statistics.median(floor)
    bird_eps_per_s = statistics.median(bird_eps)
    proc_eps_per_s = statistics.median(proc_eps)
    aggregate = run_workers(args.workers, args.tasks // 2) if args.workers > 0 else None
    result = {
        "benchmark": "generate",
        "tasks_per_s": round(tasks_per_s, 1),
        "tasks_per_s_validated": round(statistics.median(gen_valid), 1),
        "tasks_per_s_cold": round(cold, 1),
        "floor_tasks_per_s": round(floor_per_s, 1),
        "share_of_floor": round(tasks_per_s / floor_per_s, 3),
        "workers": args.workers,
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
        "target_ratio": 10,
        "meets_target": tasks_per_s >= 10 * bird_eps_per_s,
        "rounds": args.rounds,
        "clock": args.clock,
    }
    print(
        f"generator: {tasks_per_s:,.0f} tasks/s (validated {result['tasks_per_s_validated']:,.0f};"
        f" cold, pool included: {cold:,.0f}; bare-SQL floor {floor_per_s:,.0f}; "
        f"{args.workers} workers: {result['tasks_per_s_workers']}); "
        f"Bird env: {result['bird_steps_per_s']:,.0f} steps/s = {bird_eps_per_s:,.0f} "
        f"episodes/s; procedural env: {result['procedural_steps_per_s']:,.0f} steps/s = "
        f"{proc_eps_per_s:,.0f} episodes/s; tasks/s / Bird episodes/s = {result['ratio']} "
        f"(floor {result['floor_ratio']})"
    )
    print(json.dumps(result))


def run(small: bool = True) -> dict:
    """The ``benchmarks/all.py`` entry: :func:`main` with a small size (``small``) or its
    defaults, its last JSON line read back; ``{metric: {"ratio", "target", "better"}}``."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        main(["--tasks", "200", "--steps", "5000", "--rounds", "1", "--workers", "0"] if small else [])
    result = json.loads(output.getvalue().strip().splitlines()[-1])
    return {
        "generate: generated tasks/s over AmbiTab-Bird-v0 episodes/s (CPU time)": {
            "ratio": result["ratio"],
            "target": result["target_ratio"],
            "better": "higher",
        }
    }


if __name__ == "__main__":
    main()
