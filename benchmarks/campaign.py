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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="AmbiTab-Bird-v0")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()

    corpus = load_corpus(args.env)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.duckdb"
        config = CampaignConfig(args.env, asker="full", seeds=tuple(range(args.seeds)))
        # warm-up: build databases and caches outside the timed run
        run_campaign(
            CampaignConfig(args.env, asker="full", seeds=(999,), limit=3), path, progress=False
        )
        start = time.perf_counter()
        summary = run_campaign(config, path, progress=False)
        wall = time.perf_counter() - start
        with ResultsStore(path) as store:
            episodes = store.episodes(config.campaign_id)
    verify = sum(e["timings"].get("verify_s", 0.0) for e in episodes)
    bare = bare_seconds(corpus, episodes)
    print(
        f"{len(episodes)} episodes in {wall:.2f} s ({len(episodes) / wall:,.0f} episodes/s); "
        f"verification {verify:.3f} s vs bare execution {bare:.3f} s; "
        f"SR none/full {summary.sr['none'].mean:.3f}/{summary.sr['full'].mean:.3f}"
    )
    print(
        json.dumps(
            {
                "env": args.env,
                "episodes": len(episodes),
                "wall_s": round(wall, 3),
                "episodes_per_s": round(len(episodes) / wall, 1),
                "verify_s": round(verify, 4),
                "bare_s": round(bare, 4),
                "verify_share": round(verify / wall, 4),
                "bare_share": round(bare / wall, 4),
                "verify_over_bare": round(verify / bare, 3) if bare else None,
            }
        )
    )


if __name__ == "__main__":
    main()
