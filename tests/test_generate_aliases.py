"""Aliases of generated ambiguities: the words a person uses to ask about an ambiguity are
credited to it by the reference matchers, and nothing else is.

The questions below were written by hand from each task's request and readings (what its asker
knows), before the aliases were run through the matcher: natural clarifying questions credit
the ambiguity they ask about; the request restated, and questions about a distractor or about
nothing, credit nothing. Over many seeds, no alias of one ambiguity names another ambiguity of
the same task (checked here from the rule, word by word), and each name credits its own
ambiguity.
"""

from __future__ import annotations

import re

import gymnasium as gym
import pytest

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.generate import FAMILIES, TaskGenerator
from ambitab_gym.generate.corpus import ProceduralCorpus
from ambitab_gym.oracles import OracleContext, deterministic_oracle
from ambitab_gym.oracles.base import REFUSAL
from ambitab_gym.oracles.deterministic import IntentMatcher, KnowledgeMatcher
from ambitab_gym.terms import words

# (families, domain, seed, the request, {term: questions that ask about it}, questions that ask
# about no ambiguity). Single-family tasks: m = 1, at most one distractor, two databases per
# domain; mixed tasks (families None): every family, m = 3.
CASES = [
    (
        ("synonym",),
        "flights",
        0,
        "Show the total ticket cost of bookings.",
        {
            "ticket cost": [
                "Do you mean the fare or the ticket price?",
                "Should I use the fare column?",
                "Which column holds the cost: fare or ticket_price?",
                "Which cost column should I use?",
            ]
        },
        [
            "Show the total ticket cost of bookings?",
            "So you want the total ticket cost of bookings?",
        ],
    ),
    (
        ("synonym",),
        "flights",
        1,
        "Report the average ticket cost of bookings in 2023.",
        {"ticket cost": ["By ticket cost, do you mean the fare or the ticket price?"]},
        ["Report the average ticket cost of bookings in 2023?"],
    ),
    (
        ("scope",),
        "flights",
        0,
        "Show the total baggage weight of bookings across airlines.",
        {
            "across airlines": [
                "One grand total, or a figure per airline?",
                "Do you want the weight broken down by airline?",
                "Should each airline get its own number?",
                "Is that one overall figure for all airlines combined?",
            ]
        },
        ["Show the total baggage weight of bookings across airlines?"],
    ),
    (
        ("scope",),
        "flights",
        1,
        "Report the average baggage weight of bookings in 2023 across airlines.",
        {"across airlines": ["Separately for each airline, or combined?"]},
        ["Report the average baggage weight of bookings in 2023 across airlines, right?"],
    ),
    (
        ("attachment",),
        "hospital",
        0,
        "Report the total visit minutes of visits by premium and plus patients who joined before "
        "2019.",
        {
            "joined before 2019": [
                "Does the before-2019 rule apply to both premium and plus patients, or only the "
                "plus ones?",
                "Must the premium patients also have joined before 2019?",
                "Does the registration year cutoff cover both insurance plans?",
            ]
        },
        [
            "Report the total visit minutes of visits by premium and plus patients who joined "
            "before 2019?"
        ],
    ),
    (
        ("attachment",),
        "hospital",
        1,
        "Report the average visit minutes of visits by plus and premium patients who joined "
        "before 2021.",
        {
            "joined before 2021": [
                "Does 'joined before 2021' apply to the plus patients too?",
                "Are all plus patients included, whenever they registered?",
            ]
        },
        [],
    ),
    (
        ("vague",),
        "library",
        0,
        "Report the total loan days of long loans in 2022.",
        {
            "long loans": [
                "How long does a loan have to be to count as long?",
                "What's the minimum number of loan days for a long loan?",
                "What threshold makes a loan long?",
            ]
        },
        ["Report the total loan days of long loans in 2022?", "Which year do you mean?"],
    ),
    (
        ("vague",),
        "library",
        2,
        "Which are the top members by loan days in 2022?",
        {
            "top members": [
                "How many members do you want listed: four or eight?",
                "Top 4 or top 8?",
            ]
        },
        ["Which are the top members by loan days in 2022?"],
    ),
    (
        ("knowledge",),
        "sports",
        0,
        "Report the total minutes played of appearances by regular players.",
        {
            "regular players": [
                "How many appearances make someone a regular player?",
                "What counts as regular here?",
                "Is there a minimum appearance count for regulars?",
            ]
        },
        ["Report the total minutes played of appearances by regular players?"],
    ),
    (
        ("knowledge",),
        "sports",
        1,
        "Report the average minutes played of appearances for historic teams in 2022.",
        {
            "historic teams": [
                "What founding year makes a team historic?",
                "Historic means founded before which year?",
            ]
        },
        ["Report the average minutes played of appearances for historic teams in 2022?"],
    ),
    (
        ("choice",),
        "university",
        0,
        "Show the total exam minutes of exams by students from Richmond.",
        {
            "Richmond": [
                "Richmond in Virginia or Richmond in California?",
                "Which state is that Richmond in?",
                "Do you mean the Richmond in Virginia?",
            ]
        },
        ["Show the total exam minutes of exams by students from Richmond?"],
    ),
    (
        ("choice",),
        "university",
        1,
        "Report the average exam minutes of exams by students from Columbus in 2023.",
        {"Columbus": ["Columbus, Ohio or Columbus, Georgia?"]},
        [],
    ),
    (
        ("table",),
        "library",
        0,
        "Show the total loan days of loan records.",
        {
            "loan records": [
                "Should I count rows in loans or in loans_archive?",
                "Do you want the current loans or the archived ones from 2019-2021?",
                "Does that include the archive?",
            ]
        },
        ["Show the total loan days of loan records?"],
    ),
    (
        ("table",),
        "library",
        1,
        "Report the average loan days of loan records by members from Boston.",
        {"loan records": ["Only loans since 2022, or the older archive as well?"]},
        ["Do you mean Boston, Massachusetts?"],
    ),
    (
        ("time",),
        "retail",
        0,
        "Report the total quantity of orders by customers from Tampa in the last year.",
        {
            "last year": [
                "Calendar 2023, or the last twelve months?",
                "By last year, do you mean January to December 2023?",
                "Does it run from July 2023 to June 2024?",
            ]
        },
        ["Report the total quantity of orders by customers from Tampa in the last year?"],
    ),
    (
        ("time",),
        "retail",
        1,
        "Report the average quantity of orders by customers from Denver in the past few months.",
        {
            "past few months": [
                "Three months or six?",
                "How far back should I go: the last quarter or half a year?",
            ]
        },
        [],
    ),
    (
        ("attachment", "choice"),
        "retail",
        0,
        "What is the average quantity of orders from Columbus by bronze and silver customers who "
        "joined before 2018?",
        {
            "Columbus": ["Columbus in Ohio or in Georgia?"],
            "joined before 2018": ["Does the 2018 cutoff apply to the bronze customers too?"],
        },
        [
            "What is the average quantity of orders from Columbus by bronze and silver customers "
            "who joined before 2018?"
        ],
    ),
    (
        None,
        None,
        0,
        "How many visit records for senior doctors across specialties?",
        {
            "visit records": ["Should I count rows in visits or in visits_archive?"],
            "senior doctors": ["How many years of experience make a doctor senior?"],
            "across specialties": ["One number per specialty, or a single total?"],
        },
        ["How many visit records for senior doctors across specialties?", "Is this SQLite?"],
    ),
    (
        None,
        None,
        1,
        "How many visits by patients from Columbus for senior doctors with status cancelled "
        "across specialties?",
        {
            "Columbus": ["Is that Columbus, Georgia or Columbus, Ohio?"],
            "senior doctors": ["What makes a doctor senior?"],
            "across specialties": ["Do you want a separate count for each specialty?"],
        },
        ["Do cancelled visits count?"],
    ),
    (
        None,
        None,
        3,
        "What is the total baggage weight of booking records by gold and basic passengers who "
        "joined before 2021 for long-haul flights?",
        {
            "booking records": ["Should the archived bookings from 2019-2021 count too?"],
            "joined before 2021": [
                "Does the before-2021 condition apply to gold passengers as well, or only to "
                "basic ones?"
            ],
            "long-haul flights": ["What distance counts as long-haul?"],
        },
        [],
    ),
    (
        None,
        None,
        6,
        "How many large orders by gold and bronze customers who joined before 2018 with status "
        "delivered across categories?",
        {
            "large orders": ["How many items make an order large?"],
            "joined before 2018": [
                "Should gold customers who signed up in 2018 or later be counted?"
            ],
            "across categories": ["Do you want a separate count for each category?"],
        },
        ["Only delivered ones?"],
    ),
    (
        None,
        None,
        7,
        "Which are the top patients by visit minutes for senior doctors with status cancelled in "
        "the visit records?",
        {
            "top patients": ["How many patients should the list have: five or ten?"],
            "senior doctors": ["What years of experience make a doctor senior?"],
            "visit records": ["Do you mean the current visits table or the archive?"],
        },
        [],
    ),
]

MATCHERS = {"intent": IntentMatcher(), "knowledge": KnowledgeMatcher()}


def _generator(families: tuple[str, ...] | None, domain: str | None) -> TaskGenerator:
    if families is None:
        return TaskGenerator(ambiguities=(3, 3), distractors=(0, 1), databases_per_domain=2)
    return TaskGenerator(
        families=families,
        ambiguities=(len(families), len(families)),
        distractors=(0, 1),
        domains=(domain,),
        databases_per_domain=2,
    )


@pytest.mark.parametrize(
    ("families", "domain", "seed", "request_text", "asks", "nothing"),
    CASES,
    ids=[f"{c[0] and '+'.join(c[0]) or 'mixed'}-{c[2]}" for c in CASES],
)
def test_natural_questions_credit_their_ambiguity(
    families, domain, seed, request_text, asks, nothing
):
    generator = _generator(families, domain)
    corpus = ProceduralCorpus(generator)
    task = generator.generate(seed)
    corpus.add(task)
    for record in task.records:
        assert record.spec.request == request_text
        ids = {a.term: a.id for a in record.ambiguities}
        assert set(ids) == set(asks)
        context = OracleContext(record, spec=corpus.public_spec(record))
        for kind, matcher in MATCHERS.items():
            for term, questions in asks.items():
                for question in questions:
                    got = matcher.match(question, context)
                    assert got == frozenset({ids[term]}), (kind, question, got)
            for question in nothing:
                assert matcher.match(question, context) == frozenset(), (kind, question)


def _lemmas(text: str) -> tuple[str, ...]:
    return tuple(w.lemma for w in words(text))


def _contains(outer: tuple[str, ...], inner: tuple[str, ...]) -> bool:
    return any(outer[i : i + len(inner)] == inner for i in range(len(outer) - len(inner) + 1))


def test_no_alias_names_another_ambiguity_of_its_task():
    generator = TaskGenerator(ambiguities=(2, 5), distractors=(0, 4), validate=False)
    checked = 0
    for seed in range(300):
        first = generator.generate(seed).records[0]
        for ambiguity in first.ambiguities:
            assert ambiguity.aliases, ambiguity
            others = [
                _lemmas(name)
                for other in first.ambiguities
                if other.id != ambiguity.id
                for name in other.names
            ]
            for alias in ambiguity.aliases:
                mine = _lemmas(alias)
                for theirs in others:
                    assert not _contains(mine, theirs), (alias, theirs, first.spec.request)
                    assert not _contains(theirs, mine), (alias, theirs, first.spec.request)
                checked += 1
    assert checked > 5000


@pytest.mark.parametrize("oracle_kind", ["intent", "knowledge"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_question_naming_an_alias_is_credited(family, oracle_kind):
    generator = TaskGenerator(
        families=(family,), ambiguities=(1, 1), distractors=(0, 2), domains="all"
    )
    oracle = deterministic_oracle(oracle_kind)
    checked = 0
    for seed in range(6):
        for record in generator.generate(seed).records:
            (ambiguity,) = record.ambiguities
            assert ambiguity.aliases
            for alias in ambiguity.aliases:
                credits, answer = oracle.answer(
                    f"When you say {alias}, what exactly do you mean?", OracleContext(record)
                )
                assert credits == frozenset({ambiguity.id}), (alias, record.spec.request)
                # the answer is this record's reading (the frozen response or the resolution)
                expected = ambiguity.response if oracle_kind == "intent" else ambiguity.resolution
                assert expected in answer
                checked += 1
            # and an unrelated question is credited nothing
            credits, answer = oracle.answer("Which database engine is this?", OracleContext(record))
            assert credits == frozenset() and answer == REFUSAL
    assert checked >= 12


def test_every_name_of_a_mixed_task_credits_its_own_ambiguity():
    generator = TaskGenerator(ambiguities=(2, 4), distractors=(0, 2), validate=False)
    matcher = IntentMatcher()
    for seed in range(60):
        first = generator.generate(seed).records[0]
        for ambiguity in first.ambiguities:
            for name in ambiguity.names:
                question = f"What do you mean by {name}?"
                got = matcher.match(question, OracleContext(first))
                assert got == frozenset({ambiguity.id}), (question, got, first.spec.request)


def test_aliases_name_the_columns_of_a_retail_synonym():
    generator = TaskGenerator(
        families=("synonym",),
        ambiguities=(1, 1),
        distractors=(0, 0),
        domains=("retail",),
        databases_per_domain=1,
    )
    (ambiguity,) = generator.generate(0).records[0].ambiguities
    # request "Report the average order value of orders.": both columns, never "order" alone
    # ("order values" is the term by lemma, so no alias of its own)
    assert ambiguity.term == "order value"
    assert ambiguity.aliases == (
        "value of an order",
        "total",
        "amount",
        "total column",
        "amount column",
    )
    assert not any(re.fullmatch(r"orders?", a) for a in ambiguity.aliases)


def test_alias_question_is_credited_in_the_env():
    env = gym.make("AmbiTab-Procedural-v0", ambiguities=(2, 2), distractors=(0, 0))
    env.reset(seed=4)
    record = env.unwrapped.record
    first, second = record.ambiguities
    obs, _, _, _, info = env.step(f"What do you mean by {first.aliases[-1]}?")
    obs, _, _, _, info = env.step(f"And {second.aliases[0]}?")
    # the trajectory (evaluation side, never shown to the agent) holds the credits
    assert env.unwrapped.trajectory.credits == [frozenset({first.id}), frozenset({second.id})]
    # the agent sees the two readings' answers
    assert (first.response or first.resolution) in obs["dialogue"]
    assert (second.response or second.resolution) in obs["dialogue"]
    env.close()
