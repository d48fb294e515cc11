"""Campaign throughput and where the time goes: verification against bare SQL execution.

Runs a full-asker campaign (none / asker / full conditions) on a bundled corpus into a fresh
results file, then re-executes every submitted SQL on a plain, unsandboxed connection to the same
database file (sqlite3 or duckdb), timing both in this one run.

    python benchmarks/campaign.py [--env AmbiTab-Bird-v0] [--seeds 5]

Last line (JSON): episodes, wall_s, episodes_per_s, verify_s (time inside the verifier),
bare_s (the same SQL executed bare), verify_share and bare_share (of wall time), and
verify_over_bare (verification cost per unit of bare execution).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

import duckdb

from ambitab_gym.corpora import load_corpus
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign


def bare_seconds(corpus, episodes) -> float:
    records = {r.id: r for r in corpus.records}
    connections: dict[str, object] = {}
    total = 0.0
    for episode in episodes:
        sql = episode["sql"]
        if not sql:
            continue
        spec = records[episode["record_id"]].verification
        kind = corpus.engine_kind(spec.engine)
        key = f"{kind}:{spec.database}"
        if key not in connections:
            path = corpus.database_file(spec.database, kind)
            connections[key] = (
                sqlite3.connect(f"file:{path}?mode=ro", uri=True)
                if kind == "sqlite"
                else duckdb.connect(str(path), read_only=True)
            )
        connection = connections[key]
        start = time.perf_counter()
        connection.execute(sql).fetchall()
        total += time.perf_counter() - start
    return total


TARGET = 1.2  # verification at most 1.2x the bare execution of the same SQL (issue 19)


def measure(env_id: str = "AmbiTab-Bird-v0", seeds: int = 5) -> dict:
    """One campaign, timed, and the bare re-execution of its SQL; the figures of the JSON line."""
    corpus = load_corpus(env_id)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.duckdb"
        config = CampaignConfig(env_id, asker="full", seeds=tuple(range(seeds)))
        # warm-up: build databases and caches outside the timed run
        run_campaign(
            CampaignConfig(env_id, asker="full", seeds=(999,), limit=3), path, progress=False
        )
        start = time.perf_counter()
        summary = run_campaign(config, path, progress=False)
        wall = time.perf_counter() - start
        with ResultsStore(path) as store:
            episodes = store.episodes(config.campaign_id)
    verify = sum(e["timings"].get("verify_s", 0.0) for e in episodes)
    bare = bare_seconds(corpus, episodes)
    return {
        "env": env_id,
        "episodes": len(episodes),
        "wall_s": round(wall, 3),
        "episodes_per_s": round(len(episodes) / wall, 1),
        "verify_s": round(verify, 4),
        "bare_s": round(bare, 4),
        "verify_share": round(verify / wall, 4),
        "bare_share": round(bare / wall, 4),
        "verify_over_bare": round(verify / bare, 3) if bare else None,
        "target": TARGET,
        "sr_none": round(summary.sr["none"].mean, 3),
        "sr_full": round(summary.sr["full"].mean, 3),
    }


def run(small: bool = True) -> dict:
    """The ``benchmarks/all.py`` entry: ``{metric: {"ratio", "target", "better"}}``."""
    result = measure(seeds=2 if small else 5)
    return {
        "campaign: verification time over bare execution of the same SQL": {
            "ratio": result["verify_over_bare"],
            "target": TARGET,
            "better": "lower",
        }
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="AmbiTab-Bird-v0")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    result = measure(args.env, args.seeds)
    print(
        f"{result['episodes']} episodes in {result['wall_s']:.2f} s "
        f"({result['episodes_per_s']:,.0f} episodes/s); verification {result['verify_s']:.3f} s "
        f"vs bare execution {result['bare_s']:.3f} s; "
        f"SR none/full {result['sr_none']:.3f}/{result['sr_full']:.3f}"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
