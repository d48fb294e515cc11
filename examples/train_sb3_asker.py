"""Train a clarifying-question asker with stable-baselines3 PPO, save it, evaluate it.

    pip install "ambitab-gym[sb3]"
    python examples/train_sb3_asker.py train --steps 20000 --out asker.zip
    python examples/train_sb3_asker.py evaluate asker.zip --split dev --show 3

    # any env id, vector envs, an evaluation on dev every 2,000 steps, CSV/TensorBoard logs
    python examples/train_sb3_asker.py train --env-id AmbiTab-Bird-v0 --seed 1 --n-envs 8 \
        --eval-freq 2000 --log-dir runs/bird-s1 --steps 20000 --out asker.zip
    # MaskablePPO (sb3-contrib) with the menu's action_masks()
    python examples/train_sb3_asker.py train --algo maskable-ppo --steps 20000 --out asker.zip

``train`` runs PPO (or sb3-contrib's MaskablePPO) through the ``QuestionMenu`` wrapper on the
training split (question-F1 reward, deterministic oracle), evaluates on the held-out split with
SB3's ``EvalCallback`` every ``--eval-freq`` steps (the best model is kept), and logs through
SB3's logger to CSV and TensorBoard. ``evaluate`` runs a saved policy once per record of a split
and prints question-F1, precision and recall next to a uniformly random menu policy, and
``--show`` prints a few of its dialogues.

Splits: training uses ``train`` where the corpus has it, else every record (AmbiQT, TACO and
BIRD-Interact samples: ``all``); evaluation uses ``dev``, else ``test`` (Ambrosia), else the
training records themselves, with a warning. ``AmbiTab-Procedural-v0`` trains on its ``train``
domains and evaluates on the held-out ``test`` domains. The run prints its choice and writes it
to ``<log-dir>/run.json``.

Logged AmbiTab metrics come from the agent-visible ``info`` of finished episodes only (never the
privileged keys of ``ambitab_gym.PRIVILEGED_INFO_KEYS``): ``ambitab/question_f1`` (the episode
reward), ``ambitab/questions_asked``, ``ambitab/budget_stop_rate`` and, with a ``--solver``,
``ambitab/success_rate``; the same under ``eval/`` for the held-out evaluation.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
import warnings
import zipfile
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import stable_baselines3
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

import ambitab_gym
from ambitab_gym import registry
from ambitab_gym.corpora import load_corpus
from ambitab_gym.integrations.sb3 import (
    MenuPolicy,
    evaluate_menu_policy,
    make_menu_env,
    maskable_menu_policy,
    random_menu_policy,
)
from ambitab_gym.metrics import macro_means, score_episode
from ambitab_gym.wrappers import agent_view

#: Every registered AmbiTab env id (the corpora and the procedural generator).
ENV_IDS: tuple[str, ...] = tuple(registry.names("env"))
PROCEDURAL = "AmbiTab-Procedural-v0"
ALGOS = ("ppo", "maskable-ppo")
SOLVERS = ("interpretation",)
#: The info keys the metrics read: agent-visible ones only (asserted below).
VISIBLE_METRIC_KEYS = ("questions_asked", "stop_reason", "success")
EVAL_SEED_OFFSET = 10_000  # the eval env's seed is --seed + this (the train envs: --seed + i)
SB3_CONTRIB_HINT = "--algo maskable-ppo needs sb3-contrib: pip install sb3-contrib"

assert not set(VISIBLE_METRIC_KEYS) & set(ambitab_gym.PRIVILEGED_INFO_KEYS)


# -- env ids and splits ------------------------------------------------------------------------


def env_id_arg(text: str) -> str:
    """``--env-id``: a registered AmbiTab id (``ambitab_gym:`` prefix allowed)."""
    env_id = text.removeprefix("ambitab_gym:")
    if env_id not in ENV_IDS:
        raise argparse.ArgumentTypeError(
            f"unknown env id {text!r}; valid ids: {', '.join(ENV_IDS)}"
        )
    return env_id


def corpus_splits(env_id: str) -> list[str]:
    """The splits of the corpus an env id loads (procedural: its domain sets)."""
    if env_id == PROCEDURAL:
        return ["train", "test"]
    return sorted({record.split for record in load_corpus(env_id).records})


def resolve_splits(
    env_id: str, split: str | None, eval_split: str | None
) -> tuple[str, str, str | None]:
    """``(train split, eval split, warning)``: the defaults where not given, each checked."""
    splits = corpus_splits(env_id)
    valid = [*splits, "all"]
    for name in (split, eval_split):
        if name is not None and name not in valid:
            raise ValueError(f"{env_id} has no split {name!r}; valid splits: {valid}")
    train = split or ("train" if "train" in splits else "all")
    if eval_split is None:
        eval_split = next((s for s in ("dev", "test") if s in splits and s != train), train)
    note = None
    if eval_split == train or "all" in (train, eval_split):
        note = (
            f"{env_id}: evaluating on split {eval_split!r} while training on {train!r} "
            f"(the corpus's splits: {splits}); the evaluation is not held out"
        )
    return train, eval_split, note


def env_kwargs(env_id: str, split: str, solver: str | None, pool: Any = None) -> dict[str, Any]:
    """The env's keyword arguments: the split (procedural: ``domains``, and a database pool
    the envs of one process share, so each generated database is built once) and the solver."""
    kwargs: dict[str, Any] = {"domains" if env_id == PROCEDURAL else "split": split}
    if env_id == PROCEDURAL and pool is not None:
        kwargs["pool"] = pool
    if solver is not None:
        if env_id == PROCEDURAL:
            kwargs["solver"] = solver  # the generator's own interpretation solver
        else:
            kwargs["solver"] = registry.create("solver", solver, corpus=load_corpus(env_id))
    return kwargs


def env_factory(args: argparse.Namespace, split: str, pool: Any = None) -> functools.partial:
    """A picklable ``() -> QuestionMenu`` (so ``--subproc`` workers can build it)."""
    return functools.partial(
        make_menu_env,
        args.env_id,
        n_slots=args.n_slots,
        env_kwargs=env_kwargs(args.env_id, split, args.solver, pool),
    )


class CycleRecords(gym.Wrapper):
    """Resets go through the env's records in order (a seeded reset starts over), so that an
    evaluation of ``len(records)`` episodes plays each record once. Evaluation harness only:
    the record ids never reach the observation."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.record_ids = [record.id for record in env.get_wrapper_attr("records")]
        self.position = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self.position = 0
        options = dict(options or {})
        if "record_id" not in options:
            options["record_id"] = self.record_ids[self.position % len(self.record_ids)]
            self.position += 1
        return self.env.reset(seed=seed, options=options)


def _cycled(factory: functools.partial) -> gym.Env:
    return CycleRecords(factory())


# -- metrics -------------------------------------------------------------------------------------


def episode_metrics(info: dict[str, Any]) -> dict[str, float]:
    """AmbiTab metrics of a finished episode from its agent-visible ``info``."""
    metrics: dict[str, float] = {}
    episode = info.get("episode")  # added by SB3's Monitor: the episode's return
    if episode is not None:
        metrics["question_f1"] = float(episode["r"])
    if "questions_asked" in info:
        metrics["questions_asked"] = float(info["questions_asked"])
    if "stop_reason" in info:
        metrics["budget_stop_rate"] = float(info["stop_reason"] == "budget")
    if "success" in info:  # only when a solver wrote SQL (--solver)
        metrics["success_rate"] = float(bool(info["success"]))
    return metrics


class AmbiTabMetrics(BaseCallback):
    """Logs ``ambitab/*``: means over the last ``window`` finished training episodes, written
    with each rollout's ``rollout/*`` row."""

    def __init__(self, window: int = 100) -> None:
        super().__init__()
        self.episodes: deque[dict[str, float]] = deque(maxlen=window)

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
            if done:
                self.episodes.append(episode_metrics(info))
        return True

    def _on_rollout_end(self) -> None:
        for key in sorted({k for episode in self.episodes for k in episode}):
            values = [episode[key] for episode in self.episodes if key in episode]
            self.logger.record(f"ambitab/{key}", float(np.mean(values)))


class _AmbiTabEvalMixin:
    """EvalCallback additions: the same seed for every evaluation (the same records or
    procedural tasks each time), the env's ``success`` as SB3's success rate, and the AmbiTab
    metrics of the evaluation episodes as ``eval/*``."""

    eval_seed: int

    def _on_step(self) -> bool:
        if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
            self.eval_env.seed(self.eval_seed)
        return super()._on_step()

    def _log_success_callback(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        if not locals_["done"]:
            return
        metrics = episode_metrics(locals_["info"])
        if "success_rate" in metrics:
            self._is_success_buffer.append(bool(metrics.pop("success_rate")))
        for key, value in metrics.items():
            self.logger.record_mean(f"eval/{key}", value)


def make_eval_callback(algo: str, eval_seed: int, **kwargs: Any) -> EvalCallback:
    if algo == "maskable-ppo":
        from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback as base
    else:
        base = EvalCallback
    callback_class = type("AmbiTabEvalCallback", (_AmbiTabEvalMixin, base), {})
    callback = callback_class(**kwargs)
    callback.eval_seed = eval_seed
    return callback


# -- models --------------------------------------------------------------------------------------


def _has_sb3_contrib() -> bool:
    try:
        return importlib.util.find_spec("sb3_contrib") is not None
    except ValueError:  # None in sys.modules: the import is blocked
        return False


def _import_maskable_ppo() -> Any:
    try:
        from sb3_contrib import MaskablePPO
    except ImportError:
        raise SystemExit(SB3_CONTRIB_HINT) from None
    return MaskablePPO


def make_model(args: argparse.Namespace, venv: Any) -> Any:
    if args.algo == "maskable-ppo":
        algo_class = _import_maskable_ppo()
        policy = maskable_menu_policy() if args.policy == "menu" else "MlpPolicy"
    else:
        algo_class = PPO
        policy = MenuPolicy if args.policy == "menu" else "MlpPolicy"
    rollout = args.n_steps * args.n_envs
    return algo_class(
        policy,
        venv,
        n_steps=args.n_steps,
        batch_size=args.batch_size or min(256, rollout),
        n_epochs=args.n_epochs,
        learning_rate=args.learning_rate,
        gamma=1.0,
        ent_coef=0.01,
        seed=args.seed,
        device="cpu",
        verbose=args.verbose,
    )


def make_logger(log_dir: Path, verbose: int) -> tuple[Any, bool]:
    """SB3's logger to CSV (``progress.csv``) and, when the package is there, TensorBoard."""
    formats = ["csv"] + (["stdout"] if verbose else [])
    tensorboard = importlib.util.find_spec("tensorboard") is not None
    if tensorboard:
        formats.append("tensorboard")
    else:
        print(
            "tensorboard is not installed: logging to CSV only (pip install tensorboard)",
            file=sys.stderr,
        )
    return configure(str(log_dir), formats), tensorboard


# -- commands ------------------------------------------------------------------------------------


def train(args: argparse.Namespace, callbacks: Sequence[BaseCallback] = ()) -> Any:
    """Train, evaluate on the held-out split, log, save; returns the model."""
    train_split, eval_split, note = resolve_splits(args.env_id, args.split, args.eval_split)
    if note:
        warnings.warn(note, stacklevel=1)
    print(f"{args.env_id}: training on split {train_split!r}, evaluating on {eval_split!r}")
    log_dir = Path(args.log_dir or f"runs/{args.env_id}_{args.algo}_seed{args.seed}")
    log_dir.mkdir(parents=True, exist_ok=True)
    if args.algo == "maskable-ppo":
        _import_maskable_ppo()  # fail before building anything

    pool = None
    if args.env_id == PROCEDURAL:
        from ambitab_gym.generate import DatabasePool

        pool = DatabasePool()
    venv = make_vec_env(
        env_factory(args, train_split, pool),
        n_envs=args.n_envs,
        seed=args.seed,
        vec_env_cls=SubprocVecEnv if args.subproc else DummyVecEnv,
    )
    eval_factory = env_factory(args, eval_split, pool)
    if args.env_id == PROCEDURAL:
        eval_env = make_vec_env(eval_factory, n_envs=1)
        n_eval = args.eval_episodes or 50
    else:
        eval_env = make_vec_env(functools.partial(_cycled, eval_factory), n_envs=1)
        n_eval = args.eval_episodes or len(eval_env.get_attr("record_ids")[0])
    model = make_model(args, venv)
    logger, tensorboard = make_logger(log_dir, args.verbose)
    model.set_logger(logger)
    eval_seed = args.seed + EVAL_SEED_OFFSET
    evaluation = make_eval_callback(
        args.algo,
        eval_seed,
        eval_env=eval_env,
        n_eval_episodes=n_eval,
        eval_freq=max(args.eval_freq // args.n_envs, 1) if args.eval_freq > 0 else 0,
        log_path=str(log_dir),
        best_model_save_path=str(log_dir),
        deterministic=True,
        verbose=args.verbose,
        warn=False,
    )
    run = {
        "env_id": args.env_id,
        "train_split": train_split,
        "eval_split": eval_split,
        "eval_episodes": n_eval,
        "eval_freq": args.eval_freq,
        "eval_seed": eval_seed,
        "seed": args.seed,
        "n_envs": args.n_envs,
        "vec_env": "SubprocVecEnv" if args.subproc else "DummyVecEnv",
        "algo": args.algo,
        "policy": args.policy,
        "solver": args.solver,
        "steps": args.steps,
        "tensorboard": tensorboard,
        "stable_baselines3": stable_baselines3.__version__,
        "ambitab_gym": ambitab_gym.__version__,
    }
    (log_dir / "run.json").write_text(json.dumps(run, indent=2) + "\n", "utf-8")
    try:
        with warnings.catch_warnings():  # the eval env is a DummyVecEnv on purpose
            warnings.filterwarnings("ignore", "Training and eval env are not of the same type")
            model.learn(args.steps, callback=[AmbiTabMetrics(), evaluation, *callbacks])
    finally:
        venv.close()
        eval_env.close()
        logger.close()
    model.save(args.out)
    best = log_dir / "best_model.zip"
    kept = f"best on {eval_split!r}: {best}, " if best.exists() else ""
    print(f"saved {args.out} ({kept}logs: {log_dir})")
    return model


def _saved_policy(path: str) -> str:
    """What the saved model says about its policy class (its module and function names)."""
    with zipfile.ZipFile(path if path.endswith(".zip") else f"{path}.zip") as archive:
        policy = json.loads(archive.read("data")).get("policy_class", {})
    return json.dumps({k: v for k, v in policy.items() if k != ":serialized:"})


def load_model(path: str, algo: str) -> tuple[Any, str]:
    """The saved model and its algorithm (``auto``: read from the model's policy class)."""
    policy = _saved_policy(path)
    if algo == "auto":
        algo = "maskable-ppo" if "maskable" in policy.lower() else "ppo"
    if algo == "maskable-ppo":
        # this script's MaskableMenuPolicy, whichever module defined it when it was saved
        custom = {"policy_class": maskable_menu_policy()} if "MaskableMenuPolicy" in policy else {}
        return _import_maskable_ppo().load(path, device="cpu", custom_objects=custom), algo
    return PPO.load(path, device="cpu"), algo


def _play(policy: Any, env: Any, **reset: Any) -> tuple[float, dict[str, Any]]:
    obs, _ = env.reset(**reset)
    while True:
        if hasattr(policy, "predict"):
            action = policy.predict(obs, deterministic=True)[0]
        else:
            action = policy(obs, env)
        obs, reward, terminated, truncated, info = env.step(int(action))
        if terminated or truncated:
            return reward, info


def _evaluate_procedural(policy: Any, env: Any, episodes: int, seed: int) -> dict[str, Any]:
    """One episode per seed ``seed .. seed + episodes - 1`` (the same tasks for every policy)."""
    scores = []
    for k in range(episodes):
        _play(policy, env, seed=seed + k)
        # the privileged scoring path, as evaluate_menu_policy: the true record and credits
        record = env.get_wrapper_attr("record")
        scores.append(score_episode(env.get_wrapper_attr("trajectory"), record))
    return macro_means(scores)


def evaluate(args: argparse.Namespace) -> None:
    model, algo = load_model(args.model, args.algo)
    _, split, note = resolve_splits(args.env_id, None, args.split)
    if note and args.split is None:
        warnings.warn(note, stacklevel=1)
    env = make_menu_env(
        args.env_id,
        n_slots=model.action_space.n,
        env_kwargs=env_kwargs(args.env_id, split, None),
    )
    policy = model
    if algo == "maskable-ppo":

        def policy(obs: np.ndarray, env: Any) -> int:  # predict with the env's action_masks()
            return int(model.predict(obs, deterministic=True, action_masks=env.action_masks())[0])

    if args.env_id == PROCEDURAL:
        trained = _evaluate_procedural(policy, env, args.episodes, args.seed)
        baseline = _evaluate_procedural(
            random_menu_policy(args.seed), env, args.episodes, args.seed
        )
        record_ids = []
    else:
        trained, scores = evaluate_menu_policy(policy, env)
        baseline, _ = evaluate_menu_policy(random_menu_policy(args.seed), env)
        record_ids = [s.record_id for s in scores[: args.show]]
    for record_id in record_ids:
        reward, info = _play(policy, env, options={"record_id": record_id})
        view = agent_view(env)
        print(view.spec.request)
        print(view.render_dialogue() or "(no question)")
        print(f"-> stop ({info['stop_reason']}), question-F1 {reward:.2f}\n")
    print(json.dumps({"split": split, "trained": trained, "random": baseline}))


# -- command line --------------------------------------------------------------------------------


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    # --env-id and --seed go before or after the command; after it, they win
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--env-id", type=env_id_arg, default=argparse.SUPPRESS)
    common.add_argument("--seed", type=int, default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--env-id",
        type=env_id_arg,
        default="AmbiTab-Bird-v0",
        help=f"a registered env id: {', '.join(ENV_IDS)} (default AmbiTab-Bird-v0)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seeds the model, the train envs and the eval env"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    train_cmd = commands.add_parser("train", parents=[common], help="train and save a policy")
    train_cmd.add_argument(
        "--split", default=None, help="training split (default: train, else all records)"
    )
    train_cmd.add_argument(
        "--eval-split",
        default=None,
        help="evaluation split (default: dev, else test, else --split)",
    )
    train_cmd.add_argument("--steps", type=_positive, default=20_000)
    train_cmd.add_argument("--out", default="asker.zip")
    train_cmd.add_argument("--algo", choices=ALGOS, default="ppo")
    train_cmd.add_argument(
        "--policy",
        choices=("menu", "mlp"),
        default="menu",
        help="menu: MenuPolicy's shared slot network (default); mlp: SB3's MlpPolicy",
    )
    train_cmd.add_argument("--n-envs", type=_positive, default=4, help="vector env size")
    train_cmd.add_argument(
        "--subproc", action="store_true", help="SubprocVecEnv (default: DummyVecEnv)"
    )
    train_cmd.add_argument(
        "--eval-freq",
        type=int,
        default=5_000,
        help="evaluate every this many env steps, all envs together (0: never)",
    )
    train_cmd.add_argument(
        "--eval-episodes",
        type=_positive,
        default=None,
        help="episodes per evaluation (default: every eval record once; procedural: 50)",
    )
    train_cmd.add_argument(
        "--log-dir",
        default=None,
        help="progress.csv, TensorBoard events, evaluations.npz, best_model.zip, run.json "
        "(default runs/<env-id>_<algo>_seed<seed>)",
    )
    train_cmd.add_argument(
        "--solver",
        choices=SOLVERS,
        default=None,
        help="write SQL after asking with this offline solver: info then carries success",
    )
    train_cmd.add_argument("--n-slots", type=_positive, default=32, help="menu size")
    train_cmd.add_argument("--n-steps", type=_positive, default=256, help="rollout steps per env")
    train_cmd.add_argument(
        "--batch-size", type=_positive, default=None, help="default min(256, n_steps * n_envs)"
    )
    train_cmd.add_argument("--n-epochs", type=_positive, default=4)
    train_cmd.add_argument("--learning-rate", type=float, default=1e-3)
    train_cmd.add_argument("--verbose", type=int, default=1)

    eval_cmd = commands.add_parser("evaluate", parents=[common], help="evaluate a saved policy")
    eval_cmd.add_argument("model")
    eval_cmd.add_argument(
        "--split", default=None, help="the split to evaluate on (default: dev, else test)"
    )
    eval_cmd.add_argument("--show", type=int, default=0, help="print this many dialogues")
    eval_cmd.add_argument(
        "--algo", choices=("auto", *ALGOS), default="auto", help="default: read from the model"
    )
    eval_cmd.add_argument(
        "--episodes", type=_positive, default=50, help="AmbiTab-Procedural-v0: tasks to play"
    )
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        resolve_splits(args.env_id, args.split, getattr(args, "eval_split", None))
    except ValueError as error:
        parser.error(str(error))
    if getattr(args, "algo", None) == "maskable-ppo" and not _has_sb3_contrib():
        parser.error(SB3_CONTRIB_HINT)
    return args


def main(argv: Sequence[str] | None = None) -> Any:
    args = parse_args(argv)
    torch.set_num_threads(1)  # tiny networks: one thread is fastest
    return (train if args.command == "train" else evaluate)(args)


if __name__ == "__main__":
    main()
