"""Reading model output: thinking, asker actions, matcher routes, responder answers, SQL."""

from __future__ import annotations

import pytest

from ambitab_gym.oracles.llm_prompts import (
    MatcherAction,
    parse_matcher_output,
    parse_responder_output,
)
from ambitab_gym.policies.llm_prompts import AskerOutput, parse_asker_output
from ambitab_gym.textutil import extract_sql, find_json_object, strip_thinking


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>a\nb</think>\nAnswer.", "Answer."),
        ("<THINK>x</THINK>A<think>y</think>B", "AB"),
        ("opened by template</think> Answer", "Answer"),
        ("Answer <think>runaway", "Answer"),
        ("<think>only thinking</think>", ""),
        ("no thinking", "no thinking"),
    ],
)
def test_strip_thinking(text, expected):
    assert strip_thinking(text) == expected


def test_find_json_object_variants():
    assert find_json_object('{"a": 1}') == {"a": 1}
    assert find_json_object("```json\n{'a': True}\n```") == {"a": True}  # Python-style dict
    assert find_json_object('text {"a": [1, {"b": 2}]} more {"c": 3}') == {"a": [1, {"b": 2}]}
    assert find_json_object("[1, 2]") is None
    assert find_json_object("{broken") is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"type": "clarification", "output": "Top how many?"}', ("question", "Top how many?")),
        ('{"type": "Clarification", "output": "  Which year? "}', ("question", "Which year?")),
        ('<think>hmm</think>{"type": "done", "output": null}', ("stop", "")),
        ('```json\n{"type": "stop"}\n```', ("stop", "")),
        ('Sure. {"type": "question", "output": "Which?"} Thanks', ("question", "Which?")),
        ('"Which table holds sales?"', ("question", "Which table holds sales?")),
        ('{"type": "clarification", "output": ""}', ("invalid", None)),
        ('{"type": "final_sql", "output": "SELECT 1"}', ("invalid", None)),
        ("Let me think about the schema first.", ("invalid", None)),
        ("", ("invalid", None)),
    ],
)
def test_parse_asker_output(text, expected):
    out = parse_asker_output(text)
    assert isinstance(out, AskerOutput)
    assert out.kind == expected[0]
    if expected[1] is not None:
        assert out.text == expected[1]


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            '{"reasoning": "x", "action": "labeled(\\"top customers\\")"}',
            ("labeled", "top customers"),
        ),
        ('{"action": "labeled(\'spending\')"}', ("labeled", "spending")),
        (
            '{"action": "unlabeled(\\"WHERE status = \'delivered\'\\")"}',
            ("unlabeled", "WHERE status = 'delivered'"),
        ),
        ('{"action": "unanswerable()"}', ("unanswerable", "")),
        ('{"action": "unanswerable"}', ("unanswerable", "")),
        ('**labeled("region")** because it asks about it', ("labeled", "region")),
        ("Action: unlabeled(ORDER BY total DESC)", ("unlabeled", "ORDER BY total DESC")),
        ('{"action": "labeled()"}', None),
        ('{"action": "maybe the first one"}', None),
        ('{"reasoning": "no action"}', None),
        ("I cannot decide.", None),
    ],
)
def test_parse_matcher_output(text, expected):
    action = parse_matcher_output(text)
    if expected is None:
        assert action is None
    else:
        assert action == MatcherAction(*expected)


def test_matcher_action_render_round_trip():
    for action in (
        MatcherAction("labeled", 'the "best" ones'),
        MatcherAction("unlabeled", "WHERE a = 'x'"),
        MatcherAction("unanswerable"),
    ):
        assert parse_matcher_output(action.render()) == action


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"answer": "Only 2023."}', "Only 2023."),
        ('{"type": "labeled(\\"x\\")", "output": "The five largest."}', "The five largest."),
        ("<think>...</think>Just delivered orders.", "Just delivered orders."),
        ('{"answer": ""}', None),
        ("", None),
    ],
)
def test_parse_responder_output(text, expected):
    assert parse_responder_output(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"reasoning": "r", "type": "final_sql", "output": "SELECT a FROM t"}', "SELECT a FROM t"),
        ('{"output": "```sql\\nSELECT 1\\n```"}', "SELECT 1"),
        ("```sql\nSELECT name\nFROM t\nWHERE x = 1;\n```", "SELECT name\nFROM t\nWHERE x = 1;"),
        ("```\nWITH a AS (SELECT 1) SELECT * FROM a\n```", "WITH a AS (SELECT 1) SELECT * FROM a"),
        ("```python\nprint(1)\n```\n```sql\nSELECT 2\n```", "SELECT 2"),
        ("<think>SELECT wrong</think>SELECT right FROM t", "SELECT right FROM t"),
        ("Query: select x from y", "select x from y"),
        ("I don't know.", None),
    ],
)
def test_extract_sql(text, expected):
    assert extract_sql(text) == expected
