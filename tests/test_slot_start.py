"""Staggered slot starts of a campaign (issue 19 item 3): the first calls of C episode slots are
spread over time instead of reaching the LLM server in one burst.

* Local engine loop (:func:`run_units`): slot i's first act comes no earlier than
  ``i x interval`` after the run starts (hand-worked: 4 slots 50 ms apart), each slot's first
  act before the next slot's; interval 0 is the old behaviour (every slot acts before any
  slot's second act); a streaming feed still stops at its ``None``s; cancelling (and Ctrl-C)
  during the ramp ends the run at once and closes the envs already built.
* Process executor: 2 workers x 2 slots interleave - the first requests reach a real HTTP
  server on 127.0.0.1 as the campaign's slots 0, 1, 2, 3 = (worker k, slot i) at k + 2 i,
  one interval apart; the ramp shares of :func:`slot_starts`.
* The rows of a staggered campaign are those of an unstaggered one (local and process runs);
  the start interval is not part of the campaign's id.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import threading
import time

import pytest
from executor_contract import rows as _rows

from ambitab_gym.cli import main
from ambitab_gym.corpora import load_corpus
from ambitab_gym.env import AmbiTabEnv
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation import ResultsStore
from ambitab_gym.evaluation.chunks import slot_starts
from ambitab_gym.evaluation.engine import CampaignPlan, WorkUnit, run_loop, run_units
from ambitab_gym.evaluation.process_executor import ProcessExecutor
from ambitab_gym.evaluation.runner import CampaignConfig, run_campaign
from ambitab_gym.llm import LLMClient
from ambitab_gym.policies.scripted import FullAsker
from ambitab_gym.testing.llm_server import role_rules
from ambitab_gym.testing.llm_server_core import ScriptServer

CORPUS = load_corpus("taco")
PEER: contextvars.ContextVar = contextvars.ContextVar("peer", default=None)


class TimedAsker(FullAsker):
    """pi_full whose every decision takes ``think_s`` (an awaited sleep, as an LLM call's
    wait); records the loop time of each decision as (asker number, decision number, time)."""

    def __init__(self, number: int, log: list, think_s: float) -> None:
        super().__init__()
        self.number, self.log, self.think_s, self.decisions = number, log, think_s, 0

    async def aact(self, view):
        self.log.append((self.number, self.decisions, asyncio.get_running_loop().time()))
        self.decisions += 1
        await asyncio.sleep(self.think_s)
        return self.act(view)


class CountingEnv(AmbiTabEnv):
    closed = 0

    def close(self) -> None:
        type(self).closed += 1
        super().close()


def _plan(log: list, think_s: float = 0.02, env=AmbiTabEnv) -> CampaignPlan:
    askers: list[TimedAsker] = []

    def parts(condition: str):
        askers.append(TimedAsker(len(askers), log, think_s))  # built in the order slots start
        return env(CORPUS), askers[-1]

    return CampaignPlan("evaluate", "slots", {}, CORPUS, CORPUS.records, (0,), ("full",), parts)


def _units(count: int) -> list[WorkUnit]:
    records = CORPUS.records
    return [WorkUnit("full", 0, records[i % len(records)]) for i in range(count)]


def test_slot_i_acts_first_no_earlier_than_i_intervals():
    log: list = []
    rows: list = []
    starts: list[float] = []

    async def go():
        starts.append(asyncio.get_running_loop().time())
        await run_units(_plan(log), _units(16), concurrency=4, on_row=rows.append,
                        start_interval_s=0.05)  # fmt: skip

    asyncio.run(go())
    assert len(rows) == 16
    # the first decision of each asker (= slot: each slot builds its asker when it starts)
    first = {}
    for number, _decision, t in log:
        first.setdefault(number, t)
    assert sorted(first) == [0, 1, 2, 3]
    offsets = [first[i] - starts[0] for i in range(4)]
    # hand-worked: slot i starts at i x 50 ms (0, 50, 100, 150 ms), never before
    for i, offset in enumerate(offsets):
        assert offset >= i * 0.05 - 1e-3, (i, offsets)
    # ... and in slot order, one after the other
    assert offsets == sorted(offsets)


def test_interval_zero_starts_every_slot_at_once():
    log: list = []
    rows: list = []
    asyncio.run(run_units(_plan(log, think_s=0.05), _units(8), concurrency=4,
                          on_row=rows.append, start_interval_s=0.0))  # fmt: skip
    assert len(rows) == 8
    firsts = [t for _, decision, t in log if decision == 0][:4]
    seconds = [t for _, decision, t in log if decision == 1]
    # every slot made its first decision before any slot's second one (each takes 50 ms)
    assert len({n for n, d, _ in log if d == 0}) == 4
    assert max(firsts) < min(seconds)


def test_with_a_ramp_a_slot_acts_again_before_the_last_one_starts():
    # the opposite of the test above, so that it can fail: 4 slots 100 ms apart, 20 ms per act
    asyncio.run(run_units(_plan([]), _units(1), concurrency=1, on_row=lambda row: None,
                          start_interval_s=0))  # warm: the corpus's first episode  # fmt: skip
    log: list = []
    asyncio.run(run_units(_plan(log, think_s=0.02), _units(60), concurrency=4,
                          on_row=lambda row: None, start_interval_s=0.1))  # fmt: skip
    first_of_last = min(t for n, d, t in log if n == 3 and d == 0)
    assert any(t < first_of_last for n, d, t in log if n == 0 and d == 1)


def test_a_streaming_feed_stops_at_its_nones_with_a_ramp():
    log: list = []
    rows: list = []

    async def go():
        feed: asyncio.Queue = asyncio.Queue()
        for unit in _units(6):
            feed.put_nowait(unit)
        for _ in range(3):  # every slot's None is queued before any slot has started
            feed.put_nowait(None)
        await asyncio.wait_for(
            run_units(_plan(log), feed, concurrency=3, on_row=rows.append,
                      start_interval_s=0.03),
            timeout=30,
        )  # fmt: skip
        return feed.qsize()

    assert asyncio.run(go()) == 0
    assert sorted(r["record_id"] for r in rows) == sorted(u.record.id for u in _units(6))


def test_cancelling_during_the_ramp_ends_the_run_and_closes_the_envs():
    log: list = []
    CountingEnv.closed = 0

    async def go():
        task = asyncio.create_task(
            run_units(
                _plan(log, env=CountingEnv),
                _units(100),
                concurrency=4,
                on_row=lambda row: None,
                start_interval_s=30.0,
            )  # fmt: skip
        )
        while not log:  # slot 0 is running (however loaded the machine), 1-3 wait 30-90 s
            await asyncio.sleep(0.01)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    took = asyncio.run(go())
    assert took < 30.0  # ended before slot 1's start: the ramp was not waited out
    assert {n for n, _, _ in log} == {0}  # only slot 0 had started
    assert CountingEnv.closed == 1  # its env, the only one built, is closed


def test_ctrl_c_during_the_ramp_stops_the_campaign_loop():
    log: list = []
    sent: list[float] = []
    done = threading.Event()

    def interrupt() -> None:  # Ctrl-C once slot 0 acts, however loaded the machine is
        while not log and not done.wait(0.01):
            pass
        if log:
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

    # Ctrl-C as a person's terminal delivers it: Python's own handler, whatever an earlier
    # test's import (Ray, a trainer) installed in this process
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    watcher = threading.Thread(target=interrupt, daemon=True)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_loop(run_units(_plan(log), _units(100), concurrency=4,
                               on_row=lambda row: None, start_interval_s=30.0))  # fmt: skip
    finally:
        done.set()
        watcher.join()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - sent[0] < 30.0  # before slot 1's start: the ramp was not waited
    assert {n for n, _, _ in log} == {0}


def test_slot_starts_number_the_slots_across_the_workers():
    interval = 0.001
    shares = [(k, *slot_starts(k, 2, interval)) for k in range(2)]
    # worker k's slot i starts at offset + i x step: the campaign's slot k + 2 i
    starts = sorted((offset + i * step, k, i) for k, offset, step in shares for i in range(3))
    assert [k + 2 * i for _, k, i in starts] == [0, 1, 2, 3, 4, 5]
    assert [round(t, 6) for t, _, _ in starts] == [0.0, 0.001, 0.002, 0.003, 0.004, 0.005]


class TimedServer(ScriptServer):
    """The scripted server's HTTP core, also noting when each chat request arrived and from
    which client address (each worker process has connections of its own)."""

    def __init__(self, config) -> None:
        super().__init__(config)
        self.arrivals: list[tuple[float, str]] = []

    async def connection(self, reader, writer):
        PEER.set(writer.get_extra_info("peername"))  # this connection's task and its requests
        return await super().connection(reader, writer)

    async def chat(self, headers, body):
        self.arrivals.append((time.monotonic(), PEER.get()))
        return await super().chat(headers, body)


@pytest.fixture
def timed_server():
    rules = role_rules(["Which year do you mean?"])  # the server's latency: script.latency_s
    server = TimedServer({"rules": [r.to_dict() for r in rules], "record_requests": False})
    loop = asyncio.new_event_loop()
    url = loop.run_until_complete(server.start("127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield server, url
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.run_until_complete(server.stop())
    loop.close()


def _llm_config(limit: int) -> CampaignConfig:
    return CampaignConfig(
        "AmbiTab-Bird-v0", asker="llm:direct", conditions=("asker",), seeds=(0,), limit=limit
    )


def _worker_of_port(pids: list[int]) -> dict[int, int]:
    """Client port -> worker number, from the connections each worker process holds open."""
    psutil = pytest.importorskip("psutil")
    found = {}
    for number, pid in enumerate(pids):
        for conn in psutil.Process(pid).net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.ip == "127.0.0.1":
                found[conn.laddr.port] = number
    return found


def test_process_workers_interleave_their_first_requests(timed_server, tmp_path):
    server, url = timed_server
    interval = 0.3
    with ProcessExecutor(workers=2, chunk=1) as executor, LLMClient(url, "m") as client:
        # workers started (and warm) before the timed run
        run_campaign(
            _llm_config(8),
            tmp_path / "warm.duckdb",
            progress=False,
            llm_client=client,
            executor=executor,
            concurrency=4,
            start_interval_s=0,
        )
        server.script.latency_s = 1.5
        server.arrivals.clear()
        run_campaign(_llm_config(8), tmp_path / "proc.duckdb", progress=False, llm_client=client,
                     executor=executor, concurrency=4, start_interval_s=interval)  # fmt: skip
        ports = _worker_of_port(executor.worker_pids)  # the workers keep their connections
    # 4 slots (2 episodes each), every reply after 1.5 s: the first 4 requests are the slots'
    # first calls. Hand-worked: the campaign's slots 0, 1, 2, 3 are worker 0 slot 0, worker 1
    # slot 0, worker 0 slot 1, worker 1 slot 1, due at 0, 0.3, 0.6, 0.9 s (each slot then
    # builds its env and prompt before it sends) - not worker 0, 0, 1, 1 or 0, 1 at 0, 0, 0.6,
    # 0.6 s (two workers ramping side by side), nor all at once (a burst)
    first = server.arrivals[:4]
    assert [ports[peer[1]] for _, peer in first] == [0, 1, 0, 1]
    times = [t for t, _ in first]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert all(interval / 3 < gap < 2 * interval for gap in gaps), gaps


def test_staggered_rows_equal_unstaggered_rows(tmp_path):
    config = CampaignConfig("AmbiTab-Bird-v0", asker="generic", seeds=(0, 1), limit=10)
    run_campaign(config, tmp_path / "burst.duckdb", progress=False, concurrency=8,
                 start_interval_s=0.0)  # fmt: skip
    run_campaign(config, tmp_path / "ramp.duckdb", progress=False, concurrency=8,
                 start_interval_s=0.01)  # fmt: skip
    burst, ramp = _rows(tmp_path / "burst.duckdb"), _rows(tmp_path / "ramp.duckdb")
    assert len(burst) == 3 * 2 * 10
    assert ramp == burst  # campaign id included: the interval is not part of the campaign


def test_staggered_process_rows_equal_local_rows(tmp_path):
    rules = role_rules(["Which year do you mean?"], latency_s=0.02)
    from ambitab_gym.testing.llm_server import ScriptedServer

    with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        run_campaign(_llm_config(12), tmp_path / "local.duckdb", progress=False,
                     llm_client=client, concurrency=6, start_interval_s=0.0)  # fmt: skip
        with ProcessExecutor(workers=2) as executor:
            run_campaign(_llm_config(12), tmp_path / "proc.duckdb", progress=False,
                         llm_client=client, executor=executor, concurrency=6,
                         start_interval_s=0.02)  # fmt: skip
    local = _rows(tmp_path / "local.duckdb")
    assert len(local) == 12
    assert _rows(tmp_path / "proc.duckdb") == local


def test_a_negative_interval_is_refused(tmp_path):
    config = CampaignConfig("AmbiTab-Bird-v0", asker="generic", seeds=(0,), limit=2)
    with pytest.raises(ConfigurationError, match="start_interval_s"):
        run_campaign(config, tmp_path / "r.duckdb", progress=False, start_interval_s=-1.0)
    with ResultsStore(tmp_path / "r.duckdb") as store:
        assert store.episodes() == []  # refused before anything ran


@pytest.mark.parametrize("command", ["evaluate", "leakage"])
def test_the_cli_takes_a_start_interval(tmp_path, capsys, command):
    args = [command, "AmbiTab-Bird-v0", "--asker", "generic", "--limit", "3",
            "--concurrency", "3", "--no-progress", "--results"]  # fmt: skip
    assert main([*args, str(tmp_path / "a.duckdb"), "--start-interval", "0.05"]) == 0
    assert main([*args, str(tmp_path / "b.duckdb"), "--start-interval", "0"]) == 0
    assert _rows(tmp_path / "a.duckdb") == _rows(tmp_path / "b.duckdb")
    with pytest.raises(SystemExit):
        main([*args, str(tmp_path / "c.duckdb"), "--start-interval", "-1"])
    assert "must be 0 or more" in capsys.readouterr().err
