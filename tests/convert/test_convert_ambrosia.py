"""Ambrosia converter on a self-written file in Ambrosia's CSV format.

Expected results were worked out by hand from the fixture's dumps (tests/convert/
ambrosia_fixture.py) and are checked with plain sqlite3 on the built database files.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

from ambrosia_fixture import COLLECTIVE_SQL, write_ambrosia_csv
from convert_helpers import read_jsonl, run_build, tree_bytes

from ambitab_gym.convert.ambrosia import ambiguity_term, assign_splits
from ambitab_gym.convert.common import Item
from ambitab_gym.records import parse_record


def build(tmp_path, name="corpus", seed="0"):
    source = write_ambrosia_csv(tmp_path / "upstream")
    out = tmp_path / name
    status, report = run_build(
        "ambrosia", "--source", str(source), "--out", str(out), "--seed", seed
    )
    assert status == 0, report
    return out, report


def query(path, sql):
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def test_one_record_per_reading_with_terms_from_the_annotation(tmp_path):
    out, report = build(tmp_path)
    assert report["records"] == 6 and report["avts"] == report["retained_items"] == 3
    assert report["dropped"] == {
        "duplicate_result": 1,
        "few_shot_example": 1,
        "fewer_than_two_readings": 1,
    }
    records = read_jsonl(out / "records.jsonl")
    by_request = {}
    for record in records:
        by_request.setdefault(record["spec"]["request"], []).append(record)
    assert {q: len(rs) for q, rs in by_request.items()} == {
        "Which classes does every gym offer?": 2,
        "List hotels and restaurants with a pool.": 2,
        "Which shops are popular?": 2,
    }
    terms = {q: {r["ambiguities"][0]["term"] for r in rs} for q, rs in by_request.items()}
    assert terms == {
        "Which classes does every gym offer?": {"every gym"},
        "List hotels and restaurants with a pool.": {"with a pool"},
        "Which shops are popular?": {"popular"},
    }
    gym = by_request["Which classes does every gym offer?"]
    assert [r["ambiguities"][0]["resolution"] for r in gym] == [
        "Which classes are offered by all gyms?",
        "For each gym, which classes does it offer?",
    ]
    assert all(r["ambiguities"][0]["resolution"] in r["ambiguities"][0]["response"] for r in gym)
    assert {r["ambiguities"][0]["id"] for r in records} == {"scope", "attachment", "vague"}
    for record in records:  # the reading's own question never reaches the public spec
        assert record["ambiguities"][0]["resolution"] not in json.dumps(record["spec"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["oracle"] == "intent" and manifest["engine"] == "sqlite"
    dropped = {d["item"]: d["reason"] for d in read_jsonl(out / "dropped.jsonl")}
    assert dropped == {
        "ambrosia.csv:row10": "fewer_than_two_readings",
        "ambrosia.csv:row12": "duplicate_result",
        "ambrosia.csv:row15": "few_shot_example",
    }


def test_dump_with_on_delete_cascade_and_other_statements(tmp_path):
    out, _ = build(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    gyms = out / manifest["databases"]["gyms"]["file"]
    # DELETE FROM gym WHERE id = 4 cascades to gym_class (foreign keys are on in the dump)
    assert query(gyms, "SELECT COUNT(*) FROM gym_class WHERE gym_id = 4") == [(0,)]
    assert query(gyms, "SELECT name FROM fitness_class WHERE id = 3") == [("pilates",)]
    kinds = dict(query(gyms, "SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))
    assert kinds["gym_class_by_class"] == "index" and kinds["gym_class_names"] == "view"
    # the collective reading is nonempty only because the cascade removed gym 4's link
    assert query(gyms, COLLECTIVE_SQL) == [("yoga",)]
    # the hotels dump starts with a MySQL line that SQLite rejects: skipped, the rest kept
    hotels = out / manifest["databases"]["hotels"]["file"]
    assert query(hotels, "SELECT COUNT(*) FROM hotel") == [(2,)]
    assert manifest["provenance"]["skipped_dump_statements"]["hotels"] == 1
    assert manifest["provenance"]["skipped_dump_statements"]["gyms"] == 0


def test_readings_execute_and_differ(tmp_path):
    out, _ = build(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    results = {}
    for record in read_jsonl(out / "records.jsonl"):
        path = out / manifest["databases"][record["verification"]["database"]]["file"]
        rows = query(path, record["verification"]["reference_sql"])
        assert rows
        results.setdefault(record["avt_id"], []).append(set(rows))
    assert all(a != b for a, b in results.values())


def test_second_build_is_byte_identical(tmp_path):
    first, _ = build(tmp_path, "one")
    second, _ = build(tmp_path, "two")
    assert tree_bytes(first) == tree_bytes(second)


def test_ambiguity_terms():
    assert ambiguity_term("What activities does each club run?", "scope", []) == "each club"
    assert ambiguity_term("Show cafes and bakeries that open on Sunday.", "attachment", []) == (
        "that open on Sunday"
    )
    readings = ["Which trails are longer than 10 km?", "Which trails climb more than 500 m?"]
    assert ambiguity_term("Which trails are hard?", "vague", readings) == "hard"


def test_splits_are_database_disjoint_and_near_twenty_percent():
    def item(index, database, kind):
        record = parse_record(
            {"id": f"r{index}", "avt_id": f"a{index}", "corpus": "ambrosia",
             "spec": {"request": "q?", "database": database},
             "verification": {"database": database, "reference_sql": "SELECT 1"}}
        )  # fmt: skip
        return Item(f"k{index}", [record, record.model_copy(update={"id": f"r{index}b"})]), kind

    pairs = [item(i, f"db{i % 10}", "scope") for i in range(20)]
    pairs += [item(100 + i, f"v{i % 5}", "vague") for i in range(10)]
    items = [p[0] for p in pairs]
    types = {p[0].key: p[1] for p in pairs}
    split = assign_splits(items, types, seed=3)
    assert split == assign_splits(items, types, seed=3)
    records = Counter()
    for it, kind in pairs:
        records[(kind, split[it.records[0].spec.database])] += len(it.records)
    # scope: 10 databases of 4 records -> 2 test databases = 8 of 40 records (20%)
    assert records[("scope", "test")] == 8 and records[("scope", "train")] == 32
    # vague: 5 databases of 4 records -> 1 test database = 4 of 20 records (20%)
    assert records[("vague", "test")] == 4
    draws = {
        tuple(sorted(d for d, s in assign_splits(items, types, seed=k).items() if s == "test"))
        for k in range(8)
    }
    assert len(draws) > 1  # the seed decides which databases are held out
