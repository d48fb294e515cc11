"""Loud failures (issue 17, item 3): pre-flight of the server, the error-rate threshold,
``--retry-errors``, progress lines on non-terminals, the results file in the data home, and the
note for seeds that cannot vary anything.

Every LLM here is the real scripted server (:mod:`ambitab_gym.testing.llm_server`) on 127.0.0.1;
every campaign runs the real CLI over the bundled corpora and writes a real DuckDB file.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from ambitab_gym.cli import main
from ambitab_gym.evaluation import ResultsStore
from ambitab_gym.testing.llm_server import ScriptedServer, role_rules

ENV_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AMBITAB_LLM_MODEL", "OPENAI_MODEL")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    with ScriptedServer(role_rules(["Which one?"]), models=["m"]) as running:
        yield running


def closed_port_url() -> str:
    """A loopback URL nothing listens on (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("command", ["evaluate", "leakage"])
def test_an_unreachable_server_stops_the_campaign_before_any_episode(command, tmp_path, capsys):
    url = closed_port_url()
    results = tmp_path / "r.duckdb"
    status = main(
        [command, "AmbiTab-Bird-v0", "--asker", "llm:direct", "--solver", "llm"]
        + ["--oracle", "llm", "--limit", "2", "--no-progress", "--results", str(results)]
        + ["--llm-url", url, "--model", "m"]
    )
    err = capsys.readouterr().err
    assert status != 0
    assert url in err and "cannot reach" in err
    assert not results.exists()  # no campaign, no episode stored


def test_an_llm_part_without_a_server_fails_before_the_results_file(tmp_path, capsys):
    results = tmp_path / "r.duckdb"
    status = main(
        ["evaluate", "AmbiTab-Bird-v0", "--solver", "llm", "--no-progress"]
        + ["--results", str(results)]
    )
    assert status == 2
    assert "--solver llm needs an LLM server" in capsys.readouterr().err
    assert not results.exists()


def _solver_campaign(server, results, *extra: str) -> list[str]:
    # scripted asker and oracle, an LLM solver: exactly one chat request per episode, in order
    return (
        ["evaluate", "AmbiTab-Bird-v0", "--solver", "llm", "--limit", "2", "--no-progress"]
        + ["--concurrency", "1", "--llm-retries", "0", "--json", "--results", str(results)]
        + ["--llm-url", server.url, "--model", "m", *extra]
    )


def test_half_the_episodes_errored_fails_then_retry_errors_completes_them(server, tmp_path, capsys):
    results = tmp_path / "r.duckdb"
    server.fail_next("http_500", times=3)  # the first 3 of 6 episodes' solver requests
    status = main(_solver_campaign(server, results))
    captured = capsys.readouterr()
    assert status == 1
    assert "FAILED: 3 of 6 episodes (50.0%) ended in an error" in captured.err
    assert "--retry-errors" in captured.err and "http_500 3" in captured.err
    assert "SR none" in captured.out  # the table is still printed, with the failure below it
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["failed"] is True and summary["error_rate"] == 0.5
    assert summary["errors"] == {"http_500": 3}
    with ResultsStore(results) as store:
        rows = store.episodes()
    assert len(rows) == 6 and sum(1 for r in rows if r["error"]) == 3

    # a plain resume treats errored episodes as done: nothing runs, still failed
    before = server.stats()["requests"]
    assert main(_solver_campaign(server, results)) == 1
    capsys.readouterr()
    assert server.stats()["requests"] == before

    # --retry-errors runs exactly the three again (the server works now); rows are replaced
    status = main(_solver_campaign(server, results, "--retry-errors"))
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert server.stats()["requests"] == before + 3
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["errors"] == {} and summary["failed"] is False and summary["episodes"] == 6
    with ResultsStore(results) as store:
        rows = store.episodes()
    assert len(rows) == 6 and not any(r["error"] for r in rows)
    assert len({(r["condition"], r["seed"], r["record_id"]) for r in rows}) == 6


def test_the_threshold_is_configurable(server, tmp_path, capsys):
    results = tmp_path / "r.duckdb"
    server.fail_next("http_500", times=3)
    assert main(_solver_campaign(server, results, "--max-error-rate", "60%")) == 0
    assert "FAILED" not in capsys.readouterr().err


def test_progress_lines_on_a_non_terminal(server, tmp_path):
    server.reset(latency_s=0.05)  # every episode takes at least one 50 ms request
    command = [
        sys.executable,
        "-m",
        "ambitab_gym",
        "evaluate",
        "AmbiTab-Bird-v0",
        "--solver",
        "llm",
        "--limit",
        "3",
        "--concurrency",
        "1",
        "--progress-interval",
        "0.01",
        "--results",
        str(tmp_path / "r.duckdb"),
        "--llm-url",
        server.url,
        "--model",
        "m",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=dict(os.environ)
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "bird: 9 episode(s) to run" in lines
    periodic = [line for line in lines if "ETA" in line]
    assert len(periodic) >= 2
    assert all(" error(s), ETA " in line and " ep/s, " in line for line in periodic)
    assert any(line.startswith("bird: 9/9 episodes (100%)") for line in lines)
    assert "\r" not in done.stderr  # no tqdm bar written into a pipe


def test_results_go_to_the_data_home_by_default(data_home, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "AmbiTab-TACO-v0", "--limit", "2", "--no-progress"]) == 0
    captured = capsys.readouterr()
    expected = data_home / "results" / "ambitab-results.duckdb"
    assert expected.is_file()
    assert f"results: {expected}" in captured.err
    assert f"results in {expected}" in captured.out
    assert list(tmp_path.glob("*.duckdb")) == []  # nothing in the working folder


def test_seeds_that_cannot_vary_anything_get_a_note(tmp_path, capsys):
    results = tmp_path / "r.duckdb"
    argv = ["evaluate", "AmbiTab-TACO-v0", "--asker", "generic", "--limit", "3"]
    argv += ["--seeds", "2", "--no-progress", "--results", str(results)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "note: the 2 seeds ran identical episodes" in out and "0 by construction" in out
    # the note is true: every stored episode of seed 1 equals its seed-0 twin
    with ResultsStore(results) as store:
        rows = store.episodes()
    keep = ("success", "precision", "recall", "f1", "sql", "dialogue", "stop_reason")
    by_seed = {
        s: {(r["condition"], r["record_id"]): [r[k] for k in keep] for r in rows if r["seed"] == s}
        for s in (0, 1)
    }
    assert by_seed[0] == by_seed[1] and len(by_seed[0]) == 9


def test_no_seed_note_for_one_seed_or_an_llm_part(server, tmp_path, capsys):
    assert (
        main(
            ["evaluate", "AmbiTab-TACO-v0", "--limit", "1", "--no-progress"]
            + ["--results", str(tmp_path / "a.duckdb")]
        )
        == 0
    )
    assert "note:" not in capsys.readouterr().out
    argv = ["evaluate", "AmbiTab-TACO-v0", "--solver", "llm", "--limit", "1", "--seeds", "2"]
    argv += ["--no-progress", "--results", str(tmp_path / "b.duckdb")]
    argv += ["--llm-url", server.url, "--model", "m"]
    assert main(argv) == 0
    assert "note:" not in capsys.readouterr().out


def test_the_store_replaces_only_errored_rows_handed_out_for_retry(tmp_path):
    class Record:
        def __init__(self, rid):
            self.id = rid

    records = [Record("ok"), Record("bad")]
    with ResultsStore(tmp_path / "r.duckdb") as store:
        store.add_campaign("c", {}, kind="evaluate", corpus="x")
        store.add_episode(
            {"campaign_id": "c", "condition": "asker", "seed": 0, "record_id": "ok", "success": 1.0}
        )
        store.add_episode(
            {
                "campaign_id": "c",
                "condition": "asker",
                "seed": 0,
                "record_id": "bad",
                "success": 0.0,
                "error": "connection",
            }
        )
        store.flush()
        # a duplicate without a retry is ignored, even for the errored row
        store.add_episode(
            {
                "campaign_id": "c",
                "condition": "asker",
                "seed": 0,
                "record_id": "bad",
                "success": 1.0,
            }
        )
        store.flush()
        assert store.errored_keys("c") == {("asker", 0, "bad")}
        assert store.pending("c", [0], ["asker"], records) == []
        todo = store.pending("c", [0], ["asker"], records, retry_errors=True)
        assert [(c, s, r.id) for c, s, r in todo] == [("asker", 0, "bad")]
        for rid in ("ok", "bad"):  # the completed row is never replaced
            store.add_episode(
                {
                    "campaign_id": "c",
                    "condition": "asker",
                    "seed": 0,
                    "record_id": rid,
                    "success": 0.5,
                    "error": None,
                }
            )
        store.flush()
        rows = {r["record_id"]: r for r in store.episodes("c")}
    assert len(rows) == 2
    assert (rows["ok"]["success"], rows["ok"]["error"]) == (1.0, None)
    assert (rows["bad"]["success"], rows["bad"]["error"]) == (0.5, None)


def test_a_server_that_stops_answering_stops_the_campaign(server, tmp_path, capsys):
    results = tmp_path / "r.duckdb"
    server.fail_next("http_503", times=1000)  # from the first request on, every one fails
    status = main(_solver_campaign(server, results, "--abort-after", "4"))
    err = capsys.readouterr().err
    assert status == 2
    assert "stopped: the last 4 episodes ended in a server error (http_503)" in err
    assert "4 episode(s) of this run are stored" in err
    assert server.stats()["requests"] == 4  # nothing ran after the fourth
    with ResultsStore(results) as store:
        rows = store.episodes()
    assert len(rows) == 4 and all(r["error"] == "http_503" for r in rows)
    # fewer server errors in a row than --abort-after: the campaign runs to its end
    server.reset()
    server.fail_next("http_503", times=2)
    argv = _solver_campaign(server, results, "--abort-after", "3", "--retry-errors")
    status = main([*argv, "--max-error-rate", "50%"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert server.stats()["requests"] == 6  # the four errored and the two never run
    with ResultsStore(results) as store:
        rows = store.episodes()
    assert len(rows) == 6 and sum(1 for r in rows if r["error"]) == 2


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    # "ambitab-gym list | head": here the reader ("true") is gone before the first line
    env = {**os.environ, "AMBITAB_GYM_HOME": str(tmp_path)}
    command = f"{sys.executable} -m ambitab_gym list --components | true"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_a_library_campaign_leaves_the_garbage_collector_alone(tmp_path):
    # only a process's entry (the command line, a campaign worker) tunes the collector
    import gc

    from ambitab_gym.evaluation import CampaignConfig, run_campaign

    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    run_campaign(
        CampaignConfig("bird", asker="full", limit=2), tmp_path / "r.duckdb", progress=False
    )
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen
