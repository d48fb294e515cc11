"""A self-written TACO-Benchmark tree in upstream's exact layout (TACO carries no licence, so
the real data is not included; see ../shared/upstream/README.md, "Formats without samples").

Layout written by :func:`write_taco` (data are fictional)::

    us/data/new_schema/<db>_schema.json
    us/data/database/<db>/<db>.db  (+ <db>.json, a dump)
    us/data/new_sql_nl_single/<db>/generated_nl_query_<N>.json
    us/data/new_sql_single/<db>/generated_nl_query_<N>.json     (some lack the NL fields)
    us/data/new_sql_cross/<db1>_<db2>/generated_nl_query_<N>.json
    beijing/data/...  new_sql_single/<db>/generated_sql_statement_<N>.json (no NL fields)

Database names hold spaces and dots; the ``tables`` field of a query often lists two tables
although the query reads one. :data:`EXPECTED` gives each query file's outcome, worked out by hand
from the tables below.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

CRASH_DB = "Vermont Crash Data... - 96"
HOUSING_DB = "housing.gov v2.1"
MISSING_DB = "Gone Data 2.0"
BEIJING_DB = "beijing.transport 2020"

CRASH_SCRIPT = """
CREATE TABLE crashes_2019 (county TEXT, month TEXT, injuries INTEGER);
CREATE TABLE crashes_2020 (county TEXT, month TEXT, injuries INTEGER);
CREATE TABLE weather (county TEXT, rain REAL);
INSERT INTO crashes_2019 VALUES ('Kent', 'Jan', 2), ('Kent', 'Feb', 0), ('Essex', 'Jan', 3),
    ('Essex', 'Mar', 1);
INSERT INTO crashes_2020 VALUES ('Kent', 'Jan', 1), ('Essex', 'Feb', 4), ('Essex', 'Apr', 2),
    ('Essex', 'May', 0);
INSERT INTO weather VALUES ('Kent', 1.5), ('Essex', 0.4);
"""
CRASH_TABLES = [
    ("crashes_2019", "Crashes reported in 2019", ["county", "month", "injuries"]),
    ("crashes_2020", "Crashes reported in 2020", ["county", "month", "injuries"]),
    ("weather", "Yearly rainfall by county", ["county", "rain"]),
]

HOUSING_SCRIPT = """
CREATE TABLE "Home Sales 2021" (city TEXT, price INTEGER);
CREATE TABLE "Home Sales 2022" (city TEXT, price INTEGER);
CREATE TABLE north_ledger (item TEXT, amount REAL);
CREATE TABLE south_register (item TEXT, amount REAL);
INSERT INTO "Home Sales 2021" VALUES ('Dover', 200000), ('Dover', 240000), ('Hythe', 180000);
INSERT INTO "Home Sales 2022" VALUES ('Dover', 260000), ('Hythe', 190000);
INSERT INTO north_ledger VALUES ('paper', 12.5), ('ink', 40.0);
INSERT INTO south_register VALUES ('paper', 9.0), ('toner', 75.0);
"""
HOUSING_TABLES = [
    ("Home Sales 2021", "Home sales recorded in 2021", ["city", "price"]),
    ("Home Sales 2022", "Home sales recorded in 2022", ["city", "price"]),
    ("north_ledger", "Budget ledger of the north office", ["item", "amount"]),
    ("south_register", "Budget ledger of the south office", ["item", "amount"]),
]

BEIJING_SCRIPT = """
CREATE TABLE bus_2019 (line TEXT, riders INTEGER);
CREATE TABLE bus_2020 (line TEXT, riders INTEGER);
INSERT INTO bus_2019 VALUES ('L1', 900), ('L2', 400);
INSERT INTO bus_2020 VALUES ('L1', 500), ('L2', 450);
"""
BEIJING_TABLES = [
    ("bus_2019", "Bus ridership 2019", ["line", "riders"]),
    ("bus_2020", "Bus ridership 2020", ["line", "riders"]),
]

NL = "new_sql_nl_single"
SINGLE = "new_sql_single"

# (folder, db, file name) -> (sql, natural-language query or None when the file lacks the NL
# fields, results); RAW files hold text that is not JSON, and FIELDS overrides whole objects
QUERIES: dict[tuple[str, str, str], tuple[str, str | None, object]] = {
    (NL, CRASH_DB, "generated_nl_query_1.json"): (
        "SELECT COUNT(*) FROM crashes_2019 WHERE county = 'Kent'",
        "How many crashes were there in Kent?", [[2]]),
    (NL, CRASH_DB, "generated_nl_query_2.json"): (
        "SELECT month FROM crashes_2020 WHERE county = 'Essex' AND injuries > 1",
        "Which months had crashes with more than 1 injury?", [["Feb"], ["Apr"]]),
    (NL, CRASH_DB, "generated_nl_query_3.json"): (
        "SELECT county, SUM(injuries) FROM crashes_2019 GROUP BY county;",
        "What is the total number of injuries per county?", [["Essex", 4], ["Kent", 2]]),
    (NL, CRASH_DB, "generated_nl_query_4.json"): (
        "SELECT rain FROM weather WHERE county = 'Kent'", "How much rain fell in Kent?", [[1.5]]),
    (NL, CRASH_DB, "generated_nl_query_5.json"): (
        "SELECT COUNT(*) FROM crashes_2019 WHERE county = 'Kent' AND month = 'Jan'",
        "How many crashes in Kent in Jan?", [[1]]),
    (NL, CRASH_DB, "generated_nl_query_6.json"): (
        "SELECT c.month FROM crashes_2019 AS c JOIN weather AS w ON w.county = c.county",
        "Which months had crashes where it rained?", [["Jan"]]),
    (NL, CRASH_DB, "generated_nl_query_7.json"): (
        "SELECT month FROM crashes_2019 WHERE injuries > 10",
        "Which months had more than 10 injuries?", 0),
    (NL, CRASH_DB, "generated_nl_query_8.json"): (
        "SELECT speed FROM crashes_2019", "How fast were the cars?", [[50]]),
    (NL, CRASH_DB, "generated_nl_query_9.json"): (
        "SELECT month FROM crashes_2019 WHERE county = 'Kent';\n```",
        "Which months had crashes in Kent?", [["Jan"], ["Feb"]]),
    (NL, CRASH_DB, "generated_nl_query_10.json"): (
        "SELECT month FROM crashes_2019 WHERE county = 'Ke",
        "Which months had crashes in Kent?", [["Jan"], ["Feb"]]),
    (NL, CRASH_DB, "generated_nl_query_13.json"): (
        "SELECT county FROM crashes_2019 WHERE injuries > 1",
        "Which counties had crashes with more than 1 injury?", [["Kent"], ["Essex"]]),
    (NL, CRASH_DB, "generated_nl_query_14.json"): (
        "SELECT month FROM crashes_2019 WHERE county = 'Kent' AND injuries > 1 ORDER BY month",
        "In which months did crashes injure more than one person?", [["Jan"]]),
    (SINGLE, CRASH_DB, "generated_nl_query_1.json"): (
        "SELECT COUNT(*)  FROM crashes_2019 WHERE county = 'Kent';",
        "How many crashes were there in Kent?", [[2]]),
    (SINGLE, CRASH_DB, "generated_nl_query_2.json"): (
        "SELECT COUNT(*) FROM crashes_2020 WHERE county = 'Kent'",
        "How many crashes were there in Kent in 2020?", [[1]]),
    (SINGLE, CRASH_DB, "generated_nl_query_3.json"): (
        "SELECT month FROM crashes_2019 WHERE county = 'Essex' AND injuries >= 1", None,
        [["Jan"], ["Mar"]]),
    (SINGLE, CRASH_DB, "generated_nl_query_4.json"): (
        "SELECT month FROM crashes_2020 WHERE county = 'Essex' AND injuries >= 1", None,
        [["Feb"], ["Apr"]]),
    (SINGLE, CRASH_DB, "generated_nl_query_5.json"): (
        "SELECT crashes_2019.county FROM crashes_2019 WHERE crashes_2019.injuries > 1", None,
        [["Kent"], ["Essex"]]),
    (SINGLE, HOUSING_DB, "generated_nl_query_1.json"): (
        "SELECT AVG(price) FROM \"Home Sales 2021\" WHERE city = 'Dover'",
        "What was the average home price in Dover?", [[220000.0]]),
    (SINGLE, HOUSING_DB, "generated_nl_query_2.json"): (
        "SELECT amount FROM north_ledger WHERE item = 'paper'", None, [[12.5]]),
    (SINGLE, MISSING_DB, "generated_nl_query_1.json"): (
        "SELECT a FROM t", "What is a?", [[1]]),
}  # fmt: skip
RAW = {
    (NL, CRASH_DB, "generated_nl_query_11.json"): '{"sql": "SELECT month FROM crashes_2019", "res'
}
FIELDS = {
    (NL, CRASH_DB, "generated_nl_query_12.json"): {
        "problem_description": "List the months.",
        "natural_language_query": "Which months?",
        "results": [["Jan"]],
        "database": CRASH_DB,
        "tables": {"crashes_2019": ["crashes_2019.month"]},
    },
}
CROSS = {
    (f"{CRASH_DB}_{HOUSING_DB}", "generated_nl_query_1.json"): (
        'SELECT w.rain FROM weather AS w, "Home Sales 2021" AS h',
        "Rain and home sales?",
    ),
}
BEIJING = {
    "generated_sql_statement_1.json": "SELECT riders FROM bus_2019 WHERE line = 'L1'",
}

# query file (path under the checkout) -> reason it is dropped, or "kept"
EXPECTED: dict[str, str] = {
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_1.json": "kept",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_2.json": "kept",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_3.json": "kept",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_4.json": "no_table_alternative",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_5.json": "no_result_distinct_alternative",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_6.json": "not_single_table_select",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_7.json": "upstream_no_result",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_8.json": "reference_sql_failed",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_9.json": "fenced_sql",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_10.json": "unparsable_sql",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_11.json": "unreadable_json",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_12.json": "missing_field",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_13.json": "kept",
    f"us/data/{NL}/{CRASH_DB}/generated_nl_query_14.json": "kept",
    f"us/data/{SINGLE}/{CRASH_DB}/generated_nl_query_1.json": "duplicate_query",
    f"us/data/{SINGLE}/{CRASH_DB}/generated_nl_query_2.json": "kept",
    f"us/data/{SINGLE}/{CRASH_DB}/generated_nl_query_3.json": "kept",
    f"us/data/{SINGLE}/{CRASH_DB}/generated_nl_query_4.json": "kept",
    f"us/data/{SINGLE}/{CRASH_DB}/generated_nl_query_5.json": "indistinguishable_reading",
    f"us/data/{SINGLE}/{HOUSING_DB}/generated_nl_query_1.json": "kept",
    f"us/data/{SINGLE}/{HOUSING_DB}/generated_nl_query_2.json": "kept",
    f"us/data/{SINGLE}/{MISSING_DB}/generated_nl_query_1.json": "database_missing",
    f"us/data/new_sql_cross/{CRASH_DB}_{HOUSING_DB}/generated_nl_query_1.json": "cross_database",
    f"beijing/data/{SINGLE}/{BEIJING_DB}/generated_sql_statement_1.json": "split_not_converted",
}


def _database(data: Path, name: str, script: str, tables: list) -> None:
    folder = data / "database" / name
    folder.mkdir(parents=True)
    connection = sqlite3.connect(folder / f"{name}.db")
    connection.executescript(script)
    connection.commit()
    dump = {
        table: [dict(zip(columns, row, strict=True)) for row in connection.execute(
            f'SELECT * FROM "{table}"').fetchall()]
        for table, _, columns in tables
    }  # fmt: skip
    connection.close()
    (folder / f"{name}.json").write_text(json.dumps(dump, indent=1), "utf-8")
    schema = {
        "tables": [
            {
                "table_name": table,
                "table_comment": comment,
                "table_description": f"{comment}. Columns: {', '.join(columns)}.",
                "columns": [{"column_name": c, "data_type": "TEXT"} for c in columns],
            }
            for table, comment, columns in tables
        ]
    }
    (data / "new_schema").mkdir(exist_ok=True)
    (data / "new_schema" / f"{name}_schema.json").write_text(json.dumps(schema, indent=1), "utf-8")


def _tables_field(sql: str, tables: list) -> dict[str, list[str]]:
    """Upstream's ``tables``: the table the query reads plus the next one of its database."""
    names = [t for t, _, _ in tables]
    used = next((t for t in names if t in sql), names[0])
    other = names[(names.index(used) + 1) % len(names)]
    columns = dict((t, c) for t, _, c in tables)  # noqa: C402
    return {t: [f"{t}.{c}" for c in columns[t]] for t in (used, other)}


def query_object(sql: str, question: str | None, results: object, db: str, tables: list) -> dict:
    """One query file's object; without a question the NL fields are absent (as upstream)."""
    data: dict = {"sql": sql}
    if question is not None:
        data["problem_description"] = f"The user wants to know: {question}"
        data["natural_language_query"] = question
    data["results"] = results
    data["sql skeleton"] = sql
    data["database"] = db
    data["tables"] = _tables_field(sql, tables)
    return data


def write_taco(root: Path) -> Path:
    """Write the TACO-Benchmark tree under ``root``; returns ``root``."""
    us = root / "us" / "data"
    _database(us, CRASH_DB, CRASH_SCRIPT, CRASH_TABLES)
    _database(us, HOUSING_DB, HOUSING_SCRIPT, HOUSING_TABLES)
    tables_of = {CRASH_DB: CRASH_TABLES, HOUSING_DB: HOUSING_TABLES, MISSING_DB: CRASH_TABLES}
    for (folder, db, name), (sql, question, results) in QUERIES.items():
        path = us / folder / db / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = query_object(sql, question, results, db, tables_of[db])
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False), "utf-8")
    for (folder, db, name), text in RAW.items():
        (us / folder / db / name).write_text(text, "utf-8")
    for (folder, db, name), data in FIELDS.items():
        (us / folder / db / name).write_text(json.dumps(data, indent=1), "utf-8")
    for (pair, name), (sql, question) in CROSS.items():
        path = us / "new_sql_cross" / pair / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = query_object(sql, question, [[1.5]], pair, CRASH_TABLES)
        path.write_text(json.dumps(data, indent=1), "utf-8")
    beijing = root / "beijing" / "data"
    _database(beijing, BEIJING_DB, BEIJING_SCRIPT, BEIJING_TABLES)
    for name, sql in BEIJING.items():
        path = beijing / SINGLE / BEIJING_DB / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = query_object(sql, None, [[900]], BEIJING_DB, BEIJING_TABLES)
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False), "utf-8")
    return root
