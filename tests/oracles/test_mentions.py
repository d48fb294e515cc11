"""Hand-worked questions for each rule of ambitab_gym.oracles.mentions (docs/design.md, section 5).

Every expectation was written from the rule, not from running the code.
"""

from __future__ import annotations

import pytest

from ambitab_gym.oracles.mentions import (
    MAX_SCHEMA_NAMES,
    Mention,
    asked_about,
    best,
    name_index,
    named_in,
)

REQUEST = "List the top earners by region."
NAMES = (("top", ("top earners", "best paid", "salary")), ("region", ("region", "sales area")))
INDEX = name_index(NAMES, REQUEST, ("staff", "salary", "region_id", "name", "hire_date"))


def credited(question: str, index=INDEX) -> str | None:
    return best(asked_about(question, index))


@pytest.mark.parametrize(
    "question",
    [
        "Who counts as a top earner?",  # singular for plural
        "What do you mean by TOP EARNERS?",  # case
        "Which top-earners do you mean?",  # hyphen for a space
        "What is a top earner's cut-off?",  # possessive
        "How many of the best-paid people should I show?",  # alias, hyphenated
        "Should I rank them by salary?",  # an alias the request does not use
    ],
)
def test_word_forms_and_aliases_are_credited(question):
    assert credited(question) == "top"


@pytest.mark.parametrize(
    "question",
    [
        "List the top earners by region.",  # an echo
        "list the top earners by region?",  # the request with a question mark
        "So you want to list the top earners by region?",  # a confirmation
        "Just to confirm: list the top earners by region?",
        "You want the top earners by region?",
        "Do you mean: list the top earners by region?",  # a cue, but the whole request around it
        "Could you clarify what exactly you mean by list the top earners by region?",
        "Top earners by region?",  # no word of its own
    ],
)
def test_restatements_are_not_credited(question):
    assert credited(question) is None


def test_a_reading_alias_counts_even_beside_a_copy_of_the_request():
    # "salary" is not a request word: the question names a reading
    assert credited("Top earners by region: ranked by salary or by bonus?") == "top"


def test_a_reworded_confirmation_names_nothing_even_with_a_reading_word():
    # a confirmation repeating most of the request's other words reads it back
    assert credited("So you want to list the best paid top earners by region?") is None
    # a confirmation that asks about the reading alone still counts
    assert credited("So you want them ranked by salary?") == "top"


def test_a_short_quote_asks_about_what_it_quotes():
    assert credited("When you say 'top earners by region', how many per region?") == "top"
    # a part of a term, quoted
    index = name_index((("recent", ("recent albums",)),), "What is the revenue of recent albums?")
    assert credited("How recent is 'recent'?", index) == "recent"
    # unquoted, a part of a term is not a name
    assert credited("How recent is recent?", index) is None


def test_a_quoted_copy_of_the_request_is_still_a_restatement():
    assert credited("Do you mean 'list the top earners by region'?") is None


def test_a_question_that_lists_the_schema_names_nothing():
    assert MAX_SCHEMA_NAMES == 4
    # five schema names: staff, salary, region_id, name, hire_date
    assert credited("Which of staff, salary, region_id, name, hire_date do you mean?") is None
    # four are fine
    assert credited("Which of staff, salary, region_id, name do you mean?") == "top"


def test_ranking_quoted_then_earliest_then_longest_and_ties_refuse():
    assert credited("Which region and which top earners do you mean?") == "region"
    assert credited("Which region do the 'top earners' come from?") == "top"
    index = name_index((("a", ("top",)), ("b", ("top earners",))), "Show top earners.")
    assert credited("What do you mean by top earners?", index) == "b"
    tie = name_index((("a", ("pay",)), ("b", ("pay",))), "Show pay.")
    assert credited("Which pay do you mean?", tie) is None


def test_resolved_ambiguities_rank_last():
    ranking = asked_about("Which region and which top earners do you mean?", INDEX)
    assert best(ranking, frozenset({"region"})) == "top"
    assert best((Mention("a", (1, 0, -1)),), frozenset({"a"})) == "a"


def test_non_latin_names_are_matched_as_written():
    index = name_index((("city", ("北京",)),), "北京 的 人口 是 多少？")
    assert credited("你说的 北京 是指哪个表？", index) == "city"
    assert credited("北京市 的 人口？", index) is None  # not a whole word


def test_named_in_has_no_restatement_rule():
    # the C.3 route scorer reads rationales and responses: a copy of the request still names
    assert [m.ambiguity_id for m in named_in(REQUEST, INDEX)] == ["top", "region"]


def test_function_word_names_are_ignored():
    index = name_index((("a", ("the", "of the")),), "Show the list of the staff.")
    assert index.names == ()


def test_mean_the_verb_is_not_mean_the_statistic():
    # a mean/median ambiguity beside a vague one: "what do you mean by" asks about the vague
    # word, "the mean or the median" about the statistic (the earliest name would win if the
    # verb counted)
    request = "Which towns have a long commute time, and what is the typical commute?"
    names = (("long", ("long commute",)), ("typical", ("typical commute", "mean", "median")))
    index = name_index(names, request)
    assert credited("What do you mean by a long commute?", index) == "long"
    assert credited("Would you mean a long commute of over an hour?", index) == "long"
    assert credited("Should the typical commute be the mean or the median?", index) == "typical"
    assert credited("The mean, or the median commute time?", index) == "typical"
