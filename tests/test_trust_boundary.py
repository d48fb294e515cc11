"""The trust boundary (docs/design.md section 3): nothing privileged reaches the agent.

Over every bundled record and every step of full-asker, generic-asker and random episodes:
no resolution text or frozen response of an ambiguity not yet credited, no reference SQL and no
credit appears in the observation or the default info.
"""

from __future__ import annotations

import re

import gymnasium as gym
import pytest
from bundled import ALL_ENV_IDS

from ambitab_gym import STOP
from ambitab_gym.policies.scripted import FullAsker, GenericAsker

PUBLIC_INFO_KEYS = {
    "questions_asked",
    "questions_left",
    "phase",
    "stop_reason",
    "success",
    "verdict_reason",
    "action_parse",
    "action_note",
    "reply_read",
}


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def visible_text(obs) -> str:
    return norm(obs["task"] + "\n" + obs["dialogue"])


def assert_nothing_privileged(env, obs, info):
    record = env.unwrapped.record
    trajectory = env.unwrapped.trajectory
    credited = set().union(*trajectory.credits) if trajectory.turns else set()
    text = visible_text(obs)
    assert norm(record.verification.reference_sql) not in text
    for ambiguity in record.ambiguities:
        if ambiguity.id in credited:
            continue
        assert norm(ambiguity.resolution) not in text, (record.id, ambiguity.id, "resolution")
        if ambiguity.response:
            assert norm(ambiguity.response) not in text, (record.id, ambiguity.id, "response")
        if ambiguity.sql_snippet:
            assert norm(ambiguity.sql_snippet) not in text, (record.id, ambiguity.id, "snippet")
    assert set(info) <= PUBLIC_INFO_KEYS, set(info) - PUBLIC_INFO_KEYS
    ids = {a.id for a in record.ambiguities} | {record.id}
    for value in info.values():
        assert not (isinstance(value, str) and value in ids), value
        assert not isinstance(value, (set, frozenset, list, dict)), value


def run(env, record, actions):
    obs, info = env.reset(seed=0, options={"record_id": record.id})
    assert_nothing_privileged(env, obs, info)
    for action in actions(env):
        obs, _, terminated, truncated, info = env.step(action)
        assert_nothing_privileged(env, obs, info)
        if terminated or truncated:
            return
    raise AssertionError("episode did not end")


def full_actions(record):
    def actions(env):
        asker = FullAsker()
        asker.reset(record=record)
        while True:
            yield asker.act(env.unwrapped.public_view)

    return actions


def generic_actions(env):
    asker = GenericAsker()
    while True:
        yield asker.act(env.unwrapped.public_view)


def random_actions(env):
    env.action_space.seed(0)
    while True:
        yield env.action_space.sample()


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_no_privileged_text_in_observations_or_info(env_id):
    env = gym.make(env_id)
    for record in env.unwrapped.records:
        run(env, record, full_actions(record))
        run(env, record, generic_actions)
        run(env, record, random_actions)


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_agent_mode_verdict_is_not_privileged(env_id):
    env = gym.make(env_id, mode="agent")
    for record in env.unwrapped.records[:10]:
        obs, info = env.reset(options={"record_id": record.id})
        obs, _, _, _, info = env.step(STOP)
        assert_nothing_privileged(env, obs, info)
        for sql in ("SELECT 1", "SELEC nonsense", "DROP TABLE x"):
            env.reset(options={"record_id": record.id})
            env.step(STOP)
            obs, _, terminated, _, info = env.step(sql)
            assert terminated and info["success"] is False
            assert_nothing_privileged(env, obs, info)


def test_public_view_cannot_carry_oracle_fields():
    env = gym.make("AmbiTab-Bird-v0")
    env.reset(seed=0)
    view = env.unwrapped.public_view
    fields = set(type(view).__dataclass_fields__) | set(type(view.spec).model_fields)
    assert fields.isdisjoint(
        {"ambiguities", "resolution", "credits", "reference_sql", "verification"}
    )
