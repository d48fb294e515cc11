"""TACO converter on a self-written TACO-Benchmark tree in upstream's exact layout
(tests/convert/taco_fixture.py). Outcomes and requests were worked out by hand from the fixture.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
import sqlglot
from convert_helpers import read_jsonl, run_build, tree_bytes
from taco_fixture import BEIJING_DB, CRASH_DB, EXPECTED, HOUSING_DB, NL, SINGLE, write_taco

from ambitab_gym.convert import BuildOptions, build_corpus
from ambitab_gym.convert.common import STOP_WORDS, find_term, term_problem
from ambitab_gym.convert.taco import swap_table
from ambitab_gym.oracles import OracleContext, deterministic_oracle
from ambitab_gym.records import parse_record
from ambitab_gym.validate import validate_corpus

#: words that name no withheld choice (function words and SQL keywords)
FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "as",
        "at",
        "by",
        "each",
        "for",
        "from",
        "given",
        "in",
        "is",
        "not",
        "of",
        "only",
        "or",
        "the",
        "then",
        "to",
        "using",
        "where",
        "with",
        "select",
        "table",
        "list",
        "find",
        "sorted",
    ]
)


def source_tree(tmp_path: Path) -> Path:
    root = tmp_path / "TACO-Benchmark"
    return root if root.exists() else write_taco(root)


def build(tmp_path: Path, name: str = "corpus", source: Path | None = None):
    source = source if source is not None else source_tree(tmp_path)
    status, report = run_build("taco", "--source", str(source), "--out", str(tmp_path / name))
    assert status == 0, report
    return tmp_path / name, report


def records_by_file(out: Path) -> dict[str, dict]:
    return {r["source"]["file"]: r for r in read_jsonl(out / "records.jsonl")}


def test_outcomes_per_query_file(tmp_path):
    out, report = build(tmp_path)
    dropped = {d["item"]: d["reason"] for d in read_jsonl(out / "dropped.jsonl")}
    assert dropped == {k: v for k, v in EXPECTED.items() if v != "kept"}
    assert set(records_by_file(out)) == {k for k, v in EXPECTED.items() if v == "kept"}
    assert report["records"] == 10 and report["avts"] == 8
    assert sum(report["dropped"].values()) == len(EXPECTED) - 10
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["oracle"] == "intent"
    assert manifest["provenance"]["avts_with_several_readings"] == 2
    # every query file read is an input, by its path in the upstream tree
    assert set(EXPECTED) <= set(manifest["provenance"]["inputs"])
    assert f"us/data/new_schema/{HOUSING_DB}_schema.json" in manifest["provenance"]["inputs"]


def test_fenced_and_truncated_sql_are_counted_drops_naming_the_field(tmp_path):
    out, report = build(tmp_path)
    drops = {d["item"]: d for d in read_jsonl(out / "dropped.jsonl")}
    fenced = drops[f"us/data/{NL}/{CRASH_DB}/generated_nl_query_9.json"]
    truncated = drops[f"us/data/{NL}/{CRASH_DB}/generated_nl_query_10.json"]
    assert fenced["reason"] == "fenced_sql" and "field 'sql'" in fenced["detail"]
    assert truncated["reason"] == "unparsable_sql"
    assert "field 'sql'" in truncated["detail"] and "TokenError" in truncated["detail"]
    assert report["dropped"]["fenced_sql"] == report["dropped"]["unparsable_sql"] == 1
    missing = drops[f"us/data/{NL}/{CRASH_DB}/generated_nl_query_12.json"]
    assert missing["detail"] == "field 'sql' is missing"
    # sqlglot itself raises on both: the converter must be what keeps the build alive
    for item in (fenced, truncated):
        path = source_tree(tmp_path) / item["item"]
        with pytest.raises(sqlglot.errors.SqlglotError):
            sqlglot.parse(json.loads(path.read_text())["sql"], read="sqlite")


def test_requests_and_withheld_choices(tmp_path):
    out, _ = build(tmp_path)
    records = records_by_file(out)
    q1 = records[f"us/data/{NL}/{CRASH_DB}/generated_nl_query_1.json"]
    assert q1["spec"]["request"] == (
        "Using the crashes table, find the number of records where county is Kent."
    )
    assert [(a["id"], a["term"], a["aliases"], a["resolution"]) for a in q1["ambiguities"]] == [
        ("table", "crashes table", ["crashes_2019", "crashes_2020"], "the table crashes_2019")
    ]
    assert q1["source"]["term_origin"] == {"table": "shared_table_name_words"}
    # Essex is not in the query's own question: withheld; 1 is stated
    q2 = records[f"us/data/{NL}/{CRASH_DB}/generated_nl_query_2.json"]
    assert q2["spec"]["request"] == (
        "Using the crashes table, list the month where county is the given county "
        "and injuries is greater than 1."
    )
    assert [(a["id"], a["term"], a["sql_snippet"]) for a in q2["ambiguities"]] == [
        ("table", "crashes table", "FROM crashes_2020"),
        ("value_county", "given county", "county = 'Essex'"),
    ]
    assert q2["source"]["term_origin"]["value_county"] == "withheld_value_phrase"
    # no NL fields upstream: every literal is stated, only the table is withheld
    q3 = records[f"us/data/{SINGLE}/{CRASH_DB}/generated_nl_query_3.json"]
    assert q3["spec"]["request"] == (
        "Using the crashes table, list the month where county is Essex and injuries is at least 1."
    )
    assert q3["source"]["stated_from"] == "none" and len(q3["ambiguities"]) == 1
    homes = records[f"us/data/{SINGLE}/{HOUSING_DB}/generated_nl_query_1.json"]
    assert homes["spec"]["request"] == (
        "Using the home sales table, find the average price where city is Dover."
    )
    assert homes["verification"]["database"] == homes["spec"]["database"]
    assert re.fullmatch(r"[a-z0-9_]+", homes["spec"]["database"])
    assert homes["source"]["upstream_database"] == HOUSING_DB
    # table names share nothing: the words their schema comments share name them
    ledger = records[f"us/data/{SINGLE}/{HOUSING_DB}/generated_nl_query_2.json"]
    assert ledger["spec"]["request"] == (
        "Using the budget ledger table, list the amount where item is paper."
    )
    assert ledger["source"]["term_origin"] == {"table": "shared_table_comment_words"}
    assert ledger["ambiguities"][0]["aliases"] == ["north_ledger", "south_register"]
    # upstream lists two tables for these single-table queries
    assert len(q1["source"]["upstream_tables"]) == 2
    for record in records.values():
        assert not re.search(r"crashes_20|Home Sales 20|north_|south_", record["spec"]["request"])


def test_each_term_is_a_request_phrase_that_the_deterministic_oracle_credits(tmp_path):
    out, _ = build(tmp_path)
    oracle = deterministic_oracle("intent")
    checked = 0
    for line in read_jsonl(out / "records.jsonl"):
        record = parse_record(line)
        request = record.spec.request
        for ambiguity in record.ambiguities:
            span = find_term(request, ambiguity.term)
            assert span is not None and span.phrase == ambiguity.term
            words = ambiguity.term.lower().split()
            assert len(words) >= 2 and not set(words) <= FUNCTION_WORDS, ambiguity.term
            assert term_problem(ambiguity.term) is None
            assert not any(name in request for name in ambiguity.aliases)
            for question in (
                f"Which {ambiguity.term} do you mean?",
                f"When you say '{ambiguity.term}', what exactly do you mean?",
            ):
                credits, reply = oracle.answer(question, OracleContext(record))
                assert credits == {ambiguity.id}, (question, credits)
                assert reply == ambiguity.response
            checked += 1
        for word in sorted(set(request.lower().replace(",", " ").replace(".", " ").split())):
            if word in FUNCTION_WORDS | STOP_WORDS:
                credits, _ = oracle.answer(f"What do you mean by '{word}'?", OracleContext(record))
                assert credits == frozenset(), (record.id, word)
    assert checked == 13


def test_no_two_avts_share_a_request_on_one_database(tmp_path):
    out, _ = build(tmp_path)
    records = read_jsonl(out / "records.jsonl")
    avt_of: dict[tuple[str, str], str] = {}
    for record in records:
        key = (record["spec"]["request"], record["spec"]["database"])
        assert avt_of.setdefault(key, record["avt_id"]) == record["avt_id"], key
    # queries whose requests coincide became the readings of one AVT, differing in the table
    by_file = records_by_file(out)
    first = by_file[f"us/data/{NL}/{CRASH_DB}/generated_nl_query_1.json"]
    second = by_file[f"us/data/{SINGLE}/{CRASH_DB}/generated_nl_query_2.json"]
    assert first["avt_id"] == second["avt_id"]
    assert [first["source"]["avt_readings"], second["source"]["avt_readings"]] == [2, 2]
    assert {first["ambiguities"][0]["resolution"], second["ambiguities"][0]["resolution"]} == {
        "the table crashes_2019",
        "the table crashes_2020",
    }
    assert len({r["avt_id"] for r in records}) == len(avt_of) == 8
    assert validate_corpus(out) == []


def test_kept_queries_have_a_result_distinct_table_alternative(tmp_path):
    out, _ = build(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    for record in read_jsonl(out / "records.jsonl"):
        db = out / manifest["databases"][record["verification"]["database"]]["file"]
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        sql = record["verification"]["reference_sql"]
        table = record["source"]["table"]
        rows = set(connection.execute(sql).fetchall())
        tree = sqlglot.parse_one(sql, read="sqlite")
        others = [
            set(connection.execute(swap_table(tree, table, other)).fetchall())
            for other in record["source"]["distinct_alternatives"]
        ]
        connection.close()
        assert rows and others and all(o != rows for o in others)


def test_second_build_is_byte_identical(tmp_path):
    first, _ = build(tmp_path, "one")
    second, _ = build(tmp_path, "two")
    assert tree_bytes(first) == tree_bytes(second)


def test_a_split_folder_as_source_converts_the_same_queries(tmp_path):
    whole, _ = build(tmp_path, "whole")
    us_only, report = build(tmp_path, "us_only", source=source_tree(tmp_path) / "us")
    assert tree_bytes(whole)["records.jsonl"] == tree_bytes(us_only)["records.jsonl"]
    assert "split_not_converted" not in report["dropped"]


def test_beijing_is_converted_when_asked(tmp_path):
    options = BuildOptions(source=source_tree(tmp_path), extra={"taco_splits": ["us", "beijing"]})
    report = build_corpus("taco", options, out=tmp_path / "both")
    assert report.ok and report.records == 11, report.as_dict()
    beijing = [r for r in read_jsonl(tmp_path / "both" / "records.jsonl") if r["split"] != "all"]
    assert len(beijing) == 1
    record = beijing[0]
    assert record["split"] == "beijing" and record["source"]["upstream_database"] == BEIJING_DB
    assert record["source"]["file"].endswith("generated_sql_statement_1.json")
    assert record["spec"]["request"] == "Using the bus table, list the riders where line is L1."
    assert record["source"]["stated_from"] == "none"


def test_a_folder_that_is_not_a_taco_tree_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    status, report = run_build(
        "taco", "--source", str(tmp_path / "empty"), "--out", str(tmp_path / "x")
    )
    assert status == 1 and "no TACO split" in report["error"]
