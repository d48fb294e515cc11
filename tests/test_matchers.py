"""Hand-worked episodes for each rule of the deterministic oracles.

See docs/design.md section 5, Oracles.
"""

from __future__ import annotations

from factories import amb, make_record

from ambitab_gym.oracles import (
    REFUSAL,
    IntentMatcher,
    KnowledgeMatcher,
    OracleContext,
    OracleTurn,
    ReferenceResponder,
    deterministic_oracle,
    evidence_concept,
)

RECORD = make_record(
    [
        amb("top", "top earners", "earners", response="The three best paid."),
        amb("region", "region", "area", response="The sales region."),
        amb("order", "sorted", kind="non_critical", response="Descending."),
    ]
)


def credits(matcher, question, record=RECORD, turns=()):
    return set(matcher.match(question, OracleContext(record, list(turns))))


def test_earliest_mention_wins():
    # "region" starts at 8, "top earners" at 30: the earliest mention is credited.
    assert credits(IntentMatcher(), "Which region and which top earners?") == {"region"}
    assert credits(IntentMatcher(), "Which top earners, in which region?") == {"top"}


def test_quoted_target_beats_earlier_mention():
    assert credits(IntentMatcher(), 'Which region do the "top earners" belong to?') == {"top"}
    assert credits(IntentMatcher(), "Which 'area' holds the earners?") == {"region"}
    assert credits(IntentMatcher(), "Which region holds the “earners”?") == {"top"}


def test_longer_name_first_at_same_position():
    record = make_record([amb("a", "top"), amb("b", "top earners")])
    assert credits(IntentMatcher(), "What are top earners?", record) == {"b"}
    assert credits(IntentMatcher(), "What is top?", record) == {"a"}


def test_aliases_and_case_and_whitespace():
    assert credits(IntentMatcher(), "Define EARNERS please") == {"top"}
    assert credits(IntentMatcher(), "what about top\n  earners") == {"top"}


def test_whole_words_only():
    # "regional" and "toppers" must not match "region" / "top".
    assert credits(IntentMatcher(), "Is it regional data?") == set()


def test_unmatched_question_is_refused():
    oracle = deterministic_oracle("intent")
    got, answer = oracle.answer("Please elaborate.", OracleContext(RECORD))
    assert got == frozenset() and answer == REFUSAL


def test_tie_is_refused():
    record = make_record([amb("a", "sales", "revenue"), amb("b", "income", "revenue")])
    oracle = deterministic_oracle("intent")
    got, answer = oracle.answer("What counts as revenue?", OracleContext(record))
    assert got == frozenset() and answer == REFUSAL
    # the tie only concerns the shared alias; a distinct name still matches
    assert credits(IntentMatcher(), "What counts as income, or revenue?", record) == {"b"}


def test_single_answer_mode_credits_at_most_one():
    got = credits(IntentMatcher(), "Explain top earners, region, area and sorted.")
    assert got == {"top"}


def test_intent_responder_returns_frozen_response_verbatim():
    oracle = deterministic_oracle("intent")
    got, answer = oracle.answer("What is meant by region?", OracleContext(RECORD))
    assert got == {"region"} and answer == "The sales region."


def test_non_critical_ambiguity_is_answered():
    oracle = deterministic_oracle("intent")
    got, answer = oracle.answer("Should it be sorted?", OracleContext(RECORD))
    assert got == {"order"} and answer == "Descending."


def test_intent_matcher_credits_repeats_again():
    turns = [OracleTurn("q", "a", frozenset({"top"}))]
    assert credits(IntentMatcher(), "What do top earners and region mean?", turns=turns) == {"top"}


def test_knowledge_matcher_prefers_unresolved():
    turns = [OracleTurn("q", "a", frozenset({"top"}))]
    # top earners is mentioned first but already resolved: the unresolved region wins.
    question = "What do top earners and region mean?"
    assert credits(KnowledgeMatcher(), question, turns=turns) == {"region"}
    # with nothing else mentioned the resolved one is credited again (a repeat)
    assert credits(KnowledgeMatcher(), "What are top earners again?", turns=turns) == {"top"}


def test_knowledge_oracle_returns_resolution_and_restates_repeat():
    record = make_record([amb("top", "top earners", resolution="top earners = the 3 best paid")])
    oracle = deterministic_oracle("knowledge")
    context = OracleContext(record)
    got, first = oracle.answer("Who are top earners?", context)
    assert got == {"top"} and first == "top earners = the 3 best paid"
    context.turns.append(OracleTurn("Who are top earners?", first, got))
    got, again = oracle.answer("And what about top earners?", context)
    assert got == {"top"} and again == "As I said before: top earners = the 3 best paid"


def test_knowledge_oracle_restates_evidence_on_a_repeat():
    # paper Table 6: "repeats can restate evidence" - the first answer is the stored resolution,
    # the repeat restates the evidence hint (which differs from it), not the resolution again
    record = make_record(
        [
            amb(
                "top",
                "top earners",
                resolution="the three best paid",
                evidence="top earners refers to ORDER BY salary DESC LIMIT 3",
            )
        ]
    )
    oracle = deterministic_oracle("knowledge")
    context = OracleContext(record)
    got, first = oracle.answer("Who are top earners?", context)
    assert got == {"top"} and first == "the three best paid"
    context.turns.append(OracleTurn("Who are top earners?", first, got))
    got, again = oracle.answer("And what about top earners?", context)
    assert got == {"top"}
    assert again == "As I said before: top earners refers to ORDER BY salary DESC LIMIT 3"
    # the intent oracle has no such rule: a repeat gets the same frozen response
    assert deterministic_oracle("intent").answer("And what about top earners?", context)[1] == (
        "the three best paid"
    )


def test_knowledge_matcher_uses_evidence_concepts():
    record = make_record(
        [amb("hv", "big orders", evidence="high-value order refers to total > 500")],
        request="List big orders.",
    )
    assert evidence_concept("high-value order refers to total > 500") == "high-value order"
    assert credits(KnowledgeMatcher(), "What is a high-value order?", record) == {"hv"}
    assert credits(IntentMatcher(), "What is a high-value order?", record) == set()


def test_reference_responder_joins_credited_in_annotation_order():
    responder = ReferenceResponder(prefer_response=False)
    answer = responder.respond("q", frozenset({"region", "top"}), OracleContext(RECORD))
    assert answer == "resolution of top resolution of region"
