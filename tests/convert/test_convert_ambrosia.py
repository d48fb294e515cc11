"""Ambrosia converter on a self-written file in Ambrosia's CSV format.

Expected results were worked out by hand from the fixture's dumps (tests/convert/
ambrosia_fixture.py) and are checked with plain sqlite3 on the built database files.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections import Counter

from ambrosia_fixture import COLLECTIVE_SQL, write_ambrosia_csv
from convert_helpers import occurs, oracle_credits, read_jsonl, run_build, tree_bytes

from ambitab_gym.convert.ambrosia import ambiguity_term, assign_splits
from ambitab_gym.convert.common import Item
from ambitab_gym.records import parse_record
from ambitab_gym.validate import validate_corpus

COMMUTE = "Show the commute time for the different neighborhoods, sorted by name."
WRITERS = "List the respective birth years of the writers born in Edinburgh."
WHERE = "Where is the Jazz Nights festival held?"
BANK = "What transaction types do customers have on each bank statement?"
SALARY = "List the engineers and managers whose salary is $60,000. Show them in one table."
DAIRY = (
    "Show the cheeses and yogurts with a best before date of 10.11.2018. Show them in one table."
)
STAFF = "List the Spanish-speaking servers and chefs. Show them in one table."


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


def test_one_record_per_reading_with_terms_from_the_readings(tmp_path):
    out, report = build(tmp_path)
    assert report["records"] == 27 and report["avts"] == report["retained_items"] == 12
    assert report["dropped"] == {
        "database_build_failed": 1,
        "duplicate_result": 1,
        "few_shot_example": 1,
        "fewer_than_two_readings": 1,
        "no_term_in_request": 1,
    }
    records = read_jsonl(out / "records.jsonl")
    by_request = {}
    for record in records:
        by_request.setdefault(record["spec"]["request"], []).append(record)
    # attachment requests carry the loaders' suffix exactly once, with or without it upstream
    assert {q: len(rs) for q, rs in by_request.items()} == {
        "Which classes does every gym offer?": 2,
        "What films does each streaming service offer?": 2,
        "List parks and museums with a cafe. Show them in one table.": 2,
        "List hotels and restaurants with a pool. Show them in one table.": 2,
        "What's the most popular shop? Please list them.": 2,
        COMMUTE: 3,
        WRITERS: 3,
        WHERE: 3,
        BANK: 2,
        SALARY: 2,
        DAIRY: 2,
        STAFF: 2,
    }
    terms = {q: {r["ambiguities"][0]["term"] for r in rs} for q, rs in by_request.items()}
    assert terms == {
        "Which classes does every gym offer?": {"every gym"},
        "What films does each streaming service offer?": {"each streaming service"},
        "List parks and museums with a cafe. Show them in one table.": {"with a cafe"},
        "List hotels and restaurants with a pool. Show them in one table.": {"with a pool"},
        "What's the most popular shop? Please list them.": {"popular"},
        # the vague word the readings specialise, not the paraphrased "different"/"sorted"
        COMMUTE: {"commute time"},
        # the vague word the readings replace, not the dropped "respective"
        WRITERS: {"writers"},
        # a wh-word ambiguity: the wh-phrase with its noun
        WHERE: {"Where is the Jazz Nights festival"},
        # the whole compound noun, though an auxiliary comes before and the clause ends after
        BANK: {"each bank statement"},
        # never cut inside a number or a date
        SALARY: {"whose salary is $60,000"},
        DAIRY: {"with a best before date of 10.11.2018"},
        # a pre-modifier
        STAFF: {"Spanish-speaking"},
    }
    origins = {r["source"]["ambig_type"]: r["source"]["term_origin"] for r in records}
    assert origins == {
        "scope": {"scope": "question_diff"},
        "attachment": {"attachment": "question_pattern"},
        "vague": {"vague": "question_diff"},
    }
    cafe = by_request["List parks and museums with a cafe. Show them in one table."]
    # the reading's own question is the resolution, without the suffix
    assert [r["ambiguities"][0]["resolution"] for r in cafe] == [
        "List parks with a cafe and museums with a cafe.",
        "List all parks, and the museums that have a cafe.",
    ]
    gym = by_request["Which classes does every gym offer?"]
    assert [r["ambiguities"][0]["resolution"] for r in gym] == [
        "Which classes are offered by all gyms?",
        "For each gym, which classes does it offer?",
    ]
    assert all(r["ambiguities"][0]["resolution"] in r["ambiguities"][0]["response"] for r in gym)
    for record in records:  # the reading's own question never reaches the public spec
        assert record["ambiguities"][0]["resolution"] not in json.dumps(record["spec"])
        assert record["spec"]["request"].count("Show them in one table.") <= 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["oracle"] == "intent" and manifest["engine"] == "sqlite"
    assert manifest["counts"]["terms"] == {
        "counted_ambiguities": 12,
        "in_request": 12,
        "share_in_request": 1.0,
        "origins": {"question_diff": 7, "question_pattern": 5},
    }
    assert report["terms"] == manifest["counts"]["terms"]
    dropped = {d["item"]: d["reason"] for d in read_jsonl(out / "dropped.jsonl")}
    assert dropped == {
        "ambrosia.csv:row16": "fewer_than_two_readings",
        "ambrosia.csv:row18": "duplicate_result",
        "ambrosia.csv:row21": "database_build_failed",
        "ambrosia.csv:row48": "no_term_in_request",
        "ambrosia.csv:row51": "few_shot_example",
    }


def test_drops_are_reported_per_ambiguity_type(tmp_path):
    _, report = build(tmp_path)
    # the partition's ambiguous questions per type (few-shot rows are not in it), with what the
    # conversion and the build checks dropped of them: the vague "busy shops" item loses a
    # reading whose result equals its twin's (duplicate_result), leaving one reading
    assert report["dropped_by_type"] == {
        "attachment": {"items": 5, "dropped": {}, "share_dropped": {}},
        "scope": {
            "items": 4,
            "dropped": {"no_term_in_request": 1},
            "share_dropped": {"no_term_in_request": 0.25},
        },
        "vague": {
            "items": 7,
            "dropped": {
                "database_build_failed": 1,
                "duplicate_result": 1,
                "fewer_than_two_readings": 1,
            },
            "share_dropped": {
                "database_build_failed": 0.1429,
                "duplicate_result": 0.1429,
                "fewer_than_two_readings": 0.1429,
            },
        },
    }


def test_aliases_name_the_readings(tmp_path):
    out, _ = build(tmp_path)
    aliases = {
        r["spec"]["request"]: {a.lower() for a in r["ambiguities"][0]["aliases"]}
        for r in read_jsonl(out / "records.jsonl")
    }
    # vague: the readings' columns and tables in natural form, their distinguishing words
    assert {"mean", "median", "mean commute time", "median commute time"} <= aliases[COMMUTE]
    assert {"novelist", "playwright"} <= aliases[WRITERS]
    assert {"city", "venue"} <= aliases[WHERE]
    assert {"customers", "rating"} <= aliases["What's the most popular shop? Please list them."]
    # scope: the cues with the quantified noun
    assert {"every bank statement", "per bank statement", "all bank statements", "in common",
            "separately"} <= aliases[BANK]  # fmt: skip
    assert {"each gym", "all gyms", "in common"} <= aliases["Which classes does every gym offer?"]
    # attachment: the modifier, its content words and the two attachments; a bare noun is no
    # alias (a question about the engineers alone asks nothing about the modifier)
    assert {"both engineers and managers", "only the managers", "salary"} <= aliases[SALARY]
    assert {"both cheeses and yogurts", "only the yogurts"} <= aliases[DAIRY]
    assert {"both servers and chefs", "only the chefs"} <= aliases[STAFF]
    for bare in ("engineers", "managers", "cheeses", "yogurts", "servers", "chefs"):
        assert all(bare not in names for names in aliases.values())
    for request, names in aliases.items():
        assert not names & {"id", "name", "the", "each", "both"}, request


# Questions a person would ask about each ambiguity (written from the fixture, before the
# converter ran), and restatements or off-topic questions that must earn nothing.
CREDITED = {
    COMMUTE: [
        "Do you want the mean or the median commute time?",
        "Should I use the median?",
        "Mean or median?",
        "What do you mean by commute time?",
    ],
    WRITERS: [
        "Do you mean novelists or playwrights?",
        "Which kind of writer: novelist, playwright or both?",
        "Should playwrights count as writers?",
    ],
    WHERE: [
        "Do you want the city or the venue?",
        "Which venue do you mean?",
        "By where, do you mean the city?",
    ],
    BANK: [
        "Per bank statement, or only the types common to all statements?",
        "Do you want the transaction types for every bank statement separately?",
        "Should the types be the ones shared by all bank statements?",
    ],
    SALARY: [
        "Does the salary of $60,000 apply to the engineers too, or only to the managers?",
        "Only the managers, or both?",
    ],
    DAIRY: [
        "Does the best before date apply to the cheeses as well?",
        "Both, or only the yogurts?",
    ],
    STAFF: [
        "Should the chefs be Spanish-speaking too, or only the servers?",
        "Do the chefs also need to speak Spanish?",
    ],
}
# Natural questions made of request words and a cue ("should", "also"): not a restatement.
CUED = {SALARY: ["Should the engineers also have a salary of $60,000?"]}
NOT_CREDITED = {
    COMMUTE: [
        "Show the commute time for the different neighborhoods, sorted by name?",
        "How should the list be sorted?",
    ],
    WRITERS: [
        "List the respective birth years of the writers born in Edinburgh?",
        "What does respective mean here?",
    ],
    WHERE: ["Where is the Jazz Nights festival held?"],
    BANK: ["What transaction types do customers have on each bank statement?"],
    SALARY: ["List the engineers and managers whose salary is $60,000?"],
    DAIRY: ["Show the cheeses and yogurts with a best before date of 10.11.2018?"],
    STAFF: ["List the Spanish-speaking servers and chefs?"],
}


def test_natural_questions_are_credited_and_restatements_are_not(tmp_path):
    out, _ = build(tmp_path)
    records = read_jsonl(out / "records.jsonl")
    first = {}
    for record in records:
        first.setdefault(record["spec"]["request"], record)
    for request, questions in CREDITED.items():
        record = first[request]
        kind = record["ambiguities"][0]["id"]
        for question in questions:
            assert oracle_credits(out, record["id"], question) == {kind}, (request, question)
    for request, questions in NOT_CREDITED.items():
        for question in questions:
            assert oracle_credits(out, first[request]["id"], question) == frozenset(), question


def test_built_corpus_passes_validation_and_terms_occur(tmp_path):
    out, _ = build(tmp_path)
    assert validate_corpus(out) == []
    for record in read_jsonl(out / "records.jsonl"):
        for ambiguity in record["ambiguities"]:
            assert occurs(ambiguity["term"], record["spec"]["request"]), ambiguity["term"]


def test_a_natural_question_naming_the_phrase_gets_the_credit(tmp_path):
    out, _ = build(tmp_path)
    records = {r["spec"]["request"]: r["id"] for r in read_jsonl(out / "records.jsonl")}
    films = records["What films does each streaming service offer?"]
    assert oracle_credits(out, films, "What do you mean by 'each streaming service'?") == {"scope"}
    # the request read back with "Do you want" is a restatement, not a question (issue 28)
    assert oracle_credits(out, films, "Do you want the films of each streaming service?") == (
        frozenset()
    )
    cafe = records["List parks and museums with a cafe. Show them in one table."]
    assert oracle_credits(out, cafe, "Does 'with a cafe' apply to the parks too?") == {"attachment"}
    popular = records["What's the most popular shop? Please list them."]
    assert oracle_credits(out, popular, "What do you mean by popular?") == {"vague"}
    # function words and the loaders' instruction name nothing
    assert oracle_credits(out, films, "What do you mean by 'each'?") == frozenset()
    assert oracle_credits(out, films, "What do you mean by 'streaming'?") == frozenset()
    assert oracle_credits(out, cafe, "What do you mean by 'Show them in one table'?") == frozenset()
    assert oracle_credits(out, popular, "What do you mean by 'What's'?") == frozenset()
    assert oracle_credits(out, popular, "Please elaborate.") == frozenset()


def test_official_and_resplit_split_labels(tmp_path):
    source = write_ambrosia_csv(tmp_path / "upstream")
    with source.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    # a re-split: the gym rows are "validation", the streaming rows "train", the hotel rows
    # carry an unknown label; the few-shot rows keep the official "few_shot_examples"
    for row in rows:
        if "gym" in row["db_file"]:
            row["split"] = "validation"
        elif "streaming" in row["db_file"]:
            row["split"] = "train"
        elif "hotels" in row["db_file"]:
            row["split"] = "holdout"
    with source.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    status, report = run_build("ambrosia", "--source", str(source), "--out", str(tmp_path / "c"))
    assert status == 0, report
    assert report["dropped"]["few_shot_example"] == 1
    assert report["dropped"]["unknown_split"] == 1
    records = read_jsonl(tmp_path / "c" / "records.jsonl")
    upstream_splits = {r["spec"]["database"]: r["source"]["upstream_split"] for r in records}
    assert upstream_splits["gyms"] == "validation" and upstream_splits["streaming"] == "train"
    assert "hotels" not in upstream_splits
    few_shot = "Which shops does every customer like?"
    assert not any(few_shot in r["spec"]["request"] for r in records)  # few-shot excluded


def test_a_dump_that_builds_no_table_is_dropped_not_fatal(tmp_path):
    out, _ = build(tmp_path)
    (drop,) = [
        d for d in read_jsonl(out / "dropped.jsonl") if d["reason"] == "database_build_failed"
    ]
    assert drop["item"] == "ambrosia.csv:row21" and "legacy" in drop["detail"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert "legacy" not in manifest["databases"]
    assert manifest["provenance"]["failed_dumps"] == 1


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
    for readings in results.values():  # every two readings of an item differ
        assert all(a != b for i, a in enumerate(readings) for b in readings[i + 1 :])


def test_second_build_is_byte_identical(tmp_path):
    first, _ = build(tmp_path, "one")
    second, _ = build(tmp_path, "two")
    assert tree_bytes(first) == tree_bytes(second)


def test_ambiguity_terms():
    readings = ["What activities does each club run?", "What activities do all clubs run?"]
    assert ambiguity_term("What activities does each club run?", "scope", readings).term == (
        "each club"
    )
    choice = ambiguity_term(
        "Show cafes and bakeries that open on Sunday. Show them in one table.", "attachment", []
    )
    assert (choice.term, choice.origin) == ("that open on Sunday", "question_pattern")
    readings = ["Which trails are longer than 10 km?", "Which trails climb more than 500 m?"]
    assert ambiguity_term("Which trails are hard?", "vague", readings).term == "hard"
    # "What's", "Please" and the instruction are never the term
    readings = ["Please list the trails longer than 10 km.", "Please list the steep trails."]
    assert ambiguity_term("What's a hard trail? Please list them.", "vague", readings).term == (
        "hard"
    )
    assert ambiguity_term("Please list them. Show them in one table.", "vague", []) is None


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


def test_a_row_with_empty_fields_is_a_counted_drop(tmp_path):
    source = write_ambrosia_csv(tmp_path / "upstream")
    with source.open("a", newline="", encoding="utf-8") as handle:
        handle.write('"Which gyms are big?",,,vague\n')  # a short row: db_file, dump, ... missing
    status, report = run_build("ambrosia", "--source", str(source), "--out", str(tmp_path / "c"))
    assert status == 0, report
    assert report["dropped"]["malformed_item"] == 1
    (drop,) = [
        d for d in read_jsonl(tmp_path / "c" / "dropped.jsonl") if d["reason"] == "malformed_item"
    ]
    assert drop["item"] == "ambrosia.csv:row54" and "db_file" in drop["detail"]


def test_natural_questions_with_only_request_words_and_a_cue_are_credited(tmp_path):
    out, _ = build(tmp_path)
    first = {}
    for record in read_jsonl(out / "records.jsonl"):
        first.setdefault(record["spec"]["request"], record)
    for request, questions in CUED.items():
        for question in questions:
            assert oracle_credits(out, first[request]["id"], question) != frozenset(), question
