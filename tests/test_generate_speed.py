"""The generator's speedups change no result: an aggregate task's readings, computed from one
query per event table and grouping (``TaskGenerator._batch_keys``), and a ranking's probes,
computed from one query per event table (``TaskGenerator._batch_probes``), have exactly the
results their own SQL returns when executed alone on a fresh copy of the database (no caches),
on accepted and rejected draws."""

from __future__ import annotations

import sqlite3

from ambitab_gym.generate import DatabasePool, GeneratorConfig, TaskGenerator
from ambitab_gym.verify.compare import normalize_rows


def _executed(connection: sqlite3.Connection, sql: str, count: bool) -> frozenset | None:
    """A reading's result as the verifier's normalized row set (None: empty, NULL, no count),
    written here from the rule, not imported from the generator."""
    rows = connection.execute(sql).fetchall()
    if not rows or any(v is None for row in rows for v in row):
        return None
    if count and all(row[-1] == 0 for row in rows):
        return None
    return frozenset(normalize_rows(rows, 4))


def test_batched_reading_results_equal_each_reading_executed_alone():
    pool = DatabasePool()
    config = GeneratorConfig(
        ambiguities=(1, 5), distractors=(0, 3), domains="all", databases_per_domain=3
    )
    generator = TaskGenerator(config, pool=pool, validate=False)
    fresh: dict[str, sqlite3.Connection] = {}
    checked = grouped = counted = 0
    for seed in range(250):
        task = generator.generate(seed)
        first = task.records[0]
        skeleton = first.source["skeleton"]
        if skeleton == "ranking":
            continue
        db = task.database
        if db.name not in fresh:
            fresh[db.name] = sqlite3.connect(":memory:")
            db.connection.backup(fresh[db.name])
        count = skeleton == "count"
        results = []
        for record in task.records:
            sql = record.verification.reference_sql
            cached = db.cached_fingerprint(sql, count=count)
            assert cached is not False, sql  # computed while verifying the task
            executed = _executed(fresh[db.name], sql, count)
            assert cached == executed, sql
            assert executed is not None
            results.append(executed)
            checked += 1
            grouped += "GROUP BY" in sql
            counted += count
        assert len(set(results)) == len(results)  # result-distinct, by execution
    assert checked > 500 and grouped > 50 and counted > 50


def test_rejected_draws_are_rejected_by_execution_too(monkeypatch):
    # a draw the batch rejects (an empty or NULL result, two readings alike) is one whose
    # readings, executed alone, are rejected as well: compare on every attempt of some seeds
    pool = DatabasePool()
    generator = TaskGenerator(
        GeneratorConfig(ambiguities=(2, 4), distractors=(2, 4), domains=("retail", "library")),
        pool=pool,
        validate=False,
    )
    original = TaskGenerator._batch_keys
    verdicts = []

    def checked(self, db, plan, sqls, combos):
        keys = original(self, db, plan, sqls, combos)
        copy = sqlite3.connect(":memory:")
        db.connection.backup(copy)
        count = plan.skeleton == "count"
        executed = [_executed(copy, sql, count) for sql in sqls]
        assert keys == executed
        verdicts.append(None not in keys and len(set(keys)) == len(keys))
        return keys

    # the real method, wrapped to compare each of its answers with execution
    monkeypatch.setattr(TaskGenerator, "_batch_keys", checked)
    for seed in range(40):
        generator.generate(seed)
    assert True in verdicts and False in verdicts


def _probe_key(connection: sqlite3.Connection, probe: str, expected: int) -> frozenset | None:
    """A ranking reading's result from its own probe (names and sums, 11 rows) executed alone:
    the first ``expected`` names, None when fewer come back or the sums tie at the cut."""
    rows = connection.execute(probe).fetchall()
    if len(rows) < expected:
        return None
    if len(rows) > expected and rows[expected - 1][1] == rows[expected][1]:
        return None
    return frozenset(normalize_rows([(name,) for name, _ in rows[:expected]], 4))


def test_batched_ranking_probes_equal_each_probe_executed_alone(monkeypatch):
    generator = TaskGenerator(
        GeneratorConfig(ambiguities=(1, 4), distractors=(0, 3), domains="all"),
        pool=DatabasePool(),
        validate=False,
    )
    original = TaskGenerator._verified
    compared = []

    def checked(self, db, plan, sqls, combos):
        verdict = original(self, db, plan, sqls, combos)
        if plan.skeleton == "ranking":
            copy = sqlite3.connect(":memory:")
            db.connection.backup(copy)
            for combo in combos:
                probe = self._sql(db, plan, combo, cut=True)
                expected = next(
                    (r.effect["limit"] for r in combo if "limit" in r.effect), plan.limit
                )
                assert self._ranking_key(db, plan, combo) == _probe_key(copy, probe, expected)
            compared.append(verdict)
        return verdict

    # the real method, wrapped to compare each ranking draw's results with execution
    monkeypatch.setattr(TaskGenerator, "_verified", checked)
    for seed in range(120):
        task = generator.generate(seed)
        if task.records[0].source["skeleton"] != "ranking":
            continue
        # an accepted ranking: each reading's own SQL, executed, returns distinct name sets
        names = [
            frozenset(task.database.connection.execute(r.verification.reference_sql).fetchall())
            for r in task.records
        ]
        assert len(set(names)) == len(names)
    assert True in compared and False in compared and len(compared) > 30
