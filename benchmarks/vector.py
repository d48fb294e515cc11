"""Throughput of Gymnasium vector envs over an AmbiTab env (text actions, text observations).

Prints steps per second (env steps, summed over the sub-envs) for 1, 2 and 4 envs, with
``SyncVectorEnv`` and ``AsyncVectorEnv`` (shared memory off: text spaces have no shared-memory
layout), for the plain env and for the ``QuestionMenu`` wrapper. The last line is JSON.

    python benchmarks/vector.py [--env-id AmbiTab-Bird-v0] [--seconds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import gymnasium as gym
import numpy as np

import ambitab_gym
from ambitab_gym.wrappers import QuestionMenu

ACTIONS = ('What do you mean by "top"?', "Please elaborate.", "Which year?", ambitab_gym.STOP)


def measure(env_id: str, num_envs: int, mode: str, menu: bool, seconds: float) -> float:
    """Env steps per second of one vector env, run for about ``seconds``."""
    kwargs = {"shared_memory": False} if mode == "async" else {}
    wrappers = [QuestionMenu] if menu else None
    envs = gym.make_vec(
        env_id, num_envs=num_envs, vectorization_mode=mode, vector_kwargs=kwargs, wrappers=wrappers
    )
    rng = np.random.default_rng(0)
    try:
        envs.reset(seed=0)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            if menu:
                actions = rng.integers(0, 8, size=num_envs)
            else:
                actions = tuple(ACTIONS[int(i)] for i in rng.integers(0, 4, size=num_envs))
            envs.step(actions)
            steps += num_envs
        return steps / (time.perf_counter() - start)
    finally:
        envs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="AmbiTab-Bird-v0")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    for menu in (False, True):
        for mode in ("sync", "async"):
            key = f"{mode}{'_menu' if menu else ''}"
            results[key] = {}
            for n in (1, 2, 4):
                rate = measure(args.env_id, n, mode, menu, args.seconds)
                results[key][str(n)] = round(rate, 1)
                print(f"{key:11s} envs={n}: {rate:9.1f} steps/s")
    print(
        json.dumps(
            {
                "benchmark": "vector",
                "env_id": args.env_id,
                "cpu_count": os.cpu_count(),
                "steps_per_s": results,
            }
        )
    )


def run(small: bool = True) -> dict:
    """The ``benchmarks/all.py`` entry: what a ``SyncVectorEnv`` keeps of the per-env step rate
    as envs are added (steps/s with 4 envs over steps/s with 1; target at least 0.8)."""
    seconds = 0.5 if small else 2.0
    one = measure("AmbiTab-Bird-v0", 1, "sync", False, seconds)
    four = measure("AmbiTab-Bird-v0", 4, "sync", False, seconds)
    return {
        "vector: SyncVectorEnv steps/s with 4 envs over 1 env": {
            "ratio": round(four / one, 3),
            "target": 0.8,
            "better": "higher",
        }
    }


if __name__ == "__main__":
    main()
