"""The leaky demonstration oracles: each breaks the reference oracle in exactly its one way."""

from __future__ import annotations

import sqlite3

import pytest
from bundled import ALL_ENV_IDS
from factories import amb, make_record

from ambitab_gym.corpora import load_corpus
from ambitab_gym.diagnostics import find_sql
from ambitab_gym.evaluation.engine import create_oracle as make_oracle
from ambitab_gym.oracles import (
    REFUSAL,
    IntentMatcher,
    OracleContext,
    OracleTurn,
    ReferenceResponder,
    deterministic_oracle,
)
from ambitab_gym.oracles.leaky import (
    LEAKY_ORACLE_NAMES,
    GenericCreditMatcher,
    LeakySQLResponder,
    SchemaWordMatcher,
    make_leaky_oracle,
    schema_identifiers,
)

RECORD = make_record(
    [
        amb("top", "top earners", response="The three best paid."),
        amb("order", "sorted", kind="non_critical", response="Descending."),
        amb("region", "region", response="The sales region."),
    ],
    sql="SELECT name FROM staff ORDER BY salary DESC LIMIT 3",
)


def context(*credited: str) -> OracleContext:
    turns = [OracleTurn("earlier", "answer", frozenset({c})) for c in credited]
    return OracleContext(RECORD, turns)


# -- leaky-sql-responder ---------------------------------------------------------------------


def test_leaky_sql_responder_appends_the_reference_sql_to_every_answer():
    responder = LeakySQLResponder(ReferenceResponder())
    credited = responder.respond("Who are the top earners?", frozenset({"top"}), context())
    refused = responder.respond("Please elaborate.", frozenset(), context())
    assert credited.startswith("The three best paid. ")
    assert refused.startswith(REFUSAL + " ")
    for answer in (credited, refused):
        assert find_sql(answer) == RECORD.verification.reference_sql


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_leaky_sql_oracle_keeps_the_deterministic_matcher_and_answers(env_id):
    corpus = load_corpus(env_id)
    leaky = make_leaky_oracle("leaky-sql-responder", corpus)
    reference = deterministic_oracle(corpus.manifest.oracle)
    for record in corpus.records[:10]:
        for question in ["Please elaborate.", *(f"What is {a.term}?" for a in record.ambiguities)]:
            credits, answer = leaky.answer(question, OracleContext(record))
            ref_credits, ref_answer = reference.answer(question, OracleContext(record))
            assert credits == ref_credits
            assert answer.startswith(ref_answer)
            assert find_sql(answer) == record.verification.reference_sql


# -- generic-credit-matcher ------------------------------------------------------------------


def test_generic_credit_matcher_credits_open_counted_ambiguities_in_order():
    matcher = GenericCreditMatcher(IntentMatcher())
    assert matcher.match("Please elaborate.", context()) == {"top"}
    assert matcher.match("Please elaborate.", context("top")) == {"region"}  # skips non-critical
    assert matcher.match("Please elaborate.", context("top", "region")) == frozenset()


def test_generic_credit_matcher_defers_to_the_base_matcher():
    matcher = GenericCreditMatcher(IntentMatcher())
    assert matcher.match("Which region?", context()) == {"region"}
    # a repeated question about a credited ambiguity keeps its base credit
    assert matcher.match("Which region?", context("region")) == {"region"}


# -- schema-word-matcher ---------------------------------------------------------------------


def test_schema_word_matcher_credits_questions_naming_schema_words():
    matcher = SchemaWordMatcher(IntentMatcher(), lambda db: ["staff", "first_name", "salary"])
    assert matcher.match("Should I use the SALARY column?", context()) == {"top"}
    assert matcher.match("Is the first name enough?", context("top")) == {"region"}
    assert matcher.match("Is the first_name enough?", context("top")) == {"region"}
    assert matcher.match("Please elaborate.", context()) == frozenset()
    assert matcher.match("What about salaryband?", context()) == frozenset()  # whole words only
    assert matcher.match("Which staff?", context("top", "region")) == frozenset()  # none open
    assert matcher.match("Which region do staff work in?", context()) == {"region"}  # base first


def sqlite_identifiers(path) -> set[str]:
    """Table and column names read from the built SQLite file (independent of the parser)."""
    names: set[str] = set()
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = [
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for table in tables:
            names.add(table)
            names.update(r[1] for r in db.execute(f'PRAGMA table_info("{table}")'))
    return names


@pytest.mark.parametrize("env_id", ["AmbiTab-Bird-v0", "AmbiTab-Ambrosia-v0", "AmbiTab-TACO-v0"])
def test_schema_identifiers_match_the_database_catalog(env_id):
    corpus = load_corpus(env_id)
    for database in sorted({r.spec.database for r in corpus.records}):
        parsed = schema_identifiers(corpus.schema_text(database), "sqlite")
        assert set(parsed) == sqlite_identifiers(corpus.database_file(database, "sqlite"))


def test_schema_word_oracle_on_a_bundled_record():
    corpus = load_corpus("AmbiTab-Bird-v0")
    oracle = make_leaky_oracle("schema-word-matcher", corpus)
    record = next(r for r in corpus.records if r.spec.database == "retail_shop" and r.m > 0)
    first = record.counted_ambiguities[0]
    credits, answer = oracle.answer("Do you mean the loyalty_tier column?", OracleContext(record))
    assert credits == {first.id}
    assert answer == first.resolution  # the reference responder states what was credited
    # a column of another database is no schema word of this one
    other = corpus.schema_text("flights")
    assert "tail_number" in other or "flight_number" in other
    word = "tail_number" if "tail_number" in other else "flight_number"
    assert oracle.answer(f"Do you mean {word}?", OracleContext(record)) == (frozenset(), REFUSAL)


# -- by name ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LEAKY_ORACLE_NAMES)
def test_make_oracle_resolves_the_leaky_names(name):
    corpus = load_corpus("AmbiTab-TACO-v0")
    oracle = make_oracle(name, corpus)
    assert oracle.name == make_leaky_oracle(name, corpus).name


def test_unknown_leaky_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="generic-credit-matcher"):
        make_leaky_oracle("leaky", load_corpus("AmbiTab-TACO-v0"))
