"""The bundled samples' aliases, checked with hand-written questions under each corpus's own
reference oracle.

Every question and its expected ambiguity was written by hand from the record (its request and
readings), the way a person clarifying the request would ask, before running the matcher. A
question credits the intended ambiguity and nothing else; the request read back and generic or
off-topic questions credit nothing.
"""

from __future__ import annotations

from functools import cache

import pytest

from ambitab_gym.aliases import alias_problem
from ambitab_gym.corpora import load_corpus
from ambitab_gym.oracles import OracleContext, deterministic_oracle

CORPORA = ("bird", "ew_bird", "bird_interact", "ambrosia", "ambiqt", "taco")

#: (corpus, record id, question, the ambiguity it asks about)
NATURAL = [
    # bird: reading contrasts, values that differ, synonyms of the term
    ("bird", "bird-0001", "How many customers should I return, five or ten?", "top_customers"),
    ("bird", "bird-0001", "Is spending measured before or after discounts?", "spending"),
    ("bird", "bird-0001", "Do cancelled or returned orders count toward the amount?", "spending"),
    ("bird", "bird-0004", "Should inactive or closed accounts be counted too?", "customers"),
    ("bird", "bird-0006", "Does revenue include shipping fees?", "revenue"),
    ("bird", "bird-0006", "Which period exactly: 2023 or the last 12 months?", "last_year"),
    ("bird", "bird-0025", "Total charges or the average charge per admission?", "highest_charges"),
    ("bird", "bird-0034", "Which season do you mean, 2023-24 or 2022-23?", "last_season"),
    ("bird", "bird-0034", "Do games with no spectators count?", "average_attendance"),
    ("bird", "bird-0050", "Delayed on departure or on arrival?", "delayed"),
    ("bird", "bird-0058", "Busy in terms of passenger numbers or flight movements?", "busiest"),
    # ew_bird: the vague modifier, thresholds, the column behind the term
    ("ew_bird", "ew_bird-0001", "What's the minimum GPA for honors?", "honor_students"),
    ("ew_bird", "ew_bird-0006", "Does a D count as failing, or only an F?", "failing_grade"),
    ("ew_bird", "ew_bird-0006", "What level is upper-level?", "upper_level_course"),
    ("ew_bird", "ew_bird-0009", "Which grades count as passing?", "pass_rate"),
    ("ew_bird", "ew_bird-0018", "What duration makes a trip long?", "long_trips"),
    ("ew_bird", "ew_bird-0020", "Does any precipitation make a day rainy?", "rainy_days"),
    ("ew_bird", "ew_bird-0020", "Is morning 6 to 9 or everything before noon?", "morning_trips"),
    ("ew_bird", "ew_bird-0025", "Hot by the maximum temperature or the mean one?", "hot_days"),
    ("ew_bird", "ew_bird-0037", "How recent should the albums be?", "recent_albums"),
    ("ew_bird", "ew_bird-0041", "Does Europe include the United Kingdom?", "customers_from_europe"),
    # bird_interact
    (
        "bird_interact",
        "bird_interact-0001",
        "What radius range defines a super-Earth?",
        "super_earth",
    ),
    (
        "bird_interact",
        "bird_interact-0001",
        "Should candidate planets count, or only confirmed ones?",
        "found_scope",
    ),
    ("bird_interact", "bird_interact-0004", "How far away can a nearby star be?", "nearby_stars"),
    (
        "bird_interact",
        "bird_interact-0007",
        "Simple mean of SNR, or exposure-weighted?",
        "snr_average",
    ),
    (
        "bird_interact",
        "bird_interact-0015",
        "Do partially received orders count?",
        "received_orders",
    ),
    ("bird_interact", "bird_interact-0023", "By order date or received date?", "orders_2023"),
    (
        "bird_interact",
        "bird_interact-0032",
        "Regular season only, or playoffs too?",
        "win_rate_scope",
    ),
    ("bird_interact", "bird_interact-0039", "What match duration is long?", "long_matches"),
    # ambrosia: scope cues, attachment nouns, readings of a vague word
    (
        "ambrosia",
        "ambrosia-0001",
        "Classes offered by all gyms, or the classes of each gym?",
        "every_gym",
    ),
    ("ambrosia", "ambrosia-0007", "Room types common to all hotels, or per hotel?", "each_hotel"),
    (
        "ambrosia",
        "ambrosia-0015",
        "Should all teachers be listed, or only those in the robotics club?",
        "robotics_club",
    ),
    ("ambrosia", "ambrosia-0029", "Best by guest rating or by Michelin stars?", "best"),
    ("ambrosia", "ambrosia-0037", "Largest by square metres or by rooms?", "largest"),
    # ambiqt: the two columns, natural synonyms
    ("ambiqt", "ambiqt-0001", "Which age column: age or years_old?", "singer_age"),
    ("ambiqt", "ambiqt-0019", "Enclosure or habitat?", "animal_enclosure"),
    ("ambiqt", "ambiqt-0023", "Salary or wage?", "keeper_pay"),
    ("ambiqt", "ambiqt-0025", "Is pay the salary column or the wage column?", "keeper_pay"),
    ("ambiqt", "ambiqt-0043", "Mileage or distance?", "flight_distance"),
    # taco: years of per-year tables, members of a region, thresholds
    (
        "taco",
        "taco-0001",
        "Which year's population: the 2020 census or the 2022 estimates?",
        "population_table",
    ),
    ("taco", "taco-0006", "Should I use the 2021 survey or the 2019 one?", "income_table"),
    ("taco", "taco-0020", "Does the Pacific Northwest include Idaho?", "pacific_northwest"),
    ("taco", "taco-0030", "Does the northeast mean New England only?", "northeast"),
    ("taco", "taco-0030", "Census 2020 or the 2019 estimates?", "population_table"),
    ("taco", "taco-0034", "Does that include Newark?", "nyc_airports"),
    ("taco", "taco-0038", "What uninsured percentage counts as high, 15 or 20?", "high_uninsured"),
]

#: (corpus, record id, question) that ask about no registered ambiguity
NOTHING = [
    ("bird", "bird-0001", "Do you want the names in one column or two?"),
    ("bird", "bird-0034", "Should I round the result?"),
    ("bird", "bird-0058", "Should I return the airport code or its name?"),
    ("ew_bird", "ew_bird-0020", "Is Minneapolis the station city or the weather city?"),
    ("ew_bird", "ew_bird-0043", "Should they be sorted alphabetically?"),
    (
        "bird_interact",
        "bird_interact-0004",
        "Should the temperature be shown in Kelvin or Celsius?",
    ),
    ("bird_interact", "bird_interact-0039", "Could you clarify what you want?"),
    ("ambrosia", "ambrosia-0029", "Do you want the restaurant's address too?"),
    ("ambiqt", "ambiqt-0041", "Should I show the flight numbers?"),
    ("taco", "taco-0038", "Do you want the county names listed?"),
]


@cache
def _corpus(name: str):
    return load_corpus(name)


def credits(corpus_name: str, record_id: str, question: str) -> frozenset[str]:
    corpus = _corpus(corpus_name)
    (record,) = [r for r in corpus.records if r.id == record_id]
    matcher = deterministic_oracle(corpus.manifest.oracle).matcher
    return matcher.match(question, OracleContext(record, spec=corpus.public_spec(record)))


@pytest.mark.parametrize(("corpus", "record_id", "question", "ambiguity"), NATURAL)
def test_natural_question_credits_its_ambiguity(corpus, record_id, question, ambiguity):
    assert credits(corpus, record_id, question) == {ambiguity}


@pytest.mark.parametrize(("corpus", "record_id", "question"), NOTHING)
def test_off_topic_question_credits_nothing(corpus, record_id, question):
    assert credits(corpus, record_id, question) == frozenset()


@pytest.mark.parametrize("record_id", sorted({(c, r) for c, r, _, _ in NATURAL}), ids=str)
def test_restating_the_request_credits_nothing(record_id):
    corpus_name, rid = record_id
    record = next(r for r in _corpus(corpus_name).records if r.id == rid)
    request = " ".join(record.spec.request.split())
    clause = request.rstrip(" .?!")
    clause = clause[:1].lower() + clause[1:]
    for restated in (request, f"{clause}?", f"So you want to {clause}?"):
        assert credits(corpus_name, rid, restated) == frozenset(), restated


@pytest.mark.parametrize("corpus_name", CORPORA)
def test_no_alias_names_another_ambiguity_of_its_record(corpus_name):
    for record in _corpus(corpus_name).records:
        for ambiguity in record.counted_ambiguities:
            others = [n for b in record.ambiguities if b.id != ambiguity.id for n in b.names]
            for alias in ambiguity.aliases:
                problem = alias_problem(alias, others=others)
                assert problem is None, (record.id, ambiguity.id, alias, problem)


@pytest.mark.parametrize("corpus_name", CORPORA)
def test_every_counted_ambiguity_has_aliases(corpus_name):
    for record in _corpus(corpus_name).records:
        for ambiguity in record.counted_ambiguities:
            assert ambiguity.aliases, (record.id, ambiguity.id)
