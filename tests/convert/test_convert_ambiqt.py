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
from convert_helpers import occurs, oracle_credits, read_jsonl, run_build, tree_bytes, upstream

from ambitab_gym.validate import validate_corpus

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
    assert set(report) == {
        "corpus", "out", "records", "avts", "retained_items", "dropped", "terms"
    }  # fmt: skip
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


# -- terms: the question's own words -----------------------------------------------------------


def test_built_corpus_passes_validation_and_every_term_occurs(built):
    out, report = built
    assert validate_corpus(out) == []
    records = read_jsonl(out / "records.jsonl")
    for record in records:
        (ambiguity,) = record["ambiguities"]
        assert occurs(ambiguity["term"], record["spec"]["request"]), record["id"]
        assert record["source"]["term_origin"] == {ambiguity["id"]: ambiguity_origin(record)}
    terms = report["terms"]
    assert terms["counted_ambiguities"] == report["avts"] == terms["in_request"]
    assert terms["share_in_request"] == 1.0
    assert sum(terms["origins"].values()) == report["avts"]
    assert set(terms["origins"]) <= {"column_name", "synonym"}


def ambiguity_origin(record: dict) -> str:
    return next(iter(record["source"]["term_origin"].values()))


def by_question(out: Path, question: str, column: str) -> dict:
    (record,) = [
        r
        for r in read_jsonl(out / "records.jsonl")
        if r["spec"]["request"] == question and r["source"]["column"] == column
        and r["id"].endswith("-1")
    ]  # fmt: skip
    return record


def test_hand_checked_terms_name_the_column_not_the_table(built):
    out, _ = built
    # contestant_name: the question says "names", the table noun "contestants" is not the term
    record = by_question(
        out,
        "What are the names of the contestants whose names are not 'Jessie Alloway'",
        "contestant_name",
    )
    assert record["ambiguities"][0]["term"] == "names"
    assert "contestant name" in record["ambiguities"][0]["aliases"]
    # Pets.weight: the question only says "weigh" (a shared stem); the column is an alias
    record = by_question(out, "How much does the youngest dog weigh?", "weight")
    assert (record["ambiguities"][0]["term"], record["ambiguities"][0]["aliases"]) == (
        "weigh", ["mass", "body weight", "weight"],
    )  # fmt: skip
    # VOTES.created: the whole phrase of the question, not the column name it never uses
    question = "What are the distinct states and create time of all votes?"
    assert by_question(out, question, "created")["ambiguities"][0]["term"] == "create time"
    # Student.Sex: the question uses AmbiQT's synonym "gender"
    question = "Find the first name and gender of student who have more than one pet."
    record = by_question(out, question, "Sex")
    assert record["ambiguities"][0]["term"] == "gender"
    assert record["source"]["term_origin"] == {"column_sex": "synonym"}


def test_a_natural_question_naming_the_phrase_gets_the_credit(built):
    out, _ = built
    record = by_question(
        out,
        "What are the names of the contestants whose names are not 'Jessie Alloway'",
        "contestant_name",
    )
    ident = record["ambiguities"][0]["id"]
    assert oracle_credits(out, record["id"], "Which names do you mean?") == {ident}
    assert oracle_credits(out, record["id"], "What do you mean by 'names'?") == {ident}
    assert oracle_credits(out, record["id"], "What do you mean by 'the'?") == frozenset()
    assert oracle_credits(out, record["id"], "What do you mean by 'of'?") == frozenset()
    record = by_question(out, "How much does the youngest dog weigh?", "weight")
    assert oracle_credits(out, record["id"], "How should I measure the weight?") == {
        "column_weight"
    }


# -- aliases: the words that tell the two synonym readings apart ------------------------------

#: validation.json item -> (column, term, aliases), worked out by hand from the item's synonyms
#: (extra_map), Spider's natural column name and the request: the synonyms in natural form, the
#: original column's name, the term's head unless generic or a word of another column's name
HAND_CHECKED = {
    # "Show name, country, age for all singers ordered by age ..." (age -> years_old/birthdate)
    0: ("Age", "age", ["years old", "birthdate"]),
    # "Show the name and the release year of the song ...": the head "year" is also concert.Year
    8: ("Song_release_year", "release year",
        ["track release year", "composition release year", "song release year"]),
    # "Show the stadium name and the number of concerts in each stadium." ("name" is generic)
    28: ("Name", "name", ["title", "appellation"]),
    # "How much does the youngest dog weigh?"
    58: ("weight", "weigh", ["mass", "body weight", "weight"]),
    # "What major is every student ..., and also how old are they?" (the synonym's "old")
    72: ("Age", "old", ["years old", "age in years", "age"]),
    # "What is the maximum accelerate for different number of cylinders?"
    169: ("Cylinders", "cylinders", ["engine cylinders", "pistons"]),
    # "What are the distinct states and create time of all votes?" (head "time")
    351: ("created", "create time", ["generated", "produced", "created", "time"]),
    # "What are the record companies of orchestras ...?" (head "companies")
    367: ("Record_Company", "record companies", ["recording label", "audio company", "companies"]),
}  # fmt: skip

#: items whose request names the column only by its table's noun, or not at all: no term
NO_TERM = {
    29: "For each stadium, how many concerts play there?",  # stadium.Name: "stadium" is the table
    266: "Which airports do not have departing or arriving flights?",  # airports.AirportName
    278: "Where is the youngest teacher from?",  # teacher.Hometown
    484: "What is the sname of every sing that does not have any song?",  # singer.Name
}


def by_index(out: Path, index: int) -> dict:
    (record,) = [
        r for r in read_jsonl(out / "records.jsonl")
        if r["source"]["index"] == index and r["id"].endswith("-1")
    ]  # fmt: skip
    return record


def test_hand_checked_terms_and_aliases_of_real_items(built):
    out, _ = built
    for index, (column, term, aliases) in HAND_CHECKED.items():
        record = by_index(out, index)
        (ambiguity,) = record["ambiguities"]
        assert record["source"]["column"] == column, index
        assert (ambiguity["term"], ambiguity["aliases"]) == (term, aliases), index
        # both records of the AVT carry the same names
        (twin,) = [
            r for r in read_jsonl(out / "records.jsonl")
            if r["avt_id"] == record["avt_id"] and r["id"] != record["id"]
        ]  # fmt: skip
        assert twin["ambiguities"][0]["aliases"] == aliases


def test_the_given_name_synonym_is_an_alias(built):
    out, _ = built
    # item 65, "Find the first name of students who have cat or dog pet.": Student.Fname ->
    # given_name/first_name; "first name" is the term
    (ambiguity,) = by_index(out, 65)["ambiguities"]
    assert (ambiguity["term"], ambiguity["aliases"]) == ("first name", ["given name", "fname"])


def test_a_table_noun_is_never_the_term_of_a_column(built):
    out, _ = built
    reasons = {d["item"]: d["reason"] for d in read_jsonl(out / "dropped.jsonl")}
    rows = json.loads(
        (
            upstream("ambiqt") / "AmbiQT" / "benchmark" / "col-synonyms" / "validation.json"
        ).read_text("utf-8")
    )
    for index, question in NO_TERM.items():
        assert rows[index]["question"] == question
        assert reasons[f"benchmark/col-synonyms/validation.json#{index}"] == "no_term_in_request"
    for record in read_jsonl(out / "records.jsonl"):
        assert ambiguity_origin(record) in {"column_name", "synonym"}


#: (item, question, credited?) - natural clarifying questions a person would ask about the two
#: synonym columns, written without looking at the registered names; restatements of the request
#: and questions about another column get nothing
QUESTIONS = [
    (0, "Should I use the age column or years_old?", True),
    (0, "Do you mean the birthdate?", True),
    (0, "Show name, country, age for all singers ordered by age from the oldest to the "
        "youngest?", False),
    (0, "Do you mean the nationality?", False),
    (8, "Track release year or composition release year?", True),
    (8, "Which year of the concert?", False),
    (58, "Is the weight the mass or the body weight?", True),
    (72, "By 'how old', do you mean years_old or age_in_years?", True),
    (351, "Should the create time be the generated or the produced column?", True),
    (351, "What are the distinct states and create time of all votes?", False),
    (367, "Do you mean the recording label or the audio company?", True),
    (367, "Which company do you mean?", True),
]  # fmt: skip


def test_natural_questions_are_credited_and_restatements_are_not(built):
    out, _ = built
    for index, question, credited in QUESTIONS:
        record = by_index(out, index)
        expected = {record["ambiguities"][0]["id"]} if credited else frozenset()
        assert oracle_credits(out, record["id"], question) == expected, (index, question)


def test_column_term_rules_on_the_issues_cases():
    from ambitab_gym.convert.ambiqt import column_term

    # the earliest "date" is the arrival date: the departure-date column is "departure date"
    question = "List the arrival date and the departure date of all the dogs."
    choice = column_term(
        question, "date_departed", "date departed", table="Dogs",
        other_columns=("date arrived", "date adopted", "date of birth"),
    )  # fmt: skip
    assert choice is not None and choice.term == "departure date"
    # no dangling function word: the tail "of staff" of "num of staff" is never a term
    question = "What is the average number of staff working for the museums?"
    choice = column_term(question, "Num_of_Staff", "num of staff", table="museum")
    assert choice is not None and choice.term == "staff working"
    # a table's noun is never the term of one of its columns
    question = "What are the death and injury situations caused by the ship with tonnage 't'?"
    assert column_term(question, "killed", "killed", table="death") is None
    question = "List all cartoons directed by Ben Jones."
    assert column_term(question, "Title", "title", table="Cartoon") is None
    # unless the column is named like its table (airlines.Airline)
    question = "Which airlines have at least 10 flights?"
    choice = column_term(question, "Airline", "airline name", table="airlines")
    assert choice is not None and choice.term == "airlines"


def write_checkout(folder: Path, paths, rows: list[dict]) -> Path:
    """An AmbiQT checkout in the upstream layout holding the given (edited) real rows."""
    source, _ = paths
    (folder / "benchmark" / "col-synonyms").mkdir(parents=True)
    (folder / "spider").mkdir()
    (folder / "benchmark" / "col-synonyms" / "validation.json").write_text(json.dumps(rows))
    tables = source / "spider" / "tables.json"
    (folder / "spider" / "tables.json").write_text(tables.read_text("utf-8"))
    return folder


def sample_rows(paths) -> list[dict]:
    source, _ = paths
    return json.loads((source / "benchmark" / "col-synonyms" / "validation.json").read_text())


def test_hyphenated_synonym_is_quoted_and_builds(paths, tmp_path):
    rows = sample_rows(paths)
    row = dict(rows[5])  # singer.Name -> artist_name / performer_name, as upstream writes it
    assert row["query1"] == "select artist_name, country, age from singer order by age desc"
    row["query1"] = row["query1"].replace("artist_name", "stage-name")
    row["extra_map"] = {"singer": {"name": ["stage-name", "performer_name"]}}
    checkout = write_checkout(tmp_path / "AmbiQT", paths, [row])
    out = tmp_path / "corpus"
    status, report = run_build(
        "ambiqt", "--source", str(checkout), "--databases", str(paths[1]), "--out", str(out)
    )
    assert status == 0, report
    assert report["records"] == 2 and report["dropped"] == {}
    records = read_jsonl(out / "records.jsonl")
    sql = records[0]["verification"]["reference_sql"]
    assert sql == 'select "stage-name", country, age from singer order by age desc'
    manifest = json.loads((out / "manifest.json").read_text())
    rebuilt = out / manifest["databases"][records[0]["verification"]["database"]]["file"]
    assert len(query(rebuilt, sql)) == 6
    assert records[0]["ambiguities"][0]["term"] == "names"


def test_a_synonym_colliding_with_another_tables_column_is_synonym_collides(paths, built, tmp_path):
    out, _ = built
    # real sample item 471: song.title -> "name", which is also singer.Name (both tables joined)
    reasons = {d["item"]: d["reason"] for d in read_jsonl(out / "dropped.jsonl")}
    assert reasons["benchmark/col-synonyms/validation.json#471"] == "synonym_collides"
    # an edited real row: stadium.Name -> "theme", a column of the joined concert table; the
    # unqualified reading would fail with "ambiguous column name"
    row = dict(sample_rows(paths)[28])
    assert "join stadium" in row["query1"]
    row["query1"] = row["query1"].replace("t2.title", "theme")
    row["extra_map"] = {"stadium": {"name": ["theme", "appellation"]}}
    checkout = write_checkout(tmp_path / "AmbiQT", paths, [row])
    status, report = run_build(
        "ambiqt", "--source", str(checkout), "--databases", str(paths[1]),
        "--out", str(tmp_path / "c"),
    )  # fmt: skip
    assert status == 1 and report["dropped"] == {"synonym_collides": 1}
