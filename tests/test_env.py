"""The ask-then-solve protocol of AmbiTabEnv (docs/design.md section 4, Protocol)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from bundled import ALL_ENV_IDS
from gymnasium.utils.env_checker import check_env

import ambitab_gym
from ambitab_gym import STOP, AmbiTabEnv
from ambitab_gym.corpora import BUNDLED_DIR, load_corpus
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
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
    env = gym.make(env_id, split="all")
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
    env = gym.make(env_id, split="all")
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


# -- splits (issue 31): the default never draws a held-out record ----------------------------

#: (env id, corpus) of the bundled samples with a train split and held-out records
SPLIT_CORPORA = [
    ("AmbiTab-Bird-v0", "bird"),
    ("AmbiTab-EW-Bird-v0", "ew_bird"),
    ("AmbiTab-Ambrosia-v0", "ambrosia"),
]
#: (env id, corpus) of the bundled samples with one split (``all``)
UNSPLIT_CORPORA = [
    ("AmbiTab-AmbiQT-v0", "ambiqt"),
    ("AmbiTab-TACO-v0", "taco"),
    ("AmbiTab-BIRD-Interact-v0", "bird_interact"),
]


def ids_by_split(folder: Path) -> dict[str, set[str]]:
    """Record ids per split, read from the corpus's records file (not through the env)."""
    out: dict[str, set[str]] = {}
    for line in (folder / "records.jsonl").read_text("utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            out.setdefault(record["split"], set()).add(record["id"])
    return out


def drawn_ids(env, seeds=range(300)) -> set[str]:
    """The record ids ``reset(seed=s)`` draws over the seeds, and over unseeded resets."""
    seen = set()
    for seed in seeds:
        env.reset(seed=seed)
        seen.add(env.unwrapped.record.id)
    for _ in range(100):
        env.reset()
        seen.add(env.unwrapped.record.id)
    return seen


@pytest.mark.parametrize(("env_id", "name"), SPLIT_CORPORA)
def test_default_split_draws_only_train_records(env_id, name, data_home):
    splits = ids_by_split(BUNDLED_DIR / name)
    train = splits["train"]
    held_out = set().union(*(ids for split, ids in splits.items() if split != "train"))
    assert held_out, f"the {name} sample has held-out records to leak"
    env = gym.make(env_id)
    seen = drawn_ids(env)
    assert seen <= train, f"the default drew held-out records: {sorted(seen - train)}"
    assert len(seen) > len(train) // 2  # the seeds reach across the train split
    assert {r.id for r in env.unwrapped.records} == train
    assert env.unwrapped.split == env.unwrapped.metadata["split"] == "train"
    # naming a held-out record does not slip past the default either
    with pytest.raises(ConfigurationError, match="not among this env's records: it is in split"):
        env.reset(options={"record_id": sorted(held_out)[0]})
    # the default is the same as naming the split, in a vector env too
    named = gym.make(env_id, split="train")
    assert drawn_ids(named, range(50)) == drawn_ids(gym.make(env_id), range(50))
    envs = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync")
    try:
        envs.reset(seed=0)
        assert all({r.id for r in e.unwrapped.records} == train for e in envs.envs)
    finally:
        envs.close()


@pytest.mark.parametrize(("env_id", "name"), SPLIT_CORPORA)
def test_named_held_out_split_gives_only_its_records(env_id, name, data_home):
    splits = ids_by_split(BUNDLED_DIR / name)
    (held_out,) = [split for split in splits if split != "train"]  # dev, or test (Ambrosia)
    env = gym.make(env_id, split=held_out)
    assert drawn_ids(env) == splits[held_out]  # 300 seeds reach every one of them
    assert {r.id for r in env.unwrapped.records} == splits[held_out]
    assert env.unwrapped.metadata["split"] == held_out


@pytest.mark.parametrize(("env_id", "name"), SPLIT_CORPORA)
def test_split_all_gives_every_split(env_id, name, data_home):
    splits = ids_by_split(BUNDLED_DIR / name)
    env = gym.make(env_id, split="all")
    assert {r.id for r in env.unwrapped.records} == set().union(*splits.values())
    seen = drawn_ids(env)
    assert all(seen & ids for ids in splits.values())  # resets draw from each split
    assert env.unwrapped.split == "all"


@pytest.mark.parametrize("split", ["validation", "Train", "dev ", "test"])
def test_unknown_split_names_the_valid_ones(split, data_home):
    with pytest.raises(ConfigurationError) as error:
        gym.make("AmbiTab-Bird-v0", split=split)
    message = str(error.value)
    assert f"no split {split!r}" in message
    assert "valid splits: ['train', 'dev', 'all']" in message
    with pytest.raises(ConfigurationError, match="split must be a split name or None"):
        gym.make("AmbiTab-Bird-v0", split=["train"])


@pytest.mark.parametrize(("env_id", "name"), UNSPLIT_CORPORA)
def test_corpus_without_splits_gives_every_record_by_default(env_id, name, data_home, recwarn):
    splits = ids_by_split(BUNDLED_DIR / name)
    assert list(splits) == ["all"]
    env = gym.make(env_id)
    assert {r.id for r in env.unwrapped.records} == splits["all"]
    assert drawn_ids(env, range(100)) <= splits["all"]
    assert env.unwrapped.split == "all"
    assert not [w for w in recwarn if "split" in str(w.message)]
    assert {r.id for r in gym.make(env_id, split="all").unwrapped.records} == splits["all"]
    with pytest.raises(ConfigurationError, match=r"valid splits: \['all'\]"):
        gym.make(env_id, split="train")


def test_procedural_env_needs_no_split(data_home):
    for domains in ("train", "test"):
        env = gym.make("AmbiTab-Procedural-v0", domains=domains, ambiguities=(1, 1))
        env.reset(seed=0)
        assert env.unwrapped.split == "all" and env.unwrapped.record.split == domains
        env.close()


def test_several_splits_without_train_warn_and_give_every_record(tmp_path, data_home):
    folder = tmp_path / "bird_dev_test"
    shutil.copytree(BUNDLED_DIR / "bird", folder)
    path = folder / "records.jsonl"
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    for record in records:
        record["split"] = "test" if record["split"] == "train" else record["split"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    with pytest.warns(UserWarning, match=r"has splits \['test', 'dev'\] and no 'train' split"):
        env = AmbiTabEnv(folder)
    assert {r.id for r in env.records} == {r["id"] for r in records}
    assert env.split == "all"


def test_record_ids_without_a_split_come_from_every_split(data_home):
    splits = ids_by_split(BUNDLED_DIR / "bird")
    chosen = [sorted(splits["train"])[0], sorted(splits["dev"])[0]]
    env = gym.make("AmbiTab-Bird-v0", record_ids=chosen)
    assert [r.id for r in env.unwrapped.records] == sorted(chosen)
    with pytest.raises(ConfigurationError, match="not in split 'train' of corpus 'bird'"):
        gym.make("AmbiTab-Bird-v0", split="train", record_ids=chosen)


def test_evaluate_keeps_every_record_of_the_corpus(tmp_path, data_home):
    """``evaluate`` (``run_campaign``) runs the corpus's whole evaluation pool, not the env's
    default train split; ``--split`` still narrows it."""
    splits = ids_by_split(BUNDLED_DIR / "bird")
    every = set().union(*splits.values())
    config = CampaignConfig("AmbiTab-Bird-v0", asker="full", seeds=(0,))
    summary = run_campaign(config, tmp_path / "r.duckdb", progress=False)
    assert summary.episodes == 3 * len(every)
    with ResultsStore(tmp_path / "r.duckdb") as store:
        rows = store.episodes()
    for condition in ("none", "asker", "full"):
        assert {r["record_id"] for r in rows if r["condition"] == condition} == every
    dev = CampaignConfig("AmbiTab-Bird-v0", asker="full", seeds=(0,), split="dev")
    run_campaign(dev, tmp_path / "dev.duckdb", progress=False)
    with ResultsStore(tmp_path / "dev.duckdb") as store:
        assert {r["record_id"] for r in store.episodes()} == splits["dev"]


def test_an_unknown_record_id_names_the_closest_ids(data_home):
    env = AmbiTabEnv("bird", split="all")
    with pytest.raises(ConfigurationError) as error:
        env.reset(options={"record_id": "bird-00x1"})
    message = str(error.value)
    # by hand: "bird-00x1" shares 8 of 9 characters with each of bird-0001, bird-0011, ...,
    # bird-0051 (ratio 16/18) and fewer with the rest; difflib ranks (ratio, id) pairs, so the
    # tie goes to the larger ids
    assert "closest ids: 'bird-0051', 'bird-0041', 'bird-0031'" in message
    assert "records.jsonl" in message
