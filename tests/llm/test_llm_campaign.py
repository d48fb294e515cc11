"""LLM parts inside evaluation campaigns: many episodes in flight, faults recorded, none lost."""

from __future__ import annotations

import json

import pytest
from llm_helpers import contents

from ambitab_gym.corpora import load_corpus
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
from ambitab_gym.testing.llm_server import ROLE_MARKERS, role_rules

CORPUS = "AmbiTab-Bird-v0"


def rules():
    return role_rules(
        ["What exactly do you mean?", "Which time period?"],
        matcher=json.dumps({"action": 'unlabeled("WHERE 1 = 1")'}),
        responder=json.dumps({"answer": "Whatever is usual."}),
        solver=json.dumps({"type": "final_sql", "output": "SELECT 1"}),
        latency_s=0.02,
    )


def config(limit: int, **options) -> CampaignConfig:
    return CampaignConfig(
        CORPUS,
        asker="llm:checklist-ledger",
        solver="llm",
        oracle="llm",
        conditions=("asker",),
        limit=limit,
        **options,
    )


def test_campaign_keeps_episodes_in_flight(serve, make_client, tmp_path):
    server = serve(rules(), latency_s=0.02)
    client = make_client(server.url, concurrency=16)
    records = load_corpus(CORPUS).records[:12]
    summary = run_campaign(
        config(12), tmp_path / "r.duckdb", concurrency=6, llm_client=client, progress=False
    )
    assert summary.episodes == 12 and summary.errors == {}
    stats = server.stats()
    assert 2 <= stats["max_in_flight"] <= 6  # episodes overlapped, within the campaign's limit
    # per episode with m > 0: 3 asker calls, 2 matcher calls, 1 solver call - the matcher's
    # unlabeled("WHERE 1 = 1") is in no reference query, so the route is invalid (issue 16)
    # and the responder refuses without a call; m = 0 records skip clarification: only the solver
    expected = sum(6 if r.m > 0 else 1 for r in records)
    assert stats["requests"] == expected == client.usage.ok
    solver_calls = [r for r in server.requests() if ROLE_MARKERS["solver"] in contents(r)]
    assert len(solver_calls) == 12


def test_faults_become_episode_errors_and_the_campaign_goes_on(serve, make_client, tmp_path):
    server = serve(rules(), latency_s=0.02, hang_s=10.0)
    client = make_client(server.url, concurrency=8, max_retries=0, timeout_s=1.5)
    faults = ["http_500", "context_overflow", "malformed_json", "timeout", "disconnect"]
    for fault in faults:
        server.fail_next(fault)
    path = tmp_path / "r.duckdb"
    summary = run_campaign(config(10), path, concurrency=4, llm_client=client, progress=False)
    # each fault ends exactly one episode (an episode stops at its first error)
    assert summary.errors == {
        "http_500": 1,
        "context_overflow": 1,
        "malformed_output": 1,
        "timeout": 1,
        "connection": 1,
    }
    assert summary.episodes == 10  # nothing lost
    with ResultsStore(path) as store:
        episodes = store.episodes(config(10).campaign_id)
    assert len(episodes) == 10
    failed = [e for e in episodes if e["error"]]
    assert len(failed) == 5 and all(e["success"] == 0.0 for e in failed)
    assert client.usage.errors == {
        "http_500": 1,
        "context_overflow": 1,
        "malformed_output": 1,
        "timeout": 1,
        "connection": 1,
    }


@pytest.mark.parametrize("policy", ["scoped", "unfiltered"])
def test_oracle_policy_through_the_campaign(serve, make_client, tmp_path, policy):
    server = serve(rules())
    client = make_client(server.url)
    run_campaign(
        config(3),
        tmp_path / "r.duckdb",
        concurrency=2,
        llm_client=client,
        progress=False,
        oracle_options={"policy": policy},
    )
    records = load_corpus(CORPUS).records[:3]
    matcher_prompts = [
        contents(r) for r in server.requests() if ROLE_MARKERS["matcher"] in contents(r)
    ]
    assert matcher_prompts
    references = [r.verification.reference_sql for r in records]
    shows_sql = [any(sql in p for sql in references) for p in matcher_prompts]
    assert all(shows_sql) if policy == "unfiltered" else not any(shows_sql)
