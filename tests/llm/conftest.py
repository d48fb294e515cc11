"""Fixtures for the LLM tests: scripted servers on 127.0.0.1 and clients, stopped afterwards."""

from __future__ import annotations

import pytest

from ambitab_gym.llm import LLMClient
from ambitab_gym.testing.llm_server import ScriptedServer


@pytest.fixture
def serve():
    """Start a :class:`ScriptedServer` (thread mode unless ``process=True``)."""
    servers: list[ScriptedServer] = []

    def start(rules=(), **options) -> ScriptedServer:
        server = ScriptedServer(rules, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def make_client():
    """Build an :class:`LLMClient` with a short backoff; closed at teardown."""
    clients: list[LLMClient] = []

    def make(url: str, **options) -> LLMClient:
        options.setdefault("backoff_s", 0.01)
        options.setdefault("max_backoff_s", 0.05)
        client = LLMClient(url, options.pop("model", "scripted-model"), **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
