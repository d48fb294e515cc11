"""The client's transport (issue 19.3): no TLS work for plain-HTTP servers, one pool per loop
that never reports a leak when its loop ends without ``aclose``, request bodies intact whether
or not orjson can encode them, and the concurrency limit held with many calls queued."""

from __future__ import annotations

import asyncio
import gc
import logging
import ssl

import aiohttp  # noqa: F401 - imported first: its import builds its default TLS contexts
import pytest

from ambitab_gym.testing.llm_server import ScriptRule

MESSAGES = [{"role": "user", "content": "Grüße: say hello"}]


@pytest.fixture
def certificate_loads(monkeypatch):
    """Counts certificate-store loads (real ones: the originals still run)."""
    loads: list[str] = []
    for name in ("load_verify_locations", "load_default_certs", "set_default_verify_paths"):
        original = getattr(ssl.SSLContext, name)

        def spy(self, *args, _original=original, _name=name, **kwargs):
            loads.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(ssl.SSLContext, name, spy)
    return loads


def test_plain_http_loads_no_certificates(serve, make_client, certificate_loads):
    server = serve([ScriptRule(reply="hi")], models=["scripted-model"])
    certificate_loads.clear()  # the test server's own control client (httpx, default TLS)
    client = make_client(server.url, concurrency=64)
    assert client.preflight().model == "scripted-model"
    for _ in range(2):  # two loops: two pools
        assert asyncio.run(client.achat(MESSAGES)).text == "hi"
    assert client.chat(MESSAGES).text == "hi"  # the private loop's pool
    assert certificate_loads == []
    # the spy sees real loads: an https client context would load the store
    ssl.create_default_context()
    assert certificate_loads


def test_a_loop_ended_without_aclose_reports_no_leak(serve, make_client, caplog):
    server = serve([ScriptRule(reply="hi")])
    client = make_client(server.url, concurrency=8)
    caplog.set_level(logging.ERROR)

    async def calls():
        replies = await asyncio.gather(*(client.achat(MESSAGES) for _ in range(20)))
        return [r.text for r in replies]

    for _ in range(3):
        assert asyncio.run(calls()) == ["hi"] * 20
        gc.collect()
    gc.collect()
    assert not [r for r in caplog.records if "nclosed" in r.getMessage()]


def test_bodies_go_out_intact_with_values_orjson_cannot_encode(serve, make_client):
    server = serve([ScriptRule(reply="ok")])
    big = 2**70  # beyond 64 bits: orjson refuses it, the standard library encodes it
    client = make_client(server.url, extra_body={"big": big, "note": "naïve"}, temperature=0.5)
    assert client.chat(MESSAGES).text == "ok"
    (request,) = server.requests()
    body = request["body"]
    assert body["big"] == big and body["note"] == "naïve" and body["temperature"] == 0.5
    assert body["messages"] == MESSAGES


def test_many_queued_calls_keep_to_the_concurrency(serve, make_client):
    server = serve([ScriptRule(reply="ok", latency_s=0.02)])
    client = make_client(server.url, concurrency=5)

    async def calls():
        return await asyncio.gather(*(client.achat(MESSAGES, tag=str(i)) for i in range(40)))

    replies = asyncio.run(calls())
    assert [r.text for r in replies] == ["ok"] * 40
    stats = server.stats()
    assert stats["requests"] == 40 and stats["max_in_flight"] == 5
    assert client.usage.calls == 40 and client.usage.ok == 40
