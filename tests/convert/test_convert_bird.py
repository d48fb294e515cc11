"""AmbiTab-Bird builder: importing released AmbiTab files, and the rewriting hook over HTTP.

The released-files path is exercised with the bundled Bird sample standing in for a release
(its databases are laid out as BIRD's ``dev_databases/<db>/<db>.sqlite``); the rewriting hook
with a scripted model server on 127.0.0.1 and a self-written BIRD-layout folder.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from convert_helpers import ModelServer, oracle_credits, read_jsonl, run_build, tiny_bird

from ambitab_gym.corpora import BUNDLED_DIR
from ambitab_gym.records import parse_record
from ambitab_gym.validate import validate_corpus


@pytest.fixture
def release(tmp_path):
    bundled = BUNDLED_DIR / "bird"
    if not (bundled / "manifest.json").is_file():
        pytest.skip("the bundled Bird sample is not there yet")
    manifest = json.loads((bundled / "manifest.json").read_text())
    databases = tmp_path / "bird" / "dev_databases"
    for name, entry in manifest["databases"].items():
        (databases / name).mkdir(parents=True)
        connection = sqlite3.connect(databases / name / f"{name}.sqlite")
        connection.executescript((bundled / entry["file"]).read_text())
        connection.commit()
        connection.close()
    return bundled / "records.jsonl", tmp_path / "bird"


def test_released_files_are_imported_as_they_are(release, tmp_path):
    records_file, databases = release
    status, report = run_build(
        "bird", "--source", str(records_file), "--databases", str(databases),
        "--out", str(tmp_path / "c"),
    )  # fmt: skip
    assert status == 0, report
    original = read_jsonl(records_file)
    built = read_jsonl(tmp_path / "c" / "records.jsonl")
    # the same records (the written file fills in defaults such as compare.allow_empty); the
    # source records how each term was obtained: every released term is a request phrase
    for record in built:
        counted = [a["id"] for a in record["ambiguities"] if a["kind"] != "non_critical"]
        assert record["source"].pop("term_origin") == dict.fromkeys(counted, "released")

    def without_aliases(records):
        out = {}
        for r in records:
            r = json.loads(json.dumps(r))
            aliases = [a.pop("aliases", []) for a in r["ambiguities"]]
            out[r["id"]] = (parse_record(r), aliases)
        return out

    built_records, original_records = without_aliases(built), without_aliases(original)
    assert {k: v[0] for k, v in built_records.items()} == {
        k: v[0] for k, v in original_records.items()
    }
    assert len(built) == len(original)
    # aliases: the released ones first, then what the evidence hints of the AVT's readings name
    by_avt: dict[str, list] = {}
    for record in built:
        ident = record["id"]
        for mine, theirs in zip(built_records[ident][1], original_records[ident][1], strict=True):
            assert mine[: len(theirs)] == theirs
        by_avt.setdefault(record["avt_id"], []).append(built_records[ident][1])
    assert all(all(a == group[0] for a in group) for group in by_avt.values())
    added = {
        r["id"]: {a["id"]: a["aliases"][len(o["aliases"]) :] for a, o in zip(r["ambiguities"],
                  next(x for x in original if x["id"] == r["id"])["ambiguities"], strict=True)}
        for r in built
    }  # fmt: skip
    # "spending refers to SUM(quantity * unit_price * (1 - discount)) on orders ..." ("discount"
    # is a released alias); "on time refers to actual_arrival at most 15 minutes after
    # scheduled_arrival" and its actual_departure reading ("scheduled ..." are released); the
    # sum is asked about as a "total"
    assert added["bird-0001"] == {
        "top_customers": [],
        "spending": ["quantity", "unit price", "total"],
    }
    assert added["bird-0054"]["on_time"] == ["actual arrival", "actual departure"]

    def readings(records):  # AVT -> record ids in file order (the first is the default)
        out = {}
        for r in records:
            out.setdefault(r["avt_id"], []).append(r["id"])
        return out

    assert readings(built) == readings(original)
    assert report["records"] == len(original) and report["dropped"] == {}
    assert report["avts"] == len({r["avt_id"] for r in original})
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["oracle"] == "knowledge" and manifest["name"] == "bird"
    assert all(entry["file"].endswith(".sqlite") for entry in manifest["databases"].values())


def test_released_terms_are_checked_against_the_request(release, tmp_path):
    records_file, databases = release
    records = read_jsonl(records_file)
    first = records[0]
    siblings = [r for r in records if r["avt_id"] == first["avt_id"]]
    request = first["spec"]["request"]
    (term, *_) = [a["term"] for a in first["ambiguities"]]
    assert term in request
    # one AVT whose term is not the request's wording (a relocatable variant), one whose term
    # names nothing in the request, one with a function-word term
    relocatable = first["ambiguities"][0]["term"] + "s"
    broken = next(r for r in records if r["avt_id"] != first["avt_id"] and r["ambiguities"])
    stop = next(
        r
        for r in records
        if r["avt_id"] not in (first["avt_id"], broken["avt_id"]) and r["ambiguities"]
    )
    edited = []
    for record in records:
        record = json.loads(json.dumps(record))
        if record["avt_id"] == first["avt_id"]:
            record["ambiguities"][0]["term"] = relocatable
        elif record["avt_id"] == broken["avt_id"]:
            record["ambiguities"][0]["term"] = "zeppelin quokka"
            record["ambiguities"][0]["aliases"] = []  # an alias naming a phrase would relocate it
        elif record["avt_id"] == stop["avt_id"]:
            record["ambiguities"][0]["term"] = "the"
        edited.append(record)
    source = tmp_path / "release.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in edited))
    status, report = run_build(
        "bird", "--source", str(source), "--databases", str(databases), "--out", str(tmp_path / "c")
    )
    assert status == 0, report
    assert report["dropped"] == {"no_term_in_request": 2}
    assert report["terms"]["share_in_request"] == 1.0
    built = {r["id"]: r for r in read_jsonl(tmp_path / "c" / "records.jsonl")}
    for sibling in siblings:
        ambiguity = built[sibling["id"]]["ambiguities"][0]
        assert ambiguity["term"] == term and relocatable in ambiguity["aliases"]
        assert built[sibling["id"]]["source"]["term_origin"][ambiguity["id"]] == "relocated"
    assert broken["id"] not in built and stop["id"] not in built
    assert validate_corpus(tmp_path / "c") == []
    # the knowledge oracle of the built corpus credits a question naming the request's phrase
    ident = first["ambiguities"][0]["id"]
    out = tmp_path / "c"
    assert oracle_credits(out, first["id"], f"What do you mean by '{term}'?") == {ident}
    assert oracle_credits(out, first["id"], "What do you mean by 'the'?") == frozenset()
    assert oracle_credits(out, first["id"], "What do you mean by 'of our'?") == frozenset()


def test_released_files_without_databases_are_dropped(release, tmp_path):
    records_file, _ = release
    status, report = run_build("bird", "--source", str(records_file), "--out", str(tmp_path / "c"))
    assert status == 1
    assert report["dropped"] == {"database_missing": report["dropped"]["database_missing"]}
    assert report["dropped"]["database_missing"] == len(
        {r["avt_id"] for r in read_jsonl(records_file)}
    )


def test_bird_tasks_need_a_model(tmp_path):
    dev = tiny_bird(tmp_path)
    status, report = run_build("bird", "--source", str(dev), "--out", str(tmp_path / "c"))
    assert status == 1 and "--llm-url" in report["error"]


REWRITES = {
    "How many cheap items are there?": {
        "request": "How many cheap items are there?",
        "ambiguities": [{"id": "cheap", "term": "cheap items", "kind": "knowledge"}],
        "readings": [
            {"resolutions": {"cheap": "items priced under 5"},
             "sql": "SELECT COUNT(*) FROM items WHERE price < 5"},
            {"resolutions": {"cheap": "items priced under 15"},
             "sql": "SELECT COUNT(*) FROM items WHERE price < 15"},
        ],
    },
    "List the names of items in the toys category.": "this is not JSON",
}  # fmt: skip


def rewrite(prompt: str) -> str:
    task = next(line[len("Task: ") :] for line in prompt.splitlines() if line.startswith("Task: "))
    answer = REWRITES[task]
    return answer if isinstance(answer, str) else "```json\n" + json.dumps(answer) + "\n```"


def test_rewriting_hook(tmp_path):
    dev = tiny_bird(tmp_path)
    with ModelServer(rewrite) as server:
        status, report = run_build(
            "bird", "--source", str(dev), "--out", str(tmp_path / "c"),
            "--llm-url", server.url, "--model", "rewriter",
        )  # fmt: skip
        assert len(server.requests) == 2
    assert status == 0, report
    assert report["records"] == 2 and report["avts"] == 1
    assert report["dropped"] == {"rewrite_failed": 1}
    first, second = read_jsonl(tmp_path / "c" / "records.jsonl")
    assert first["avt_id"] == second["avt_id"] == "bird-dev-1"
    assert [first["ambiguities"][0]["resolution"], second["ambiguities"][0]["resolution"]] == [
        "items priced under 5",
        "items priced under 15",
    ]
    assert first["ambiguities"][0]["kind"] == "knowledge"
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["provenance"]["mode"].startswith("rewritten by a model")


def test_an_unreachable_model_server_stops_the_build_before_it_starts(tmp_path, capsys):
    import socket

    from ambitab_gym.cli import main as cli_main

    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    dev = tiny_bird(tmp_path)
    out = tmp_path / "c"
    status = cli_main(
        ["build", "bird", "--source", str(dev), "--out", str(out), "--llm-url", url]
        + ["--model", "rewriter"]
    )
    assert status == 2
    assert url in capsys.readouterr().err
    assert not out.exists()  # nothing built, not even a partial folder


LONG_TRIPS = [
    {"id": f"bikes-{n}", "avt_id": "bikes-long", "corpus": "bird",
     "spec": {"request": "How many long trips were there?", "database": "bikes"},
     "ambiguities": [{"id": "long", "term": "long trips", "kind": "knowledge",
                      "resolution": f"trips over {seconds} seconds",
                      "evidence": f"long trip refers to duration > {seconds}"}],
     "verification": {"database": "bikes",
                      "reference_sql": f"SELECT COUNT(*) FROM trip WHERE duration > {seconds}"}}
    for n, seconds in ((1, 1800), (2, 3600))
]  # fmt: skip


def test_evidence_names_the_readings(tmp_path):
    """A self-written release of two readings: the knowledge ambiguity's aliases are the
    vague modifier and what both readings' hints name, and natural questions get the credit."""
    databases = tmp_path / "dev_databases"
    (databases / "bikes").mkdir(parents=True)
    connection = sqlite3.connect(databases / "bikes" / "bikes.sqlite")
    connection.executescript(
        "CREATE TABLE trip(id INTEGER, duration INTEGER);"
        "INSERT INTO trip VALUES (1, 1000), (2, 2000), (3, 4000);"
    )
    connection.commit()
    connection.close()
    source = tmp_path / "release.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in LONG_TRIPS))
    out = tmp_path / "c"
    status, report = run_build(
        "bird", "--source", str(source), "--databases", str(databases), "--out", str(out)
    )
    assert status == 0, report
    built = read_jsonl(out / "records.jsonl")
    assert [r["ambiguities"][0]["aliases"] for r in built] == [
        ["long", "duration", "1800", "3600"]
    ] * 2
    for question, expected in [
        ("How long must a trip last?", {"long"}),
        ("Is it over 1800 or 3600 seconds?", {"long"}),
        ("Should I go by the duration?", {"long"}),
        ("How many long trips were there?", set()),  # the request restated
        ("So how many long trips were there in total?", set()),
    ]:
        assert oracle_credits(out, "bikes-1", question) == frozenset(expected), question
