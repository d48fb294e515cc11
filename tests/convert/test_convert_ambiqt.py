"""AmbiQT converter on the real AmbiQT column-synonym sample and Spider databases.

Checks are computed here, independently of the converter: readings are executed with plain
sqlite3 on the rebuilt database files, the copied and resampled columns are compared with the
original Spider column, and key columns are read from the Spider databases.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from convert_helpers import read_jsonl, run_build, tree_bytes, upstream

ITEMS_IN_SAMPLE = 487


@pytest.fixture(scope="module")
def paths():
    root = upstream("ambiqt")
    return root / "AmbiQT", root / "spider" / "database"


@pytest.fixture(scope="module")
def built(paths, tmp_path_factory):
    """One build of the sample with seed 7 (shared by the read-only tests)."""
    source, databases = paths
    out = tmp_path_factory.mktemp("ambiqt") / "corpus"
    status, report = run_build(
        "ambiqt", "--source", str(source), "--databases", str(databases),
        "--out", str(out), "--seed", "7",
    )  # fmt: skip
    assert status == 0, report
    return out, report


def query(path: Path, sql: str) -> list[tuple]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def test_report_and_counts(built):
    out, report = built
    assert set(report) == {"corpus", "out", "records", "avts", "retained_items", "dropped"}
    assert report["corpus"] == "ambiqt"
    assert Path(report["out"]) == out.resolve()
    records = read_jsonl(out / "records.jsonl")
    assert report["records"] == len(records) == 2 * report["retained_items"]
    assert report["avts"] == report["retained_items"]
    per_avt = Counter(r["avt_id"] for r in records)
    assert set(per_avt.values()) == {2}
    dropped = read_jsonl(out / "dropped.jsonl")
    assert report["retained_items"] + len(dropped) == ITEMS_IN_SAMPLE
    assert Counter(d["reason"] for d in dropped) == Counter(report["dropped"])
    assert all(d["reason"] and d["item"] for d in dropped)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["name"] == "ambiqt" and manifest["oracle"] == "intent"
    assert manifest["counts"]["records"] == len(records)
    assert manifest["provenance"]["seed"] == 7
    assert "CC BY-SA" in manifest["licence"]
    assert any(k.endswith("validation.json") for k in manifest["provenance"]["inputs"])


def test_every_reading_executes_and_readings_differ(built):
    out, _ = built
    records = read_jsonl(out / "records.jsonl")
    manifest = json.loads((out / "manifest.json").read_text())
    by_avt: dict[str, list[dict]] = {}
    for record in records:
        by_avt.setdefault(record["avt_id"], []).append(record)
    for avt, (first, second) in by_avt.items():
        assert first["spec"] == second["spec"]
        results = []
        for record in (first, second):
            db_file = out / manifest["databases"][record["verification"]["database"]]["file"]
            rows = query(db_file, record["verification"]["reference_sql"])
            assert rows, f"{record['id']}: empty reference result"
            results.append(rows)
        if first["verification"]["compare"]["order"] == "ordered":
            assert results[0] != results[1], avt
        else:
            assert set(results[0]) != set(results[1]), avt


def test_copied_column_keeps_values_and_other_is_resampled(built, paths):
    out, _ = built
    _, spider = paths
    manifest = json.loads((out / "manifest.json").read_text())
    seen = set()
    for record in read_jsonl(out / "records.jsonl"):
        database = record["verification"]["database"]
        if database in seen:
            continue
        seen.add(database)
        source = record["source"]
        table, column = source["table"], source["column"]
        syn1, syn2 = source["synonyms"]
        copied = source["copied_column"]
        other = syn2 if copied == syn1 else syn1
        original = query(
            spider / source["db_id"] / f"{source['db_id']}.sqlite",
            f'SELECT "{column}" FROM "{table}" ORDER BY rowid',
        )
        rebuilt = out / manifest["databases"][database]["file"]
        kept = query(rebuilt, f'SELECT "{copied}" FROM "{table}" ORDER BY rowid')
        resampled = query(rebuilt, f'SELECT "{other}" FROM "{table}" ORDER BY rowid')
        assert kept == original
        assert len(resampled) == len(original)
        assert set(resampled) <= set(original)
        columns = [r[1].lower() for r in query(rebuilt, f'PRAGMA table_info("{table}")')]
        assert column.lower() not in columns and syn1.lower() in columns
    assert len(seen) > 20


def test_protected_key_columns_are_dropped(built, paths):
    out, _ = built
    _, spider = paths
    for record in read_jsonl(out / "records.jsonl"):
        source = record["source"]
        db = spider / source["db_id"] / f"{source['db_id']}.sqlite"
        info = query(db, f'PRAGMA table_info("{source["table"]}")')
        assert not any(r[1].lower() == source["column"].lower() and r[5] for r in info)
    protected = [
        d for d in read_jsonl(out / "dropped.jsonl") if d["reason"] == "protected_key_column"
    ]
    assert protected
    # validation.json item 73 renames Student.StuID, the primary key of pets_1.student
    assert any(d["item"].endswith("validation.json#73") for d in protected)


def test_copied_column_draw_follows_the_seed(built, paths, tmp_path):
    out, report = built
    source, databases = paths
    status, again = run_build(*
        ["ambiqt", "--source", str(source), "--databases", str(databases),
         "--out", str(tmp_path / "same"), "--seed", "7"]
    )  # fmt: skip
    assert status == 0
    assert {k: v for k, v in again.items() if k != "out"} == {
        k: v for k, v in report.items() if k != "out"
    }
    assert tree_bytes(tmp_path / "same") == tree_bytes(out)  # byte-identical
    status, other = run_build(*
        ["ambiqt", "--source", str(source), "--databases", str(databases),
         "--out", str(tmp_path / "other"), "--seed", "8"]
    )  # fmt: skip
    assert status == 0
    copied_7 = {
        r["avt_id"]: r["source"]["copied_column"] for r in read_jsonl(out / "records.jsonl")
    }
    copied_8 = {
        r["avt_id"]: r["source"]["copied_column"]
        for r in read_jsonl(tmp_path / "other" / "records.jsonl")
    }
    common = set(copied_7) & set(copied_8)
    assert any(copied_7[a] != copied_8[a] for a in common)


def test_default_out_registers_for_gym_make(paths, data_home):
    import gymnasium as gym

    import ambitab_gym  # noqa: F401 - registers the env ids

    source, databases = paths
    status, report = run_build(*["ambiqt", "--source", str(source), "--databases", str(databases)])
    assert status == 0
    assert Path(report["out"]) == (data_home / "corpora" / "ambiqt").resolve()
    env = gym.make("AmbiTab-AmbiQT-v0")
    try:
        assert env.unwrapped.corpus.origin == "built"
        assert len(env.unwrapped.corpus) == report["records"]
    finally:
        env.close()
