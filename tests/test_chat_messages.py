"""ChatMessages: transcripts of the visible dialogue, text actions, the chat space."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from ambitab_gym import STOP, AmbiTabEnv
from ambitab_gym.wrappers import ChatMessages
from ambitab_gym.wrappers.chat import SQL_REQUEST, ChatSpace, new_messages

QUESTIONS = ['What do you mean by "revenue"?', "Which year?", "Anything else?"]


def test_transcript_mirrors_the_raw_dialogue():
    raw = AmbiTabEnv("bird")
    chat = ChatMessages(AmbiTabEnv("bird"))
    raw_obs, _ = raw.reset(options={"record_id": "bird-0006"})
    messages, _ = chat.reset(options={"record_id": "bird-0006"})
    assert len(messages) == 1 and messages[0]["role"] == "system"
    system = messages[0]["content"]
    assert raw_obs["task"] in system  # the whole public task
    assert "at most 4 questions" in system and STOP in system
    answers = []
    for question in QUESTIONS[:2]:
        raw_obs, *_ = raw.step(question)
        messages, reward, terminated, truncated, _ = chat.step(question)
        answers.append(raw.trajectory.turns[-1].answer)
    assert [m["role"] for m in messages] == ["system", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in messages[1:]] == [
        QUESTIONS[0],
        answers[0],
        QUESTIONS[1],
        answers[1],
    ]
    assert messages[0]["content"] == system  # the system message stays fixed
    raw_result = raw.step(STOP)
    chat_result = chat.step(STOP)
    assert chat_result[1] == raw_result[1] and chat_result[2] and raw_result[2]


def test_json_actions_are_parsed():
    chat = ChatMessages(gym.make("AmbiTab-Bird-v0"))
    chat.reset(options={"record_id": "bird-0014"})
    reply = json.dumps({"type": "clarification", "output": 'What is "recently"?'})
    messages, *_ = chat.step(reply)
    assert messages[1] == {"role": "assistant", "content": 'What is "recently"?'}
    assert messages[2]["role"] == "user" and "Sorry" not in messages[2]["content"]
    messages, reward, terminated, _, info = chat.step('{"type": "done", "output": ""}')
    assert terminated and reward == 1.0 and info["stop_reason"] == "asker"
    assert len(messages) == 3  # a stop adds no message


def test_agent_mode_asks_for_sql_and_verifies_it():
    env = AmbiTabEnv("bird", mode="agent", reward="outcome")
    chat = ChatMessages(env)
    chat.reset(options={"record_id": "bird-0016"})  # no ambiguity: one decision
    messages, reward, terminated, _, _ = chat.step(STOP)
    assert not terminated and messages[-1] == {"role": "user", "content": SQL_REQUEST}
    sql = env.record.verification.reference_sql  # the test plays a perfect solver
    messages, reward, terminated, _, info = chat.step(sql)
    assert terminated and reward == 1.0 and info["success"] is True


def test_system_prompt_holds_no_hidden_text():
    chat = ChatMessages(AmbiTabEnv("bird"))
    for record in chat.unwrapped.records:
        messages, info = chat.reset(options={"record_id": record.id})
        system = messages[0]["content"]
        for ambiguity in record.ambiguities:
            for hidden in (ambiguity.resolution, ambiguity.response, ambiguity.sql_snippet):
                if hidden and hidden not in record.spec.request:
                    assert hidden not in system, (record.id, hidden)
        assert record.verification.reference_sql not in system
        assert record.id not in system and not any(k in info for k in ("credits", "record_id"))


def test_custom_prompt_template():
    chat = ChatMessages(
        gym.make("AmbiTab-Bird-v0"), prompt="Budget {budget}; stop with {stop}.\n{task}"
    )
    messages, _ = chat.reset(options={"record_id": "bird-0001"})  # m = 2: 4 questions
    assert messages[0]["content"].startswith(f"Budget 4; stop with {STOP}.\nRequest: List the")


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
def test_check_env_passes():
    check_env(ChatMessages(gym.make("AmbiTab-Bird-v0").unwrapped))


def test_chat_space():
    space = ChatSpace(max_messages=3, max_length=5, seed=1)
    assert space.contains([{"role": "system", "content": "hello"}])
    assert not space.contains([{"role": "system", "content": "hello!"}])  # too long
    assert not space.contains([{"role": "user", "content": 1}])
    assert not space.contains([{"role": "user", "content": "a", "name": "x"}])
    assert not space.contains([{"role": "user", "content": "a"}] * 4)
    assert not space.contains(({"role": "user", "content": "a"},))
    samples = [space.sample() for _ in range(20)]
    assert all(space.contains(s) for s in samples)
    assert all(s[0]["role"] == "system" for s in samples)
    again = ChatSpace(max_messages=3, max_length=5, seed=1)
    assert [again.sample() for _ in range(20)] == samples
    assert space == ChatSpace(max_messages=3, max_length=5) and space != ChatSpace(4)


def test_observation_space_bounds_every_transcript():
    chat = ChatMessages(gym.make("AmbiTab-Bird-v0"))
    for seed in range(10):
        messages, _ = chat.reset(seed=seed)
        done = False
        while not done:
            messages, _, terminated, truncated, _ = chat.step("Please elaborate.")
            assert chat.observation_space.contains(messages)
            done = terminated or truncated


def test_new_messages():
    before = [{"role": "system", "content": "s"}]
    after = before + [
        {"role": "assistant", "content": "q"},
        {"role": "user", "content": "a"},
    ]
    assert new_messages(before, after) == [{"role": "user", "content": "a"}]
    assert new_messages(after, after + [{"role": "user", "content": SQL_REQUEST}]) == [
        {"role": "user", "content": SQL_REQUEST}
    ]
    assert new_messages(after, after) == []
