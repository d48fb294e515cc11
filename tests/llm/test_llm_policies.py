"""LLM askers and the LLM solver, driven through ``env.step`` against a scripted server."""

from __future__ import annotations

import json

import pytest
from llm_helpers import contents, play

from ambitab_gym import AmbiTabEnv, load_corpus, parse_action
from ambitab_gym.llm import LLMMalformedResponse
from ambitab_gym.llm.sampling import EpisodeKey, derive_seed
from ambitab_gym.policies.llm import (
    DONE_ACTION,
    FALLBACK_STOP,
    LLMAsker,
    make_llm_asker,
    make_llm_solver,
)
from ambitab_gym.policies.llm_prompts import ASKER_STRATEGIES
from ambitab_gym.records import PublicSpec
from ambitab_gym.testing.llm_server import ROLE_MARKERS, ScriptRule, role_rules
from ambitab_gym.trajectory import PublicView

RECORD = "bird-0001"  # two ambiguities: "top customers" and "spending"; budget 4 questions
QUESTIONS = ["What do you mean by top customers?", "How should spending be measured?"]


def asker_prompts(server) -> list[dict]:
    return [r for r in server.requests() if ROLE_MARKERS["asker"] in contents(r)]


@pytest.mark.parametrize("strategy", ASKER_STRATEGIES)
def test_each_strategy_asks_then_stops(serve, make_client, strategy):
    server = serve(role_rules(QUESTIONS))
    asker = make_llm_asker(f"llm:{strategy}", make_client(server.url))
    env = AmbiTabEnv("AmbiTab-Bird-v0", record_ids=[RECORD])
    actions = play(env, asker, RECORD, seed=7)
    assert [parse_action(a).kind for a in actions] == ["question", "question", "stop"]
    assert json.loads(actions[-1]) == {"type": "done", "output": None}
    trajectory = env.trajectory
    assert [t.question for t in trajectory.turns] == QUESTIONS
    assert trajectory.stop_reason == "asker"
    assert trajectory.credits == [frozenset({"top_customers"}), frozenset({"spending"})]
    prompts = asker_prompts(server)
    assert len(prompts) == 3
    # reset(seed=...) stands for the campaign seed: each turn's seed is derived from it
    expected = [derive_seed(EpisodeKey(seed=7), "asker", turn, 1) for turn in range(3)]
    assert [p["body"]["seed"] for p in prompts] == expected
    # the third decision sees both earlier questions and the oracle's answers
    first_answer = trajectory.turns[0].answer
    assert QUESTIONS[0] in contents(prompts[2]) and first_answer in contents(prompts[2])
    assert asker.stats == {"calls": 3, "questions": 2, "stops": 1}


def test_budget_ends_a_talkative_asker(serve, make_client):
    server = serve(role_rules([f"Question {i}?" for i in range(10)]))
    asker = make_llm_asker("checklist-ledger", make_client(server.url))
    env = AmbiTabEnv("AmbiTab-Bird-v0", record_ids=[RECORD])
    play(env, asker, RECORD, seed=7)
    assert env.trajectory.stop_reason == "budget"
    assert env.trajectory.n_questions == 4 == len(asker_prompts(server))


# "stop" now answers the fallback stop (a stop any parser reads as one, marked so that the env
# records stop reason "fallback"), no longer the asker's ordinary DONE_ACTION (paper C.3).
@pytest.mark.parametrize(
    "mode, expected", [("stop", FALLBACK_STOP), ("question", None), ("raise", LLMMalformedResponse)]
)
def test_unreadable_asker_reply(serve, make_client, mode, expected):
    server = serve([ScriptRule("I would like to look at the schema first.")])
    asker = LLMAsker(make_client(server.url), "direct", on_unreadable=mode)
    view = PublicView(PublicSpec(request="Count staff.", database="hr"), questions_left=2)
    if expected is LLMMalformedResponse:
        with pytest.raises(LLMMalformedResponse) as caught:
            asker.act(view)
        assert caught.value.category == "malformed_output"
        return
    action = asker.act(view)
    if expected is None:
        assert parse_action(action).text == "I would like to look at the schema first."
    else:
        assert action == expected and asker.stats["fallback_stops"] == 1
        assert parse_action(action).kind == "stop" and action != DONE_ACTION
    assert asker.stats["unreadable"] == 1


def test_no_call_without_questions_left(serve, make_client):
    server = serve()
    asker = LLMAsker(make_client(server.url))
    view = PublicView(PublicSpec(request="Count staff.", database="hr"), questions_left=0)
    assert asker.act(view) == DONE_ACTION
    assert server.stats()["requests"] == 0


def _solver_episode(serve, make_client, reply: str, record_id: str = "bird-0004"):
    server = serve(role_rules([], solver=reply))
    client = make_client(server.url, max_retries=0)
    solver = make_llm_solver(client, corpus="AmbiTab-Bird-v0")
    env = AmbiTabEnv("AmbiTab-Bird-v0", record_ids=[record_id], solver=solver)
    env.reset(seed=0, options={"record_id": record_id})
    _, _, terminated, _, info = env.step(DONE_ACTION)
    assert terminated
    return server, solver, env


@pytest.mark.parametrize(
    "wrap",
    [
        lambda sql: json.dumps({"reasoning": "r", "type": "final_sql", "output": sql}),
        lambda sql: f"<think>SELECT nonsense</think>Here you go:\n```sql\n{sql}\n```",
        lambda sql: sql,
    ],
)
def test_solver_sql_reaches_the_verifier(serve, make_client, wrap):
    reference = load_corpus("AmbiTab-Bird-v0").record("bird-0004").verification.reference_sql
    server, solver, env = _solver_episode(serve, make_client, wrap(reference))
    assert env.trajectory.sql == reference
    assert env.trajectory.verdict.success
    assert solver.stats == {"calls": 1}
    [request] = [r for r in server.requests() if ROLE_MARKERS["solver"] in contents(r)]
    assert "exactly one SQLite statement" in contents(request)
    assert reference not in contents(request)  # the solver never sees the reference SQL


def test_solver_unreadable_reply_fails_verification(serve, make_client):
    _, solver, env = _solver_episode(serve, make_client, "I cannot write this query.")
    assert env.trajectory.sql == "I cannot write this query."
    assert not env.trajectory.verdict.success
    assert solver.stats["unreadable"] == 1


def test_solver_server_fault_is_recorded_on_the_episode(serve, make_client):
    server = serve(role_rules([]))
    solver = make_llm_solver(make_client(server.url, max_retries=0))
    env = AmbiTabEnv("AmbiTab-Bird-v0", record_ids=["bird-0004"], solver=solver)
    env.reset(seed=0, options={"record_id": "bird-0004"})
    server.fail_next("http_500")
    env.step(DONE_ACTION)
    assert env.trajectory.error == "http_500"
    assert not env.trajectory.verdict.success


def test_full_llm_episode_through_env_step(serve, make_client):
    """Asker, oracle and solver all behind the server; the oracle credits what it routes."""
    reference = load_corpus("AmbiTab-Bird-v0").record(RECORD).verification.reference_sql
    rules = role_rules(
        QUESTIONS[:1],
        matcher=json.dumps({"action": 'labeled("top customers")'}),
        responder=json.dumps({"answer": "The five biggest spenders."}),
        solver=json.dumps({"type": "final_sql", "output": reference}),
    )
    server = serve(rules)
    client = make_client(server.url)
    from ambitab_gym.oracles.llm import make_llm_oracle

    env = AmbiTabEnv(
        "AmbiTab-Bird-v0",
        record_ids=[RECORD],
        oracle=make_llm_oracle("AmbiTab-Bird-v0", client),
        solver=make_llm_solver(client),
        reward="outcome",
    )
    _ = play(env, make_llm_asker("checklist-ledger", client), RECORD, seed=7)
    trajectory = env.trajectory
    assert [(t.question, t.answer) for t in trajectory.turns] == [
        (QUESTIONS[0], "The five biggest spenders.")
    ]
    assert trajectory.credits == [frozenset({"top_customers"})]
    assert trajectory.verdict.success and trajectory.reward == 1.0
    tags = sorted({c.tag for c in client.calls})
    assert tags == ["asker:checklist-ledger", "oracle:matcher", "oracle:responder", "solver"]
