"""The shared build pipeline: validation gate, output folder rules, progress, helpers."""

from __future__ import annotations

import json
import sqlite3

import pytest
from convert_helpers import read_jsonl, run_build, tiny_bird

from ambitab_gym.convert.builder import corpus_for_source
from ambitab_gym.convert.common import BuildError, Workspace, progress, seeded_rng


def released_file(tmp_path, *, break_avt: bool) -> tuple:
    """A two-reading AmbiTab-Bird release over the tiny shop database."""
    dev = tiny_bird(tmp_path)
    records = []
    for n, (limit, meaning) in enumerate(((5, "under 5"), (15, "under 15")), start=1):
        request = "How many cheap items are there?"
        if break_avt and n == 2:
            request = "How many cheap items are left?"  # AVT siblings must share the spec
        records.append(
            {"id": f"r{n}", "avt_id": "a1", "corpus": "bird", "split": "dev",
             "spec": {"request": request, "database": "shop"},
             "ambiguities": [{"id": "cheap", "term": "cheap items", "kind": "knowledge",
                              "resolution": f"items priced {meaning}"}],
             "verification": {"database": "shop",
                              "reference_sql": f"SELECT COUNT(*) FROM items WHERE price < {limit}"}}
        )  # fmt: skip
    path = tmp_path / "release.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, dev / "dev_databases"


def test_a_corpus_that_fails_validation_is_not_installed(tmp_path):
    pytest.importorskip("ambitab_gym.validate")
    source, databases = released_file(tmp_path, break_avt=True)
    out = tmp_path / "corpus"
    status, report = run_build(
        "bird", "--source", str(source), "--databases", str(databases), "--out", str(out)
    )
    assert status == 1
    assert "failed validation" in report["error"] and report["out"] is None
    assert {v["check"] for v in report["violations"]} == {"avt"}
    assert not out.exists()
    assert not list(tmp_path.glob(".corpus.*"))  # no leftovers beside it
    source, databases = released_file(tmp_path / "ok", break_avt=False)
    status, report = run_build(
        "bird", "--source", str(source), "--databases", str(databases), "--out", str(out)
    )
    assert status == 0 and report["records"] == 2 and (out / "manifest.json").is_file()


def test_a_rebuild_replaces_the_corpus_but_never_a_foreign_folder(tmp_path):
    source, databases = released_file(tmp_path, break_avt=False)
    out = tmp_path / "corpus"
    args = ["bird", "--source", str(source), "--databases", str(databases), "--out", str(out)]
    assert run_build(*args)[0] == 0
    (out / "stale.txt").write_text("from an earlier build")
    assert run_build(*args)[0] == 0
    assert not (out / "stale.txt").exists()
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "holiday.jpg").write_bytes(b"\xff\xd8")
    args[-1] = str(foreign)
    status, report = run_build(*args)
    assert status == 1 and "not a corpus folder" in report["error"]
    assert (foreign / "holiday.jpg").read_bytes() == b"\xff\xd8"


def test_json_is_the_last_stdout_line_and_drops_are_listed(tmp_path):
    source, databases = released_file(tmp_path, break_avt=False)
    status, report = run_build(
        "bird", "--source", str(source), "--databases", str(databases), "--out", str(tmp_path / "c")
    )
    assert status == 0
    assert list(report) == [
        "corpus", "out", "records", "avts", "retained_items", "dropped", "terms"
    ]  # fmt: skip
    assert read_jsonl(tmp_path / "c" / "dropped.jsonl") == []
    # one AVT, one counted ambiguity: "cheap items" is a phrase of the request
    assert report["terms"] == {
        "counted_ambiguities": 1, "in_request": 1, "share_in_request": 1.0,
        "origins": {"released": 1},
    }  # fmt: skip
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["counts"]["terms"] == report["terms"]


def test_repeated_requests_and_bad_terms_are_dropped_by_the_build(tmp_path):
    source, databases = released_file(tmp_path, break_avt=False)
    records = read_jsonl(source)
    extra = []
    for n, record in enumerate(records):  # a second AVT with the same request and database
        extra.append({**record, "id": f"dup{n}", "avt_id": "a2"})
    bad = json.loads(json.dumps(records[0]))  # an AVT whose only term is an SQL keyword
    bad.update(id="kw", avt_id="a3")
    bad["spec"]["request"] = "How many cheap items are there, by count?"
    bad["ambiguities"][0]["term"] = "count"
    source.write_text("".join(json.dumps(r) + "\n" for r in [*records, *extra, bad]))
    status, report = run_build(
        "bird", "--source", str(source), "--databases", str(databases), "--out", str(tmp_path / "c")
    )
    assert status == 0, report
    assert report["avts"] == 1
    assert report["dropped"] == {"duplicate_request": 1, "no_term_in_request": 1}
    dropped = {d["item"]: d["reason"] for d in read_jsonl(tmp_path / "c" / "dropped.jsonl")}
    assert dropped[next(k for k in dropped if "(a2)" in k)] == "duplicate_request"


def test_progress_goes_to_stderr_only_when_enabled(capsys):
    assert list(progress(range(3), desc="x", enabled=False)) == [0, 1, 2]
    assert capsys.readouterr() == ("", "")
    assert list(progress(range(3), desc="converting", enabled=True)) == [0, 1, 2]
    captured = capsys.readouterr()
    assert captured.out == "" and "converting" in captured.err


def test_source_names():
    assert [corpus_for_source(s) for s in ("ew-bird", "EW_BIRD", "bird-interact", "taco")] == [
        "ew_bird",
        "ew_bird",
        "bird_interact",
        "taco",
    ]
    with pytest.raises(BuildError, match="choose one of"):
        corpus_for_source("spider")


def test_seeded_rng_depends_on_seed_and_keys():
    draw = lambda seed, *keys: seeded_rng(seed, *keys).integers(0, 2**31, 4).tolist()  # noqa: E731
    assert draw(1, "a") == draw(1, "a")
    assert draw(1, "a") != draw(2, "a") and draw(1, "a") != draw(1, "b")


def test_workspace_builds_lazily_and_keeps_only_used_databases(tmp_path):
    built = []

    def builder(path):
        built.append(path.name)
        connection = sqlite3.connect(path)
        connection.executescript("CREATE TABLE t(x); INSERT INTO t VALUES (7);")
        connection.close()

    workspace = Workspace(tmp_path)
    workspace.add_built("used", builder)
    workspace.add_built("unused", builder)
    assert built == []
    assert workspace.execute("used", "SELECT x FROM t") == [(7,)]
    workspace.execute("unused", "SELECT x FROM t")
    files = workspace.finalize({"used"})
    assert files == {"used": "databases/used.sqlite"}
    assert sorted(p.name for p in (tmp_path / "databases").iterdir()) == ["used.sqlite"]


def test_a_malformed_upstream_item_is_dropped_not_fatal(tmp_path):
    dev = tiny_bird(tmp_path)
    rows = json.loads((dev / "dev.json").read_text())
    rows.append({"question_id": 3, "db_id": "shop", "question": "Anything?", "evidence": "x = 1"})
    (dev / "dev.json").write_text(json.dumps(rows))  # the third row has no SQL
    status, report = run_build("ew-bird", "--source", str(dev), "--out", str(tmp_path / "c"))
    assert status == 0 and report["records"] == 2
    assert report["dropped"] == {"malformed_item": 1}
    (drop,) = read_jsonl(tmp_path / "c" / "dropped.jsonl")
    assert drop == {"item": "dev.json#3", "reason": "malformed_item", "detail": "KeyError: 'SQL'"}


def test_a_failed_build_names_the_command_like_the_others(tmp_path, capsys):
    from ambitab_gym.cli import main

    source, databases = released_file(tmp_path, break_avt=False)
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "holiday.jpg").write_bytes(b"\xff\xd8")
    args = ["build", "bird", "--source", str(source), "--databases", str(databases)]
    assert main([*args, "--out", str(foreign)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ambitab-gym build: ") and "not a corpus folder" in err
    assert "error:" not in err
    assert main(["build", "bird", "--source", str(source), "--llm-url", "http://x"]) == 2
    assert capsys.readouterr().err == "ambitab-gym build: --llm-url and --model go together\n"
