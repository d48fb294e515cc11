"""SpecificationRandomization, HybridOracle and AdversarialProbe.

See docs/design.md section 8, Leakage diagnostics.
"""

from __future__ import annotations

import asyncio
import warnings
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
from factories import amb, make_record
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import RecordEpisodeStatistics, TimeLimit

import ambitab_gym
from ambitab_gym import STOP, AmbiTabEnv
from ambitab_gym.evaluation import play_episode
from ambitab_gym.oracles import REFUSAL, ReferenceResponder, canonical_question
from ambitab_gym.oracles.leaky import make_leaky_oracle
from ambitab_gym.policies.interpretation import InterpretationSolver
from ambitab_gym.policies.scripted import ADVERSARIAL_SUFFIX, FullAdvAsker, FullAsker
from ambitab_gym.trajectory import render_spec
from ambitab_gym.wrappers import AdversarialProbe, HybridOracle, SpecificationRandomization
from ambitab_gym.wrappers.leakage import draw_replacements, replacement_group


def run(env, asker, record):
    """One synchronous episode on a (wrapped) env; returns the trajectory."""
    env.reset(seed=0, options={"record_id": record.id})
    if getattr(asker, "privileged", False):
        asker.reset(seed=0, record=record)
    else:
        asker.reset(seed=0)
    while True:
        *_, terminated, truncated, _ = env.step(asker.act(env.public_view))
        if terminated or truncated:
            return env.unwrapped.trajectory


def turns(trajectory):
    return [(t.question, t.answer, t.credits) for t in trajectory.turns]


class RecordingSolver:
    """Remembers the views it was asked to solve (and answers with the default reading)."""

    def __init__(self, corpus):
        self.views = []
        self.inner = InterpretationSolver(corpus)

    def solve(self, view):
        self.views.append(view)
        return self.inner.solve(view)


# -- SpecificationRandomization --------------------------------------------------------------


def test_replacements_come_from_another_database_one_per_group():
    env = SpecificationRandomization(AmbiTabEnv("bird"), seed=0)
    records = env.unwrapped.records
    donors = {r.id: env.replacement(r) for r in records}
    assert set(env.donors) == {r.id for r in records}
    for record in records:
        assert donors[record.id].spec.database != record.spec.database
    by_group: dict = {}
    for record in records:
        by_group.setdefault(replacement_group(record), set()).add(donors[record.id].id)
    assert all(len(ids) == 1 for ids in by_group.values())
    # several AVTs share a group in this corpus only if they share database and terms
    groups = Counter(replacement_group(r) for r in records)
    assert len(groups) < len(records)  # siblings of an AVT share their replacement


def test_replacement_map_is_fixed_by_the_seed_and_reused_across_resets():
    first = SpecificationRandomization(AmbiTabEnv("bird"), seed=3)
    second = SpecificationRandomization(AmbiTabEnv("bird"), seed=np.random.default_rng(3))
    assert first.donors == second.donors
    record = first.unwrapped.records[5]
    tasks = set()
    for seed in range(5):
        obs, _ = first.reset(seed=seed, options={"record_id": record.id})
        tasks.add(obs["task"])
    assert tasks == {render_spec(first.corpus.public_spec(first.replacement(record)))}
    others = [SpecificationRandomization(AmbiTabEnv("bird"), seed=s).donors for s in range(4, 8)]
    assert any(o != first.donors for o in others)


def test_replacement_is_uniform_over_records_on_other_databases():
    receiver = make_record([amb("a", "alpha")], record_id="r", avt_id="x")
    pool = [receiver] + [
        make_record([amb("b", "beta")], record_id=f"d{k}", avt_id=f"y{k}").model_copy(
            update={"spec": receiver.spec.model_copy(update={"database": f"db{k}"})}
        )
        for k in range(3)
    ]
    counts = Counter(
        draw_replacements([receiver], pool, np.random.default_rng(seed))["r"].id
        for seed in range(3000)
    )
    assert set(counts) == {"d0", "d1", "d2"}  # never the receiver's own database
    assert all(850 <= n <= 1150 for n in counts.values())  # 1000 expected each; ~5.8 SD margin


def test_single_database_pool_is_an_error_that_says_what_to_do():
    base = AmbiTabEnv("bird", split="all")
    one_db = [r for r in base.records if r.spec.database == "flights"]
    env = AmbiTabEnv("bird", record_ids=[r.id for r in one_db])
    with pytest.raises(ValueError, match="at least two databases"):
        SpecificationRandomization(env, pool=one_db)
    # the default pool is the whole corpus (every split), so one database to run is fine
    donors = SpecificationRandomization(env).donors
    assert {base.corpus.record(d).spec.database for d in donors.values()} - {"flights"}


def test_only_the_agent_sees_the_replacement():
    corpus_env = AmbiTabEnv("bird")
    solver = RecordingSolver(corpus_env.corpus)
    env = SpecificationRandomization(AmbiTabEnv("bird", solver=solver), seed=1)
    record = next(r for r in env.unwrapped.records if r.m > 0)
    donor = env.replacement(record)
    true_spec = env.corpus.public_spec(record)
    obs, info = env.reset(seed=0, options={"record_id": record.id})
    assert obs["task"] == render_spec(env.corpus.public_spec(donor)) != render_spec(true_spec)
    assert env.public_view.spec == env.corpus.public_spec(donor)
    assert env.unwrapped.public_view.spec == true_spec
    # the matcher reads the true record: a question about its true term is credited
    term = record.counted_ambiguities[0]
    obs, *_ = env.step(canonical_question(term.term))
    assert env.unwrapped.trajectory.turns[0].credits == {term.id}
    assert obs["dialogue"] == env.unwrapped.public_view.render_dialogue()
    assert env.public_view.dialogue == env.unwrapped.public_view.dialogue
    # the solver reads the true spec and the true dialogue
    obs, reward, terminated, truncated, info = env.step(STOP)
    assert terminated
    assert solver.views[-1].spec == true_spec
    assert solver.views[-1].dialogue == env.unwrapped.public_view.dialogue
    # nothing privileged reaches the observation or info
    text = repr(obs) + repr(info)
    assert donor.id not in text and record.id not in text


def test_privileged_asker_reads_the_replacement_record():
    env = SpecificationRandomization(AmbiTabEnv("bird"), seed=0)
    record = next(r for r in env.unwrapped.records if r.m > 0)
    donor = env.replacement(record)
    asker = env.wrap_asker(FullAsker())
    assert asker.privileged
    trajectory = run(env, asker, record)
    asked = [t.question for t in trajectory.turns]
    expected = FullAsker()
    expected.reset(record=donor)
    assert asked == [expected.act(None) for _ in range(len(asked))]


def test_wrappers_compose_with_gymnasium_wrappers():
    env = TimeLimit(
        SpecificationRandomization(RecordEpisodeStatistics(gym.make("AmbiTab-Bird-v0")), seed=0),
        max_episode_steps=2,
    )
    obs, _ = env.reset(seed=0)
    inner = env.env  # the SpecificationRandomization wrapper
    assert obs["task"] == inner.public_view.render_task()
    assert obs["task"] != env.unwrapped.public_view.render_task()
    obs, _, terminated, truncated, _ = env.step("Please elaborate.")
    if not terminated:
        obs, _, terminated, truncated, _ = env.step("Please elaborate.")
        assert terminated or truncated
    assert obs["task"] == inner.public_view.render_task()


def test_vector_env_of_wrapped_envs():
    def make():
        return HybridOracle(SpecificationRandomization(gym.make("AmbiTab-Bird-v0"), seed=0))

    envs = gym.vector.SyncVectorEnv([make, make])
    obs, _ = envs.reset(seed=[0, 1])
    for i, env in enumerate(envs.envs):
        assert obs["task"][i] == env.get_wrapper_attr("public_view").render_task()
        assert obs["task"][i] != env.unwrapped.public_view.render_task()
    obs, *_ = envs.step(["Please elaborate.", STOP])
    assert REFUSAL in obs["dialogue"][0]
    envs.close()


def test_env_checker_passes_on_wrapped_envs():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(SpecificationRandomization(AmbiTabEnv("bird"), seed=0))
        check_env(AdversarialProbe(HybridOracle(AmbiTabEnv("bird"))))


def test_leakage_wrappers_need_an_ambitab_env():
    with pytest.raises(TypeError, match="AmbiTab env"):
        HybridOracle(gym.make("CartPole-v1"))


# -- HybridOracle ----------------------------------------------------------------------------


def test_hybrid_oracle_keeps_the_matcher_and_replaces_the_responder():
    base = AmbiTabEnv("ambiqt")
    base.oracle = make_leaky_oracle("leaky-sql-responder", base.corpus)
    hybrid = HybridOracle(base)
    reference = AmbiTabEnv("ambiqt")

    def ask(env, record, questions):
        env.reset(seed=0, options={"record_id": record.id})
        for question in questions[: env.unwrapped.max_questions(record)]:
            env.step(question)
        return turns(env.unwrapped.trajectory)

    for record in base.records[:8]:
        questions = ["Please elaborate.", *(canonical_question(a.term) for a in record.ambiguities)]
        # same credits and the reference answers: no SQL is left in the answers
        assert ask(hybrid, record, questions) == ask(reference, record, questions)


def test_hybrid_oracle_reveals_leaky_credit_with_reference_answers():
    base = AmbiTabEnv("bird")
    base.oracle = make_leaky_oracle("generic-credit-matcher", base.corpus)
    env = HybridOracle(base)
    record = next(r for r in base.records if r.m > 0)
    env.reset(seed=0, options={"record_id": record.id})
    env.step("Please elaborate.")
    turn = env.unwrapped.trajectory.turns[0]
    first = record.counted_ambiguities[0]
    assert turn.credits == {first.id}
    assert turn.answer == first.resolution


def test_hybrid_oracle_never_changes_the_env_oracle_and_takes_a_responder():
    # Changed behaviour (issue 15): the hybrid is handed to the env per episode
    # (reset options), so base.oracle stays the actual oracle at every point.
    base = AmbiTabEnv("taco")
    actual = base.oracle
    env = HybridOracle(base, responder=ReferenceResponder(prefer_response=False))
    assert base.oracle is actual and env.hybrid_oracle.matcher is actual.matcher
    assert env.hybrid_oracle.responder.prefer_response is False
    env.reset(seed=0)
    assert base.oracle is actual and base.episode_oracle is env.hybrid_oracle
    env.close()
    assert base.oracle is actual


# -- AdversarialProbe ------------------------------------------------------------------------


@pytest.mark.parametrize("corpus", ["bird", "ambiqt"])
def test_probe_with_full_asker_is_full_adv(corpus):
    probed = AdversarialProbe(AmbiTabEnv(corpus))
    direct = AmbiTabEnv(corpus)
    for record in direct.records:
        via_probe = turns(run(probed, FullAsker(), record))
        reference = turns(run(direct, FullAdvAsker(), record))
        assert via_probe == reference
        assert all(q.endswith(ADVERSARIAL_SUFFIX) for q, _, _ in via_probe)


def test_probe_leaves_stops_and_sql_alone_and_never_suffixes_twice():
    env = AdversarialProbe(AmbiTabEnv("bird", mode="agent"))
    env.reset(seed=0)
    assert env.reword(STOP) == STOP
    assert env.reword('{"type": "done", "output": ""}') == '{"type": "done", "output": ""}'
    once = env.reword('{"type": "clarification", "output": "Which year?"}')
    assert once == f"Which year? {ADVERSARIAL_SUFFIX}"
    assert env.reword(once) == once
    env.step(STOP)  # now the SQL phase
    assert env.reword("SELECT 1") == "SELECT 1"
    *_, terminated, _, info = env.step("SELECT 1")
    assert terminated and env.unwrapped.trajectory.sql == "SELECT 1"


def test_async_steps_go_through_every_wrapper():
    base = AmbiTabEnv("taco")
    base.oracle = make_leaky_oracle("leaky-sql-responder", base.corpus)
    env = AdversarialProbe(HybridOracle(SpecificationRandomization(base, seed=0)))
    record = next(r for r in base.records if r.m > 0)
    row = asyncio.run(play_episode(env, FullAsker(), record, seed=0))
    assert row["dialogue"] and all(
        t["question"].endswith(ADVERSARIAL_SUFFIX) and "SELECT" not in t["answer"]
        for t in row["dialogue"]
    )
    assert row["recall"] == 1.0  # the true record's terms, asked with the suffix, are credited


def test_public_names_resolve_lazily():
    assert ambitab_gym.wrappers.HybridOracle is HybridOracle
