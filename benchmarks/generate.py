"""Task generation rate next to the env's step rate, measured in one run.

Three things are timed in the same process, interleaved in rounds so machine noise hits them
alike:

* the generator: verified AVTs per second (``TaskGenerator.generate`` on fresh seeds; every
  reading executed; the database pool already built - the cold figure, pool included, is
  reported apart);
* ``AmbiTab-Bird-v0`` (the bundled corpus, nothing generated): steps and episodes per second
  under a driver that asks the canonical question about each term, one unmatched question,
  then stops (about m + 2 steps an episode);
* ``AmbiTab-Procedural-v0`` under the same driver: a fresh task at every reset, so its episode
  rate includes generation.

Target: generation is never the bottleneck, i.e. tasks/s at least 10x the env's episodes/s
(the env's step rate per task). ``ratio`` = tasks/s / Bird episodes/s; ``generation_share`` =
the share of a procedural episode's time spent generating its task.

    python benchmarks/generate.py [--tasks 2000] [--steps 20000] [--rounds 3]

The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import gymnasium as gym

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.actions import STOP
from ambitab_gym.generate import TaskGenerator
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


def run_generator(generator: TaskGenerator, tasks: int, first_seed: int) -> float:
    start = time.perf_counter()
    for seed in range(first_seed, first_seed + tasks):
        generator.generate(seed)
    return tasks / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per round")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    cold_generator = TaskGenerator()
    start = time.perf_counter()
    cold_tasks = 500
    for seed in range(cold_tasks):
        cold_generator.generate(10**9 + seed)
    cold = cold_tasks / (time.perf_counter() - start)

    generator = TaskGenerator()
    for domain in generator.config.domains:  # build the database pool first
        for index in range(generator.config.databases_per_domain):
            generator.database(domain, index)
    bird = gym.make("AmbiTab-Bird-v0")
    procedural = gym.make("AmbiTab-Procedural-v0")
    run_env(bird, 2_000, 0)  # warm up: compile matchers, build databases
    run_env(procedural, 2_000, 0)
    gen, bird_steps, bird_eps, proc_steps, proc_eps = [], [], [], [], []
    for round_ in range(args.rounds):
        gen.append(run_generator(generator, args.tasks, round_ * args.tasks))
        s, e = run_env(bird, args.steps, round_)
        bird_steps.append(s)
        bird_eps.append(e)
        s, e = run_env(procedural, args.steps, round_)
        proc_steps.append(s)
        proc_eps.append(e)
    tasks_per_s = statistics.median(gen)
    bird_eps_per_s = statistics.median(bird_eps)
    proc_eps_per_s = statistics.median(proc_eps)
    result = {
        "benchmark": "generate",
        "tasks_per_s": round(tasks_per_s, 1),
        "tasks_per_s_cold": round(cold, 1),
        "bird_steps_per_s": round(statistics.median(bird_steps), 1),
        "bird_episodes_per_s": round(bird_eps_per_s, 1),
        "bird_steps_per_episode": round(statistics.median(bird_steps) / bird_eps_per_s, 2),
        "procedural_steps_per_s": round(statistics.median(proc_steps), 1),
        "procedural_episodes_per_s": round(proc_eps_per_s, 1),
        "ratio": round(tasks_per_s / bird_eps_per_s, 3),
        "ratio_to_steps": round(tasks_per_s / statistics.median(bird_steps), 3),
        "generation_share": round(proc_eps_per_s / tasks_per_s, 3),
        "target_ratio": 10,
        "meets_target": tasks_per_s >= 10 * bird_eps_per_s,
        "rounds": args.rounds,
    }
    print(
        f"generator: {tasks_per_s:,.0f} tasks/s (cold, pool included: {cold:,.0f}); "
        f"Bird env: {result['bird_steps_per_s']:,.0f} steps/s = {bird_eps_per_s:,.0f} "
        f"episodes/s; procedural env: {result['procedural_steps_per_s']:,.0f} steps/s = "
        f"{proc_eps_per_s:,.0f} episodes/s; tasks/s / Bird episodes/s = {result['ratio']}"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
