"""Env step throughput: AmbiTab (deterministic oracle) against CartPole-v1, side by side.

Both envs are made with ``gym.make`` (so both carry Gymnasium's default wrappers) and stepped in
the same process, interleaved in rounds so machine noise hits both alike. AmbiTab steps ask
questions that the oracle must match (a mix of productive, repeated and unmatched questions) and
reset when an episode ends, like CartPole.

Each round times both envs by process CPU time (other processes on a busy machine barely move
it) and by wall time; the ratio of a round is CartPole's steps/s over AmbiTab's, and the reported
ratio is the median over rounds (target: <= 1.5).

    python benchmarks/env_step.py [--steps 50000] [--rounds 5] [--env AmbiTab-Bird-v0]

Last line: ``{"ambitab_steps_per_s": ..., "cartpole_steps_per_s": ..., "ratio": ...,
"wall_ratio": ..., "target": 1.5}`` (steps/s by CPU time; ``wall_ratio`` by wall time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import gymnasium as gym

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.oracles import canonical_question

TARGET = 1.5


def _ambitab_actions(env) -> list[str]:
    terms = sorted({a.term for r in env.unwrapped.records for a in r.ambiguities})
    actions = []
    for term in terms[:20]:
        actions += [canonical_question(term), f"Which {term}?", "Please elaborate."]
    return actions


def rates(env, actions, steps: int) -> tuple[float, float]:
    """Steps per second of ``steps`` steps (resetting at episode ends): (by CPU, by wall)."""
    env.reset(seed=0)
    n_actions = len(actions)
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(actions[i % n_actions])
        if terminated or truncated:
            env.reset()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return steps / max(cpu, 1e-9), steps / wall


def measure(env_id: str = "AmbiTab-Bird-v0", steps: int = 50_000, rounds: int = 5) -> dict:
    """Interleaved rounds of both envs; the median per-round ratios and rates."""
    ambitab = gym.make(env_id)
    cartpole = gym.make("CartPole-v1")
    ambitab_actions = _ambitab_actions(ambitab)
    rates(ambitab, ambitab_actions, 2_000)  # warm up: compile matchers, build databases
    rates(cartpole, [0, 1], 2_000)
    ours, theirs, ratios, wall_ratios = [], [], [], []
    for _ in range(rounds):
        cart_cpu, cart_wall = rates(cartpole, [0, 1], steps)
        amb_cpu, amb_wall = rates(ambitab, ambitab_actions, steps)
        ours.append(amb_cpu)
        theirs.append(cart_cpu)
        ratios.append(cart_cpu / amb_cpu)
        wall_ratios.append(cart_wall / amb_wall)
    ambitab.close()
    cartpole.close()
    return {
        "env": env_id,
        "steps": steps,
        "rounds": rounds,
        "ambitab_steps_per_s": round(statistics.median(ours), 1),
        "cartpole_steps_per_s": round(statistics.median(theirs), 1),
        "ratio": round(statistics.median(ratios), 3),
        "wall_ratio": round(statistics.median(wall_ratios), 3),
        "target": TARGET,
    }


def run(small: bool = True) -> dict:
    """The ``benchmarks/all.py`` entry: ``{metric: {"ratio", "target", "better"}}``."""
    result = measure(steps=20_000 if small else 50_000, rounds=5)
    return {
        "env_step: CartPole-v1 steps/s over AmbiTab-Bird-v0 (CPU time)": {
            "ratio": result["ratio"],
            "target": TARGET,
            "better": "lower",
        }
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--env", default="AmbiTab-Bird-v0")
    args = parser.parse_args()
    result = measure(args.env, args.steps, args.rounds)
    print(
        f"{args.env}: {result['ambitab_steps_per_s']:,.0f} steps/s   CartPole-v1: "
        f"{result['cartpole_steps_per_s']:,.0f} steps/s (CPU time, median of {args.rounds} "
        f"rounds of {args.steps} steps); ratio {result['ratio']:.3f} "
        f"(wall {result['wall_ratio']:.3f}, target <= {TARGET})"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
