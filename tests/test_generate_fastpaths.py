"""The generator's fast paths agree with their slow paths (known answers):

* one aggregate value's result fingerprint equals the verifier's normalized row set;
* a distractor draw of 0 or 1 kinds by ``rng.integers`` draws what ``rng.choice(n, size,
  replace=False)`` draws and leaves the generator in the same state;
* the batch query's id list for an entity-knowledge reading selects exactly the people its
  ``IN (subquery)`` condition selects, on every pooled database;
* the batch queries' prefilter (rows no reading counts are dropped) changes no reading's result
  (computed with and without it, and by executing each reading alone);
* memoized family slots equal the slots built afresh on a fresh copy of the database.
"""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest

from ambitab_gym.generate import DatabasePool, GeneratorConfig, TaskGenerator
from ambitab_gym.generate import families as fam
from ambitab_gym.generate import tasks as tasks_module
from ambitab_gym.generate.database import _fingerprint_of
from ambitab_gym.verify.compare import normalize_rows


def _rule(rows: list[tuple], count: bool) -> frozenset | None:
    """The fingerprint rule written out: None for no rows, a NULL, or (count) only zeros."""
    if not rows or any(v is None for row in rows for v in row):
        return None
    if count and all(row[-1] == 0 for row in rows):
        return None
    return frozenset(normalize_rows(rows, 4))


@pytest.mark.parametrize("count", [False, True])
def test_one_value_fingerprint_is_the_normalized_row_set(count):
    values = [0, 1, -3, 7, 2**40, 0.0, -0.0, 1.5, 2.0, 0.12345, 0.00004, -0.00004, 12.34565]
    values += [1e300, math.inf, -math.inf, math.nan, None, "text", b"blob"]
    values += list(np.random.default_rng(5).normal(0, 1000, 200))
    for value in values:
        if isinstance(value, np.floating):
            value = float(value)
        rows = [(value,)]
        got, expected = _fingerprint_of(rows, count), _rule(rows, count)
        assert got == expected, value
        if got is not None:
            assert [type(v) for (v,) in got] == [type(v) for (v,) in expected]


def test_distractor_draw_of_one_kind_is_the_choice_draw():
    for n in range(1, 6):
        for seed in range(300):
            a, b = np.random.default_rng(seed), np.random.default_rng(seed)
            assert int(a.choice(n, size=1, replace=False)[0]) == int(b.integers(n))
            assert a.bit_generator.state == b.bit_generator.state
            a.choice(n, size=0, replace=False)  # draws nothing
            assert a.bit_generator.state == b.bit_generator.state
            assert a.random() == b.random()


def test_knowledge_id_lists_select_what_the_subquery_selects():
    pool = DatabasePool()
    checked = 0
    for domain in ("retail", "library", "hospital", "sports", "university", "flights"):
        for index in range(3):
            db = pool.get(domain, index)
            d = db.domain
            for seed in range(6):
                slot = fam.knowledge(db, np.random.default_rng(seed), entity=True)
                if slot is None:
                    continue
                for reading in slot.readings:
                    fast = tasks_module._batch_cond(db, reading.effect)
                    assert fast != reading.effect["cond"] and " IN (SELECT" not in fast
                    people = f"SELECT {d.entity_id} FROM {d.entity_table} AS c WHERE "
                    by_subquery = db.connection.execute(people + reading.effect["cond"]).fetchall()
                    by_list = db.connection.execute(people + fast).fetchall()
                    assert by_list == by_subquery
                    checked += 1
    assert checked > 50


def test_prefilter_changes_no_reading_result(monkeypatch):
    config = GeneratorConfig(
        ambiguities=(1, 4), distractors=(0, 3), domains="all", databases_per_domain=2
    )
    original = tasks_module._prefilter
    filters: list[list[str]] = []

    def recorded(db, combos):
        filters.append(original(db, combos))
        return filters[-1]

    monkeypatch.setattr(tasks_module, "_prefilter", recorded)
    with_filter = TaskGenerator(config, pool=DatabasePool(), validate=False)
    tasks = [with_filter.generate(seed) for seed in range(150)]
    # the same seeds without the prefilter: the same tasks (same verdicts on every draw)
    monkeypatch.setattr(tasks_module, "_prefilter", lambda db, combos: [])
    without = TaskGenerator(config, pool=DatabasePool(), validate=False)
    for task in tasks:
        again = without.generate(task.seed)
        assert again.records == task.records
        # and each reading, executed alone on a fresh copy, is what both caches hold
        copy = sqlite3.connect(":memory:")
        task.database.connection.backup(copy)
        skeleton = task.records[0].source["skeleton"]
        if skeleton == "ranking":
            continue
        count = skeleton == "count"
        for record in task.records:
            sql = record.verification.reference_sql
            executed = _rule(copy.execute(sql).fetchall(), count)
            assert task.database.cached_fingerprint(sql, count=count) == executed
            assert again.database.cached_fingerprint(sql, count=count) == executed
    assert sum(bool(f) for f in filters) > 50  # the prefilter dropped rows in many queries


@pytest.mark.parametrize("family", fam.FAMILIES)
def test_memoized_slots_equal_slots_built_afresh(family):
    pool = DatabasePool()
    builders = {
        "vague": lambda db, rng: fam.vague(db, rng, ranking=False),
        "knowledge": lambda db, rng: fam.knowledge(db, rng, entity=True),
    }
    build = builders.get(family, getattr(fam, family))
    for seed in range(40):
        db = pool.get("retail", seed % 2)
        first = build(db, np.random.default_rng(seed))
        again = build(db, np.random.default_rng(seed))  # from the memo
        assert again is first
        fresh_pool = DatabasePool()  # a fresh database: nothing memoized
        fresh = build(fresh_pool.get("retail", seed % 2), np.random.default_rng(seed))
        assert fresh == first
        if first is not None:
            assert [r.effect for r in fresh.readings] == [r.effect for r in first.readings]


def test_percentiles_computed_at_once_equal_each_computed_alone():
    pool = DatabasePool()
    checked = 0
    for domain in ("retail", "library", "hospital", "sports", "university", "flights"):
        db = pool.get(domain, 1)
        d = db.domain
        for sql in (
            f"SELECT {d.size_column} FROM {d.event_table}",
            f"SELECT COUNT(*) FROM {d.event_table} GROUP BY {d.entity_id}",
            f"SELECT {d.item_value_column} FROM {d.item_table}",
        ):
            values = [row[0] for row in db.connection.execute(sql).fetchall()]
            for i in range(101):
                q = round(i / 100, 2)
                alone = float(np.quantile(values, q, method="lower"))
                assert db.quantile(sql, q) == alone, (sql, q)
                checked += 1
    assert checked == 6 * 3 * 101
