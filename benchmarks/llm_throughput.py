"""LLM-bound campaign throughput against a loopback server with a fixed per-call latency.

Starts the scripted OpenAI-compatible server (``ambitab_gym.testing.llm_server``) in its own process,
every reply after ``--latency`` seconds, and runs an evaluation campaign (the evaluated-asker
condition only) with an LLM asker, the LLM oracle and the LLM solver through
``ambitab_gym.evaluation.run_campaign``. The asker asks ``--questions`` questions, then stops;
the matcher routes every question to ``unlabeled(...)`` so the responder is called too.

The ideal throughput with C episodes in flight is C / (calls per episode x L): every slot is
always waiting on exactly one call. The ratio achieved / ideal measures what the client, the
env, the verifier and the results store cost on top.

The client side's CPU time (client, env, policies, oracle, verifier, results store; the server
runs in a process of its own) is reported per call: at C / L calls per second the ratio can only
reach 0.9 while that stays below about 0.9 x L / C seconds per call on one core. One process
runs a campaign on one event loop, so one core caps it; ``--workers N`` (N > 1) measures the
process executor (``ambitab-gym evaluate --executor processes --workers N``: N worker processes
of C / N in flight each, the driver storing rows) side by side with the local run, its CPU
counted over the driver and the workers.

    python benchmarks/llm_throughput.py [--concurrency 64 256] [--latency 0.1] [--seeds 12]
        [--workers 1 2] [--start-interval SECONDS] [--unstaggered] [--no-bare]

Staggered starts. A campaign starts its slots ``--start-interval`` apart (default
``ambitab_gym.defaults.SLOT_START_INTERVAL_S``, 0.4 ms), not all at once: C first calls sent
in one burst come back after the same L and go out again together, wave after wave for the
whole run (a server with regular latency never spreads them), and every reply queues behind
its wave on the client's and the server's event loops. The floor run uses the same stagger as
the campaign and is also run with every slot at once, side by side (``unstaggered_bare_*``),
so the effect is visible; ``--unstaggered`` runs each campaign that way too
(``unstaggered_ratio``).

Last line (JSON): concurrency, workers, executor (local, processes), latency_s,
start_interval_s, episodes, calls, calls_per_episode, wall_s, episodes_per_s,
ideal_episodes_per_s, ratio, target (0.9), max_in_flight, errors, cpu_s, cpu_ms_per_call (client CPU time / calls: the driver and its
workers), driver_cpu_ms_per_call (this process alone), cpu_share (cpu_s / wall_s),
server_cpu_share and server_cpu_ms_per_call (the server process's, when psutil is installed),
cpu_ceiling (the best ratio the client's processes allow at the measured CPU per call, each on
a whole core: processes / (cpu_ms_per_call x ideal calls per second), capped at 1),
client_busy_at_ideal (the share of its core each client process would be busy at the ideal
rate: cpu_ms_per_call x ideal calls per second / processes; near 1 every reply queues behind
others on the event loop, so a ratio of 0.9 needs it well below that),
capacity_ceiling (the best ratio the machine's cores allow client and server together:
cores / ((client + server CPU per call) x ideal calls per second)), cores, cores_got (the cores
client and server used) and cores_needed (what the ideal rate needs of them),
episodes_per_slot (episodes / C: with few, the last partial wave weighs on the ratio),
load_avg (the machine's 1-minute load before the run), bare_ratio, bare_cpu_ms_per_call,
bare_latency_ms and bare_latency_p90_ms (the floor: the same client and server in one process
with C tasks making 40 calls each back to back, started as the campaign's slots, no env or
campaign, so that the start and the last calls weigh little; and the call latency the client
saw there, L plus what the two event loops queue; the better of two runs; skipped with
``--no-bare``), the same four as ``unstaggered_bare_*`` with every task starting at once (its
two runs between the staggered ones: ``bare_side_by_side``), transport_cpu_ms_per_call (the
floor's calls made with aiohttp directly, no LLM client: the CPU per call of the HTTP library
and the event loop alone, the better of two runs), ``unstaggered_ratio`` and
``unstaggered_cpu_ms_per_call`` (with ``--unstaggered``) and bound: what limits the run - ``server`` (its
process used over 80 % of a core: the benchmark measures the server, not the client),
``machine_cpu`` (capacity_ceiling < 0.9: client and server need more than the machine's cores),
``machine_busy`` (the ratio is below 0.9 while client and server got under 80 % of the cores
they needed and the load average says other processes held them), ``client_cpu`` (the client's
processes need more than their cores: cpu_ceiling or cpu_share say which) or ``latency``
(none of these: the ratio is what the ideal allows).

The server is the asyncio HTTP/1.1 core of ``ambitab_gym.testing.llm_server_core`` in a process
of its own on uvloop (0.08-0.09 ms of CPU per request in the bare run, 0.10-0.20 ms with the
campaign's longer prompts: a quarter of a core at 256 in flight; one read per request head,
cached word counts, a templated reply), so the ratio
measures the client, the env, the policies and oracle, the verifier and the results store. It
is one process: its ``stats()["requests"]`` counts every call exactly. Requests that arrive in
a wave (slots started at once: every slot's reply comes back after the same L, so slots move in
step) queue on its loop and on the client's; the unstaggered floor's latency shows how much.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from ambitab_gym import defaults
from ambitab_gym.evaluation import CampaignConfig, run_campaign
from ambitab_gym.evaluation.engine import run_loop, tune_gc_for_campaigns
from ambitab_gym.evaluation.process_executor import ProcessExecutor
from ambitab_gym.llm import LLMClient
from ambitab_gym.llm.sampling import SamplingTable
from ambitab_gym.testing.llm_server import ScriptedServer, ScriptRule, role_rules

TARGET = 0.9


def scripted_rules(questions: int):
    return role_rules(
        [f"Could you clarify point {i + 1}?" for i in range(questions)],
        matcher=json.dumps({"reasoning": "scripted", "action": 'unlabeled("WHERE 1 = 1")'}),
        responder=json.dumps({"answer": "The usual meaning."}),
        solver=json.dumps({"reasoning": "scripted", "type": "final_sql", "output": "SELECT 1"}),
    )


def _cpu_of(pids: list[int] | None = None) -> float | None:
    """CPU seconds of these processes and their children (None: every child of this process,
    the server included); None without psutil."""
    try:
        import psutil
    except ImportError:
        return None
    if pids is None:
        procs = psutil.Process().children(recursive=True)
    else:
        procs = []
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc = psutil.Process(pid)
                procs += [proc, *proc.children(recursive=True)]
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def measure_bare(
    concurrency: int,
    latency: float,
    calls: int = 40,
    start_interval_s: float = defaults.SLOT_START_INTERVAL_S,
) -> dict:
    """The floor of the client and server alone: ``concurrency`` tasks each make ``calls``
    chat calls back to back (a 700-word prompt, as the campaign's are), no env, no campaign,
    task i starting ``i x start_interval_s`` after the first, as a campaign's slots do.
    Its ratio (ideal wall / wall, the ramp included) is what the campaign's ratio can reach on
    this machine. 40 calls per slot: the start and the last calls (slots finishing apart)
    weigh about 1/40 of the run, so the ratio is the steady state's. Also the mean and 90th
    percentile of the call latency the client saw (L plus what the client's and the server's
    event loops queue per call)."""
    prompt = [
        {"role": "system", "content": "word " * 600},
        {"role": "user", "content": "question " * 100},
    ]
    with (
        ScriptedServer([ScriptRule(reply='{"answer": "ok"}')], latency_s=latency, process=True,
                       record_requests=False) as server,
        LLMClient(
            server.url, "scripted", concurrency=concurrency, timeout_s=60,
            history=calls * concurrency,
        ) as client,
    ):  # fmt: skip

        async def slots() -> None:
            async def slot(index: int) -> None:
                if index and start_interval_s:
                    await asyncio.sleep(index * start_interval_s)
                for _ in range(calls):
                    await client.achat(prompt, tag="bare")

            await asyncio.gather(*(slot(i) for i in range(concurrency)))

        start, cpu = time.perf_counter(), time.process_time()
        run_loop(slots())
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        latencies = sorted(record.latency_s for record in client.calls)
    return {
        "bare_ratio": round(calls * latency / wall, 3),
        "bare_cpu_ms_per_call": round(cpu / (calls * concurrency) * 1000, 3),
        "bare_latency_ms": round(sum(latencies) / len(latencies) * 1000, 1),
        "bare_latency_p90_ms": round(latencies[int(0.9 * (len(latencies) - 1))] * 1000, 1),
    }


def measure_transport(
    concurrency: int,
    latency: float,
    calls: int = 40,
    start_interval_s: float = defaults.SLOT_START_INTERVAL_S,
) -> float:
    """The transport alone: the floor's calls made with aiohttp directly (one session of
    ``concurrency`` keep-alive connections, the body encoded and the reply decoded with orjson,
    no timeout, no retries, no accounting, no seeds): the CPU per call (ms) of the HTTP
    library and the event loop, below which no client of this design goes."""
    import aiohttp
    import orjson

    prompt = [
        {"role": "system", "content": "word " * 600},
        {"role": "user", "content": "question " * 100},
    ]
    with ScriptedServer(
        [ScriptRule(reply='{"answer": "ok"}')], latency_s=latency, process=True,
        record_requests=False,
    ) as server:  # fmt: skip
        url = f"{server.url}/chat/completions"

        async def slots() -> float:
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=concurrency, limit_per_host=0),
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(),
                trust_env=False,
            )

            async def slot(index: int) -> None:
                if index and start_interval_s:
                    await asyncio.sleep(index * start_interval_s)
                for _ in range(calls):
                    body = orjson.dumps({"model": "scripted", "messages": prompt, "seed": index})
                    async with session.post(url, data=body) as reply:
                        orjson.loads(await reply.read())

            cpu = time.process_time()
            await asyncio.gather(*(slot(i) for i in range(concurrency)))
            cpu = time.process_time() - cpu
            await session.close()
            return cpu

        cpu = run_loop(slots())
    return round(cpu / (calls * concurrency) * 1000, 3)


def bare_side_by_side(concurrency: int, latency: float, interval: float) -> dict:
    """The floor staggered (``bare_*``) and with every slot at once (``unstaggered_bare_*``),
    two runs each in the order staggered, at once, at once, staggered (a machine that gets
    busier or quieter during the four weighs on both alike); each keeps its better run."""
    runs: dict[float, list[dict]] = {interval: [], 0.0: []}
    for start in (interval, 0.0, 0.0, interval):
        runs[start].append(measure_bare(concurrency, latency, start_interval_s=start))
    best = {start: max(found, key=lambda r: r["bare_ratio"]) for start, found in runs.items()}
    transport = min(measure_transport(concurrency, latency, start_interval_s=interval)
                    for _ in range(2))  # fmt: skip
    return {
        **best[interval],
        **{f"unstaggered_{k}": v for k, v in best[0.0].items()},
        "transport_cpu_ms_per_call": transport,
    }


def measure(
    env_id: str,
    concurrency: int,
    latency: float,
    seeds: int,
    questions: int,
    workers: int = 1,
    start_interval_s: float = defaults.SLOT_START_INTERVAL_S,
) -> dict:
    """One campaign at ``concurrency`` in flight, its slots ``start_interval_s`` apart;
    ``workers`` > 1 runs it on that many local worker processes (``ProcessExecutor``,
    C / workers in flight each, their slots interleaved; started by the warm-up, so the timed
    run measures throughput, not process start-up)."""
    rules = scripted_rules(questions)
    executor = ProcessExecutor(workers=workers) if workers > 1 else None
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if executor is not None:
            stack.callback(executor.close)
        # warm-up (databases built, imports done, worker processes started) against a
        # zero-latency server
        with (
            ScriptedServer(rules, process=True, record_requests=False) as server,
            LLMClient(server.url, "scripted", concurrency=concurrency) as client,
        ):
            warm = CampaignConfig(
                env_id, asker="llm:checklist-ledger", solver="llm", oracle="llm",
                conditions=("asker",), seeds=(10_000,), limit=4 * workers,
                llm={"sampling": client.sampling.to_dict()},
            )  # fmt: skip
            run_campaign(
                warm, Path(tmp) / "warm.duckdb", llm_client=client, progress=False,
                concurrency=concurrency, executor=executor,
            )  # fmt: skip

        config = CampaignConfig(
            env_id,
            asker="llm:checklist-ledger",
            solver="llm",
            oracle="llm",
            conditions=("asker",),
            seeds=tuple(range(seeds)),
            # the id covers the sampling (run_campaign warns otherwise); the client below uses
            # the default table
            llm={"sampling": SamplingTable.build().to_dict()},
        )
        with (
            ScriptedServer(rules, latency_s=latency, process=True, record_requests=False) as server,
            LLMClient(server.url, "scripted", concurrency=concurrency, timeout_s=60) as client,
        ):
            load = os.getloadavg()[0]
            pids = list(executor.worker_pids) if executor is not None else []
            children_cpu, workers_cpu = _cpu_of(), _cpu_of(pids) if pids else 0.0
            start, cpu = time.perf_counter(), time.process_time()
            summary = run_campaign(
                config,
                Path(tmp) / "bench.duckdb",
                concurrency=concurrency,
                llm_client=client,
                progress=False,
                executor=executor,
                start_interval_s=start_interval_s,
            )
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            driver_cpu = cpu
            if executor is not None and executor.worker_pids != pids:
                raise RuntimeError("a worker process was replaced during the timed run")
            server_cpu = None
            if children_cpu is not None:
                worker_delta = (_cpu_of(pids) if pids else 0.0) - workers_cpu
                server_cpu = _cpu_of() - children_cpu - worker_delta
                cpu += worker_delta  # the client side: the driver and its worker processes
            stats = server.stats()
    episodes = summary.episodes
    calls = stats["requests"]
    per_episode = calls / episodes
    achieved = episodes / wall
    ideal = concurrency / (per_episode * latency)
    ideal_calls_per_s = concurrency / latency
    processes = max(1, workers)
    # the best ratio the client's processes allow at the measured CPU per call, each on a whole
    # core of its own (with workers, the driver's share is small: it only stores rows)
    ceiling = min(1.0, processes / max(cpu / calls * ideal_calls_per_s, 1e-9))
    cores = os.cpu_count() or 1
    server_share = None if server_cpu is None else server_cpu / wall
    # what the machine's cores allow for client and server together
    capacity = None
    if server_cpu is not None:
        per_call = (cpu + server_cpu) / calls
        capacity = min(1.0, cores / max(per_call * ideal_calls_per_s, 1e-9))
    # the cores this benchmark's processes got, against what the ideal rate needs of them
    got = None if server_cpu is None else (cpu + server_cpu) / wall
    needed = None if server_cpu is None else (cpu + server_cpu) / calls * ideal_calls_per_s
    if server_share is not None and server_share > 0.8:
        bound = "server"
    elif capacity is not None and capacity < TARGET:
        bound = "machine_cpu"
    elif (
        achieved / ideal < TARGET
        and got is not None
        and got < 0.8 * min(cores, needed)
        and load > cores - 0.5
    ):
        bound = "machine_busy"  # other processes held the cores it needed
    elif ceiling < TARGET or cpu / wall > 0.8 * processes:
        bound = "client_cpu"
    else:
        bound = "latency"
    return {
        "env": env_id,
        "concurrency": concurrency,
        "workers": workers,
        "executor": "processes" if executor is not None else "local",
        "latency_s": latency,
        "start_interval_s": start_interval_s,
        "episodes": episodes,
        "calls": calls,
        "calls_per_episode": round(per_episode, 3),
        "wall_s": round(wall, 3),
        "episodes_per_s": round(achieved, 2),
        "ideal_episodes_per_s": round(ideal, 2),
        "ratio": round(achieved / ideal, 3),
        "target": TARGET,
        "max_in_flight": stats["max_in_flight"],
        "errors": summary.errors,
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_call": round(cpu / calls * 1000, 3),
        "driver_cpu_ms_per_call": round(driver_cpu / calls * 1000, 3),
        "cpu_share": round(cpu / wall, 3),
        "server_cpu_share": None if server_share is None else round(server_share, 3),
        "server_cpu_ms_per_call": None
        if server_cpu is None
        else round(server_cpu / calls * 1000, 3),
        "cpu_ceiling": round(ceiling, 3),
        # how busy each client process would be at the ideal rate (its CPU per call x its calls
        # per second): near 1, replies queue on its event loop and the ideal is out of reach
        "client_busy_at_ideal": round(cpu / calls * ideal_calls_per_s / processes, 3),
        "capacity_ceiling": None if capacity is None else round(capacity, 3),
        "cores": cores,
        "cores_got": None if got is None else round(got, 3),
        "cores_needed": None if needed is None else round(needed, 3),
        "episodes_per_slot": round(episodes / concurrency, 2),
        "load_avg": round(load, 2),
        "bound": bound,
    }


def run(small: bool = True) -> dict:
    """The ``benchmarks/all.py`` entry: L = 0.1 s at 64 and 256 in flight, each run locally (one
    process) and on the process executor with 2 workers, side by side. The headline ratio is the
    process executor's (what a campaign at hundreds in flight runs on; docs/scale.md): one
    process's core caps a local run near 2,000 calls/s here, below the 2,560 the ideal needs at
    256 in flight. Both runs' full figures go to stderr."""
    out = {}
    # 15 (30) episodes per slot, a whole number of them (a bundled Bird seed is 60 episodes):
    # the tail of the run, when fewer than C episodes are left, weighs little against the ideal
    for concurrency, seeds in ((64, 16 if small else 32), (256, 64 if small else 128)):
        for workers in (1, 2):
            result = measure("AmbiTab-Bird-v0", concurrency, 0.1, seeds, 2, workers)
            print(json.dumps(result), file=sys.stderr)  # the full figures, CPU per call included
        label = (
            f"llm_throughput: achieved / ideal episodes/s, L=0.1 s, C={concurrency}, "
            "process executor (2 workers)"
        )
        out[label] = {"ratio": result["ratio"], "target": TARGET, "better": "higher"}
    return out


def _share(value: float | None) -> str:
    return "?" if value is None else f"{value:.0%}"


def _ratio(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def main() -> None:
    tune_gc_for_campaigns()  # as the ambitab-gym command line runs campaigns
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="AmbiTab-Bird-v0")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64])
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per call (L)")
    parser.add_argument("--seeds", type=int, default=12, help="seeds x records = episodes")
    parser.add_argument("--questions", type=int, default=2, help="questions per episode")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1],
        help="client processes: 1 = a local run (one event loop), N > 1 = the process "
        "executor with N workers (each is measured, side by side)",
    )  # fmt: skip
    parser.add_argument(
        "--no-bare", dest="bare", action="store_false",
        help="skip the floor run of the client and server alone",
    )  # fmt: skip
    parser.add_argument(
        "--start-interval", type=float, default=defaults.SLOT_START_INTERVAL_S,
        metavar="SECONDS",
        help="seconds between the slots' starts, in the campaign and the floor run (default "
        f"{defaults.SLOT_START_INTERVAL_S:g}); the floor also runs with every slot at once",
    )  # fmt: skip
    parser.add_argument(
        "--unstaggered", action="store_true",
        help="also run each campaign with every slot starting at once (side by side)",
    )  # fmt: skip
    args = parser.parse_args()
    interval = args.start_interval
    results = []
    for concurrency in args.concurrency:
        for workers in args.workers:
            result = measure(
                args.env, concurrency, args.latency, args.seeds, args.questions, workers,
                start_interval_s=interval,
            )  # fmt: skip
            if args.unstaggered:
                burst = measure(
                    args.env, concurrency, args.latency, args.seeds, args.questions, workers,
                    start_interval_s=0.0,
                )  # fmt: skip
                result["unstaggered_ratio"] = burst["ratio"]
                result["unstaggered_cpu_ms_per_call"] = burst["cpu_ms_per_call"]
            if args.bare and workers == args.workers[0]:
                result.update(bare_side_by_side(concurrency, args.latency, interval))
            results.append(result)
            where = "1 process" if workers == 1 else f"{workers} worker processes"
            print(
                f"C={concurrency:>3}  L={args.latency:g}s  {where}: {result['episodes']} "
                f"episodes, {result['calls_per_episode']:.2f} calls/episode: "
                f"{result['episodes_per_s']:.1f} episodes/s vs ideal "
                f"{result['ideal_episodes_per_s']:.1f} (ratio {result['ratio']:.2f}, max in "
                f"flight {result['max_in_flight']}); client CPU {result['cpu_ms_per_call']:.2f} "
                f"ms/call, {result['cpu_share']:.0%} of one core (its {max(1, workers)} "
                f"process(es) on whole cores allow ratio {result['cpu_ceiling']:.2f}, each "
                f"{result['client_busy_at_ideal']:.0%} busy at the ideal rate); server "
                f"{_share(result['server_cpu_share'])} of a core; client + server on "
                f"{result['cores']} cores allow ratio {_ratio(result['capacity_ceiling'])}; "
                f"load {result['load_avg']:.1f}; bound: {result['bound']}"
            )
            if "unstaggered_ratio" in result:
                print(
                    f"       the same campaign with every slot starting at once: ratio "
                    f"{result['unstaggered_ratio']:.2f} (slots {interval * 1000:g} ms apart: "
                    f"{result['ratio']:.2f})"
                )
            if "transport_cpu_ms_per_call" in result:
                print(
                    f"       floors of client CPU per call: aiohttp and the event loop alone "
                    f"{result['transport_cpu_ms_per_call']:.2f} ms, with the LLM client "
                    f"{result['bare_cpu_ms_per_call']:.2f} ms, the campaign "
                    f"{result['cpu_ms_per_call']:.2f} ms"
                )
            if "bare_ratio" in result:
                for label, prefix in (
                    (f"slots {interval * 1000:g} ms apart", ""),
                    ("every slot at once", "unstaggered_"),
                ):
                    print(
                        f"       client + server alone (1 process, no env, no campaign), "
                        f"{label}: ratio {result[prefix + 'bare_ratio']:.2f}, client CPU "
                        f"{result[prefix + 'bare_cpu_ms_per_call']:.2f} ms/call, call latency "
                        f"mean {result[prefix + 'bare_latency_ms']:.1f} ms, p90 "
                        f"{result[prefix + 'bare_latency_p90_ms']:.1f} ms for L = "
                        f"{args.latency * 1000:g} ms"
                    )
    final = results[-1] if len(results) == 1 else {**results[-1], "sweep": results}
    print(json.dumps(final))


if __name__ == "__main__":
    main()
