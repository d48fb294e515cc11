"""Wrapper stacks (issue 15): the agent sees only the agent's view, whatever reads it.

* A matrix of agent-side readers (``ChatMessages``, ``QuestionMenu``, ``ChatSession``, the
  SkyRL, verl, TRL, verifiers and SB3 adapters) x leakage stacks (``SpecificationRandomization``,
  ``HybridOracle``, ``AdversarialProbe``, alone and in both orders): under randomization no
  task text the asker receives (observations, system prompts, dataset prompts, menu
  candidates) holds the true request or database name, and the oracle still judges every
  question against the true record (replayed on a plain env).
* Invalid stack orders raise ``StackOrderError`` at construction.
* ``HybridOracle`` is composed per episode and never changes the env's oracle.
* Q_x donors come from the whole corpus (every split), on another database, drawn once per
  campaign, stored with it and reused across seeds.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import TimeLimit

from ambitab_gym import STOP, AmbiTabEnv
from ambitab_gym.corpora import load_corpus
from ambitab_gym.diagnostics import LeakageConfig, SchemaProbeAsker, run_leakage
from ambitab_gym.evaluation import ResultsStore
from ambitab_gym.integrations.common import ChatSession, apply_wrappers, score_episode
from ambitab_gym.integrations.skyrl import AmbiTabTextEnv, skyrl_dataset
from ambitab_gym.integrations.trl import trl_dataset, trl_environment_factory
from ambitab_gym.integrations.verifiers import AmbiTabProtocol, verifiers_dataset
from ambitab_gym.integrations.verl import AmbiTabInteraction, verl_dataset
from ambitab_gym.oracles import ReferenceResponder, canonical_question, deterministic_oracle
from ambitab_gym.oracles.leaky import make_leaky_oracle
from ambitab_gym.policies.scripted import ADVERSARIAL_SUFFIX, FullAsker
from ambitab_gym.records import TaskRecord
from ambitab_gym.trajectory import PublicView, Trajectory
from ambitab_gym.wrappers import (
    AdversarialProbe,
    ChatMessages,
    HybridOracle,
    QuestionMenu,
    SpecificationRandomization,
    StackOrderError,
    agent_view,
)
from ambitab_gym.wrappers.leakage import draw_replacements
from ambitab_gym.wrappers.menu import build_menu

ENV_ID = "AmbiTab-Bird-v0"
SPLIT = "dev"  # two databases; the train split has three others
CORPUS = load_corpus("bird")
LEAKY = make_leaky_oracle("leaky-sql-responder", CORPUS)  # every answer ends with the SQL
ENV_KWARGS = {"split": SPLIT, "oracle": LEAKY}
REFERENCE = deterministic_oracle(CORPUS.manifest.oracle)

# Leakage stacks below the agent-side layer, innermost first.
STACKS: dict[str, tuple[Callable[[gym.Env], gym.Env], ...]] = {
    "none": (),
    "spec": (SpecificationRandomization,),
    "hybrid": (HybridOracle,),
    "probe": (AdversarialProbe,),
    "hybrid-spec": (HybridOracle, SpecificationRandomization),
    "spec-hybrid": (SpecificationRandomization, HybridOracle),
    "probe-spec": (AdversarialProbe, SpecificationRandomization),
    "spec-probe": (SpecificationRandomization, AdversarialProbe),
    "hybrid-probe-spec": (HybridOracle, AdversarialProbe, SpecificationRandomization),
}

# The donors the stacks draw (seed 0, the dev records as receivers, the whole corpus as pool).
DONORS = SpecificationRandomization(AmbiTabEnv("bird", split=SPLIT), seed=0)
DEV = [r for r in CORPUS.split(SPLIT) if r.m > 0]
# records of both dev databases, the first one of each AVT
RECORDS = [r for db in ("flights", "library") for r in DEV if r.spec.database == db][::5]


def test_the_records_cover_both_dev_databases_and_donors_from_train():
    assert {r.spec.database for r in RECORDS} == {"flights", "library"}
    assert "train" in {DONORS.replacement(r).split for r in RECORDS}


# -- what an episode shows ---------------------------------------------------------------------


@dataclass
class Seen:
    """What the asker received in one episode, and the privileged trajectory."""

    task_texts: list[str]  # prompts, system messages, observations' task
    answers: list[str]  # the answers as the asker received them
    trajectory: Trajectory


def _chat_seen(prompt: Sequence[dict], added: Sequence[Sequence[dict]], trajectory) -> Seen:
    tasks = [m["content"] for m in prompt if m["role"] == "system"]
    answers = [m["content"] for batch in added for m in batch if m["role"] == "user"]
    return Seen(tasks, answers, trajectory)


def play_chat_messages(wrappers, record, actions) -> Seen:
    env = ChatMessages(apply_wrappers(gym.make(ENV_ID, **ENV_KWARGS), wrappers))
    messages, _ = env.reset(seed=0, options={"record_id": record.id})
    prompt, tasks = messages, []
    for action in actions:
        messages, _, terminated, truncated, _ = env.step(action)
        tasks += [m["content"] for m in messages if m["role"] == "system"]
        if terminated or truncated:
            break
    seen = _chat_seen(prompt, [messages[1:]], env.get_wrapper_attr("trajectory"))
    seen.task_texts += tasks
    return seen


def play_chat_session(wrappers, record, actions) -> Seen:
    session = ChatSession(ENV_ID, env_kwargs=ENV_KWARGS, wrappers=wrappers)
    prompt = session.start(record_id=record.id)
    added = []
    for action in actions:
        if session.done:
            break
        added.append(session.step(action)[0])
    return _chat_seen(prompt, added, session.env.get_wrapper_attr("trajectory"))


def play_skyrl(wrappers, record, actions) -> Seen:
    config = {"env_id": ENV_ID, "env_kwargs": ENV_KWARGS, "wrappers": list(wrappers)}
    rows = skyrl_dataset(ENV_ID, wrappers=wrappers, **ENV_KWARGS)
    row = next(r for r in rows if r["extra_info"]["record_id"] == record.id)
    env = AmbiTabTextEnv(config, {"extra_info": {"record_id": record.id}})
    prompt, _ = env.init(row["prompt"])
    added = []
    for action in actions:
        out = env.step(action)
        added.append(out["observations"])
        if out["done"]:
            break
    seen = _chat_seen(prompt, added, env.session.env.get_wrapper_attr("trajectory"))
    seen.task_texts += [m["content"] for m in row["prompt"]]
    return seen


def play_verl(wrappers, record, actions) -> Seen:
    rows = verl_dataset(ENV_ID, wrappers=wrappers, **ENV_KWARGS)
    row = next(r for r in rows if r["extra_info"]["interaction_kwargs"]["record_id"] == record.id)
    user = AmbiTabInteraction({"env_id": ENV_ID, "env_kwargs": ENV_KWARGS, "wrappers": wrappers})

    async def episode():
        iid = await user.start_interaction(record_id=record.id)
        trajectory = user._session(iid).env.get_wrapper_attr("trajectory")
        messages, answers = list(row["prompt"]), []
        for action in actions:
            messages.append({"role": "assistant", "content": action})
            done, response, _, _ = await user.generate_response(iid, messages)
            messages.append({"role": "user", "content": response})
            if response:
                answers.append(response)
            if done:
                break
        await user.finalize_interaction(iid)
        return answers, trajectory

    answers, trajectory = asyncio.run(episode())
    return Seen([m["content"] for m in row["prompt"]], answers, trajectory)


def play_trl(wrappers, record, actions) -> Seen:
    row = next(
        r
        for r in trl_dataset(ENV_ID, wrappers=wrappers, **ENV_KWARGS)
        if r["record_id"] == record.id
    )
    env = trl_environment_factory(ENV_ID, wrappers=wrappers, **ENV_KWARGS)()
    assert env.reset(record_id=record.id) is None  # the task is in the row's prompt
    answers = []
    for action in actions:
        if env.done:
            break
        if action == STOP:
            env.stop()
        else:
            answers.append(env.ask(action))
    trajectory = env._session.env.get_wrapper_attr("trajectory")
    return Seen([m["content"] for m in row["prompt"]], answers, trajectory)


def play_verifiers(wrappers, record, actions) -> Seen:
    rows = verifiers_dataset(ENV_ID, wrappers=wrappers, **ENV_KWARGS)
    row = next(r for r in rows if r["info"]["record_id"] == record.id)
    protocol = AmbiTabProtocol(ENV_ID, env_kwargs=ENV_KWARGS, wrappers=wrappers)

    async def episode():
        state = await protocol.setup_state({"info": row["info"], "prompt": row["prompt"]})
        messages, added = list(state["prompt"]), []
        for action in actions:
            if await protocol.episode_over(state):
                break
            messages.append({"role": "assistant", "content": action})
            new = await protocol.env_response(messages, state)
            messages += new
            added.append(new)
        return state, added

    state, added = asyncio.run(episode())
    seen = _chat_seen(state["prompt"], added, state["ambitab"].env.get_wrapper_attr("trajectory"))
    seen.task_texts += [m["content"] for m in row["prompt"]]
    return seen


CHAT_SURFACES = {
    "ChatMessages": play_chat_messages,
    "ChatSession": play_chat_session,
    "skyrl": play_skyrl,
    "verl": play_verl,
    "trl": play_trl,
    "verifiers": play_verifiers,
}


# -- checks ------------------------------------------------------------------------------------


def _names(text: str, database: str) -> bool:
    return re.search(rf"\b{re.escape(database)}\b", text, re.IGNORECASE) is not None


def check_task_texts(texts: Sequence[str], record: TaskRecord, randomized: bool) -> None:
    assert texts and all(texts)
    shown = "\n".join(texts)
    if randomized:
        donor = DONORS.replacement(record)
        assert record.spec.request not in shown
        assert not _names(shown, record.spec.database), record.spec.database
        assert f"Request: {donor.spec.request}" in shown
        assert f"Database: {donor.spec.database}" in shown
    else:
        assert f"Request: {record.spec.request}" in shown
        assert f"Database: {record.spec.database}" in shown


def replay(record: TaskRecord, questions: Sequence[str], oracle) -> list[tuple]:
    """The same questions on a plain env holding the true record: (credits, answer) each."""
    env = AmbiTabEnv("bird", split="all", oracle=oracle)
    env.reset(seed=0, options={"record_id": record.id})
    for question in questions:
        env.step(question)
    return [(t.credits, t.answer) for t in env.trajectory.turns]


def check_oracle_saw_the_truth(seen: Seen, record: TaskRecord, wrappers) -> None:
    trajectory = seen.trajectory
    assert trajectory.record_id == record.id and trajectory.turns
    hybrid = HybridOracle in wrappers
    oracle = REFERENCE if hybrid else LEAKY  # (match, resp*) of the leaky responder is O*
    questions = [t.question for t in trajectory.turns]
    assert [(t.credits, t.answer) for t in trajectory.turns] == replay(record, questions, oracle)
    sql = record.verification.reference_sql
    assert all((sql in answer) != hybrid for answer in seen.answers)
    probed = AdversarialProbe in wrappers
    assert all(q.endswith(ADVERSARIAL_SUFFIX) == probed for q in questions)


# -- the matrix: chat surfaces x leakage stacks ------------------------------------------------


@pytest.mark.parametrize("stack", list(STACKS))
@pytest.mark.parametrize("surface", list(CHAT_SURFACES))
def test_chat_surfaces_show_only_the_agents_view(surface, stack):
    wrappers = STACKS[stack]
    randomized = SpecificationRandomization in wrappers
    for record in RECORDS:
        term = record.counted_ambiguities[0]
        actions = [canonical_question(term.term), "Please elaborate.", STOP]
        seen = CHAT_SURFACES[surface](wrappers, record, actions)
        check_task_texts(seen.task_texts, record, randomized)
        check_oracle_saw_the_truth(seen, record, wrappers)
        # the matcher read the true record: naming the true term is credited
        assert term.id in seen.trajectory.turns[0].credits
        # the asker gets the true dialogue (Definition 6: only x is replaced)
        assert seen.answers == [t.answer for t in seen.trajectory.turns]


@pytest.mark.parametrize("stack", list(STACKS))
def test_question_menu_is_built_from_the_agents_view(stack):
    wrappers = STACKS[stack]
    randomized = SpecificationRandomization in wrappers
    differs_from_donor = False
    for record in RECORDS:
        env = QuestionMenu(apply_wrappers(gym.make(ENV_ID, **ENV_KWARGS), wrappers), n_slots=12)
        obs, _ = env.reset(seed=0, options={"record_id": record.id})
        shown = DONORS.replacement(record) if randomized else record
        expected = build_menu(PublicView(CORPUS.public_spec(shown)), n_slots=12)
        assert [i.question for i in env.candidates()] == [i.question for i in expected.items]
        candidates = "\n".join(i.question for i in env.candidates())
        if randomized:
            assert not _names(candidates, record.spec.database)
            true_menu = build_menu(PublicView(CORPUS.public_spec(record)), n_slots=12)
            assert expected.items != true_menu.items
        assert agent_view(env).spec == CORPUS.public_spec(shown)
        # ask the menu's questions until the budget ends the episode, first those naming a
        # term of the shown record (the test knows them; the menu cannot)
        terms = {a.term.lower() for a in shown.ambiguities}
        items = list(env.candidates())
        slots = [i for i, item in enumerate(items) if item.phrase.lower() in terms]
        slots += [i for i in range(1, len(items)) if i not in slots] + [0]
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(slots.pop(0))
            done = terminated or truncated
        trajectory = env.get_wrapper_attr("trajectory")
        answers = [t.answer for t in trajectory.turns]
        check_oracle_saw_the_truth(Seen([], answers, trajectory), record, wrappers)
        if randomized:
            questions = [t.question for t in trajectory.turns]
            donor = DONORS.replacement(record)
            on_donor = AmbiTabEnv("bird", split="all")  # a donor may be a train record
            on_donor.reset(seed=0, options={"record_id": donor.id})
            for question in questions[: on_donor.max_questions(donor)]:
                on_donor.step(question)
            donor_credits = [t.credits for t in on_donor.trajectory.turns]
            true_credits = [t.credits for t in trajectory.turns][: len(donor_credits)]
            differs_from_donor |= any(donor_credits) and donor_credits != true_credits
    # the donor's own phrases are credited on the donor, not on the true record
    assert differs_from_donor or not randomized


@pytest.mark.parametrize("stack", ["spec", "hybrid-spec", "spec-probe"])
def test_sb3_menu_env_and_evaluation_under_randomization(stack):
    pytest.importorskip("stable_baselines3")
    from ambitab_gym.integrations.sb3 import evaluate_menu_policy, make_menu_env

    wrappers = STACKS[stack]
    env = make_menu_env(ENV_ID, n_slots=10, env_kwargs=ENV_KWARGS, wrappers=wrappers)
    menus = []

    def policy(obs: np.ndarray, menu_env: QuestionMenu) -> int:
        if not menus or menus[-1][1] is not menu_env.menu:
            menus.append((menu_env.get_wrapper_attr("record"), menu_env.menu))
            return 1  # the first generic question, then stop
        return 0

    summary, scores = evaluate_menu_policy(policy, env, [r.id for r in RECORDS])
    assert [s.record_id for s in scores] == [r.id for r in RECORDS]
    for (record, menu), score in zip(menus, scores, strict=True):
        donor = DONORS.replacement(record)
        expected = build_menu(PublicView(CORPUS.public_spec(donor)), n_slots=10)
        assert [i.question for i in menu.items] == [i.question for i in expected.items]
        # scored against the true record: the same question replayed on a plain env
        oracle = REFERENCE if HybridOracle in wrappers else LEAKY
        question = menu.question(1) + (
            f" {ADVERSARIAL_SUFFIX}" if AdversarialProbe in wrappers else ""
        )
        plain = AmbiTabEnv("bird", split=SPLIT, oracle=oracle)
        plain.reset(seed=0, options={"record_id": record.id})
        plain.step(question)
        plain.step(STOP)
        assert score == score_episode(plain.trajectory, record)


def test_a_full_asker_on_the_randomized_stack_is_credited_only_for_true_terms_it_names():
    for surface in ("ChatMessages", "ChatSession"):
        for record in RECORDS:
            donor = DONORS.replacement(record)
            # the privileged asker fed x' (the donor record) names the donor's terms
            randomized = FullAsker()
            randomized.reset(record=donor)
            actions = [randomized.act(None) for _ in donor.counted_ambiguities] + [STOP]
            seen = CHAT_SURFACES[surface](STACKS["spec"], record, actions)
            true_ids = {a.id for a in record.counted_ambiguities}
            true_terms = {
                " ".join(name.lower().split()): a.id
                for a in record.ambiguities
                for name in (a.term, *a.aliases)
            }
            for turn in seen.trajectory.turns:
                named = {
                    amb_id for term, amb_id in true_terms.items() if term in turn.question.lower()
                }
                assert turn.credits <= true_ids and turn.credits <= named, turn
            # the full asker fed the truth names the true terms and gets every credit
            truthful = FullAsker()
            truthful.reset(record=record)
            actions = [truthful.act(None) for _ in record.counted_ambiguities] + [STOP]
            seen = CHAT_SURFACES[surface](STACKS["spec"], record, actions)
            check_task_texts(seen.task_texts, record, randomized=True)
            assert set().union(*(t.credits for t in seen.trajectory.turns)) == true_ids


# -- stacks above the agent-side layer ---------------------------------------------------------


def test_hybrid_oracle_and_probe_may_wrap_an_agent_side_wrapper():
    record = RECORDS[0]
    sql = record.verification.reference_sql
    base = ChatMessages(SpecificationRandomization(gym.make(ENV_ID, **ENV_KWARGS)))
    env = AdversarialProbe(HybridOracle(base))
    messages, _ = env.reset(options={"record_id": record.id})
    check_task_texts([messages[0]["content"]], record, randomized=True)
    messages, *_ = env.step("Please elaborate.")
    assert messages[1]["content"].endswith(ADVERSARIAL_SUFFIX)
    assert sql not in messages[2]["content"]
    assert env.get_wrapper_attr("trajectory").record_id == record.id

    menu = HybridOracle(QuestionMenu(gym.make(ENV_ID, **ENV_KWARGS)))
    menu.reset(options={"record_id": record.id})
    menu.step(1)
    assert sql not in menu.get_wrapper_attr("trajectory").turns[0].answer


def _chat(env):
    return ChatMessages(env)


INVALID: dict[str, Callable[[], object]] = {
    "spec above ChatMessages": lambda: SpecificationRandomization(
        ChatMessages(gym.make(ENV_ID, split=SPLIT))
    ),
    "spec above QuestionMenu": lambda: SpecificationRandomization(
        QuestionMenu(gym.make(ENV_ID, split=SPLIT))
    ),
    "spec above a Gymnasium wrapper above ChatMessages": lambda: SpecificationRandomization(
        TimeLimit(ChatMessages(gym.make(ENV_ID, split=SPLIT)), 5)
    ),
    "probe above QuestionMenu": lambda: AdversarialProbe(QuestionMenu(gym.make(ENV_ID))),
    "ChatMessages above QuestionMenu": lambda: ChatMessages(QuestionMenu(gym.make(ENV_ID))),
    "QuestionMenu above ChatMessages": lambda: QuestionMenu(ChatMessages(gym.make(ENV_ID))),
    "two randomizations": lambda: SpecificationRandomization(
        HybridOracle(SpecificationRandomization(gym.make(ENV_ID)))
    ),
    "ChatSession over a chat stack": lambda: ChatSession(ENV_ID, wrappers=[_chat]),
    "skyrl over a chat stack": lambda: AmbiTabTextEnv({"wrappers": [_chat]}, {}),
    "trl over a chat stack": lambda: trl_environment_factory(ENV_ID, wrappers=[_chat])(),
}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_stack_orders_fail_at_construction(case):
    with pytest.raises(StackOrderError, match=r"below|one agent-side|at most one|text actions"):
        INVALID[case]()


def test_the_order_error_names_the_valid_order():
    with pytest.raises(StackOrderError) as error:
        SpecificationRandomization(ChatMessages(AmbiTabEnv("bird")))
    assert "ChatMessages(SpecificationRandomization(env))" in str(error.value)
    with pytest.raises(StackOrderError) as error:
        AdversarialProbe(QuestionMenu(AmbiTabEnv("bird")))
    assert "QuestionMenu(AdversarialProbe(env))" in str(error.value)


# -- the hybrid oracle is composed, never swapped in -----------------------------------------


class Exploding:
    """A responder that fails: an exception in the middle of a hybrid episode."""

    def respond(self, question, credits, context):
        raise RuntimeError("responder down")


def _answer(env, question="Please elaborate.", **options):
    env.reset(seed=0, options={"record_id": RECORDS[0].id, **options})
    env.step(question)
    return env.get_wrapper_attr("trajectory").turns[0].answer


def test_two_hybrid_oracles_over_one_env_leave_its_oracle_untouched():
    base = AmbiTabEnv("bird", split=SPLIT, oracle=LEAKY)
    sql = RECORDS[0].verification.reference_sql
    first = HybridOracle(base)
    second = HybridOracle(base, responder=ReferenceResponder(prefer_response=False))
    assert base.oracle is LEAKY
    assert first.actual_oracle is second.actual_oracle is LEAKY
    assert sql not in _answer(first) and base.episode_oracle is first.oracle
    assert sql not in _answer(second) and base.episode_oracle is second.oracle
    assert second.oracle.responder.prefer_response is False
    assert sql in _answer(base)  # a plain episode on the env: its own (leaky) oracle
    assert sql not in _answer(first)  # interleaving is fine: each episode gets its own
    first.close()
    assert base.oracle is LEAKY


def test_an_exception_between_hybrid_oracles_leaves_the_env_oracle_untouched():
    base = AmbiTabEnv("bird", split=SPLIT, oracle=LEAKY)
    broken = HybridOracle(base, responder=Exploding())
    with pytest.raises(RuntimeError, match="responder down"):
        _answer(broken)
    assert base.oracle is LEAKY
    sql = RECORDS[0].verification.reference_sql
    assert sql in _answer(base)
    after = HybridOracle(base)
    assert after.actual_oracle is LEAKY and sql not in _answer(after)
    with pytest.raises(TypeError, match="no attribute|not"):
        HybridOracle(base, responder=Exploding()).reset(options={"oracle": "leaky"})


def test_the_outermost_oracle_of_a_stack_answers_the_episode():
    base = AmbiTabEnv("bird", split=SPLIT, oracle=LEAKY)
    inner = HybridOracle(base)
    outer = HybridOracle(ChatMessages(inner), responder=ReferenceResponder(prefer_response=False))
    outer.reset(options={"record_id": RECORDS[0].id})
    assert base.episode_oracle is outer.get_wrapper_attr("oracle") is outer.oracle
    assert outer.oracle.matcher is LEAKY.matcher and base.oracle is LEAKY
    # a caller's explicit episode oracle wins over the stack's
    outer.reset(options={"record_id": RECORDS[0].id, "oracle": REFERENCE})
    assert base.episode_oracle is REFERENCE
    outer.reset(options={"record_id": RECORDS[0].id})
    assert base.episode_oracle is outer.oracle  # and lasts one episode only


# -- Q_x donors from the whole corpus ----------------------------------------------------------


def test_dev_receivers_draw_donors_from_every_split_on_other_databases():
    env = AmbiTabEnv("bird", split=SPLIT)
    splits, databases = set(), {}
    for seed in range(20):
        wrapper = SpecificationRandomization(env, seed=seed)
        for record in env.records:
            donor = wrapper.replacement(record)
            assert donor.spec.database != record.spec.database
            splits.add(donor.split)
            databases.setdefault(record.spec.database, set()).add(donor.spec.database)
    assert splits == {"dev", "train"}
    # from the dev split alone, flights could only draw library and vice versa
    assert all(len(found) >= 3 for found in databases.values()), databases


def test_a_campaign_stores_its_whole_corpus_donors_and_reuses_them(tmp_path):
    path = tmp_path / "results.duckdb"
    config = LeakageConfig(
        ENV_ID, asker="schema-probe", split=SPLIT, seeds=(0, 1), conditions=("spec:hybrid",)
    )
    records = CORPUS.split(SPLIT)
    expected = draw_replacements(records, CORPUS.records, np.random.default_rng(0))
    with ResultsStore(path) as store:
        run_leakage(config, store, progress=False, resamples=50)
        stored = store.campaign(config.campaign_id)["config"]["replacements"]
        rows = store.episodes(config.campaign_id)
    assert stored == {rid: donor.id for rid, donor in expected.items()}
    assert "train" in {CORPUS.record(d).split for d in stored.values()}
    for rid, did in stored.items():
        assert CORPUS.record(did).spec.database != CORPUS.record(rid).spec.database
    # the same map for every seed: the schema probe's questions name the donor's schema
    questions = {}
    for row in rows:
        if row["dialogue"]:
            questions.setdefault(row["record_id"], set()).add(row["dialogue"][0]["question"])
    assert questions and all(len(q) == 1 for q in questions.values())
    for rid, (first,) in questions.items():
        probe = SchemaProbeAsker()
        probe.reset()
        view = PublicView(CORPUS.public_spec(CORPUS.record(stored[rid])), questions_left=1)
        assert first == probe.act(view)


def test_a_resumed_campaign_uses_its_stored_map(tmp_path):
    path = tmp_path / "results.duckdb"
    config = LeakageConfig(
        ENV_ID, asker="schema-probe", split=SPLIT, seeds=(0,), conditions=("spec:hybrid",)
    )
    records = CORPUS.split(SPLIT)
    # a map unlike the seed's draw: every receiver gets one fixed train donor
    donor = next(r for r in CORPUS.split("train") if r.spec.database == "hospital")
    custom = {r.id: donor.id for r in records}
    with ResultsStore(path) as store:
        store.add_campaign(
            config.campaign_id, {"replacements": custom}, kind="leakage", corpus="bird"
        )
        run_leakage(config, store, progress=False, resamples=50)
        rows = store.episodes(config.campaign_id)
        assert store.campaign(config.campaign_id)["config"]["replacements"] == custom
    probe = SchemaProbeAsker()
    view = PublicView(CORPUS.public_spec(donor), questions_left=1)
    firsts = {row["dialogue"][0]["question"] for row in rows if row["dialogue"]}
    probe.reset()
    assert firsts == {probe.act(view)}
