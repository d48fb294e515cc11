"""Campaigns on local worker processes (issue 19 item 3): ``ProcessExecutor``.

* A process campaign stores the same episodes (every column but timings) and gives the same
  summary as the local run, for evaluation and leakage campaigns, from Python and from the CLI;
  the worker processes are real, other than this one, and serve the next run.
* A worker process killed mid-chunk (SIGKILL) is replaced and its chunks re-run: the campaign
  completes with the same episode set, nothing lost, nothing twice.
* A driver that stops mid-campaign leaves the rows it stored; rerunning resumes with the
  missing episodes only and ends with the local run's set; ``retry_errors`` re-runs errored
  episodes through the workers.
* The LLM calls the workers made are counted in the campaign's client, as the server saw them,
  and the concurrency is split across the workers (the server never sees more in flight).
* An exception inside a worker stops the run with ``ProcessWorkerError``.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
from executor_contract import (
    check_driver_death_resumes,
    check_leakage_matches_local,
    check_same_rows_as_local,
)
from executor_contract import keys as _keys
from executor_contract import rows as _rows

from ambitab_gym.cli import main
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation import ResultsStore
from ambitab_gym.evaluation.process_executor import (
    ProcessExecutor,
    ProcessWorkerError,
    split_concurrency,
)
from ambitab_gym.evaluation.runner import CampaignConfig, run_campaign
from ambitab_gym.llm import LLMClient
from ambitab_gym.testing.llm_server import ScriptedServer, role_rules


@pytest.fixture(scope="module")
def shared():
    """Two worker processes that serve every campaign of this module (they start once)."""
    executor = ProcessExecutor(workers=2)
    yield executor
    executor.close()


@pytest.fixture
def executor(shared):
    shared.chunk = None
    return shared


def test_a_process_campaign_stores_what_the_local_run_stores(executor, tmp_path):
    expected = check_same_rows_as_local(executor, tmp_path, concurrency=4)
    pids = executor.worker_pids
    assert len(set(pids)) == 2 and os.getpid() not in pids
    # the workers serve the next run (no new processes)
    config = CampaignConfig("AmbiTab-Bird-v0", asker="generic", seeds=(0, 1), limit=10)
    run_campaign(config, tmp_path / "again.duckdb", progress=False, executor=executor)
    assert executor.worker_pids == pids
    assert _rows(tmp_path / "again.duckdb") == expected


def test_a_process_leakage_campaign_matches_the_local_one(executor, tmp_path):
    check_leakage_matches_local(executor, tmp_path)


def _llm_config(limit: int = 12) -> CampaignConfig:
    return CampaignConfig(
        "AmbiTab-Bird-v0", asker="llm:direct", conditions=("asker",), seeds=(0,), limit=limit
    )


def test_llm_calls_are_counted_and_the_concurrency_is_split(executor, tmp_path):
    rules = role_rules(["Which year do you mean?"], latency_s=0.05)
    with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        run_campaign(
            _llm_config(24), tmp_path / "proc.duckdb", progress=False, llm_client=client,
            executor=executor, concurrency=6,
        )  # fmt: skip
        stats = server.stats()
        counted = client.usage.calls  # the workers' calls, reported back per chunk
        by_role = {role: usage.calls for role, usage in client.usage_by_role.items()}
    with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        run_campaign(_llm_config(24), tmp_path / "local.duckdb", progress=False, llm_client=client)
        local_calls = client.usage.calls
        local_by_role = {role: usage.calls for role, usage in client.usage_by_role.items()}
    assert counted == stats["requests"] == local_calls > 24
    assert by_role == local_by_role
    # 6 in flight split as 3 + 3: the server saw more than one process's share, never more
    assert 3 < stats["max_in_flight"] <= 6
    assert _rows(tmp_path / "proc.duckdb") == _rows(tmp_path / "local.duckdb")


def test_a_worker_killed_mid_chunk_loses_and_duplicates_nothing(executor, tmp_path):
    rules = role_rules(["Which year do you mean?", "Which table?"], latency_s=0.05)
    with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        run_campaign(_llm_config(), tmp_path / "local.duckdb", progress=False, llm_client=client)
        executor.chunk = 2
        killed: list[int] = []

        class KillingStore(ResultsStore):
            """Kills a worker process as the first row arrives (the worker is then busy with
            its next chunks: 2 episodes x 3 LLM calls of 50 ms each)."""

            def add_episode(self, row):
                if not killed:
                    killed.append(executor._handles[0].process.pid)
                    os.kill(killed[0], signal.SIGKILL)
                super().add_episode(row)

        with KillingStore(tmp_path / "proc.duckdb") as store:
            run_campaign(
                _llm_config(), store, progress=False, llm_client=client, executor=executor,
                concurrency=4,
            )  # fmt: skip
    rows = _rows(tmp_path / "proc.duckdb")
    expected = _rows(tmp_path / "local.duckdb")
    assert killed and killed[0] not in executor.worker_pids  # the worker was replaced
    assert executor.restarts == 1
    assert len(_keys(rows)) == len(set(_keys(rows))) == 12
    assert rows == expected
    assert any(row["n_questions"] == 2 for row in rows)  # the LLM asker really asked


def test_a_driver_stopped_mid_campaign_resumes_to_the_same_set(executor, tmp_path):
    check_driver_death_resumes(executor, tmp_path)


def test_errored_episodes_are_retried_through_the_workers(executor, tmp_path):
    rules = role_rules(["Which year do you mean?"])
    with ScriptedServer(rules) as server, LLMClient(server.url, "m", max_retries=0) as client:
        server.fail_next("http_500", times=4)  # the first four calls fail: errored episodes
        run_campaign(
            _llm_config(), tmp_path / "proc.duckdb", progress=False, llm_client=client,
            executor=executor, concurrency=1, abort_after=0,
        )  # fmt: skip
        errored = [r for r in _rows(tmp_path / "proc.duckdb") if r["error"] is not None]
        run_campaign(_llm_config(), tmp_path / "local.duckdb", progress=False, llm_client=client)
        executor.chunk = 1
        run_campaign(
            _llm_config(), tmp_path / "proc.duckdb", progress=False, llm_client=client,
            executor=executor, retry_errors=True,
        )  # fmt: skip
    assert errored  # the failures were stored as errored episodes
    assert executor.units == len(errored)  # only those ran again (one record per chunk)
    assert _rows(tmp_path / "proc.duckdb") == _rows(tmp_path / "local.duckdb")


def test_an_exception_inside_a_worker_stops_the_run(tmp_path):
    config = CampaignConfig("AmbiTab-Bird-v0", asker="tests.factories:no_such_asker", limit=2)
    with ProcessExecutor(workers=1) as executor, pytest.raises(ProcessWorkerError):
        # the asker is built inside the worker, where its import path fails
        run_campaign(config, tmp_path / "r.duckdb", progress=False, executor=executor)


def test_the_cli_runs_a_campaign_on_worker_processes(tmp_path, capsys):
    base = ["AmbiTab-Bird-v0", "--asker", "generic", "--limit", "6", "--no-progress", "--json"]
    outputs = {}
    for executor in ("local", "processes"):
        argv = ["evaluate", *base, "--results", str(tmp_path / f"{executor}.duckdb")]
        if executor == "processes":
            argv += ["--executor", "processes", "--workers", "2"]
        assert main(argv) == 0
        outputs[executor] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for summary in outputs.values():
        summary.pop("results")
    assert outputs["processes"] == outputs["local"]
    assert _rows(tmp_path / "processes.duckdb") == _rows(tmp_path / "local.duckdb")


@pytest.mark.parametrize("command", ["evaluate", "leakage"])
def test_workers_need_the_process_executor(capsys, tmp_path, command):
    argv = [command, "AmbiTab-Bird-v0", "--asker", "generic", "--limit", "2", "--workers", "2"]
    assert main([*argv, "--results", str(tmp_path / "r.duckdb")]) == 2
    assert "--workers need(s) --executor processes" in capsys.readouterr().err


def test_the_concurrency_is_split_and_bad_settings_are_refused():
    assert split_concurrency(256, 2) == [128, 128]
    assert split_concurrency(7, 3) == [3, 2, 2]
    assert split_concurrency(2, 8) == [1, 1]  # never a worker without an episode in flight
    with pytest.raises(ConfigurationError):
        ProcessExecutor(workers=0)
    with pytest.raises(ConfigurationError):
        ProcessExecutor(chunk=0)


def test_closing_the_executor_ends_its_workers(tmp_path):
    config = CampaignConfig("AmbiTab-Bird-v0", asker="full", seeds=(0,), limit=2)
    with ProcessExecutor(workers=2) as executor:
        run_campaign(
            config, tmp_path / "r.duckdb", progress=False, executor=executor, concurrency=2
        )
        pids = list(executor.worker_pids)
        for pid in pids:
            os.kill(pid, 0)  # alive between runs
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # ended and reaped
