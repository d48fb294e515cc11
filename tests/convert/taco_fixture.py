"""A self-written data folder in TACO's format (TACO carries no licence, so it is not included).

Layout: one folder per database with ``schema.json``; one JSON file per query with ``sql,
problem_description, natural_language_query, results, "sql skeleton", database, tables``.
``traffic`` ships a SQLite file; ``housing`` ships one CSV file per table. Data are fictional.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

TRAFFIC = """
CREATE TABLE crashes_2019 (county TEXT, month TEXT, injuries INTEGER);
CREATE TABLE crashes_2020 (county TEXT, month TEXT, injuries INTEGER);
CREATE TABLE weather (county TEXT, rain REAL);
INSERT INTO crashes_2019 VALUES ('Kent', 'Jan', 2), ('Kent', 'Feb', 0), ('Essex', 'Jan', 3),
    ('Essex', 'Mar', 1);
INSERT INTO crashes_2020 VALUES ('Kent', 'Jan', 1), ('Essex', 'Feb', 4), ('Essex', 'Apr', 2),
    ('Essex', 'May', 0);
INSERT INTO weather VALUES ('Kent', 1.5), ('Essex', 0.4);
"""

HOMES_2021 = [["city", "price"], ["Dover", "200000"], ["Dover", "240000"], ["Hythe", "180000"]]
HOMES_2022 = [["city", "price"], ["Dover", "260000"], ["Hythe", "190000"]]

# file name -> (sql, natural-language query, expected outcome)
QUERIES = {
    "q01.json": ("SELECT COUNT(*) FROM crashes_2019 WHERE county = 'Kent'",
                 "How many crashes were there in Kent?", "kept"),
    "q02.json": ("SELECT month FROM crashes_2020 WHERE county = 'Essex' AND injuries > 1",
                 "Which months had crashes with more than 1 injury?", "kept"),
    "q03.json": ("SELECT county, SUM(injuries) FROM crashes_2019 GROUP BY county",
                 "What is the total number of injuries per county?", "kept"),
    "q04.json": ("SELECT rain FROM weather WHERE county = 'Kent'",
                 "How much rain fell in Kent?", "no_table_alternative"),
    "q05.json": ("SELECT COUNT(*) FROM crashes_2019 WHERE county = 'Kent' AND month = 'Jan'",
                 "How many crashes in Kent in Jan?", "no_result_distinct_alternative"),
    "q06.json": ("SELECT c.month FROM crashes_2019 AS c JOIN weather AS w ON w.county = c.county",
                 "Which months had crashes where it rained?", "not_single_table_select"),
    "q07.json": ("SELECT month FROM crashes_2019 WHERE injuries > 10",
                 "Which months had more than 10 injuries?", "empty_result"),
    "q08.json": ("SELECT speed FROM crashes_2019", "How fast were the cars?",
                 "reference_sql_failed"),
}  # fmt: skip
HOUSING_QUERY = (
    "SELECT AVG(price) FROM homes_2021 WHERE city = 'Dover'",
    "What was the average home price in Dover?",
    "kept",
)


def _query_file(path: Path, sql: str, question: str, database: str, tables: dict) -> None:
    path.write_text(
        json.dumps(
            {
                "sql": sql,
                "problem_description": f"Answer: {question}",
                "natural_language_query": question,
                "results": 0,
                "sql skeleton": sql,
                "database": database,
                "tables": tables,
            },
            indent=1,
        )
    )


def write_taco(folder: Path) -> Path:
    """Write the data folder; returns it."""
    traffic = folder / "traffic"
    (traffic / "queries").mkdir(parents=True)
    connection = sqlite3.connect(traffic / "traffic.sqlite")
    connection.executescript(TRAFFIC)
    connection.commit()
    connection.close()
    tables = {
        "crashes_2019": ["county", "month", "injuries"],
        "crashes_2020": ["county", "month", "injuries"],
        "weather": ["county", "rain"],
    }
    (traffic / "schema.json").write_text(json.dumps(tables))
    for name, (sql, question, _) in QUERIES.items():
        _query_file(traffic / "queries" / name, sql, question, "traffic", tables)
    housing = folder / "housing"
    housing.mkdir()
    for name, rows in (("homes_2021", HOMES_2021), ("homes_2022", HOMES_2022)):
        with (housing / f"{name}.csv").open("w", newline="") as handle:
            csv.writer(handle).writerows(rows)
    housing_tables = {"homes_2021": ["city", "price"], "homes_2022": ["city", "price"]}
    (housing / "schema.json").write_text(json.dumps(housing_tables))
    _query_file(housing / "q01.json", *HOUSING_QUERY[:2], "housing", housing_tables)
    return folder
