"""Scoring as paper Appendix C.3 defines it, on every oracle (issue 15, part B).

* the route scorer on hand-written routes (exact labeled, near misses, unlabeled with the term in
  the rationale or only in the response, unanswerable);
* an LLM-oracle campaign over HTTP (the scripted server on 127.0.0.1): credits online, routes
  stored per turn, and offline re-scoring that gives the same credits without a model call;
* fallback stops: out of recall and F1, counted in the table and in ``--json``;
* one F1: the trainer integrations and the evaluation summary agree on the same episodes;
* the knowledge oracle restates the evidence when a term is asked about again.

Every expected number below is worked out by hand from Definition 2 and C.3.
"""

from __future__ import annotations

import json
import re

import pytest
from factories import amb, make_record

from ambitab_gym import STOP, AmbiTabEnv
from ambitab_gym.cli import main
from ambitab_gym.corpora import load_corpus
from ambitab_gym.diagnostics import LeakageConfig, run_leakage
from ambitab_gym.evaluation import (
    CampaignConfig,
    ResultsStore,
    episode_metrics,
    rescore_campaign,
    rescore_episode,
    run_campaign,
    summarize_campaign,
)
from ambitab_gym.integrations.common import macro_means, score_episode
from ambitab_gym.llm import LLMClient
from ambitab_gym.metrics import score_credits
from ambitab_gym.oracles import REFUSAL, Route
from ambitab_gym.oracles.routes import score_route
from ambitab_gym.testing.llm_server import (
    ASKER_TURN_PATTERN,
    ROLE_MARKERS,
    ScriptedServer,
    ScriptRule,
)
from ambitab_gym.trajectory import FALLBACK_STOP

CORPUS = "AmbiTab-Bird-v0"

RECORD = make_record(
    [
        amb("top", "top customers", "best customers"),
        amb("spend", "spending", "spent", kind="knowledge"),
        amb("order", "sorted", kind="non_critical"),
    ],
    request="List our top customers by spending, sorted.",
)
COUNTED = frozenset({"top", "spend"})


def c3(route: Route | None, question: str, response: str | None = None) -> set[str]:
    return set(score_route(route, question, response, RECORD))


# -- the route scorer on hand-written routes ------------------------------------------------------


def test_exact_labeled_term_takes_precedence():
    # the question and the rationale name "top customers", the label is exactly "spending"
    route = Route("labeled", "spending", "it is about the top customers")
    assert c3(route, "Which top customers?", "The top customers.") == {"spend"}
    # an exact alias is an exact label too
    assert c3(Route("labeled", "best customers"), "How is spending measured?") == {"top"}


@pytest.mark.parametrize(
    "label",
    ["Top Customers", "top  customers", "TOP\tCUSTOMERS", "the top customers ranking"],
)
def test_near_miss_label_is_matched_as_text(label):
    # not verbatim, so not exact; the label still mentions the annotated term
    assert c3(Route("labeled", label, "scripted"), "How many?", "Five.") == {"top"}


def test_near_miss_label_without_a_term_falls_to_the_question():
    # "customer ranking" names no registered term; the question names "spending"
    assert c3(Route("labeled", "customer ranking"), "How is spending measured?") == {"spend"}
    # ... and when nothing names one, no credit (the old lenient resolution is gone)
    assert c3(Route("labeled", "top"), "How many?", "Five.") == set()


def test_unlabeled_with_the_term_in_the_rationale():
    route = Route("unlabeled", "ORDER BY amount DESC", "The user asks how spending is ranked.")
    assert c3(route, "How do you rank them?", "By amount.") == {"spend"}


def test_unlabeled_sql_segment_is_not_searched():
    # "spent" is an alias of spending, but here it is only a column in the SQL segment
    route = Route("unlabeled", "ORDER BY spent DESC", "about the ranking")
    assert c3(route, "How do you rank them?", "By amount.") == set()


def test_unlabeled_with_the_term_only_in_the_response():
    route = Route("unlabeled", "LIMIT 5", "about the length of the list")
    assert c3(route, "How many should I list?", "Only the five top customers.") == {"top"}
    # the fixed refusal reveals nothing, even where a term would match its words
    assert c3(route, "How many should I list?", REFUSAL) == set()


def test_unanswerable_and_unreadable_routes_credit_nothing():
    route = Route("unanswerable", rationale="about the top customers")
    assert c3(route, "What about top customers?", "The top customers are the five...") == set()
    assert c3(Route("unanswerable", parsed=False), "Which top customers?") == set()
    assert c3(None, "Which top customers?") == set()


def test_sources_in_order_question_rationale_response():
    route = Route("unlabeled", "x", "about spending")
    assert c3(route, "Which top customers?", "The top customers.") == {"top"}  # question first
    assert c3(route, "How many?", "The top customers.") == {"spend"}  # rationale, then response


def test_a_route_to_a_non_counted_ambiguity_does_not_count():
    credit = score_route(Route("labeled", "sorted"), "Sorted how?", None, RECORD)
    assert credit == {"order"}
    # one question, no counted credit: p = 0, r = 0, F1 = 0 (C.3: only critical and knowledge)
    assert score_credits([credit], COUNTED) == (0.0, 0.0, 0.0)


# -- an LLM-oracle campaign over HTTP: online credits, stored routes, offline re-scoring ---------

Q1 = "Which customers count as top customers?"
Q2 = "How should it be measured?"
Q3 = "Anything else I should know?"


def _on(role: str, *texts: str) -> str:
    """A regex matching a request of ``role`` whose messages contain every text."""
    return "(?s)" + "".join(f"(?=.*{re.escape(t)})" for t in (ROLE_MARKERS[role], *texts))


def _route(reasoning: str, action: str) -> str:
    return json.dumps({"reasoning": reasoning, "action": action})


def campaign_rules(asks: list[str]) -> list[ScriptRule]:
    turns = [json.dumps({"type": "clarification", "output": q}) for q in asks]
    turns.append(json.dumps({"type": "done", "output": None}))
    return [
        ScriptRule(turns, when=ROLE_MARKERS["asker"], count=ASKER_TURN_PATTERN),
        ScriptRule(
            _route("asks which customers are meant", 'labeled("top customers")'),
            when=_on("matcher", Q1),
        ),
        ScriptRule(
            _route(
                "The user asks how spending is measured.",
                'unlabeled("oi.quantity * oi.unit_price")',
            ),
            when=_on("matcher", Q2),
        ),
        ScriptRule(_route("nothing specific", "unanswerable()"), when=_on("matcher", Q3)),
        ScriptRule(json.dumps({"answer": "Scripted answer."}), when=ROLE_MARKERS["responder"]),
    ]


@pytest.fixture
def server():
    with ScriptedServer(campaign_rules([Q1, Q2, Q3])) as running:
        yield running


@pytest.fixture
def client(server):
    with LLMClient(server.url, "scripted", backoff_s=0.01) as made:
        yield made


def test_llm_campaign_credits_online_and_rescores_offline_to_the_same(client, tmp_path):
    config = CampaignConfig(
        CORPUS, asker="llm:direct", oracle="llm", conditions=("asker",), limit=4
    )
    path = tmp_path / "r.duckdb"
    summary = run_campaign(config, path, concurrency=2, llm_client=client, progress=False)
    with ResultsStore(path) as store:
        rows = {r["record_id"]: r for r in store.episodes(config.campaign_id)}
        rescored = {r["record_id"]: r for r in rescore_campaign(store, config.campaign_id)}
    # bird-0001..0003 (top customers: critical, spending: knowledge):
    #   Q1 labeled("top customers") - exact term -> top_customers
    #   Q2 unlabeled, "spending" only in the rationale -> spending (the old scorer: nothing)
    #   Q3 unanswerable() -> nothing; then the asker stops.  p = 2/3, r = 1, F1 = 0.8
    # bird-0004 (customers): Q1's label "top customers" names no registered term of this
    #   record, and Q2's segment is not in its reference SQL: both are invalid routes
    #   (unreadable, issue 16) and credit nothing; Q3 names nothing; the budget
    #   (m + 2 = 3 questions) ends it.  p = 0, r = 0, F1 = 0
    expected = {
        "bird-0001": [["top_customers"], ["spending"], []],
        "bird-0004": [[], [], []],
    }
    for record_id, credits in expected.items():
        assert [t["credits"] for t in rows[record_id]["dialogue"]] == credits
    assert [t["route"]["kind"] for t in rows["bird-0001"]["dialogue"]] == [
        "labeled",
        "unlabeled",
        "unanswerable",
    ]
    turn = rows["bird-0001"]["dialogue"][1]
    assert turn["route"] == {
        "kind": "unlabeled",
        "argument": "oi.quantity * oi.unit_price",
        "rationale": "The user asks how spending is measured.",
        "parsed": True,
    }
    assert turn["answer"] == "Scripted answer." and turn["question"] == Q2
    assert rows["bird-0001"]["precision"] == pytest.approx(2 / 3)
    assert rows["bird-0001"]["recall"] == 1.0 and rows["bird-0001"]["f1"] == pytest.approx(0.8)
    assert rows["bird-0004"]["f1"] == 0.0
    assert [t["route"]["parsed"] for t in rows["bird-0004"]["dialogue"]] == [False, False, True]
    assert rows["bird-0004"]["stop_reason"] == "budget"
    # macro means: precision (3 x 2/3 + 0) / 4 = 1/2, recall 3/4, F1 (3 x 0.8 + 0) / 4
    assert summary.precision.mean == pytest.approx(1 / 2)
    assert summary.recall.mean == 0.75 and summary.f1.mean == pytest.approx(0.6)
    assert summary.unreadable["matcher"] == 2
    # offline: the same credits and scores from the stored routes, no model call
    requests = client.usage.ok
    for record_id, row in rows.items():
        again = rescored[record_id]
        assert [t["credits"] for t in again["dialogue"]] == [t["credits"] for t in row["dialogue"]]
        assert again["changed_turns"] == 0 and again["rescored_turns"] == 3
        for metric in ("precision", "recall", "f1"):
            assert again[metric] == pytest.approx(row[metric])
    assert client.usage.ok == requests
    # the offline scorer reads the stored route: a rationale naming nothing loses the credit
    edited = json.loads(json.dumps(rows["bird-0001"]))
    edited["dialogue"][1]["route"]["rationale"] = "about the measure"
    changed = rescore_episode(edited, load_corpus(CORPUS).record("bird-0001"))
    assert changed["dialogue"][1]["credits"] == [] and changed["changed_turns"] == 1
    assert changed["recall"] == 0.5  # only top_customers left


def test_rescore_command_prints_the_same_figures(client, tmp_path, capsys):
    config = CampaignConfig(
        CORPUS, asker="llm:direct", oracle="llm", conditions=("asker",), limit=4
    )
    path = tmp_path / "r.duckdb"
    summary = run_campaign(config, path, concurrency=2, llm_client=client, progress=False)
    capsys.readouterr()
    assert main(["rescore", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])[summary.campaign_id]
    assert result["recall"] == 0.75 and result["f1"] == pytest.approx(0.6)
    assert result["precision"] == pytest.approx(summary.precision.mean)
    assert result["rescored_turns"] == 12 and result["changed_turns"] == 0
    assert "12 routed turns re-scored, 0 credit(s) changed" in out


def test_hybrid_oracle_routes_are_scored_and_rescored(tmp_path):
    # pi_none^adv under (LLM match, resp*): "Please elaborate." is routed unlabeled with a
    # rationale that names "spending" -> credited (C.3); the reference oracle credits nothing.
    rules = [
        ScriptRule(
            _route(
                "probably about how spending is measured",
                'unlabeled("oi.quantity * oi.unit_price")',
            ),
            when=_on("matcher", "Please elaborate."),
        ),
        ScriptRule(_route("too vague", "unanswerable()"), when=ROLE_MARKERS["matcher"]),
    ]
    config = LeakageConfig(
        CORPUS,
        asker="generic",
        oracle="llm",
        limit=3,
        conditions=("generic:hybrid", "generic:reference"),
    )
    path = tmp_path / "r.duckdb"
    with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        report = run_leakage(config, path, llm_client=client, progress=False, resamples=50)
    # bird-0001..0003: m = 2, budget 4 questions: clarify / elaborate / clarify / elaborate;
    # the two "elaborate" turns credit spending (the second one is a repeat): r = 1/2
    assert report.to_json()["d_rec_none"]["mean"] == 50.0
    with ResultsStore(path) as store:
        rows = [r for r in store.episodes(config.campaign_id) if r["condition"] == "generic:hybrid"]
        rescored = rescore_campaign(store, config.campaign_id)
    assert len(rows) == 3
    for row in rows:
        assert [t["credits"] for t in row["dialogue"]] == [[], ["spending"], [], ["spending"]]
        # resp* answers the credited turns with the stored resolution, refuses the others
        assert [t["answer"] == REFUSAL for t in row["dialogue"]] == [True, False, True, False]
        assert row["recall"] == 0.5 and row["precision"] == 0.25
    hybrid = [r for r in rescored if r["condition"] == "generic:hybrid"]
    assert all(r["changed_turns"] == 0 and r["rescored_turns"] == 4 for r in hybrid)
    reference = [r for r in rescored if r["condition"] == "generic:reference"]
    assert all(r["rescored_turns"] == 0 and r["recall"] == 0.0 for r in reference)


# -- fallback stops -------------------------------------------------------------------------------

GERMANY = "How many customers do we have in Germany?"  # the request of bird-0004 and bird-0005


def fallback_rules() -> list[ScriptRule]:
    return [
        # the asker cannot be read on the Germany records: a fallback stop before any question
        ScriptRule("Let me look at the schema first.", when=_on("asker", GERMANY)),
        *campaign_rules([Q1]),
    ]


def test_fallback_stop_is_recorded_by_the_env():
    env = AmbiTabEnv(CORPUS)
    env.reset(options={"record_id": "bird-0001"})
    env.step('What do you mean by "top customers"?')
    _, _, terminated, _, info = env.step(FALLBACK_STOP)
    assert terminated and info["stop_reason"] == "fallback"
    assert env.trajectory.stop_reason == "fallback" and env.trajectory.fallback
    score = score_episode(env.trajectory, env.record)
    # the question still counts for precision; recall and F1 are omitted
    assert (score.precision, score.recall, score.f1, score.fallback) == (1.0, None, None, True)


def test_unreadable_llm_asker_gives_fallback_stops_out_of_recall_and_f1(tmp_path, capsys):
    path = tmp_path / "r.duckdb"
    with ScriptedServer(fallback_rules()) as server:
        argv = [
            "evaluate",
            CORPUS,
            "--asker",
            "llm:direct",
            "--oracle",
            "llm",
            "--limit",
            "5",
            "--results",
            str(path),
            "--llm-url",
            server.url,
            "--model",
            "scripted",
            "--concurrency",
            "2",
            "--no-progress",
            "--json",
        ]
        assert main(argv) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    # asker condition: bird-0001..0003 ask Q1 (labeled "top customers" -> top_customers) and
    # stop: p = 1, r = 1/2, F1 = 2 (1)(1/2) / (3/2) = 2/3.  bird-0004/0005: fallback stops
    # with no question: no precision, recall or F1.  Counting them as ordinary stops would
    # give recall (3 x 1/2) / 5 = 0.3 and F1 (3 x 2/3) / 5 = 0.4.
    assert result["fallback_stops"] == 2
    assert result["recall"] == 0.5 and result["f1"] == pytest.approx(2 / 3)
    assert result["precision"] == 1.0
    header, _, row = out.splitlines()[1:4]
    assert header.split()[-1] == "Fallback" and row.split()[-1] == "2"
    with ResultsStore(path) as store:
        [campaign] = store.campaigns("evaluate")
        rows = [r for r in store.episodes(campaign["campaign_id"]) if r["condition"] == "asker"]
    stops = {r["record_id"]: r["stop_reason"] for r in rows}
    assert stops == {
        "bird-0001": "asker",
        "bird-0002": "asker",
        "bird-0003": "asker",
        "bird-0004": "fallback",
        "bird-0005": "fallback",
    }
    fallback = [r for r in rows if r["stop_reason"] == "fallback"]
    assert all(r["recall"] is None and r["f1"] is None for r in fallback)
    # the re-scored campaign keeps them out and counts them too
    assert main(["rescore", str(path), "--json"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    [rescored] = again.values()
    assert rescored["fallback_stops"] == 2 and rescored["recall"] == 0.5


# -- one F1: integrations and evaluation agree ----------------------------------------------------


def _episode(env, record_id: str, actions: list[str]):
    env.reset(options={"record_id": record_id})
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    return env.trajectory, env.record


def test_integrations_and_evaluation_give_the_same_f1():
    env = AmbiTabEnv(CORPUS)  # the deterministic (knowledge) oracle, ask-only
    episodes = [
        # m = 2; one productive question of two: p = 1/2, r = 1/2, F1 = 1/2
        _episode(
            env, "bird-0001", ['What do you mean by "top customers"?', "Please elaborate.", STOP]
        ),
        # m = 2, stops at once: no precision, r = 0, F1 = 0
        _episode(env, "bird-0006", [STOP]),
        # m = 0, abstains: no precision, recall or F1 (the reward would be 1)
        _episode(env, "bird-0016", [STOP]),
        # m = 0, asks: p = 0 (a question without a counted credit), no recall or F1
        _episode(env, "bird-0027", ["Which year do you mean?"]),
        # m = 1, one productive question, then a fallback stop: p = 1, no recall or F1
        _episode(env, "bird-0004", ['What do you mean by "customers"?', FALLBACK_STOP]),
    ]
    assert [r.m for _, r in episodes] == [2, 2, 0, 0, 1]
    integrations = macro_means([score_episode(t, r) for t, r in episodes])
    rows = [
        {
            "condition": "asker",
            "seed": 0,
            "stop_reason": t.stop_reason,
            "error": None,
            "n_questions": t.n_questions,
            **episode_metrics(t, r),
        }
        for t, r in episodes
    ]
    evaluation = summarize_campaign(rows)
    # F1 = (1/2 + 0) / 2, recall = (1/2 + 0) / 2, precision = (1/2 + 0 + 1) / 3
    assert integrations["f1"] == evaluation.f1.mean == pytest.approx(0.25)
    assert integrations["recall"] == evaluation.recall.mean == pytest.approx(0.25)
    assert integrations["precision"] == evaluation.precision.mean == pytest.approx(0.5)
    assert integrations["fallback_stops"] == evaluation.fallback_stops == 1
    assert evaluation.to_json()["fallback_stops"] == 1
    assert integrations["recall_episodes"] == 2 and integrations["precision_episodes"] == 3


# -- the knowledge oracle restates evidence on a repeat -------------------------------------------


def test_knowledge_repeat_restates_the_bird_evidence():
    env = AmbiTabEnv(CORPUS)
    env.reset(options={"record_id": "bird-0001"})
    spending = next(a for a in env.record.ambiguities if a.id == "spending")
    assert spending.evidence and spending.evidence != spending.resolution
    env.step("How should spending be measured?")
    env.step("Sorry, how is spending measured again?")
    first, again = env.trajectory.turns
    assert first.credits == again.credits == {"spending"}
    assert first.answer == spending.resolution
    assert again.answer == f"As I said before: {spending.evidence}"
    assert again.answer.startswith("As I said before: spending refers to SUM(quantity")
