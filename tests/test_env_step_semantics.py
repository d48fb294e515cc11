"""The env step's memoized work changes nothing an agent or an evaluator sees (issue 19.4).

The step memoizes pure functions (an action's reading, whether an answer reveals SQL, a record's
budget) and shares immutable observation scalars. Checked here against values computed
independently: ``answer_reveals_sql`` and ``parse_action`` called directly, budgets from ``m``;
and Gymnasium's own data-reuse check. (The deterministic matchers' rules have hand-worked tests
of their own: tests/oracles/test_mentions.py, tests/test_matchers.py.)
"""

from __future__ import annotations

import random

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_returned_data_not_reused, data_shares_objects

import ambitab_gym
from ambitab_gym.actions import parse_action
from ambitab_gym.oracles.sqltext import answer_reveals_sql

QUOTES = ('"{}"', "'{}'", "`{}`", "“{}”")


def test_steps_record_what_the_unmemoized_functions_say():
    env = gym.make("AmbiTab-Bird-v0", info_keys=("record_id",))
    raw = env.unwrapped
    terms = sorted({a.term for r in raw.records for a in r.ambiguities})[:8]
    actions = [f"Could you clarify what exactly you mean by {t}?" for t in terms]
    actions += ["Please elaborate.", '{"type": "clarification", "output": "Which one?"}', "stop"]
    rng = random.Random(3)
    for episode in range(40):
        obs, info = env.reset(seed=episode)
        record = raw.record
        slack_budget = record.m + raw.budget_slack - 1 if record.m > 0 else 1
        assert obs["questions_left"] == slack_budget == info["questions_left"]
        done = False
        while not done:
            action = rng.choice(actions)
            obs, _, done, _, info = env.step(action)
            expected = parse_action(action)
            assert (info["action_parse"], info["action_note"]) == (expected.form, expected.note)
        verification = record.verification
        for turn in raw.trajectory.turns:
            assert turn.answer_reveals_sql == answer_reveals_sql(
                turn.answer, verification.reference_sql, verification.engine
            )


def test_observations_share_no_data_between_calls():
    env = gym.make("AmbiTab-Bird-v0")
    check_returned_data_not_reused(env.unwrapped)
    seen = []
    obs, _ = env.reset(seed=0)
    seen.append(obs)
    for action in ["Which year?", "Which one?", ambitab_gym.STOP]:
        obs, *_ = env.step(action)
        seen.append(obs)
    for i, first in enumerate(seen):
        assert isinstance(first["questions_left"], np.int64) and isinstance(
            first["phase"], np.int64
        )
        for second in seen[i + 1 :]:
            assert first is not second and not data_shares_objects(first, second)
    first, second = seen[0], seen[1]
    first["task"] = "changed"
    assert second["task"] != "changed"


def test_budgets_of_generated_records_are_computed_not_cached():
    env = gym.make("AmbiTab-Procedural-v0")
    raw = env.unwrapped
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        m = raw.record.m
        assert obs["questions_left"] == (m + raw.budget_slack - 1 if m > 0 else 1)
