"""TACO converter on a self-written data folder in TACO's format (tests/convert/taco_fixture.py).

Outcomes and requests were worked out by hand from the fixture's tables.
"""

from __future__ import annotations

import json
import sqlite3

from convert_helpers import read_jsonl, run_build, tree_bytes
from taco_fixture import QUERIES, write_taco


def build(tmp_path, name="corpus"):
    source = (
        write_taco(tmp_path / "upstream")
        if not (tmp_path / "upstream").exists()
        else tmp_path / "upstream"
    )
    status, report = run_build("taco", "--source", str(source), "--out", str(tmp_path / name))
    assert status == 0, report
    return tmp_path / name, report


def test_outcomes_per_query_file(tmp_path):
    out, report = build(tmp_path)
    expected_drops = {f"traffic/queries/{f}": o for f, (_, _, o) in QUERIES.items() if o != "kept"}
    dropped = {d["item"]: d["reason"] for d in read_jsonl(out / "dropped.jsonl")}
    assert dropped == expected_drops
    records = read_jsonl(out / "records.jsonl")
    kept = {r["source"]["file"] for r in records}
    assert kept == {"traffic/queries/q01.json", "traffic/queries/q02.json",
                    "traffic/queries/q03.json", "housing/q01.json"}  # fmt: skip
    assert report["records"] == report["avts"] == report["retained_items"] == 4
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["oracle"] == "intent"
    assert set(manifest["databases"]) == {"traffic", "housing"}


def test_table_and_unstated_values_are_withheld(tmp_path):
    out, _ = build(tmp_path)
    records = {r["source"]["file"]: r for r in read_jsonl(out / "records.jsonl")}
    q1 = records["traffic/queries/q01.json"]
    assert q1["spec"]["request"] == (
        "Using the crashes table, find the number of records where county is Kent."
    )
    assert [(a["id"], a["term"], a["resolution"]) for a in q1["ambiguities"]] == [
        ("table", "crashes table", "the table crashes_2019")
    ]
    assert all(a["response"] for a in q1["ambiguities"])
    # Essex is not in TACO's own question: the value is withheld too; 1 is stated
    q2 = records["traffic/queries/q02.json"]
    assert q2["spec"]["request"] == (
        "Using the crashes table, list the month where county is the given county "
        "and injuries is greater than 1."
    )
    assert [(a["id"], a["term"], a["sql_snippet"]) for a in q2["ambiguities"]] == [
        ("table", "crashes table", "FROM crashes_2020"),
        ("value_county", "given county", "county = 'Essex'"),
    ]
    for record in records.values():
        assert "crashes_20" not in record["spec"]["request"]
        assert "homes_20" not in record["spec"]["request"]
    housing = records["housing/q01.json"]
    assert housing["spec"]["request"] == (
        "Using the homes table, find the average price where city is Dover."
    )


def test_kept_queries_have_a_result_distinct_table_alternative(tmp_path):
    out, _ = build(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    for record in read_jsonl(out / "records.jsonl"):
        db = out / manifest["databases"][record["verification"]["database"]]["file"]
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        sql = record["verification"]["reference_sql"]
        table = record["source"]["table"]
        rows = set(connection.execute(sql).fetchall())
        assert rows
        others = [
            set(connection.execute(sql.replace(table, other)).fetchall())
            for other in record["source"]["distinct_alternatives"]
        ]
        connection.close()
        assert others and all(o != rows for o in others)


def test_csv_database_is_loaded_with_types(tmp_path):
    out, _ = build(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    db = out / manifest["databases"]["housing"]["file"]
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert connection.execute(
        "SELECT AVG(price) FROM homes_2021 WHERE city = 'Dover'"
    ).fetchall() == [(220000.0,)]
    assert connection.execute("SELECT typeof(price) FROM homes_2022 LIMIT 1").fetchall() == [
        ("integer",)
    ]
    connection.close()


def test_second_build_is_byte_identical(tmp_path):
    first, _ = build(tmp_path, "one")
    second, _ = build(tmp_path, "two")
    assert tree_bytes(first) == tree_bytes(second)
