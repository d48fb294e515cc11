"""Task generation rate next to the env's step rate, measured in one run.

Timed in the same process, interleaved in rounds so machine noise hits them alike:

* the generator: verified AVTs per second (``TaskGenerator.generate`` on fresh seeds; every
  reading executed; the database pool already built), on the env's fast record path
  (``validate=False``) and on the validated path ``ambitab-gym generate`` writes; the cold
  figure (pool built on the way) is reported apart;
* the floor: a bare ``sqlite3`` execution of the same 2^m reference queries per task (the
  accepted tasks of the round, on the same in-memory databases, results fetched, nothing
  else) - what verifying by execution costs at the least;
* ``AmbiTab-Bird-v0`` (the bundled corpus, nothing generated): steps and episodes per second
  under a driver that asks the canonical question about each term, one unmatched question,
  then stops (about m + 2 steps an episode);
* ``AmbiTab-Procedural-v0`` under the same driver: a fresh task at every reset, so its episode
  rate includes generation.

Then ``--workers`` processes generate at once (each its own generator and pool, built before
the clock starts): the aggregate tasks/s of a vector env whose subprocess workers each
generate their own tasks.

Target: generation is never the bottleneck, i.e. tasks/s at least 10x the env's episodes/s
(the env's step rate per task). ``ratio`` = tasks/s / Bird episodes/s; ``floor_ratio`` the same
for the bare-SQL floor; ``generation_share`` = the share of a procedural episode's time spent
generating its task.

    python benchmarks/generate.py [--tasks 2000] [--steps 20000] [--rounds 3] [--workers 2]

The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sqlite3
import statistics
import time
from typing import Any

import gymnasium as gym

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.actions import STOP
from ambitab_gym.generate import GeneratedTask, TaskGenerator
from ambitab_gym.oracles import canonical_question
from ambitab_gym.policies.scripted import distinct_terms


def run_env(env, steps: int, seed: int) -> tuple[float, float]:
    """(steps/s, episodes/s) under the canonical-question driver."""
    env.reset(seed=seed)
    inner = env.unwrapped
    queue = [canonical_question(t) for t in distinct_terms(inner.record)] + ["Please elaborate."]
    episodes = 0
    start = time.perf_counter()
    for _ in range(steps):
        action = queue.pop(0) if queue else STOP
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            episodes += 1
            env.reset()
            queue = [canonical_question(t) for t in distinct_terms(inner.record)]
            queue.append("Please elaborate.")
    elapsed = time.perf_counter() - start
    return steps / elapsed, episodes / elapsed


def run_generator(
    generator: TaskGenerator, tasks: int, first_seed: int
) -> tuple[float, list[GeneratedTask]]:
    """(tasks/s, the tasks)."""
    start = time.perf_counter()
    out = [generator.generate(seed) for seed in range(first_seed, first_seed + tasks)]
    return tasks / (time.perf_counter() - start), out


def run_floor(tasks: list[GeneratedTask], copies: dict[str, sqlite3.Connection]) -> float:
    """Tasks/s of a bare execution of each task's 2^m reference queries (results fetched)."""
    queries = [
        (copies[t.database.name], [r.verification.reference_sql for r in t.records]) for t in tasks
    ]
    start = time.perf_counter()
    for connection, sqls in queries:
        for sql in sqls:
            connection.execute(sql).fetchall()
    return len(tasks) / (time.perf_counter() - start)


def _worker(args: tuple[int, int, int, Any]) -> tuple[int, float]:
    index, tasks, first_seed, barrier = args
    generator = TaskGenerator(validate=False)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per round")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="0 skips the multi-process run")
    args = parser.parse_args()

    cold_generator = TaskGenerator(validate=False)
    start = time.perf_counter()
    cold_tasks = 500
    for seed in range(cold_tasks):
        cold_generator.generate(10**9 + seed)
    cold = cold_tasks / (time.perf_counter() - start)

    fast = TaskGenerator(validate=False)
    validated = TaskGenerator(validate=True, pool=fast.pool)
    copies = {}  # the floor runs on its own copies of the databases: no result caches
    for domain in fast.config.domains:  # build the database pool first
        for index in range(fast.config.databases_per_domain):
            db = fast.database(domain, index)
            copies[db.name] = sqlite3.connect(":memory:")
            db.connection.backup(copies[db.name])
    bird = gym.make("AmbiTab-Bird-v0")
    procedural = gym.make("AmbiTab-Procedural-v0")
    run_env(bird, 2_000, 0)  # warm up: compile matchers, build databases
    run_env(procedural, 2_000, 0)
    gen, gen_valid, floor, bird_steps, bird_eps, proc_steps, proc_eps = ([] for _ in range(7))
    for round_ in range(args.rounds):
        rate, tasks = run_generator(fast, args.tasks, round_ * args.tasks)
        gen.append(rate)
        floor.append(run_floor(tasks, copies))
        seeds = 10**6 + round_ * args.tasks  # fresh seeds: no cached results
        gen_valid.append(run_generator(validated, args.tasks, seeds)[0])
        s, e = run_env(bird, args.steps, round_)
        bird_steps.append(s)
        bird_eps.append(e)
        s, e = run_env(procedural, args.steps, round_)
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


if __name__ == "__main__":
    main()
