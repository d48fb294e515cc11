"""Prefetching (``AmbiTab-Procedural-v0`` with ``prefetch=N``): worker processes generate the
next tasks ahead, the sequence of tasks is the in-process one for the same seed (also across
a curriculum step and a reseed), ``env.close()`` leaves no process behind, a worker whose parent
dies exits, and a dead worker is an error, not a hang. Real processes throughout."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import pytest

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.actions import STOP
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.generate import GeneratorConfig, TaskGenerator
from ambitab_gym.generate.prefetch import PrefetchError, TaskPrefetcher, task_seed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped) is not running
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pids: list[int], seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _episodes(env, resets: list[tuple[int | None, dict | None]]) -> list:
    """The record of each reset, after the optional curriculum step given with it."""
    out = []
    for seed, configure in resets:
        if configure:
            env.unwrapped.configure(**configure)
        env.reset(seed=seed)
        out.append(env.unwrapped.record)
        env.step(STOP)
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_same_seed_same_tasks_with_and_without_prefetch(workers):
    resets = [(5, None)] + [(None, None)] * 11
    resets += [(None, {"ambiguities": (2, 3), "distractors": (1, 2)})] + [(None, None)] * 5
    resets += [(8, None)] + [(None, None)] * 4
    plain = gym.make("AmbiTab-Procedural-v0", ambiguities=(0, 2))
    ahead = gym.make(
        "AmbiTab-Procedural-v0", ambiguities=(0, 2), prefetch=workers, prefetch_depth=3
    )
    try:
        expected = _episodes(plain, resets)
        got = _episodes(ahead, resets)
    finally:
        ahead.close()
        plain.close()
    assert got == expected
    assert len({r.avt_id for r in expected}) == len(expected)  # fresh tasks, not repeats
    assert all(r.m >= 2 for r in expected[12:18])  # the curriculum step took effect
    stats = ahead.unwrapped.generation_stats()
    assert stats["prefetched"] == len(resets) and stats["tasks"] == 1  # only the initial task
    assert stats["wait_seconds"] >= 0


def test_task_stream_is_the_in_process_generator():
    config = GeneratorConfig(ambiguities=(1, 2), domains=("hospital", "flights"))
    local = TaskGenerator(config, validate=False)
    with TaskPrefetcher(workers=2, depth=2) as prefetcher:
        prefetcher.start(config, stream=99, index=3)
        items = [prefetcher.get() for _ in range(5)]
    assert [i.index for i in items] == [3, 4, 5, 6, 7]
    for item in items:
        assert item.seed == task_seed(99, item.index)
        assert item.records == local.generate(item.seed).records
    assert prefetcher.closed and prefetcher.tasks == 5


def test_config_pickles():
    config = GeneratorConfig(ambiguities=(1, 3), families=("table", "scope"), domains="test")
    config.digest()  # the cached digest travels too
    again = pickle.loads(pickle.dumps(config))
    assert again == config and again.digest() == config.digest()


def test_close_leaves_no_worker_process():
    env = gym.make("AmbiTab-Procedural-v0", prefetch=2)
    env.reset(seed=0)
    pids = env.unwrapped.prefetcher.pids
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    env.close()
    assert _wait_gone(pids, 1.0)
    env.close()  # idempotent


def test_workers_exit_when_the_parent_is_killed(tmp_path):
    script = textwrap.dedent(
        """
        import sys, time
        import gymnasium as gym
        import ambitab_gym
        env = gym.make("AmbiTab-Procedural-v0", prefetch=2, prefetch_depth=2)
        env.reset(seed=1)
        print(" ".join(map(str, env.unwrapped.prefetcher.pids)), flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        parent.send_signal(signal.SIGKILL)  # no cleanup runs in the parent
        parent.wait(timeout=30)
        assert _wait_gone(pids, 20.0), "prefetching workers outlived their parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_a_dead_worker_is_an_error_not_a_hang():
    prefetcher = TaskPrefetcher(workers=1, depth=1)
    try:
        prefetcher.start(GeneratorConfig(ambiguities=(1, 1)), stream=1)
        prefetcher.get()
        (pid,) = prefetcher.pids
        os.kill(pid, signal.SIGKILL)
        assert _wait_gone([pid], 10.0)
        with pytest.raises(PrefetchError, match="exited"):
            for _ in range(10):  # the queue may still hold a task generated before the kill
                prefetcher.get()
        assert prefetcher.closed
    finally:
        prefetcher.close()


def test_a_config_that_yields_no_task_is_refused_before_the_workers_run():
    # two families that never combine (the archive holds 2019-2021, the time frames 2023-2024):
    # no m=2 task exists, and the env says why when it is configured, not in a worker later
    env = gym.make(
        "AmbiTab-Procedural-v0", families=("table", "time"), ambiguities=(1, 1), prefetch=1
    )
    try:
        env.reset(seed=0)
        with pytest.raises(ConfigurationError, match="table and time"):
            env.unwrapped.configure(ambiguities=(2, 2))
        env.reset()  # the old configuration still serves
    finally:
        env.close()


def test_batched_messages_keep_the_stream_order_across_restarts():
    # a consumer slower than the worker: the worker gathers several tasks per message; the
    # tasks still come in stream order, equal to the in-process ones, and a restart discards
    # whatever was gathered or received for the old start
    config = GeneratorConfig(ambiguities=(0, 2), domains=("retail",))
    local = TaskGenerator(config, validate=False)
    with TaskPrefetcher(workers=1, depth=8, batch=4) as prefetcher:
        prefetcher.start(config, stream=5, index=0)
        first = prefetcher.get()
        deadline = time.monotonic() + 30
        while prefetcher._results[0].qsize() < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # let the worker fill its queue (two messages at most)
        items = [first] + [prefetcher.get() for _ in range(6)]
        batched = prefetcher.messages < prefetcher.tasks  # some message held several tasks
        prefetcher.start(config, stream=5, index=20)
        restarted = [prefetcher.get() for _ in range(3)]
    assert batched
    assert [i.index for i in items] == list(range(7))
    assert [i.index for i in restarted] == [20, 21, 22]
    for item in items + restarted:
        assert item.records == local.generate(task_seed(5, item.index)).records
