"""A self-written file in Ambrosia's CSV format (Ambrosia's own data cannot be included).

Columns and values as upstream: ``question, ambig_question, gold_queries, ambig_type, db_file,
db_dump, is_ambiguous, split`` with ``is_ambiguous`` ``True``/``False``, ``split`` ``test`` or
``few_shot_examples`` (the official labels), unambiguous rows naming their ambiguous question in
``ambig_question`` (empty on ambiguous rows). The databases are fictional. The ``gyms`` dump
turns foreign keys on and deletes a gym, so its class link vanishes only through ``ON DELETE
CASCADE`` (without the cascade no class is offered by every gym and the collective reading is
empty); the ``hotels`` dump has a MySQL line that SQLite rejects (skipped and counted); the
``legacy`` dump is a processed MySQL dump that SQLite rejects entirely (its item is dropped).
The ``parks`` rows come from a re-split CSV that already carries the loaders' attachment suffix
" Show them in one table." in ``question`` and ``ambig_question``; the ``hotels`` rows do not.

Items for the harder term cases: a vague word the readings specialise ("commute time" ->
mean/median commute time, with paraphrase noise "different", "sorted"), a vague word the
readings replace behind a noise word ("respective" ... "writers" -> novelists/playwrights), a
wh-word ambiguity ("Where" -> city/venue), a compound noun after the quantifier after an
auxiliary ("do customers have on each bank statement"), attachment modifiers with a number
"$60,000" and a date "10.11.2018", a pre-modifier attachment ("Spanish-speaking servers and
chefs"), and a scope item whose request has no quantifier and whose readings add no word (no
term can be defended: dropped).
"""

from __future__ import annotations

import csv
from pathlib import Path

GYMS_DUMP = """PRAGMA foreign_keys=ON;
BEGIN TRANSACTION;
CREATE TABLE gym (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE fitness_class (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE gym_class (
    gym_id INTEGER NOT NULL REFERENCES gym(id) ON DELETE CASCADE,
    class_id INTEGER NOT NULL REFERENCES fitness_class(id) ON DELETE CASCADE,
    PRIMARY KEY (gym_id, class_id)
);
CREATE INDEX gym_class_by_class ON gym_class(class_id);
INSERT INTO gym VALUES (1, 'North'), (2, 'South'), (3, 'East'), (4, 'Closed');
INSERT INTO fitness_class VALUES (1, 'yoga'), (2, 'spin'), (3, 'boxing');
INSERT INTO gym_class VALUES (1, 1), (1, 2), (2, 1), (2, 3), (3, 1), (3, 2), (4, 1);
UPDATE fitness_class SET name = 'pilates' WHERE id = 3;
DELETE FROM gym WHERE id = 4;
CREATE VIEW gym_class_names AS
    SELECT g.name AS gym, c.name AS class FROM gym g
    JOIN gym_class l ON l.gym_id = g.id JOIN fitness_class c ON c.id = l.class_id;
COMMIT;
"""

HOTELS_DUMP = """SET NAMES utf8mb4;
CREATE TABLE hotel (name TEXT, has_pool INTEGER);
CREATE TABLE restaurant (name TEXT, has_pool INTEGER);
INSERT INTO hotel VALUES ('Grand', 1), ('Budget Inn', 0);
INSERT INTO restaurant VALUES ('Lido', 1), ('Corner Bistro', 0);
"""

SHOPS_DUMP = """CREATE TABLE shop (name TEXT, customers INTEGER, rating REAL);
INSERT INTO shop VALUES ('Alpha', 150, 3.5), ('Beta', 40, 4.6), ('Gamma', 220, 4.8), ('Delta', 10, 2.0);
"""

STREAMING_DUMP = """CREATE TABLE streaming_service (id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE film (id INTEGER PRIMARY KEY, title TEXT);
CREATE TABLE offer (service_id INTEGER, film_id INTEGER);
INSERT INTO streaming_service VALUES (1, 'Flix'), (2, 'Stream+');
INSERT INTO film VALUES (1, 'Heat'), (2, 'Alien'), (3, 'Up');
INSERT INTO offer VALUES (1, 1), (1, 2), (2, 1), (2, 3);
"""

PARKS_DUMP = """CREATE TABLE park (name TEXT, has_cafe INTEGER);
CREATE TABLE museum (name TEXT, has_cafe INTEGER);
INSERT INTO park VALUES ('Riverside', 1), ('Oak Hill', 0);
INSERT INTO museum VALUES ('Modern', 1), ('History', 0);
"""

NEIGHBORHOODS_DUMP = """CREATE TABLE neighborhood (name TEXT, mean_commute_time REAL,
    median_commute_time REAL);
INSERT INTO neighborhood VALUES ('Ashton', 31.5, 28.0), ('Brookside', 22.0, 24.5),
    ('Cedar Park', 40.2, 35.0);
"""

WRITERS_DUMP = """CREATE TABLE novelist (name TEXT, birth_city TEXT, birth_year INTEGER);
CREATE TABLE playwright (name TEXT, birth_city TEXT, birth_year INTEGER);
INSERT INTO novelist VALUES ('Moira Bell', 'Edinburgh', 1961), ('Tom Reid', 'Glasgow', 1970);
INSERT INTO playwright VALUES ('Ian Lusk', 'Edinburgh', 1955), ('Ann Grey', 'Leeds', 1980);
"""

FESTIVALS_DUMP = """CREATE TABLE festival (name TEXT, city TEXT, venue TEXT);
INSERT INTO festival VALUES ('Jazz Nights', 'Leeds', 'Town Hall'), ('Folk Days', 'York', 'Barbican');
"""

BANK_DUMP = """CREATE TABLE bank_statement (id INTEGER PRIMARY KEY, customer TEXT);
CREATE TABLE transaction_type (id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE statement_line (statement_id INTEGER, type_id INTEGER);
INSERT INTO bank_statement VALUES (1, 'Ray'), (2, 'Sue'), (3, 'Ola');
INSERT INTO transaction_type VALUES (1, 'deposit'), (2, 'withdrawal'), (3, 'fee');
INSERT INTO statement_line VALUES (1, 1), (1, 3), (2, 1), (3, 1), (3, 2);
"""

SALARIES_DUMP = """CREATE TABLE engineer (name TEXT, salary INTEGER);
CREATE TABLE manager (name TEXT, salary INTEGER);
INSERT INTO engineer VALUES ('Ada', 60000), ('Ben', 52000);
INSERT INTO manager VALUES ('Cleo', 60000), ('Dev', 75000);
"""

DAIRY_DUMP = """CREATE TABLE cheese (name TEXT, best_before TEXT);
CREATE TABLE yogurt (name TEXT, best_before TEXT);
INSERT INTO cheese VALUES ('Brie', '10.11.2018'), ('Gouda', '02.03.2019');
INSERT INTO yogurt VALUES ('Greek', '10.11.2018'), ('Skyr', '05.12.2018');
"""

STAFF_DUMP = """CREATE TABLE server (name TEXT, language TEXT);
CREATE TABLE chef (name TEXT, language TEXT);
INSERT INTO server VALUES ('Lola', 'Spanish'), ('Max', 'German');
INSERT INTO chef VALUES ('Pablo', 'Spanish'), ('Nina', 'French');
"""

LEGACY_DUMP = """SET NAMES utf8mb4;
CREATE TABLE `shop` (`name` varchar(20)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
LOCK TABLES `shop` WRITE;
"""

GYMS = "data/scope/gyms/gyms.sqlite"
STREAMING = "data/scope/streaming/streaming.sqlite"
PARKS = "data/attachment/parks/parks.sqlite"
LEGACY = "data/vague/legacy/legacy.sqlite"
HOTELS = "data/attachment/hotels/hotels.sqlite"
SHOPS = "data/vague/shops/shops.sqlite"
NEIGHBORHOODS = "data/vague/neighborhoods/neighborhoods.sqlite"
WRITERS = "data/vague/writers/writers.sqlite"
FESTIVALS = "data/vague/festivals/festivals.sqlite"
BANK = "data/scope/bank/bank.sqlite"
SALARIES = "data/attachment/salaries/salaries.sqlite"
DAIRY = "data/attachment/dairy/dairy.sqlite"
STAFF = "data/attachment/staff/staff.sqlite"

COLLECTIVE_SQL = (
    "SELECT c.name FROM fitness_class AS c JOIN gym_class AS l ON l.class_id = c.id "
    "GROUP BY c.id HAVING COUNT(DISTINCT l.gym_id) = (SELECT COUNT(*) FROM gym)"
)
DISTRIBUTIVE_SQL = (
    "SELECT g.name, c.name FROM gym AS g JOIN gym_class AS l ON l.gym_id = g.id "
    "JOIN fitness_class AS c ON c.id = l.class_id"
)
BOTH_POOL_SQL = (
    "SELECT name FROM hotel WHERE has_pool = 1 UNION SELECT name FROM restaurant WHERE has_pool = 1"
)
RESTAURANT_POOL_SQL = "SELECT name FROM hotel UNION SELECT name FROM restaurant WHERE has_pool = 1"
ALL_SERVICES_SQL = (
    "SELECT f.title FROM film AS f JOIN offer AS o ON o.film_id = f.id GROUP BY f.id "
    "HAVING COUNT(DISTINCT o.service_id) = (SELECT COUNT(*) FROM streaming_service)"
)
PER_SERVICE_SQL = (
    "SELECT s.name, f.title FROM streaming_service AS s JOIN offer AS o ON o.service_id = s.id "
    "JOIN film AS f ON f.id = o.film_id"
)
BOTH_CAFE_SQL = (
    "SELECT name FROM park WHERE has_cafe = 1 UNION SELECT name FROM museum WHERE has_cafe = 1"
)
MUSEUM_CAFE_SQL = "SELECT name FROM park UNION SELECT name FROM museum WHERE has_cafe = 1"
CUSTOMERS_SQL = "SELECT name FROM shop WHERE customers > 100"
RATING_SQL = "SELECT name FROM shop WHERE rating > 4"
# two readings that return the same rows: the item is dropped
SAME_A_SQL = "SELECT name FROM shop WHERE customers > 200"
SAME_B_SQL = "SELECT name FROM shop WHERE rating > 4.7"
MEAN_SQL = "SELECT name, mean_commute_time FROM neighborhood ORDER BY name"
MEDIAN_SQL = "SELECT name, median_commute_time FROM neighborhood ORDER BY name"
MEAN_MEDIAN_SQL = (
    "SELECT name, mean_commute_time, median_commute_time FROM neighborhood ORDER BY name"
)
NOVELISTS_SQL = "SELECT name, birth_year FROM novelist WHERE birth_city = 'Edinburgh'"
PLAYWRIGHTS_SQL = "SELECT name, birth_year FROM playwright WHERE birth_city = 'Edinburgh'"
WRITERS_SQL = f"{NOVELISTS_SQL} UNION {PLAYWRIGHTS_SQL}"
CITY_SQL = "SELECT city FROM festival WHERE name = 'Jazz Nights'"
VENUE_SQL = "SELECT venue FROM festival WHERE name = 'Jazz Nights'"
CITY_VENUE_SQL = "SELECT city, venue FROM festival WHERE name = 'Jazz Nights'"
PER_STATEMENT_SQL = (
    "SELECT s.id, t.name FROM bank_statement AS s JOIN statement_line AS l "
    "ON l.statement_id = s.id JOIN transaction_type AS t ON t.id = l.type_id"
)
ALL_STATEMENTS_SQL = (
    "SELECT t.name FROM transaction_type AS t JOIN statement_line AS l ON l.type_id = t.id "
    "GROUP BY t.id HAVING COUNT(DISTINCT l.statement_id) = (SELECT COUNT(*) FROM bank_statement)"
)
BOTH_SALARY_SQL = (
    "SELECT name FROM engineer WHERE salary = 60000 "
    "UNION SELECT name FROM manager WHERE salary = 60000"
)
MANAGER_SALARY_SQL = "SELECT name FROM engineer UNION SELECT name FROM manager WHERE salary = 60000"
BOTH_DATE_SQL = (
    "SELECT name FROM cheese WHERE best_before = '10.11.2018' "
    "UNION SELECT name FROM yogurt WHERE best_before = '10.11.2018'"
)
YOGURT_DATE_SQL = (
    "SELECT name FROM cheese UNION SELECT name FROM yogurt WHERE best_before = '10.11.2018'"
)
BOTH_SPANISH_SQL = (
    "SELECT name FROM server WHERE language = 'Spanish' "
    "UNION SELECT name FROM chef WHERE language = 'Spanish'"
)
SERVER_SPANISH_SQL = (
    "SELECT name FROM server WHERE language = 'Spanish' UNION SELECT name FROM chef"
)


def _row(question, gold, kind, db_file, dump, ambiguous, ambig_question="", split="test"):
    return {
        "question": question,
        "ambig_question": ambig_question,
        "gold_queries": "\n\n".join(gold),
        "ambig_type": kind,
        "db_file": db_file,
        "db_dump": dump,
        "is_ambiguous": str(ambiguous),
        "split": split,
    }


SUFFIX = " Show them in one table."


def rows() -> list[dict[str, str]]:
    q_gym = "Which classes does every gym offer?"
    q_films = "What films does each streaming service offer?"
    q_pool = "List hotels and restaurants with a pool."
    q_cafe = "List parks and museums with a cafe." + SUFFIX
    q_popular = "What's the most popular shop? Please list them."
    q_busy = "Which shops are busy?"
    q_big = "Which shops are big?"
    q_commute = "Show the commute time for the different neighborhoods, sorted by name."
    q_writers = "List the respective birth years of the writers born in Edinburgh."
    q_where = "Where is the Jazz Nights festival held?"
    q_bank = "What transaction types do customers have on each bank statement?"
    q_salary = "List the engineers and managers whose salary is $60,000."
    q_dairy = "Show the cheeses and yogurts with a best before date of 10.11.2018."
    q_staff = "List the Spanish-speaking servers and chefs."
    q_offer = "Which classes do the gyms offer?"
    return [
        _row(q_gym, [COLLECTIVE_SQL, DISTRIBUTIVE_SQL], "scope", GYMS, GYMS_DUMP, True),
        _row("Which classes are offered by all gyms?", [COLLECTIVE_SQL], "scope", GYMS,
             GYMS_DUMP, False, q_gym),
        _row("For each gym, which classes does it offer?", [DISTRIBUTIVE_SQL], "scope", GYMS,
             GYMS_DUMP, False, q_gym),
        _row(q_films, [ALL_SERVICES_SQL, PER_SERVICE_SQL], "scope", STREAMING, STREAMING_DUMP,
             True),
        _row("What films are offered by all streaming services?", [ALL_SERVICES_SQL], "scope",
             STREAMING, STREAMING_DUMP, False, q_films),
        _row("For each streaming service, what films does it offer?", [PER_SERVICE_SQL], "scope",
             STREAMING, STREAMING_DUMP, False, q_films),
        _row(q_cafe, [BOTH_CAFE_SQL, MUSEUM_CAFE_SQL], "attachment", PARKS, PARKS_DUMP, True),
        _row("List parks with a cafe and museums with a cafe." + SUFFIX, [BOTH_CAFE_SQL],
             "attachment", PARKS, PARKS_DUMP, False, q_cafe),
        _row("List all parks, and the museums that have a cafe." + SUFFIX, [MUSEUM_CAFE_SQL],
             "attachment", PARKS, PARKS_DUMP, False, q_cafe),
        _row(q_pool, [BOTH_POOL_SQL, RESTAURANT_POOL_SQL], "attachment", HOTELS, HOTELS_DUMP, True),
        _row("List hotels with a pool and restaurants with a pool.", [BOTH_POOL_SQL],
             "attachment", HOTELS, HOTELS_DUMP, False, q_pool),
        _row("List all hotels, and the restaurants that have a pool.", [RESTAURANT_POOL_SQL],
             "attachment", HOTELS, HOTELS_DUMP, False, q_pool),
        _row(q_popular, [CUSTOMERS_SQL, RATING_SQL], "vague", SHOPS, SHOPS_DUMP, True),
        _row("Please list the shops that have more than 100 customers.", [CUSTOMERS_SQL], "vague",
             SHOPS, SHOPS_DUMP, False, q_popular),
        _row("Please list the shops that have a rating above 4.", [RATING_SQL], "vague", SHOPS,
             SHOPS_DUMP, False, q_popular),
        # a reading without its own question row: too few readings remain
        _row(q_busy, [CUSTOMERS_SQL, "SELECT name FROM shop WHERE customers > 5"], "vague",
             SHOPS, SHOPS_DUMP, True),
        _row("Which shops are busy, meaning over 100 customers?", [CUSTOMERS_SQL], "vague",
             SHOPS, SHOPS_DUMP, False, q_busy),
        # two readings with the same result
        _row(q_big, [SAME_A_SQL, SAME_B_SQL], "vague", SHOPS, SHOPS_DUMP, True),
        _row("Which shops have more than 200 customers?", [SAME_A_SQL], "vague", SHOPS,
             SHOPS_DUMP, False, q_big),
        _row("Which shops are rated above 4.7?", [SAME_B_SQL], "vague", SHOPS, SHOPS_DUMP,
             False, q_big),
        # a processed MySQL dump that SQLite rejects entirely: the item is dropped
        _row("Which shops are cheap?", ["SELECT name FROM shop", "SELECT name FROM shop LIMIT 1"],
             "vague", LEGACY, LEGACY_DUMP, True),
        _row("Which shops cost little?", ["SELECT name FROM shop"], "vague", LEGACY, LEGACY_DUMP,
             False, "Which shops are cheap?"),
        _row("Which shops have low prices?", ["SELECT name FROM shop LIMIT 1"], "vague", LEGACY,
             LEGACY_DUMP, False, "Which shops are cheap?"),
        # a vague word the readings specialise (mean/median commute time); the readings also
        # paraphrase "different" and "sorted", which are not what they disagree about
        _row(q_commute, [MEAN_SQL, MEDIAN_SQL, MEAN_MEDIAN_SQL], "vague", NEIGHBORHOODS,
             NEIGHBORHOODS_DUMP, True),
        _row("Show the mean commute time for each neighborhood, ordered by name.", [MEAN_SQL],
             "vague", NEIGHBORHOODS, NEIGHBORHOODS_DUMP, False, q_commute),
        _row("Show the median commute time for each neighborhood, ordered by name.",
             [MEDIAN_SQL], "vague", NEIGHBORHOODS, NEIGHBORHOODS_DUMP, False, q_commute),
        _row("Show both the mean and the median commute time for each neighborhood, ordered by "
             "name.", [MEAN_MEDIAN_SQL], "vague", NEIGHBORHOODS, NEIGHBORHOODS_DUMP, False,
             q_commute),
        # a vague word the readings replace (novelists/playwrights) after a noise word
        _row(q_writers, [NOVELISTS_SQL, PLAYWRIGHTS_SQL, WRITERS_SQL], "vague", WRITERS,
             WRITERS_DUMP, True),
        _row("List the birth years of the novelists born in Edinburgh.", [NOVELISTS_SQL],
             "vague", WRITERS, WRITERS_DUMP, False, q_writers),
        _row("List the birth years of the playwrights born in Edinburgh.", [PLAYWRIGHTS_SQL],
             "vague", WRITERS, WRITERS_DUMP, False, q_writers),
        _row("List the birth years of the novelists and playwrights born in Edinburgh.",
             [WRITERS_SQL], "vague", WRITERS, WRITERS_DUMP, False, q_writers),
        # a wh-word ambiguity: "Where" is the city or the venue
        _row(q_where, [CITY_SQL, VENUE_SQL, CITY_VENUE_SQL], "vague", FESTIVALS,
             FESTIVALS_DUMP, True),
        _row("In which city is the Jazz Nights festival held?", [CITY_SQL], "vague", FESTIVALS,
             FESTIVALS_DUMP, False, q_where),
        _row("At which venue is the Jazz Nights festival held?", [VENUE_SQL], "vague",
             FESTIVALS, FESTIVALS_DUMP, False, q_where),
        _row("In which city and at which venue is the Jazz Nights festival held?",
             [CITY_VENUE_SQL], "vague", FESTIVALS, FESTIVALS_DUMP, False, q_where),
        # a compound noun after the quantifier, at the end of a clause with an auxiliary
        _row(q_bank, [PER_STATEMENT_SQL, ALL_STATEMENTS_SQL], "scope", BANK, BANK_DUMP, True),
        _row("For each bank statement, what transaction types do customers have on it?",
             [PER_STATEMENT_SQL], "scope", BANK, BANK_DUMP, False, q_bank),
        _row("What transaction types do customers have on all bank statements?",
             [ALL_STATEMENTS_SQL], "scope", BANK, BANK_DUMP, False, q_bank),
        # attachment modifiers holding a number with a comma and a date with dots
        _row(q_salary, [BOTH_SALARY_SQL, MANAGER_SALARY_SQL], "attachment", SALARIES,
             SALARIES_DUMP, True),
        _row("List the engineers whose salary is $60,000 and the managers whose salary is "
             "$60,000.", [BOTH_SALARY_SQL], "attachment", SALARIES, SALARIES_DUMP, False,
             q_salary),
        _row("List all engineers, and the managers whose salary is $60,000.",
             [MANAGER_SALARY_SQL], "attachment", SALARIES, SALARIES_DUMP, False, q_salary),
        _row(q_dairy, [BOTH_DATE_SQL, YOGURT_DATE_SQL], "attachment", DAIRY, DAIRY_DUMP, True),
        _row("Show the cheeses with a best before date of 10.11.2018 and the yogurts with a best "
             "before date of 10.11.2018.", [BOTH_DATE_SQL], "attachment", DAIRY, DAIRY_DUMP,
             False, q_dairy),
        _row("Show all cheeses, and the yogurts with a best before date of 10.11.2018.",
             [YOGURT_DATE_SQL], "attachment", DAIRY, DAIRY_DUMP, False, q_dairy),
        # a pre-modifier attachment
        _row(q_staff, [BOTH_SPANISH_SQL, SERVER_SPANISH_SQL], "attachment", STAFF, STAFF_DUMP,
             True),
        _row("List the Spanish-speaking servers and the Spanish-speaking chefs.",
             [BOTH_SPANISH_SQL], "attachment", STAFF, STAFF_DUMP, False, q_staff),
        _row("List the Spanish-speaking servers and all chefs.", [SERVER_SPANISH_SQL],
             "attachment", STAFF, STAFF_DUMP, False, q_staff),
        # no quantifier in the request and no word the readings add: no term can be defended
        _row(q_offer, [COLLECTIVE_SQL, DISTRIBUTIVE_SQL], "scope", GYMS, GYMS_DUMP, True),
        _row("Which classes are offered by the gyms?", [COLLECTIVE_SQL], "scope", GYMS,
             GYMS_DUMP, False, q_offer),
        _row("Which classes do the gyms all offer?", [DISTRIBUTIVE_SQL], "scope", GYMS,
             GYMS_DUMP, False, q_offer),
        # a few-shot example (official label): excluded with its readings
        _row("Which shops does every customer like?", [RATING_SQL, CUSTOMERS_SQL], "scope",
             SHOPS, SHOPS_DUMP, True, split="few_shot_examples"),
        _row("Which shops are liked by all customers?", [RATING_SQL], "scope", SHOPS, SHOPS_DUMP,
             False, "Which shops does every customer like?", split="few_shot_examples"),
        _row("For each customer, which shops do they like?", [CUSTOMERS_SQL], "scope", SHOPS,
             SHOPS_DUMP, False, "Which shops does every customer like?",
             split="few_shot_examples"),
    ]  # fmt: skip


def write_ambrosia_csv(folder: Path) -> Path:
    """Write ``ambrosia.csv`` into ``folder``; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ambrosia.csv"
    data = rows()
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(data[0]))
        writer.writeheader()
        writer.writerows(data)
    return path
