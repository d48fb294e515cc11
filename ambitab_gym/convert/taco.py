"""TACO's per-query JSON files and databases -> AmbiTab-TACO.

TACO ships one folder per database (with a ``schema.json``) and one JSON file per query
(``sql``, ``natural_language_query``, ``problem_description``, ``results``, ``database``,
``tables``). This converter keeps single-table ``SELECT`` queries and verbalizes each one
deterministically from its SQL, withholding:

* the **table** (always): the request names only what the candidate tables share ("the
  crashes table" for ``crashes_2019`` / ``crashes_2020``);
* a **literal value** when TACO's own natural-language query does not state it ("the given
  county" instead of ``'Kent'``).

A query is kept when it executes with a nonempty result and some other table of its database
that has every column the query uses gives a different result (a result-distinct table
alternative). Value alternatives are not required to change the result. Each kept query is one
record (its AVT's only reading) with one ambiguity per withheld choice.

Databases: ``<db>.sqlite`` (or any ``*.sqlite``/``*.db``) in the database folder, else one CSV
file per table, loaded into SQLite.

* :func:`convert` - the converter entry point.
* :func:`verbalize` - the request for a parsed query.
* :func:`swap_table` - the query over another table.
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from pathlib import Path

import sqlglot
from sqlglot import exp

from ambitab_gym.convert.common import (
    MALFORMED,
    BuildError,
    BuildOptions,
    Conversion,
    Drop,
    Item,
    Workspace,
    compare_for,
    malformed,
    progress,
    sha256_file,
    slug,
)
from ambitab_gym.records import parse_record
from ambitab_gym.verify.base import QueryError
from ambitab_gym.verify.compare import results_match

__all__ = ["convert", "swap_table", "table_stem", "verbalize"]

UPSTREAM = {
    "name": "TACO",
    "citation": "Deng et al., 2026 (TACO)",
    "licence": "no licence is stated upstream; the built corpus is for the user's own research",
}

_AGG = {
    exp.Count: "number of",
    exp.Sum: "total",
    exp.Avg: "average",
    exp.Min: "minimum",
    exp.Max: "maximum",
}
_OPS = {
    exp.EQ: "is",
    exp.NEQ: "is not",
    exp.GT: "is greater than",
    exp.GTE: "is at least",
    exp.LT: "is less than",
    exp.LTE: "is at most",
    exp.Like: "matches",
}


def _words(name: str) -> str:
    return " ".join(re.sub(r"[_\s]+", " ", name).split())


def table_stem(tables: list[str]) -> str:
    """What the names of candidate tables share, as words (their distinguishing parts dropped).

    >>> table_stem(["crashes_2019", "crashes_2020"])
    'crashes'
    >>> table_stem(["ny_schools", "nj_schools", "ct_schools"])
    'schools'
    >>> table_stem(["alpha", "beta"])
    'data'
    """
    token_lists = [[t for t in re.split(r"[_\W\d]+", name.lower()) if t] for name in tables]
    common = set(token_lists[0]).intersection(*map(set, token_lists[1:])) if token_lists else set()
    words = [t for t in token_lists[0] if t in common] if token_lists else []
    return " ".join(dict.fromkeys(words)) or "data"


def _literal_text(node: exp.Expression) -> str:
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else str(node.this)
    return node.sql()


def _column_phrase(node: exp.Expression) -> str:
    if isinstance(node, exp.Column):
        return _words(node.name)
    if isinstance(node, exp.Star):
        return "all columns"
    for kind, word in _AGG.items():
        if isinstance(node, kind):
            inner = node.this
            distinct = isinstance(inner, exp.Distinct)
            if distinct:
                inner = inner.expressions[0] if inner.expressions else inner
            if kind is exp.Count and (inner is None or isinstance(inner, exp.Star)):
                return "number of records"
            what = _column_phrase(inner) if inner is not None else "values"
            if kind is exp.Count:
                return f"number of {'distinct ' if distinct else ''}{what} values"
            return f"{word} {what}"
    if isinstance(node, exp.Alias):
        return _column_phrase(node.this)
    return node.sql()


class _Withheld:
    """Literal values withheld from the request: column words -> (literal, SQL condition)."""

    def __init__(self) -> None:
        self.values: list[tuple[str, str, str]] = []  # (column words, literal, condition sql)


def _condition(node: exp.Expression, stated: str, withheld: _Withheld) -> str:
    if isinstance(node, exp.And):
        return f"{_condition(node.left, stated, withheld)} and {_condition(node.right, stated, withheld)}"
    if isinstance(node, exp.Or):
        return f"{_condition(node.left, stated, withheld)} or {_condition(node.right, stated, withheld)}"
    if isinstance(node, exp.Paren):
        return _condition(node.this, stated, withheld)
    if isinstance(node, exp.Not):
        return f"not ({_condition(node.this, stated, withheld)})"
    if isinstance(node, exp.Is):
        what = _column_phrase(node.this)
        return f"{what} is {'missing' if isinstance(node.expression, exp.Null) else node.expression.sql()}"
    if isinstance(node, exp.Between):
        return (
            f"{_column_phrase(node.this)} is between {_literal_text(node.args['low'])} "
            f"and {_literal_text(node.args['high'])}"
        )
    if isinstance(node, exp.In):
        values = [_literal_text(v) for v in node.expressions]
        return f"{_column_phrase(node.this)} is one of {', '.join(values)}"
    for kind, words in _OPS.items():
        if isinstance(node, kind):
            left, right = node.this, node.expression
            column = _column_phrase(left)
            if isinstance(right, exp.Literal):
                value = _literal_text(right)
                if isinstance(left, exp.Column) and not _is_stated(value, stated):
                    withheld.values.append((column, value, node.sql()))
                    return f"{column} {words} the given {column}"
                return f"{column} {words} {value}"
            return f"{column} {words} {_column_phrase(right)}"
    return node.sql()


def _is_stated(value: str, stated: str) -> bool:
    pattern = r"(?<!\w)" + re.escape(value.lower().strip()) + r"(?!\w)"
    return re.search(pattern, stated) is not None


def verbalize(tree: exp.Select, stem: str, stated: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The request for a single-table SELECT, withholding the table and unstated literals.

    Args:
        tree: the parsed query.
        stem: what the candidate tables share (see :func:`table_stem`).
        stated: lower-cased text of TACO's natural-language query (literals it states are
            stated in the request too).

    Returns:
        The request and the withheld values ``(column words, literal, condition SQL)``.

    >>> tree = sqlglot.parse_one("SELECT COUNT(*) FROM crashes_2019 WHERE county = 'Kent' AND injuries > 2")
    >>> verbalize(tree, "crashes", "how many crashes with over 2 injuries in kent?")[0]
    'Using the crashes table, find the number of records where county is Kent and injuries is greater than 2.'
    >>> request, withheld = verbalize(tree, "crashes", "how many crashes had over 2 injuries?")
    >>> request
    'Using the crashes table, find the number of records where county is the given county and injuries is greater than 2.'
    >>> withheld
    [('county', 'Kent', "county = 'Kent'")]
    """
    withheld = _Withheld()
    items = [_column_phrase(e) for e in tree.expressions]
    what = ", ".join(f"the {i}" if not i.startswith("all ") else i for i in items)
    distinct = " distinct" if tree.args.get("distinct") else ""
    verb = "find" if any(isinstance(e.unalias(), tuple(_AGG)) for e in tree.expressions) else "list"
    text = f"Using the {stem} table, {verb}{distinct} {what}"
    group = tree.args.get("group")
    if group:
        text += " for each " + " and ".join(_column_phrase(g) for g in group.expressions)
    where = tree.args.get("where")
    if where is not None:
        text += " where " + _condition(where.this, stated, withheld)
    having = tree.args.get("having")
    if having is not None:
        text += " keeping only groups where " + _condition(having.this, stated, withheld)
    order = tree.args.get("order")
    if order is not None:
        keys = []
        for key in order.expressions:
            direction = (
                "from highest to lowest" if key.args.get("desc") else "from lowest to highest"
            )
            keys.append(f"{_column_phrase(key.this)} {direction}")
        text += ", sorted by " + " then ".join(keys)
    limit = tree.args.get("limit")
    if limit is not None and limit.expression is not None:
        text += f", only the first {limit.expression.sql()}"
    return text + ".", withheld.values


def _single_table(sql: str) -> tuple[exp.Select, str] | None:
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.ParseError:
        return None
    if not isinstance(tree, exp.Select) or tree.args.get("joins") or tree.args.get("with"):
        return None
    if any(
        isinstance(n, (exp.Subquery, exp.Union, exp.Intersect, exp.Except))
        for n in tree.walk()
        if n is not tree
    ):
        return None
    tables = list(tree.find_all(exp.Table))
    if len(tables) != 1:
        return None
    return tree, tables[0].name


def swap_table(tree: exp.Select, old: str, new: str) -> str:
    """The query over another table (qualified column references follow).

    >>> swap_table(sqlglot.parse_one("SELECT t1.a FROM t1 WHERE t1.b = 1"), "t1", "t2")
    'SELECT t2.a FROM t2 WHERE t2.b = 1'
    """
    copy = tree.copy()
    for table in copy.find_all(exp.Table):
        if table.name == old:
            table.set("this", exp.to_identifier(new))
    for column in copy.find_all(exp.Column):
        if column.table == old:
            column.set("table", exp.to_identifier(new))
    return copy.sql(dialect="sqlite")


def _csv_database(folder: Path, target: Path) -> None:
    connection = sqlite3.connect(target)
    connection.execute("PRAGMA synchronous = OFF")
    try:
        for path in sorted(folder.glob("*.csv")):
            with path.open(newline="", encoding="utf-8") as handle:
                rows = list(csv.reader(handle))
            if not rows:
                continue
            header, body = rows[0], rows[1:]
            kinds = []
            for i in range(len(header)):
                values = [r[i] for r in body if i < len(r) and r[i] != ""]
                kinds.append(_kind(values))
            columns = ", ".join(f'"{h}" {k}' for h, k in zip(header, kinds, strict=True))
            connection.execute(f'CREATE TABLE "{path.stem}" ({columns})')
            marks = ", ".join("?" for _ in header)
            converted = [
                [_convert(v, kinds[i]) if i < len(r) else None for i, v in enumerate(r)]
                for r in body
            ]
            connection.executemany(f'INSERT INTO "{path.stem}" VALUES ({marks})', converted)
        connection.commit()
    finally:
        connection.close()


def _kind(values: list[str]) -> str:
    def all_match(pattern: str) -> bool:
        return bool(values) and all(re.fullmatch(pattern, v.strip()) for v in values)

    if all_match(r"-?\d+"):
        return "INTEGER"
    if all_match(r"-?\d+(\.\d*)?([eE]-?\d+)?"):
        return "REAL"
    return "TEXT"


def _convert(value: str, kind: str):
    if value == "":
        return None
    if kind == "INTEGER":
        return int(value)
    if kind == "REAL":
        return float(value)
    return value


def _database_folders(options: BuildOptions) -> dict[str, Path]:
    roots = [options.source if options.source.is_dir() else options.source.parent]
    if options.databases is not None:
        roots.insert(0, options.databases)
    found: dict[str, Path] = {}
    for root in roots:
        for schema in sorted(root.rglob("schema.json")):
            found.setdefault(schema.parent.name, schema.parent)
    return found


def _register(name: str, folder: Path, workspace: Workspace) -> bool:
    files = (
        [folder / f"{name}.sqlite"] + sorted(folder.glob("*.sqlite")) + sorted(folder.glob("*.db"))
    )
    for path in files:
        if path.is_file():
            workspace.add_file(name, path)
            return True
    if any(folder.glob("*.csv")):
        workspace.add_built(name, lambda target, _f=folder: _csv_database(_f, target))
        return True
    return False


def _columns(workspace: Workspace, database: str) -> dict[str, set[str]]:
    """Table -> lower-cased column names (read with a plain read-only connection)."""
    connection = sqlite3.connect(f"file:{workspace.path(database)}?mode=ro", uri=True)
    try:
        tables = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        ).fetchall()
        out = {}
        for (table,) in tables:
            info = connection.execute(f'PRAGMA table_info("{table}")').fetchall()
            out[table] = {row[1].lower() for row in info}
    finally:
        connection.close()
    return out


def convert(options: BuildOptions, workspace: Workspace) -> Conversion:
    """Convert TACO's data folder (database folders with ``schema.json`` and query files).

    Args:
        options: ``source`` is TACO's data folder (or one database folder); ``databases`` a
            separate folder of database folders when the files live elsewhere.
        workspace: where the databases are registered.
    """
    if not options.source.is_dir():
        raise BuildError(f"--source {options.source} must be TACO's data folder")
    folders = _database_folders(options)
    if not folders:
        raise BuildError(f"no TACO database folder (one with schema.json) under {options.source}")
    query_files = sorted(
        p for p in options.source.rglob("*.json") if p.name != "schema.json" and p.is_file()
    )
    conversion = Conversion(
        corpus="taco",
        oracle="intent",
        description=(
            "AmbiTab-TACO built from TACO: single-table SELECT queries verbalized with the table "
            "(and unstated literal values) withheld; kept when executable, nonempty and some "
            "other table gives a different result."
        ),
        licence=UPSTREAM["licence"],
        upstream=UPSTREAM,
    )
    registered: dict[str, bool] = {}
    columns_of: dict[str, dict[str, set[str]]] = {}
    for path in progress(query_files, desc="taco", enabled=options.show_progress):
        key = path.relative_to(options.source).as_posix()
        try:
            data = json.loads(path.read_text("utf-8"))
        except json.JSONDecodeError as error:
            conversion.drops.append(Drop(key, "unreadable_file", str(error)))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("sql"), str):
            continue  # not a query file
        conversion.inputs[key] = sha256_file(path)
        database = str(data.get("database") or "") or next(
            (p.name for p in path.parents if (p / "schema.json").is_file()), ""
        )
        if database not in registered:
            folder = folders.get(database)
            registered[database] = folder is not None and _register(database, folder, workspace)
        if not registered[database]:
            conversion.drops.append(Drop(key, "database_missing", f"no database {database!r}"))
            continue
        try:
            result = _item(key, data, database, workspace, columns_of)
        except MALFORMED as error:
            result = malformed(key, error)
        (conversion.drops if isinstance(result, Drop) else conversion.items).append(result)
    return conversion


def _item(key, data, database, workspace, columns_of) -> Item | Drop:
    sql = data["sql"].strip().rstrip(";").strip()
    parsed = _single_table(sql)
    if parsed is None:
        return Drop(key, "not_single_table_select", "only single-table SELECT queries are kept")
    tree, table = parsed
    try:
        rows = workspace.execute(database, sql)
    except QueryError as error:
        return Drop(key, "reference_sql_failed", error.message[:300])
    if not rows:
        return Drop(key, "empty_result", "the query returns no rows")
    if database not in columns_of:
        columns_of[database] = _columns(workspace, database)
    schema = columns_of[database]
    used = {c.name.lower() for c in tree.find_all(exp.Column)}
    actual = next((t for t in schema if t.lower() == table.lower()), table)
    alternatives = [t for t in schema if t != actual and used <= schema[t]]
    if not alternatives:
        return Drop(key, "no_table_alternative", "no other table has the columns the query uses")
    rules = compare_for(sql)
    distinct = []
    for other in alternatives:
        try:
            other_rows = workspace.execute(database, swap_table(tree, table, other))
        except QueryError:
            continue
        if not results_match(other_rows, rows, rules):
            distinct.append(other)
    if not distinct:
        return Drop(
            key,
            "no_result_distinct_alternative",
            f"{len(alternatives)} alternatives give the same result",
        )
    stated = " ".join(str(data.get(k) or "") for k in ("natural_language_query",)).lower()
    siblings = [t for t in distinct if table_stem([actual, t]) != "data"]
    stem = table_stem([actual, *(siblings or distinct)])
    request, withheld = verbalize(tree, stem, stated)
    ambiguities = [
        {
            "id": "table",
            "term": f"{stem} table",
            "aliases": ["table", "which table", "data source"],
            "kind": "critical",
            "resolution": f"the table {actual}",
            "response": f"I mean the {actual} table.",
            "sql_snippet": f"FROM {actual}",
        }
    ]
    by_column: dict[str, dict] = {}
    for column, value, condition in withheld:
        entry = by_column.get(column)
        if entry is not None:  # one ambiguity per column: "the given county" twice
            entry["resolution"] += f" or {value!r}"
            entry["response"] = entry["response"].rstrip(".") + f" or {value}."
            entry["sql_snippet"] += f" OR {condition}"
            continue
        by_column[column] = {
            "id": f"value_{slug(column)}",
            "term": f"given {column}",
            "kind": "critical",
            "resolution": f"{column} {value!r}",
            "response": f"I mean the {column} {value}.",
            "sql_snippet": condition,
        }
    ambiguities += list(by_column.values())
    record_id = f"taco-{slug(key.rsplit('.', 1)[0], max_length=80)}"
    record = parse_record(
        {
            "id": record_id,
            "avt_id": record_id,
            "corpus": "taco",
            "split": "all",
            "spec": {"request": request, "database": database},
            "ambiguities": ambiguities,
            "verification": {
                "engine": "sqlite",
                "database": database,
                "reference_sql": sql,
                "compare": rules.model_dump(),
            },
            "source": {
                "kind": "taco",
                "file": key,
                "table": actual,
                "distinct_alternatives": distinct,
                "natural_language_query": data.get("natural_language_query"),
            },
        },
        where=key,
    )
    return Item(key, [record])
