"""The ask-then-solve protocol of AmbiTabEnv (docs/design.md section 4, Protocol)."""

from __future__ import annotations

import asyncio
import json

import gymnasium as gym
import numpy as np
import pytest
from bundled import ALL_ENV_IDS
from gymnasium.utils.env_checker import check_env

import ambitab_gym
from ambitab_gym import STOP, AmbiTabEnv
from ambitab_gym.corpora import load_corpus
from ambitab_gym.policies.scripted import FullAsker, GenericAsker


class ReferenceSolver:
    """Test-only solver that cheats: returns the reference SQL of a fixed record."""

    def __init__(self, env):
        self.env = env

    def solve(self, view):
        return self.env.unwrapped.record.verification.reference_sql


def ambiguous_record(corpus, at_least=1):
    return next(r for r in corpus.records if r.m >= at_least)


def zero_record(corpus):
    return next((r for r in corpus.records if r.m == 0), None)


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_check_env_passes(env_id):
    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=False)


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_reset_with_seed_is_reproducible(env_id):
    env = gym.make(env_id)
    for seed in (0, 1, 7):
        first, _ = env.reset(seed=seed)
        env.step("Could you clarify what you want?")
        second, _ = env.reset(seed=seed)
        assert first == second
        other = gym.make(env_id)
        third, _ = other.reset(seed=seed)
        assert third == first and other.unwrapped.record.id == env.unwrapped.record.id


def test_make_with_module_prefix():
    env = gym.make("ambitab_gym:AmbiTab-Bird-v0")
    assert isinstance(env.unwrapped, AmbiTabEnv) and env.unwrapped.corpus.name == "bird"


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_full_asker_gets_f1_one_on_every_record(env_id):
    env = gym.make(env_id)
    asker = FullAsker()
    for record in env.unwrapped.records:
        env.reset(seed=0, options={"record_id": record.id})
        asker.reset(record=record)
        terminated, steps = False, 0
        while not terminated:
            _, reward, terminated, truncated, info = env.step(asker.act(None))
            steps += 1
            assert not truncated
        assert reward == 1.0, (record.id, env.unwrapped.trajectory)
        assert info["stop_reason"] == "asker"
        assert steps == len({a.term.lower() for a in record.counted_ambiguities}) + 1


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_stopping_at_once(env_id):
    env = gym.make(env_id)
    for record in env.unwrapped.records:
        env.reset(seed=0, options={"record_id": record.id})
        _, reward, terminated, _, info = env.step(STOP)
        assert terminated and info["questions_asked"] == 0
        assert reward == (0.0 if record.m > 0 else 1.0)


def test_budget_allows_m_plus_2_questions_then_stops_by_itself():
    env = gym.make("AmbiTab-Bird-v0")
    record = ambiguous_record(env.unwrapped.corpus)
    obs, info = env.reset(options={"record_id": record.id})
    assert int(obs["questions_left"]) == record.m + 2
    for i in range(record.m + 2):
        obs, reward, terminated, truncated, info = env.step(f"Irrelevant question {i}?")
    assert terminated and info["stop_reason"] == "budget"
    assert env.unwrapped.trajectory.truncated and reward == 0.0
    with pytest.raises(RuntimeError, match="reset"):
        env.step("one more?")


def test_budget_slack_is_a_parameter():
    env = gym.make("AmbiTab-Bird-v0", budget_slack=1)
    record = ambiguous_record(env.unwrapped.corpus)
    obs, _ = env.reset(options={"record_id": record.id})
    assert int(obs["questions_left"]) == record.m


def test_zero_ambiguity_single_decision_and_skip():
    corpus = load_corpus("bird")
    record = zero_record(corpus)
    assert record is not None, "the Bird sample has zero-ambiguity controls"
    env = gym.make("AmbiTab-Bird-v0")
    obs, _ = env.reset(options={"record_id": record.id})
    assert int(obs["questions_left"]) == 1
    _, reward, terminated, _, info = env.step("Do you mean all of them?")
    assert terminated and reward == 0.0 and info["stop_reason"] == "budget"
    assert info["questions_asked"] == 1

    env = gym.make("AmbiTab-Bird-v0", zero_ambiguity="skip")
    obs, _ = env.reset(options={"record_id": record.id})
    assert int(obs["questions_left"]) == 0
    _, reward, terminated, _, info = env.step("Do you mean all of them?")
    assert terminated and reward == 1.0 and info["stop_reason"] == "skipped"
    assert info["questions_asked"] == 0


def test_json_action_forms():
    env = gym.make("AmbiTab-Bird-v0")
    record = ambiguous_record(env.unwrapped.corpus)
    term = record.counted_ambiguities[0].term
    env.reset(options={"record_id": record.id})
    action = json.dumps({"type": "clarification", "output": f"What do you mean by {term}?"})
    obs, *_ = env.step(action)
    assert obs["dialogue"].startswith(f"Q1: What do you mean by {term}?")
    assert env.unwrapped.trajectory.turns[0].credits == {record.counted_ambiguities[0].id}
    _, _, terminated, _, info = env.step(json.dumps({"type": "done", "output": ""}))
    assert terminated and info["stop_reason"] == "asker"


def test_garbage_actions_are_questions_that_earn_nothing():
    env = gym.make("AmbiTab-Bird-v0")
    record = ambiguous_record(env.unwrapped.corpus)
    env.reset(options={"record_id": record.id})
    for action in ['{"type": "banana"}', "{not json", "", 42, b"\xff\xfe", None]:
        env.step(action)
        if env.unwrapped.trajectory.stop_reason:
            break
    assert all(not t.credits for t in env.unwrapped.trajectory.turns)


def test_thousand_random_actions_never_raise():
    for mode in ("ask_only", "agent"):
        env = gym.make("AmbiTab-Bird-v0", mode=mode)
        env.action_space.seed(3)
        env.reset(seed=3)
        for _ in range(1000):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()


def test_solver_mode_verifies_and_pays_outcome():
    solver = ReferenceSolver(None)
    env = gym.make("AmbiTab-Bird-v0", reward="outcome", solver=solver)
    solver.env = env
    assert env.unwrapped.mode == "solver"
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(STOP)
    assert terminated and reward == 1.0 and info["success"] is True
    assert env.unwrapped.trajectory.sql == env.unwrapped.record.verification.reference_sql


def test_agent_mode_takes_sql_as_next_action():
    env = gym.make("AmbiTab-Bird-v0", mode="agent", reward="outcome")
    obs, _ = env.reset(seed=2)
    obs, reward, terminated, _, info = env.step(STOP)
    assert not terminated and int(obs["phase"]) == 1 and reward == 0.0
    sql = env.unwrapped.record.verification.reference_sql
    obs, reward, terminated, _, info = env.step(sql)
    assert terminated and reward == 1.0 and info["verdict_reason"] == "match"
    env.reset(seed=2)
    env.step(STOP)
    _, reward, terminated, _, info = env.step("SELECT 42 WHERE 0")
    assert terminated and reward == 0.0 and info["success"] is False


def test_outcome_reward_needs_sql():
    with pytest.raises(ValueError, match="outcome reward needs SQL"):
        gym.make("AmbiTab-Bird-v0", reward="outcome")


def test_custom_reward_callable():
    env = gym.make(
        "AmbiTab-Bird-v0", reward=lambda trajectory, record: 0.25 + trajectory.n_questions
    )
    env.reset(seed=0)
    env.step("Anything?")
    _, reward, terminated, *_ = env.step(STOP)
    assert terminated and reward == 1.25


def test_privileged_info_is_opt_in_by_name():
    env = gym.make("AmbiTab-Bird-v0", info_keys=("record_id", "credits", "reference_sql"))
    record = ambiguous_record(env.unwrapped.corpus)
    _, info = env.reset(options={"record_id": record.id})
    assert info["record_id"] == record.id
    assert info["reference_sql"] == record.verification.reference_sql
    _, _, _, _, info = env.step(f"What do you mean by {record.counted_ambiguities[0].term}?")
    assert info["credits"] == [[record.counted_ambiguities[0].id]]
    with pytest.raises(ValueError, match="unknown info keys"):
        gym.make("AmbiTab-Bird-v0", info_keys=("secret",))


def test_trajectory_is_readable_from_unwrapped_env():
    env = gym.make("AmbiTab-Bird-v0")
    record = ambiguous_record(env.unwrapped.corpus)
    env.reset(options={"record_id": record.id})
    env.step("Please elaborate.")
    env.step(STOP)
    trajectory = env.unwrapped.trajectory
    assert trajectory.record_id == record.id and trajectory.stop_reason == "asker"
    assert (
        trajectory.turns[0].question == "Please elaborate." and trajectory.turns[0].credits == set()
    )
    assert trajectory.turns[0].answer == ambitab_gym.oracles.REFUSAL
    assert trajectory.to_dict()["turns"][0]["credits"] == []


def test_render_ansi_shows_task_and_dialogue():
    env = gym.make("AmbiTab-Bird-v0", render_mode="ansi")
    obs, _ = env.reset(seed=0)
    env.step("Which year?")
    text = env.render()
    assert obs["task"] in text and "Q1: Which year?" in text


def test_astep_matches_step():
    sync_env = gym.make("AmbiTab-Bird-v0").unwrapped
    async_env = gym.make("AmbiTab-Bird-v0").unwrapped
    asker = GenericAsker()
    for seed in range(5):
        a, _ = sync_env.reset(seed=seed)
        b, _ = async_env.reset(seed=seed)
        asker.reset()
        done = False
        while not done:
            action = asker.act(sync_env.public_view)
            a, ra, done, _, ia = sync_env.step(action)
            b, rb, done_b, _, ib = asyncio.run(async_env.astep(action))
            assert (a, ra, ia) == (b, rb, ib) and done == done_b


def test_observation_space_contains_every_observation():
    env = gym.make("AmbiTab-Bird-v0")
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert isinstance(obs["questions_left"], np.integer)
