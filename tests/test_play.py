"""``ambitab-gym play``: the interactive loop driven by scripted input streams, and once through a
real subprocess with a stdin pipe. The person sees the task, the answers and the verdict reason,
never anything privileged."""

from __future__ import annotations

import io
import os
import re
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


def test_agent_mode_wrong_sql_fails_with_reason_only():
    corpus, record = non_default_reading("taco")
    env = make_play_env("taco", solver="none")
    outcome, shown = play(env, "/stop\nSELEC nothing FROM nowhere;\n", record_id=record.id)
    assert outcome.finished and outcome.success is False
    assert outcome.verdict_reason == "syntax"
    assert "Verdict: failure (syntax" in shown
    detail = env.trajectory.verdict.detail
    assert detail and detail not in shown  # the verdict detail stays privileged


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
