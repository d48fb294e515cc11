"""Verification of predicted/gold pairs against the physical floor (issue 19, item 1).

Pairs: for every item (AVT) of a corpus, each reading's reference SQL verified against its own
record (a correct prediction) and against the other readings' records (a wrong prediction: the
same question read the other way). ``--pairs`` pairs are drawn, ``--wrong`` of them wrong
(default 1,000 pairs, 40 % wrong), in a fixed order (no randomness beyond ``--seed``).

Corpora: the AmbiQT corpus that ``ambitab-gym build ambiqt`` makes from
``/work/shared/upstream/ambiqt`` (``--upstream``; built into a temporary ``AMBITAB_HOME``), and
every bundled corpus (read-only records; write tasks are left out).

Floor: the same predicted queries run once each on a plain connection of the same engine
(``sqlite3`` / ``duckdb`` in-process; execute + ``fetchall()``). Verified: ``Verifier.verify``
on the same pairs, the reference results cached (a warm-up pass fills the caches of both). Each
pair runs bare and then verified, so machine noise hits both alike; ``--rounds`` passes over
the pairs, each figure is the median pass (``ratio_best``: the fastest pass of each). ``compare_us`` times the comparison alone on the pairs' results: the fast
path (``results_match``) and the plain reference path (``results_match_reference``).

    python benchmarks/verify_pairs.py [--pairs 1000] [--wrong 0.4] [--rounds 7] [--no-build]

Last line: ``{"<corpus>": {"pairs", "wrong", "bare_ms", "verify_ms", "ratio", "overhead_us",
"ratio_best", "compare_us_fast", "compare_us_slow", "agree"}}``; ``agree`` counts verdicts that say what the
pair is (a correct prediction matches, a wrong one does not).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from ambitab_gym.corpora import ENV_IDS, load_corpus
from ambitab_gym.verify import Verifier
from ambitab_gym.verify.compare import results_match, results_match_reference
from ambitab_gym.verify.verifier import is_write_task, upstream_conditions

UPSTREAM = Path("/work/shared/upstream/ambiqt")
#: issue 19: verification of Spider-size pairs at most this many times the bare queries
TARGET_RATIO = 1.2

Pair = tuple  # (record, predicted sql, is the prediction correct)


def build_ambiqt(upstream: Path, home: Path) -> Path:
    """``ambitab-gym build ambiqt`` into the data home ``home``; the corpus folder."""
    env = {**os.environ, "AMBITAB_HOME": str(home)}
    command = [
        sys.executable,
        "-m",
        "ambitab_gym",
        "build",
        "ambiqt",
        "--source",
        str(upstream / "AmbiQT"),
        "--databases",
        str(upstream / "spider" / "database"),
        "--json",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if done.returncode != 0 or not report.get("out"):
        raise RuntimeError(f"ambitab-gym build ambiqt failed: {report.get('error') or done.stderr}")
    return Path(report["out"])


def make_pairs(records, n: int, wrong_share: float, seed: int = 0) -> list[Pair]:
    """``n`` pairs, ``round(n * wrong_share)`` of them wrong, cycling over the corpus."""
    records = [r for r in records if not is_write_task(r)]
    by_avt: dict[str, list] = {}
    for record in records:
        by_avt.setdefault(record.avt_id, []).append(record)
    right = [(r, r.verification.reference_sql, True) for r in records]
    wrong = [
        (a, b.verification.reference_sql, False)
        for readings in by_avt.values()
        for a in readings
        for b in readings
        if a is not b and b.verification.reference_sql != a.verification.reference_sql
    ]
    n_wrong = round(n * wrong_share) if wrong else 0
    pairs = [right[i % len(right)] for i in range(n - n_wrong)]
    pairs += [wrong[i % len(wrong)] for i in range(n_wrong)]
    random.Random(seed).shuffle(pairs)
    return pairs


def _bare_runner(corpus) -> Callable[[object, str], list]:
    connections: dict[str, object] = {}

    def bare(record, sql: str) -> list:
        spec = record.verification
        connection = connections.get(spec.database)
        if connection is None:
            path = corpus.database_file(spec.database, spec.engine)
            if spec.engine == "duckdb":
                connection = duckdb.connect(str(path), read_only=True, config={"threads": 1})
            else:
                connection = sqlite3.connect(path)
            connections[spec.database] = connection
        return connection.execute(sql).fetchall()

    return bare


def measure(corpus, pairs: list[Pair], rounds: int) -> dict:
    """Bare and verified passes over ``pairs``, alternating; median pass of each."""
    bare = _bare_runner(corpus)
    verifier = Verifier(corpus.open_engine)
    try:
        agree = 0
        for record, sql, correct in pairs:  # warm: engines up, references cached
            agree += verifier.verify(record, sql).success == correct
            bare(record, sql)
        bare_s, verify_s = [], []
        clock = time.perf_counter
        for _ in range(rounds):
            # Pair by pair, bare then verified: a burst of other work hits both alike.
            bare_total = verify_total = 0.0
            for record, sql, _correct in pairs:
                start = clock()
                bare(record, sql)
                middle = clock()
                verifier.verify(record, sql)
                bare_total += middle - start
                verify_total += clock() - middle
            bare_s.append(bare_total)
            verify_s.append(verify_total)
        compare = _compare_times(verifier, pairs, rounds)
    finally:
        verifier.close()
    bare_med, verify_med = statistics.median(bare_s), statistics.median(verify_s)
    return {
        "pairs": len(pairs),
        "wrong": sum(not correct for _r, _s, correct in pairs),
        "bare_ms": round(bare_med * 1e3, 2),
        "verify_ms": round(verify_med * 1e3, 2),
        "ratio": round(verify_med / bare_med, 3),
        # the fastest pass of each: less sensitive to other work on a loaded machine
        "ratio_best": round(min(verify_s) / min(bare_s), 3),
        "overhead_us": round((verify_med - bare_med) * 1e6 / len(pairs), 2),
        **compare,
        "agree": agree,
    }


def _compare_times(verifier: Verifier, pairs: list[Pair], rounds: int) -> dict:
    """The comparison alone on the pairs' results: fast path and reference path (us/pair)."""
    cases = []
    for record, sql, _correct in pairs:
        if upstream_conditions(record) is not None:
            continue  # compared the upstream way (taskrun), not by results_match
        reference = verifier._reference(record)
        if reference.prepared is None:
            continue
        try:
            rows = verifier.execute(record, sql).rows
        except Exception:  # noqa: BLE001 - a failing prediction has nothing to compare
            continue
        cases.append((rows, reference, record.verification.compare))
    if not cases:
        return {}
    for rows, reference, rules in cases:
        fast = results_match(rows, reference.prepared, rules)
        slow = results_match_reference(rows, reference.rows, rules, reference_normalized=True)
        assert fast == slow, "fast and reference comparison disagree"

    def best(run: Callable[[], None]) -> float:
        times = []
        for _ in range(max(3, rounds)):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return min(times) * 1e6 / len(cases)

    def fast_path() -> None:
        for rows, reference, rules in cases:
            results_match(rows, reference.prepared, rules)

    def slow_path() -> None:
        for rows, reference, rules in cases:
            results_match_reference(rows, reference.rows, rules, reference_normalized=True)

    return {
        "compare_us_fast": round(best(fast_path), 2),
        "compare_us_slow": round(best(slow_path), 2),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--wrong", type=float, default=0.4, help="share of wrong predictions")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--upstream", type=Path, default=UPSTREAM)
    parser.add_argument("--no-build", action="store_true", help="bundled corpora only")
    parser.add_argument("--no-bundled", action="store_true", help="the built AmbiQT corpus only")
    args = parser.parse_args(argv)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="ambitab-verify-pairs-") as home:
        if not args.no_build and (args.upstream / "AmbiQT").is_dir():
            corpus = load_corpus(build_ambiqt(args.upstream, Path(home)))
            pairs = make_pairs(corpus.records, args.pairs, args.wrong, args.seed)
            results["ambiqt_built"] = measure(corpus, pairs, args.rounds)
        elif not args.no_build:
            print(f"ambiqt_built: skipped ({args.upstream} has no AmbiQT)", file=sys.stderr)
        if not args.no_bundled:
            for name in ENV_IDS.values():
                corpus = load_corpus(name)
                pairs = make_pairs(corpus.records, args.pairs, args.wrong, args.seed)
                results[f"bundled_{name}"] = measure(corpus, pairs, args.rounds)
    for name, figures in results.items():
        print(
            f"{name:24s} {figures['pairs']} pairs ({figures['wrong']} wrong): "
            f"bare {figures['bare_ms']:.1f} ms, verify {figures['verify_ms']:.1f} ms, "
            f"ratio {figures['ratio']:.2f} (best {figures['ratio_best']:.2f}), overhead {figures['overhead_us']:.1f} us/pair, "
            f"compare {figures.get('compare_us_fast', 0):.2f} us (reference path "
            f"{figures.get('compare_us_slow', 0):.2f} us), agree {figures['agree']}"
        )
    print(json.dumps(results))
    return results


def run(small: bool = True) -> dict:
    """Ratios for ``benchmarks/all.py``: ``{"name": {"ratio": x, "target": y}}``.

    ``small`` measures 1,000 AmbiQT pairs over 3 rounds and leaves the bundled corpora out.
    """
    argv = ["--rounds", "3", "--no-bundled"] if small else []
    results = main(argv)
    if "ambiqt_built" not in results:  # no upstream checkout: the bundled AmbiQT sample
        results = main(["--rounds", "3", "--no-build"]) if small else results
    out = {}
    for name, figures in results.items():
        if name in ("ambiqt_built", "bundled_bird", "bundled_ambiqt"):
            out[f"verify_pairs_{name}"] = {"ratio": figures["ratio"], "target": TARGET_RATIO}
    return out


if __name__ == "__main__":
    main()
