"""The two-stage LLM oracle: routes, parse failures, access policies, SQL segments."""

from __future__ import annotations

import asyncio
import json

import pytest
from llm_helpers import contents, record

from ambitab_gym.corpora import load_corpus
from ambitab_gym.llm import LLMError
from ambitab_gym.oracles import (
    REFUSAL,
    IntentMatcher,
    Oracle,
    OracleContext,
    OracleTurn,
    ReferenceResponder,
)
from ambitab_gym.oracles.access import AccessPolicy, sql_segments
from ambitab_gym.oracles.llm import LLMMatcher, LLMResponder, NotesBuilder, make_llm_oracle
from ambitab_gym.testing.llm_server import ROLE_MARKERS, ScriptRule

SQL = "SELECT name FROM customers ORDER BY spent DESC LIMIT 5"


def rules(matcher_reply: str, answer: str = "The five biggest spenders.") -> list[ScriptRule]:
    return [
        ScriptRule(matcher_reply, when=ROLE_MARKERS["matcher"]),
        ScriptRule(json.dumps({"answer": answer}), when=ROLE_MARKERS["responder"]),
    ]


def action(text: str) -> str:
    return json.dumps({"reasoning": "scripted", "action": text})


def by_role(server, role: str) -> list[str]:
    return [contents(r) for r in server.requests() if ROLE_MARKERS[role] in contents(r)]


# C.3: an exact term or alias credits, and so does a near miss that normalizes to one ("Top
# Customers"). A fragment ("top") names no registered term: since routes are validated
# (issue 16) it is an unreadable route - the responder refuses and nothing is credited.
# (Before validation the responder was pointed at the point "top" leniently resolved to.)
@pytest.mark.parametrize(
    "label, credited",
    [("top customers", True), ("Top Customers", True), ("best customers", True), ("top", False)],
)
def test_labeled_term_and_alias_credit(serve, make_client, label, credited):
    server = serve(rules(action(f'labeled("{label}")')))
    oracle = make_llm_oracle(None, make_client(server.url))
    credits, answer = oracle.answer("How many count as top?", OracleContext(record()))
    assert credits == (frozenset({"top"}) if credited else frozenset())
    if not credited:
        assert answer == REFUSAL and oracle.matcher.unreadable == 1
        assert by_role(server, "responder") == []
        return
    assert answer == "The five biggest spenders."
    [responder_prompt] = by_role(server, "responder")
    assert 'This question is about "top customers"' in responder_prompt
    assert "I mean the five biggest spenders." in responder_prompt  # the frozen intent
    assert oracle.stats["labeled"] == 1


def test_unparseable_matcher_output_is_unanswerable_and_counted(serve, make_client):
    server = serve(rules("I think it is about customers, maybe."))
    oracle = make_llm_oracle(None, make_client(server.url))
    context = OracleContext(record())
    for _ in range(3):
        assert oracle.answer("Hmm?", context) == (frozenset(), REFUSAL)
    assert oracle.matcher.parse_failures == 3
    assert oracle.stats["parse_failures"] == 3 and oracle.stats["unanswerable"] == 3
    assert by_role(server, "responder") == []  # refusals cost no call


def test_unknown_label_is_unanswerable(serve, make_client):
    server = serve(rules(action('labeled("shipping fee")')))
    oracle = make_llm_oracle(None, make_client(server.url))
    assert oracle.answer("What about fees?", OracleContext(record())) == (frozenset(), REFUSAL)
    assert oracle.matcher.unknown_labels == 1 and oracle.matcher.parse_failures == 0


def test_unanswerable_may_be_worded_by_the_model(serve, make_client):
    server = serve(rules(action("unanswerable()"), answer="That is not something I can say."))
    oracle = make_llm_oracle(None, make_client(server.url), answer_unanswerable=True)
    credits, answer = oracle.answer("What is your name?", OracleContext(record()))
    assert (credits, answer) == (frozenset(), "That is not something I can say.")
    assert "not about anything you need to settle" in by_role(server, "responder")[0]


def test_unlabeled_segment_reaches_the_responder(serve, make_client):
    server = serve(rules(action('unlabeled("ORDER BY spent DESC")'), answer="By total spent."))
    oracle = make_llm_oracle(None, make_client(server.url), policy="unfiltered")
    credits, answer = oracle.answer("Sorted how?", OracleContext(record()))
    assert (credits, answer) == (frozenset(), "By total spent.")
    [prompt] = by_role(server, "responder")
    assert "The part of your query that settles it: ORDER BY spent DESC" in prompt


def test_unreadable_responder_reply_is_used_as_text_and_counted(serve, make_client):
    server = serve(
        [
            ScriptRule(action('labeled("top customers")'), when=ROLE_MARKERS["matcher"]),
            ScriptRule("Five of them.", when=ROLE_MARKERS["responder"]),
        ]
    )
    oracle = make_llm_oracle(None, make_client(server.url))
    assert oracle.answer("How many?", OracleContext(record()))[1] == "Five of them."
    assert oracle.responder.parse_failures == 1


def _prompts_under(serve, make_client, **options):
    server = serve(rules(action('labeled("top customers")')))
    oracle = make_llm_oracle(None, make_client(server.url), **options)
    oracle.answer("How many count as top?", OracleContext(record()))
    return by_role(server, "matcher")[0], by_role(server, "responder")[0]


def test_scoped_policy_hides_sql_evidence_and_schema(serve, make_client):
    matcher, responder = _prompts_under(serve, make_client, policy="scoped")
    for prompt in (matcher, responder):
        assert SQL not in prompt and "LIMIT 5" not in prompt  # neither SQL nor segments
        assert "CREATE TABLE" not in prompt
        assert "refers to ORDER BY" not in prompt  # withheld evidence
    assert "the five customers with the highest spending" not in matcher  # no meanings
    assert "the five customers with the highest spending" in responder  # annotations
    assert "unlabeled" not in matcher


def test_scoped_with_sql_grounding(serve, make_client):
    matcher, responder = _prompts_under(
        serve, make_client, policy="scoped", responder_reads_sql=True
    )
    assert SQL in responder and "CREATE TABLE customers" in responder
    assert "- LIMIT 5" in matcher and SQL not in matcher  # segments only
    assert "unlabeled" in matcher


def test_unfiltered_policy_reads_sql_context_and_evidence(serve, make_client):
    matcher, responder = _prompts_under(serve, make_client, policy="unfiltered")
    for prompt in (matcher, responder):
        assert SQL in prompt
        assert "CREATE TABLE customers" in prompt
        assert "refers to ORDER BY spent DESC LIMIT 5" in prompt
    assert "- ORDER BY spent DESC" in matcher


def test_unfiltered_with_the_sql_switch_off(serve, make_client):
    matcher, responder = _prompts_under(
        serve, make_client, policy="unfiltered", responder_reads_sql=False
    )
    assert SQL in matcher
    assert SQL not in responder and "- LIMIT 5" not in responder
    assert "query you have in mind" not in responder
    assert "CREATE TABLE customers" in responder  # still the task context


def test_matcher_reads_dialogue_only_when_asked(serve, make_client):
    server = serve(rules(action('labeled("top customers")')))
    context = OracleContext(record())
    quiet = make_llm_oracle(None, make_client(server.url))
    quiet.answer("First question about top?", context)
    context.turns.append(OracleTurn("First question about top?", "Five.", frozenset({"top"})))
    quiet.answer("Second?", context)
    chatty = make_llm_oracle(None, make_client(server.url), matcher_reads_dialogue=True)
    chatty.answer("Third?", context)
    first, second, third = by_role(server, "matcher")
    assert "Earlier questions" not in second
    assert "Q1: First question about top?\nA1: Five." in third


def test_corpus_schema_and_async_path(serve, make_client):
    corpus = load_corpus("AmbiTab-Bird-v0")
    target = next(r for r in corpus.records if r.m > 0 and r.ambiguities[0].term)
    term = target.ambiguities[0].term
    server = serve(rules(action(f"labeled({json.dumps(term)})")))
    oracle = make_llm_oracle("AmbiTab-Bird-v0", make_client(server.url), policy="unfiltered")

    async def ask():
        return await oracle.aanswer(f"What do you mean by {term}?", OracleContext(target))

    credits, answer = asyncio.run(ask())
    assert credits == frozenset({target.ambiguities[0].id})
    assert answer == "The five biggest spenders."
    assert "CREATE TABLE" in by_role(server, "matcher")[0]  # schema read from the database


def test_hybrid_oracle_and_llm_responder_behind_intent_matcher(serve, make_client):
    server = serve(rules(action('labeled("top customers")')))
    client = make_client(server.url)
    notes = NotesBuilder(AccessPolicy.scoped())
    hybrid = Oracle(LLMMatcher(client, notes), ReferenceResponder())
    assert hybrid.answer("Top?", OracleContext(record())) == (
        frozenset({"top"}),
        "I mean the five biggest spenders.",
    )
    behind = Oracle(IntentMatcher(), LLMResponder(client, notes))
    context = OracleContext(record())
    assert behind.answer("Who are the 'top customers'?", context)[1] == (
        "The five biggest spenders."
    )
    assert behind.answer("Please elaborate.", context) == (frozenset(), REFUSAL)


def test_server_fault_reaches_the_caller_with_its_category(serve, make_client):
    server = serve(rules(action('labeled("top customers")')))
    oracle = make_llm_oracle(None, make_client(server.url, max_retries=0))
    server.fail_next("http_500")
    with pytest.raises(LLMError) as caught:
        oracle.answer("Top?", OracleContext(record()))
    assert caught.value.category == "http_500"


def test_policy_names():
    with pytest.raises(ValueError, match="scoped"):
        AccessPolicy.named("leaky")
    assert AccessPolicy.named("scoped", responder_reads_sql=True).matcher_sql
    assert not AccessPolicy.named(
        "scoped", responder_reads_sql=True, matcher_reads_sql=False
    ).matcher_sql


@pytest.mark.parametrize(
    "sql, dialect, expected",
    [
        (
            "SELECT DISTINCT c.name, SUM(o.total) AS s FROM customers c JOIN orders o "
            "ON o.cid = c.id WHERE o.status = 'delivered' GROUP BY c.name "
            "HAVING SUM(o.total) > 10 ORDER BY s DESC LIMIT 5 OFFSET 1",
            "sqlite",
            (
                "SELECT DISTINCT c.name, SUM(o.total) AS s",
                "FROM customers AS c",
                "JOIN orders AS o ON o.cid = c.id",
                "WHERE o.status = 'delivered'",
                "GROUP BY c.name",
                "HAVING SUM(o.total) > 10",
                "ORDER BY s DESC",
                "LIMIT 5",
                "OFFSET 1",
            ),
        ),
        (
            "WITH big AS (SELECT id FROM t WHERE v > 3) SELECT COUNT(*) FROM big",
            "postgres",
            ("WITH big AS (SELECT id FROM t WHERE v > 3)", "SELECT COUNT(*)", "FROM big"),
        ),
        (
            "SELECT a FROM x UNION SELECT a FROM y",
            "sqlite",
            ("SELECT a", "FROM x", "UNION", "FROM y"),
        ),
        ("this is not sql ((", "sqlite", ("this is not sql ((",)),
    ],
)
def test_sql_segments(sql, dialect, expected):
    assert sql_segments(sql, dialect) == expected
