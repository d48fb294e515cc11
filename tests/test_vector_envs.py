"""Gymnasium vector envs over AmbiTab's text spaces (async: shared memory off)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

import ambitab_gym  # noqa: F401  (registers the ids)
from ambitab_gym import STOP
from ambitab_gym.wrappers import ChatMessages, QuestionMenu

ENV_ID = "AmbiTab-Bird-v0"
MODES = {"sync": {}, "async": {"shared_memory": False}}


def _single(seed: int, wrapper=None):
    env = gym.make(ENV_ID)
    if wrapper is not None:
        env = wrapper(env)
    obs, _ = env.reset(seed=seed)
    return env, obs


@pytest.mark.parametrize("mode", sorted(MODES))
def test_make_vec_text_observations_match_single_envs(mode):
    envs = gym.make_vec(ENV_ID, num_envs=3, vectorization_mode=mode, vector_kwargs=MODES[mode])
    try:
        obs, _ = envs.reset(seed=10)
        singles = [_single(10 + i) for i in range(3)]
        assert list(obs["task"]) == [o["task"] for _, o in singles]
        assert obs["questions_left"].tolist() == [int(o["questions_left"]) for _, o in singles]
        actions = ("Which year do you mean?", STOP, "Please elaborate.")
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        expected = [env.step(a) for (env, _), a in zip(singles, actions, strict=True)]
        assert rewards.tolist() == [e[1] for e in expected]
        assert terminated.tolist() == [e[2] for e in expected]
        assert list(obs["dialogue"]) == [e[0]["dialogue"] for e in expected]
        # next-step autoreset: the env that stopped starts a new episode
        obs, rewards, terminated, _, _ = envs.step(("Anything else?", "Ignored.", STOP))
        assert obs["dialogue"][1] == "" and rewards[1] == 0.0 and not terminated[1]
    finally:
        envs.close()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_make_vec_with_chat_messages(mode):
    envs = gym.make_vec(
        ENV_ID,
        num_envs=2,
        vectorization_mode=mode,
        vector_kwargs=MODES[mode],
        wrappers=[ChatMessages],
    )
    try:
        obs, _ = envs.reset(seed=3)
        assert isinstance(obs, tuple) and len(obs) == 2
        assert all(envs.single_observation_space.contains(o) for o in obs)
        obs, *_ = envs.step(('{"type": "clarification", "output": "Which one?"}', STOP))
        assert [m["role"] for m in obs[0]] == ["system", "assistant", "user"]
        assert obs[0][1]["content"] == "Which one?"
    finally:
        envs.close()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_make_vec_with_question_menu(mode):
    envs = gym.make_vec(
        ENV_ID,
        num_envs=2,
        vectorization_mode=mode,
        vector_kwargs=MODES[mode],
        wrappers=[QuestionMenu],
    )
    try:
        obs, _ = envs.reset(seed=5)
        single = [_single(5 + i, QuestionMenu)[1] for i in range(2)]
        np.testing.assert_array_equal(obs, np.stack(single))
        obs, rewards, terminated, _, _ = envs.step(np.array([0, 0]))
        assert terminated.all() and obs.shape == (2, envs.single_observation_space.shape[0])
    finally:
        envs.close()


def test_vector_env_classes_directly():
    def make():
        return gym.make(ENV_ID)

    for envs in (SyncVectorEnv([make, make]), AsyncVectorEnv([make, make], shared_memory=False)):
        try:
            obs, _ = envs.reset(seed=0)
            assert len(obs["task"]) == 2 and all(isinstance(t, str) for t in obs["task"])
            obs, rewards, *_ = envs.step((STOP, STOP))
            assert rewards.shape == (2,)
        finally:
            envs.close()


def test_async_with_shared_memory_explains_the_fix():
    with pytest.raises(ValueError, match="shared_memory=False"):
        gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="async")
