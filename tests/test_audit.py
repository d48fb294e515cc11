"""The oracle-response audit: items against the stored turns, marks into the results store and
into the report's audited share, refusals of bad marks files, and the trust boundary (nothing an
agent receives imports the analyst-only report modules)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ambitab_gym.cli import main
from ambitab_gym.corpora import load_corpus
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
from ambitab_gym.evaluation.audit import MARKS_FORMAT, item_key
from ambitab_gym.evaluation.report import write_report


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("audit") / "results.duckdb"
    run_campaign(
        CampaignConfig("AmbiTab-TACO-v0", asker="full", seeds=(0, 1), limit=6), path, progress=False
    )
    return path


def credited_turns(path: Path) -> set[tuple[str, str, str]]:
    """(record, credited ambiguity, answer) of every credited turn, read with plain SQL."""
    with duckdb.connect(str(path), read_only=True) as db:
        rows = db.execute("SELECT record_id, dialogue FROM episodes").fetchall()
    out = set()
    for record_id, dialogue in rows:
        for turn in json.loads(dialogue):
            for credit in turn["credits"]:
                out.add((record_id, credit, turn["answer"]))
    return out


def page_items(page: Path) -> list[dict]:
    text = page.read_text("utf-8")
    found = re.search(r'<script type="application/json" id="audit-data">(.*?)</script>', text, re.S)
    assert found, "no embedded audit data"
    return json.loads(found.group(1))["items"]


def marks_file(path: Path, items: list[dict], marks: list[str], **extra) -> Path:
    data = {
        "format": MARKS_FORMAT,
        "version": 1,
        "auditor": "tester",
        "marks": [
            {
                **{k: it[k] for k in ("item_id", "oracle", "corpus", "record_id", "ambiguity_id")},
                "answer": it["answer"],
                "resolution": it["resolution"],
                "mark": mark,
                "note": "",
            }
            for it, mark in zip(items, marks, strict=False)
        ],
        **extra,
    }
    path.write_text(json.dumps(data), "utf-8")
    return path


def audit_table(html: Path) -> dict[tuple[str, str], dict]:
    """Rows of ``<table id="audit">``: (oracle, corpus) -> share and mark counts."""
    text = html.read_text("utf-8")
    body = text.split('<table id="audit">', 1)[1].split("</table>", 1)[0]
    out = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        counts = dict(re.findall(r'data-mark="(\w+)" data-count="(\d+)"', row))
        share = re.search(r'data-share="([^"]*)"', row).group(1)
        out[(cells[0], cells[1])] = {
            "items": int(cells[2]),
            "audited": int(cells[3].split(" ")[0]),
            "share": None if share == "None" else float(share),
            **{k: int(v) for k, v in counts.items()},
        }
    return out


def test_items_are_the_credited_answers(results, tmp_path, capsys):
    page = tmp_path / "audit.html"
    assert main(["audit", str(results), "--out", str(page)]) == 0
    printed = capsys.readouterr().out
    items = page_items(page)
    want = credited_turns(results)
    assert want and {(i["record_id"], i["ambiguity_id"], i["answer"]) for i in items} == want
    assert f"wrote the audit page of {len(want)} credited answer(s)" in printed
    corpus = load_corpus("AmbiTab-TACO-v0")
    for item in items:
        ambiguity = {a.id: a for a in corpus.record(item["record_id"]).ambiguities}[
            item["ambiguity_id"]
        ]
        assert item["resolution"] == ambiguity.resolution
        assert item["oracle"] == "deterministic" and item["corpus"] == "TACO"
        assert item["item_id"] == item_key(
            "deterministic", "TACO", item["record_id"], item["ambiguity_id"], item["answer"]
        )
    # each answer was given in both seeds (and in the asker and full conditions)
    assert all(item["episodes"] >= 2 for item in items)


def test_marks_round_trip_into_store_and_report(results, tmp_path, capsys):
    page = tmp_path / "audit.html"
    assert main(["audit", str(results), "--out", str(page)]) == 0
    items = page_items(page)
    first = marks_file(tmp_path / "m1.json", items, ["faithful", "wrong", "reveals_more"])
    assert main(["audit", str(results), "--import", str(first), "--json"]) == 0
    shares = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [(r["audited"], r["items"]) for r in shares] == [(3, len(items))]
    with ResultsStore(results) as store:
        marks = store.audit_marks()
    assert {k: v["mark"] for k, v in marks.items()} == {
        items[0]["item_id"]: "faithful",
        items[1]["item_id"]: "wrong",
        items[2]["item_id"]: "reveals_more",
    }
    assert {v["auditor"] for v in marks.values()} == {"tester"}

    # a later mark of the same answer replaces the earlier one
    second = marks_file(tmp_path / "m2.json", items[1:2], ["faithful"])
    assert main(["audit", str(results), "--import", str(second)]) == 0
    files = write_report(results, tmp_path / "report", figures=False)
    row = audit_table(files.html)[("deterministic", "TACO")]
    assert row == {
        "items": len(items),
        "audited": 3,
        "share": pytest.approx(3 / len(items)),
        "faithful": 2,
        "reveals_more": 1,
        "wrong": 0,
    }
    assert files.audit[0]["faithful_share"] == pytest.approx(2 / 3)

    # the page written now starts from the stored marks
    assert main(["audit", str(results), "--out", str(page)]) == 0
    stored = json.loads(
        re.search(r'id="audit-data">(.*?)</script>', page.read_text("utf-8"), re.S).group(1)
    )["stored"]
    assert {k: v["mark"] for k, v in stored.items()} == {
        items[0]["item_id"]: "faithful",
        items[1]["item_id"]: "faithful",
        items[2]["item_id"]: "reveals_more",
    }


def test_bad_marks_files_are_refused_whole(results, tmp_path, capsys):
    page = tmp_path / "audit.html"
    assert main(["audit", str(results), "--out", str(page)]) == 0
    items = page_items(page)
    with ResultsStore(results) as store:
        before = store.audit_marks()

    bad = marks_file(tmp_path / "bad.json", items[:2], ["faithful", "maybe"])
    assert main(["audit", str(results), "--import", str(bad)]) == 2
    assert "'maybe', not one of faithful, reveals_more, wrong" in capsys.readouterr().err

    edited = json.loads(marks_file(tmp_path / "e.json", items[:2], ["wrong", "wrong"]).read_text())
    edited["marks"][1]["answer"] = "a different answer"
    (tmp_path / "e.json").write_text(json.dumps(edited))
    assert main(["audit", str(results), "--import", str(tmp_path / "e.json")]) == 2
    assert "do not match its item id" in capsys.readouterr().err

    (tmp_path / "other.json").write_text(json.dumps({"marks": []}))
    assert main(["audit", str(results), "--import", str(tmp_path / "other.json")]) == 2
    assert "not an audit marks file" in capsys.readouterr().err

    with ResultsStore(results) as store:
        assert store.audit_marks() == before  # nothing of a refused file was stored


def test_script_json_cannot_close_its_element(tmp_path):
    from ambitab_gym.evaluation.browser import script_json

    text = script_json({"q": "</script><script>alert(1)</script>", "a": "x & <!-- y \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"q": "</script><script>alert(1)</script>", "a": "x & <!-- y \u2028"}


def test_agent_side_never_imports_the_report():
    """The env, the wrappers, the policies and the trainer adapters (everything that builds what
    an agent reads) load without the analyst-only report, browser and audit modules."""
    code = (
        "import json, sys, gymnasium as gym, ambitab_gym\n"
        "import ambitab_gym.wrappers, ambitab_gym.policies.scripted, ambitab_gym.play\n"
        "import ambitab_gym.integrations.common\n"
        "env = gym.make('AmbiTab-Bird-v0')\n"
        "env = ambitab_gym.wrappers.ChatMessages(env)\n"
        "env.reset(seed=0)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ambitab_gym.'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(json.loads(out.strip().splitlines()[-1]))
    assert "ambitab_gym.wrappers.chat" in loaded  # the check saw the agent-side modules
    forbidden = {
        "ambitab_gym.evaluation.report",
        "ambitab_gym.evaluation.report_figures",
        "ambitab_gym.evaluation.browser",
        "ambitab_gym.evaluation.audit",
    }
    assert not loaded & forbidden, loaded & forbidden
