"""The env step's memoized work changes nothing an agent or an evaluator sees (issue 19.4).

The step memoizes pure functions (an action's reading, whether an answer reveals SQL, a record's
budget, a question's mentions per record in the deterministic matchers) and shares immutable
observation scalars. Checked here against values computed independently: a brute-force ranking
of the paper's Table 6 rule written out in the test, ``answer_reveals_sql`` and ``parse_action``
called directly, budgets from ``m``; and Gymnasium's own data-reuse check.
"""

from __future__ import annotations

import random
import re

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_returned_data_not_reused, data_shares_objects

import ambitab_gym
from ambitab_gym.actions import parse_action
from ambitab_gym.env import AmbiTabEnv
from ambitab_gym.oracles import IntentMatcher, KnowledgeMatcher, OracleContext, OracleTurn
from ambitab_gym.oracles.deterministic import evidence_concept
from ambitab_gym.oracles.sqltext import answer_reveals_sql

QUOTES = ('"{}"', "'{}'", "`{}`", "“{}”")


def brute_force_credit(question: str, record, knowledge: bool, resolved: frozenset) -> set:
    """Table 6 written out: every mention of every name of every ambiguity, ranked by
    (resolved last for knowledge, inside quotes first, earliest, longest); a tie credits nothing."""
    spans = []
    for pattern in (
        r'"([^"]+)"',
        r"“([^”]+)”",
        r"‘([^’]+)’",
        r"`([^`]+)`",
        r"(?<!\w)'([^']+)'(?!\w)",
    ):
        spans += [m.span() for m in re.finditer(pattern, question)]
    best = {}
    for ambiguity in record.ambiguities:
        names = [n for n in ambiguity.names if n.strip()]
        if knowledge:
            concept = evidence_concept(ambiguity.evidence)
            if concept and concept.lower() not in {n.lower() for n in names}:
                names.append(concept)
        for name in names:
            words = r"\s+".join(re.escape(w) for w in name.split())
            for m in re.finditer(r"(?<!\w)" + words + r"(?!\w)", question, re.IGNORECASE):
                quoted = any(a <= m.start() and m.end() <= b for a, b in spans)
                key = (
                    int(knowledge and ambiguity.id in resolved),
                    0 if quoted else 1,
                    m.start(),
                    -(m.end() - m.start()),
                )
                best[ambiguity.id] = min(best.get(ambiguity.id, key), key)
    if not best:
        return set()
    ranked = sorted(best.items(), key=lambda item: item[1])
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return set()
    return {ranked[0][0]}


def questions_for(record, rng: random.Random) -> list[str]:
    names = [n for a in record.ambiguities for n in a.names if n.strip()] or ["nothing"]
    out = ["Please elaborate.", "What do you mean?"]
    for _ in range(12):
        picked = rng.sample(names, k=min(len(names), rng.randint(1, 3)))
        parts = [rng.choice(QUOTES).format(n) if rng.random() < 0.3 else n for n in picked]
        if rng.random() < 0.3:
            parts = [p.upper() for p in parts]
        out.append(f"{rng.choice(['Which', 'What is', 'And'])} {' or '.join(parts)}?")
    return out


@pytest.mark.parametrize("env_id", ["AmbiTab-Bird-v0", "AmbiTab-AmbiQT-v0", "AmbiTab-TACO-v0"])
def test_memoized_matchers_agree_with_a_brute_force_ranking(env_id):
    rng = random.Random(7)
    records = AmbiTabEnv(env_id.removeprefix("AmbiTab-").removesuffix("-v0").lower()).records
    intent, knowledge = IntentMatcher(), KnowledgeMatcher()
    checked = 0
    for record in records:
        ids = [a.id for a in record.ambiguities]
        for question in questions_for(record, rng):
            for _ in range(2):  # the second round is answered from the memo
                resolved = frozenset(rng.sample(ids, k=rng.randint(0, len(ids))))
                turns = [OracleTurn("q", "a", resolved)] if resolved else []
                context = OracleContext(record, turns)
                assert set(intent.match(question, context)) == brute_force_credit(
                    question, record, False, resolved
                ), (record.id, question)
                assert set(knowledge.match(question, context)) == brute_force_credit(
                    question, record, True, resolved
                ), (record.id, question, resolved)
                checked += 1
    assert checked > 100


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
