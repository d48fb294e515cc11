"""``ambitab-gym export RESULTS --jsonl`` and the ``datasets`` loader (issue 17, item 5).

Campaigns are real: ``ambitab-gym evaluate`` on the bundled Bird sample writes a DuckDB results
file; the expected rows are read from that file with DuckDB directly (not through the store
that the export uses), and the export's lines are compared with them. The loader is tested
with the installed ``datasets`` package (the ``test`` extra installs it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from ambitab_gym.cli import main
from ambitab_gym.evaluation.export import export_jsonl, load_dataset, write_jsonl
from ambitab_gym.evaluation.store import EPISODE_COLUMNS, ResultsStore

DOCS = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
KEY = ("campaign_id", "condition", "seed", "record_id")


def _strict(line: str) -> dict:
    """Parse one line as strict JSON (NaN and Infinity are not JSON)."""

    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    return json.loads(line, parse_constant=refuse)


def _stored(results: Path) -> dict[tuple, dict]:
    """Every episode row of the file, read with DuckDB, keyed by its primary key."""
    with duckdb.connect(str(results), read_only=True) as db:
        json_columns = [
            name for name, kind, *_ in db.execute("DESCRIBE episodes").fetchall() if kind == "JSON"
        ]
        cursor = db.execute(f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes")
        rows = [dict(zip(EPISODE_COLUMNS, row, strict=True)) for row in cursor.fetchall()]
    assert {"dialogue", "timings"} <= set(json_columns)
    for row in rows:
        for column in set(json_columns) & set(EPISODE_COLUMNS):
            row[column] = None if row[column] is None else json.loads(row[column])
    return {tuple(row[k] for k in KEY): row for row in rows}


def _campaign_ids(results: Path) -> list[str]:
    with duckdb.connect(str(results), read_only=True) as db:
        return [r[0] for r in db.execute("SELECT campaign_id FROM campaigns").fetchall()]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """Two evaluate campaigns (full and generic askers) over 4 Bird records and 2 seeds."""
    path = tmp_path_factory.mktemp("export") / "results.duckdb"
    for asker in ("full", "generic"):
        status = main(
            [
                "evaluate",
                "AmbiTab-Bird-v0",
                "--asker",
                asker,
                "--limit",
                "4",
                "--seeds",
                "2",
                "--results",
                str(path),
                "--no-progress",
            ]
        )
        assert status == 0
    return path


def test_export_writes_every_stored_episode(results, tmp_path, capsys):
    out = tmp_path / "nested" / "folder" / "episodes.jsonl"  # missing folders are created
    capsys.readouterr()
    assert main(["export", str(results), "--jsonl", "--out", str(out)]) == 0
    stored = _stored(results)
    # 2 campaigns x 3 conditions x 2 seeds x 4 records
    assert len(stored) == 48
    lines = out.read_text("utf-8").splitlines()
    assert len(lines) == 48
    rows = [_strict(line) for line in lines]
    for row in rows:
        assert list(row) == list(EPISODE_COLUMNS)  # every stored field, in column order
    assert {tuple(row[k] for k in KEY): row for row in rows} == stored
    assert "wrote 48 episode(s) of 2 campaign(s)" in capsys.readouterr().out
    # the dialogue is data, not a JSON string: the full asker asked and was answered
    full = [r for r in rows if r["condition"] == "full" and r["m"] > 0]
    assert full and all(r["dialogue"] and r["dialogue"][0]["answer"] for r in full)
    assert all(isinstance(r["dialogue"][0]["credits"], list) for r in full)
    # campaigns in the file's order, each one's rows together
    order = [r["campaign_id"] for r in rows]
    assert order == sorted(order, key=_campaign_ids(results).index)


def test_default_path_campaign_filter_and_stdout(results, capsys):
    default = results.with_suffix(".jsonl")
    default.unlink(missing_ok=True)
    assert main(["export", str(results)]) == 0  # --jsonl is the default format
    assert len(default.read_text("utf-8").splitlines()) == 48

    first, second = _campaign_ids(results)
    capsys.readouterr()
    assert main(["export", str(results), "--campaign", second[:6], "--out", "-"]) == 0
    captured = capsys.readouterr()
    rows = [_strict(line) for line in captured.out.splitlines()]
    assert len(rows) == 24 and {r["campaign_id"] for r in rows} == {second}
    assert "wrote 24 episode(s) of 1 campaign(s) to standard output" in captured.err

    capsys.readouterr()
    assert (
        main(["export", str(results), "--campaign", first, "--campaign", second, "--out", "-"]) == 0
    )
    assert len(capsys.readouterr().out.splitlines()) == 48


def test_with_campaign_adds_the_stored_campaign_row(results, tmp_path):
    out = tmp_path / "with-campaign.jsonl"
    assert main(["export", str(results), "--with-campaign", "--out", str(out)]) == 0
    with duckdb.connect(str(results), read_only=True) as db:
        cursor = db.execute("SELECT * FROM campaigns")
        names = [d[0] for d in cursor.description]
        stored = {}
        for values in cursor.fetchall():
            row = dict(zip(names, values, strict=True))
            row["config"] = json.loads(row["config"])
            campaign_id = row.pop("campaign_id")
            stored[campaign_id] = {k: v for k, v in row.items() if k != "created_at"}
    rows = [_strict(line) for line in out.read_text("utf-8").splitlines()]
    assert len(rows) == 48
    for row in rows:
        assert list(row) == [*EPISODE_COLUMNS, "campaign"]
        assert row["campaign"] == stored[row["campaign_id"]]
    assert {r["campaign"]["config"]["asker"] for r in rows} == {"full", "generic"}
    assert {r["campaign"]["corpus_origin"] for r in rows} == {"bundled"}


def test_failures_are_usage_errors(results, tmp_path, capsys):
    capsys.readouterr()
    assert main(["export", str(tmp_path / "missing.duckdb")]) == 2
    assert "no results file at" in capsys.readouterr().err

    assert main(["export", str(results), "--campaign", "zzzz", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "no campaign in the results file matches 'zzzz'" in err
    assert all(c in err for c in _campaign_ids(results))  # names the ones there are
    assert not (tmp_path / "x").exists()

    assert main(["export", str(results), "--out", str(results)]) == 2
    assert "is the results file itself" in capsys.readouterr().err

    not_duckdb = tmp_path / "notes.duckdb"
    not_duckdb.write_text("not a database")
    assert main(["export", str(not_duckdb), "--out", str(tmp_path / "y.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("ambitab-gym export: cannot open results file")
    assert not (tmp_path / "y.jsonl").exists()
    assert not list(tmp_path.glob(".y.jsonl.*"))  # no temporary file left behind


def test_non_finite_numbers_and_odd_text_stay_strict_json(tmp_path):
    path = tmp_path / "r.duckdb"
    odd = 'quote " backslash \\ newline \n tab \t emoji \U0001f600 nul-free'
    with ResultsStore(path) as store:
        store.add_campaign("c1", {}, kind="evaluate", corpus="bird")
        store.add_episode(
            {
                "campaign_id": "c1",
                "condition": "asker",
                "seed": 0,
                "record_id": "r1",
                "precision": float("nan"),
                "recall": float("inf"),
                "f1": 0.5,
                "sql": odd,
                "dialogue": [{"question": odd, "answer": "a", "credits": []}],
            }
        )
    out = tmp_path / "r.jsonl"
    summary = export_jsonl(path, out)
    assert (summary.path, summary.episodes, summary.campaigns) == (out, 1, ("c1",))
    (row,) = [_strict(line) for line in out.read_text("utf-8").splitlines()]
    assert row["precision"] is None and row["recall"] is None and row["f1"] == 0.5
    assert row["sql"] == odd and row["dialogue"][0]["question"] == odd


def test_write_jsonl_one_line_per_row():
    import io

    handle = io.StringIO()
    assert write_jsonl([{"a": 1}, {"a": [1.5, float("-inf")]}], handle) == 2
    assert handle.getvalue() == '{"a": 1}\n{"a": [1.5, null]}\n'


def test_docs_list_every_exported_field():
    text = DOCS.read_text("utf-8")
    match = re.search(r"^## `ambitab-gym export.*?(?=^## |\Z)", text, re.S | re.M)
    assert match, "docs/cli.md has no export section"
    first_cells = re.findall(r"^\| ([^|]+) \|", match.group(0), re.M)
    documented = {name for cell in first_cells for name in re.findall(r"`(\w+)`", cell)}
    assert documented >= set(EPISODE_COLUMNS), (
        f"fields of the export missing from docs/cli.md: {set(EPISODE_COLUMNS) - documented}"
    )


def test_datasets_loader_reads_the_export(results, tmp_path):
    datasets = pytest.importorskip("datasets")  # the test extra installs it
    out = tmp_path / "episodes.jsonl"
    export_jsonl(results, out)
    expected = _stored(results)
    ds = load_dataset(out, cache_dir=tmp_path / "hf-cache")
    assert isinstance(ds, datasets.Dataset)
    assert ds.num_rows == len(expected) == 48
    assert ds.column_names == list(EPISODE_COLUMNS)
    for row in ds:
        want = expected[tuple(row[k] for k in KEY)]
        for column in ("success", "precision", "recall", "f1", "stop_reason", "verdict_reason"):
            assert row[column] == want[column]
        assert [t["question"] for t in row["dialogue"]] == [t["question"] for t in want["dialogue"]]
        assert [sorted(t["credits"]) for t in row["dialogue"]] == [
            sorted(t["credits"]) for t in want["dialogue"]
        ]
    # the documented one-liner gives the same rows
    direct = datasets.load_dataset(
        "json", data_files=str(out), split="train", cache_dir=str(tmp_path / "hf-cache-2")
    )
    assert direct.to_list() == ds.to_list()


def test_datasets_loader_with_turns_whose_keys_differ(tmp_path):
    """LLM-oracle turns carry a route, guarded turns a shown answer; plain turns neither."""
    pytest.importorskip("datasets")
    path = tmp_path / "r.duckdb"
    plain = {"question": "What do you mean by top?", "answer": "the five best", "credits": ["top"]}
    routed = {
        "question": "Which year?",
        "answer": "2019",
        "credits": ["year"],
        "route": {"kind": "labeled", "argument": "year", "rationale": "asks about the year"},
        "answer_reveals_sql": True,
        "shown_answer": "[redacted]",
    }
    with ResultsStore(path) as store:
        store.add_campaign("c1", {}, kind="evaluate", corpus="bird")
        for i in range(40):
            dialogue = [plain] if i < 30 else [plain, routed]
            store.add_episode(
                {
                    "campaign_id": "c1",
                    "condition": "asker",
                    "seed": 0,
                    "record_id": f"r{i:02d}",
                    "success": float(i % 2),
                    "error": "llm_error" if i == 39 else None,
                    "dialogue": dialogue,
                    "timings": {"oracle_s": 0.1} if i < 20 else {"solver_s": 0.2},
                }
            )
    out = tmp_path / "r.jsonl"
    export_jsonl(path, out)
    ds = load_dataset(out, cache_dir=tmp_path / "hf-cache")
    assert ds.num_rows == 40
    assert ds[0]["dialogue"] == [plain]
    assert ds[39]["dialogue"] == [plain, routed]
    assert ds[39]["error"] == "llm_error" and ds[0]["error"] is None
    assert ds[25]["timings"]["solver_s"] == 0.2


def test_loader_names_a_missing_file(tmp_path):
    pytest.importorskip("datasets")
    with pytest.raises(ValueError, match="no export file at"):
        load_dataset(tmp_path / "missing.jsonl")


def test_the_export_is_as_readable_as_the_report(tmp_path, capsys):
    """0666 less the umask, as the report's files (a temporary file alone would be 0600)."""
    import os
    import stat

    results = tmp_path / "r.duckdb"
    with ResultsStore(results) as store:
        store.add_campaign("c1", {"asker": "full"}, kind="evaluate", corpus="bird")
        for condition in ("none", "asker", "full"):
            store.add_episode(
                {"campaign_id": "c1", "condition": condition, "seed": 0, "record_id": "r1",
                 "success": 1.0, "precision": 1.0, "recall": 1.0, "f1": 1.0, "dialogue": []}
            )  # fmt: skip
    old = os.umask(0o022)
    try:
        assert main(["export", str(results), "--out", str(tmp_path / "a.jsonl")]) == 0
        assert main(["report", str(results), "--out", str(tmp_path / "rep"), "--no-figures"]) == 0
        os.umask(0o027)
        assert main(["export", str(results), "--out", str(tmp_path / "b.jsonl")]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    mode = stat.S_IMODE
    assert mode((tmp_path / "a.jsonl").stat().st_mode) == 0o644
    assert mode((tmp_path / "rep" / "report.html").stat().st_mode) == 0o644
    assert mode((tmp_path / "b.jsonl").stat().st_mode) == 0o640
