"""Command-line options, factories, structured output, and the evaluate command with an LLM."""

from __future__ import annotations

import argparse
import json

import pytest
from llm_helpers import contents, record

from ambitab_gym.cli import main as cli_main
from ambitab_gym.commands.llm_options import (
    add_llm_arguments,
    add_oracle_arguments,
    client_from_args,
    oracle_options_from_args,
)
from ambitab_gym.oracles import OracleContext
from ambitab_gym.oracles.llm import make_llm_oracle
from ambitab_gym.policies.llm import make_llm_asker, make_llm_solver, parse_llm_spec
from ambitab_gym.records import PublicSpec
from ambitab_gym.testing.llm_server import ROLE_MARKERS, role_rules
from ambitab_gym.trajectory import PublicView


def test_arguments_and_client():
    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    args = parser.parse_args(
        ["--llm-url", "http://127.0.0.1:9/v1", "--model", "qwen", "--temperature", "0.7"]
        + ["--top-p", "0.8", "--llm-timeout", "30", "--llm-retries", "0", "--structured-output"]
    )
    client = client_from_args(args, seed=5)
    assert (client.base_url, client.model, client.concurrency) == (
        "http://127.0.0.1:9/v1",
        "qwen",
        64,  # defaults.LLM_CONCURRENCY: episodes in flight against a server
    )
    assert client.params["temperature"] == 0.7 and client.params["top_p"] == 0.8
    assert client.params["seed"] == 5 and client.timeout_s == 30 and client.max_retries == 0
    assert client.structured_output and not client.disable_thinking
    assert client_from_args(parser.parse_args([])) is None
    with pytest.raises(ValueError, match="--model"):
        client_from_args(parser.parse_args(["--llm-url", "http://127.0.0.1:9/v1"]))


def test_existing_options_are_kept_and_prefixes_fall_back():
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=None, help="episodes in flight")
    add_llm_arguments(parser)  # must not clash with the command's own --concurrency
    add_llm_arguments(parser, prefix="oracle-")
    args = parser.parse_args(
        ["--llm-url", "http://127.0.0.1:9/v1", "--model", "small", "--concurrency", "12"]
        + ["--oracle-model", "big", "--no-thinking"]
    )
    asker_client = client_from_args(args)
    oracle_client = client_from_args(args, prefix="oracle-")
    assert asker_client.concurrency == 12 and asker_client.model == "small"
    assert oracle_client.model == "big"
    assert oracle_client.base_url == "http://127.0.0.1:9/v1"  # falls back to --llm-url
    assert oracle_client.disable_thinking  # falls back to --no-thinking


def test_specs():
    assert parse_llm_spec("llm:direct") == "direct"
    assert parse_llm_spec("llm") is None
    with pytest.raises(ValueError, match="llm:checklist-ledger"):
        parse_llm_spec("llm:chatty")


def test_factories(serve, make_client):
    client = make_client(serve().url)
    assert make_llm_asker("llm", client).strategy == "checklist-ledger"
    assert make_llm_asker("checklist-chat", client, max_tokens=10).max_tokens == 10
    assert make_llm_solver(client, corpus="AmbiTab-BIRD-Interact-v0").dialect == "postgres"
    oracle = make_llm_oracle(None, client, policy="unfiltered", responder_reads_sql=False)
    assert oracle.policy.name == "unfiltered" and not oracle.policy.responder_sql


def test_structured_output_sends_role_schemas(serve, make_client):
    rules = role_rules(
        ["Top how many?"],
        matcher=json.dumps({"reasoning": "r", "action": 'labeled("top customers")'}),
        solver=json.dumps({"reasoning": "r", "type": "final_sql", "output": "SELECT 1"}),
    )
    server = serve(rules)
    client = make_client(server.url, structured_output=True)
    view = PublicView(PublicSpec(request="List top customers.", database="shop"), (), 2)
    make_llm_asker("direct", client).act(view)
    make_llm_solver(client).solve(PublicView(view.spec, (), 0, "sql"))
    make_llm_oracle(None, client, policy="unfiltered").answer("Top?", OracleContext(record()))
    formats = {}
    for request in server.requests():
        role = next(r for r, marker in ROLE_MARKERS.items() if marker in contents(request))
        formats[role] = request["body"]["response_format"]
    assert set(formats) == {"asker", "solver", "matcher", "responder"}
    assert all(f["type"] == "json_schema" for f in formats.values())
    asker_schema = formats["asker"]["json_schema"]["schema"]
    assert asker_schema["properties"]["type"]["enum"] == ["clarification", "done"]
    routes = formats["matcher"]["json_schema"]["schema"]["properties"]["action"]["enum"]
    assert routes[0] == 'labeled("top customers")' and routes[-1] == "unanswerable()"
    assert 'unlabeled("LIMIT 5")' in routes  # unfiltered: segments are routes too
    plain = make_client(server.url, structured_output=False)  # on by default (issue 16)
    make_llm_asker("direct", plain).act(view)
    assert "response_format" not in server.requests()[-1]["body"]


def test_evaluate_command_with_llm_parts(serve, tmp_path, capsys):
    rules = role_rules(
        ["What do you mean exactly?"],
        matcher=json.dumps({"action": "unanswerable()"}),
        solver=json.dumps({"type": "final_sql", "output": "SELECT 1"}),
    )
    server = serve(rules)
    code = cli_main(
        ["evaluate", "AmbiTab-Bird-v0", "--asker", "llm:checklist-ledger"]
        + ["--solver", "llm", "--oracle", "llm", "--limit", "3", "--json", "--no-progress"]
        + ["--results", str(tmp_path / "r.duckdb"), "--llm-url", server.url, "--model", "m"]
        + ["--concurrency", "4", "--temperature", "0.7", "--no-thinking"]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["episodes"] == 9 and summary["errors"] == {}  # none, asker, full x 3
    bodies = [r["body"] for r in server.requests()]
    assert bodies and all(b["model"] == "m" and b["temperature"] == 0.7 for b in bodies)
    assert all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in bodies)
    asked = [b for b in bodies if ROLE_MARKERS["asker"] in b["messages"][0]["content"]]
    assert asked  # the evaluated asker went through the server


def test_leakage_command_with_an_llm_oracle(serve, tmp_path, capsys):
    rules = role_rules(
        ["What do you mean by top customers?"],
        matcher=json.dumps({"action": 'labeled("top customers")'}),
        solver=json.dumps({"type": "final_sql", "output": "SELECT 1"}),
    )
    server = serve(rules)
    code = cli_main(
        ["leakage", "AmbiTab-Bird-v0", "--oracle", "llm", "--asker", "llm:direct"]
        + ["--limit", "3", "--json", "--no-progress", "--resamples", "20"]
        + ["--results", str(tmp_path / "r.duckdb"), "--llm-url", server.url, "--model", "m"]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    usage = report.pop("llm_usage")  # the campaign's LLM calls per role
    tokens = report.pop("tokens")  # summed from the rows stored per episode
    assert set(report) == {"d_j_resp", "d_rec_spec", "d_j_full", "d_rec_none"}
    # the scripted server counts words of every message's content (its module docstring)
    assert tokens["prompt_tokens"] == sum(
        len(m["content"].split()) for r in server.requests() for m in r["body"]["messages"]
    )
    assert sum(u["calls"] for u in usage.values()) == len(server.requests())
    roles = {
        role
        for request in server.requests()
        for role, marker in ROLE_MARKERS.items()
        if marker in contents(request)
    }
    assert roles == {"asker", "matcher", "responder"}  # the hybrid runs reuse the LLM matcher


@pytest.mark.parametrize(
    "corpus, expected", [("AmbiTab-Bird-v0", "unfiltered"), ("AmbiTab-AmbiQT-v0", "scoped")]
)
def test_auto_policy_follows_the_corpus_oracle(serve, make_client, corpus, expected):
    oracle = make_llm_oracle(corpus, make_client(serve().url), policy="auto")
    assert oracle.policy.name == expected


def test_oracle_arguments():
    parser = argparse.ArgumentParser()
    add_oracle_arguments(parser)
    assert oracle_options_from_args(parser.parse_args([])) == {"policy": "auto"}
    args = parser.parse_args(["--responder-reads-sql", "--matcher-reads-dialogue"])
    assert oracle_options_from_args(args) == {
        "policy": "auto",
        "responder_reads_sql": True,
        "matcher_reads_dialogue": True,
    }
