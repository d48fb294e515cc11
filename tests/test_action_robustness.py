"""No action raises from ``step`` (issue 11): property tests of the action parser and the env.

Hostile actions: random JSON, 5,000-digit integers and 1e400 (Python refuses to convert integer
literals of more than 4,300 digits), 100,000 levels of nesting, lone surrogates, NUL characters,
random bytes and objects, enormous strings; in ask mode, in agent-solve mode (SQL actions), in
``astep`` and through an ``AsyncVectorEnv`` worker process.
"""

from __future__ import annotations

import asyncio
import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ambitab_gym  # noqa: F401  (registers the ids)
from ambitab_gym import STOP
from ambitab_gym.actions import (
    MAX_QUESTION_CHARS,
    parse_action,
    read_sql_action,
)
from ambitab_gym.textutil import CodeBlock, code_blocks, extract_sql, find_json_object

ENV_ID = "AmbiTab-Bird-v0"
FORMS = {"question", "stop", "json", "sql", "unreadable", "ignored"}
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

DIGITS = "7" * 5000
HUGE_INT = '{"type": "clarification", "output": ' + DIGITS + "}"
HUGE_FLOAT = '{"type": "clarification", "output": 1e400}'
DEEP = '{"type": "clarification", "output": ' + "[" * 100_000 + "]" * 100_000 + "}"
SURROGATE = "Which " + chr(0xD800) + "year?"
NUL = "Which\x00year?"


class _BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no text")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
json_actions = st.builds(
    lambda kind, output, extra: json.dumps({"type": kind, "output": output, **extra}),
    st.sampled_from(["clarification", "question", "done", "stop", "sql", "", "banana"])
    | st.text(max_size=10),
    json_values,
    st.dictionaries(st.text(max_size=5), json_values, max_size=2),
)
hostile_strings = st.sampled_from(
    [HUGE_INT, HUGE_FLOAT, DEEP, SURROGATE, NUL, "[" * 100_000, "{" * 100_000, "{}", "{" + "}"]
)
actions = (
    st.text()
    | st.lists(st.sampled_from([chr(0xD800), chr(0xDBFF), chr(0xDC00), "\x00", "a", "{", "}"])).map(
        "".join
    )
    | st.binary()
    | json_actions
    | json_values
    | hostile_strings
    | st.builds(np.str_, st.text())
    | st.builds(lambda: _BadStr())
    | st.builds(lambda b: bytearray(b), st.binary())
)

_ENVS: dict[str, gym.Env] = {}


def env_for(mode: str) -> gym.Env:
    if mode not in _ENVS:
        _ENVS[mode] = gym.make(ENV_ID, mode=mode)
    return _ENVS[mode]


def check_reading(reading, kinds) -> None:
    assert reading.kind in kinds
    assert isinstance(reading.text, str) and isinstance(reading.note, str)
    reading.text.encode("utf-8")  # storable: no lone surrogates
    assert "\x00" not in reading.text
    assert reading.form in FORMS and len(reading.note) < 300


def check_step(result) -> None:
    obs, reward, terminated, truncated, info = result
    assert isinstance(reward, float) and isinstance(terminated, bool)
    assert set(info) <= PUBLIC_INFO_KEYS, set(info) - PUBLIC_INFO_KEYS
    assert info["action_parse"] in FORMS
    obs["dialogue"].encode("utf-8")


# -- the parser -------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_parser_never_raises_and_returns_storable_text(action):
    reading = parse_action(action)
    check_reading(reading, {"question", "stop"})
    assert len(reading.text) <= MAX_QUESTION_CHARS and len(reading.raw) <= MAX_QUESTION_CHARS
    if reading.kind == "stop":
        assert reading.text == ""
    check_reading(read_sql_action(action), {"sql"})


def test_huge_numbers_are_kept_as_their_literal_text():
    with pytest.raises(ValueError):  # what the env used to hit: Python's int-parsing limit
        json.loads(HUGE_INT)
    reading = parse_action(HUGE_INT)
    assert (reading.kind, reading.form, reading.text, reading.note) == (
        "question",
        "json",
        DIGITS,
        "",
    )
    assert parse_action(HUGE_FLOAT).text == "1e400"
    assert read_sql_action('{"type": "sql", "output": ' + DIGITS + "}").text == DIGITS


def test_deep_nesting_is_unreadable_text_not_an_error():
    reading = parse_action(DEEP)
    assert (reading.kind, reading.form) == ("question", "unreadable")
    # 200,000 characters of brackets: also cut to the question bound
    assert reading.note == (
        "JSON nested too deeply: read as plain text; question cut to 10,000 characters"
    )
    assert reading.text.startswith('{"type": "clarification", "output": [[[')
    assert read_sql_action(DEEP).form == "unreadable"


def test_invalid_unicode_and_nul_are_replaced():
    reading = parse_action(SURROGATE)
    assert reading.text == "Which \ufffdyear?" and reading.form == "question"
    assert "lone surrogates" in reading.note
    assert parse_action(NUL).text == "Which\ufffdyear?"
    # a valid surrogate pair is joined into its character
    assert parse_action("\ud83d\ude00?").text == "\U0001f600?"
    # escapes inside JSON decode to lone surrogates too
    assert parse_action('{"type": "clarification", "output": "a\\ud800"}').text == "a\ufffd"


def test_non_text_actions():
    assert parse_action(None).form == "unreadable" and parse_action(None).text == ""
    assert parse_action(b"\xff\xfeWhich year?").text == "\ufffd\ufffdWhich year?"
    assert parse_action(b"Which year?").form == "question"
    assert parse_action(np.str_("Which year?")).text == "Which year?"
    assert type(parse_action(np.str_("Which year?")).text) is str
    assert parse_action({"type": "done"}).kind == "stop"
    assert parse_action({"type": "clarification", "output": "Top how many?"}).text == (
        "Top how many?"
    )
    reading = parse_action(_BadStr())
    assert (reading.kind, reading.text, reading.form) == ("question", "", "unreadable")
    assert parse_action(42).text == "42" and parse_action(42).form == "unreadable"


def test_enormous_strings_are_cut():
    reading = parse_action("why " * 5_000_000)  # 20 million characters
    assert len(reading.text) <= MAX_QUESTION_CHARS and reading.text.startswith("why why")
    assert reading.text.endswith("more characters cut]")
    assert "cut to 10,000 characters" in reading.note


# -- repeated code fences and comments: read in linear time (issue 30) --------------------------

FENCES = 100_000


def _fence_bodies(text: str, marker: str = "```") -> list[tuple[str, str]]:
    """A reference reading of a text made of ``marker`` fences only: the inside of each pair,
    as (label, body) for a label on its own line."""
    parts = text.split(marker)
    blocks = []
    for inner in parts[1:-1:2]:
        head, newline, rest = inner.partition("\n")
        if newline and head.strip().isalnum():
            blocks.append((head.strip().lower(), rest.strip()))
        else:
            blocks.append(("", inner.strip()))
    return blocks


def _reference_json(text: str) -> dict | None:
    """The first fenced JSON object among the first 64 fenced bodies that look like one."""
    candidates = [b for _, b in _fence_bodies(text) if b.startswith("{") and b.endswith("}")]
    for body in candidates[:64]:
        try:
            value = json.loads(body)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def test_repeated_code_fences_small_cases_by_hand():
    assert code_blocks("```{``````{```") == [CodeBlock("", "{"), CodeBlock("", "{")]
    sql = read_sql_action("```{```" * 3 + "```sql\nSELECT 1\n```")
    assert (sql.text, sql.form) == ("SELECT 1", "sql")
    done = '```json\n{"type": "clarification", "output": "Which year?"}\n```'
    assert parse_action("```{a}```" * 3 + done).text == "Which year?"
    # at most 64 fenced bodies that look like an object are decoded
    assert find_json_object("```{a}```" * 63 + done) == {
        "type": "clarification",
        "output": "Which year?",
    }
    assert find_json_object("```{a}```" * 64 + done) is None
    # a statement's lead: comments end at their first */, then the first word counts
    assert read_sql_action("/* a */ (select 1)").text == "/* a */ (select 1)"
    assert extract_sql("/*/*/ x") is None


@pytest.mark.parametrize(
    ("fence", "last"),
    [
        ("```{```", "```sql\nSELECT 42\n```"),
        ("```{a}```", '```json\n{"type": "done", "output": null}\n```'),
        ("```x```", "```SELECT 42```"),
        ("```(\n```", "```sql\nWITH a AS (SELECT 42) SELECT * FROM a\n```"),
    ],
    ids=["open-brace", "not-json", "plain", "parenthesis"],
)
def test_100000_repeated_code_fences_read_as_a_reference_reads_them(fence, last):
    text = fence * FENCES + last  # under MAX_JSON_CHARS: read, not taken literally
    blocks = _fence_bodies(text)
    assert len(blocks) == FENCES + 1
    assert [(b.label, b.body) for b in code_blocks(text)] == blocks
    found = _reference_json(text)
    assert find_json_object(text) == found
    sql = [b for label, b in blocks if label == "sql" or b.startswith(("SELECT", "WITH"))]
    reading = read_sql_action(text)
    assert reading.text == (sql[0] if sql else text) and found is None
    assert extract_sql(text, last=True) == (sql[-1] if sql else None)
    asked = parse_action(text)
    assert asked.kind == "question" and asked.text.startswith(fence)


@pytest.mark.parametrize(
    "text",
    ["/*/" * 20_000 + "x", "/**/" * 20_000 + "x", "x with a (" * 20_000, "(" * 50_000 + "x"],
    ids=["comment-splits", "empty-comments", "with-no-as", "parentheses"],
)
def test_comments_and_unfinished_ctes_are_read_in_linear_time(text):
    # Each once took minutes (backtracking into the ways of splitting /*/*/... into comments)
    # or seconds (every "WITH a (" read on to the end of the text).
    reading = read_sql_action(text)
    assert (reading.text, reading.form) == (text, "unreadable")
    assert extract_sql(text, strict=True) is None


# -- the env ----------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_step_never_raises_in_ask_mode(action):
    env = env_for("ask_only")
    env.reset(seed=0)
    result = env.step(action)
    check_step(result)
    turns = env.unwrapped.trajectory.turns
    for turn in turns:
        assert len(turn.question) <= MAX_QUESTION_CHARS and len(turn.action) <= MAX_QUESTION_CHARS
        turn.question.encode("utf-8")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_step_never_raises_in_agent_mode(action):
    env = env_for("agent")
    env.reset(seed=1)
    obs, *_ = env.step(STOP)
    assert obs["phase"] == 1
    result = env.step(action)
    check_step(result)
    assert result[2] is True and result[4]["success"] in (True, False)
    sql = env.unwrapped.trajectory.sql
    assert isinstance(sql, str) and "\x00" not in sql
    sql.encode("utf-8")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_astep_never_raises(action):
    env = env_for("ask_only")
    env.reset(seed=2)
    check_step(asyncio.run(env.unwrapped.astep(action)))


@pytest.mark.parametrize("action", [HUGE_INT, HUGE_FLOAT, DEEP, SURROGATE, NUL, None, b"\xff"])
def test_hostile_actions_in_each_phase_report_how_they_were_read(action):
    env = gym.make(ENV_ID, mode="agent")
    record = next(r for r in env.unwrapped.records if r.m > 0)
    env.reset(seed=0, options={"record_id": record.id})
    obs, _, terminated, _, info = env.step(action)
    assert not terminated and info["action_parse"] in {"json", "question", "unreadable"}
    assert obs["dialogue"].startswith("Q1: ")
    obs, _, terminated, _, info = env.step(STOP)
    assert obs["phase"] == 1 and info["action_parse"] == "stop" and info["action_note"] == ""
    obs, _, terminated, _, info = env.step(action)
    assert terminated and info["success"] is False
    # DEEP is 200,000 characters: longer than the verifier's max_sql_length
    assert info["verdict_reason"] in {"syntax", "runtime", "no_sql", "rejected", "too_large"}
    env.close()


def test_agent_sql_longer_than_the_limit_is_rejected_not_raised():
    env = gym.make(ENV_ID, mode="agent")
    env.reset(seed=0)
    env.step(STOP)
    *_, info = env.step("SELECT " + "1 + " * 3_000_000 + "1")
    assert info["verdict_reason"] == "too_large" and info["action_parse"] == "sql"
    env.close()


def test_async_vector_env_survives_hostile_actions():
    envs = AsyncVectorEnv([lambda: gym.make(ENV_ID) for _ in range(2)], shared_memory=False)
    record = next(r for r in gym.make(ENV_ID).unwrapped.records if r.m > 0)
    options = {"record_id": record.id}  # at least 3 questions: no episode ends in the loop
    try:
        for action in (HUGE_INT, DEEP, SURROGATE, NUL, None, b"\xff"):
            envs.reset(seed=5, options=options)
            obs, _, terminated, _, info = envs.step((action, "Which year do you mean?"))
            assert list(info["action_parse"]) == [parse_action(action).form, "question"]
            assert obs["dialogue"][0].startswith("Q1: ")
        # still usable: a plain question and a stop go through
        envs.reset(seed=6, options=options)
        obs, _, terminated, _, info = envs.step(("Which year do you mean?", STOP))
        assert list(info["action_parse"]) == ["question", "stop"] and terminated[1]
    finally:
        envs.close()
