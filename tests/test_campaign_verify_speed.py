"""The campaign verifier's memo gives the verdicts of the plain verifier, with fewer queries.

Known answers only (no timings): every bundled record's candidate submissions (its reference,
its AVT siblings' and its database neighbours' references, broken and refused SQL) verified by a
plain verifier and by a ``memo=True`` one, repeated and shuffled, give the same verdicts; what the
memo keeps and reuses, and what it never keeps (transient verdicts, write tasks, runs slower than
the submission limit, large results, runs under PostgreSQL's separate reference identity), on
real SQLite databases; the bounds; a real campaign's stored verdicts against a plain verifier.
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest

from ambitab_gym.corpora import ENV_IDS, load_corpus
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
from ambitab_gym.records import parse_record
from ambitab_gym.verify import Limits, Verifier
from ambitab_gym.verify import verifier as verifier_module
from ambitab_gym.verify.sqlite import SQLiteEngine, build_sqlite
from ambitab_gym.verify.verifier import is_write_task

# -- every bundled record ----------------------------------------------------------------------


def _candidates(corpus, record) -> list[str]:
    """Submissions whose verdicts span match, mismatch and every cheap failure."""
    spec = record.verification
    siblings = [r for r in corpus.records if r.avt_id == record.avt_id and r.id != record.id]
    neighbours = [
        r
        for r in corpus.records
        if r.verification.database == spec.database and r.avt_id != record.avt_id
    ][:3]
    return [
        spec.reference_sql,
        *(r.verification.reference_sql for r in siblings),
        *(r.verification.reference_sql for r in neighbours),
        f"  {spec.reference_sql}  ",  # another text: run again, same answer
        "SELECT 1",
        "SELECT FROM WHERE",  # syntax
        "SELECT no_such_column_xyz FROM no_such_table_xyz",  # runtime
        "PRAGMA user_version = 3",  # rejected
        "-- only a comment",
        "",
    ]


def _key(verdict) -> tuple:
    return verdict.success, verdict.reason, verdict.detail


@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_memo_agrees_with_the_plain_verifier_on_every_bundled_record(env_id: str) -> None:
    corpus = load_corpus(env_id)
    pairs = [
        (record, sql)
        for record in corpus.records
        if not is_write_task(record)  # write tasks: never kept (a test of their own below)
        for sql in _candidates(corpus, record)
    ]
    plain = Verifier(corpus.open_engine)
    memo = Verifier(corpus.open_engine, memo=True)
    try:
        expected = {(r.id, sql): _key(plain.verify(r, sql)) for r, sql in pairs}
        rounds = [pairs, list(pairs)]
        random.Random(19).shuffle(rounds[1])  # another order: reuse across records, both ways
        for round_ in rounds:
            for record, sql in round_:
                assert _key(memo.verify(record, sql)) == expected[record.id, sql], (record.id, sql)
        # the answers span the outcomes, so the agreement says something
        reasons = {key[1] for key in expected.values()}
        assert {"match", "mismatch", "syntax", "rejected", "no_sql"} <= reasons
        stats = memo.stats
        assert stats.verifications == 2 * len(pairs)
        # the second round repeats every pair: at least every kept verdict is a memo hit
        kept = sum(reason in ("match", "mismatch") for _, reason, _ in expected.values())
        assert stats.memo_hits >= kept
        ran = stats.executions + stats.reference_runs
        assert ran < plain.stats.executions + plain.stats.reference_runs
    finally:
        plain.close()
        memo.close()


# -- known answers on small SQLite databases ----------------------------------------------------


@pytest.fixture
def databases(tmp_path: Path) -> dict[str, Path]:
    """Two databases with the same table and different rows."""
    paths = {}
    for name, values in (("one", "(1, 'a', 0.5), (2, 'b', 1.25)"), ("two", "(7, 'z', 9.0)")):
        path = tmp_path / f"{name}.sqlite"
        build_sqlite(
            f"CREATE TABLE t(x INTEGER, y TEXT, f REAL); INSERT INTO t VALUES {values};", path
        )
        paths[name] = path
    return paths


def _record(record_id: str, database: str, sql: str, **verification) -> object:
    return parse_record(
        {
            "id": record_id,
            "avt_id": f"avt-{record_id}",
            "corpus": "demo",
            "spec": {"request": "r", "database": database},
            "verification": {"database": database, "reference_sql": sql, **verification},
        }
    )


class _Opener:
    """``open_engine`` over the test's database files (picklable, as Ray needs it)."""

    def __init__(self, paths: dict[str, Path], engine_class: type = SQLiteEngine) -> None:
        self.paths, self.engine_class = paths, engine_class

    def __call__(self, kind: str, database: str) -> SQLiteEngine:
        return self.engine_class(self.paths[database])


def _opener(paths: dict[str, Path], engine_class: type = SQLiteEngine) -> _Opener:
    return _Opener(paths, engine_class)


def test_a_repeated_submission_runs_once(databases) -> None:
    record = _record("r1", "one", "SELECT x FROM t")
    verifier = Verifier(_opener(databases), memo=True)
    verdicts = [verifier.verify(record, "SELECT x FROM t WHERE x > 1") for _ in range(3)]
    assert [v.reason for v in verdicts] == ["mismatch"] * 3
    assert (
        verdicts[0].detail
        == verdicts[2].detail
        == ("the result (1 rows) does not answer the request as intended")
    )
    assert (verifier.stats.executions, verifier.stats.memo_hits) == (1, 2)
    assert verifier.stats.reference_runs == 1
    verifier.close()


def test_nondeterministic_sql_runs_every_time(databases) -> None:
    """SQL whose answer can change between runs is scored on its own execution each time."""
    record = _record("r1", "one", "SELECT x FROM t ORDER BY x LIMIT 1")
    verifier = Verifier(_opener(databases), memo=True)
    # one of two rows at random: over 40 runs both verdicts show up (each run is 1/2 match)
    verdicts = {
        verifier.verify(record, "SELECT x FROM t ORDER BY RANDOM() LIMIT 1").reason
        for _ in range(40)
    }
    assert verdicts == {"match", "mismatch"}
    assert (verifier.stats.executions, verifier.stats.memo_hits) == (40, 0)
    for sql in ("SELECT date('now')", "SELECT CURRENT_TIMESTAMP", "SELECT randomblob(4)"):
        for _ in range(2):
            verifier.verify(record, sql)
    assert (verifier.stats.executions, verifier.stats.memo_hits) == (46, 0)
    verifier.close()


def test_the_reference_text_is_judged_by_the_reference_run(databases) -> None:
    mine = _record("r1", "one", "SELECT x FROM t")
    other = _record("r2", "one", "SELECT y FROM t")
    verifier = Verifier(_opener(databases), memo=True)
    assert verifier.verify(mine, "SELECT x FROM t").reason == "match"
    # another record's reference on the same database: its kept rows, compared with mine
    assert verifier.verify(other, "SELECT x FROM t").reason == "mismatch"
    assert verifier.verify(mine, "SELECT y FROM t").reason == "mismatch"
    assert verifier.verify(other, "SELECT y FROM t").reason == "match"
    assert verifier.stats.reference_runs == 2
    assert verifier.stats.executions == 0
    assert verifier.stats.reused_runs == 4
    verifier.close()


def test_runs_are_never_reused_across_databases(databases) -> None:
    on_one = _record("r1", "one", "SELECT x FROM t")
    on_two = _record("r2", "two", "SELECT 7")
    verifier = Verifier(_opener(databases), memo=True)
    assert verifier.verify(on_one, "SELECT x FROM t").reason == "match"
    assert verifier.verify(on_two, "SELECT x FROM t").reason == "match"  # (7,) on "two"
    assert verifier.verify(on_two, "SELECT x FROM t WHERE x < 5").reason == "mismatch"
    assert verifier.stats.executions == 2
    verifier.close()


def test_float_rules_apply_to_reused_rows(databases) -> None:
    """Kept rows are raw: each record compares them under its own rules."""
    exact = _record("r1", "one", "SELECT 1.2 AS v", compare={"float_decimals": 4})
    loose = _record("r2", "one", "SELECT 1.25 AS v", compare={"float_decimals": 0})
    verifier = Verifier(_opener(databases), memo=True)
    plain = Verifier(_opener(databases))
    for record, sql in [(exact, "SELECT 1.25 AS v"), (loose, "SELECT 1.2 AS v")]:
        assert verifier.verify(record, sql).reason == plain.verify(record, sql).reason
    assert verifier.verify(exact, "SELECT 1.25 AS v").reason == "mismatch"
    assert verifier.verify(loose, "SELECT 1.2 AS v").reason == "match"  # 1 == 1 at 0 decimals
    # each text ran once: "SELECT 1.25" as a submission, then reused as r2's reference
    assert (verifier.stats.reference_runs, verifier.stats.executions) == (1, 1)
    assert verifier.stats.reused_runs == 2
    verifier.close()
    plain.close()


SLOW = (
    "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < {n}) "
    "SELECT count(*) FROM c"
)


def test_transient_verdicts_run_again(databases) -> None:
    record = _record("r1", "one", "SELECT 1")
    limits = Limits(timeout_s=0.05)
    verifier = Verifier(_opener(databases), limits=limits, memo=True)
    slow = SLOW.format(n=10**9)
    assert [verifier.verify(record, slow).reason for _ in range(2)] == ["timeout", "timeout"]
    runtime = "SELECT no_such_column FROM t"
    assert [verifier.verify(record, runtime).reason for _ in range(2)] == ["runtime"] * 2
    assert verifier.stats.executions == 4
    assert verifier.stats.memo_hits == 0
    verifier.close()


def test_a_reference_slower_than_the_submission_limit_is_not_reused(databases) -> None:
    """The reference has its own, longer limit: its text as a submission still times out."""
    slow = SLOW.format(n=3 * 10**6)
    record = _record("r1", "one", slow)
    plain = Verifier(_opener(databases), limits=Limits(timeout_s=0.01))
    memo = Verifier(_opener(databases), limits=Limits(timeout_s=0.01), memo=True)
    assert plain.verify(record, slow).reason == "timeout"
    assert memo.verify(record, slow).reason == "timeout"
    assert memo.stats.reference_runs == 1 and memo.stats.executions == 1
    assert memo.stats.reused_runs == 0
    plain.close()
    memo.close()


def test_large_results_are_not_kept(databases) -> None:
    n = verifier_module.RUN_MAX_CELLS + 1
    sql = SLOW.replace("SELECT count(*) FROM c", "SELECT n FROM c").format(n=n)
    record = _record("r1", "one", sql)
    verifier = Verifier(_opener(databases), memo=True)
    other = _record("r2", "one", "SELECT 1")
    assert verifier.verify(record, sql).reason == "match"  # the record's own verdict: kept
    assert verifier.verify(other, sql).reason == "mismatch"  # the rows were not: run again
    assert verifier.stats.reference_runs == 2 and verifier.stats.executions == 2
    assert verifier.stats.reused_runs == 0
    verifier.close()


class ReferenceRoleEngine(SQLiteEngine):
    """A real SQLite engine that, like PostgreSQL's, runs references "as another identity"."""

    def execute_reference(self, sql, *, limits=None):
        return self.execute(sql, limits=limits)


def test_runs_under_a_reference_identity_are_not_reused(databases) -> None:
    record = _record("r1", "one", "SELECT x FROM t")
    verifier = Verifier(_opener(databases, ReferenceRoleEngine), memo=True)
    assert verifier.verify(record, "SELECT x FROM t").reason == "match"
    assert (verifier.stats.reference_runs, verifier.stats.executions) == (1, 1)
    assert verifier.stats.reused_runs == 0
    verifier.close()


def test_write_tasks_are_never_kept(databases) -> None:
    record = _record(
        "w1",
        "one",
        "UPDATE t SET y = 'c' WHERE x = 1",
        test_cases=[
            "def test_case(pred_sqls, sol_sqls, db_name, conn):\n"
            "    assert conn.execute(\"SELECT y FROM t WHERE x = 1\").fetchall() == [('c',)]\n"
        ],
    )
    verifier = Verifier(_opener(databases), memo=True)
    try:
        good = "UPDATE t SET y = 'c' WHERE x = 1"
        assert [verifier.verify(record, good).reason for _ in range(2)] == ["match", "match"]
        assert verifier.verify(record, "UPDATE t SET y = 'd'").reason == "mismatch"
        assert verifier.stats.memo_hits == 0 and verifier.stats.reused_runs == 0
    finally:
        verifier.close()


def test_the_memo_and_the_runs_stay_within_their_bounds(databases, monkeypatch) -> None:
    monkeypatch.setattr(verifier_module, "MEMO_MAX_ENTRIES", 3)
    record = _record("r1", "one", "SELECT 2")
    verifier = Verifier(_opener(databases), memo=True)
    texts = [f"SELECT {k}" for k in range(6)]
    for sql in texts:
        verifier.verify(record, sql)
    assert len(verifier._memo) <= 3 and len(verifier._runs) <= 3
    assert verifier.stats.executions == 5  # "SELECT 2" is the reference's text
    # the oldest were dropped (the reference's rows too): they run again, same answers
    assert [verifier.verify(record, sql).success for sql in texts[:3]] == [False, False, True]
    assert verifier.stats.executions == 8
    verifier.close()


def test_a_pickled_memo_verifier_reopens_and_keeps_its_answers(databases) -> None:
    record = _record("r1", "one", "SELECT x FROM t")
    verifier = Verifier(_opener(databases), memo=True)
    assert verifier.verify(record, "SELECT x FROM t WHERE x = 1").reason == "mismatch"
    copy = pickle.loads(pickle.dumps(verifier))
    assert copy.verify(record, "SELECT x FROM t WHERE x = 1").reason == "mismatch"
    assert copy.stats.memo_hits == verifier.stats.memo_hits + 1  # the verdict travelled
    assert copy.verify(record, "SELECT x FROM t ORDER BY x DESC").reason == "match"
    verifier.close()
    copy.close()


# -- a campaign --------------------------------------------------------------------------------


def test_campaign_verdicts_are_the_plain_verifiers(tmp_path: Path) -> None:
    env_id = "AmbiTab-Bird-v0"
    config = CampaignConfig(env_id, asker="full", seeds=(0, 1), limit=12)
    run_campaign(config, tmp_path / "r.duckdb", progress=False)
    with ResultsStore(tmp_path / "r.duckdb") as store:
        episodes = store.episodes(config.campaign_id)
    corpus = load_corpus(env_id)
    records = {r.id: r for r in corpus.records}
    plain = Verifier(corpus.open_engine)
    try:
        assert len(episodes) == 12 * 2 * 3
        for episode in episodes:
            verdict = plain.verify(records[episode["record_id"]], episode["sql"])
            assert episode["verdict_reason"] == verdict.reason
            assert episode["verdict_detail"] == verdict.detail
            assert bool(episode["success"]) == verdict.success
    finally:
        plain.close()
