"""Issue 16 (part B): oracle answers that reveal SQL are flagged (privileged), counted and
warned about, and the optional :class:`~ambitab_gym.wrappers.ResponseGuard` redacts them before
the agent sees them while the trajectory keeps the original.
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import ambitab_gym
from ambitab_gym.cli import main
from ambitab_gym.evaluation import ResultsStore
from ambitab_gym.evaluation.report import write_report
from ambitab_gym.llm import LLMClient
from ambitab_gym.oracles import OracleContext
from ambitab_gym.oracles.access import answer_reveals_sql
from ambitab_gym.oracles.leaky import make_leaky_oracle
from ambitab_gym.oracles.llm import make_llm_oracle
from ambitab_gym.testing.llm_server import ROLE_MARKERS, ScriptedServer, ScriptRule
from ambitab_gym.wrappers import ChatMessages, ResponseGuard, StackOrderError
from ambitab_gym.wrappers.guard import guard_answer

RECORD = "bird-0001"
QUESTION = "Which customers count as top?"
PRIVILEGED = ("answer_reveals_sql", "shown_answer", "route", "credits")


def leaky_env(*, guard: bool) -> tuple[object, ambitab_gym.AmbiTabEnv]:
    base = ambitab_gym.AmbiTabEnv("bird")
    base.oracle = make_leaky_oracle("leaky-sql-responder", base.corpus)
    return (ResponseGuard(base) if guard else base), base


def reference_sql(env) -> str:
    return env.unwrapped.record.verification.reference_sql


# -- detection -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, revealed",
    [
        ("I mean the five customers who spent the most.", False),
        ("Only orders that were not cancelled or returned, from the last year.", False),
        ("Where they live does not matter; order them by what they spent.", False),
        ("SELECT first_name FROM customers LIMIT 5", True),
        ("Roughly: ```sql\nSELECT * FROM orders\n```", True),
        ("Use GROUP BY c.customer_id and ORDER BY SUM(oi.quantity) DESC", True),
        # a fragment of this record's reference SQL, not code-shaped on its own
        ("Keep o.status NOT IN ('cancelled', 'returned')", False),
    ],
)
def test_answer_reveals_sql(answer, revealed):
    assert answer_reveals_sql(answer) is revealed


def test_a_fragment_of_the_reference_query_is_a_leak_only_when_long_enough():
    sql = "SELECT name FROM staff WHERE NOT status IN ('cancelled', 'returned') LIMIT 5"
    assert answer_reveals_sql("only where not status in ('cancelled', 'returned')", sql)
    assert not answer_reveals_sql("the limit is 5, from the staff list", sql)


# -- the flag: privileged, in the trajectory and the stored row ----------------------------


def test_a_leaky_answer_is_flagged_in_the_trajectory_never_in_the_agents_view():
    env, base = leaky_env(guard=False)
    _, info = env.reset(seed=0, options={"record_id": RECORD})
    obs, _, _, _, info = env.step(QUESTION)
    turn = base.trajectory.turns[0]
    assert turn.answer_reveals_sql and turn.shown_answer is None
    assert reference_sql(env) in turn.answer and reference_sql(env) in obs["dialogue"]
    assert base.trajectory.to_dict()["turns"][0]["answer_reveals_sql"] is True
    for key in PRIVILEGED:
        assert key not in info
    assert "reveals" not in json.dumps(base.public_view.__dict__, default=str)


def test_a_faithful_answer_is_not_flagged():
    env = ambitab_gym.AmbiTabEnv("bird")
    env.reset(seed=0, options={"record_id": RECORD})
    env.step(QUESTION)
    assert env.trajectory.turns[0].answer_reveals_sql is False


# -- the guard -----------------------------------------------------------------------------


def test_the_guard_redacts_what_the_agent_sees_and_keeps_the_original_and_the_credits():
    plain, plain_base = leaky_env(guard=False)
    guarded, base = leaky_env(guard=True)
    for env in (plain, guarded):
        env.reset(seed=0, options={"record_id": RECORD})
    obs_plain, *_ = plain.step(QUESTION)
    obs, _, _, _, info = guarded.step(QUESTION)
    sql = reference_sql(guarded)
    # what the agent sees: the observation, the public view (askers and solvers read it)
    assert sql not in obs["dialogue"] and "SELECT" not in obs["dialogue"]
    assert "response guard" in obs["dialogue"]
    assert all("SELECT" not in t.answer for t in guarded.public_view.dialogue)
    # what analysts see: the original, the flag and the redacted text
    turn = base.trajectory.turns[0]
    assert sql in turn.answer and turn.answer_reveals_sql
    assert turn.shown_answer is not None and "SELECT" not in turn.shown_answer
    assert turn.shown_answer in obs["dialogue"]
    # credits as the oracle gave them
    assert turn.credits == plain_base.trajectory.turns[0].credits != frozenset()
    assert sql in obs_plain["dialogue"]
    for key in PRIVILEGED:
        assert key not in info


def test_guard_answer_withholds_what_redaction_cannot_clean():
    assert "SELECT" not in guard_answer("First SELECT a FROM t. Then SELECT b FROM u.")
    leaky = "It is `SUM(x)` grouped: GROUP BY id ORDER BY total DESC"
    assert not answer_reveals_sql(guard_answer(leaky))
    assert guard_answer("Only the five biggest spenders.") == "Only the five biggest spenders."


def test_the_guard_is_a_gymnasium_wrapper_below_the_agent_interface():
    env = ResponseGuard(ambitab_gym.AmbiTabEnv("bird"))
    assert isinstance(env, gym.Wrapper) and env._saved_kwargs == {"redact": None}
    with pytest.raises(StackOrderError):
        ResponseGuard(ChatMessages(ambitab_gym.AmbiTabEnv("bird")))
    ChatMessages(env)  # the valid order


# -- an LLM oracle that echoes the reference SQL, over HTTP ---------------------------------


def test_an_llm_oracle_echoing_the_reference_sql_is_flagged_and_guarded():
    env = ambitab_gym.AmbiTabEnv("bird")
    env.reset(seed=0, options={"record_id": RECORD})
    sql = env.record.verification.reference_sql
    rules = [
        ScriptRule(
            json.dumps({"reasoning": "x", "action": 'labeled("top customers")'}),
            when=ROLE_MARKERS["matcher"],
        ),
        ScriptRule(json.dumps({"answer": f"My query is {sql}"}), when=ROLE_MARKERS["responder"]),
    ]
    with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        oracle = make_llm_oracle(env.corpus, client, policy="unfiltered")
        assert sql in oracle.answer(QUESTION, OracleContext(env.record))[1]
        guarded = ResponseGuard(env)
        guarded.reset(seed=0, options={"record_id": RECORD, "oracle": oracle})
        obs, *_ = guarded.step(QUESTION)
    turn = env.trajectory.turns[0]
    assert turn.answer == f"My query is {sql}" and turn.answer_reveals_sql
    assert sql not in obs["dialogue"] and "My query is" in obs["dialogue"]


# -- the commands: warning, counts, and the guard's effect on dJ_resp -----------------------


def test_evaluate_warns_and_counts_answers_that_reveal_sql(tmp_path, capsys):
    argv = ["evaluate", "AmbiTab-Bird-v0", "--asker", "generic", "--limit", "2", "--no-progress"]
    results = ["--results", str(tmp_path / "r.duckdb"), "--json"]
    assert main([*argv, "--oracle", "leaky-sql-responder", *results]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["reveals_sql_answers"] >= 2 and summary["reveals_sql_episodes"] >= 1
    assert f"warning: {summary['reveals_sql_answers']} oracle answer(s)" in err
    assert "--response-guard" in err and "Reveals SQL" in out
    with ResultsStore(tmp_path / "r.duckdb") as store:
        flagged = [
            t for r in store.episodes() for t in r["dialogue"] if t.get("answer_reveals_sql")
        ]
    assert len(flagged) == summary["reveals_sql_answers"]
    # the report's campaign table: unreadable replies per role and episodes that reveal SQL
    files = write_report(tmp_path / "r.duckdb", tmp_path / "report", figures=False, browser=False)
    page = files.html.read_text()
    assert ">Reveals SQL</th>" in page and ">Unreadable m/r/a/s</th>" in page
    assert f"<td>0/0/0/0</td><td>{summary['reveals_sql_episodes']}</td>" in page
    # the reference oracle: no warning
    assert main([*argv, "--results", str(tmp_path / "s.duckdb"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert (
        "reveal SQL" not in err
        and json.loads(out.strip().splitlines()[-1])["reveals_sql_answers"] == 0
    )


def test_leakage_with_the_guard_removes_what_a_sql_reading_solver_gains(tmp_path, capsys):
    argv = [
        "leakage",
        "AmbiTab-Bird-v0",
        "--oracle",
        "leaky-sql-responder",
        "--asker",
        "generic",
        "--solver",
        "dialogue-sql-blind",
        "--limit",
        "6",
        "--resamples",
        "20",
        "--no-progress",
        "--json",
    ]
    figures = {}
    for guard in (False, True):
        extra = ["--response-guard"] if guard else []
        path = tmp_path / f"{guard}.duckdb"
        assert main([*argv, "--results", str(path), *extra]) == 0
        out, err = capsys.readouterr()
        figures[guard] = json.loads(out.strip().splitlines()[-1])["d_j_resp"]["mean"]
        assert "reveal SQL" in err and ("redacted" in err) is guard
        with ResultsStore(path) as store:
            rows = store.episodes()
        shown = [t for r in rows for t in r["dialogue"] if "shown_answer" in t]
        assert bool(shown) is guard
        assert all("SELECT" in t["answer"] for t in shown)  # the original stays for analysts
    assert figures[False] > 0 and figures[True] == 0
