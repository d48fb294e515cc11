"""The results store keeps every verdict reason and its bounded detail (issue 11).

A corpus of zero-ambiguity tasks on one SQLite database; a scripted solver reads the request
(the only thing it may see) and writes SQL chosen to end in one verdict reason per task. The
expected reason of each task is known from how its SQL is built, not from the verifier.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pytest
from tiny_corpus import SQL

from ambitab_gym.cli import main
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
from ambitab_gym.evaluation.store import MAX_STORED_SQL_CHARS
from ambitab_gym.verify.base import MAX_MESSAGE_CHARS

COUNT = "SELECT count(*) FROM staff"

# request -> (the SQL the solver writes, the verdict reason it must end in)
TASKS = {
    "match": (COUNT, "match"),
    "mismatch": ("SELECT 5", "mismatch"),  # 4 staff
    "syntax": ("SELEC nonsense FROM staff", "syntax"),
    "rejected": ("DROP TABLE staff", "rejected"),
    "runtime": ("SELECT abs(-9223372036854775807 - 1)", "runtime"),  # integer overflow
    "timeout": (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        "timeout",
    ),
    "rows": ("SELECT name FROM staff", "too_many_rows"),  # 4 rows, max_rows 3
    "empty": ("", "no_sql"),
    # the verifier's detail echoes the submitted SQL: a 50,000-character name must be cut
    "long": (f"SELECT {'x' * 50_000} FROM staff", "runtime"),
    # longer than the verifier's max_sql_length (100,000 characters)
    "huge": ("SELECT " + "1 + " * 30_000 + "1", "too_large"),
    # on a second database (the leakage campaign's specification randomization needs one)
    "other": (COUNT, "match"),
}
# tasks whose reason comes from the record, whatever the SQL
BROKEN = {
    "broken-reference": ("SELECT * FROM no_such_table", {}, "reference_error"),
    # a write task runs in the verifier's scratch copy: the same count matches
    "writes": (COUNT, {"preprocess_sql": ["UPDATE staff SET salary = 0"]}, "match"),
    # a PostgreSQL-only solution on DuckDB (DuckDB has no json_object_agg)
    "postgres-only": (
        "SELECT json_object_agg(name, salary) FROM staff",
        {"engine": "duckdb"},
        "unsupported",
    ),
}
EXPECTED = {f"T-{name}": reason for name, (_, reason) in TASKS.items()} | {
    f"T-{name}": reason for name, (_, _, reason) in BROKEN.items()
}
LIMITS = {"timeout_s": 0.3, "max_rows": 3}


def _record(name: str, reference: str, extra: dict) -> dict:
    database = "hr_copy" if name == "other" else "hr"
    return {
        "id": f"T-{name}",
        "avt_id": f"avt-{name}",
        "corpus": "verdicts",
        "split": "all",
        "spec": {"request": f"Task {name}: how many staff are there?", "database": database},
        "ambiguities": [],
        "verification": {"engine": "sqlite", "database": database, "reference_sql": reference}
        | extra,
    }


def write_verdict_corpus(folder: Path) -> Path:
    (folder / "databases").mkdir(parents=True)
    (folder / "databases" / "hr.sql").write_text(SQL)
    records = [_record(name, COUNT, {}) for name in TASKS] + [
        _record(name, reference, extra) for name, (reference, extra, _) in BROKEN.items()
    ]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    manifest = {
        "name": "verdicts",
        "version": "0.0.1",
        "oracle": "intent",
        "databases": {
            name: {"file": "databases/hr.sql", "sha256": hashlib.sha256(SQL.encode()).hexdigest()}
            for name in ("hr", "hr_copy")
        },
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


class ScriptedSolver:
    """Writes the SQL of the task named in the request (it sees only the public view)."""

    def solve(self, view) -> str:
        name = view.spec.request.removeprefix("Task ").split(":", 1)[0]
        if name in TASKS:
            return TASKS[name][0]
        return COUNT


@pytest.fixture
def corpus(tmp_path):
    return write_verdict_corpus(tmp_path / "verdicts")


def test_every_verdict_reason_is_stored_and_counted(corpus, tmp_path):
    config = CampaignConfig(
        str(corpus), asker="none", solver="test_store_verdicts:ScriptedSolver", limits=LIMITS
    )
    summary = run_campaign(config, tmp_path / "r.duckdb", progress=False)
    with ResultsStore(tmp_path / "r.duckdb") as store:
        rows = store.episodes(config.campaign_id)
    assert len(rows) == 3 * len(EXPECTED)
    for condition in ("none", "asker", "full"):
        stored = {r["record_id"]: r for r in rows if r["condition"] == condition}
        assert {rid: r["verdict_reason"] for rid, r in stored.items()} == EXPECTED
        assert {rid: r["success"] for rid, r in stored.items()} == {
            rid: float(reason == "match") for rid, reason in EXPECTED.items()
        }
        for rid, row in stored.items():
            detail = row["verdict_detail"]
            assert isinstance(detail, str) and len(detail) <= MAX_MESSAGE_CHARS, rid
            assert (detail == "") == (EXPECTED[rid] == "match"), (rid, detail)
        assert stored["T-timeout"]["verdict_detail"] == "query ran longer than 0.3 s"
        assert stored["T-rows"]["verdict_detail"] == "result has more than 3 rows"
        assert stored["T-long"]["verdict_detail"].endswith("more characters cut]")

    counts: dict[str, int] = {}
    for reason in EXPECTED.values():
        counts[reason] = counts.get(reason, 0) + 1
    assert set(counts) == {
        "match",
        "mismatch",
        "syntax",
        "rejected",
        "runtime",
        "timeout",
        "too_many_rows",
        "too_large",
        "no_sql",
        "reference_error",
        "unsupported",
    }
    assert counts["runtime"] == 2 and counts["match"] == 3
    expected_counts = {c: dict(sorted(counts.items())) for c in ("asker", "full", "none")}
    assert summary.verdict_reasons == expected_counts
    assert summary.to_json()["verdict_reasons"] == expected_counts


def test_evaluate_json_counts_reasons(corpus, tmp_path, capsys):
    # the command line has no limits options: the default 5 s / 100,000 rows apply, so the
    # timeout task is left out (an unbounded recursive query) and the rows task matches no
    # reference (4 rows against a count) - a mismatch.
    status = main(
        [
            "evaluate",
            str(corpus),
            "--asker",
            "none",
            "--solver",
            "test_store_verdicts:ScriptedSolver",
            "--limit",
            "4",
            "--results",
            str(tmp_path / "r.duckdb"),
            "--json",
        ]
    )
    assert status == 0
    out = capsys.readouterr().out
    data = json.loads(out.strip().splitlines()[-1])
    first_four = {"match": 1, "mismatch": 1, "rejected": 1, "syntax": 1}
    assert data["verdict_reasons"] == {c: first_four for c in ("asker", "full", "none")}
    assert "verdict reasons (none): match 1, mismatch 1, rejected 1, syntax 1" in out


def test_stored_text_is_bounded_and_repaired(tmp_path):
    with ResultsStore(tmp_path / "r.duckdb") as store:
        store.add_episode(
            {
                "campaign_id": "c",
                "condition": "asker",
                "seed": 0,
                "record_id": "r",
                "verdict_reason": "syntax",
                "verdict_detail": "near " + "y" * 20_000,
                "error": "E" * 5_000,
                "sql": "S" * (3 * MAX_STORED_SQL_CHARS),
                "dialogue": [{"question": "a" + chr(0xD800) + "b", "answer": "x", "credits": []}],
            }
        )
        (row,) = store.episodes("c")
    assert len(row["verdict_detail"]) <= MAX_MESSAGE_CHARS and row["verdict_detail"][:6] == "near y"
    assert len(row["error"]) <= MAX_MESSAGE_CHARS
    assert MAX_STORED_SQL_CHARS - 100 < len(row["sql"]) <= MAX_STORED_SQL_CHARS
    assert row["dialogue"][0]["question"] == "a\ufffdb"


def test_results_file_without_the_detail_column_still_opens(tmp_path):
    """A results file written before ``verdict_detail`` existed: the column is added."""
    path = tmp_path / "old.duckdb"
    old_columns = (
        "campaign_id VARCHAR, condition VARCHAR, seed INTEGER, record_id VARCHAR, avt_id VARCHAR, "
        "split VARCHAR, m INTEGER, n_questions INTEGER, precision DOUBLE, recall DOUBLE, "
        "f1 DOUBLE, success DOUBLE, stop_reason VARCHAR, verdict_reason VARCHAR, error VARCHAR, "
        "sql VARCHAR, dialogue JSON, timings JSON, elapsed_s DOUBLE, "
        "finished_at TIMESTAMP DEFAULT current_timestamp, "
        "PRIMARY KEY (campaign_id, condition, seed, record_id)"
    )
    db = duckdb.connect(str(path))
    db.execute(f"CREATE TABLE episodes ({old_columns})")
    db.execute(
        "INSERT INTO episodes (campaign_id, condition, seed, record_id, success, verdict_reason) "
        "VALUES ('old', 'none', 0, 'r1', 0.0, NULL), ('old', 'none', 0, 'r2', 1.0, 'match')"
    )
    db.close()
    with ResultsStore(path) as store:
        rows = store.episodes("old")
        store.add_episode(
            {
                "campaign_id": "new",
                "condition": "none",
                "seed": 0,
                "record_id": "r1",
                "success": 0.0,
                "verdict_reason": "timeout",
                "verdict_detail": "query ran long",
            }
        )
        new = store.episodes("new")
    assert [(r["record_id"], r["verdict_reason"], r["verdict_detail"]) for r in rows] == [
        ("r1", None, None),
        ("r2", "match", None),
    ]
    assert new[0]["verdict_detail"] == "query ran long"
    from ambitab_gym.evaluation.summary import summarize_campaign as summarize

    assert summarize(rows).verdict_reasons == {"none": {"match": 1, "unrecorded": 1}}


def test_limits_are_part_of_the_campaign_id_only_when_given():
    plain = CampaignConfig("AmbiTab-Bird-v0")
    assert plain.campaign_id == CampaignConfig("AmbiTab-Bird-v0", limits=None).campaign_id
    assert plain.campaign_id != CampaignConfig("AmbiTab-Bird-v0", limits=LIMITS).campaign_id
    with pytest.raises(ValueError, match="invalid verifier limits"):
        CampaignConfig("AmbiTab-Bird-v0", limits={"timeout": 1})


def test_leakage_campaign_stores_verdict_reasons_too(corpus, tmp_path):
    from ambitab_gym.diagnostics import LeakageConfig, run_leakage
    from ambitab_gym.diagnostics.estimates import RECALL_ONLY

    config = LeakageConfig(
        str(corpus), asker="none", solver="test_store_verdicts:ScriptedSolver", limit=4
    )
    run_leakage(config, tmp_path / "r.duckdb", progress=False, resamples=10)
    with ResultsStore(tmp_path / "r.duckdb") as store:
        rows = store.episodes(config.campaign_id)
    first_four = {
        f"T-{name}": TASKS[name][1] for name in ("match", "mismatch", "syntax", "rejected")
    }
    by_condition: dict[str, dict[str, str | None]] = {}
    for row in rows:
        by_condition.setdefault(row["condition"], {})[row["record_id"]] = row["verdict_reason"]
    assert set(by_condition) == set(config.conditions)
    for condition, reasons in by_condition.items():
        if condition in RECALL_ONLY:  # ask-only runs: nothing was verified
            assert reasons == dict.fromkeys(first_four), condition
        else:
            assert reasons == first_four, condition
