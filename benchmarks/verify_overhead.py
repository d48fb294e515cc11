"""Verification overhead: ``Verifier.verify`` against bare execution, per engine.

For a few reference queries of the bundled corpora, times (a) bare execution on a plain
connection (``sqlite3``, ``duckdb``, ``psycopg``: execute + fetch all) and (b) the verifier's
``verify(record, sql)``: the sandboxed engine (authorizer and progress handler for SQLite; the
worker process for DuckDB; read-only transaction, server-side cursor and rollback for
PostgreSQL) plus the comparison with the cached reference. Bare and verified runs alternate so
machine noise hits both alike; the figure per query is the median.

SQLite runs on ``bird``, DuckDB and PostgreSQL on ``bird_interact``. PostgreSQL is measured on
a throwaway cluster (``tests/postgres_cluster.py``) when the server binaries exist, else skipped.

    python benchmarks/verify_overhead.py [--queries 8] [--repeats 40]

Last line: ``{"sqlite": {"bare_ms", "verify_ms", "overhead_ms", "ratio"}, "duckdb": {...},
"postgres": {...}}`` with per-query medians summed over the queries; ratio = verify / bare.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import duckdb
import psycopg

from ambitab_gym.corpora import load_corpus
from ambitab_gym.verify import Verifier
from ambitab_gym.verify.postgres import database_name, load_corpus_databases

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def _measure(records, bare_run, verifier, repeats: int) -> dict:
    bare_total = verify_total = 0.0
    for record in records:
        sql = record.verification.reference_sql
        assert verifier.verify(record, sql).success, record.id  # warm: engine up, reference cached
        bare_run(record, sql)
        bare, verified = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            bare_run(record, sql)
            bare.append(time.perf_counter() - start)
            start = time.perf_counter()
            verifier.verify(record, sql)
            verified.append(time.perf_counter() - start)
        bare_total += statistics.median(bare)
        verify_total += statistics.median(verified)
    return {
        "queries": len(records),
        "bare_ms": round(bare_total * 1e3, 3),
        "verify_ms": round(verify_total * 1e3, 3),
        "overhead_ms": round((verify_total - bare_total) * 1e3 / len(records), 3),
        "ratio": round(verify_total / bare_total, 2),
    }


def _sqlite(n: int, repeats: int) -> dict:
    corpus = load_corpus("bird")
    records = corpus.records[:n]
    connections = {}

    def bare(record, sql):
        db = record.verification.database
        if db not in connections:
            connections[db] = sqlite3.connect(corpus.database_file(db, "sqlite"))
        return connections[db].execute(sql).fetchall()

    verifier = Verifier(corpus.open_engine)
    try:
        return _measure(records, bare, verifier, repeats)
    finally:
        verifier.close()


def _duckdb(n: int, repeats: int) -> dict:
    corpus = load_corpus("bird_interact")
    records = corpus.records[:n]
    connections = {}

    def bare(record, sql):
        db = record.verification.database
        if db not in connections:
            path = str(corpus.database_file(db, "duckdb"))
            connections[db] = duckdb.connect(path, read_only=True, config={"threads": 1})
        return connections[db].execute(sql).fetchall()

    verifier = Verifier(corpus.open_engine)
    try:
        return _measure(records, bare, verifier, repeats)
    finally:
        verifier.close()


def _postgres(n: int, repeats: int) -> dict | None:
    try:
        from postgres_cluster import PostgresCluster, PostgresUnavailable
    except ImportError:
        return None
    try:
        cluster = PostgresCluster().start()
    except PostgresUnavailable as error:
        print(f"postgres: skipped ({error})", file=sys.stderr)
        return None
    try:
        corpus = load_corpus("bird_interact")
        reader = load_corpus_databases(corpus, cluster.dsn())
        pg_corpus = load_corpus(
            "bird_interact", engine_override="postgres", options={"dsn": reader}
        )
        records = pg_corpus.records[:n]
        connections = {}

        def bare(record, sql):
            db = database_name(corpus.name, record.verification.database)
            if db not in connections:
                # No server-side prepared plans: a submission is new SQL, run once.
                connections[db] = psycopg.connect(
                    f"{reader} dbname={db}", autocommit=True, prepare_threshold=None
                )
            return connections[db].execute(sql).fetchall()

        verifier = Verifier(pg_corpus.open_engine)
        try:
            return _measure(records, bare, verifier, repeats)
        finally:
            verifier.close()
            for connection in connections.values():
                connection.close()
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args()
    results = {
        "sqlite": _sqlite(args.queries, args.repeats),
        "duckdb": _duckdb(args.queries, args.repeats),
    }
    postgres = _postgres(args.queries, args.repeats)
    if postgres is not None:
        results["postgres"] = postgres
    for engine, figures in results.items():
        print(
            f"{engine:9s} {figures['queries']} queries: bare {figures['bare_ms']:.2f} ms, "
            f"verify {figures['verify_ms']:.2f} ms, overhead {figures['overhead_ms']:.3f} ms/query, "
            f"ratio {figures['ratio']:.2f}"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
