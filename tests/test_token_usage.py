"""Token usage per episode (issue 17): every episode row stores the prompt and completion tokens
of its LLM calls, per role; the table and ``--json`` sum them.

The scripted server on 127.0.0.1 reports tokens as whitespace-separated words (prompt: every
message's content; completion: the reply), so the expected counts are recomputed here from the
messages sent and the replies received, which the call log (``--llm-log``) records with the
episode each call belonged to. Four roles take part: an LLM asker, the LLM oracle's matcher and
responder, and an LLM solver, with several episodes in flight at once.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from ambitab_gym.cli import main
from ambitab_gym.evaluation import ResultsStore
from ambitab_gym.testing.llm_server import ScriptedServer, role_rules


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AMBITAB_LLM_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


def words(text) -> int:
    return len(str(text or "").split())


def test_tokens_stored_per_episode_and_role_equal_what_the_server_reported(tmp_path, capsys):
    rules = role_rules(
        ["Which region do you mean, and over which period?", "Anything else to know?"],
        matcher=json.dumps({"reasoning": "names it", "action": 'labeled("top customers")'}),
        responder=json.dumps({"answer": "The five customers who spent the most overall."}),
    )
    results, log = tmp_path / "r.duckdb", tmp_path / "calls.jsonl"
    with ScriptedServer(rules, latency_s=0.01) as server:
        argv = ["evaluate", "AmbiTab-Bird-v0", "--asker", "llm:direct", "--solver", "llm"]
        argv += ["--oracle", "llm", "--limit", "4", "--concurrency", "4", "--no-progress"]
        argv += ["--json", "--results", str(results), "--llm-log", str(log)]
        argv += ["--llm-url", server.url, "--model", "m"]
        assert main(argv) == 0, capsys.readouterr().err
        served = server.stats()["requests"]
    out = capsys.readouterr().out

    expected: dict[tuple, dict[str, list[int]]] = defaultdict(dict)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == served > 0
    for call in calls:
        assert call["error"] is None
        episode = call["episode"]
        key = (episode["condition"], episode["seed"], episode["record"])
        counts = expected[key].setdefault(call["role"], [0, 0, 0])
        counts[0] += 1
        counts[1] += sum(words(m["content"]) for m in call["messages"])
        counts[2] += words(call["raw"])
    roles = {role for per_role in expected.values() for role in per_role}
    assert roles == {"asker", "matcher", "responder", "solver"}

    with ResultsStore(results) as store:
        rows = store.episodes()
    assert len(rows) == 12
    for row in rows:
        key = (row["condition"], row["seed"], row["record_id"])
        want = expected.get(key, {})
        got = row["llm_usage"] or {}
        assert {r: [c["calls"], c["prompt_tokens"], c["completion_tokens"]] for r, c in got.items()} == want
        assert row["prompt_tokens"] == sum(c[1] for c in want.values())
        assert row["completion_tokens"] == sum(c[2] for c in want.values())

    total_prompt = sum(c[1] for per_role in expected.values() for c in per_role.values())
    total_completion = sum(c[2] for per_role in expected.values() for c in per_role.values())
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["prompt_tokens"], summary["completion_tokens"]) == (
        total_prompt,
        total_completion,
    )
    assert summary["tokens_by_role"]["solver"]["calls"] == 12  # one SQL per episode
    for role in roles:
        mine = [c for per_role in expected.values() for r, c in per_role.items() if r == role]
        assert summary["tokens_by_role"][role] == {
            "calls": sum(c[0] for c in mine),
            "prompt_tokens": sum(c[1] for c in mine),
            "completion_tokens": sum(c[2] for c in mine),
        }
    header = next(line for line in out.splitlines() if line.startswith("Corpus"))
    assert "Tokens in+out" in header
    assert f"{total_prompt}+{total_completion}" in out


def test_scripted_campaigns_store_zero_tokens(tmp_path, capsys):
    results = tmp_path / "r.duckdb"
    argv = ["evaluate", "AmbiTab-TACO-v0", "--limit", "2", "--no-progress", "--json"]
    assert main([*argv, "--results", str(results)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["prompt_tokens"] == summary["completion_tokens"] == 0
    with ResultsStore(results) as store:
        rows = store.episodes()
    assert rows and all(r["prompt_tokens"] == 0 and r["llm_usage"] is None for r in rows)
