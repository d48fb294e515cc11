"""One hand-checked example per ambiguity family (retail domain, database ``retail_00``).

Each expected text below was written from the family's template in
``ambitab_gym/generate/families.py`` with the drawn parameters filled in by hand (the column
pair, the tiers and year, the thresholds, the city pair, the time frame); the database facts the
parameters stand on are checked against the data independently.

Then the families together: every pair of families shares a request (a property over pairs and
seeds) except table and time, which are refused when the config is built, with the reason.
"""

from __future__ import annotations

import itertools

import gymnasium as gym
import pytest

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.generate import FAMILIES, DatabasePool, TaskGenerator

# a reading joins only the tables it reads
E = "FROM orders AS e"
EC = E + " JOIN customers AS c ON c.customer_id = e.customer_id"
EP = E + " JOIN products AS p ON p.product_id = e.product_id"
ECP = EC + " JOIN products AS p ON p.product_id = e.product_id"


def example(family: str, seed: int):
    generator = TaskGenerator(
        families=(family,),
        ambiguities=(1, 1),
        distractors=(0, 0),
        domains=("retail",),
        databases_per_domain=1,
    )
    task = generator.generate(seed)
    assert [r.m for r in task.records] == [1, 1]
    assert task.database.name == "retail_00"
    return task


def readings(task) -> list[tuple[str, str, str]]:
    return [
        (r.ambiguities[0].resolution, r.ambiguities[0].response, r.verification.reference_sql)
        for r in task.records
    ]


def one(task, sql: str):
    return task.database.connection.execute(sql).fetchall()


def test_synonym_two_columns_for_order_value():
    task = example("synonym", 0)
    first = task.records[0]
    assert first.spec.request == "Report the average order value of orders."
    (ambiguity,) = first.ambiguities
    assert (ambiguity.id, ambiguity.term, ambiguity.kind) == (
        "order_value",
        "order value",
        "critical",
    )
    assert readings(task) == [
        (
            "the amount column of the orders table",
            "I mean the values stored in the amount column.",
            f"SELECT AVG(e.amount) {E}",
        ),
        (
            "the total column of the orders table",
            "I mean the values stored in the total column.",
            f"SELECT AVG(e.total) {E}",
        ),
    ]
    # AmbiQT: the resampled column holds values of the original in another arrangement
    total = {v for (v,) in one(task, "SELECT total FROM orders")}
    amount = {v for (v,) in one(task, "SELECT amount FROM orders")}
    assert amount <= total
    assert one(task, "SELECT SUM(total) - SUM(amount) FROM orders")[0][0] != 0


def test_scope_one_figure_per_category_or_overall():
    task = example("scope", 2)
    first = task.records[0]
    assert first.spec.request == "How many orders across categories?"
    assert first.ambiguities[0].term == "across categories"
    assert readings(task) == [
        (
            "a separate figure for each category",
            "Give me a separate figure for each category.",
            f"SELECT p.category, COUNT(*) {EP} GROUP BY p.category",
        ),
        (
            "a single overall figure with all categories combined",
            "Just one overall figure, with all categories combined.",
            f"SELECT COUNT(*) {E}",
        ),
    ]
    per_category = one(task, task.records[0].verification.reference_sql)
    overall = one(task, task.records[1].verification.reference_sql)
    assert len(per_category) == 5 and sum(n for _, n in per_category) == overall[0][0]


def test_attachment_clause_binds_both_tiers_or_the_last():
    task = example("attachment", 1)
    first = task.records[0]
    assert first.spec.request == (
        "What is the total quantity of orders by gold and silver customers who joined before 2018?"
    )
    assert first.ambiguities[0].term == "joined before 2018"
    both = "c.loyalty_tier IN ('gold', 'silver') AND c.signup_year < 2018"
    last = "(c.loyalty_tier = 'gold' OR (c.loyalty_tier = 'silver' AND c.signup_year < 2018))"
    assert readings(task) == [
        (
            "the condition joined before 2018 applies to both the gold and the silver customers",
            "Both groups: only gold and silver customers who joined before 2018.",
            f"SELECT SUM(e.quantity) {EC} WHERE {both}",
        ),
        (
            "only the silver customers must have joined before 2018; every gold one counts",
            "All gold customers, plus just those silver customers who joined before 2018.",
            f"SELECT SUM(e.quantity) {EC} WHERE {last}",
        ),
    ]
    # the readings differ because some gold customers joined in 2018 or later
    late_gold = "SELECT COUNT(*) FROM customers WHERE loyalty_tier = 'gold' AND signup_year >= 2018"
    assert one(task, late_gold)[0][0] > 0


def test_vague_top_customers_how_many():
    task = example("vague", 1)
    first = task.records[0]
    assert first.spec.request == "Which are the top customers by quantity?"
    assert first.ambiguities[0].term == "top customers"
    rank = f"SELECT c.name {EC} GROUP BY c.customer_id ORDER BY SUM(e.quantity) DESC"
    assert readings(task) == [
        ("the three highest-ranked customers", "I mean the top three.", f"{rank} LIMIT 3"),
        ("the ten highest-ranked customers", "I mean the top ten.", f"{rank} LIMIT 10"),
    ]


def test_vague_large_orders_threshold():
    task = example("vague", 2)
    first = task.records[0]
    assert first.spec.request == "How many large orders?"
    assert first.ambiguities[0].term == "large orders"
    assert readings(task) == [
        (
            "orders with a quantity of at least 5 items",
            "An order counts as large from 5 items of quantity up.",
            f"SELECT COUNT(*) {E} WHERE e.quantity >= 5",
        ),
        (
            "orders with a quantity of at least 7 items",
            "An order counts as large from 7 items of quantity up.",
            f"SELECT COUNT(*) {E} WHERE e.quantity >= 7",
        ),
    ]
    assert one(task, "SELECT COUNT(*) FROM orders WHERE quantity BETWEEN 5 AND 6")[0][0] > 0


def test_knowledge_loyal_customers_masked_evidence():
    task = example("knowledge", 0)
    first = task.records[0]
    assert first.spec.request == "Report the average quantity of orders by loyal customers."
    (ambiguity,) = first.ambiguities
    assert (ambiguity.term, ambiguity.kind) == ("loyal customers", "knowledge")
    loyal = (
        "c.customer_id IN (SELECT customer_id FROM orders GROUP BY customer_id "
        "HAVING COUNT(*) >= {k})"
    )
    assert readings(task) == [
        (
            "loyal customers are customers with at least 8 orders",
            "I mean customers who have at least 8 orders on record.",
            f"SELECT AVG(e.quantity) {EC} WHERE {loyal.format(k=8)}",
        ),
        (
            "loyal customers are customers with at least 6 orders",
            "I mean customers who have at least 6 orders on record.",
            f"SELECT AVG(e.quantity) {EC} WHERE {loyal.format(k=6)}",
        ),
    ]
    assert [r.ambiguities[0].evidence for r in task.records] == [
        "loyal customers refers to customers with COUNT(order_id) >= 8",
        "loyal customers refers to customers with COUNT(order_id) >= 6",
    ]
    # both thresholds leave some customers out and let some in
    counts = [n for (n,) in one(task, "SELECT COUNT(*) FROM orders GROUP BY customer_id")]
    assert min(counts) < 6 <= 8 <= max(counts)
    # masked: the evidence is withheld from the visible external knowledge
    assert first.spec.external_knowledge == ("The data runs until 30 June 2024.",)


def test_knowledge_premium_products_on_items():
    task = example("knowledge", 1)
    first = task.records[0]
    assert first.spec.request == "Show the total quantity of orders for premium products."
    assert readings(task) == [
        (
            "premium products are products whose unit price is at least 147.56",
            "I mean products with a unit price of at least 147.56.",
            f"SELECT SUM(e.quantity) {EP} WHERE p.unit_price >= 147.56",
        ),
        (
            "premium products are products whose unit price is at least 34.4",
            "I mean products with a unit price of at least 34.4.",
            f"SELECT SUM(e.quantity) {EP} WHERE p.unit_price >= 34.4",
        ),
    ]
    # the thresholds are prices of the data (the median and the upper quartile)
    prices = {p for (p,) in one(task, "SELECT unit_price FROM products")}
    assert {147.56, 34.4} <= prices


def test_choice_city_name_two_cities_share():
    task = example("choice", 2)
    first = task.records[0]
    assert first.spec.request == "How many orders by customers from Springfield?"
    assert first.ambiguities[0].term == "Springfield"
    assert readings(task) == [
        (
            "the customers from Springfield, Illinois",
            "I mean Springfield, Illinois.",
            f"SELECT COUNT(*) {EC} WHERE c.city = 'Springfield, Illinois'",
        ),
        (
            "the customers from Springfield, Missouri",
            "I mean Springfield, Missouri.",
            f"SELECT COUNT(*) {EC} WHERE c.city = 'Springfield, Missouri'",
        ),
    ]
    cities = {c for (c,) in one(task, "SELECT DISTINCT city FROM customers")}
    assert {c for c in cities if c.startswith("Springfield")} == {
        "Springfield, Missouri",
        "Springfield, Illinois",
    }


@pytest.mark.parametrize(
    ("seed", "text", "expected"),
    [
        (
            0,
            "Show the average quantity of orders in the last year.",
            [
                (
                    "the twelve months up to the last day of data, July 2023 to June 2024",
                    "I mean the most recent twelve months, July 2023 through June 2024.",
                    f"SELECT AVG(e.quantity) {E} WHERE e.order_date >= '2023-07-01'",
                ),
                (
                    "the calendar year 2023, from January to December",
                    "I mean the calendar year 2023.",
                    f"SELECT AVG(e.quantity) {E} WHERE e.order_date BETWEEN '2023-01-01' AND "
                    "'2023-12-31'",
                ),
            ],
        ),
        (
            1,
            "Which are the 4 customers with the highest total quantity in the past few months?",
            [
                (
                    "the last six months of data, January to June 2024",
                    "The last six months: January to June 2024.",
                    f"SELECT c.name {EC} WHERE e.order_date >= '2024-01-01' GROUP BY "
                    "c.customer_id ORDER BY SUM(e.quantity) DESC LIMIT 4",
                ),
                (
                    "the last three months of data, April to June 2024",
                    "The last three months: April to June 2024.",
                    f"SELECT c.name {EC} WHERE e.order_date >= '2024-04-01' GROUP BY "
                    "c.customer_id ORDER BY SUM(e.quantity) DESC LIMIT 4",
                ),
            ],
        ),
    ],
)
def test_time_frames(seed, text, expected):
    task = example("time", seed)
    assert task.records[0].spec.request == text
    assert readings(task) == expected
    last_day = one(task, "SELECT MAX(order_date) FROM orders")[0][0]
    assert last_day <= "2024-06-30"


def test_table_order_records_current_or_archive():
    task = example("table", 2)
    first = task.records[0]
    assert first.spec.request == "How many order records?"
    (ambiguity,) = first.ambiguities
    assert (ambiguity.id, ambiguity.term, ambiguity.kind) == (
        "order_records",
        "order records",
        "critical",
    )
    # the template's phrasings, the archive table (the current one is the events' own noun),
    # the cues of each table and their years
    assert ambiguity.aliases == (
        "order history",
        "order data",
        "orders archive",
        "orders table",
        "orders archive table",
        "archive",
        "archived orders",
        "current orders",
        "current table",
        "old orders",
        "2019-2021",
        "2019 to 2021",
        "2022 to 2024",
        "since 2022",
    )
    assert readings(task) == [
        (
            "the orders table, the current orders from January 2022 to June 2024",
            "I mean the current orders, the ones in the orders table.",
            "SELECT COUNT(*) FROM orders AS e",
        ),
        (
            "the orders_archive table, the archived orders from 2019 to 2021",
            "I mean the archived orders, from the orders_archive table.",
            "SELECT COUNT(*) FROM orders_archive AS e",
        ),
    ]
    # both tables are in the schema the agent sees, with the same columns
    assert "CREATE TABLE orders (" in task.database.schema_text
    assert "CREATE TABLE orders_archive (" in task.database.schema_text
    columns = [
        [c[1] for c in one(task, f"PRAGMA table_info({t})")] for t in ("orders", "orders_archive")
    ]
    assert columns[0] == columns[1]
    # the archive holds 2019-2021, the current table 2022 on: the two counts differ
    archive_days = one(task, "SELECT MIN(order_date), MAX(order_date) FROM orders_archive")[0]
    assert "2019-01-01" <= archive_days[0] <= archive_days[1] <= "2021-12-31"
    assert one(task, "SELECT MIN(order_date) FROM orders")[0][0] >= "2022-01-01"
    counts = [one(task, sql)[0][0] for *_, sql in readings(task)]
    assert counts[0] != counts[1] and min(counts) > 0


def test_table_choice_in_a_ranking_names_the_records_in_its_tail():
    generator = TaskGenerator(
        families=("table",),
        ambiguities=(1, 1),
        distractors=(0, 0),
        domains=("retail",),
        databases_per_domain=1,
    )
    task = generator.generate(1)
    request = task.records[0].spec.request
    assert request == "Show the 4 customers with the highest total quantity in the order records."
    sqls = sorted(r.verification.reference_sql for r in task.records)
    assert sqls == [
        f"SELECT c.name {table} AS e JOIN customers AS c ON c.customer_id = e.customer_id "
        "GROUP BY c.customer_id ORDER BY SUM(e.quantity) DESC LIMIT 4"
        for table in ("FROM orders", "FROM orders_archive")
    ]
    names = [{n for (n,) in one(task, sql)} for sql in sqls]
    assert names[0] != names[1]


def test_table_choice_never_meets_a_time_frame_or_a_year():
    # the archive has no 2022-2024 dates: a time frame or a year would empty its readings
    generator = TaskGenerator(
        families=("table", "time", "scope"), ambiguities=(1, 2), distractors=(1, 4), domains="all"
    )
    seen = 0
    for seed in range(60):
        first = generator.generate(seed).records[0]
        if "table" in first.source["families"]:
            seen += 1
            assert "time" not in first.source["families"]
            assert "year" not in first.source["distractors"]
    assert seen >= 10


def test_every_pair_of_families_combines_or_is_refused_with_the_reason():
    # only table and time never meet: the archive (2019-2021) has no date of a time frame
    refused = {frozenset({"table", "time"})}
    pool = DatabasePool()
    for a, b in itertools.combinations(FAMILIES, 2):
        if frozenset({a, b}) in refused:
            with pytest.raises(ConfigurationError, match="archive table holds 2019-2021 only"):
                TaskGenerator(families=(a, b), ambiguities=(2, 2))
            # one of them at a time is fine
            TaskGenerator(families=(a, b), ambiguities=(0, 1)).generate(0)
            continue
        generator = TaskGenerator(
            families=(a, b), ambiguities=(2, 2), pool=pool, validate=False, databases_per_domain=2
        )
        for seed in range(3):
            first = generator.generate(seed).records[0]
            assert sorted(first.source["families"]) == sorted((a, b)), (a, b, seed)


def test_a_combination_no_request_holds_is_refused_at_construction():
    # scope needs an aggregate, vague and table together a ranking
    with pytest.raises(ConfigurationError, match="at most 2 share one"):
        TaskGenerator(families=("scope", "vague", "table"), ambiguities=(3, 3))
    TaskGenerator(families=("scope", "vague", "table"), ambiguities=(0, 2)).generate(1)


def test_attachment_and_choice_in_the_env_reset_on_every_seed():
    env = gym.make("AmbiTab-Procedural-v0", families=("attachment", "choice"), distractors=(0, 1))
    for seed in range(20):
        env.reset(seed=seed)
        record = env.unwrapped.record
        terms = [a.term for a in record.ambiguities]
        assert all(record.spec.request.count(t) == 1 for t in terms)
        if len(terms) == 2:  # the place before the clause, which binds the people alone
            request = record.spec.request
            place = next(t for t in terms if not t.startswith("joined"))
            assert request.index(place) < request.index("who joined") or "among" in request
    env.close()
