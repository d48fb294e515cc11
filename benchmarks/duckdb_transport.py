"""Where the DuckDB worker's per-query time goes, against the floor of any process worker.

For the first ``--queries`` reference queries of the bundled ``bird_interact`` corpus (or, with
``--short``, queries DuckDB answers in a few tens of microseconds), times side by side in
interleaved rounds, the variants in a new (seeded) random order each time (median, best and
mean of ``--rounds`` per query, summed):

* ``bare``: the query in this process on a plain DuckDB connection (execute + ``fetchall``);
* ``pingpong``: an empty round trip to a second process over two pipes (one byte each way);
* ``floor``: the same query in a minimal second process (the sandbox settings, raw pipe
  reads and writes, ``fetchall``, one byte back: no checks, no watchdog, no result crossing
  the pipe) - no process-isolated design can answer faster;
* ``pingpong_spin``/``floor_spin``: the same with both sides polling for 200 us before they
  block (hybrid polling), yielding the CPU between polls (``sched_yield``); ``*_purespin``: a
  pure spin instead - what polling could buy any worker (the engine blocks at once: measured,
  polling bought nothing);
* ``engine``: :meth:`ambitab_gym.verify.duckdb.DuckDBEngine.execute` (the worker, its checks,
  the watchdog, the capped fetch, the result pickled across the pipe); the worker keeps the
  parse of a text it has seen, so from the second round on it skips DuckDB's parser;
* ``engine_miss``: the same on an engine of its own, each call's text new to it (a numbered
  comment appended): DuckDB's parser runs every time, as for ``bare``;
* ``baseline:<file>``: the engine over an older copy of ``ambitab_gym/verify/worker.py``
  (``--duckdb-baseline FILE``, repeatable; ``git show <commit>:ambitab_gym/verify/worker.py``);
* ``verify``: :meth:`ambitab_gym.verify.Verifier.verify` (the engine plus the comparison).

and the CPU each side spends per query (this thread's ``thread_time``; the worker's main thread
from ``/proc/<pid>/task/<pid>/schedstat`` over the whole run divided by its queries, so the
worker's polling after its replies counts). A second part, ``burst``, runs every query back to
back on one variant (a batch verification: the next request comes while a polling worker still
polls). ``--affinity same|split`` pins this process and the workers to one CPU or to two
(an experiment; the library pins nothing); ``--nice N`` adds an engine whose worker runs at
that nice value (likewise).

``--components`` instead splits one query's CPU into its steps, each timed alone (this
thread's ``thread_time``, median per query, the steps in a new seeded order per query): the
worker's steps on the worker's own session code (``_DuckDBSession``) run in this process -
DuckDB's parse, executing the text or a kept parse, a fresh cursor, the watchdog, measuring,
pickling and unpickling the result, a whole ``run`` on a kept and on a new text - and the
parent's steps on a live engine (the checks, the request's write, the wait, the reply's read,
unpickling): where the time above the floor goes.

On a machine where switching between processes is expensive (a VM whose guest pays for every
address-space switch) ``floor - bare`` is the part of the overhead that only running the query
in the verifier's own process could remove.

    python benchmarks/duckdb_transport.py [--queries 8] [--rounds 40] [--short]
        [--duckdb-baseline old_worker.py] [--affinity same|split] [--nice N]
    python benchmarks/duckdb_transport.py --components [--queries 8] [--rounds 40]

Last line: ``{"<variant>": {"median_ms", "best_ms", "mean_ms"}, "overhead_ms": {...},
"cpu_us": {...}, "runqueue_wait_us": {...}, "burst": {...}}``, figures per query.

No ``run`` for ``benchmarks/all.py``: ``verify_overhead.py`` reports the DuckDB ratio and
overhead there; this script explains them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pickle
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
from ambitab_gym.verify import worker as worker_module
from ambitab_gym.verify.duckdb import SANDBOX_CONFIG, DuckDBEngine

# The minimal worker: read a length-prefixed SQL text, run it on a fresh cursor (opened in
# advance), answer one byte (also for an empty request: the ping-pong), and only then free the
# result and open the next cursor. Nothing else happens between the two pipe operations.
_FLOOR_WORKER = r"""
import os, sys, time, select, duckdb
config = eval(sys.argv[2])
spin, mode = float(sys.argv[3]), sys.argv[4]  # polling before each read (hybrid polling)
poller = select.poll()
poller.register(0, select.POLLIN)
connection = duckdb.connect(sys.argv[1], read_only=True, config=config)
cursor = connection.cursor()
while True:
    if spin:
        end = time.monotonic() + spin
        while not poller.poll(0) and time.monotonic() < end:
            if mode == "yield":
                os.sched_yield()
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

    def __init__(self, path: str, config: dict, spin_s: float = 0.0, mode: str = "yield") -> None:
        """``spin_s``: both sides poll that long before they block (``mode`` ``"yield"``: with
        ``sched_yield`` between polls; ``"spin"``: a pure spin)."""
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", _FLOOR_WORKER, path, repr(config), str(spin_s), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()
        self._poller = select.poll()
        self._poller.register(self._out, select.POLLIN)
        self._spin_s, self._yield = spin_s, mode == "yield"
        self.ask(b"")  # started

    def ask(self, sql: bytes) -> None:
        os.write(self._in, len(sql).to_bytes(4, "big") + sql)
        if self._spin_s:
            end = time.monotonic() + self._spin_s
            while not self._poller.poll(0) and time.monotonic() < end:
                if self._yield:
                    os.sched_yield()
        self._poller.poll(60_000)  # as the engine waits: poll, then read
        if os.read(self._out, 1) != b"\1":
            raise RuntimeError("the floor worker died")

    @property
    def pid(self) -> int:
        return self.process.pid

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=10)


#: ``polled_floor``'s budget: both sides poll through a whole query (and the worker between
#: queries), so neither ever sleeps - the floor of any hybrid polling, whatever its budget.
POLLED_FLOOR_S = 0.05


def floor_overhead(corpus, records, rounds: int) -> dict:
    """The floor of any process worker for ``records`` (one database), side by side with bare.

    Returns ``{"process_floor_overhead_ms", "process_floor_overhead_best_ms",
    "process_floor_overhead_mean_ms", "process_floor_cpu_overhead_ms", "pingpong_ms",
    "polled_floor_overhead_ms", "polled_floor_overhead_best_ms", "polled_floor_overhead_mean_ms",
    "polled_floor_cpu_overhead_ms"}`` per query (sums over the queries of each one's median,
    fastest and mean run; CPU of both processes, the workers' whole CPU over the run): what
    running each query in a minimal second process adds to running it in this one, blocking
    (``process_floor``) and with both sides polling through every query (``polled_floor``,
    :data:`POLLED_FLOOR_S`: no sleeping and no wake-up at all).
    """
    database = records[0].verification.database
    source = corpus.database_file(database, "duckdb")
    folder = Path(tempfile.mkdtemp())
    copies = {}
    for name in ("bare", "floor", "polled"):  # a file per process: one config per file
        copies[name] = str(folder / f"{name}.duckdb")
        shutil.copy(source, copies[name])
    sqls = [record.verification.reference_sql for record in records]
    encoded = [sql.encode() for sql in sqls]
    bare = duckdb.connect(copies["bare"], read_only=True, config={"threads": 1})
    config = dict(SANDBOX_CONFIG, memory_limit="512MB", threads=1)
    workers = {
        "floor": FloorWorker(copies["floor"], config),
        "polled": FloorWorker(copies["polled"], config, POLLED_FLOOR_S, "yield"),
    }
    names = ["bare", *workers]
    walls = {name: [[] for _ in sqls] for name in names} | {"pingpong": [[]]}
    cpu_ns = dict.fromkeys(names, 0)  # this thread's CPU (the workers' are added below)
    pingpong_worker_ns = 0
    shuffle = random.Random(0).shuffle
    try:
        for i in range(len(sqls)):  # warm
            bare.execute(sqls[i]).fetchall()
            for worker in workers.values():
                worker.ask(encoded[i])
        worker_ns = {name: _schedstat_ns(worker.pid) for name, worker in workers.items()}
        for _round in range(rounds):
            for i in range(len(sqls)):
                shuffle(names)
                for name in names:
                    cpu = time.thread_time_ns()
                    start = time.perf_counter_ns()
                    if name == "bare":
                        bare.execute(sqls[i]).fetchall()
                    else:
                        workers[name].ask(encoded[i])
                    walls[name][i].append(time.perf_counter_ns() - start)
                    cpu_ns[name] += time.thread_time_ns() - cpu
                before = _schedstat_ns(workers["floor"].pid)
                start = time.perf_counter_ns()
                workers["floor"].ask(b"")
                walls["pingpong"][0].append(time.perf_counter_ns() - start)
                pingpong_worker_ns += _schedstat_ns(workers["floor"].pid) - before
        for name, worker in workers.items():  # all of it: polling after replies included
            cpu_ns[name] += _schedstat_ns(worker.pid) - worker_ns[name]
        cpu_ns["floor"] -= pingpong_worker_ns
    finally:
        for worker in workers.values():
            worker.close()
        bare.close()
        shutil.rmtree(folder, ignore_errors=True)
    n = len(sqls)

    def over(name: str, pick) -> float:
        return round((sum(map(pick, walls[name])) - sum(map(pick, walls["bare"]))) / n / 1e6, 3)

    figures = {}
    for name, label in (("floor", "process_floor"), ("polled", "polled_floor")):
        figures[f"{label}_overhead_ms"] = over(name, statistics.median)
        figures[f"{label}_overhead_best_ms"] = over(name, min)
        figures[f"{label}_overhead_mean_ms"] = over(name, statistics.fmean)
        # CPU (both processes) beyond bare: what a loaded machine cannot hide
        figures[f"{label}_cpu_overhead_ms"] = round(
            (cpu_ns[name] - cpu_ns["bare"]) / n / rounds / 1e6, 3
        )
        if name == "floor":
            figures["pingpong_ms"] = round(statistics.median(walls["pingpong"][0]) / 1e6, 3)
    return figures


def _pin(pid: int, cpu: int) -> None:
    """Pin every thread of process ``pid`` to one CPU (``--affinity``)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), {cpu % os.cpu_count()})


def _schedstat_ns(pid: int, field: int = 0) -> int:
    """A thread's nanoseconds on a CPU (``field`` 0) or runnable but waiting for one (1)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as handle:
        return int(handle.read().split()[field])


def _load_worker_module(path: str, index: int = 0):
    """An older copy of ``ambitab_gym/verify/worker.py`` as a module of its own (its worker
    script is that file: old parent and old worker side by side with the current ones)."""
    name = f"ambitab_benchmark_duckdb_baseline{index}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The ``*_spin`` floors' polling budget.
SPIN_FLOOR_S = 200e-6

#: ``--short``: queries that take DuckDB a few tens of microseconds (a polling budget covers
#: them), in place of the corpus's reference queries (``verify`` then checks wrong answers).
SHORT_SQL = [
    "SELECT 42 AS answer",
    "SELECT 'x' || 'y' AS xy, 1.5 AS f",
    "SELECT range AS n FROM range(10)",
    "SELECT NULL AS nothing, DATE '2024-01-02' AS d",
]


def measure(
    queries: int,
    rounds: int,
    baselines: list[str] | None = None,
    *,
    short: bool = False,
    affinity: str = "",
    nice: int | None = None,
) -> dict:
    corpus = load_corpus("bird_interact")
    records = corpus.records[:queries]
    sqls = [record.verification.reference_sql for record in records]
    database = records[0].verification.database
    assert all(r.verification.database == database for r in records), "one database"
    source = corpus.database_file(database, "duckdb")
    folder = Path(tempfile.mkdtemp())
    copies = {}
    floors = {  # name: (spin_s, mode); the ping-pongs share the floor workers
        "floor": (0.0, "yield"),
        "floor_spin": (SPIN_FLOOR_S, "yield"),
        "floor_purespin": (SPIN_FLOOR_S, "spin"),
    }
    for name in ("bare", *floors):  # a file per process: DuckDB wants one config per file
        copies[name] = str(folder / f"{name}.duckdb")
        shutil.copy(source, copies[name])
    bare = duckdb.connect(copies["bare"], read_only=True, config={"threads": 1})
    config = dict(SANDBOX_CONFIG, memory_limit="512MB", threads=1)
    floor_workers = {name: FloorWorker(copies[name], config, *how) for name, how in floors.items()}
    verifier = Verifier(corpus.open_engine)
    for record, sql in zip(records, sqls, strict=True):
        assert verifier.verify(record, sql).success, record.id  # warm: worker up, cached
    verify_engine = verifier.engine("duckdb", database)
    # every variant its own worker
    engine = DuckDBEngine(verify_engine.path, limits=verify_engine.limits)
    engines = {"engine": engine, "engine_miss": DuckDBEngine(engine.path, limits=engine.limits)}
    if nice is not None:  # an experiment: the worker's scheduling priority (root for < 0)
        niced = DuckDBEngine(engine.path, limits=engine.limits)
        niced.execute("SELECT 1")
        for tid in os.listdir(f"/proc/{niced.worker_pid}/task"):
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
        engines[f"engine_nice{nice:+d}"] = niced
    for index, baseline in enumerate(baselines or ()):
        old = DuckDBEngine(engine.path, limits=engine.limits)
        module = _load_worker_module(baseline, index)
        old._slot = module.WorkerSlot("duckdb", old.path, "DuckDB")
        engines[f"baseline:{Path(baseline).stem}"] = old
    for variant in engines.values():
        for sql in sqls:
            variant.execute(sql)  # warm
    pids = {name: e.worker_pid for name, e in engines.items()}
    pids |= {name: w.pid for name, w in floor_workers.items()}
    pids |= {name.replace("floor", "pingpong"): w.pid for name, w in floor_workers.items()}
    pids["verify"] = verify_engine.worker_pid
    if short:
        sqls = [SHORT_SQL[i % len(SHORT_SQL)] for i in range(len(sqls))]
    if affinity:  # an experiment, never done by the library: every thread of both sides pinned
        _pin(os.getpid(), 0)
        for pid in set(pids.values()):
            _pin(pid, 0 if affinity == "same" else 1)
    encoded = [sql.encode() for sql in sqls]

    variants = {"bare": lambda i: bare.execute(sqls[i]).fetchall()}
    for name, worker in floor_workers.items():
        variants[name.replace("floor", "pingpong")] = lambda i, w=worker: w.ask(b"")
        variants[name] = lambda i, w=worker: w.ask(encoded[i])
    for name, variant in engines.items():
        variants[name] = lambda i, e=variant: e.execute(sqls[i])
    fresh = iter(range(10**9))
    variants["engine_miss"] = lambda i: engines["engine_miss"].execute(
        f"{sqls[i]}\n-- ambitab benchmark {next(fresh)}"
    )
    variants["verify"] = lambda i: verifier.verify(records[i], sqls[i])
    walls = {name: [[] for _ in sqls] for name in variants}
    parent_ns = dict.fromkeys(variants, 0)
    waits = dict.fromkeys(variants, 0)  # runnable but waiting for a CPU, both processes
    worker_pids = sorted(set(pids.values()))
    order = list(variants)
    shuffle = random.Random(0).shuffle  # a fixed seed: the same orders on every run
    bursts = {name: [] for name in variants if not name.startswith("pingpong")}
    try:
        # Interleaved: each call follows other variants' calls (the worker's polling after its
        # reply has ended long before its next request, as between an agent's submissions).
        worker_ns = {pid: _schedstat_ns(pid) for pid in worker_pids}
        for _round in range(rounds):
            for i in range(len(sqls)):
                shuffle(order)  # no variant always follows the same one (a warm worker)
                for name in order:
                    worker_pid = pids.get(name)
                    q0 = _schedstat_ns(worker_pid, 1) if worker_pid else 0
                    q0 += _schedstat_ns(os.getpid(), 1)  # this (main) thread
                    c0 = time.thread_time_ns()
                    start = time.perf_counter_ns()
                    variants[name](i)
                    walls[name][i].append(time.perf_counter_ns() - start)
                    parent_ns[name] += time.thread_time_ns() - c0
                    q1 = _schedstat_ns(worker_pid, 1) if worker_pid else 0
                    q1 += _schedstat_ns(os.getpid(), 1)
                    waits[name] += q1 - q0
        # the workers' whole CPU (their polling after each reply included), per call
        worker_ns = {pid: _schedstat_ns(pid) - ns for pid, ns in worker_ns.items()}
        # Bursts: every query back to back on one variant (a batch verification: the next
        # request comes while the worker still polls after its reply).
        burst_worker_ns = {pid: _schedstat_ns(pid) for pid in worker_pids}
        burst_parent_ns = dict.fromkeys(bursts, 0)
        names = list(bursts)
        for _round in range(rounds):
            shuffle(names)
            for name in names:
                c0 = time.thread_time_ns()
                start = time.perf_counter_ns()
                for i in range(len(sqls)):
                    variants[name](i)
                bursts[name].append(time.perf_counter_ns() - start)
                burst_parent_ns[name] += time.thread_time_ns() - c0
        burst_worker_ns = {pid: _schedstat_ns(pid) - ns for pid, ns in burst_worker_ns.items()}
    finally:
        for worker in floor_workers.values():
            worker.close()
        for variant in engines.values():
            variant.close()
        verifier.close()
        bare.close()
        shutil.rmtree(folder, ignore_errors=True)
    assert all(pids[name] == e.worker_pid or e.worker_pid is None for name, e in engines.items())

    n = len(sqls)
    calls = rounds * n
    results: dict = {}
    for name, per_query in walls.items():
        results[name] = {
            "median_ms": round(sum(map(statistics.median, per_query)) / n / 1e6, 4),
            "best_ms": round(sum(map(min, per_query)) / n / 1e6, 4),
            "mean_ms": round(sum(map(statistics.fmean, per_query)) / n / 1e6, 4),
        }

    def over(name: str, base: str, key: str) -> float:
        return round(results[name][key] - results[base][key], 4)

    results["overhead_ms"] = {
        f"{name}_minus_{base}": {
            key: over(name, base, f"{key}_ms") for key in ("median", "best", "mean")
        }
        for name, base in (
            [(name, "bare") for name in variants if name not in ("bare", "verify")]
            + [("verify", "bare"), ("engine", "floor"), ("engine_miss", "floor")]
            + [("verify", "engine")]
        )
        if not name.startswith("pingpong")
    }
    results["cpu_us"] = {  # a variant's pingpong calls share its floor worker: not split out
        name: {
            "parent": round(parent_ns[name] / calls / 1e3, 1),
            "worker": round(worker_ns[pids[name]] / calls / 1e3, 1) if name in pids else 0.0,
        }
        for name in variants
        if not name.startswith(("pingpong", "floor"))
    }
    results["runqueue_wait_us"] = {
        name: round(total / calls / 1e3, 1) for name, total in waits.items()
    }
    results["burst"] = {
        name: {
            "median_ms": round(statistics.median(times) / n / 1e6, 4),
            "best_ms": round(min(times) / n / 1e6, 4),
            "mean_ms": round(statistics.fmean(times) / n / 1e6, 4),
            "parent_cpu_us": round(burst_parent_ns[name] / calls / 1e3, 1),
            "worker_cpu_us": round(burst_worker_ns[pids[name]] / calls / 1e3, 1)
            if name in pids
            else 0.0,
        }
        for name, times in bursts.items()
    }
    return results


def components(queries: int, rounds: int) -> dict:
    """CPU per query (us, median over ``rounds``, averaged over the queries) of each step of
    the worker's and the parent's side of one query (``--components``)."""
    corpus = load_corpus("bird_interact")
    records = corpus.records[:queries]
    sqls = [record.verification.reference_sql for record in records]
    source = corpus.database_file(records[0].verification.database, "duckdb")
    folder = Path(tempfile.mkdtemp())
    copy = folder / "session.duckdb"
    shutil.copy(source, copy)
    config = dict(SANDBOX_CONFIG, memory_limit="512MB", threads=1)
    session = worker_module._DuckDBSession(duckdb, str(copy), config)
    connection = session.connection
    reused = connection.cursor()
    kept = [connection.extract_statements(sql)[0] for sql in sqls]
    replies = [session.run(sql, 5.0, 100_000, 2**26) for sql in sqls]
    session.tidy()
    payloads = [pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL) for reply in replies]
    rows = [reply[2] for reply in replies]
    fresh = iter(range(10**9))

    def whole(sql: str) -> None:
        session.run(sql, 5.0, 100_000, 2**26)
        session.tidy()  # after the reply in the worker: its CPU all the same

    def measure_rows(i: int) -> None:
        worker_module.result_bytes(rows[i])
        worker_module._plain_rows(rows[i])

    def watchdog(_i: int) -> None:
        session.watchdog.arm(5.0)  # as _DuckDBSession.run does
        session.watchdog.disarm()

    steps = {
        "worker: execute text + fetchall (bare)": lambda i: reused.execute(sqls[i]).fetchall(),
        "worker: DuckDB parse (extract_statements)": lambda i: (
            connection.extract_statements(sqls[i])[0].type
        ),
        "worker: execute kept parse + fetchall": lambda i: reused.execute(kept[i]).fetchall(),
        "worker: fresh cursor open + close": lambda i: connection.cursor().close(),
        "worker: watchdog arm + disarm": watchdog,
        "worker: result_bytes + _plain_rows": measure_rows,
        "worker: pickle the reply": lambda i: pickle.dumps(
            replies[i], protocol=pickle.HIGHEST_PROTOCOL
        ),
        "worker: whole run, kept parse": lambda i: whole(sqls[i]),
        "worker: whole run, new text": lambda i: whole(f"{sqls[i]}\n-- new {next(fresh)}"),
        "parent: safe_loads of the reply": lambda i: worker_module.safe_loads(payloads[i]),
    }
    engine = DuckDBEngine(source)
    for sql in sqls:
        engine.execute(sql)  # warm: worker up, parses kept
    process = engine._slot._worker  # benchmark only: the parent's steps one by one
    limits = engine.limits
    parent = {name: [[] for _ in sqls] for name in ("checks", "send", "wait", "read", "loads")}
    parent["whole execute"] = [[] for _ in sqls]
    cpu = {name: [[] for _ in sqls] for name in steps}
    names = list(steps)
    shuffle = random.Random(0).shuffle
    clock = time.thread_time_ns
    try:
        for _round in range(rounds):
            for i, sql in enumerate(sqls):
                shuffle(names)
                for name in names:
                    start = clock()
                    steps[name](i)
                    cpu[name][i].append(clock() - start)
                t0 = clock()
                engine._settings(limits)
                worker_module.sql_text_problem(sql)
                request = ("query", sql, 5.0, limits.max_rows, limits.max_result_bytes, 5.0)
                t1 = clock()
                process.send(request)
                t2 = clock()
                process._poller.poll(60_000)
                t3 = clock()
                data = process._reader.read(2**31)
                t4 = clock()
                worker_module.safe_loads(data)
                t5 = clock()
                engine.execute(sql)
                t6 = clock()
                for name, begin, end in (
                    ("checks", t0, t1),
                    ("send", t1, t2),
                    ("wait", t2, t3),
                    ("read", t3, t4),
                    ("loads", t4, t5),
                    ("whole execute", t5, t6),
                ):
                    parent[name][i].append(end - begin)
    finally:
        engine.close()
        session.close()
        shutil.rmtree(folder, ignore_errors=True)

    def per_query(samples: list) -> float:
        return round(sum(map(statistics.median, samples)) / len(samples) / 1e3, 1)

    results = {name: per_query(samples) for name, samples in cpu.items()}
    results |= {f"parent: {name}": per_query(samples) for name, samples in parent.items()}
    return results


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--short", action="store_true", help="time SHORT_SQL instead")
    parser.add_argument(
        "--nice",
        type=int,
        help="add an engine whose worker runs at this nice value (an experiment)",
    )
    parser.add_argument(
        "--affinity",
        choices=("same", "split"),
        help="pin this process and every worker to one CPU (same) or the workers to another "
        "(split): whether placement is worth touching",
    )
    parser.add_argument(
        "--duckdb-baseline",
        metavar="FILE",
        action="append",
        help="an older copy of ambitab_gym/verify/worker.py to time beside the current one "
        "(repeatable)",
    )
    parser.add_argument(
        "--components",
        action="store_true",
        help="split one query's CPU into its steps on both sides instead",
    )
    args = parser.parse_args(argv)
    if args.components:
        steps = components(args.queries, args.rounds)
        for name, us in steps.items():
            print(f"{name:45s} {us:9.1f} us CPU per query (median)")
        print(json.dumps(steps))
        return steps
    results = measure(
        args.queries,
        args.rounds,
        args.duckdb_baseline,
        short=args.short,
        affinity=args.affinity or "",
        nice=args.nice,
    )
    for name, figures in results.items():
        if isinstance(figures, dict) and "median_ms" in figures:
            print(
                f"{name:22s} median {figures['median_ms']:.3f} ms  best {figures['best_ms']:.3f}"
                f" ms  mean {figures['mean_ms']:.3f} ms"
            )
    for name, figures in results["overhead_ms"].items():
        print(
            f"{name:30s} median {figures['median']:+.3f} ms  best {figures['best']:+.3f} ms  "
            f"mean {figures['mean']:+.3f} ms"
        )
    for name, sides in results["cpu_us"].items():
        print(f"cpu {name:22s} " + "  ".join(f"{k} {v:.1f} us" for k, v in sides.items()))
    print(
        "waiting for a CPU (run queue, both processes): "
        + ", ".join(f"{k} {v:.1f} us" for k, v in results["runqueue_wait_us"].items())
    )
    for name, figures in results["burst"].items():
        print(f"burst {name:22s} " + "  ".join(f"{k} {v}" for k, v in figures.items()))
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
