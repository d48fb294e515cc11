"""``ambitab-gym play``: the interactive loop driven by scripted input streams, and once through a
real subprocess with a stdin pipe. The person sees the task, the answers and the verdict reason,
never anything privileged."""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ambitab_gym.corpora import load_corpus
from ambitab_gym.env import AmbiTabEnv
from ambitab_gym.oracles.deterministic import canonical_question
from ambitab_gym.play import PlaySession, make_play_env
from ambitab_gym.policies.scripted import distinct_terms

REPO = Path(__file__).resolve().parents[1]
CORPORA = ("bird", "ew_bird", "bird_interact", "ambrosia", "ambiqt", "taco")


def play(env, typed: str, **kwargs):
    shown = io.StringIO()
    outcome = PlaySession(env, input=io.StringIO(typed), output=shown, **kwargs).run()
    return outcome, shown.getvalue()


def non_default_reading(corpus_name: str):
    """A record of an ambiguous AVT that is not its default (first) reading."""
    corpus = load_corpus(corpus_name)
    for record in corpus.records:
        siblings = corpus.siblings(record)
        if record.m > 0 and len(siblings) > 1 and siblings[0].id != record.id:
            return corpus, record
    raise AssertionError(f"{corpus_name} has no second reading")


def full_questions(record) -> str:
    return "".join(canonical_question(term) + "\n" for term in distinct_terms(record))


def test_agent_mode_question_answer_and_sql():
    corpus, record = non_default_reading("bird")
    env = make_play_env("bird", solver="none")
    term = distinct_terms(record)[0]
    ambiguity = next(a for a in record.counted_ambiguities if a.term == term)
    sql_lines = record.verification.reference_sql.strip().rstrip(";").splitlines()
    typed = f"{canonical_question(term)}\n/stop\n" + "\n".join(sql_lines) + ";\n"
    outcome, shown = play(env, typed, record_id=record.id)
    assert outcome.finished and outcome.success and outcome.verdict_reason == "match"
    assert outcome.questions == 1 and outcome.stop_reason == "asker"
    # the task first, then the answer: the knowledge oracle returns the stored resolution
    assert shown.index(f"Request: {record.spec.request}") < shown.index("Q1> ")
    assert f"A1: {ambiguity.resolution}" in shown
    assert "Asking is over. Type your SQL" in shown
    assert "Verdict: success (match" in shown
    assert record.id not in shown and record.avt_id not in shown


def sqlite_error(sql: str) -> str:
    """SQLite's own message for ``sql`` on an empty database (computed without the package)."""
    with pytest.raises(sqlite3.Error) as error:
        sqlite3.connect(":memory:").execute(sql)
    return str(error.value)


def test_agent_mode_syntax_error_shows_the_dialect_and_the_parse_detail():
    corpus, record = non_default_reading("taco")
    env = make_play_env("taco", solver="none")
    outcome, shown = play(env, "/stop\nSELEC nothing FROM nowhere;\n", record_id=record.id)
    assert outcome.finished and outcome.success is False
    assert outcome.verdict_reason == "syntax"
    manifest = json.loads((corpus.path / "manifest.json").read_text("utf-8"))
    assert manifest["engine"] == "sqlite"
    dialect = "SQL dialect: SQLite (the verifier runs your query on SQLite)."
    assert dialect in shown and shown.index(dialect) < shown.index("SQL> ")
    message = sqlite_error("SELEC nothing FROM nowhere;")  # near "SELEC": syntax error
    verdict = shown.index("Verdict: failure (syntax")
    assert shown.index(f"Verifier: {message}", verdict) > verdict
    # a query that runs: its mismatch says nothing about the hidden result
    outcome, shown = play(env, "/stop\nSELECT 1;\n", record_id=record.id)
    assert outcome.verdict_reason == "mismatch" and "Verifier:" not in shown
    assert env.trajectory.verdict.detail  # there was a detail, and it stayed hidden


def test_runtime_error_detail_and_the_dialect_of_a_duckdb_corpus():
    corpus = load_corpus("bird_interact")
    manifest = json.loads((corpus.path / "manifest.json").read_text("utf-8"))
    assert (manifest["engine"], manifest["dialect"]) == ("duckdb", "postgres")
    record = next(r for r in corpus.records if r.m > 0)
    env = make_play_env("bird_interact", solver="none")
    outcome, shown = play(env, "/help\n/stop\nSELECT * FROM no_such_table;\n", record_id=record.id)
    line = (
        "SQL dialect: DuckDB (the verifier runs your query on DuckDB; the corpus's queries are "
        "written for PostgreSQL)."
    )
    assert shown.count(line) == 2  # /help while asking, then the SQL prompt
    assert outcome.verdict_reason == "runtime"
    detail = re.search(r"^Verifier: (.+)$", shown, re.MULTILINE)
    assert detail and "no_such_table" in detail.group(1)


def test_solver_mode_names_no_dialect_and_hides_the_detail_of_its_hidden_sql():
    """The interpretation solver's SQL is a reference query: nothing about it is shown."""

    class BrokenCopy:
        name = "interpretation-like"
        privileged = True

        def solve(self, view) -> str:
            return "SELEC hidden_reference_column FROM t"

    env = AmbiTabEnv("taco", solver=BrokenCopy(), zero_ambiguity="skip")
    outcome, shown = play(env, "/stop\n", seed=2)
    assert outcome.verdict_reason == "syntax"
    assert "Verifier:" not in shown and "hidden_reference_column" not in shown
    assert "SQL dialect" not in shown
    # a solver whose SQL is shown gets its parse detail, as the person would
    env = AmbiTabEnv("taco", solver=BrokenSolverSQL(), zero_ambiguity="skip")
    outcome, shown = play(env, "/stop\n", seed=2)
    assert outcome.verdict_reason == "syntax"
    assert f"Verifier: {sqlite_error(BrokenSolverSQL.SQL)}" in shown


class BrokenSolverSQL:
    """A plain solver whose SQL does not parse."""

    name = "sloppy"
    SQL = "SELECT FROM WHERE"

    def solve(self, view) -> str:
        return self.SQL


def reveal_episode():
    """A hand-worked episode on a bird record with two counted ambiguities: the first term's
    canonical question, a generic question, the first question again, then stop."""
    corpus = load_corpus("bird")
    record = next(
        r for r in corpus.records if r.m == 2 and len({a.term for a in r.counted_ambiguities}) == 2
    )
    first, second = record.counted_ambiguities
    typed = (
        f"{canonical_question(first.term)}\nPlease elaborate.\n"
        f"{canonical_question(first.term)}\n/stop\nSELECT 1;\n"
    )
    return record, first, second, typed


def test_reveal_after_the_verdict_shows_the_credits_and_the_scores():
    record, first, second, typed = reveal_episode()
    env = make_play_env("bird", solver="none")
    outcome, shown = play(env, typed, record_id=record.id, reveal=True)
    assert outcome.finished and outcome.questions == 3
    verdict = shown.index("Verdict: ")
    reveal = shown.index("-- Reveal (after the verdict; an agent never sees this) --")
    assert verdict < reveal
    after = shown[reveal:].splitlines()
    # Q1 credits the first ambiguity (new), Q2 nothing, Q3 the first again (not new):
    # precision 1/3, recall 1/2, the second ambiguity never credited
    expected = [
        f"Q1: {canonical_question(first.term)}",
        f'    credited: "{first.term}" [{first.id}] (new)',
        "Q2: Please elaborate.",
        "    credited: nothing",
        f"Q3: {canonical_question(first.term)}",
        f'    credited: "{first.term}" [{first.id}] (already credited)',
        "Precision: 1 of 3 question(s) credited an ambiguity not credited before = 33.3%",
        "Recall: 1 of 2 counted ambiguities credited = 50.0%",
        f'Never credited: "{second.term}" [{second.id}]',
    ]
    start = after.index(expected[0])
    assert after[start : start + len(expected)] == expected
    listed = after[1:start]
    assert listed[0] == "Registered ambiguities (2 counted):"
    assert f'  "{first.term}" [{first.id}] ({first.kind})' in listed
    # none of it before the verdict
    before = shown[:verdict]
    assert f"[{first.id}]" not in before and f"[{second.id}]" not in before
    assert "credited" not in before and "Precision" not in before


def test_no_reveal_without_the_flag_or_without_a_verdict():
    record, first, second, typed = reveal_episode()
    env = make_play_env("bird", solver="none")
    _, shown = play(env, typed, record_id=record.id)
    for text in ("Reveal", "credited", "Precision", "Recall", f"[{first.id}]", f"[{second.id}]"):
        assert text not in shown, text
    # --reveal, but the person leaves before the verdict: nothing is revealed
    _, shown = play(
        env, f"{canonical_question(first.term)}\n/quit\n", record_id=record.id, reveal=True
    )
    assert "Left without a verdict." in shown
    assert "Reveal" not in shown and "credited" not in shown and f"[{first.id}]" not in shown


def test_reveal_flag_on_the_command_line(capsys, monkeypatch):
    from ambitab_gym.cli import main

    record, first, second, typed = reveal_episode()
    monkeypatch.setattr(sys, "stdin", io.StringIO(typed))
    assert main(["play", "bird", "--solver", "none", "--record", record.id, "--reveal"]) == 0
    out = capsys.readouterr().out
    assert out.index("Verdict: ") < out.index("-- Reveal")
    assert "Recall: 1 of 2 counted ambiguities credited = 50.0%" in out
    monkeypatch.setattr(sys, "stdin", io.StringIO(typed))
    assert main(["play", "bird", "--solver", "none", "--record", record.id]) == 0
    assert "Reveal" not in capsys.readouterr().out


def test_solver_mode_full_questions_succeed_and_none_fail():
    for name in ("bird", "ambrosia", "ambiqt"):
        corpus, record = non_default_reading(name)
        env = make_play_env(name)
        outcome, shown = play(env, full_questions(record) + "/stop\n", record_id=record.id)
        assert outcome.finished and outcome.success, (name, shown)
        assert "The interpretation solver is writing the SQL" in shown
        assert "SQL> " not in shown
        # no question: the solver takes the default reading, which is not this record's
        outcome, shown = play(env, "/stop\n", record_id=record.id)
        assert outcome.finished and outcome.success is False and outcome.questions == 0
        assert "Verdict: failure (mismatch" in shown


def test_budget_runs_out_and_stop_forms():
    corpus, record = non_default_reading("ambiqt")
    env = make_play_env("ambiqt", solver="none")
    budget = env.max_questions(record)
    typed = "Please elaborate.\n" * budget + "SELECT 1;\n"
    outcome, shown = play(env, typed, record_id=record.id)
    assert outcome.questions == budget and outcome.stop_reason == "budget"
    assert f"You may ask up to {budget} clarifying question(s)" in shown
    assert "The question budget is spent." in shown
    assert outcome.finished and outcome.verdict_reason == "mismatch"
    for stop in ("<STOP>", "stop", '{"type": "done", "output": ""}', "/STOP"):
        outcome, shown = play(env, f"{stop}\nSELECT 1;\n", record_id=record.id)
        assert outcome.stop_reason == "asker" and outcome.questions == 0, stop


def test_commands_and_blank_lines():
    corpus, record = non_default_reading("taco")
    env = make_play_env("taco", solver="none")
    typed = "\n/help\n/task\n/nope\nPlease elaborate.\n/dialogue\n/stop\n\n/dialogue\nSELECT\n1\n\n"
    outcome, shown = play(env, typed, record_id=record.id)
    assert "/quit" in shown and "show the task again" in shown
    assert shown.count(f"Request: {record.spec.request}") == 2
    assert "Unknown command '/nope'" in shown
    assert shown.count("Q1: Please elaborate.") == 2  # /dialogue while asking and in SQL phase
    assert outcome.questions == 1
    assert outcome.finished and env.trajectory.sql == "SELECT\n1"  # an empty line submits


def test_quit_and_end_of_input():
    corpus, record = non_default_reading("bird")
    env = make_play_env("bird", solver="none")
    for typed in ("Please elaborate.\n/quit\n", "Please elaborate.\n", "/stop\n/quit\n", "/stop\n"):
        outcome, shown = play(env, typed, record_id=record.id)
        assert not outcome.finished and outcome.success is None, typed
        assert "Left without a verdict." in shown and "Verdict" not in shown


def test_unambiguous_record_goes_straight_to_sql():
    corpus = load_corpus("bird")
    record = next(r for r in corpus.records if r.m == 0)
    env = make_play_env("bird", solver="none")
    outcome, shown = play(env, record.verification.reference_sql + "\n\n", record_id=record.id)
    assert "This task allows no clarifying questions." in shown and "Q1> " not in shown
    assert outcome.stop_reason == "skipped" and outcome.success


class ConstantSolver:
    """A solver that is not privileged: its SQL is shown."""

    name = "constant"

    def solve(self, view) -> str:
        return "SELECT 42"


def test_a_plain_solver_shows_its_sql():
    env = AmbiTabEnv("taco", solver=ConstantSolver(), zero_ambiguity="skip")
    outcome, shown = play(env, "/stop\n", seed=3)
    assert "The constant solver is writing the SQL" in shown
    assert "Solver's SQL:\nSELECT 42" in shown and outcome.finished
    assert "seed 3" in shown


def _privileged_texts(corpus, record, task: str) -> list[str]:
    texts = [record.id, record.avt_id]
    for sibling in corpus.siblings(record):
        texts.append(" ".join(sibling.verification.reference_sql.split()))
        for ambiguity in sibling.ambiguities:
            for text in (ambiguity.resolution, ambiguity.response):
                if text and len(text) > 3 and text.lower() not in task.lower():
                    texts.append(text)
    return texts


@pytest.mark.parametrize("name", CORPORA)
def test_nothing_privileged_is_shown(name):
    """Every record, in solver mode, with a question that earns nothing: the output holds no
    record id, AVT id, reference SQL (of any reading), resolution or frozen response."""
    corpus = load_corpus(name)
    env = make_play_env(name)
    for record in corpus.records:
        outcome, shown = play(env, "Could you clarify what you want?\n/stop\n", record_id=record.id)
        assert outcome.finished
        flat = " ".join(shown.split())
        task = env.public_view.render_task()
        for text in _privileged_texts(corpus, record, task):
            assert " ".join(text.split()) not in flat, (record.id, text)


def test_subprocess_with_stdin_pipe():
    corpus, record = non_default_reading("taco")
    typed = full_questions(record) + "/stop\n" + record.verification.reference_sql + "\n\n"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ambitab_gym",
            "play",
            "AmbiTab-TACO-v0",
            "--solver",
            "none",
            "--record",
            record.id,
        ],
        input=typed,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("== ambitab-gym play: taco")
    assert re.search(r"^A1: .+", out, re.MULTILINE)
    assert "Verdict: success (match" in out
    assert record.id not in out


def test_command_errors(capsys):
    from ambitab_gym.cli import main

    assert main(["play", "bird", "--record", "no-such-record"]) == 2
    assert "no-such-record" in capsys.readouterr().err
    assert main(["play", "bird", "--solver", "nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err


class BrokenSolver:
    """A solver whose server is down."""

    name = "broken"

    def solve(self, view) -> str:
        raise ConnectionError("no server at 127.0.0.1:9")


def test_a_failing_solver_is_reported():
    env = AmbiTabEnv("ambiqt", solver=BrokenSolver(), zero_ambiguity="skip")
    outcome, shown = play(env, "/stop\n", seed=1)
    assert "The solver failed (ConnectionError)." in shown
    assert outcome.finished and outcome.success is False and outcome.verdict_reason == "no_sql"
