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
