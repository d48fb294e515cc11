"""Single-reading AVTs: the offline solver returns only the reading the dialogue revealed.

Also the bundled BIRD-Interact sample, shaped like upstream: a third of its AVTs hold one
reading, and its Management tasks carry upstream-style test cases that the verifier runs.

The built EW-Bird, BIRD-Interact and TACO corpora store one record per AVT. Before issue 14 the
InterpretationSolver returned that record's SQL whatever the dialogue said, so SR_none = SR_full
= 100 %, the asking gain was 0 and no leakage diagnostic could move. These tests build a corpus
of single-reading AVTs on two databases (seven with m >= 1, two zero-ambiguity controls) and check the baselines
and a leakage diagnostic on it, each against a value worked out by hand.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from tiny_corpus import SQL

from ambitab_gym.cli import main
from ambitab_gym.corpora import Corpus, load_corpus
from ambitab_gym.diagnostics import LeakageConfig, run_leakage
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
from ambitab_gym.policies.interpretation import NOT_REVEALED, InterpretationSolver
from ambitab_gym.trajectory import DialogueTurn, PublicView
from ambitab_gym.validate import validate_corpus
from ambitab_gym.verify import Verifier
from ambitab_gym.verify.taskrun import split_statements
from ambitab_gym.verify.verifier import is_write_task

RESP = ("asker:actual", "asker:hybrid")


def _amb(aid: str, term: str, resolution: str, response: str) -> dict:
    return {
        "id": aid,
        "term": term,
        "kind": "critical",
        "resolution": resolution,
        "response": response,
    }


def _record(rid: str, request: str, ambiguities: list[dict], sql: str, db: str = "hr") -> dict:
    return {
        "id": rid,
        "avt_id": f"avt-{rid}",
        "corpus": "single",
        "split": "all",
        "spec": {"request": request, "database": db},
        "ambiguities": ambiguities,
        "verification": {"engine": "sqlite", "database": db, "reference_sql": sql},
        "source": {"kind": "test"},
    }


# a second database: specification randomization draws donors from another database
SHOP_SQL = """
CREATE TABLE orders (id INTEGER, total INTEGER, status TEXT);
INSERT INTO orders VALUES (1, 50, 'open'), (2, 150, 'shipped'), (3, 400, 'open');
"""


# staff: Ann 100/50 north, Bob 120/0 south, Cid 90/80 north, Dee 110/10 south (salary/bonus)
RECORDS = [
    _record(
        "S1",
        "Who is the top earner?",
        [_amb("earn", "top earner", "Rank by salary plus bonus.", "Salary plus bonus counts.")],
        "SELECT name FROM staff ORDER BY salary + bonus DESC LIMIT 1",
    ),
    _record(
        "S2",
        "List the staff of the region with their pay.",
        [
            _amb("reg", "region", "The south region.", "I mean the south."),
            _amb("pay", "pay", "Salary plus bonus.", "Pay includes the bonus."),
        ],
        "SELECT name, salary + bonus FROM staff WHERE region = 'south'",
    ),
    _record(
        "S3",
        "Which staff receive a high bonus?",
        [_amb("high", "high bonus", "A bonus above 40.", "Anything over 40.")],
        "SELECT name FROM staff WHERE bonus > 40",
    ),
    _record(
        "S4",
        "What is the typical salary in the north?",
        [_amb("typ", "typical salary", "The mean salary.", "Just the average.")],
        "SELECT AVG(salary) FROM staff WHERE region = 'north'",
    ),
    _record(
        "S5",
        "Who are the low earners?",
        [_amb("low", "low earners", "Salary below 100.", "Under 100 in salary.")],
        "SELECT name FROM staff WHERE salary < 100",
    ),
    _record(
        "S6",
        "How many staff work in the big region?",
        [_amb("big", "big region", "The north region.", "The north one.")],
        "SELECT COUNT(*) FROM staff WHERE region = 'north'",
    ),
    _record(
        "S7",
        "Which orders are large?",
        [_amb("large", "large", "A total above 100.", "More than 100 in total.")],
        "SELECT id FROM orders WHERE total > 100",
        db="shop",
    ),
    _record("Z1", "How many staff are there?", [], "SELECT COUNT(*) FROM staff"),
    _record("Z2", "What is the total salary bill?", [], "SELECT SUM(salary) FROM staff"),
]
SINGLE = [r["id"] for r in RECORDS if r["ambiguities"]]
ZERO = [r["id"] for r in RECORDS if not r["ambiguities"]]


def write_single_reading_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "databases").mkdir(exist_ok=True)
    databases = {}
    for name, script in (("hr", SQL), ("shop", SHOP_SQL)):
        (folder / "databases" / f"{name}.sql").write_text(script)
        digest = hashlib.sha256(script.encode()).hexdigest()
        databases[name] = {"file": f"databases/{name}.sql", "sha256": digest}
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    manifest = {
        "name": "single",
        "version": "0.0.1",
        "oracle": "intent",
        "engine": "sqlite",
        "databases": databases,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_single_reading_corpus(tmp_path_factory.mktemp("single") / "single")


@pytest.fixture(scope="module")
def corpus(folder):
    return Corpus(folder)


def test_the_corpus_is_what_the_tests_assume(corpus):
    assert all(len(records) == 1 for records in corpus.avts.values())
    assert [r.id for r in corpus.records if r.m > 0] == SINGLE and len(SINGLE) == 7
    verifier = Verifier(corpus.open_engine)
    try:  # every reference executes, returns rows and verifies itself
        for record in corpus.records:
            assert verifier.reference_rows(record), record.id
            assert verifier.verify(record, record.verification.reference_sql).success
    finally:
        verifier.close()


def _view(corpus, record_id, answers=(), question="What do you mean?"):
    record = corpus.record(record_id)
    turns = tuple(DialogueTurn(question, answer) for answer in answers)
    return record, PublicView(corpus.public_spec(record), turns)


def test_solver_returns_a_single_reading_only_once_every_ambiguity_is_revealed(corpus):
    solver = InterpretationSolver(corpus)
    record, view = _view(corpus, "S2")
    assert solver.solve(view) == NOT_REVEALED == ""
    assert solver.choose(view) is None
    # one of two ambiguities revealed (the frozen response): still nothing
    _, view = _view(corpus, "S2", ["I mean the south."])
    assert solver.solve(view) == ""
    # both revealed, one by its frozen response and one by its resolution, in any case/spacing
    _, view = _view(corpus, "S2", ["I mean the south.", "It is  SALARY plus bonus."])
    assert solver.solve(view) == record.verification.reference_sql
    # the asker naming a reading in its question reveals nothing: only answers count
    _, view = _view(
        corpus,
        "S2",
        ["Sorry, I cannot help with that."],
        question="The south region, pay is salary plus bonus?",
    )
    assert solver.solve(view) == ""
    # a zero-ambiguity control needs no clarification
    zero, view = _view(corpus, "Z1")
    assert solver.solve(view) == zero.verification.reference_sql


def test_sr_none_is_the_share_of_zero_ambiguity_records_and_sr_full_is_one(folder, tmp_path):
    config = CampaignConfig(str(folder), asker="generic", seeds=(0, 1))
    summary = run_campaign(config, tmp_path / "r.duckdb", progress=False)
    assert summary.sr["none"].mean == pytest.approx(len(ZERO) / len(RECORDS))  # 2/9
    assert summary.sr["full"].mean == pytest.approx(1.0)
    # generic questions are refused: nothing is revealed, the asker gains nothing
    assert summary.sr["asker"].mean == pytest.approx(len(ZERO) / len(RECORDS))
    assert summary.gain.mean == pytest.approx(0.0)
    assert summary.gap.mean == pytest.approx(len(SINGLE) / len(RECORDS))
    with ResultsStore(tmp_path / "r.duckdb") as store:
        rows = store.episodes()
    none = {r["record_id"]: r for r in rows if r["condition"] == "none" and r["seed"] == 0}
    assert {k for k, r in none.items() if r["success"] == 1.0} == set(ZERO)
    assert all(none[k]["verdict_reason"] == "no_sql" for k in SINGLE)


def test_leaky_sql_responder_shows_in_dj_resp_with_the_blind_probe(folder, tmp_path):
    """Hand value: under the leaky oracle every generic question of the seven m >= 1 records is
    answered with the reference SQL, which dialogue-sql-blind copies (success); under
    (match, resp*) the refusals reveal nothing and the blind fallback submits no SQL (failure);
    the two m = 0 records skip asking and succeed in both runs. dJ_resp = 7/9 = 77.8 points."""
    config = LeakageConfig(
        str(folder),
        asker="generic",
        oracle="leaky-sql-responder",
        solver="dialogue-sql-blind",
        seeds=(0, 1),
        conditions=RESP,
    )
    with ResultsStore(tmp_path / "l.duckdb") as store:
        report = run_leakage(config, store, progress=False, resamples=2000)
    d = report.diagnostics["d_j_resp"]
    assert d.mean == pytest.approx(len(SINGLE) / len(RECORDS))
    assert d.interval.lo > 0 and d.interval.hi <= 1.0
    assert d.per_seed == {0: pytest.approx(7 / 9), 1: pytest.approx(7 / 9)}


def test_leakage_command_reports_dj_resp_excluding_zero(folder, tmp_path, capsys):
    status = main(
        [
            "leakage",
            str(folder),
            "--oracle",
            "leaky-sql-responder",
            "--asker",
            "generic",
            "--solver",
            "dialogue-sql-blind",
            "--seeds",
            "1",
            "--results",
            str(tmp_path / "c.duckdb"),
            "--json",
        ]
    )
    assert status == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert data["d_j_resp"]["mean"] == pytest.approx(100 * 7 / 9)
    assert data["d_j_resp"]["lo"] > 0
    # pi_full^adv under O* reveals everything, yet the blind probe ignores answers: the leaked
    # SQL shows in dJ_full as well
    assert data["d_j_full"]["mean"] == pytest.approx(100 * 7 / 9) and data["d_j_full"]["lo"] > 0


def test_reference_oracle_leaks_nothing_on_single_readings(folder, tmp_path):
    config = LeakageConfig(
        str(folder), asker="full", solver="dialogue-sql-blind", seeds=(0,), conditions=RESP
    )
    with ResultsStore(tmp_path / "z.duckdb") as store:
        report = run_leakage(config, store, progress=False, resamples=200)
    assert report.to_json()["d_j_resp"] == {"mean": 0.0, "lo": 0.0, "hi": 0.0}


# -- the bundled BIRD-Interact sample: single readings and Management tasks as upstream has them


WRONG_UPDATES = {  # a plausible but wrong solution of each bundled Management task
    # a 50 % on-time threshold instead of 80 %: supplier 1 (69 % on time) stays preferred
    "bird_interact-0041": "UPDATE suppliers SET is_preferred = FALSE WHERE supplier_id IN ("
    "SELECT supplier_id FROM purchase_orders WHERE received_date IS NOT NULL "
    "GROUP BY supplier_id "
    "HAVING AVG(CASE WHEN received_date <= expected_date THEN 1.0 ELSE 0.0 END) < 0.5)",
    # every A/B observation counts, and idle telescopes drop out of the view
    "bird_interact-0042": "CREATE VIEW vw_telescope_workload AS SELECT t.name, "
    "COUNT(*) AS usable_observations FROM telescopes t JOIN observations o "
    "ON o.telescope_id = t.telescope_id WHERE o.quality_flag IN ('A', 'B') "
    "GROUP BY t.telescope_id, t.name",
    # total damage instead of damage per minute
    "bird_interact-0043": "ALTER TABLE player_match_stats ADD COLUMN dpm DOUBLE PRECISION; "
    "UPDATE player_match_stats SET dpm = damage_dealt",
    # every cancelled order, not only those placed before 2024
    "bird_interact-0044": "UPDATE purchase_orders SET status = 'Archived' "
    "WHERE status = 'Cancelled'; DELETE FROM po_lines WHERE po_id IN "
    "(SELECT po_id FROM purchase_orders WHERE status = 'Archived')",
}


@pytest.fixture(scope="module")
def bundled():
    corpus = load_corpus("bird_interact")
    verifier = Verifier(corpus.open_engine)
    yield corpus, verifier
    verifier.close()


def test_bundled_sample_validates_and_a_third_of_its_avts_are_single_readings(bundled):
    corpus, _ = bundled
    assert validate_corpus(corpus) == []
    single = [a for a, records in corpus.avts.items() if len(records) == 1 and records[0].m >= 1]
    assert 3 * len(single) >= len(corpus.avts), (len(single), len(corpus.avts))
    counts = corpus.manifest.model_extra["counts"]
    assert counts["single_reading_avts"] == len(single)
    assert counts["management_tasks"] == len(WRONG_UPDATES)


def test_bundled_management_tasks_are_upstream_shaped(bundled):
    corpus, _ = bundled
    tasks = [r for r in corpus.records if r.source.get("category") == "Management"]
    assert sorted(r.id for r in tasks) == sorted(WRONG_UPDATES)
    for record in tasks:
        assert is_write_task(record) and record.m >= 1 and len(corpus.siblings(record)) == 1
        assert record.source["conditions"] == {"decimal": -1, "distinct": False}
        (test,) = record.verification.test_cases
        assert test.startswith("\ndef test_case(pred_sqls, sol_sqls, db_name, conn):\n")
        assert "execute_queries(" in test
    # snapshots taken by preprocess_sql and dropped by clean-up, where a test needs the state
    # from before the update; multi-statement solutions
    with_snapshot = {r.id for r in tasks if r.verification.preprocess_sql}
    assert with_snapshot == {"bird_interact-0041", "bird_interact-0044"}
    assert all(r.verification.cleanup_sql for r in tasks if r.id in with_snapshot)
    several = {r.id for r in tasks if len(split_statements(r.verification.reference_sql)) > 1}
    assert several == {"bird_interact-0043", "bird_interact-0044"}


@pytest.mark.parametrize("record_id", sorted(WRONG_UPDATES))
def test_bundled_management_solution_passes_and_a_wrong_update_fails(bundled, record_id):
    corpus, verifier = bundled
    record = corpus.record(record_id)
    own = verifier.verify(record, record.verification.reference_sql)
    assert (own.success, own.reason) == (True, "match"), own
    wrong = verifier.verify(record, WRONG_UPDATES[record_id])
    assert (wrong.success, wrong.reason) == (False, "mismatch"), wrong
    # a plain SELECT changes nothing: the test cases fail too
    assert verifier.verify(record, "SELECT 1").reason == "mismatch"
    # the corpus database is untouched: the solution verifies again
    assert verifier.verify(record, record.verification.reference_sql).success


def test_bundled_sample_baselines(tmp_path):
    """SR_none = default readings of multi-reading AVTs + zero-ambiguity records; SR_full = 1."""
    corpus = load_corpus("bird_interact")
    expected_none = sum(
        1 for records in corpus.avts.values() if len(records) > 1 or records[0].m == 0
    ) / len(corpus.records)  # 12 / 38
    config = CampaignConfig("bird_interact", asker="generic", seeds=(0,))
    summary = run_campaign(config, tmp_path / "b.duckdb", progress=False)
    assert summary.sr["none"].mean == pytest.approx(expected_none)
    assert summary.sr["full"].mean == pytest.approx(1.0)
