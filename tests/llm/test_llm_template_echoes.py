"""Issue 32: a reply that echoes its prompt's template (``<your one question>``, ``<the SQL>``,
``<term>``, ``<your reply>``) is unreadable for every role, and counted as such."""

from __future__ import annotations

import json
import re

import pytest
from llm_helpers import contents, play, record

from ambitab_gym import AmbiTabEnv
from ambitab_gym.evaluation import CampaignConfig, run_campaign
from ambitab_gym.oracles.base import REFUSAL, OracleContext
from ambitab_gym.oracles.llm import make_llm_oracle
from ambitab_gym.oracles.llm_prompts import (
    MATCHER_REPLY,
    RESPONDER_REPLY,
    NoteEntry,
    OracleNotes,
    matcher_messages,
    parse_matcher_output,
    parse_responder_output,
    prompt_echo,
    responder_messages,
)
from ambitab_gym.policies.llm import FALLBACK_STOP, LLMAsker, make_llm_asker, solver_sql
from ambitab_gym.policies.llm_prompts import (
    ASKER_REPLY,
    ASKER_STRATEGIES,
    SOLVER_REPLY,
    AskerOutput,
    asker_messages,
    parse_asker_output,
    solver_messages,
)
from ambitab_gym.records import PublicSpec
from ambitab_gym.testing.llm_server import ROLE_MARKERS, ScriptRule, role_rules
from ambitab_gym.trajectory import DialogueTurn, PublicView

RECORD = "bird-0001"  # two ambiguities: "top customers" and "spending"; budget 4 questions
QUESTION = "What do you mean by top customers?"
SOLVER_ECHO = json.dumps(
    {
        "reasoning": "<a few sentences: tables, joins, filters, grouping, and how the answers "
        "shape them>",
        "type": "final_sql",
        "output": "<the SQL>",
    }
)


# -- one source: the placeholders a reader rejects are the ones its prompt shows ---------------


def _slots(messages: list[dict]) -> set[str]:
    return set(re.findall(r"<[^<>\n]+>", messages[0]["content"]))


def test_each_prompt_shows_exactly_its_reply_formats_placeholders():
    view = PublicView(
        PublicSpec(request="List top customers.", database="shop"),
        (DialogueTurn("Top how many?", "Five."),),
        questions_left=2,
    )
    for strategy in ASKER_STRATEGIES:
        messages = asker_messages(strategy, view)
        assert _slots(messages) == {"<your one question>"} == set(ASKER_REPLY.placeholders)
        assert ASKER_REPLY.text in messages[0]["content"]
    for dialect in ("sqlite", "postgres", "duckdb"):
        messages = solver_messages(PublicView(view.spec, phase="sql"), dialect=dialect)
        assert _slots(messages) == set(SOLVER_REPLY.placeholders)
        assert SOLVER_REPLY.placeholders[-1] == "<the SQL>" and len(SOLVER_REPLY.placeholders) == 2
    entries = (NoteEntry("top customers", meaning="the five biggest spenders"),)
    for segments in ((), ("LIMIT 5",)):
        notes = OracleNotes("List top customers.", entries, segments=segments)
        shown = _slots(matcher_messages("Top how many?", notes))
        # the unlabeled route (and its placeholder) is offered only with segments
        expected = {"<term>", "<one or two sentences>", "<your action>"}
        assert shown == (expected | {"<sql segment>"} if segments else expected)
        assert shown <= set(MATCHER_REPLY.placeholders)
        responder = responder_messages("Q?", notes, action='labeled("top customers")', focus="f")
        assert _slots(responder) == {"<your reply>"} == set(RESPONDER_REPLY.placeholders)


# -- the readers ----------------------------------------------------------------------------------

ASKER_ECHOES = [
    '{"type": "clarification", "output": "<your one question>"}',  # the reply
    '{"type": "clarification", "output": "<your one question>?"}',
    '{"type": "clarification", "output": "Question: <your one question>"}',
    '{"type": "clarification", "output": "  <YOUR one  Question> "}',
    '{"type": "clarification", "output": "your one question"}',  # brackets dropped
    "<your one question>?",  # plain text: a one-line question as the env would ask it
    "Question: <your one question>?",
    '"<your one question>"',
    '- to ask: {"type": "clarification", "output": "<your one question>"}',
]


@pytest.mark.parametrize("reply", ASKER_ECHOES)
def test_an_asker_echo_is_unreadable_with_no_text_to_ask(reply):
    assert parse_asker_output(reply) == AskerOutput("invalid", "")


@pytest.mark.parametrize(
    "question",
    [
        "Is the threshold <= 100 or < 100?",
        "Which <region> column do you mean?",
        "One question: which year do you mean?",
        "What is your one question about the sales table?",  # the words, but not alone
        "<your one question> Which year do you mean?",  # a real question beside it
        "Which question type counts as a complaint?",
    ],
)
def test_a_real_question_with_brackets_or_the_word_question_is_still_a_question(question):
    assert parse_asker_output(question) == AskerOutput("question", question)
    wrapped = json.dumps({"type": "clarification", "output": question})
    assert parse_asker_output(wrapped) == AskerOutput("question", question)


@pytest.mark.parametrize(
    "reply",
    [
        '{"reasoning": "r", "type": "final_sql", "output": "<the SQL>"}',
        SOLVER_ECHO,
        '{"type": "final_sql", "output": "the SQL"}',
        "<the SQL>",
    ],
)
def test_a_solver_echo_holds_no_sql(reply):
    assert solver_sql(reply) is None


def test_real_sql_with_angle_brackets_is_still_sql():
    sql = "SELECT name FROM t WHERE a < 5 AND b <> 'the SQL'"
    assert solver_sql(json.dumps({"type": "final_sql", "output": sql})) == sql


@pytest.mark.parametrize(
    "reply",
    [
        '{"reasoning": "<one or two sentences>", "action": "labeled(\\"<term>\\")"}',
        '{"reasoning": "x", "action": "labeled(\\"term: <term>\\")"}',
        '{"reasoning": "x", "action": "unlabeled(\\"<sql segment>\\")"}',
        '{"reasoning": "x", "action": "unlabeled(\\"WHERE 1 = 1 <sql segment>\\")"}',
        '{"reasoning": "x", "action": "labeled(\\"your reply\\")"}',
    ],
)
def test_a_matcher_route_naming_a_placeholder_is_an_echo(reply):
    action = parse_matcher_output(reply)
    assert action is not None and prompt_echo(action.argument, "Top how many?")


def test_a_matcher_action_that_is_the_placeholder_is_no_action():
    reply = '{"reasoning": "<one or two sentences>", "action": "<your action>"}'
    assert parse_matcher_output(reply) is None


@pytest.mark.parametrize(
    "reply",
    [
        '{"answer": "<your reply>"}',
        '{"answer": "Answer: <your reply>"}',
        '{"answer": "your reply"}',
        "<your reply>",
        '<think>copy the format</think>{"answer": "<Your Reply>"}',
    ],
)
def test_a_responder_echo_is_no_answer(reply):
    assert parse_responder_output(reply) is None


def test_a_real_answer_with_brackets_is_still_an_answer():
    answer = "Those with more than <5> orders; that is my reply."
    assert parse_responder_output(json.dumps({"answer": answer})) == answer


# -- the parts count them as their unreadable replies ---------------------------------------


@pytest.mark.parametrize("strategy", ASKER_STRATEGIES)
def test_an_asker_echo_is_a_counted_fallback_stop_in_an_episode(serve, make_client, strategy):
    # one real question, then the format's placeholder as the second question
    server = serve(role_rules([QUESTION, "<your one question>"]))
    asker = make_llm_asker(f"llm:{strategy}", make_client(server.url))
    env = AmbiTabEnv("AmbiTab-Bird-v0", record_ids=[RECORD])
    actions = play(env, asker, RECORD)
    assert actions[-1] == FALLBACK_STOP
    assert [t.question for t in env.trajectory.turns] == [QUESTION]  # the echo was not asked
    assert env.trajectory.stop_reason == "fallback"
    assert asker.stats == {"calls": 2, "questions": 1, "unreadable": 1, "fallback_stops": 1}


def test_an_asker_echo_is_not_asked_even_when_unreadable_replies_are(serve, make_client):
    server = serve([ScriptRule('{"type": "clarification", "output": "<your one question>"}')])
    asker = LLMAsker(make_client(server.url), "direct", on_unreadable="question")
    view = PublicView(PublicSpec(request="Count staff.", database="hr"), questions_left=2)
    assert asker.act(view) == FALLBACK_STOP
    assert asker.stats == {"calls": 1, "unreadable": 1, "fallback_stops": 1}


def test_a_matcher_echo_is_unreadable_and_the_responder_refuses(serve, make_client):
    server = serve(role_rules(matcher='{"reasoning": "r", "action": "labeled(\\"<term>\\")"}'))
    oracle = make_llm_oracle(None, make_client(server.url))
    context = OracleContext(record())
    credits, answer = oracle.answer("Which customers count as top?", context)
    assert (credits, answer) == (frozenset(), REFUSAL)
    assert oracle.matcher.unreadable == 1 and oracle.matcher.stats["prompt_echoes"] == 1
    assert context.route.parsed is False
    assert [r for r in server.requests() if ROLE_MARKERS["responder"] in contents(r)] == []


def test_a_responder_echo_is_unreadable_and_becomes_the_refusal(serve, make_client):
    server = serve(
        role_rules(
            matcher='{"reasoning": "r", "action": "labeled(\\"top customers\\")"}',
            responder='{"answer": "<your reply>"}',
        )
    )
    oracle = make_llm_oracle(None, make_client(server.url))
    context = OracleContext(record())
    credits, answer = oracle.answer("Which customers count as top?", context)
    assert answer == REFUSAL and credits == frozenset({"top"})  # the route still credits
    assert oracle.responder.parse_failures == 1
    assert context.route.to_dict()["responder_parsed"] is False


def test_a_solver_echo_submits_no_sql(serve, make_client):
    from ambitab_gym.policies.llm import DONE_ACTION, make_llm_solver

    server = serve(role_rules([], solver=SOLVER_ECHO))
    solver = make_llm_solver(make_client(server.url), corpus="AmbiTab-Bird-v0")
    env = AmbiTabEnv("AmbiTab-Bird-v0", record_ids=["bird-0004"], solver=solver)
    env.reset(seed=0, options={"record_id": "bird-0004"})
    env.step(DONE_ACTION)
    assert env.trajectory.sql == ""
    assert env.trajectory.verdict.reason == "no_sql" and not env.trajectory.verdict.success
    assert solver.stats == {"calls": 1, "unreadable": 1}


# -- and the campaign counts them per role (evaluate's "Unreadable m/r/a/s") --------------------

MATCHER_OK = '{"reasoning": "r", "action": "labeled(\\"top customers\\")"}'
ECHO_SCRIPTS = {
    "matcher": {"matcher": '{"reasoning": "r", "action": "unlabeled(\\"<sql segment>\\")"}'},
    "responder": {"matcher": MATCHER_OK, "responder": '{"answer": "<your reply>"}'},
    "asker": {"questions": [QUESTION, "<your one question>"], "matcher": MATCHER_OK},
    "solver": {"matcher": MATCHER_OK, "solver": SOLVER_ECHO},
}
CASES = [("matcher", "checklist-ledger"), ("responder", "checklist-ledger")]
CASES += [("asker", strategy) for strategy in ASKER_STRATEGIES]
CASES += [("solver", "checklist-ledger")]


@pytest.mark.parametrize("role, strategy", CASES)
def test_a_campaign_counts_each_roles_echo_as_unreadable(
    serve, make_client, tmp_path, role, strategy
):
    script = {"questions": [QUESTION], **ECHO_SCRIPTS[role]}
    server = serve(role_rules(script.pop("questions"), **script))
    config = CampaignConfig(
        "AmbiTab-Bird-v0",
        asker=f"llm:{strategy}",
        solver="llm",
        oracle="llm",
        conditions=("asker",),
        limit=1,  # bird-0001: two ambiguities
    )
    client = make_client(server.url)
    summary = run_campaign(
        config, tmp_path / "r.duckdb", concurrency=1, llm_client=client, progress=False
    )
    assert summary.episodes == 1 and summary.errors == {}
    expected = dict.fromkeys(("matcher", "responder", "asker", "solver"), 0)
    expected[role] = 1
    assert summary.unreadable == expected
    assert summary.to_json()["unreadable"] == expected
    assert summary.fallback_stops == (1 if role == "asker" else 0)
