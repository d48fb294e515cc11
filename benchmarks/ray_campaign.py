"""Episodes/s of an LLM-bound campaign: local vs Ray with 1 and 2 workers, on this machine.

The campaign of ``benchmarks/llm_throughput.py`` (LLM asker, LLM oracle, LLM solver; the
evaluated-asker condition) against its loopback scripted server (own process, every reply after
``--latency`` seconds), run four times side by side into fresh results files:

* ``local`` - this process, ``--concurrency`` episodes in flight;
* ``local_2x`` - this process, twice that (what two workers have in flight together);
* ``ray_1`` - one Ray worker with ``--concurrency`` episodes in flight;
* ``ray_2`` - two Ray workers with ``--concurrency`` each.

Ray starts locally (``ray.init(num_cpus=2)``); each executor's workers are started and warmed up
(imports, plan loading) on a small campaign first, so the timed runs measure steady-state
throughput - on a cluster, workers start once per campaign. ``ideal`` is workers x concurrency /
(calls per episode x latency): every slot always waiting on exactly one call.

    python benchmarks/ray_campaign.py [--concurrency 16] [--latency 0.1] [--seeds 4]

Last line (JSON): per run episodes, wall_s, episodes_per_s, ideal_episodes_per_s, ratio
(achieved / ideal); and ray_1_over_local, ray_2_over_local, ray_2_over_local_2x.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import ray
from llm_throughput import scripted_rules

from ambitab_gym.evaluation import CampaignConfig, run_campaign
from ambitab_gym.evaluation.ray_executor import RayExecutor
from ambitab_gym.llm import LLMClient
from ambitab_gym.testing.llm_server import ScriptedServer


def _config(
    env_id: str, client: LLMClient, seeds: tuple[int, ...], limit: int | None = None
) -> CampaignConfig:
    return CampaignConfig(
        env_id,
        llm={"sampling": client.sampling.to_dict()},
        asker="llm:checklist-ledger",
        solver="llm",
        oracle="llm",
        conditions=("asker",),
        seeds=seeds,
        limit=limit,
    )


def _timed(config, path, client, concurrency, executor=None) -> tuple[float, int]:
    start = time.perf_counter()
    summary = run_campaign(
        config,
        path,
        concurrency=concurrency,
        llm_client=client,
        progress=False,
        executor=executor,
    )
    return time.perf_counter() - start, summary.episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="AmbiTab-Bird-v0")
    parser.add_argument("--concurrency", type=int, default=16, help="episodes in flight each")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per call (L)")
    parser.add_argument("--seeds", type=int, default=4, help="seeds x records = episodes")
    parser.add_argument("--questions", type=int, default=2, help="questions per episode")
    args = parser.parse_args()
    c = args.concurrency
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rules = scripted_rules(args.questions)
    runs: dict[str, dict] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedServer(
            rules, latency_s=args.latency, process=True, record_requests=False
        ) as server,
        LLMClient(server.url, "scripted", concurrency=2 * c, timeout_s=60) as client,
    ):
        folder = Path(tmp)
        setups = {
            "local": (c, None, 1),
            "local_2x": (2 * c, None, 1),
            "ray_1": (c, RayExecutor(workers=1), 1),
            "ray_2": (c, RayExecutor(workers=2), 2),
        }
        for name, (concurrency, executor, workers) in setups.items():
            # warm-up: imports, databases, worker processes (seed 10_000: another campaign)
            warm = _config(args.env, client, (10_000 + len(runs),), limit=2 * c)
            _timed(warm, folder / f"{name}-warm.duckdb", client, concurrency, executor)
            before = server.stats()["requests"]
            config = _config(args.env, client, tuple(range(args.seeds)))
            wall, episodes = _timed(
                config, folder / f"{name}.duckdb", client, concurrency, executor
            )
            calls = server.stats()["requests"] - before
            per_episode = calls / episodes
            ideal = workers * concurrency / (per_episode * args.latency)
            runs[name] = {
                "in_flight": workers * concurrency,
                "episodes": episodes,
                "calls_per_episode": round(per_episode, 3),
                "wall_s": round(wall, 3),
                "episodes_per_s": round(episodes / wall, 2),
                "ideal_episodes_per_s": round(ideal, 2),
                "ratio": round(episodes / wall / ideal, 3),
            }
            if executor is not None:
                executor.close()
            print(
                f"{name:>9}: {runs[name]['in_flight']:>3} in flight, {episodes} episodes in "
                f"{wall:.2f} s = {episodes / wall:.1f} episodes/s (ideal {ideal:.1f}, "
                f"ratio {runs[name]['ratio']:.2f})",
                file=sys.stderr,
            )
    ray.shutdown()

    def over(a: str, b: str) -> float:
        return round(runs[a]["episodes_per_s"] / runs[b]["episodes_per_s"], 3)

    print(
        json.dumps(
            {
                "env": args.env,
                "concurrency": c,
                "latency_s": args.latency,
                "runs": runs,
                "ray_1_over_local": over("ray_1", "local"),
                "ray_2_over_local": over("ray_2", "local"),
                "ray_2_over_local_2x": over("ray_2", "local_2x"),
            }
        )
    )


if __name__ == "__main__":
    main()
