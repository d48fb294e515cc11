"""Campaigns on Ray (issue 18 items 1, 2 and 4) on a local Ray cluster (``ray.init`` here).

* A Ray campaign stores the same episodes (every column but timings) and gives the same
  summary as the local run, for evaluation and leakage campaigns, from Python and from the CLI.
* A worker process killed mid-unit (SIGKILL) is restarted and its unit re-run: the campaign
  completes with the same episode set, nothing lost, nothing twice.
* A driver that dies mid-campaign leaves the rows it stored; rerunning resumes with the
  missing episodes only and ends with the local run's set.
* Several model servers: workers are spread across them (each server gets requests), and
  the calls the workers made are counted in the campaign's client.
* Envs, wrappers and adapters are created and played inside a Ray actor.
* Without ``--executor ray`` nothing imports Ray.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

ray = pytest.importorskip("ray")

from executor_contract import (  # noqa: E402
    check_driver_death_resumes,
    check_leakage_matches_local,
    check_same_rows_as_local,
)
from executor_contract import keys as _keys  # noqa: E402
from executor_contract import rows as _rows  # noqa: E402

from ambitab_gym.cli import main  # noqa: E402
from ambitab_gym.errors import ConfigurationError  # noqa: E402
from ambitab_gym.evaluation import ResultsStore  # noqa: E402
from ambitab_gym.evaluation.ray_executor import RayExecutor  # noqa: E402
from ambitab_gym.evaluation.runner import CampaignConfig, run_campaign  # noqa: E402
from ambitab_gym.llm import LLMClient  # noqa: E402
from ambitab_gym.testing.llm_server import ScriptedServer, role_rules  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def shared(cluster):
    """Two workers that serve every campaign of this module (as they would serve several
    campaigns on a cluster): worker processes start once."""
    executor = RayExecutor(workers=2)
    yield executor
    executor.close()


@pytest.fixture
def executor(shared):
    shared.chunk, shared.llm_urls = None, ()
    return shared


def test_a_ray_campaign_stores_what_the_local_run_stores(executor, tmp_path):
    check_same_rows_as_local(executor, tmp_path)
    assert len(set(executor.worker_pids)) == 2 and os.getpid() not in executor.worker_pids


def test_a_ray_leakage_campaign_matches_the_local_one(executor, tmp_path):
    check_leakage_matches_local(executor, tmp_path)


def _llm_config() -> CampaignConfig:
    return CampaignConfig(
        "AmbiTab-Bird-v0", asker="llm:direct", conditions=("asker",), seeds=(0,), limit=12
    )


def test_a_worker_killed_mid_unit_loses_and_duplicates_nothing(executor, tmp_path):
    rules = role_rules(["Which year do you mean?", "Which table?"], latency_s=0.05)
    with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        run_campaign(_llm_config(), tmp_path / "local.duckdb", progress=False, llm_client=client)
        executor.chunk = 3
        killed: list[int] = []

        class KillingStore(ResultsStore):
            """Kills a worker process as the first row arrives (the worker is then busy with
            its next unit: 3 episodes x 3 LLM calls of 50 ms each)."""

            def add_episode(self, row):
                if not killed:
                    killed.append(executor.worker_pids[0])
                    os.kill(killed[0], signal.SIGKILL)
                super().add_episode(row)

        with KillingStore(tmp_path / "ray.duckdb") as store:
            run_campaign(_llm_config(), store, progress=False, llm_client=client, executor=executor)
    rows = _rows(tmp_path / "ray.duckdb")
    expected = _rows(tmp_path / "local.duckdb")
    assert killed and killed[0] not in executor.worker_pids  # the worker was replaced
    assert len(_keys(rows)) == len(set(_keys(rows))) == 12
    assert rows == expected
    assert any(row["n_questions"] == 2 for row in rows)  # the LLM asker really asked


def test_a_driver_killed_mid_campaign_resumes_to_the_same_set(executor, tmp_path):
    check_driver_death_resumes(executor, tmp_path)


def test_workers_are_spread_across_model_servers(executor, tmp_path):
    config = _llm_config()
    with (
        ScriptedServer(role_rules()) as first,
        ScriptedServer(role_rules()) as second,
        LLMClient(first.url, "m") as client,
    ):
        executor.chunk, executor.llm_urls = 3, [first.url, second.url]
        run_campaign(
            config, tmp_path / "ray.duckdb", progress=False, llm_client=client, executor=executor
        )
        served = first.stats()["requests"], second.stats()["requests"]
        counted = client.usage.calls  # the workers' calls, reported back per unit
        run_campaign(config, tmp_path / "local.duckdb", progress=False, llm_client=client)
    assert served[0] > 0 and served[1] > 0
    assert counted == sum(served)
    assert _rows(tmp_path / "ray.duckdb") == _rows(tmp_path / "local.duckdb")


@pytest.mark.parametrize("command", ["evaluate", "leakage"])
def test_ray_options_need_the_ray_executor(capsys, tmp_path, command):
    argv = [command, "AmbiTab-Bird-v0", "--asker", "generic", "--limit", "2", "--ray-workers", "2"]
    assert main([*argv, "--results", str(tmp_path / "r.duckdb")]) == 2
    assert "--ray-workers need(s) --executor ray" in capsys.readouterr().err


def test_envs_wrappers_and_adapters_are_built_inside_a_ray_actor(cluster):
    def play() -> dict:
        """Runs where it is called: in the actor below, or here."""
        import gymnasium as gym

        import ambitab_gym  # noqa: F401
        from ambitab_gym.integrations.common import ChatSession
        from ambitab_gym.wrappers import ChatMessages, HybridOracle, SpecificationRandomization

        out: dict = {"pid": os.getpid()}
        env = gym.make("AmbiTab-Bird-v0")
        env.reset(seed=0, options={"record_id": "bird-0014"})
        out["plain"] = env.step('What do you mean by "recently"?')[1:4]
        stacked = ChatMessages(
            SpecificationRandomization(HybridOracle(gym.make("AmbiTab-Bird-v0")))
        )
        messages, _ = stacked.reset(seed=2)
        out["stack"] = (len(messages), stacked.step("STOP")[1:4])
        session = ChatSession("AmbiTab-Bird-v0")
        session.start(record_id="bird-0014")
        session.step('What do you mean by "recently"?')
        out["chat"] = session.step("<STOP>")[1:3]
        return out

    @ray.remote(num_cpus=0)  # the campaign workers hold the two CPUs
    class Builder:
        def run(self) -> dict:
            return play()

    actor = Builder.remote()
    try:
        remote = ray.get(actor.run.remote(), timeout=120)
    finally:
        ray.kill(actor)
    local = play()
    assert remote.pop("pid") != local.pop("pid")
    assert remote == local


def test_a_local_campaign_never_imports_ray(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        from ambitab_gym.cli import main
        import ambitab_gym.evaluation.ray_executor  # the module alone loads no Ray either
        code = main(["evaluate", "AmbiTab-Bird-v0", "--asker", "generic", "--limit", "3",
                     "--no-progress", "--results", {str(tmp_path / "r.duckdb")!r}])
        print(code, "ray" in sys.modules, any(m.startswith("ray.") for m in sys.modules))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "0 False False"


def test_the_cli_runs_a_campaign_on_ray(shared, tmp_path, capsys):
    shared.close()  # the command starts workers of its own on the two CPUs
    base = ["AmbiTab-Bird-v0", "--asker", "generic", "--limit", "6", "--no-progress", "--json"]
    outputs = {}
    for executor in ("local", "ray"):
        argv = ["evaluate", *base, "--results", str(tmp_path / f"{executor}.duckdb")]
        if executor == "ray":
            argv += ["--executor", "ray", "--ray-workers", "2", "--ray-chunk", "2"]
        assert main(argv) == 0
        outputs[executor] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for summary in outputs.values():
        summary.pop("results")
    assert outputs["ray"] == outputs["local"]
    assert _rows(tmp_path / "ray.duckdb") == _rows(tmp_path / "local.duckdb")


def test_only_the_campaign_client_moves_to_each_worker_server():
    executor = RayExecutor(llm_urls=["http://gpu1:8000", "http://gpu2:8000/v1"])
    campaign = LLMClient("http://gpu1:8000/v1", "m", temperature=0.2)
    oracle = LLMClient("http://oracle:9000/v1", "judge")  # a separate oracle server
    first, second = (executor._clients_for([oracle, campaign], i) for i in (0, 1))
    assert [c.base_url for c in first] == ["http://oracle:9000/v1", "http://gpu1:8000/v1"]
    assert [c.base_url for c in second] == ["http://oracle:9000/v1", "http://gpu2:8000/v1"]
    assert first[0] is oracle and second[1].params == campaign.params


def test_more_workers_than_the_cluster_has_cpus_is_refused(cluster, tmp_path):
    config = CampaignConfig("AmbiTab-Bird-v0", asker="full", seeds=(0,), limit=2)
    with pytest.raises(ConfigurationError, match="3 Ray worker"):
        run_campaign(config, tmp_path / "r.duckdb", progress=False, executor=RayExecutor(workers=3))
