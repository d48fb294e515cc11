"""Prompt layouts of the three asking strategies and the solver, and the trust boundary."""

from __future__ import annotations

import json

import pytest

from ambitab_gym.corpora import ENV_IDS, load_corpus
from ambitab_gym.oracles import REFUSAL
from ambitab_gym.oracles.llm_prompts import (
    NoteEntry,
    OracleNotes,
    matcher_messages,
    responder_messages,
)
from ambitab_gym.policies.llm_prompts import (
    ASKER_STRATEGIES,
    asker_messages,
    is_refusal,
    solver_messages,
)
from ambitab_gym.records import PublicSpec
from ambitab_gym.testing.llm_server import ROLE_MARKERS
from ambitab_gym.trajectory import DialogueTurn, PublicView

SPEC = PublicSpec(request="List our top customers by spending.", database="shop")
DIALOGUE = (
    DialogueTurn("How many is top?", "The five biggest spenders."),
    DialogueTurn("What counts as spending?", REFUSAL),
    DialogueTurn("Which currency?", "Euros."),
)


def view(dialogue=DIALOGUE, left=2) -> PublicView:
    return PublicView(SPEC, dialogue, questions_left=left)


def text(messages) -> str:
    return "\n".join(m["content"] for m in messages)


def test_direct_layout():
    messages = asker_messages("direct", view())
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "Q1: How many is top?\nA1: The five biggest spenders." in user
    assert "Turn 4." in user and "You may ask 2 more questions." in user
    assert "checklist" not in messages[0]["content"].lower()


def test_checklist_chat_layout():
    messages = asker_messages("checklist-chat", view())
    assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "user"] * 3
    asked = [json.loads(m["content"]) for m in messages if m["role"] == "assistant"]
    assert asked == [{"type": "clarification", "output": t.question} for t in DIALOGUE]
    assert messages[3]["content"] == "The five biggest spenders."
    assert messages[-1]["content"].startswith("Euros.")
    assert "2 more questions" in messages[-1]["content"]
    assert "checklist" in messages[0]["content"].lower()


def test_checklist_ledger_lists_settled_and_unanswered():
    messages = asker_messages("checklist-ledger", view())
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    settled, unanswered = user.split("Questions the user could not answer")
    assert "You asked: How many is top?" in settled and "You asked: Which currency?" in settled
    assert "What counts as spending?" not in settled
    assert "You asked: What counts as spending?" in unanswered
    assert "Turn 4." in user


def test_first_turn_and_last_question_wording():
    for strategy in ASKER_STRATEGIES:
        messages = asker_messages(strategy, view(dialogue=(), left=1))
        assert "last question" in text(messages)
        assert ROLE_MARKERS["asker"] in messages[0]["content"]
    assert "(none)" in asker_messages("checklist-ledger", view(dialogue=()))[1]["content"]


def test_unknown_strategy():
    with pytest.raises(ValueError, match="checklist-ledger"):
        asker_messages("socratic", view())


def test_solver_layout_and_dialect_rules():
    messages = solver_messages(PublicView(SPEC, DIALOGUE, 0, "sql"), dialect="sqlite")
    assert ROLE_MARKERS["solver"] in messages[0]["content"]
    assert "exactly one SQLite statement" in messages[0]["content"]
    assert "Q3: Which currency?\nA3: Euros." in messages[1]["content"]
    postgres = solver_messages(PublicView(SPEC, (), 0, "sql"), dialect="postgres")
    assert "PostgreSQL" in postgres[0]["content"] and "SQLite" not in postgres[0]["content"]
    assert "no clarifying questions were asked" in postgres[1]["content"]


def test_refusal_detection():
    assert is_refusal(REFUSAL)
    assert is_refusal("Sorry, this is out of scope.")
    assert is_refusal("I don't know that.")
    assert not is_refusal("Only delivered orders, in euros.")


def test_oracle_prompts_show_only_given_notes():
    notes = OracleNotes(
        "List top customers.",
        (NoteEntry("top customers", ("best",), meaning="five biggest spenders"),),
    )
    matcher = text(matcher_messages("Top how many?", notes))
    assert ROLE_MARKERS["matcher"] in matcher
    assert '"top customers" (also: best)' in matcher
    assert "SELECT" not in matcher and "unlabeled" not in matcher
    grounded = OracleNotes(notes.request, notes.entries, segments=("LIMIT 5",))
    assert "unlabeled" in text(matcher_messages("Top how many?", grounded))
    responder = text(
        responder_messages("Top?", notes, action='labeled("top customers")', focus="the top 5")
    )
    assert ROLE_MARKERS["responder"] in responder
    assert "What you meant: the top 5" in responder and "query you have in mind" not in responder


def _bundled_corpora():
    names = []
    for env_id in ENV_IDS:
        try:
            load_corpus(env_id)
        except Exception:  # a corpus still being written by another helper
            continue
        names.append(env_id)
    return names


@pytest.mark.parametrize("env_id", _bundled_corpora())
def test_agent_prompts_hold_no_hidden_fields(env_id):
    """Asker and solver prompts, built from the public view, never carry hidden record fields
    (reference SQL, resolutions, frozen responses, withheld evidence) that the public task text
    does not itself contain."""
    corpus = load_corpus(env_id)
    for record in corpus.records:
        spec = corpus.public_spec(record)
        public = PublicView(spec, (DialogueTurn("Could you clarify?", REFUSAL),), 2)
        task = public.render_task()
        hidden = [record.verification.reference_sql]
        for ambiguity in record.ambiguities:
            hidden += [ambiguity.resolution, ambiguity.response, ambiguity.evidence]
            hidden += [ambiguity.sql_snippet]
        hidden = [h for h in hidden if h and len(h) > 12 and h not in task]
        prompts = [text(asker_messages(s, public)) for s in ASKER_STRATEGIES]
        prompts.append(text(solver_messages(PublicView(spec, (), 0, "sql"))))
        for prompt in prompts:
            for secret in hidden:
                assert secret not in prompt, (record.id, secret)
