"""Train a clarifying-question asker with stable-baselines3 PPO, save it, evaluate it.

    pip install "ambitab-gym[sb3]"
    python examples/train_sb3_asker.py train --steps 20000 --out asker.zip
    python examples/train_sb3_asker.py evaluate asker.zip --split dev --show 3

``train`` runs PPO with ``MenuPolicy`` on a split (question-F1 reward, deterministic oracle) via
the ``QuestionMenu`` wrapper. ``evaluate`` runs the saved policy once per record of another
split and prints question-F1, precision and recall next to a uniformly random menu policy, and
``--show`` prints a few of its dialogues.
"""

from __future__ import annotations

import argparse
import json

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

from ambitab_gym.integrations.sb3 import (
    MenuPolicy,
    evaluate_menu_policy,
    make_menu_env,
    random_menu_policy,
)


def train(args: argparse.Namespace) -> None:
    venv = make_vec_env(
        lambda: make_menu_env(args.env_id, env_kwargs={"split": args.split}),
        n_envs=4,
        seed=args.seed,
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
        seed=args.seed,
        verbose=1,
    )
    model.learn(args.steps)
    model.save(args.out)
    print(f"saved {args.out}")


def evaluate(args: argparse.Namespace) -> None:
    model = PPO.load(args.model, device="cpu")
    env = make_menu_env(args.env_id, env_kwargs={"split": args.split})
    trained, scores = evaluate_menu_policy(model, env)
    baseline, _ = evaluate_menu_policy(random_menu_policy(args.seed), env)
    for record_id in [s.record_id for s in scores[: args.show]]:
        obs, _ = env.reset(options={"record_id": record_id})
        print(env.unwrapped.public_view.spec.request)
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, info = env.step(int(action))
            done = terminated or truncated
        print(env.unwrapped.public_view.render_dialogue() or "(no question)")
        print(f"-> stop ({info['stop_reason']}), question-F1 {reward:.2f}\n")
    print(json.dumps({"split": args.split, "trained": trained, "random": baseline}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="AmbiTab-Bird-v0")
    parser.add_argument("--seed", type=int, default=0)
    commands = parser.add_subparsers(dest="command", required=True)
    train_cmd = commands.add_parser("train", help="train and save a policy")
    train_cmd.add_argument("--split", default="train")
    train_cmd.add_argument("--steps", type=int, default=20_000)
    train_cmd.add_argument("--out", default="asker.zip")
    eval_cmd = commands.add_parser("evaluate", help="evaluate a saved policy")
    eval_cmd.add_argument("model")
    eval_cmd.add_argument("--split", default="dev")
    eval_cmd.add_argument("--show", type=int, default=0, help="print this many dialogues")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny networks: one thread is fastest
    (train if args.command == "train" else evaluate)(args)


if __name__ == "__main__":
    main()
