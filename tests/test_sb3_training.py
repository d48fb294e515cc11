"""Short stable-baselines3 PPO runs on QuestionMenu envs (needs the ``sb3`` extra)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip(
    "stable_baselines3",
    reason="stable-baselines3 is not installed: pip install 'ambitab-gym[sb3]'",
)
torch = pytest.importorskip(
    "torch", reason="torch is not installed: pip install 'ambitab-gym[sb3]'"
)

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_checker import check_env  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402

from ambitab_gym.integrations.sb3 import (  # noqa: E402
    MenuPolicy,
    evaluate_menu_policy,
    make_menu_env,
    random_menu_policy,
)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_sb3_env_checker_accepts_the_menu_env():
    check_env(make_menu_env(n_slots=16), warn=True)


def test_ppo_learns_when_to_ask_and_when_to_stop():
    # bird-0014 needs one question about "recently" then a stop (F1 1); bird-0049 has no
    # ambiguity, so only stopping at once earns 1. The untrained policy gets neither.
    env = make_menu_env(n_slots=16, env_kwargs={"record_ids": ["bird-0014", "bird-0049"]})
    model = PPO(
        MenuPolicy,
        env,
        n_steps=128,
        batch_size=64,
        n_epochs=4,
        learning_rate=3e-3,
        gamma=1.0,
        seed=0,
    )
    before, _ = evaluate_menu_policy(model, env)
    model.learn(2048)
    after, scores = evaluate_menu_policy(model, env)
    assert before["f1"] < 1.0
    assert after["f1"] == 1.0, scores
    assert {s.record_id: s.n_questions for s in scores} == {"bird-0014": 1, "bird-0049": 0}


def test_ppo_run_on_the_train_split_completes_and_round_trips(tmp_path):
    venv = make_vec_env(lambda: make_menu_env(env_kwargs={"split": "train"}), n_envs=2, seed=0)
    model = PPO(MenuPolicy, venv, n_steps=256, batch_size=128, n_epochs=2, seed=0)
    model.learn(2048)
    eval_env = make_menu_env(env_kwargs={"split": "dev"})
    summary, scores = evaluate_menu_policy(model, eval_env)
    assert summary["episodes"] == len(scores) == len(eval_env.unwrapped.records)
    assert 0.0 <= summary["f1"] <= 1.0

    path = tmp_path / "menu_ppo.zip"
    model.save(path)
    loaded = PPO.load(path, device="cpu")
    obs, _ = eval_env.reset(seed=3)
    batch = np.stack([obs, obs])
    np.testing.assert_array_equal(
        model.predict(batch, deterministic=True)[0], loaded.predict(batch, deterministic=True)[0]
    )


def test_menu_policy_never_picks_an_empty_slot():
    env = make_menu_env(n_slots=32)
    model = PPO(MenuPolicy, env, n_steps=32, batch_size=32, seed=1)
    for seed in range(10):
        obs, _ = env.reset(seed=seed)
        valid = env.action_masks()
        for _ in range(5):
            action, _ = model.predict(obs, deterministic=False)
            assert valid[int(action)]


def test_mlp_policy_works_too():
    env = make_menu_env(n_slots=16, env_kwargs={"split": "train"})
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=1, seed=0)
    model.learn(256)
    summary, _ = evaluate_menu_policy(model, env)
    assert summary["episodes"] == 39


def test_random_menu_policy_is_seeded():
    env = make_menu_env(env_kwargs={"split": "dev"})
    first, _ = evaluate_menu_policy(random_menu_policy(5), env)
    second, _ = evaluate_menu_policy(random_menu_policy(5), env)
    assert first == second


def test_menu_policy_rejects_other_observations():
    import gymnasium as gym

    with pytest.raises(ValueError, match="QuestionMenu"):
        PPO(MenuPolicy, gym.make("CartPole-v1"), n_steps=8, batch_size=8)


# -- examples/train_sb3_asker.py (issue 31): the SB3 command line -------------------------------

import csv  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import ambitab_gym  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_sb3_asker.py"
#: a short run: 2 envs x 64 steps per rollout, an evaluation every 256 env steps
SHORT = ["--n-envs", "2", "--n-steps", "64", "--steps", "512", "--eval-freq", "256"]
SHORT += ["--verbose", "0"]


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("train_sb3_asker", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _train(example, tmp_path, name, *options, seed=0, callbacks=()):
    out, log_dir = tmp_path / f"{name}.zip", tmp_path / name
    argv = ["--seed", str(seed), "train", *SHORT, *options]
    args = example.parse_args([*argv, "--log-dir", str(log_dir), "--out", str(out)])
    model = example.train(args, callbacks=callbacks)
    return model, out, log_dir


def _rows(log_dir):
    with open(log_dir / "progress.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def _parameters(path, algo=PPO):
    return algo.load(path, device="cpu").policy.state_dict()


def _same(first, second):
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_cli_rejects_an_unknown_env_id_listing_the_valid_ones(example, capsys):
    for argv in (["--env-id", "AmbiTab-Bogus-v0", "train"], ["train", "--env-id", "CartPole-v1"]):
        with pytest.raises(SystemExit) as exit_:
            example.parse_args(argv)
        assert exit_.value.code == 2
        error = capsys.readouterr().err
        assert "unknown env id" in error
        assert all(env_id in error for env_id in example.ENV_IDS)
    assert set(example.ENV_IDS) == {*ambitab_gym.ENV_IDS, "AmbiTab-Procedural-v0"}


def test_cli_options_parse_and_validate(example, capsys):
    args = example.parse_args(["train", "--steps", "20000", "--out", "asker.zip"])
    assert (args.env_id, args.seed, args.n_envs, args.algo, args.subproc) == (
        "AmbiTab-Bird-v0",
        0,
        4,
        "ppo",
        False,
    )
    assert example.resolve_splits(args.env_id, args.split, args.eval_split) == (
        "train",
        "dev",
        None,
    )
    # before or after the command, with the gym.make prefix
    args = example.parse_args(
        ["--seed", "1", "train", "--env-id", "ambitab_gym:AmbiTab-AmbiQT-v0", "--seed", "7"]
    )
    assert (args.env_id, args.seed) == ("AmbiTab-AmbiQT-v0", 7)
    assert example.parse_args(["--seed", "5", "evaluate", "m.zip"]).seed == 5
    # corpora without a dev split say which split they evaluate on
    assert example.resolve_splits("AmbiTab-Ambrosia-v0", None, None) == ("train", "test", None)
    train, evaluation, note = example.resolve_splits("AmbiTab-TACO-v0", None, None)
    assert (train, evaluation) == ("all", "all") and "not held out" in note
    assert example.resolve_splits("AmbiTab-Procedural-v0", None, None) == ("train", "test", None)
    for argv in (
        ["train", "--split", "validation"],
        ["train", "--n-envs", "0"],
        ["train", "--algo", "a2c"],
        ["--env-id", "AmbiTab-TACO-v0", "train", "--eval-split", "dev"],
    ):
        with pytest.raises(SystemExit) as exit_:
            example.parse_args(argv)
        assert exit_.value.code == 2, argv
    assert "valid splits" in capsys.readouterr().err


def test_maskable_ppo_without_sb3_contrib_names_the_install(example, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "sb3_contrib", None)
    with pytest.raises(SystemExit) as exit_:
        example.parse_args(["train", "--algo", "maskable-ppo"])
    assert exit_.value.code == 2
    assert "pip install sb3-contrib" in capsys.readouterr().err


def test_eval_env_plays_every_record_once_and_restarts_when_seeded(example):
    env = example.CycleRecords(make_menu_env(env_kwargs={"split": "dev"}))
    ids = [r.id for r in env.get_wrapper_attr("records")]
    played = []
    for seed in [11] + [None] * (2 * len(ids) - 1):
        env.reset(seed=seed)
        played.append(env.get_wrapper_attr("record").id)
    assert played == ids + ids
    env.reset(seed=11)
    assert env.get_wrapper_attr("record").id == ids[0]


def test_metrics_read_only_agent_visible_info(example):
    info = {
        "questions_asked": 2,
        "questions_left": 1,
        "stop_reason": "budget",
        "success": True,
        "episode": {"r": 0.5, "l": 3, "t": 0.1},
        **{key: "secret" for key in ambitab_gym.PRIVILEGED_INFO_KEYS},
    }
    assert example.episode_metrics(info) == {
        "question_f1": 0.5,
        "questions_asked": 2.0,
        "budget_stop_rate": 1.0,
        "success_rate": 1.0,
    }
    assert not set(example.VISIBLE_METRIC_KEYS) & set(ambitab_gym.PRIVILEGED_INFO_KEYS)


def test_short_run_logs_ambitab_metrics_and_dev_evaluations_reproducibly(example, tmp_path, capsys):
    _, out, log_dir = _train(example, tmp_path, "a", "--solver", "interpretation", seed=3)
    rows = _rows(log_dir)
    columns = set(rows[0])
    ambitab = {"question_f1", "questions_asked", "budget_stop_rate", "success_rate"}
    assert {f"ambitab/{key}" for key in ambitab} <= columns
    assert {f"eval/{key}" for key in ambitab - {"success_rate"}} <= columns
    assert {"eval/mean_reward", "eval/success_rate", "rollout/ep_rew_mean"} <= columns
    assert not any(key in column for column in columns for key in ambitab_gym.PRIVILEGED_INFO_KEYS)
    evaluations = [row for row in rows if row["eval/mean_reward"]]
    assert [int(row["time/total_timesteps"]) for row in evaluations] == [256, 512]
    for row in evaluations:
        assert 0.0 <= float(row["eval/mean_reward"]) <= 1.0
        assert float(row["eval/question_f1"]) == pytest.approx(float(row["eval/mean_reward"]))
    assert any(row["ambitab/question_f1"] for row in rows)
    # the eval callback ran on dev, each of its 21 records once per evaluation
    run = json.loads((log_dir / "run.json").read_text())
    assert (run["train_split"], run["eval_split"], run["eval_episodes"]) == ("train", "dev", 21)
    assert np.load(log_dir / "evaluations.npz")["results"].shape == (2, 21)
    assert (log_dir / "best_model.zip").exists()
    if run["tensorboard"]:
        assert list(log_dir.glob("events.out.tfevents.*"))
    else:
        assert capsys.readouterr().err.count("tensorboard is not installed") == 1

    # the same seed gives the same model; another seed another one
    _, again, _ = _train(example, tmp_path, "b", "--solver", "interpretation", seed=3)
    _, other, _ = _train(example, tmp_path, "c", "--solver", "interpretation", seed=4)
    assert _same(_parameters(out), _parameters(again))
    assert not _same(_parameters(out), _parameters(other))

    # the documented evaluate command reads the saved model
    example.main(["evaluate", str(out), "--split", "dev", "--show", "1"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["split"] == "dev" and result["trained"]["episodes"] == 21


def test_maskable_ppo_never_takes_a_masked_action(example, tmp_path, capsys):
    pytest.importorskip("sb3_contrib", reason="sb3-contrib is not installed")
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.callbacks import BaseCallback

    class CheckMasks(BaseCallback):
        """Every action of every training rollout against the env's action_masks()."""

        steps = invalid_slots = 0

        def _on_step(self):
            masks, actions = self.locals["action_masks"], self.locals["actions"]
            assert masks is not None
            assert masks[np.arange(len(actions)), actions.reshape(-1)].all()
            self.steps += 1
            self.invalid_slots += int((~masks.astype(bool)).sum())
            return True

    checker = CheckMasks()
    # MlpPolicy: nothing but the masks keeps it off the empty slots
    model, out, log_dir = _train(
        example, tmp_path, "m", "--algo", "maskable-ppo", "--policy", "mlp", callbacks=[checker]
    )
    assert isinstance(model, MaskablePPO)
    assert checker.steps == 512 // 2 and checker.invalid_slots > 0
    assert any(row["eval/mean_reward"] for row in _rows(log_dir))

    # a sampled rollout of the trained model with the env's masks
    venv = make_vec_env(lambda: make_menu_env(env_kwargs={"split": "dev"}), n_envs=2, seed=1)
    obs, masked = venv.reset(), 0
    for _ in range(100):
        masks = get_action_masks(venv)
        actions, _ = model.predict(obs, action_masks=masks, deterministic=False)
        assert masks[np.arange(2), actions].all()
        masked += int((~masks).sum())
        obs, _, _, _ = venv.step(actions)
    assert masked > 0

    # the menu network as a maskable policy; evaluate reads the algorithm from the file
    _, menu_out, _ = _train(example, tmp_path, "mm", "--algo", "maskable-ppo", "--eval-freq", "0")
    capsys.readouterr()
    for path in (out, menu_out):
        example.main(["evaluate", str(path)])
        assert json.loads(capsys.readouterr().out.splitlines()[-1])["trained"]["episodes"] == 21


def test_procedural_env_id_trains_and_evaluates_on_held_out_domains(example, tmp_path):
    options = ["--env-id", "AmbiTab-Procedural-v0", "--steps", "128", "--n-steps", "32"]
    options += ["--eval-freq", "128", "--eval-episodes", "4"]
    _, out, log_dir = _train(example, tmp_path, "p", *options)
    run = json.loads((log_dir / "run.json").read_text())
    assert (run["env_id"], run["train_split"], run["eval_split"]) == (
        "AmbiTab-Procedural-v0",
        "train",
        "test",
    )
    rows = _rows(log_dir)
    assert [row["time/total_timesteps"] for row in rows if row["eval/mean_reward"]] == ["128"]
    assert any(row["ambitab/question_f1"] for row in rows)
    assert np.load(log_dir / "evaluations.npz")["results"].shape == (1, 4)


def test_subproc_vec_env_trains_the_same_model(example, tmp_path):
    options = ["--steps", "128", "--n-steps", "32", "--eval-freq", "0"]
    _, dummy, _ = _train(example, tmp_path, "d", *options)
    _, subproc, _ = _train(example, tmp_path, "s", *options, "--subproc")
    assert _same(_parameters(dummy), _parameters(subproc))
