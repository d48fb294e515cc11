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
from convert_helpers import occurs, oracle_credits, read_jsonl, run_build, tree_bytes
from taco_fixture import BEIJING_DB, CRASH_DB, EXPECTED, HOUSING_DB, NL, SINGLE, write_taco

from ambitab_gym.convert import BuildOptions, build_corpus
from ambitab_gym.convert.common import STOP_WORDS, find_term, term_problem
from ambitab_gym.convert.taco import swap_table, table_aliases
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


#: the cues of per-year tables, written by hand: how a person asks which year's table
YEARS = ["year", "latest", "most recent", "newest", "earliest"]


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
        (
            "table",
            "crashes table",
            ["2019", "2020", "crashes 2019", "crashes 2020", *YEARS],
            "the table crashes_2019",
        )
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
    # "ledger" tells the tables apart by name but the request says it; the comments differ
    # in "north"/"south"
    assert ledger["ambiguities"][0]["aliases"] == [
        "north", "south", "register", "north ledger", "south register",
    ]  # fmt: skip
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
            # aliases are words the request does not use, but for the head of the term
            # ("county" of "given county")
            for name in ambiguity.aliases:
                assert not occurs(name, request) or name in ambiguity.term.split(), name
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


def test_aliases_name_what_tells_the_readings_apart(tmp_path):
    out, _ = build(tmp_path)
    records = records_by_file(out)
    # worked out by hand: crashes_2019/crashes_2020 differ in the year (names and comments);
    # the withheld values are Kent (county) and 1 (injuries; 0 and 1 are never aliases)
    q14 = records[f"us/data/{NL}/{CRASH_DB}/generated_nl_query_14.json"]
    assert [(a["id"], a["term"], a["aliases"]) for a in q14["ambiguities"]] == [
        ("table", "crashes table", ["2019", "2020", "crashes 2019", "crashes 2020", *YEARS]),
        ("value_county", "given county", ["county", "Kent"]),
        ("value_injuries", "given injuries", ["injuries"]),
    ]
    q2 = records[f"us/data/{NL}/{CRASH_DB}/generated_nl_query_2.json"]
    assert q2["ambiguities"][1]["aliases"] == ["county", "Essex"]
    homes = records[f"us/data/{SINGLE}/{HOUSING_DB}/generated_nl_query_1.json"]
    assert homes["ambiguities"][0]["aliases"] == [
        "2021", "2022", "home sales 2021", "home sales 2022", *YEARS,
    ]  # fmt: skip
    # the two readings of one AVT carry the same names
    first = records[f"us/data/{SINGLE}/{CRASH_DB}/generated_nl_query_3.json"]
    second = records[f"us/data/{SINGLE}/{CRASH_DB}/generated_nl_query_4.json"]
    assert first["avt_id"] == second["avt_id"]
    names = [
        [(a["id"], a["term"], a["aliases"]) for a in r["ambiguities"]] for r in (first, second)
    ]
    aliases = ["2019", "2020", "crashes 2019", "crashes 2020", *YEARS]
    assert names == [[("table", "crashes table", aliases)]] * 2


#: (query file, question, credited ambiguity ids) - natural clarifying questions, written from
#: the fixture's tables without looking at the registered names, and restatements of the request
QUESTIONS = [
    (f"{NL}/{CRASH_DB}/generated_nl_query_1.json",
     "The 2019 crashes or the 2020 crashes?", {"table"}),
    (f"{NL}/{CRASH_DB}/generated_nl_query_1.json",
     "Should I read crashes_2019 or crashes_2020?", {"table"}),
    (f"{NL}/{CRASH_DB}/generated_nl_query_1.json",
     "Using the crashes table, find the number of records where county is Kent?", set()),
    (f"{NL}/{CRASH_DB}/generated_nl_query_14.json", "Which county do you mean?", {"value_county"}),
    (f"{NL}/{CRASH_DB}/generated_nl_query_14.json", "Is it Kent?", {"value_county"}),
    (f"{NL}/{CRASH_DB}/generated_nl_query_14.json",
     "Which year: 2019 or 2020?", {"table"}),
    (f"{NL}/{CRASH_DB}/generated_nl_query_13.json", "Do you want the latest figures?", {"table"}),
    (f"{NL}/{CRASH_DB}/generated_nl_query_13.json", "For which year?", {"table"}),
    (f"{NL}/{CRASH_DB}/generated_nl_query_14.json",
     "Using the crashes table, list the month where county is the given county?", set()),
    (f"{SINGLE}/{HOUSING_DB}/generated_nl_query_1.json",
     "Sales from 2021 or from 2022?", {"table"}),
    (f"{SINGLE}/{HOUSING_DB}/generated_nl_query_2.json",
     "The north office's ledger or the south office's?", {"table"}),
]  # fmt: skip


def test_natural_questions_are_credited_and_restatements_are_not(tmp_path):
    out, _ = build(tmp_path)
    records = records_by_file(out)
    for file, question, credited in QUESTIONS:
        record = records[f"us/data/{file}"]
        assert oracle_credits(out, record["id"], question) == credited, (file, question)


def test_table_aliases_keep_non_latin_names_as_written():
    # TACO's Beijing tables have Chinese names: the matcher finds them as written
    tables = ["北京公交_2019", "北京公交_2020"]
    request = "Using the 北京公交 table, list the riders."
    assert table_aliases(tables, {}, request) == [
        "2019", "2020", "北京公交_2019", "北京公交_2020", *YEARS,
    ]  # fmt: skip
    comments = {"bus_2019": "Bus ridership 2019", "bus_2020": "Bus ridership 2020"}
    assert table_aliases(["bus_2019", "bus_2020"], comments, "Using the bus table, list it.") == [
        "2019", "2020", "bus 2019", "bus 2020", *YEARS,
    ]  # fmt: skip
    # a request that says "year" keeps its own word out of the cues
    assert table_aliases(["t_2019", "t_2020"], {}, "Using the t table, list the year.") == [
        "2019", "2020", "t 2019", "t 2020", "latest", "most recent", "newest", "earliest",
    ]  # fmt: skip


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


def test_the_repository_root_holding_the_checkout_is_accepted(tmp_path):
    """A clone of TACO's repository holds the checkout as ``TACO-Benchmark/``."""
    whole, _ = build(tmp_path, "whole")
    root = tmp_path / "clone"
    write_taco(root / "TACO-Benchmark")
    from_root, report = build(tmp_path, "from_root", source=root)
    assert tree_bytes(whole)["records.jsonl"] == tree_bytes(from_root)["records.jsonl"]
    assert report["records"] == 10


def test_a_parse_error_is_recorded_without_terminal_codes(tmp_path):
    """sqlglot underlines the failing token with ANSI codes; dropped.jsonl holds plain text."""
    root = source_tree(tmp_path)
    path = root / "us" / "data" / NL / CRASH_DB / "generated_nl_query_99.json"
    path.write_text(json.dumps({"sql": "SELECT FROM WHERE (", "results": [[1]]}), "utf-8")
    with pytest.raises(sqlglot.errors.ParseError, match="\x1b\\["):  # sqlglot's own message
        sqlglot.parse("SELECT FROM WHERE (", read="sqlite")
    out, _ = build(tmp_path, source=root)
    text = (out / "dropped.jsonl").read_text("utf-8")
    assert "\x1b" not in text
    drop = {d["item"]: d for d in read_jsonl(out / "dropped.jsonl")}[
        f"us/data/{NL}/{CRASH_DB}/generated_nl_query_99.json"
    ]
    assert drop["reason"] == "unparsable_sql" and "SELECT FROM WHERE (" in drop["detail"]
