"""The fragment verbalizer on hand-written fragments: the phrases were written before running it.

Fragments are the kinds BIRD-Interact annotates (clauses, conditions, aggregates, formulas with
a trailing label, PL/pgSQL pieces) and BIRD's evidence hints (SQL inside English).
"""

from __future__ import annotations

import pytest

from ambitab_gym.convert.verbalize import code_names, fragment_names, verbalize
from ambitab_gym.oracles.sqltext import answer_reveals_sql

SAID = [
    # clauses
    ("LIMIT 10", "the first ten"),
    ("LIMIT 1", "the first one"),
    ("ORDER BY x DESC", "ordered from the highest x down"),
    ("ORDER BY total_price ASC", "ordered from the lowest total price up"),
    ("ORDER BY SUM(oi.quantity) DESC LIMIT 5", "the five with the highest total of quantity"),
    ("GROUP BY region", "per region"),
    ("WHERE s.ModType IS NOT NULL", "only those with a known mod type"),
    (
        "FROM Observatories o INNER JOIN Telescopes t ON o.ObservStation = t.ObservStation",
        "the observatories matched with the telescopes by observ station",
    ),
    ("SET SignalClass = 'Weak'", 'set signal class to "Weak"'),
    (
        "ADD COLUMN IF NOT EXISTS IsAnalyzable BOOLEAN",
        "a new true/false column called is analyzable",
    ),
    # conditions
    ("s.SignalToNoiseRatio > 10", "those with signal to noise ratio above 10"),
    ("price >= 5", "those with price of 5 or more"),
    ("a > 1 OR b <= 2", "those with a above 1 or b of 2 or less"),
    (
        "o.LunarStage IN ('New', 'First Quarter')",
        'those with lunar stage one of "New" or "First Quarter"',
    ),
    (
        "status NOT IN ('cancelled', 'returned')",
        'those with status not one of "cancelled" or "returned"',
    ),
    ("age BETWEEN 18 AND 65", "those with age between 18 and 65"),
    ("name LIKE '%Storm%'", 'those with name containing "Storm"'),
    # aggregates and formulas
    ("AVG(s.SnrRatio)", "the average of snr ratio"),
    ("COUNT(DISTINCT a.patient_id)", "the number of different patient id"),
    ("PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY s.SnrRatio)", "the median of snr ratio"),
    ("ROUND(AVG(aoi), 3)", "the average of aoi rounded to 3 decimals"),
    (
        "COUNT(*) FILTER (WHERE SNQI > 0) as analyzable signals",
        "the number of analyzable signals, those with snqi above 0",
    ),
    (
        "s.SnrRatio - 0.1 * ABS(s.NoiseFloorDbm) AS SNQI",
        "snr ratio minus 0.1 times the absolute value of noise floor dbm",
    ),
    (
        "v_disf := (10 - ABS(p_airtemp - 15)/10) * p_trans",
        "(10 minus the absolute value of (p airtemp minus 15) divided by 10) times p trans",
    ),
    (
        "CASE WHEN score < 0.25 THEN 'Low' WHEN score < 0.75 THEN 'Medium' ELSE 'High' END",
        '"Low" when score below 0.25, "Medium" when score below 0.75, otherwise "High"',
    ),
    ("s.ModType", "the mod type"),
    ("p.dwelling_specs ->> 'Bath_Count'", "the bath count in dwelling specs"),
    ("AND s.socsupport = 'Yes'", 'those with socsupport equal to "Yes"'),
    ("COALESCE(a, 0) + b > 2", "those with (a, or 0 when it is missing) plus b above 2"),
    # not covered: a general phrase naming the columns, or none at all
    (
        "CASE WHEN p.TechSigProb * (1 - p.NatSrcProb) < 0.25 THEN 'Low' WHEN ... END",
        "a value worked out from tech sig prob and nat src prob",
    ),
    (
        "jsonb_agg(jsonb_build_object('station', ObservStation))",
        "a value worked out from observ station",
    ),
    ("CREATE OR REPLACE FUNCTION calculate_disf(", "the meaning we use for it in this database"),
]


@pytest.mark.parametrize(("fragment", "expected"), SAID)
def test_fragments_are_said_in_words(fragment, expected):
    said = verbalize(fragment, "postgres")
    assert said == expected
    assert not answer_reveals_sql(said)
    assert not answer_reveals_sql(f'By "the term" I mean {said}.', fragment, "postgres")


def test_names_of_a_fragment_are_its_columns_and_compared_values():
    # a formula's constants are not values a person asks about; 0 and 1 never are
    assert fragment_names("s.SnrRatio - 0.1 * ABS(s.NoiseFloorDbm) AS SNQI") == [
        "snr ratio",
        "noise floor dbm",
    ]
    assert fragment_names("COUNT(*) FILTER (WHERE SNQI > 0) as analyzable signals") == ["snqi"]
    assert fragment_names("o.LunarStage IN ('New', 'First Quarter') AND o.LunarDistDeg > 45") == [
        "lunar stage",
        "New",
        "First Quarter",
        "lunar dist deg",
        "45",
    ]
    assert fragment_names("ORDER BY avg_snqi DESC") == ["avg snqi"]
    assert fragment_names("CASE WHEN ... THEN 'Low' END") == ["Low"]  # read as code
    # a JSON column's key is named too
    names = fragment_names(
        "LOWER(json_extract(p.dwelling_specs, '$.Dwelling_Class')) = 'apartment'", "sqlite"
    )
    assert names == ["dwelling specs", "dwelling class", "apartment"]


def test_code_names_read_sql_inside_english():
    assert code_names("long trip refers to duration > 1800") == ["duration", "1800"]
    assert code_names("full name refers to first_name, last_name") == ["first name", "last name"]
    # a one-character value ("+" of a label, "c" of an element) names nothing a person says
    assert code_names("label = '+' means molecules are carcinogenic") == ["label"]
    assert code_names("element = 'cl' means Chlorine; element = 'c' means Carbon") == [
        "element",
        "cl",
    ]
    # double quotes in a hint are English quotes around a value
    assert code_names("super power of \"Agility\" refers to power_name = 'Agility'") == [
        "Agility",
        "power name",
    ]
    assert code_names("height between 150 to 180 refers to height_cm BETWEEN 150 AND 180") == [
        "150",
        "height cm",
        "180",
    ]
    assert code_names(
        "highest attribute in strength refers to MAX(attribute_value) WHERE attribute_name = "
        "'strength'"
    ) == ["attribute value", "attribute name", "strength"]
    assert code_names("Angela Sanders is the full name") == []
    assert code_names("percentage = MULTIPLY(DIVIDE(SUM(gender = 'Female'), COUNT(id)), 100)") == [
        "percentage",
        "gender",
        "Female",
        "id",
    ]
