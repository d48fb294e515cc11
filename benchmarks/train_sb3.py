"""Train a question-asking policy with stable-baselines3 PPO and evaluate it on held-out records.

PPO with :class:`~ambitab_gym.integrations.sb3.MenuPolicy` learns on the Bird sample's ``train``
split (question-F1 reward, deterministic oracle) through the ``QuestionMenu`` wrapper, then
asks on the ``dev`` split, whose databases it never saw. Reported per training seed and as
means: F1, precision and recall of the trained policy (greedy), of the same network before
training, and of a policy that picks uniformly among the menu's valid slots. The scores are
those of ``ambitab-gym evaluate`` (:func:`ambitab_gym.metrics.macro_means`, paper C.3): F1 is
the mean of episode-level question-F1 (eq. 2) over ambiguity-bearing episodes, precision is
over episodes that asked. The last line is JSON.

    python benchmarks/train_sb3.py [--steps 20000] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import time

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

from ambitab_gym.integrations.sb3 import (
    MenuPolicy,
    evaluate_menu_policy,
    make_menu_env,
    random_menu_policy,
)


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(statistics.fmean(kept), 4) if kept else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="AmbiTab-Bird-v0")
    parser.add_argument("--train-split", default="train")
    parser.add_argument("--eval-split", default="dev")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--n-envs", type=int, default=4)
    parser.add_argument("--random-seeds", type=int, default=10)
    # The networks are tiny: one thread per process is fastest (and fair on a shared machine).
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    heldout = make_menu_env(args.env_id, env_kwargs={"split": args.eval_split})
    train_eval = make_menu_env(args.env_id, env_kwargs={"split": args.train_split})
    heldout_records = len(heldout.unwrapped.records)
    train_records = len(train_eval.unwrapped.records)
    train_dbs = {r.spec.database for r in train_eval.unwrapped.records}
    heldout_dbs = {r.spec.database for r in heldout.unwrapped.records}

    random_runs = [
        evaluate_menu_policy(random_menu_policy(seed), heldout)[0]
        for seed in range(args.random_seeds)
    ]
    runs = []
    start = time.perf_counter()
    for seed in args.seeds:
        venv = make_vec_env(
            lambda: make_menu_env(args.env_id, env_kwargs={"split": args.train_split}),
            n_envs=args.n_envs,
            seed=seed,
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
        untrained, _ = evaluate_menu_policy(model, heldout)
        tick = time.perf_counter()
        model.learn(args.steps)
        train_s = time.perf_counter() - tick
        trained, _ = evaluate_menu_policy(model, heldout)
        on_train, _ = evaluate_menu_policy(model, train_eval)
        venv.close()
        run = {
            "seed": seed,
            "train_s": round(train_s, 1),
            "trained": trained,
            "untrained": untrained,
            "trained_on_train_split": on_train,
        }
        runs.append(run)
        print(
            f"seed {seed}: trained F1 {trained['f1']:.3f} (P {trained['precision']:.3f}, "
            f"R {trained['recall']:.3f}), untrained F1 {untrained['f1']:.3f}, "
            f"train-split F1 {on_train['f1']:.3f}, {train_s:.0f} s"
        )
    result = {
        "benchmark": "train_sb3",
        "env_id": args.env_id,
        "algorithm": "PPO+MenuPolicy",
        "steps_per_seed": args.steps,
        "seeds": args.seeds,
        "train_split": args.train_split,
        "eval_split": args.eval_split,
        "train_records": train_records,
        "heldout_records": heldout_records,
        "databases_shared": sorted(train_dbs & heldout_dbs),
        "trained_f1": _mean([r["trained"]["f1"] for r in runs]),
        "trained_precision": _mean([r["trained"]["precision"] for r in runs]),
        "trained_recall": _mean([r["trained"]["recall"] for r in runs]),
        "trained_questions": _mean([r["trained"]["questions"] for r in runs]),
        "trained_f1_by_seed": [r["trained"]["f1"] for r in runs],
        "untrained_f1": _mean([r["untrained"]["f1"] for r in runs]),
        "untrained_precision": _mean([r["untrained"]["precision"] for r in runs]),
        "untrained_recall": _mean([r["untrained"]["recall"] for r in runs]),
        "random_f1": _mean([r["f1"] for r in random_runs]),
        "random_precision": _mean([r["precision"] for r in random_runs]),
        "random_recall": _mean([r["recall"] for r in random_runs]),
        "train_split_f1": _mean([r["trained_on_train_split"]["f1"] for r in runs]),
        "wall_s": round(time.perf_counter() - start, 1),
        "threads": args.threads,
    }
    result["trained_beats_random"] = bool(
        all(r["trained"]["f1"] > result["random_f1"] for r in runs)
    )
    print(json.dumps(result))


def run(small: bool = True) -> dict:
    """The ``benchmarks/all.py`` entry: :func:`main` with a small size (``small``) or its
    defaults, its last JSON line read back; ``{metric: {"ratio", "target", "better"}}``."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        main(["--steps", "2048", "--seeds", "0", "--random-seeds", "2"] if small else [])
    result = json.loads(output.getvalue().strip().splitlines()[-1])
    trained, random = result["trained_f1"], result["random_f1"]
    return {
        "train_sb3: held-out F1 of the trained policy over random": {
            "ratio": round(trained / random, 3) if trained is not None and random else None,
            "target": 1.0,
            "better": "higher",
        }
    }


if __name__ == "__main__":
    main()
