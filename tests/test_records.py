"""Record loading: errors name the file, the line, the record id and the field."""

from __future__ import annotations

import json

import pytest
from factories import amb, make_record
from tiny_corpus import write_tiny_corpus

from ambitab_gym.corpora import load_corpus
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


# -- loader robustness (issue 11) -------------------------------------------------------------------


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "records.jsonl"
    second = json.dumps(GOOD | {"id": "r2"}).replace("top earners", "top \xe9arners")
    path.write_bytes((json.dumps(GOOD) + "\n").encode() + second.encode("latin-1") + b"\n")
    with pytest.raises(RecordError) as error:
        load_records(path)
    message = str(error.value)
    assert message.startswith(f"{path}:2: not valid UTF-8 (byte 0xe9 at byte ")
    assert "save the file as UTF-8" in message


def test_blank_line_in_the_middle_is_an_error_naming_file_and_line(tmp_path):
    path = write(tmp_path, GOOD, raw_lines=["   ", json.dumps(GOOD | {"id": "r2"})])
    with pytest.raises(RecordError) as error:
        load_records(path)
    assert str(error.value) == (
        f"{path}:2: blank line; every line of a records file must hold one record (remove the line)"
    )


def test_blank_line_at_the_end_is_an_error_but_one_final_newline_is_fine(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    assert [r.id for r in load_records(path)] == ["r1"]
    path.write_text(json.dumps(GOOD), encoding="utf-8")  # no final newline
    assert [r.id for r in load_records(path)] == ["r1"]
    path.write_text(json.dumps(GOOD) + "\n\n", encoding="utf-8")
    with pytest.raises(RecordError, match=r"records.jsonl:2: blank line"):
        load_records(path)


def test_byte_order_mark_and_crlf_are_accepted(tmp_path):
    path = tmp_path / "records.jsonl"
    lines = [json.dumps(GOOD), json.dumps(GOOD | {"id": "r2"})]
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    assert [r.id for r in load_records(path)] == ["r1", "r2"]


def test_huge_integer_and_deep_nesting_name_the_line(tmp_path):
    huge = json.dumps(GOOD)[:-1] + ', "source": {"n": ' + "9" * 5000 + "}}"
    with pytest.raises(RecordError, match=r"records.jsonl:2: invalid JSON \(Exceeds the limit"):
        load_records(write(tmp_path, GOOD, raw_lines=[huge]))
    deep = json.dumps(GOOD)[:-1] + ', "source": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(RecordError, match=r"records.jsonl:2: invalid JSON \(nested too deeply\)"):
        load_records(write(tmp_path, GOOD, raw_lines=[deep]))


@pytest.mark.parametrize("field", ["spec", "verification"])
def test_unknown_database_fails_at_corpus_load(tmp_path, field):
    folder = write_tiny_corpus(tmp_path / "tiny")
    lines = (folder / "records.jsonl").read_text().splitlines()
    third = json.loads(lines[2])
    third[field]["database"] = "payroll"
    lines[2] = json.dumps(third)
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError) as error:
        load_corpus(folder)
    assert str(error.value) == (
        f"{folder.resolve() / 'records.jsonl'}:3 (record {third['id']!r}): {field}.database: "
        "unknown database 'payroll'; the manifest lists ['hr'] - add it to manifest.json "
        "'databases' or correct the record"
    )
