"""The chat-completions client against a real scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket

import pytest

from ambitab_gym.llm import (
    LLMClient,
    LLMConnectionError,
    LLMContextOverflow,
    LLMHTTPError,
    LLMMalformedResponse,
    LLMTimeout,
)
from ambitab_gym.testing.llm_server import ScriptRule

HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi now"}]


def test_reply_usage_and_request_fields(serve, make_client, monkeypatch):
    monkeypatch.setenv("AMBITAB_TEST_KEY", "sk-test-123")
    server = serve([ScriptRule(reply="Hello to you too.")])
    client = make_client(
        server.url,
        api_key_env="AMBITAB_TEST_KEY",
        temperature=0.7,
        top_p=0.8,
        seed=11,
        max_tokens=64,
    )
    result = client.chat(HELLO, tag="unit", top_k=20)
    assert result.text == "Hello to you too."
    assert result.finish_reason == "stop"
    # the scripted server counts words: "Be brief." + "Say hi now" = 2 + 3; reply = 4 words
    assert (result.record.prompt_tokens, result.record.completion_tokens) == (5, 4)
    assert result.record.ok and result.record.attempts == 1 and result.record.tag == "unit"
    assert result.record.latency_s > 0 and result.record.elapsed_s >= result.record.latency_s
    [request] = server.requests()
    assert request["authorization"] == "Bearer sk-test-123"
    body = request["body"]
    assert body["model"] == "scripted-model"
    assert body["messages"] == HELLO
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (
        0.7,
        0.8,
        11,
        64,
    )
    assert body["top_k"] == 20
    assert "chat_template_kwargs" not in body
    usage = client.usage
    assert (usage.calls, usage.ok, usage.prompt_tokens, usage.completion_tokens) == (1, 1, 5, 4)
    assert list(client.calls) == [result.record]


def test_per_call_override_and_no_key(serve, make_client, monkeypatch):
    monkeypatch.delenv("AMBITAB_ABSENT_KEY", raising=False)
    server = serve()
    client = make_client(server.url, api_key_env="AMBITAB_ABSENT_KEY", temperature=0.7, seed=3)
    client.chat(HELLO, temperature=0.0, seed=None)
    [request] = server.requests()
    assert request["authorization"] is None
    assert request["body"]["temperature"] == 0.0
    assert request["body"]["seed"] == 3  # None falls back to the client's default


def test_disable_thinking_and_think_stripping(serve, make_client):
    server = serve([ScriptRule(reply="Forty-two.", think="Let me reason at length.")])
    client = make_client(server.url, disable_thinking=True)
    result = client.chat(HELLO)
    assert result.text == "Forty-two."
    assert result.raw.startswith("<think>Let me reason at length.</think>")
    body = server.requests()[0]["body"]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


def test_retries_after_500_then_succeeds(serve, make_client):
    server = serve([ScriptRule(reply="fine")])
    server.fail_next("http_500", times=2)
    client = make_client(server.url, max_retries=3)
    result = client.chat(HELLO)
    assert result.text == "fine"
    assert result.record.attempts == 3
    assert server.stats()["requests"] == 3
    assert server.stats()["faults"] == {"http_500": 2}


def test_429_is_retried(serve, make_client):
    server = serve([ScriptRule(reply="fine")])
    server.fail_next("http_429", times=1)
    result = make_client(server.url, max_retries=1).chat(HELLO)
    assert result.text == "fine" and result.record.attempts == 2


def test_retries_exhausted_raise_http_category(serve, make_client):
    server = serve()
    server.fail_next("http_503", times=10)
    client = make_client(server.url, max_retries=2)
    with pytest.raises(LLMHTTPError) as caught:
        client.chat(HELLO)
    assert caught.value.category == "http_503"
    assert caught.value.attempts == 3
    assert server.stats()["requests"] == 3
    usage = client.usage
    assert (usage.calls, usage.ok, dict(usage.errors)) == (1, 0, {"http_503": 1})
    assert client.calls[-1].category == "http_503" and not client.calls[-1].ok


def test_timeout_category_and_retry(serve, make_client):
    server = serve([ScriptRule(reply="late but fine")], hang_s=5.0)
    server.fail_next("timeout", times=1)
    client = make_client(server.url, timeout_s=0.3, max_retries=0)
    with pytest.raises(LLMTimeout) as caught:
        client.chat(HELLO)
    assert caught.value.category == "timeout"
    server.fail_next("timeout", times=1)
    retrying = make_client(server.url, timeout_s=0.3, max_retries=1)
    assert retrying.chat(HELLO).record.attempts == 2


def test_malformed_json_is_not_retried(serve, make_client):
    server = serve()
    server.fail_next("malformed_json", times=1)
    client = make_client(server.url, max_retries=3)
    with pytest.raises(LLMMalformedResponse) as caught:
        client.chat(HELLO)
    assert caught.value.category == "malformed_output"
    assert server.stats()["requests"] == 1


def test_context_overflow_from_long_prompt(serve, make_client):
    server = serve([ScriptRule(reply="short")], max_context_tokens=10)
    client = make_client(server.url, max_retries=3)
    assert client.chat(HELLO).text == "short"  # 5 words fit
    long = [{"role": "user", "content": "word " * 11}]
    with pytest.raises(LLMContextOverflow) as caught:
        client.chat(long)
    assert caught.value.category == "context_overflow"
    assert caught.value.status == 400
    assert server.stats()["requests"] == 2  # not retried


def test_dropped_connection_is_a_connection_error(serve, make_client):
    server = serve()
    server.fail_next("disconnect", times=5)
    client = make_client(server.url, max_retries=1)
    with pytest.raises(LLMConnectionError) as caught:
        client.chat(HELLO)
    assert caught.value.category == "connection"
    assert server.stats()["requests"] == 2


def test_refused_connection(make_client):
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = make_client(f"http://127.0.0.1:{port}/v1", max_retries=1)
    with pytest.raises(LLMConnectionError):
        client.chat(HELLO)
    assert client.usage.errors == {"connection": 1}


@pytest.mark.parametrize("limit", [1, 3])
def test_concurrency_limit(serve, make_client, limit):
    server = serve([ScriptRule(reply="ok")], latency_s=0.15)
    client = make_client(server.url, concurrency=limit)

    async def burst():
        return await asyncio.gather(*(client.achat(HELLO) for _ in range(3 * limit + 1)))

    results = asyncio.run(burst())
    assert len(results) == 3 * limit + 1
    stats = server.stats()
    assert stats["requests"] == 3 * limit + 1
    assert stats["max_in_flight"] <= limit
    if limit > 1:
        assert stats["max_in_flight"] >= 2  # requests did overlap
    assert client.usage.ok == 3 * limit + 1


def test_backoff_schedule_and_retry_after():
    client = LLMClient("http://127.0.0.1:9/v1", "m", backoff_s=0.5, max_backoff_s=3.0)
    assert [client._backoff(k, None) for k in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_sync_call_inside_running_loop_and_across_loops(serve, make_client):
    server = serve([ScriptRule(reply="ok")])
    client = make_client(server.url)

    async def inside():
        return client.chat(HELLO).text  # blocking call from async code: runs on the private loop

    assert asyncio.run(inside()) == "ok"

    async def native():
        return (await client.achat(HELLO)).text

    assert asyncio.run(native()) == "ok"
    assert asyncio.run(native()) == "ok"  # a second loop gets its own connection pool
    assert client.usage.ok == 3


def test_process_server(serve, make_client):
    server = serve([ScriptRule(reply=["one", "two"])], process=True)
    client = make_client(server.url)
    assert [client.chat(HELLO).text for _ in range(3)] == ["one", "two", "one"]
    server.fail_next("http_500")
    with pytest.raises(LLMHTTPError):
        make_client(server.url, max_retries=0).chat(HELLO)
    assert server.stats()["requests"] == 4
    assert len(server.requests()) == 4


def test_base_url_rules():
    assert LLMClient("http://127.0.0.1:8000", "m").base_url == "http://127.0.0.1:8000/v1"
    assert LLMClient("http://h:1/v1/", "m").base_url == "http://h:1/v1"
    with pytest.raises(ValueError, match="base URL"):
        LLMClient("localhost:8000", "m")
    with pytest.raises(ValueError, match="model"):
        LLMClient("http://h:1/v1", "")


def test_count_rule_and_unmatched_default(serve, make_client):
    rules = [ScriptRule(reply=["zero {n}", "one {n}"], when="^ask", count="x")]
    server = serve(rules)
    client = make_client(server.url)
    assert client.chat([{"role": "user", "content": "ask"}]).text == "zero 0"
    assert client.chat([{"role": "user", "content": "ask x"}]).text == "one 1"
    assert client.chat([{"role": "user", "content": "ask x x x"}]).text == "one 3"
    assert client.chat([{"role": "user", "content": "other"}]).text == "OK"
