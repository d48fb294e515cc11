"""The corpus validator: the bundled corpora pass, and each check catches a broken record.

Each breaking test copies a bundled corpus to a temporary folder, breaks one record (or one
file) on purpose, refreshes the records checksum in the manifest where the break is not about
checksums, and asserts that exactly the expected check fires for exactly that record.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from ambitab_gym.cli import main
from ambitab_gym.corpora import BUNDLED_DIR, ENV_IDS, load_corpus
from ambitab_gym.validate import (
    CHECKS,
    Violation,
    is_trivial_secret,
    leaks_into,
    normalize_text,
    validate_corpus,
)

CORPUS_NAMES = list(ENV_IDS.values())


# -- helpers ---------------------------------------------------------------------------------------


def copy_corpus(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(BUNDLED_DIR / name, target)
    return target


def read_records(folder: Path) -> list[dict]:
    lines = (folder / "records.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


def write_records(folder: Path, records: list[dict], *, refresh_checksum: bool = True) -> None:
    path = folder / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    if refresh_checksum:
        manifest_path = folder / "manifest.json"
        manifest = json.loads(manifest_path.read_text("utf-8"))
        if manifest.get("records", {}).get("sha256"):
            manifest["records"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
            manifest_path.write_text(json.dumps(manifest, indent=2), "utf-8")


def avts(records: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in records:
        out.setdefault(r["avt_id"], []).append(r)
    return out


def found(violations: list[Violation]) -> list[tuple[str, str | None]]:
    return [(v.check, v.record_id) for v in violations]


# -- the bundled corpora ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", CORPUS_NAMES)
def test_bundled_corpus_passes_validation(name):
    assert (BUNDLED_DIR / name / "manifest.json").is_file(), f"bundled corpus {name} is missing"
    violations = validate_corpus(load_corpus(BUNDLED_DIR / name))
    assert violations == [], "\n".join(str(v) for v in violations)


def test_validate_accepts_env_id_name_and_folder(tmp_path):
    folder = copy_corpus("ambiqt", tmp_path)
    for reference in ("AmbiTab-AmbiQT-v0", "ambiqt", folder, str(folder)):
        assert validate_corpus(reference) == []


# -- one deliberately broken record per check ------------------------------------------------------


def test_schema_violation_names_the_record(tmp_path):
    folder = copy_corpus("bird", tmp_path)
    records = read_records(folder)
    target = next(r for r in records if r["ambiguities"])
    target["ambiguities"][0]["kind"] = "vague"
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert found(violations) == [("schema", target["id"])]
    assert "ambiguities.0.kind" in violations[0].message


def test_repeated_id_is_reported(tmp_path):
    folder = copy_corpus("bird", tmp_path)
    records = read_records(folder)
    records[5]["id"] = records[2]["id"]
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert found(violations) == [("unique_id", records[2]["id"])]
    assert "lines 3 and 6" in violations[0].message


def test_database_missing_from_manifest(tmp_path):
    folder = copy_corpus("bird", tmp_path)
    records = read_records(folder)
    records[4]["verification"]["database"] = "no_such_db"
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert found(violations) == [("manifest", records[4]["id"])]
    assert "no_such_db" in violations[0].message


def test_checksum_mismatch_is_corpus_level(tmp_path):
    folder = copy_corpus("bird", tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    database, entry = sorted(manifest["databases"].items())[0]
    assert entry.get("sha256"), "the bundled manifest should carry checksums"
    script = folder / entry["file"]
    script.write_text(script.read_text("utf-8") + "\n-- edited after the manifest was written\n")
    violations = validate_corpus(folder)
    assert found(violations) == [("checksum", None)]
    assert repr(database) in violations[0].message


def test_avt_siblings_must_share_the_spec(tmp_path):
    folder = copy_corpus("bird", tmp_path)
    records = read_records(folder)
    group = next(g for g in avts(records).values() if len(g) >= 2)
    group[1]["spec"]["request"] += " Please be quick."
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert found(violations) == [("avt", group[1]["id"])]
    assert group[0]["id"] in violations[0].message


def test_avt_siblings_must_share_ambiguity_aliases(tmp_path):
    folder = copy_corpus("ambrosia", tmp_path)
    records = read_records(folder)
    group = next(g for g in avts(records).values() if len(g) >= 2)
    group[1]["ambiguities"][0]["aliases"].append("some phrase nobody asks about")
    write_records(folder, records)
    assert found(validate_corpus(folder)) == [("avt", group[1]["id"])]


def test_reference_sql_must_execute(tmp_path):
    folder = copy_corpus("bird", tmp_path)
    records = read_records(folder)
    records[7]["verification"]["reference_sql"] = "SELECT no_column FROM no_table"
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert found(violations) == [("reference_sql", records[7]["id"])]
    assert "no_table" in violations[0].message


def test_reference_result_must_not_be_empty(tmp_path):
    folder = copy_corpus("bird", tmp_path)
    records = read_records(folder)
    target = records[3]
    sql = target["verification"]["reference_sql"]
    target["verification"]["reference_sql"] = f"SELECT * FROM ({sql}) AS t WHERE 1 = 0"
    write_records(folder, records)
    assert found(validate_corpus(folder)) == [("empty_result", target["id"])]
    target["verification"]["compare"]["allow_empty"] = True
    write_records(folder, records)
    assert validate_corpus(folder) == []


def test_interpretations_of_an_avt_must_give_different_results(tmp_path):
    folder = copy_corpus("ambiqt", tmp_path)
    records = read_records(folder)
    group = next(g for g in avts(records).values() if len(g) >= 2)
    group[1]["verification"]["reference_sql"] = group[0]["verification"]["reference_sql"]
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert found(violations) == [("distinct_results", group[1]["id"])]
    assert group[0]["id"] in violations[0].message


def test_permuted_columns_count_as_equal_results_when_column_order_is_free(tmp_path):
    folder = copy_corpus("ambiqt", tmp_path)
    records = read_records(folder)
    group = next(
        g
        for g in avts(records).values()
        if len(g) >= 2 and g[0]["verification"]["reference_sql"].startswith("SELECT name, ")
    )
    first_sql = group[0]["verification"]["reference_sql"]
    column, rest = first_sql[len("SELECT name, ") :].split(" ", 1)
    group[1]["verification"]["reference_sql"] = f"SELECT {column}, name {rest}"
    write_records(folder, records)
    assert validate_corpus(folder) == []  # column order matters by default
    for record in group:
        record["verification"]["compare"]["column_order"] = False
    write_records(folder, records)
    assert found(validate_corpus(folder)) == [("distinct_results", group[1]["id"])]


def test_canonical_question_must_reach_its_ambiguity(tmp_path):
    # Knowledge oracle: an evidence hint of ambiguity B that defines A's term gives B a name
    # equal to A's term, so the canonical question about A is a tie and credits nothing.
    folder = copy_corpus("bird", tmp_path)
    records = read_records(folder)
    target = next(r for r in records if len(r["ambiguities"]) >= 2)
    first, second = target["ambiguities"][:2]
    second["evidence"] = f"{first['term']} refers to something else entirely"
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert found(violations) == [("canonical_question", target["id"])]
    assert first["term"] in violations[0].message and "nothing" in violations[0].message


def test_repeated_terms_cannot_both_be_reached(tmp_path):
    folder = copy_corpus("taco", tmp_path)
    records = read_records(folder)
    group = next(g for g in avts(records).values() if len(g[0]["ambiguities"]) >= 2)
    for record in group:  # change every sibling alike so only the canonical check fires
        record["ambiguities"][1]["term"] = record["ambiguities"][0]["term"]
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert set(found(violations)) == {("canonical_question", r["id"]) for r in group}
    assert any("same term" in v.message for v in violations)


# -- terms: the request's own words -------------------------------------------------------------


def test_a_term_absent_from_the_request_is_reported(tmp_path):
    folder = copy_corpus("ambrosia", tmp_path)
    records = read_records(folder)
    group = avts(records)[records[0]["avt_id"]]
    for record in group:  # every sibling alike, so only the term check fires
        record["ambiguities"][0]["term"] = "zeppelin hangar"
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert found(violations) == [("term_in_request", r["id"]) for r in group]
    assert "'zeppelin hangar' does not occur in the request" in violations[0].message


def test_a_term_occurring_only_inside_a_word_is_reported(tmp_path):
    folder = copy_corpus("ambiqt", tmp_path)
    records = read_records(folder)
    group = avts(records)[records[0]["avt_id"]]
    request = group[0]["spec"]["request"]
    word = next(w.strip("?.,'") for w in request.split() if len(w.strip("?.,'")) > 5)
    for record in group:  # a prefix of a request word: not the request's words
        record["ambiguities"][0]["term"] = word[:4]
    write_records(folder, records)
    checks = {c for c, _ in found(validate_corpus(folder))}
    assert "term_in_request" in checks


@pytest.mark.parametrize(
    ("term", "why"),
    [("What's", "function words"), ("Please", "function words"), ("count", "SQL keywords"),
     ("order by", "SQL keywords"), ("label = '+'", "SQL fragment")],
)  # fmt: skip
def test_function_word_and_sql_terms_are_reported(tmp_path, term, why):
    folder = copy_corpus("ew_bird", tmp_path)
    records = read_records(folder)
    group = next(g for g in avts(records).values() if len(g[0]["ambiguities"]) == 1)
    for record in group:  # every sibling alike; the term does occur in the request
        record["spec"]["request"] = f"{record['spec']['request']} {term}"
        record["ambiguities"][0]["term"] = term
    write_records(folder, records)
    violations = [v for v in validate_corpus(folder) if v.check != "canonical_question"]
    assert found(violations) == [("term_words", r["id"]) for r in group]
    assert why in violations[0].message


def test_a_function_word_alias_is_reported(tmp_path):
    folder = copy_corpus("bird_interact", tmp_path)
    records = read_records(folder)
    group = next(
        g
        for g in avts(records).values()
        if any(a["kind"] == "critical" for a in g[0]["ambiguities"])
    )
    for record in group:
        ambiguity = next(a for a in record["ambiguities"] if a["kind"] == "critical")
        ambiguity["aliases"] = [*ambiguity["aliases"], "the"]
    write_records(folder, records)
    violations = [v for v in validate_corpus(folder) if v.check != "canonical_question"]
    assert found(violations) == [("term_words", r["id"]) for r in group]
    assert "alias 'the'" in violations[0].message


def test_non_critical_terms_are_not_checked(tmp_path):
    folder = copy_corpus("bird_interact", tmp_path)
    records = read_records(folder)
    group = next(
        g for g in avts(records).values()
        if any(a["kind"] == "non_critical" for a in g[0]["ambiguities"])
    )  # fmt: skip
    for record in group:
        ambiguity = next(a for a in record["ambiguities"] if a["kind"] == "non_critical")
        ambiguity["term"] = "sorting preference nowhere in the request"
    write_records(folder, records)
    assert "term_in_request" not in {c for c, _ in found(validate_corpus(folder))}


def test_two_avts_with_the_same_request_and_database_are_reported(tmp_path):
    folder = copy_corpus("taco", tmp_path)
    records = read_records(folder)
    groups = list(avts(records).values())
    first, second = next(
        (a, b)
        for a in groups
        for b in groups
        if a is not b and a[0]["spec"]["database"] == b[0]["spec"]["database"]
        and [x["term"] for x in a[0]["ambiguities"]] == [x["term"] for x in b[0]["ambiguities"]]
    )  # fmt: skip
    for record in second:
        record["spec"] = json.loads(json.dumps(first[0]["spec"]))
    write_records(folder, records)
    violations = [v for v in validate_corpus(folder) if v.check == "duplicate_request"]
    assert found(violations) == [("duplicate_request", second[0]["id"])]
    assert first[0]["avt_id"] in violations[0].message


def test_intent_oracle_needs_frozen_responses(tmp_path):
    folder = copy_corpus("ambrosia", tmp_path)
    records = read_records(folder)
    records[6]["ambiguities"][0]["response"] = None
    write_records(folder, records)
    assert found(validate_corpus(folder)) == [("frozen_response", records[6]["id"])]


def test_knowledge_oracle_needs_no_frozen_responses(tmp_path):
    folder = copy_corpus("ew_bird", tmp_path)
    records = read_records(folder)
    for record in records:
        for ambiguity in record["ambiguities"]:
            ambiguity["response"] = None
    write_records(folder, records)
    assert validate_corpus(folder) == []


def test_resolution_leaking_into_external_knowledge(tmp_path):
    folder = copy_corpus("ew_bird", tmp_path)
    records = read_records(folder)
    group = next(g for g in avts(records).values() if len(g) >= 2)
    leaked = group[0]["ambiguities"][0]["resolution"]
    for record in group:  # siblings share the spec; only the first record's secret is in it
        record["spec"]["external_knowledge"].append(leaked.upper() + "  ")
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert found(violations) == [("leak", group[0]["id"])]
    assert "resolution" in violations[0].message and "external knowledge" in violations[0].message


def test_reference_sql_leaking_into_the_request(tmp_path):
    folder = copy_corpus("ambiqt", tmp_path)
    records = read_records(folder)
    group = next(g for g in avts(records).values() if len(g) >= 2)
    sql = group[1]["verification"]["reference_sql"]
    for record in group:
        record["spec"]["request"] += f" (I would run: {sql})"
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert ("leak", group[1]["id"]) in found(violations)
    assert {v.check for v in violations} == {"leak"}
    assert {v.record_id for v in violations} == {group[1]["id"]}


def test_frozen_response_leaking_into_the_request(tmp_path):
    folder = copy_corpus("bird", tmp_path)
    records = read_records(folder)
    target = next(r for r in records if r["ambiguities"])
    target["ambiguities"][0]["response"] = target["spec"]["request"]
    write_records(folder, records)
    violations = validate_corpus(folder)
    assert found(violations) == [("leak", target["id"])]
    assert "frozen response" in violations[0].message


# -- the leak rule ---------------------------------------------------------------------------------


def test_normalization_folds_case_and_whitespace():
    assert normalize_text("  Only\tthe\n\nFIVE best.  ") == "only the five best"
    assert leaks_into("only the five best", "Show ONLY the  five\nbest customers")
    assert not leaks_into("only the five best", "Show only the four best customers")


@pytest.mark.parametrize("secret", ["5", "2019", "0.25", "15%", "latest", "All", "no", "ok"])
def test_trivial_secrets_are_ignored(secret):
    assert is_trivial_secret(secret)
    assert not leaks_into(secret, f"a request that mentions {secret} in passing")


def test_single_identifiers_are_words_not_substrings():
    assert not is_trivial_secret("years_old")
    assert leaks_into("years_old", "What is the years_old of each singer?")
    assert not leaks_into("age", "What is the average price?")
    assert not leaks_into("years_old", "the years_older column")


def test_single_token_snippet_in_the_schema_is_not_a_leak(tmp_path):
    # AmbiQT snippets name columns (``singer.age``); the schema must name them too.
    folder = copy_corpus("ambiqt", tmp_path)
    records = read_records(folder)
    group = next(g for g in avts(records).values() if len(g) >= 2)
    snippets = [a["sql_snippet"] for r in group for a in r["ambiguities"]]
    assert all(" " not in s for s in snippets)
    for record in group:
        record["spec"]["schema"] = "-- columns: " + ", ".join(snippets)
    write_records(folder, records)
    assert validate_corpus(folder) == []


# -- the command -----------------------------------------------------------------------------------


def test_cli_validate_clean_corpus_exits_0(capsys):
    assert main(["validate", "AmbiTab-Ambrosia-v0"]) == 0
    out = capsys.readouterr().out
    assert "ambrosia" in out and "no violations" in out


def test_cli_validate_reports_each_violation_and_exits_1(tmp_path, capsys):
    folder = copy_corpus("ambrosia", tmp_path)
    records = read_records(folder)
    records[1]["ambiguities"][0]["response"] = None
    records[3]["verification"]["reference_sql"] = "SELECT * FROM nowhere"
    write_records(folder, records)
    assert main(["validate", str(folder)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{records[1]['id']} [frozen_response]")
    assert lines[1].startswith(f"{records[3]['id']} [reference_sql]")
    assert "2 violations in 2 records" in lines[-1]


def test_cli_validate_json(tmp_path, capsys):
    folder = copy_corpus("ambiqt", tmp_path)
    records = read_records(folder)
    records[0]["ambiguities"][0]["response"] = ""
    write_records(folder, records)
    assert main(["validate", str(folder), "--json"]) == 1
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert report["ok"] is False and report["records"] == len(records)
    assert [(v["check"], v["record_id"]) for v in report["violations"]] == [
        ("frozen_response", records[0]["id"])
    ]
    assert report["summary"] == {"frozen_response": 1}


def test_cli_validate_unloadable_records_exits_1(tmp_path, capsys):
    folder = copy_corpus("bird", tmp_path)
    path = folder / "records.jsonl"
    path.write_text(path.read_text("utf-8") + "{not json\n", "utf-8")
    assert main(["validate", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "[schema]" in out and "invalid JSON" in out and "[checksum]" in out


def test_a_cut_record_line_is_named_once_with_its_column(tmp_path, capsys):
    """json says "Unterminated string starting at"; the message reads "... at column 8"."""
    folder = copy_corpus("bird", tmp_path)
    path = folder / "records.jsonl"
    path.write_text('{"id": "r1', "utf-8")  # the last line, cut short
    assert main(["validate", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "records.jsonl:1: invalid JSON (Unterminated string starting at column 8)" in out
    assert main(["evaluate", str(folder), "--results", str(tmp_path / "r.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"ambitab-gym evaluate: {path}:1: invalid JSON (Unterminated string starting at column 8)\n"
    )
    assert "at at" not in out + err


@pytest.mark.parametrize("reference", ["AmbiTab-Nothing-v0", "no_such_corpus"])
def test_cli_validate_unknown_corpus_exits_2(reference, capsys):
    assert main(["validate", reference]) == 2
    err = capsys.readouterr().err
    assert reference in err and "AmbiTab-Bird-v0" in err


def test_cli_validate_folder_without_manifest_exits_2(tmp_path, capsys):
    assert main(["validate", str(tmp_path)]) == 2
    assert "manifest.json is missing" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["validate", "evaluate"])
def test_a_folder_that_does_not_exist_is_named_as_such(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([command, "./no_such_corpus"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"ambitab-gym {command}: no such folder: ./no_such_corpus (give a corpus folder, an env "
        "id or a corpus name; `ambitab-gym list` shows the corpora)\n"
    )
    assert not (tmp_path / "no_such_corpus").exists()


def test_every_check_has_a_breaking_test():
    tested = {
        "schema",
        "unique_id",
        "manifest",
        "checksum",
        "avt",
        "frozen_response",
        "canonical_question",
        "leak",
        "reference_sql",
        "empty_result",
        "distinct_results",
        "term_in_request",
        "term_words",
        "duplicate_request",
    }
    assert tested == set(CHECKS)
