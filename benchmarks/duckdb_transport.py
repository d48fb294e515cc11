"""Where the DuckDB worker's per-query time goes, against the floor of any process worker.

For the first ``--queries`` reference queries of the bundled ``bird_interact`` corpus, times
side by side in interleaved rounds, the variants in a new (seeded) random order each time
(median and best of ``--rounds`` per query, summed):

* ``bare``: the query in this process on a plain DuckDB connection (execute + ``fetchall``);
* ``pingpong``: an empty round trip to a second process over two pipes (one byte each way);
* ``floor``: the same query in a minimal second process (the sandbox settings, raw pipe
  reads and writes, ``fetchall``, one byte back: no checks, no watchdog, no result crossing
  the pipe) - no process-isolated design can answer faster;
* ``engine``: :meth:`ambitab_gym.verify.duckdb.DuckDBEngine.execute` (the worker, its checks,
  the watchdog, the capped fetch, the result pickled across the pipe);
* ``verify``: :meth:`ambitab_gym.verify.Verifier.verify` (the engine plus the comparison).

and the CPU each side spends per query (this thread's ``thread_time``; the worker's main thread
from ``/proc/<pid>/task/<pid>/schedstat``). On a machine where switching between processes is
expensive (a VM whose guest pays for every address-space switch) ``floor - bare`` is the part of
the overhead that only running the query in the verifier's own process could remove.

    python benchmarks/duckdb_transport.py [--queries 8] [--rounds 40]

Last line: ``{"<variant>": {"median_ms", "best_ms"}, "overhead_ms": {...}, "cpu_us": {...}}``,
figures per query.

No ``run`` for ``benchmarks/all.py``: ``verify_overhead.py`` reports the DuckDB ratio and
overhead there; this script explains them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from ambitab_gym.corpora import load_corpus
from ambitab_gym.verify import Verifier
from ambitab_gym.verify.duckdb import SANDBOX_CONFIG

# The minimal worker: read a length-prefixed SQL text, run it on a fresh cursor (opened in
# advance), answer one byte (also for an empty request: the ping-pong), and only then free the
# result and open the next cursor. Nothing else happens between the two pipe operations.
_FLOOR_WORKER = r"""
import os, sys, duckdb
config = eval(sys.argv[2])
connection = duckdb.connect(sys.argv[1], read_only=True, config=config)
cursor = connection.cursor()
while True:
    head = os.read(0, 4)
    if len(head) < 4:
        break
    size = int.from_bytes(head, "big")
    sql = b""
    while len(sql) < size:
        sql += os.read(0, size - len(sql))
    if not sql:
        os.write(1, b"\1")
        continue
    rows = cursor.execute(sql.decode()).fetchall()
    os.write(1, b"\1")
    del rows  # freeing the result, closing the cursor, opening the next: after the answer
    cursor.close()
    cursor = connection.cursor()
"""


class FloorWorker:
    """A second process that runs queries with nothing around them (the floor)."""

    def __init__(self, path: str, config: dict) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", _FLOOR_WORKER, path, repr(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()
        self._poller = select.poll()
        self._poller.register(self._out, select.POLLIN)
        self.ask(b"")  # started

    def ask(self, sql: bytes) -> None:
        os.write(self._in, len(sql).to_bytes(4, "big") + sql)
        self._poller.poll(60_000)  # as the engine waits: poll, then read
        if os.read(self._out, 1) != b"\1":
            raise RuntimeError("the floor worker died")

    @property
    def pid(self) -> int:
        return self.process.pid

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=10)


def floor_overhead(corpus, records, rounds: int) -> dict:
    """The floor of any process worker for ``records`` (one database), side by side with bare.

    Returns ``{"process_floor_overhead_ms", "process_floor_overhead_best_ms",
    "process_floor_cpu_overhead_ms", "pingpong_ms"}`` per query (wall medians, the fastest
    runs, CPU of both processes): what running each query in a minimal second process adds to
    running it in this one.
    """
    database = records[0].verification.database
    source = corpus.database_file(database, "duckdb")
    folder = Path(tempfile.mkdtemp())
    copies = {}
    for name in ("bare", "floor"):  # a file per process: DuckDB wants one config per file
        copies[name] = str(folder / f"{name}.duckdb")
        shutil.copy(source, copies[name])
    sqls = [record.verification.reference_sql for record in records]
    encoded = [sql.encode() for sql in sqls]
    bare = duckdb.connect(copies["bare"], read_only=True, config={"threads": 1})
    floor = FloorWorker(copies["floor"], dict(SANDBOX_CONFIG, memory_limit="512MB", threads=1))
    walls = {"bare": [[] for _ in sqls], "floor": [[] for _ in sqls], "pingpong": [[]]}
    cpu_ns = {"bare": 0, "floor": 0}  # this thread's CPU, plus the floor worker's
    try:
        for i in range(len(sqls)):  # warm
            bare.execute(sqls[i]).fetchall()
            floor.ask(encoded[i])
        for round_ in range(rounds):
            for i in range(len(sqls)):
                for name in ("bare", "floor") if round_ % 2 == 0 else ("floor", "bare"):
                    worker_ns = _schedstat_ns(floor.pid) if name == "floor" else 0
                    cpu = time.thread_time_ns()
                    start = time.perf_counter_ns()
                    if name == "bare":
                        bare.execute(sqls[i]).fetchall()
                    else:
                        floor.ask(encoded[i])
                    walls[name][i].append(time.perf_counter_ns() - start)
                    cpu_ns[name] += time.thread_time_ns() - cpu
                    if name == "floor":
                        cpu_ns[name] += _schedstat_ns(floor.pid) - worker_ns
                start = time.perf_counter_ns()
                floor.ask(b"")
                walls["pingpong"][0].append(time.perf_counter_ns() - start)
    finally:
        floor.close()
        bare.close()
        shutil.rmtree(folder, ignore_errors=True)
    n = len(sqls)

    def total(name: str, pick) -> float:
        return sum(map(pick, walls[name])) / n / 1e6

    return {
        "process_floor_overhead_ms": round(
            total("floor", statistics.median) - total("bare", statistics.median), 3
        ),
        "process_floor_overhead_best_ms": round(total("floor", min) - total("bare", min), 3),
        # CPU (both processes) beyond bare: what a loaded machine cannot hide
        "process_floor_cpu_overhead_ms": round(
            (cpu_ns["floor"] - cpu_ns["bare"]) / n / rounds / 1e6, 3
        ),
        "pingpong_ms": round(statistics.median(walls["pingpong"][0]) / 1e6, 3),
    }


def _schedstat_ns(pid: int, field: int = 0) -> int:
    """A thread's nanoseconds on a CPU (``field`` 0) or runnable but waiting for one (1)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as handle:
        return int(handle.read().split()[field])


def measure(queries: int, rounds: int) -> dict:
    corpus = load_corpus("bird_interact")
    records = corpus.records[:queries]
    sqls = [record.verification.reference_sql for record in records]
    database = records[0].verification.database
    assert all(r.verification.database == database for r in records), "one database"
    source = corpus.database_file(database, "duckdb")
    folder = Path(tempfile.mkdtemp())
    copies = {}
    for name in ("bare", "floor"):  # a file per process: DuckDB wants one config per file
        copies[name] = str(folder / f"{name}.duckdb")
        shutil.copy(source, copies[name])
    bare = duckdb.connect(copies["bare"], read_only=True, config={"threads": 1})
    config = dict(SANDBOX_CONFIG, memory_limit="512MB", threads=1)
    floor = FloorWorker(copies["floor"], config)
    verifier = Verifier(corpus.open_engine)
    for record, sql in zip(records, sqls, strict=True):
        assert verifier.verify(record, sql).success, record.id  # warm: worker up, cached
    engine = verifier.engine("duckdb", database)
    engine_pid = engine.worker_pid
    encoded = [sql.encode() for sql in sqls]

    variants = {
        "bare": lambda i: bare.execute(sqls[i]).fetchall(),
        "pingpong": lambda i: floor.ask(b""),
        "floor": lambda i: floor.ask(encoded[i]),
        "engine": lambda i: engine.execute(sqls[i]),
        "verify": lambda i: verifier.verify(records[i], sqls[i]),
    }
    walls = {name: [[] for _ in sqls] for name in variants}
    cpu = {name: {"parent": 0, "worker": 0} for name in ("bare", "floor", "engine")}
    waits = dict.fromkeys(variants, 0)  # runnable but waiting for a CPU, both processes
    order = list(variants)
    shuffle = random.Random(0).shuffle  # a fixed seed: the same orders on every run
    try:
        for _round in range(rounds):
            for i in range(len(sqls)):
                shuffle(order)  # no variant always follows the same one (a warm worker)
                for name in order:
                    worker_pid = {
                        "floor": floor.pid, "pingpong": floor.pid, "engine": engine_pid,
                        "verify": engine_pid,
                    }.get(name)  # fmt: skip
                    w0 = _schedstat_ns(worker_pid) if worker_pid else 0
                    q0 = _schedstat_ns(worker_pid, 1) if worker_pid else 0
                    q0 += _schedstat_ns(os.getpid(), 1)  # this (main) thread
                    c0 = time.thread_time_ns()
                    start = time.perf_counter_ns()
                    variants[name](i)
                    walls[name][i].append(time.perf_counter_ns() - start)
                    c1 = time.thread_time_ns()
                    w1 = _schedstat_ns(worker_pid) if worker_pid else 0
                    q1 = _schedstat_ns(worker_pid, 1) if worker_pid else 0
                    q1 += _schedstat_ns(os.getpid(), 1)
                    waits[name] += q1 - q0
                    if name in cpu:
                        cpu[name]["parent"] += c1 - c0
                        cpu[name]["worker"] += w1 - w0
    finally:
        floor.close()
        verifier.close()
        bare.close()
        shutil.rmtree(folder, ignore_errors=True)
    assert engine_pid == engine.worker_pid or engine.worker_pid is None, "no restart"

    n = len(sqls)
    results: dict = {}
    for name, per_query in walls.items():
        results[name] = {
            "median_ms": round(sum(map(statistics.median, per_query)) / n / 1e6, 4),
            "best_ms": round(sum(map(min, per_query)) / n / 1e6, 4),
        }

    def over(name: str, base: str, key: str) -> float:
        return round(results[name][key] - results[base][key], 4)

    results["overhead_ms"] = {
        f"{name}_minus_{base}": {
            "median": over(name, base, "median_ms"),
            "best": over(name, base, "best_ms"),
        }
        for name, base in (
            ("floor", "bare"),
            ("engine", "bare"),
            ("verify", "bare"),
            ("engine", "floor"),
            ("verify", "engine"),
        )
    }
    calls = rounds * n
    results["cpu_us"] = {
        name: {side: round(total / calls / 1e3, 1) for side, total in sides.items()}
        for name, sides in cpu.items()
    }
    results["runqueue_wait_us"] = {
        name: round(total / calls / 1e3, 1) for name, total in waits.items()
    }
    return results


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args(argv)
    results = measure(args.queries, args.rounds)
    for name in ("bare", "pingpong", "floor", "engine", "verify"):
        figures = results[name]
        print(f"{name:9s} median {figures['median_ms']:.3f} ms  best {figures['best_ms']:.3f} ms")
    for name, figures in results["overhead_ms"].items():
        print(f"{name:20s} median {figures['median']:+.3f} ms  best {figures['best']:+.3f} ms")
    for name, sides in results["cpu_us"].items():
        print(f"cpu {name:6s} " + "  ".join(f"{k} {v:.1f} us" for k, v in sides.items()))
    print(
        "waiting for a CPU (run queue, both processes): "
        + ", ".join(f"{k} {v:.1f} us" for k, v in results["runqueue_wait_us"].items())
    )
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
