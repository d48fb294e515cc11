"""Pointing the commands at a server the usual way (issue 16, part C).

The OpenAI environment variables as defaults, the pre-flight check of a server before anything
runs (unreachable, model not served, key missing or refused), the concurrency fitted to a
llama.cpp server's slots, the queueing hint, ``--asker llm`` naming ``llm:STRATEGY``, and
``play --oracle llm``. Every test talks real HTTP to the scripted server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import socket

import pytest
from llm_helpers import contents

from ambitab_gym.cli import main as cli_main
from ambitab_gym.corpora import load_corpus
from ambitab_gym.llm.errors import LLMAuthError, LLMConnectionError, LLMUnknownModel
from ambitab_gym.policies.scripted import distinct_terms
from ambitab_gym.testing.llm_server import ROLE_MARKERS, role_rules

ENV_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AMBITAB_LLM_MODEL", "OPENAI_MODEL", "MY_KEY")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """The developer's own OpenAI variables must not leak into these tests."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def rules():
    return role_rules(
        ["What do you mean exactly?"],
        matcher=json.dumps({"reasoning": "r", "action": "unanswerable()"}),
        solver=json.dumps({"reasoning": "r", "type": "final_sql", "output": "SELECT 1"}),
    )


def evaluate(tmp_path, *options: str) -> int:
    return cli_main(
        ["evaluate", "AmbiTab-Bird-v0", "--asker", "llm:direct", "--solver", "llm"]
        + ["--oracle", "llm", "--limit", "2", "--json", "--no-progress"]
        + ["--results", str(tmp_path / "r.duckdb"), *options]
    )


def closed_port_url() -> str:
    """A loopback URL nothing listens on (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# -- environment variables -----------------------------------------------------------------------


@pytest.mark.parametrize("model_var", ["AMBITAB_LLM_MODEL", "OPENAI_MODEL"])
def test_environment_variables_configure_evaluate(serve, tmp_path, capsys, monkeypatch, model_var):
    server = serve(rules(), models=["env-model"], api_key="sekret-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sekret-key")
    monkeypatch.setenv(model_var, "env-model")
    assert evaluate(tmp_path) == 0  # no --llm-url, --model or --api-key-env
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["episodes"] == 6 and summary["errors"] == {}  # none, asker, full x 2
    received = server.requests()
    assert received and all(r["authorization"] == "Bearer sekret-key" for r in received)
    assert all(r["body"]["model"] == "env-model" for r in received)
    assert any(ROLE_MARKERS["asker"] in contents(r) for r in received)


def test_command_line_options_override_the_environment(serve, tmp_path, capsys, monkeypatch):
    server = serve(rules(), models=["env-model", "cli-model"], api_key="cli-key")
    monkeypatch.setenv("OPENAI_BASE_URL", closed_port_url())  # overridden: never contacted
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")  # not the key the server wants
    monkeypatch.setenv("MY_KEY", "cli-key")
    monkeypatch.setenv("AMBITAB_LLM_MODEL", "env-model")
    code = evaluate(
        tmp_path, "--llm-url", server.url, "--model", "cli-model", "--api-key-env", "MY_KEY"
    )
    assert code == 0, capsys.readouterr().err
    received = server.requests()
    assert received and all(r["authorization"] == "Bearer cli-key" for r in received)
    assert {r["body"]["model"] for r in received} == {"cli-model"}


def test_the_environment_is_not_read_without_an_llm_part(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", closed_port_url())
    monkeypatch.setenv("AMBITAB_LLM_MODEL", "env-model")
    code = cli_main(
        ["evaluate", "AmbiTab-Bird-v0", "--limit", "1", "--no-progress"]
        + ["--results", str(tmp_path / "r.duckdb")]
    )
    assert code == 0, capsys.readouterr().err  # the scripted parts need no server


# -- pre-flight failures: before the first episode ------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "leakage"])
def test_a_wrong_model_fails_before_the_first_episode(serve, tmp_path, capsys, command):
    server = serve(rules(), models=["served-a", "served-b"])
    results = tmp_path / "r.duckdb"
    code = cli_main(
        [command, "AmbiTab-Bird-v0", "--asker", "llm:direct", "--oracle", "llm"]
        + ["--limit", "2", "--no-progress", "--results", str(results)]
        + ["--llm-url", server.url, "--model", "no-such-model"]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "'no-such-model'" in err and "served-a, served-b" in err
    assert server.requests() == []  # no chat request: no episode ran
    assert not results.exists()  # and nothing was stored


def test_a_missing_key_fails_before_the_first_episode(serve, tmp_path, capsys):
    server = serve(rules(), models=["m"], api_key="needed")
    code = evaluate(tmp_path, "--llm-url", server.url, "--model", "m")
    err = capsys.readouterr().err
    assert code == 2
    assert "401" in err and "$OPENAI_API_KEY is not set" in err and "--api-key-env" in err
    assert server.requests() == [] and not (tmp_path / "r.duckdb").exists()


def test_a_refused_key_names_its_variable(serve, tmp_path, capsys, monkeypatch):
    server = serve(rules(), models=["m"], api_key="needed")
    monkeypatch.setenv("MY_KEY", "wrong")
    code = evaluate(tmp_path, "--llm-url", server.url, "--model", "m", "--api-key-env", "MY_KEY")
    err = capsys.readouterr().err
    assert code == 2 and "refused the API key" in err and "$MY_KEY" in err
    assert server.requests() == [] and not (tmp_path / "r.duckdb").exists()


def test_an_unset_api_key_env_is_an_error_before_anything_runs(serve, tmp_path, capsys):
    server = serve(rules(), models=["m"])
    code = evaluate(tmp_path, "--llm-url", server.url, "--model", "m", "--api-key-env", "MY_KEY")
    err = capsys.readouterr().err
    assert code == 2 and "$MY_KEY, which is not set" in err
    assert server.requests() == [] and not (tmp_path / "r.duckdb").exists()


def test_an_unreachable_server_is_named(tmp_path, capsys):
    url = closed_port_url()
    code = evaluate(tmp_path, "--llm-url", url, "--model", "m")
    err = capsys.readouterr().err
    assert code == 2 and f"cannot reach the LLM server at {url}" in err
    assert not (tmp_path / "r.duckdb").exists()


def test_a_server_without_models_gets_a_warning_not_a_failure(serve, tmp_path, capsys):
    server = serve(rules())  # no /v1/models (404)
    assert evaluate(tmp_path, "--llm-url", server.url, "--model", "anything") == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "no /models route (404)" in err and "'anything'" in err
    assert server.requests()


def test_preflight_api(serve, make_client):
    server = serve(models=["a", "b"], api_key="k", slots=3)
    info = make_client(server.url, model="b", api_key="k").preflight()
    assert (info.models, info.slots, info.warnings) == (("a", "b"), 3, ())
    with pytest.raises(LLMUnknownModel) as wrong:
        make_client(server.url, model="c", api_key="k").preflight()
    assert wrong.value.served == ("a", "b") and wrong.value.category == "unknown_model"
    with pytest.raises(LLMAuthError, match=r"\$OPENAI_API_KEY"):
        make_client(server.url, model="a").preflight()
    with pytest.raises(LLMConnectionError, match="cannot reach"):
        make_client(closed_port_url(), model="a").preflight()
    assert server.requests() == []  # the check makes no chat request


# -- concurrency ---------------------------------------------------------------------------------


def test_concurrency_follows_llama_cpp_slots(serve, tmp_path, capsys):
    server = serve(rules(), models=["m"], slots=1, latency_s=0.02)
    assert evaluate(tmp_path, "--llm-url", server.url, "--model", "m") == 0
    assert "reports 1 parallel slot(s)" in capsys.readouterr().err
    assert server.stats()["max_in_flight"] == 1


def test_an_explicit_concurrency_wins_over_slots(serve, tmp_path, capsys):
    server = serve(rules(), models=["m"], slots=1, latency_s=0.05)
    code = evaluate(tmp_path, "--llm-url", server.url, "--model", "m", "--concurrency", "4")
    assert code == 0
    assert "parallel slot" not in capsys.readouterr().err
    assert server.stats()["max_in_flight"] > 1


def chat_at_once(client, n: int) -> None:
    async def run() -> None:
        try:
            await asyncio.gather(
                *(client.achat([{"role": "user", "content": f"q{i}"}]) for i in range(n))
            )
        finally:
            await client.aclose()

    asyncio.run(run())


def test_queueing_past_half_the_timeout_warns_once(serve, make_client, caplog):
    fast = make_client(serve(slots=4, latency_s=0.1).url, timeout_s=0.5, concurrency=4)
    chat_at_once(fast, 4)  # four slots: nothing waits
    assert fast.queue_hint is None
    one_slot = serve(slots=1, latency_s=0.1)  # requests wait their turn: 0.1, 0.2, 0.3, 0.4 s
    slow = make_client(one_slot.url, timeout_s=0.5, concurrency=4)
    with caplog.at_level(logging.WARNING, logger="ambitab_gym.llm"):
        chat_at_once(slow, 8)
    hint = slow.queue_hint
    assert hint is not None and "requests in flight: the server is queueing them" in hint
    suggested = int(re.search(r"try --concurrency (\d+)", hint).group(1))
    assert 1 <= suggested < 4
    hints = [r for r in caplog.records if "--concurrency" in r.getMessage()]
    assert len(hints) == 1  # once, not per request


def test_a_slow_single_request_suggests_a_longer_timeout(serve, make_client):
    client = make_client(serve(latency_s=0.3).url, timeout_s=0.5, concurrency=1)
    chat_at_once(client, 1)
    assert client.queue_hint is not None and "raise --llm-timeout" in client.queue_hint


# -- names and play ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "leakage"])
def test_asker_llm_without_a_strategy_names_llm_strategy(tmp_path, capsys, command):
    code = cli_main(
        [command, "AmbiTab-Bird-v0", "--asker", "llm", "--results", str(tmp_path / "r.duckdb")]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "llm:STRATEGY" in err
    assert all(name in err for name in ("direct", "checklist-chat", "checklist-ledger"))
    assert not (tmp_path / "r.duckdb").exists()


def test_play_with_an_llm_oracle(serve, capsys, monkeypatch):
    corpus = load_corpus("taco")
    record = next(r for r in corpus.records if r.m > 0)
    term = distinct_terms(record)[0]
    server = serve(
        role_rules(
            matcher=json.dumps({"reasoning": "r", "action": f'labeled("{term}")'}),
            responder=json.dumps({"answer": "The scripted oracle says: the 2020 census."}),
        ),
        models=["oracle-model"],
    )
    typed = f"What do you mean by {term}?\n/stop\nSELECT 1;\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    code = cli_main(
        ["play", "AmbiTab-TACO-v0", "--solver", "none", "--oracle", "llm"]
        + ["--record", record.id, "--llm-url", server.url, "--model", "oracle-model"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "A1: The scripted oracle says: the 2020 census." in out
    assert "Verdict:" in out
    roles = {
        role
        for request in server.requests()
        for role, marker in ROLE_MARKERS.items()
        if marker in contents(request)
    }
    assert roles == {"matcher", "responder"}


def test_play_checks_the_server_first(serve, capsys, monkeypatch):
    server = serve(models=["served"])
    monkeypatch.setattr("sys.stdin", io.StringIO("/quit\n"))
    code = cli_main(
        ["play", "AmbiTab-TACO-v0", "--solver", "none", "--oracle", "llm"]
        + ["--llm-url", server.url, "--model", "other"]
    )
    assert code == 2 and "'other'" in capsys.readouterr().err
