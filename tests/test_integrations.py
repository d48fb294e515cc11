"""LLM-trainer adapters: their interfaces, full episodes, same reward as the raw env.

These tests need no trainer installed (the adapters' protocol methods are driven directly);
SkyRL is also tested against its own package here, and TRL, verifiers and verl inside the real,
installed trainers in ``tests/test_trainers_real.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect

import pytest

from ambitab_gym import STOP, AmbiTabEnv
from ambitab_gym.integrations import common
from ambitab_gym.integrations.common import (
    ChatSession,
    EpisodeScore,
    group_advantages,
    macro_means,
    score_episode,
)
from ambitab_gym.integrations.skyrl import AmbiTabTextEnv, skyrl_dataset
from ambitab_gym.integrations.trl import (
    AmbiTabToolEnvironment,
    trl_dataset,
    trl_environment_factory,
    trl_reward,
)
from ambitab_gym.integrations.verifiers import AmbiTabProtocol, verifiers_dataset
from ambitab_gym.integrations.verl import AmbiTabInteraction, verl_dataset

ENV_ID = "AmbiTab-Bird-v0"
# (record, the asker's replies in order; replies past the episode's end are not sent)
EPISODES = [
    ("bird-0006", ['What do you mean by "revenue"?', "Should the rows be sorted?", STOP]),
    ("bird-0006", ["Which year do you mean by last year?", 'What is "revenue"?', STOP]),
    ("bird-0014", ["Please elaborate."] * 10),  # the budget ends it
    ("bird-0027", [STOP]),  # no ambiguity: abstaining earns 1
    ("bird-0027", ["Which doctors?"]),  # no ambiguity: asking earns 0
    (
        "bird-0001",
        [
            '{"type": "clarification", "output": "Who counts as top customers?"}',
            "What do you mean by spending?",
            '{"type": "done", "output": ""}',
        ],
    ),
]


def _raw(record_id: str, actions: list[str]) -> tuple[float, list[tuple[str, str]]]:
    env = AmbiTabEnv("bird", split="all")  # any record, of either split
    env.reset(options={"record_id": record_id})
    total = 0.0
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        total += reward
        if terminated or truncated:
            break
    return total, [(t.question, t.answer) for t in env.trajectory.turns]


def _dialogue(env) -> list[tuple[str, str]]:
    return [(t.question, t.answer) for t in env.unwrapped.trajectory.turns]


@pytest.fixture(params=range(len(EPISODES)), ids=[f"{r}-{i}" for i, (r, _) in enumerate(EPISODES)])
def episode(request):
    record_id, actions = EPISODES[request.param]
    return record_id, actions, _raw(record_id, actions)


def test_raw_rewards_are_the_hand_worked_ones():
    # bird-0006 has two ambiguities (revenue, last year): two productive questions -> F1 1;
    # one productive of two asked, recall 1/2 -> F1 1/2 ("year" is an alias of "last year");
    # eight refused questions -> 0.
    assert [_raw(r, a)[0] for r, a in EPISODES] == [0.5, 1.0, 0.0, 1.0, 0.0, 1.0]


# -- ChatSession ---------------------------------------------------------------------------


def test_chat_session_reward_equals_raw(episode):
    record_id, actions, (reward, dialogue) = episode
    session = ChatSession(ENV_ID)
    session.start(record_id=record_id)
    for action in actions:
        if session.done:
            break
        session.step(action)
    assert session.done and session.reward == reward
    assert _dialogue(session.env) == dialogue
    with pytest.raises(RuntimeError, match="start"):
        session.step("more?")


# -- SkyRL: skyrl-gym/skyrl_gym/envs/base_text_env.py (NovaSky-AI/SkyRL) --------------------


def test_skyrl_published_interface():
    # BaseTextEnv: init(self, prompt) -> (prompt, metadata); step(self, action: str) ->
    # BaseTextEnvStepOutput{observations, reward, done, metadata, postprocessed_action};
    # close(self); attributes turns, max_turns. The generator builds envs with
    # skyrl_gym.make(env_class, env_config=..., extras=...).
    assert list(inspect.signature(AmbiTabTextEnv.__init__).parameters) == [
        "self",
        "env_config",
        "extras",
    ]
    assert list(inspect.signature(AmbiTabTextEnv.init).parameters) == ["self", "prompt"]
    assert list(inspect.signature(AmbiTabTextEnv.step).parameters) == ["self", "action"]
    assert list(inspect.signature(AmbiTabTextEnv.close).parameters) == ["self"]
    env = AmbiTabTextEnv({}, {"record_id": "bird-0014"})
    prompt, metadata = env.init([{"role": "user", "content": "ignored"}])
    assert isinstance(metadata, dict) and prompt[0]["role"] == "system"
    assert env.max_turns == 4 and env.turns == 0  # m = 1: at most 3 questions, then the stop
    out = env.step("Please elaborate.")
    assert set(out) == {"observations", "reward", "done", "metadata", "postprocessed_action"}
    assert out["observations"] == [{"role": "user", "content": "Sorry, I can't help with that."}]
    assert env.turns == 1
    env.close()


def _skyrl_episode(env, actions) -> float:
    env.init([])
    total, done = 0.0, False
    for action in actions:
        if done:
            break
        out = env.step(action)
        total += out["reward"]
        done = out["done"]
    assert done
    return total


def test_skyrl_reward_equals_raw(episode):
    record_id, actions, (reward, dialogue) = episode
    env = AmbiTabTextEnv({"env_id": ENV_ID}, {"extra_info": {"record_id": record_id}})
    assert _skyrl_episode(env, actions) == reward
    assert _dialogue(env.session.env) == dialogue


@pytest.mark.skipif(
    importlib.util.find_spec("skyrl_gym") is None, reason="skyrl-gym is not installed"
)
def test_skyrl_with_its_own_package():
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    from ambitab_gym.integrations.skyrl import register_skyrl

    assert issubclass(AmbiTabTextEnv, BaseTextEnv)
    env_class = register_skyrl()
    assert register_skyrl() == env_class  # registering twice is harmless
    rows = skyrl_dataset(ENV_ID, split="dev")
    assert len(rows) == 21 and {r["env_class"] for r in rows} == {env_class}
    row = next(r for r in rows if r["extra_info"]["record_id"] == "bird-0040")
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    # the env config names the dataset's split (the env's default is the train split)
    config = {"env_id": ENV_ID, "env_kwargs": {"split": "dev"}}
    env = skyrl_gym.make(env_class, env_config=config, extras=extras)
    assert isinstance(env, BaseTextEnv)
    prompt, _ = env.init(row["prompt"])
    assert prompt == row["prompt"]
    reward = _skyrl_episode(env, ['What do you mean by "overdue"?', STOP])
    assert reward == _raw("bird-0040", ['What do you mean by "overdue"?', STOP])[0] == 1.0


# -- verl < 0.9: verl/interactions/base.py (volcengine/verl; verl 0.9 removed it) --------


def test_verl_published_interface():
    # BaseInteraction.__init__(self, config: dict); async start_interaction(self,
    # instance_id=None, **kwargs) -> str; async generate_response(self, instance_id, messages,
    # **kwargs) -> (should_terminate_sequence, response_content, current_turn_score, data);
    # async calculate_score(...) -> float; async finalize_interaction(...) -> None.
    cls = AmbiTabInteraction
    assert list(inspect.signature(cls.__init__).parameters) == ["self", "config"]
    for name in (
        "start_interaction",
        "generate_response",
        "calculate_score",
        "finalize_interaction",
    ):
        assert inspect.iscoroutinefunction(getattr(cls, name)), name
    start = inspect.signature(cls.start_interaction).parameters
    assert list(start)[:2] == ["self", "instance_id"] and start["instance_id"].default is None
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in start.values())
    assert list(inspect.signature(cls.generate_response).parameters)[:3] == [
        "self",
        "instance_id",
        "messages",
    ]
    assert AmbiTabInteraction({"name": "ambitab"}).name == "ambitab"


async def _verl_episode(record_id, actions, interaction=None):
    interaction = interaction or AmbiTabInteraction({"name": "ambitab"})
    row = next(
        r
        for r in verl_dataset(ENV_ID)
        if r["extra_info"]["interaction_kwargs"]["record_id"] == record_id
    )
    kwargs = dict(row["extra_info"]["interaction_kwargs"])
    instance = await interaction.start_interaction(**kwargs)
    messages = list(row["prompt"])
    scores = []
    for action in actions:
        messages.append({"role": "assistant", "content": action})
        done, content, score, _ = await interaction.generate_response(instance, messages)
        scores.append(score)
        if done:
            break
        messages.append({"role": "user", "content": content})
    final = await interaction.calculate_score(instance)
    dialogue = _dialogue(interaction._session(instance).env)
    await interaction.finalize_interaction(instance)
    return done, sum(scores), final, dialogue


def test_verl_reward_equals_raw(episode):
    record_id, actions, (reward, dialogue) = episode
    done, summed, final, seen = asyncio.run(_verl_episode(record_id, actions))
    assert done and summed == final == reward and seen == dialogue


def test_verl_instances_are_independent():
    async def run():
        interaction = AmbiTabInteraction({})
        a = await interaction.start_interaction(record_id="bird-0014")
        b = await interaction.start_interaction(record_id="bird-0027")
        ask = [{"role": "assistant", "content": 'What is "recently"?'}]
        first = await interaction.generate_response(a, ask)
        other = await interaction.generate_response(b, ask)
        await interaction.finalize_interaction(a)
        with pytest.raises(KeyError, match="start_interaction"):
            await interaction.calculate_score(a)
        return first, other

    first, other = asyncio.run(run())
    assert first[0] is False and "Sorry" not in first[1]
    assert other[0] is True and other[2] == 0.0  # asking on m = 0 ends it with 0


# -- TRL: docs/source/openenv.md, "Environment class requirements" (huggingface/trl) --------


def test_trl_published_interface():
    # __init__ takes no argument; reset(self, **kwargs) -> str | None receives the dataset
    # columns; every other public method is a tool with a docstring documenting its Args;
    # reward functions take the instances as `environments`.
    Env = trl_environment_factory(ENV_ID, split="dev")
    assert issubclass(Env, AmbiTabToolEnvironment)
    assert list(inspect.signature(Env.__init__).parameters) == ["self"]
    reset = inspect.signature(Env.reset).parameters
    assert [p.kind for p in reset.values()][1:] == [inspect.Parameter.VAR_KEYWORD]
    tools = sorted(
        name
        for name, member in inspect.getmembers(Env, inspect.isfunction)
        if not name.startswith("_") and name != "reset"
    )
    assert tools == ["ask", "stop"]
    for name in tools:
        doc = inspect.getdoc(getattr(Env, name))
        params = [p for p in inspect.signature(getattr(Env, name)).parameters if p != "self"]
        assert doc and "Returns:" in doc
        for param in params:
            assert "Args:" in doc and f"{param}:" in doc
    assert list(inspect.signature(trl_reward).parameters) == ["environments", "kwargs"]
    row = trl_dataset(ENV_ID, split="dev")[0]
    assert "`ask` tool" in row["prompt"][0]["content"]
    assert Env().reset(**row) is None  # all columns as keyword arguments


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)
def test_trl_tools_have_json_schemas():
    from transformers.utils import get_json_schema

    env = AmbiTabToolEnvironment()
    schema = get_json_schema(env.ask)
    assert schema["function"]["name"] == "ask"
    assert list(schema["function"]["parameters"]["properties"]) == ["question"]
    assert get_json_schema(env.stop)["function"]["name"] == "stop"


def test_trl_reward_equals_raw(episode):
    record_id, actions, (reward, dialogue) = episode
    env = trl_environment_factory(ENV_ID)()
    env.reset(record_id=record_id, prompt=[])
    for action in actions:
        if env.done:
            break
        if action in (STOP, '{"type": "done", "output": ""}'):
            assert env.stop() == "Stopped asking."
        else:
            env.ask(action)
    assert trl_reward([env]) == [reward]
    assert _dialogue(env._session.env) == dialogue
    if env.done:
        with pytest.raises(ValueError, match="Asking is over"):
            env.ask("One more?")


def test_trl_reward_stops_open_episodes():
    env = AmbiTabToolEnvironment()
    env.reset(record_id="bird-0014")
    env.ask('What do you mean by "recently"?')
    assert not env.done
    assert trl_reward([env]) == [1.0] and env.done  # the model stopped calling tools


# -- verifiers: verifiers/envs/multiturn_env.py of verifiers 0.1.10 (PrimeIntellect-ai) -----


def test_verifiers_published_interface():
    # async setup_state(self, state) -> State; async env_response(self, messages, state,
    # **kwargs) -> Messages; stop conditions async (self, state) -> bool; rubric functions
    # receive the state.
    for name in ("setup_state", "env_response", "episode_over", "question_f1"):
        assert inspect.iscoroutinefunction(getattr(AmbiTabProtocol, name)), name
    assert list(inspect.signature(AmbiTabProtocol.setup_state).parameters)[:2] == ["self", "state"]
    assert list(inspect.signature(AmbiTabProtocol.env_response).parameters)[:3] == [
        "self",
        "messages",
        "state",
    ]
    assert list(inspect.signature(AmbiTabProtocol.episode_over).parameters)[:2] == [
        "self",
        "state",
    ]


async def _verifiers_rollout(protocol, row, replies):
    # MultiTurnEnv.rollout of verifiers 0.1.10, with a scripted model.
    state = {"prompt": row["prompt"], "info": row["info"], "trajectory": []}
    state = await protocol.setup_state(state)
    replies = iter(replies)
    while not await protocol.episode_over(state):
        if not state["trajectory"]:
            prompt_messages = state["prompt"]
        else:
            last = state["trajectory"][-1]
            messages = last["prompt"] + last["completion"]
            prompt_messages = messages + await protocol.env_response(messages, state)
        if state.get("final_env_response") is not None:
            continue
        completion = [{"role": "assistant", "content": next(replies)}]
        state["trajectory"].append({"prompt": prompt_messages, "completion": completion})
        # get_prompt_messages of the next turn calls env_response on this completion
        if len(state["trajectory"]) > 50:
            raise AssertionError("rollout did not end")
    return state


def test_verifiers_reward_equals_raw(episode):
    record_id, actions, (reward, dialogue) = episode
    row = next(r for r in verifiers_dataset(ENV_ID) if r["info"]["record_id"] == record_id)
    protocol = AmbiTabProtocol(ENV_ID)
    state = asyncio.run(_verifiers_rollout(protocol, row, actions))
    assert state["final_env_response"] is not None
    assert asyncio.run(protocol.question_f1(state)) == reward
    assert _dialogue(state["ambitab"].env) == dialogue


def test_verifiers_load_environment_explains_what_it_needs():
    from ambitab_gym.integrations.verifiers import load_environment

    if importlib.util.find_spec("verifiers") is None:
        with pytest.raises(ImportError, match="verifiers"):
            load_environment(ENV_ID)


# -- shared pieces -------------------------------------------------------------------------


def test_group_advantages_hand_worked():
    result = group_advantages([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5], [1.0, 1.0, 1.0, 0.0]])
    # group 1: mean 1/2, sample sd sqrt(1/3) -> +-0.866; group 3: mean 3/4, sd 1/2
    assert [round(a, 4) for a in result.advantages[0]] == [0.866, -0.866, -0.866, 0.866]
    assert result.advantages[1] == (0.0, 0.0, 0.0, 0.0)
    assert [round(a, 4) for a in result.advantages[2]] == [0.5, 0.5, 0.5, -1.5]
    assert result.kept == (True, False, True) and not result.all_constant
    constant = group_advantages([[0.0, 0.0], [1.0, 1.0]])
    assert constant.kept == (True, False) and constant.all_constant
    assert constant.advantages == ((0.0, 0.0), (0.0, 0.0))
    near = group_advantages([[0.3, 0.3 + 1e-9]])
    assert near.kept == (True,) and near.all_constant  # sd <= 1e-6 counts as constant


def test_score_episode_and_summary():
    env = AmbiTabEnv("bird")
    env.reset(options={"record_id": "bird-0006"})
    env.step('What do you mean by "revenue"?')
    env.step("Which year?")
    env.step("Please elaborate.")
    env.step(STOP)
    score = score_episode(env.trajectory, env.record)
    # 3 questions, 2 productive, both ambiguities covered: p = 2/3, r = 1, F1 = 0.8
    assert score.n_questions == 3 and score.recall == 1.0
    assert score.precision == pytest.approx(2 / 3) and score.f1 == pytest.approx(0.8)
    # an m = 0 episode that abstained: C.3 leaves it out of recall and F1 (it used to count as
    # F1 = 1 here, giving 0.9; evaluation never counted it - one definition now)
    summary = macro_means([score, EpisodeScore("x", None, None, None, None, 0)])
    assert summary["f1"] == pytest.approx(0.8) and summary["precision"] == pytest.approx(2 / 3)
    assert summary["episodes"] == 2 and summary["questions"] == 1.5
    assert common.__all__  # the module's public names exist
