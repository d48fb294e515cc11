"""Aliases of generated ambiguities: every ambiguity carries other phrasings of its term, and the
deterministic oracles credit a question that names an alias as one that names the term (the
matcher of the real corpora's records, :mod:`ambitab_gym.oracles.deterministic`)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.generate import FAMILIES, TaskGenerator
from ambitab_gym.oracles import OracleContext, deterministic_oracle
from ambitab_gym.oracles.base import REFUSAL


def test_aliases_hand_checked_for_retail():
    expected = {
        "synonym": ("order value", ("order values", "value of an order")),
        "knowledge": ("loyal customers", ("loyal customer", "loyal shoppers")),
        "table": ("order records", ("order history", "order data")),
        "choice": ("Springfield", ("Springfield area", "city of Springfield")),
    }
    seeds = {"synonym": 0, "knowledge": 0, "table": 2, "choice": 2}
    for family, (term, aliases) in expected.items():
        generator = TaskGenerator(
            families=(family,),
            ambiguities=(1, 1),
            distractors=(0, 0),
            domains=("retail",),
            databases_per_domain=1,
        )
        ambiguity = generator.generate(seeds[family]).records[0].ambiguities[0]
        assert (ambiguity.term, ambiguity.aliases) == (term, aliases), family


@pytest.mark.parametrize("oracle_kind", ["intent", "knowledge"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_question_naming_an_alias_is_credited(family, oracle_kind):
    generator = TaskGenerator(
        families=(family,), ambiguities=(1, 1), distractors=(0, 2), domains="all"
    )
    oracle = deterministic_oracle(oracle_kind)
    checked = 0
    for seed in range(6):
        for record in generator.generate(seed).records:
            (ambiguity,) = record.ambiguities
            assert ambiguity.aliases
            for alias in ambiguity.aliases:
                credits, answer = oracle.answer(
                    f"When you say {alias}, what exactly do you mean?", OracleContext(record)
                )
                assert credits == frozenset({ambiguity.id}), (alias, record.spec.request)
                # the answer is this record's reading (the frozen response or the resolution)
                expected = ambiguity.response if oracle_kind == "intent" else ambiguity.resolution
                assert expected in answer
                checked += 1
            # and an unrelated question is credited nothing
            credits, answer = oracle.answer("Which database engine is this?", OracleContext(record))
            assert credits == frozenset() and answer == REFUSAL
    assert checked >= 12


def test_alias_question_is_credited_in_the_env():
    env = gym.make("AmbiTab-Procedural-v0", ambiguities=(2, 2), distractors=(0, 0))
    env.reset(seed=4)
    record = env.unwrapped.record
    first, second = record.ambiguities
    obs, _, _, _, info = env.step(f"What do you mean by {first.aliases[-1]}?")
    obs, _, _, _, info = env.step(f"And {second.aliases[0]}?")
    # the trajectory (evaluation side, never shown to the agent) holds the credits
    assert env.unwrapped.trajectory.credits == [frozenset({first.id}), frozenset({second.id})]
    # the agent sees the two readings' answers
    assert (first.response or first.resolution) in obs["dialogue"]
    assert (second.response or second.resolution) in obs["dialogue"]
    env.close()
