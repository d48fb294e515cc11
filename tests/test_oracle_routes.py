"""Issue 16 (part B): the LLM oracle's routes are validated, unreadable replies are counted per
role, and structured output is on by default with a fallback for servers that refuse it.

Every test talks HTTP to a scripted OpenAI-compatible server on 127.0.0.1
(:class:`~ambitab_gym.testing.llm_server.ScriptedServer`).
"""

from __future__ import annotations

import argparse
import json
import logging

import pytest

from ambitab_gym.commands.llm_options import add_llm_arguments, client_from_args
from ambitab_gym.evaluation import CampaignConfig, format_table, run_campaign
from ambitab_gym.llm import LLMClient
from ambitab_gym.oracles import REFUSAL, OracleContext
from ambitab_gym.oracles.access import AccessPolicy, match_segment, resolve_term, sql_segments
from ambitab_gym.oracles.llm import make_llm_oracle
from ambitab_gym.oracles.llm_prompts import prompt_echo
from ambitab_gym.records import parse_record
from ambitab_gym.testing.llm_server import ROLE_MARKERS, ScriptedServer, ScriptRule

SQL = "SELECT name FROM customers WHERE country = 'DE' ORDER BY spent DESC LIMIT 5"
QUESTION = "How many count as top?"
ANSWER = "The five biggest spenders."


def record():
    return parse_record(
        {
            "id": "routes-1",
            "avt_id": "routes-1-avt",
            "corpus": "demo",
            "spec": {"request": "List the top customers by spending.", "database": "shop"},
            "ambiguities": [
                {
                    "id": "top",
                    "term": "top customers",
                    "aliases": ["best customers"],
                    "resolution": "the five customers with the highest spending",
                }
            ],
            "verification": {"database": "shop", "reference_sql": SQL},
        }
    )


def matcher_says(action: str) -> list[ScriptRule]:
    return [
        ScriptRule(
            json.dumps({"reasoning": "scripted", "action": action}), when=ROLE_MARKERS["matcher"]
        ),
        ScriptRule(json.dumps({"answer": ANSWER}), when=ROLE_MARKERS["responder"]),
    ]


def responder_prompts(server: ScriptedServer) -> list[str]:
    out = []
    for request in server.requests():
        text = "\n".join(m["content"] for m in request["body"]["messages"])
        if ROLE_MARKERS["responder"] in text:
            out.append(text)
    return out


def ask(action: str, *, question: str = QUESTION, **server_options):
    """One question to an LLM oracle whose matcher replies ``action`` (responder reads SQL, so
    ``unlabeled`` routes are offered)."""
    policy = AccessPolicy.named("unfiltered", responder_reads_sql=True, matcher_reads_sql=True)
    with (
        ScriptedServer(matcher_says(action), **server_options) as server,
        LLMClient(server.url, "m", backoff_s=0.01) as client,
    ):
        oracle = make_llm_oracle(None, client, policy=policy)
        context = OracleContext(record())
        credits, answer = oracle.answer(question, context)
        return credits, answer, oracle.matcher, context.route, responder_prompts(server)


# -- route validation on hand-written matcher replies ---------------------------------------


@pytest.mark.parametrize(
    "action, why",
    [
        ("unlabeled('<sql segment>')", "prompt_echoes"),  # the broken reply
        ('unlabeled("sql segment")', "prompt_echoes"),  # the placeholder without brackets
        ('labeled("<term>")', "prompt_echoes"),
        (f'unlabeled("{QUESTION}")', "prompt_echoes"),  # the question echoed back
        ("unlabeled(\"WHERE country = 'FR'\")", "invalid_segments"),  # SQL not in the reference
        ('unlabeled("GROUP BY region")', "invalid_segments"),
        ('labeled("top spenders")', "unknown_labels"),  # no registered term
        ('labeled("top")', "unknown_labels"),  # a fragment of one is not one
        ('unlabeled("spent DESC")', "invalid_segments"),  # two tokens: too short to count
    ],
)
def test_invalid_routes_are_unreadable_and_never_reach_the_responder(action, why):
    credits, answer, matcher, route, prompts = ask(action)
    assert (credits, answer) == (frozenset(), REFUSAL)
    assert matcher.unreadable == 1 and matcher.stats[why] == 1 and matcher.parse_failures == 0
    assert route.kind == "unanswerable" and route.parsed is False
    assert prompts == []  # the responder was never told "the part that settles it: <...>"


@pytest.mark.parametrize(
    "written",
    [
        "ORDER BY spent DESC",  # a segment as sql_segments writes it
        "order  by SPENT desc",  # the same after normalization
        "WHERE country = 'DE'",
        "country = 'DE'",  # a run of three or more tokens inside a segment
    ],
)
def test_real_segments_are_accepted(written):
    assert match_segment(written, sql_segments(SQL)) is not None
    credits, answer, matcher, route, prompts = ask(f'unlabeled("{written}")')
    assert matcher.unreadable == 0 and route.kind == "unlabeled" and route.parsed
    assert answer == ANSWER
    [prompt] = prompts
    assert f"The part of your query that settles it: {written}" in prompt


@pytest.mark.parametrize(
    "label", ["top customers", "Top Customers", "  'top-customers' ", "BEST   customers!"]
)
def test_near_miss_terms_that_normalize_to_a_registered_one_are_accepted(label):
    assert resolve_term(label, record(), strict=True).id == "top"
    credits, answer, matcher, route, prompts = ask(f"labeled({json.dumps(label)})")
    assert credits == frozenset({"top"}) and answer == ANSWER and matcher.unreadable == 0
    assert 'This question is about "top customers"' in prompts[0]


def test_prompt_echo_and_segment_matching_directly():
    segments = sql_segments(SQL)
    assert prompt_echo("<sql segment>") and prompt_echo("<your action>")
    assert prompt_echo("which year?", "Which year?") and not prompt_echo("LIMIT 5", "Which?")
    assert match_segment("LIMIT 5", segments) == "LIMIT 5"
    assert match_segment("LIMIT 50", segments) is None
    assert match_segment("SELECT 1", segments) is None


# -- unreadable replies per role in the summary ---------------------------------------------


def test_unreadable_replies_are_counted_per_role_in_summary_table_and_json(tmp_path):
    # bird: the matcher always copies the placeholder; the responder is never reached, so to
    # count responder failures a second campaign has a valid route and a plain-text responder
    rules = matcher_says("unlabeled('<sql segment>')")
    config = CampaignConfig(
        "AmbiTab-Bird-v0", asker="generic", oracle="llm", conditions=("asker",), limit=2
    )
    with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        summary = run_campaign(config, tmp_path / "a.duckdb", llm_client=client, progress=False)
    questions = summary.unreadable["matcher"]
    assert questions >= 2 and summary.unreadable["responder"] == 0
    assert summary.to_json()["unreadable"]["matcher"] == questions
    table = format_table({"bird": summary})
    assert "Unreadable m/r/a/s" in table and f"{questions}/0/0/" in table

    rules = [
        ScriptRule(
            json.dumps({"reasoning": "x", "action": 'labeled("top customers")'}),
            when=ROLE_MARKERS["matcher"],
        ),
        ScriptRule("Just the five biggest spenders.", when=ROLE_MARKERS["responder"]),
    ]
    with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        summary = run_campaign(config, tmp_path / "b.duckdb", llm_client=client, progress=False)
    # bird-0001 and 0002 register "top customers": each of their 4 + 4 answers was plain text
    assert summary.unreadable["responder"] == 8 and summary.unreadable["matcher"] == 0


# -- structured output: on by default, fallback on refusal ----------------------------------


def _bodies(server: ScriptedServer) -> list[dict]:
    return [r["body"] for r in server.requests()]


def test_structured_output_is_sent_by_default_to_a_server_that_accepts_it():
    with (
        ScriptedServer(matcher_says('labeled("top customers")')) as server,
        LLMClient(server.url, "m") as client,
    ):
        assert client.structured_output  # the default
        oracle = make_llm_oracle(None, client)
        assert oracle.answer(QUESTION, OracleContext(record()))[1] == ANSWER
        assert client.structured_supported is True
        bodies = _bodies(server)
    assert len(bodies) == 2
    assert all(b["response_format"]["type"] == "json_schema" for b in bodies)


def test_a_server_that_rejects_response_format_gets_plain_json_and_is_remembered(caplog):
    rules = matcher_says('labeled("top customers")')
    with (
        ScriptedServer(rules, structured_output=False) as server,
        LLMClient(server.url, "m", backoff_s=0.01) as client,
    ):
        oracle = make_llm_oracle(None, client)
        with caplog.at_level(logging.WARNING, logger="ambitab_gym.llm"):
            for _ in range(3):
                credits, answer = oracle.answer(QUESTION, OracleContext(record()))
                assert (credits, answer) == (frozenset({"top"}), ANSWER)
        assert client.structured_supported is False
        assert client.usage.ok == 6  # the refused request is not a failed call
        bodies = _bodies(server)
    # one refused request, then plain JSON for every call, the responder's first one included
    assert ["response_format" in b for b in bodies] == [True] + [False] * 6
    refusals = [r for r in caplog.records if "rejected response_format" in r.getMessage()]
    assert len(refusals) == 1 and "--no-structured-output" in refusals[0].getMessage()
    assert oracle.matcher.unreadable == 0


def test_structured_output_can_be_turned_off_on_the_command_line():
    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    base = ["--llm-url", "http://127.0.0.1:9/v1", "--model", "m"]
    on = client_from_args(parser.parse_args(base))
    off = client_from_args(parser.parse_args([*base, "--no-structured-output"]))
    try:
        assert on.structured_output is True and off.structured_output is False
    finally:
        on.close()
        off.close()
    with (
        ScriptedServer(matcher_says('labeled("top customers")')) as server,
        LLMClient(server.url, "m", structured_output=False) as client,
    ):
        make_llm_oracle(None, client).answer(QUESTION, OracleContext(record()))
        assert not any("response_format" in b for b in _bodies(server))
