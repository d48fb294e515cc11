"""Train a question-menu asker on procedural tasks; compare it with one trained on the bundled
Bird train split and with a random policy, on the bundled Bird dev and AmbiQT records.

PPO with :class:`~ambitab_gym.integrations.sb3.MenuPolicy` (question-F1 reward, deterministic
oracle, ``QuestionMenu``) learns either on ``AmbiTab-Procedural-v0`` (a fresh task every reset,
train domains only) or on ``AmbiTab-Bird-v0`` split ``train``, for the same number of steps and
seeds. Each policy then asks (greedy) on:

* the bundled Bird ``dev`` split (21 records on databases neither policy saw),
* the bundled AmbiQT sample (46 records; it has no dev split, so all of it),
* 200 procedural records of the held-out schema families (sports, flights).

A policy that picks uniformly among the menu's valid slots is the floor. Reported: question-F1
(macro mean of episode-level harmonic means), precision and recall, and PPO's training
throughput on each env, and (procedural) the share of the training time the envs spent
generating tasks (``procedural_generation_share``) and waiting for a task
(``procedural_wait_share``: generating it in process, or blocked on the prefetching workers with
``--prefetch N``, which generate the next tasks in N processes per env while PPO runs - the
share of the training loop's time a task supply costs; target about 0) and
``procedural_wait_share_cpu`` (the training process's CPU time getting tasks over its CPU time:
with prefetching, receiving them; the wait share on a machine with a free core per worker), next to
the training process's garbage-collection seconds and full collections (``procedural_gc_s``,
``procedural_gc_full_collections``: a collection runs inside whatever allocates when it is due,
a reset included, and is counted in the wait then). ``--threads`` (default 1) sets PyTorch's
thread count - the trainer's choice, not the library's: on this 2-core machine one thread
leaves the other core to the prefetching workers. The last line is JSON.

    python benchmarks/train_procedural.py [--steps 20000] [--seeds 0] [--subproc] [--prefetch 1]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from ambitab_gym.generate import DatabasePool, GeneratorConfig
from ambitab_gym.generate.corpus import write_corpus
from ambitab_gym.integrations.sb3 import (
    MenuPolicy,
    evaluate_menu_policy,
    make_menu_env,
    random_menu_policy,
)


class _GcClock:
    """A ``gc.callbacks`` entry: seconds of garbage collection and full collections."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._start
        self.full += info["generation"] == 2


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(statistics.fmean(kept), 4) if kept else None


def _range(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="PPO steps per policy")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--n-envs", type=int, default=4)
    parser.add_argument("--ambiguities", type=_range, default=(0, 3))
    parser.add_argument("--distractors", type=_range, default=(0, 1))
    parser.add_argument("--random-seeds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--sources",
        nargs="+",
        choices=("procedural", "bird_train"),
        default=["procedural", "bird_train"],
        help="which training sources to run",
    )
    parser.add_argument(
        "--subproc",
        action="store_true",
        help="run the training envs in subprocesses (SubprocVecEnv): generation overlaps PPO",
    )
    parser.add_argument(
        "--prefetch",
        type=int,
        default=0,
        help="prefetching worker processes per procedural env (not with --subproc)",
    )
    args = parser.parse_args(argv)
    if args.prefetch and args.subproc:
        parser.error("--prefetch runs the envs in this process: not with --subproc")
    torch.set_num_threads(args.threads)

    procedural_kwargs = {
        "ambiguities": args.ambiguities,
        "distractors": args.distractors,
        "domains": "train",
        "prefetch": args.prefetch,
    }
    heldout_dir = Path(tempfile.mkdtemp(prefix="ambitab-heldout-"))
    write_corpus(
        heldout_dir,
        records=200,
        seed=12345,
        config=GeneratorConfig(ambiguities=args.ambiguities, domains="test"),
        name="heldout",
    )
    evaluations = {
        "bird_dev": make_menu_env("AmbiTab-Bird-v0", env_kwargs={"split": "dev"}),
        "ambiqt_all": make_menu_env("AmbiTab-AmbiQT-v0"),
        "procedural_test_domains": make_menu_env(
            "AmbiTab-AmbiQT-v0", env_kwargs={"corpus": heldout_dir}
        ),
    }
    sources = {
        # the vector env's four envs share one database pool (built once, not four times)
        "procedural": ("AmbiTab-Procedural-v0", {**procedural_kwargs, "pool": DatabasePool()}),
        "bird_train": ("AmbiTab-Bird-v0", {"split": "train"}),
    }

    result: dict = {
        "benchmark": "train_procedural",
        "algorithm": "PPO+MenuPolicy",
        "steps": args.steps,
        "seeds": args.seeds,
        "procedural_options": {
            k: list(v) if isinstance(v, tuple) else v for k, v in procedural_kwargs.items()
        },
        "eval_records": {name: len(env.unwrapped.records) for name, env in evaluations.items()},
    }
    start = time.perf_counter()
    random_scores = {
        name: [
            evaluate_menu_policy(random_menu_policy(s), env)[0] for s in range(args.random_seeds)
        ]
        for name, env in evaluations.items()
    }
    for source, (env_id, kwargs) in sources.items():
        if source not in args.sources:
            continue
        if args.subproc:  # a pool cannot cross processes; each subprocess builds its own
            kwargs = {k: v for k, v in kwargs.items() if k != "pool"}
        runs = []
        for seed in args.seeds:
            venv = make_vec_env(
                lambda env_id=env_id, kwargs=kwargs: make_menu_env(env_id, env_kwargs=kwargs),
                n_envs=args.n_envs,
                seed=seed,
                vec_env_cls=SubprocVecEnv if args.subproc else DummyVecEnv,
            )
            model = PPO(
                MenuPolicy,
                venv,
                n_steps=256,
                batch_size=256,
                n_epochs=4,
                learning_rate=1e-3,
                gamma=1.0,
                ent_coef=0.01,
                seed=seed,
            )
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            children_cpu_s = children.ru_utime + children.ru_stime
            collections = _GcClock()  # the trainer's garbage collections while it learns
            gc.callbacks.append(collections)
            tick, cpu_tick = time.perf_counter(), time.process_time()
            model.learn(args.steps)
            train_s = time.perf_counter() - tick
            train_cpu_s = time.process_time() - cpu_tick  # unaffected by other jobs
            gc.callbacks.remove(collections)
            # seconds the envs spent generating tasks (summed over envs; with --subproc they
            # overlap each other and PPO, so the share is an upper bound of the time lost)
            stats = venv.env_method("generation_stats") if source == "procedural" else []
            generation_s = sum(s["seconds"] for s in stats)
            generation_cpu_s = sum(s["cpu_seconds"] for s in stats)
            # the resets' wait for a task (the envs step one after another in this process)
            wait_s = sum(s["wait_seconds"] for s in stats)
            wait_cpu_s = sum(s["wait_cpu_seconds"] for s in stats)
            venv.close()  # joins the prefetching workers: their CPU time is the children's
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            workers_cpu_s = children.ru_utime + children.ru_stime - children_cpu_s
            scores = {
                name: evaluate_menu_policy(model, env)[0] for name, env in evaluations.items()
            }
            runs.append(
                {
                    "seed": seed,
                    "train_s": train_s,
                    "train_cpu_s": train_cpu_s,
                    "generation_s": generation_s,
                    "generation_cpu_s": generation_cpu_s,
                    "wait_s": wait_s,
                    "wait_cpu_s": wait_cpu_s,
                    "gc_s": collections.seconds,
                    "workers_cpu_s": workers_cpu_s,
                    "gc_full": collections.full,
                    "scores": scores,
                }
            )
            print(
                f"{source} seed {seed}: "
                + ", ".join(f"{n} F1 {s['f1']:.3f}" for n, s in scores.items())
                + f" ({train_s:.0f} s, {args.steps / train_s:.0f} steps/s, "
                f"{generation_s:.1f} s generating, {wait_s:.1f} s waiting for tasks)"
            )
        result[f"{source}_train_steps_per_s"] = round(
            statistics.fmean(args.steps / r["train_s"] for r in runs), 1
        )
        result[f"{source}_train_steps_per_cpu_s"] = round(
            statistics.fmean(args.steps / r["train_cpu_s"] for r in runs), 1
        )
        if source == "procedural":
            # the generator's share of a PPO step: seconds generating / seconds training
            result["procedural_generation_share"] = round(
                statistics.fmean(r["generation_s"] / r["train_s"] for r in runs), 3
            )
            if not args.subproc:  # the envs run in this process: CPU seconds on both sides
                result["procedural_generation_share_cpu"] = round(
                    statistics.fmean(r["generation_cpu_s"] / r["train_cpu_s"] for r in runs), 3
                )
            result["procedural_wait_share"] = round(
                statistics.fmean(r["wait_s"] / r["train_s"] for r in runs), 4
            )
            # the training process's own CPU spent on getting tasks: the wait on a machine
            # with a free core per prefetching worker
            result["procedural_wait_share_cpu"] = round(
                statistics.fmean(r["wait_cpu_s"] / r["train_cpu_s"] for r in runs), 4
            )
            # the training process's garbage collections (wherever they ran; a full one costs
            # about 0.15 s here, and lands in whatever allocated last - a reset included)
            # the prefetching workers' CPU seconds (the envs' lifetime: warm-up, the tasks
            # ahead), next to the training process's
            result["procedural_workers_cpu_s"] = round(
                statistics.fmean(r["workers_cpu_s"] for r in runs), 3
            )
            result["procedural_train_cpu_s"] = round(
                statistics.fmean(r["train_cpu_s"] for r in runs), 3
            )
            result["procedural_gc_s"] = round(statistics.fmean(r["gc_s"] for r in runs), 3)
            result["procedural_gc_full_collections"] = statistics.fmean(
                r["gc_full"] for r in runs
            )
            result["procedural_generation_ms_per_step"] = round(
                statistics.fmean(1000 * r["generation_s"] / args.steps for r in runs), 3
            )
        for name in evaluations:
            for metric in ("f1", "precision", "recall"):
                result[f"{source}_{name}_{metric}"] = _mean(
                    [r["scores"][name][metric] for r in runs]
                )
    for name in evaluations:
        for metric in ("f1", "precision", "recall"):
            result[f"random_{name}_{metric}"] = _mean([s[metric] for s in random_scores[name]])
    result["wall_s"] = round(time.perf_counter() - start, 1)
    result["subproc"] = args.subproc
    for name in evaluations:
        print(
            f"{name}: "
            + ", ".join(f"{s} {result.get(f'{s}_{name}_f1')}" for s in args.sources)
            + f", random {result[f'random_{name}_f1']}"
        )
    print(json.dumps(result))


def run(small: bool = True) -> dict:
    """The ``benchmarks/all.py`` entry: :func:`main` with a small size (``small``) or its
    defaults, its last JSON line read back; ``{metric: {"ratio", "target", "better"}}``."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        main(
            ["--steps", "2048", "--seeds", "0", "--random-seeds", "2", "--prefetch", "1"]
            if small
            else ["--prefetch", "1"]
        )
    result = json.loads(output.getvalue().strip().splitlines()[-1])
    trained, random = result["procedural_bird_dev_f1"], result["random_bird_dev_f1"]
    return {
        "train_procedural: Bird dev F1 of the procedurally trained policy over random": {
            "ratio": round(trained / random, 3) if trained is not None and random else None,
            "target": 1.0,
            "better": "higher",
        },
        "train_procedural: share of PPO training time waiting for a task (prefetch=1)": {
            "ratio": result.get("procedural_wait_share"),
            "target": 0.05,
            "better": "lower",
        },
    }


if __name__ == "__main__":
    main()
