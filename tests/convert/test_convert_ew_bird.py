"""EW-Bird converter on the real BIRD dev sample, and its row-filter hook over real HTTP.

BIRD's databases are not in the sample, so schema-only SQLite databases are built here from
``dev_tables.json`` to execute the reference SQL against. The expected hints, terms and
masking of a few records were checked by hand against ``dev.json``.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from convert_helpers import (
    SHOP_ROWS,
    ModelServer,
    occurs,
    oracle_credits,
    read_jsonl,
    run_build,
    schema_only_databases,
    tiny_bird,
    upstream,
)

from ambitab_gym.convert import ew_bird
from ambitab_gym.convert.common import BuildOptions, Workspace
from ambitab_gym.validate import validate_corpus


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    dev = upstream("bird", "dev")
    tmp = tmp_path_factory.mktemp("ewbird")
    databases = schema_only_databases(dev / "dev_tables.json", tmp / "dbs")
    workspace = Workspace(tmp / "work")
    conversion = ew_bird.convert(BuildOptions(source=dev, databases=databases), workspace)
    yield conversion, workspace
    workspace.close()


def by_question(conversion, question_id: int):
    (item,) = [i for i in conversion.items if i.records[0].source["question_id"] == question_id]
    return item.records[0]


def test_hand_checked_hints_become_masked_knowledge_ambiguities(converted):
    conversion, _ = converted
    record = by_question(conversion, 196)
    assert (
        record.spec.request == "In the non-carcinogenic molecules, how many contain chlorine atoms?"
    )
    assert [(a.term, a.resolution, a.kind) for a in record.ambiguities] == [
        (
            "non-carcinogenic molecules",
            "non-carcinogenic molecules refers to label = '-'",
            "knowledge",
        ),
        ("chlorine atoms", "chlorine atoms refers to element = 'cl'", "knowledge"),
    ]
    assert [a.evidence for a in record.ambiguities] == [a.resolution for a in record.ambiguities]
    record = by_question(conversion, 197)  # a hint written "X = Y" and a space before ';'
    # terms as the question writes them: "oxygen atoms" although the hint says "oxygen atom"
    assert record.spec.request == (
        "Calculate the average number of oxygen atoms in single-bonded molecules."
    )
    assert [a.term for a in record.ambiguities] == [
        "single-bonded molecules",
        "average number of oxygen atoms",
    ]
    assert record.ambiguities[1].resolution == "average number of oxygen atom = AVG(element = 'o')"
    record = by_question(conversion, 772)  # five hints and a trailing semicolon
    assert [a.term for a in record.ambiguities] == [
        "eyes",
        "hair",
        "skin colour",
        "female superheroes",
        "published by Dark Horse Comics",
    ]
    assert record.ambiguities[4].resolution == (
        "published by Dark Horse Comics refers to publisher_name = 'Dark Horse Comics'"
    )
    assert record.split == "dev" and record.verification.compare.order == "set"


def test_terms_are_phrases_of_the_question(converted):
    conversion, _ = converted
    for item in conversion.items:
        record = item.records[0]
        for ambiguity in record.ambiguities:
            assert occurs(ambiguity.term, record.spec.request), (record.id, ambiguity.term)
    # the left side is the column "label": the term is the question's "carcinogenic"
    record = by_question(conversion, 312)
    assert record.spec.request == "What is the carcinogenic label for bond TR001_2_4?"
    ((term, aliases),) = [(a.term, a.aliases) for a in record.ambiguities]
    assert (term, aliases) == ("carcinogenic", ("label",))
    assert record.source["term_origin"] == {"hint_1": "evidence"}
    record = by_question(conversion, 286)  # the hint says "triple bond", the question "triple-bond"
    assert [a.term for a in record.ambiguities] == ["triple-bond"]
    dropped = {d.item: d.reason for d in conversion.drops}
    assert dropped["dev.json#1443"] == "no_term_in_request"


def test_hint_aliases_are_its_columns_values_and_vague_modifier(converted):
    conversion, _ = converted
    # "non-carcinogenic molecules refers to label = '-'", "chlorine atoms refers to element =
    # 'cl'": the modifier the condition defines, the column, the value ("-" is one character)
    record = by_question(conversion, 196)
    assert [list(a.aliases) for a in record.ambiguities] == [
        ["non-carcinogenic", "label"],
        ["chlorine", "element", "cl"],
    ]
    # "female refers to gender = 'Female'" ("Female" is the term); "strength value of 100
    # refers to attribute_name = 'Strength' AND attribute_value = 100" (not a compound)
    record = by_question(conversion, 740)
    assert [list(a.aliases) for a in record.ambiguities] == [
        ["gender"],
        ["attribute name", "Strength", "attribute value", "100"],
    ]
    record = by_question(conversion, 742)  # "vampire superheroes refers to race = 'Vampire'"
    assert [list(a.aliases) for a in record.ambiguities] == [["vampire", "race"]]
    # "atom 19 refers to atom_id like 'TR%_19'": a number in the term is no modifier, and of
    # its words only "atom" names the column
    record = by_question(conversion, 239)
    assert list(record.ambiguities[1].aliases) == ["atom id", "TR%_19", "atom"]
    for item in conversion.items:  # no alias names another ambiguity of its row
        ambiguities = item.records[0].ambiguities
        for ambiguity in ambiguities:
            others = {n.lower() for a in ambiguities if a is not ambiguity for n in a.names}
            assert not {a.lower() for a in ambiguity.aliases} & others


def test_a_natural_question_about_carcinogenic_gets_the_credit(tmp_path):
    dev = upstream("bird", "dev")
    databases = schema_only_databases(dev / "dev_tables.json", tmp_path / "dbs")
    out = tmp_path / "c"
    status, report = run_build(
        "ew-bird", "--source", str(dev), "--databases", str(databases), "--out", str(out)
    )
    assert status == 0, report
    record_id = "ew_bird-dev-331"  # "How many of the molecules are carcinogenic?"
    assert oracle_credits(out, record_id, "What do you mean by carcinogenic?") == {"hint_1"}
    assert oracle_credits(out, record_id, "What does 'label' mean?") == {"hint_1"}
    assert oracle_credits(out, record_id, "What do you mean by 'of the'?") == frozenset()
    assert oracle_credits(out, record_id, "How many?") == frozenset()
    for question_id, question, expected in [
        # "In the non-carcinogenic molecules, how many contain chlorine atoms?"
        (196, "What makes a molecule non-carcinogenic?", {"hint_1"}),
        (196, "Which element code stands for chlorine?", {"hint_2"}),
        (196, "In the non-carcinogenic molecules, how many contain chlorine atoms?", set()),
        # "How many vampire superheroes are there?"
        (742, "How do you identify a vampire?", {"hint_1"}),
        (742, "Is vampire a race?", {"hint_1"}),
        # "How many female superheroes have a strength value of 100?"
        (740, "Is female a gender value?", {"hint_1"}),
        (740, "Which attribute name holds strength?", {"hint_2"}),
        (740, "How many female superheroes have a strength value of 100 in total?", set()),
    ]:
        credits = oracle_credits(out, f"ew_bird-dev-{question_id}", question)
        assert credits == frozenset(expected), question


def test_a_compound_term_is_asked_about_by_its_vague_word(tmp_path):
    """A self-written BIRD row in BIRD's layout: "long" of "long trip" is an alias."""
    dev = tmp_path / "dev"
    (dev / "dev_databases" / "bikes").mkdir(parents=True)
    row = {
        "question_id": 1, "db_id": "bikes", "difficulty": "simple",
        "question": "How many long trips did subscribers make?",
        "evidence": "long trip refers to duration > 1800; subscribers refers to "
                    "subscription_type = 'Subscriber'",
        "SQL": "SELECT COUNT(*) FROM trip WHERE duration > 1800 "
               "AND subscription_type = 'Subscriber'",
    }  # fmt: skip
    (dev / "dev.json").write_text(json.dumps([row]))
    connection = sqlite3.connect(dev / "dev_databases" / "bikes" / "bikes.sqlite")
    connection.executescript(
        "CREATE TABLE trip(id INTEGER, duration INTEGER, subscription_type TEXT);"
        "INSERT INTO trip VALUES (1, 2000, 'Subscriber'), (2, 900, 'Customer');"
    )
    connection.commit()
    connection.close()
    out = tmp_path / "c"
    status, report = run_build("ew-bird", "--source", str(dev), "--out", str(out))
    assert status == 0, report
    (record,) = read_jsonl(out / "records.jsonl")
    assert [(a["term"], a["aliases"]) for a in record["ambiguities"]] == [
        ("long trips", ["long", "duration", "1800"]),
        ("subscribers", ["subscription type"]),
    ]
    for question, expected in [
        ("How long must a trip last?", {"hint_1"}),
        ("Is a trip long above 1800 seconds?", {"hint_1"}),
        ("Which subscription type do you mean?", {"hint_2"}),
        ("How many long trips did subscribers make?", set()),
        ("So how many long trips did the subscribers make in total?", set()),
    ]:
        assert oracle_credits(out, "ew_bird-dev-1", question) == frozenset(expected), question


def test_evidence_is_withheld_from_the_public_spec(converted):
    conversion, _ = converted
    for item in conversion.items:
        record = item.records[0]
        public = json.dumps(record.spec.model_dump(by_alias=True))
        assert record.spec.external_knowledge == ()
        for ambiguity in record.ambiguities:
            assert ambiguity.resolution not in public
        assert record.source["evidence"] not in record.spec.request


def test_rows_without_evidence_are_dropped_with_a_reason(converted):
    conversion, _ = converted
    rows = json.loads((upstream("bird", "dev") / "dev.json").read_text())
    empty = {r["question_id"] for r in rows if not r["evidence"].strip()}
    assert {296, 309} <= empty
    dropped = {d.item: d.reason for d in conversion.drops if d.reason == "no_evidence"}
    assert dropped == {f"dev.json#{q}": "no_evidence" for q in empty}
    assert len(conversion.items) + len(conversion.drops) == len(rows)


def test_reference_sql_executes_on_schema_only_databases(converted):
    conversion, workspace = converted
    for item in conversion.items:
        record = item.records[0]
        workspace.execute(record.verification.database, record.verification.reference_sql)


def test_mini_dev_is_read_as_dev(tmp_path):
    mini = upstream("bird", "mini_dev")
    conversion = ew_bird.convert(BuildOptions(source=mini), Workspace(tmp_path))
    record = by_question(conversion, 1312)
    assert record.split == "dev"
    # "What's Angela Sanders's major?": the question never says "full name", so that hint joins
    # the ambiguity before it
    assert [a.term for a in record.ambiguities] == ["Angela Sanders", "major"]
    assert record.ambiguities[0].resolution == (
        "Angela Sanders is the full name; full name refers to first_name, last_name"
    )
    assert record.ambiguities[1].resolution == "major refers to major_name"
    assert record.source["merged_unlocated_hints"] == 1


def test_build_on_schema_only_databases(tmp_path):
    dev = upstream("bird", "dev")
    databases = schema_only_databases(dev / "dev_tables.json", tmp_path / "dbs")
    status, report = run_build(
        "ew-bird", "--source", str(dev), "--databases", str(databases), "--out", str(tmp_path / "c")
    )
    assert status == 0, report
    # independently: rows with evidence whose SQL returns rows on the empty tables
    rows = json.loads((dev / "dev.json").read_text())
    expected, empty = 0, 0
    for row in rows:
        if not row["evidence"].strip():
            continue
        db = databases / row["db_id"] / f"{row['db_id']}.sqlite"
        connection = sqlite3.connect(db)
        found = connection.execute(row["SQL"]).fetchall()
        connection.close()
        expected += bool(found)
        empty += not found
    lost = {1443}  # its only hint is SQL about no phrase of the question
    lost_empty = sum(
        1 for row in rows if row["question_id"] in lost and not sqlite3.connect(
            databases / row["db_id"] / f"{row['db_id']}.sqlite").execute(row["SQL"]).fetchall()
    )  # fmt: skip
    expected -= len(lost) - lost_empty
    empty -= lost_empty
    assert report["records"] == report["avts"] == report["retained_items"] == expected
    assert report["dropped"] == {
        "empty_result": empty, "no_evidence": 20, "no_term_in_request": len(lost)
    }  # fmt: skip
    assert validate_corpus(tmp_path / "c") == []
    assert report["terms"]["share_in_request"] == 1.0
    assert set(report["terms"]["origins"]) == {"evidence"}
    records = read_jsonl(tmp_path / "c" / "records.jsonl")
    assert all(r["spec"]["external_knowledge"] == [] for r in records)
    assert all(r["ambiguities"] and r["split"] == "dev" for r in records)
    status, report = run_build("ew-bird", "--source", str(dev), "--out", str(tmp_path / "d"))
    assert status == 1 and "--databases" in report["error"]
    assert not (tmp_path / "d").exists()


# -- the row filter hook over a real HTTP server ---------------------------------------------


# what the scripted model answers: (request, shown hints?) -> SQL
ANSWERS = {
    (SHOP_ROWS[0]["question"], False): "SELECT COUNT(*) FROM items",  # wrong without the hint
    (SHOP_ROWS[0]["question"], True): "SELECT COUNT(*) FROM items WHERE price < 5",
    (SHOP_ROWS[1]["question"], False): "SELECT name FROM items WHERE category = 'toys'",
    (SHOP_ROWS[1]["question"], True): "SELECT name FROM items WHERE category = 'toys'",
}


def answer(prompt: str) -> str:
    lines = prompt.splitlines()
    request = next(line[len("Request: ") :] for line in lines if line.startswith("Request: "))
    return f"```sql\n{ANSWERS[(request, 'Hints:' in prompt)]}\n```"


def test_row_filter_keeps_rows_that_need_the_evidence(tmp_path):
    dev = tiny_bird(tmp_path)
    with ModelServer(answer) as server:
        status, report = run_build(
            "ew-bird", "--source", str(dev), "--out", str(tmp_path / "c"),
            "--llm-url", server.url, "--model", "scripted-7b",
        )  # fmt: skip
    assert status == 0, report
    assert report["records"] == 1 and report["dropped"] == {"no_evidence_benefit": 1}
    (record,) = read_jsonl(tmp_path / "c" / "records.jsonl")
    assert record["id"] == "ew_bird-dev-1"
    (dropped,) = read_jsonl(tmp_path / "c" / "dropped.jsonl")
    assert dropped["item"] == "dev.json#2"
    assert len(server.requests) == 4
    assert {r["path"] for r in server.requests} == {"/v1/chat/completions"}
    assert {(r["model"], r["temperature"]) for r in server.requests} == {("scripted-7b", 0.0)}
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["oracle"] == "knowledge"
    assert manifest["provenance"]["model_hooks"]["model"] == "scripted-7b"


def test_without_the_hook_every_evidence_row_is_kept(tmp_path):
    dev = tiny_bird(tmp_path)
    status, report = run_build("ew-bird", "--source", str(dev), "--out", str(tmp_path / "c"))
    assert status == 0, report
    assert report["records"] == 2 and report["dropped"] == {}


def test_the_model_names_the_phrase_only_when_the_hint_names_none(tmp_path):
    dev = tiny_bird(tmp_path)
    row = {**SHOP_ROWS[0], "evidence": "price < 5"}  # pure SQL: no phrase of the question
    (dev / "dev.json").write_text(json.dumps([row]))
    asked = []

    def reply(prompt: str) -> str:
        if prompt.startswith("A database request is ambiguous"):
            asked.append(prompt)
            return "cheap"
        if "Hints:" in prompt:
            return "```sql\nSELECT COUNT(*) FROM items WHERE price < 5\n```"
        return "```sql\nSELECT COUNT(*) FROM items\n```"

    with ModelServer(reply) as server:
        status, report = run_build(
            "ew-bird", "--source", str(dev), "--out", str(tmp_path / "c"),
            "--llm-url", server.url, "--model", "scripted-7b",
        )  # fmt: skip
    assert status == 0, report
    assert len(asked) == 1 and "Note: price < 5" in asked[0]
    (record,) = read_jsonl(tmp_path / "c" / "records.jsonl")
    assert [a["term"] for a in record["ambiguities"]] == ["cheap"]
    assert record["source"]["term_origin"] == {"hint_1": "llm"}
    assert report["terms"]["origins"] == {"llm": 1}
    # without the model the row has no term and is dropped
    status, report = run_build("ew-bird", "--source", str(dev), "--out", str(tmp_path / "d"))
    assert status == 1 and report["dropped"] == {"no_term_in_request": 1}
