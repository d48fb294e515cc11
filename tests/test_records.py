"""Record loading: errors name the file, the line, the record id and the field."""

from __future__ import annotations

import json

import pytest
from factories import amb, make_record

from ambitab_gym.records import RecordError, dump_records, load_records

GOOD = {
    "id": "r1",
    "avt_id": "a1",
    "corpus": "demo",
    "split": "train",
    "spec": {"request": "List the top earners.", "database": "hr"},
    "ambiguities": [{"id": "top", "term": "top earners", "resolution": "three"}],
    "verification": {"database": "hr", "reference_sql": "SELECT 1"},
}


def write(tmp_path, *records, raw_lines=()):
    path = tmp_path / "records.jsonl"
    lines = [json.dumps(r) for r in records] + list(raw_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_round_trip(tmp_path):
    records = [make_record([amb("top", "top earners")])]
    path = tmp_path / "out.jsonl"
    dump_records(records, path)
    assert load_records(path) == records


def test_bad_field_names_file_line_record_and_field(tmp_path):
    bad = json.loads(json.dumps(GOOD)) | {"id": "r2"}
    bad["ambiguities"][0]["kind"] = "fuzzy"
    path = write(tmp_path, GOOD, bad)
    with pytest.raises(RecordError) as error:
        load_records(path)
    message = str(error.value)
    assert f"{path}:2" in message and "'r2'" in message and "ambiguities.0.kind" in message


def test_missing_required_field(tmp_path):
    bad = {k: v for k, v in GOOD.items() if k != "verification"}
    with pytest.raises(RecordError, match=r"records.jsonl:1 \(record 'r1'\): verification"):
        load_records(write(tmp_path, bad))


def test_invalid_json_names_line(tmp_path):
    with pytest.raises(RecordError, match=r"records.jsonl:2: invalid JSON"):
        load_records(write(tmp_path, GOOD, raw_lines=['{"id": ']))


def test_repeated_id(tmp_path):
    with pytest.raises(RecordError, match="'r1' is repeated"):
        load_records(write(tmp_path, GOOD, GOOD))


def test_repeated_ambiguity_id(tmp_path):
    bad = json.loads(json.dumps(GOOD))
    bad["ambiguities"].append(dict(bad["ambiguities"][0]))
    with pytest.raises(RecordError, match="ambiguity ids must be unique"):
        load_records(write(tmp_path, bad))


def test_unknown_field_and_version(tmp_path):
    with pytest.raises(RecordError, match="spec.sql"):
        load_records(write(tmp_path, GOOD | {"spec": GOOD["spec"] | {"sql": "SELECT 1"}}))
    with pytest.raises(RecordError, match="format version 7"):
        load_records(write(tmp_path, GOOD | {"format_version": 7}))


def test_counted_ambiguities_exclude_non_critical():
    record = make_record([amb("a", "top earners"), amb("b", "sorted", kind="non_critical")])
    assert record.m == 1 and [a.id for a in record.counted_ambiguities] == ["a"]
