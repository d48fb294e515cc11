"""Env step throughput: AmbiTab (deterministic oracle) against CartPole-v1, side by side.

Both envs are made with ``gym.make`` (so both carry Gymnasium's default wrappers) and stepped in
the same process, interleaved in rounds so machine noise hits both alike. AmbiTab steps ask
questions that the oracle must match (a mix of productive, repeated and unmatched questions) and
reset when an episode ends, like CartPole.

    python benchmarks/env_step.py [--steps 100000] [--rounds 5] [--env AmbiTab-Bird-v0]

Last line: ``{"ambitab_steps_per_s": ..., "cartpole_steps_per_s": ..., "ratio": ...}`` where
ratio = CartPole steps/s divided by AmbiTab steps/s (target: <= 5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import gymnasium as gym

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.oracles import canonical_question


def _ambitab_actions(env) -> list[str]:
    terms = sorted({a.term for r in env.unwrapped.records for a in r.ambiguities})
    actions = []
    for term in terms[:20]:
        actions += [canonical_question(term), f"Which {term}?", "Please elaborate."]
    return actions


def run(env, actions, steps: int) -> float:
    env.reset(seed=0)
    n_actions = len(actions)
    start = time.perf_counter()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(actions[i % n_actions])
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--env", default="AmbiTab-Bird-v0")
    args = parser.parse_args()

    ambitab = gym.make(args.env)
    cartpole = gym.make("CartPole-v1")
    ambitab_actions = _ambitab_actions(ambitab)
    run(ambitab, ambitab_actions, 2_000)  # warm up: compile matchers, build databases
    run(cartpole, [0, 1], 2_000)
    ours, theirs = [], []
    for _ in range(args.rounds):
        theirs.append(run(cartpole, [0, 1], args.steps))
        ours.append(run(ambitab, ambitab_actions, args.steps))
    ambitab_rate, cartpole_rate = statistics.median(ours), statistics.median(theirs)
    print(
        f"{args.env}: {ambitab_rate:,.0f} steps/s   CartPole-v1: {cartpole_rate:,.0f} steps/s "
        f"(median of {args.rounds} rounds of {args.steps} steps)"
    )
    print(
        json.dumps(
            {
                "ambitab_steps_per_s": round(ambitab_rate, 1),
                "cartpole_steps_per_s": round(cartpole_rate, 1),
                "ratio": round(cartpole_rate / ambitab_rate, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
