"""TACO-Benchmark, read in its released tree -> AmbiTab-TACO.

Upstream layout (one tree per split, ``us/`` and ``beijing/``)::

    <split>/data/new_schema/<db>_schema.json           {"tables": [{"table_name", "table_comment", ...}]}
    <split>/data/database/<db>/<db>.db                 SQLite (+ <db>.json, a dump; not read)
    <split>/data/new_sql_nl_single/<db>/generated_nl_query_<N>.json
    <split>/data/new_sql_single/<db>/generated_nl_query_<N>.json       (us)
    <split>/data/new_sql_single/<db>/generated_sql_statement_<N>.json  (beijing: no NL fields)
    <split>/data/new_sql_cross/<db1>_<db2>/*.json      cross-database queries

Query fields: ``sql, problem_description, natural_language_query, results`` (0 or rows),
``"sql skeleton", database, tables``. ``--source`` is the checkout (holding the split folders)
or the repository root holding it (``TACO-Benchmark/``), one split folder, or its ``data/``
folder; database names may hold spaces and dots.

The paper's pool is the **US single-table SELECTs**: only the ``us`` split is converted by default
(other splits' files are counted as ``split_not_converted``; ``BuildOptions.extra["taco_splits"]``
lists the splits to convert), cross-database files are counted as ``cross_database``. Each kept
query is verbalized deterministically from its SQL, withholding:

* the **table** (always): the request names only what the candidate tables share ("the
  crashes table" for ``crashes_2019`` / ``crashes_2020``);
* a **literal value** that the query's own natural-language text does not state ("the given
  county" instead of ``'Kent'``); without natural-language fields every literal is stated.

A query is kept when it executes with a nonempty result and another table of its database with
every column it uses gives a different result. Queries whose requests coincide on one database are
the readings of one AVT (their withheld choices differ); a reading whose choices repeat an
earlier one's is dropped (``indistinguishable_reading``). Every malformed file is a counted drop
that names the file and field; nothing upstream aborts the build.

* :func:`convert` - the converter entry point.
* :func:`verbalize` - the request for a parsed query.
* :func:`swap_table` - the query over another table.
* :func:`table_stem` - what candidate table names share.
* :func:`table_aliases` - what tells candidate tables apart (the table ambiguity's aliases);
  :data:`YEAR_WORDS` - the cues of per-year tables. A withheld value's aliases are its column
  and the values the AVT's readings compare it with; every alias list ends in ``clean_aliases``.

Terms are located with ``convert.common.find_term`` (the deterministic oracle's rule) and
checked with ``term_problem``; ``source.term_origin`` says how each was obtained.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ambitab_gym.aliases import clean_aliases, natural_name, reading_aliases
from ambitab_gym.convert.common import (
    MALFORMED,
    BuildError,
    BuildOptions,
    Conversion,
    Drop,
    Item,
    Workspace,
    compare_for,
    find_term,
    is_stop_word,
    plain_text,
    progress,
    sha256_file,
    slug,
    term_problem,
)
from ambitab_gym.records import parse_record
from ambitab_gym.terms import lemma, words
from ambitab_gym.verify.base import QueryError
from ambitab_gym.verify.compare import results_match

__all__ = ["YEAR_WORDS", "convert", "swap_table", "table_aliases", "table_stem", "verbalize"]

UPSTREAM = {
    "name": "TACO",
    "citation": "Deng et al., 2026 (TACO)",
    "licence": "no licence is stated upstream; the built corpus is for the user's own research",
}

#: splits converted by default (the paper's pool)
POOL_SPLITS: tuple[str, ...] = ("us",)
#: single-database query folders, read in this order (a query in both is kept once)
QUERY_FOLDERS: tuple[tuple[str, str], ...] = (
    ("new_sql_nl_single", "nl"),
    ("new_sql_single", "sql"),
)
CROSS_FOLDER = "new_sql_cross"
#: the folder of TACO's repository root that holds the split folders
REPOSITORY_FOLDER = "TACO-Benchmark"
#: record split of each upstream split
SPLIT_NAMES = {"us": "all"}

_ERRORS: tuple[type[BaseException], ...] = (
    *MALFORMED,
    SqlglotError,
    RecursionError,
    sqlite3.Error,
    UnicodeError,
)

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
#: words never used to name a table (articles, prepositions, and table-ish filler)
_FILLER = frozenset(
    [
        "a",
        "an",
        "and",
        "at",
        "by",
        "for",
        "from",
        "in",
        "into",
        "of",
        "on",
        "or",
        "per",
        "the",
        "to",
        "with",
        "table",
        "tables",
        "data",
        "dataset",
        "tbl",
    ]
)


def _words(name: str) -> str:
    return " ".join(re.sub(r"[_\s]+", " ", name).split())


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[_\W\d]+", name.lower()) if len(t) > 1 and t not in _FILLER]


def table_stem(tables: list[str]) -> str:
    """What the names of candidate tables share, as words (distinguishing parts and filler
    words dropped); empty when they share nothing.

    >>> table_stem(["crashes_2019", "crashes_2020"])
    'crashes'
    >>> table_stem(["ny_schools", "nj_schools", "ct_schools"])
    'schools'
    >>> table_stem(["Crash Data 2019", "Crash Data 2020"])
    'crash'
    >>> table_stem(["alpha", "beta"])
    ''
    """
    token_lists = [_tokens(name) for name in tables]
    if not token_lists:
        return ""
    common = set(token_lists[0]).intersection(*map(set, token_lists[1:]))
    return " ".join(dict.fromkeys(t for t in token_lists[0] if t in common))


def _literal_text(node: exp.Expression) -> str:
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else str(node.this)
    return node.sql()


def _column_phrase(node: exp.Expression | None) -> str:
    if node is None:
        return "values"
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
            what = _column_phrase(inner)
            if kind is exp.Count:
                return f"number of {'distinct ' if distinct else ''}{what} values"
            return f"{word} {what}"
    if isinstance(node, exp.Alias):
        return _column_phrase(node.this)
    return node.sql()


def _condition(node: exp.Expression, stated: str | None, withheld: list) -> str:
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
    for kind, op_words in _OPS.items():
        if isinstance(node, kind):
            left, right = node.this, node.expression
            column = _column_phrase(left)
            if isinstance(right, exp.Literal):
                value = _literal_text(right)
                if (
                    stated is not None
                    and isinstance(left, exp.Column)
                    and find_term(stated, value) is None
                ):
                    withheld.append((column, value, node.sql(dialect="sqlite"), op_words))
                    return f"{column} {op_words} the given {column}"
                return f"{column} {op_words} {value}"
            return f"{column} {op_words} {_column_phrase(right)}"
    return node.sql(dialect="sqlite")


def verbalize(
    tree: exp.Select, stem: str, stated: str | None
) -> tuple[str, list[tuple[str, str, str, str]]]:
    """The request for a single-table SELECT, withholding the table and unstated literals.

    Args:
        tree: the parsed query.
        stem: the words naming the candidate tables (see :func:`table_stem`).
        stated: the query's own natural-language text (a literal it does not state is
            withheld); ``None`` when upstream has none: every literal is stated.

    Returns:
        The request and the withheld values ``(column words, literal, condition SQL, operator
        words)``.

    >>> tree = sqlglot.parse_one("SELECT COUNT(*) FROM crashes_2019 WHERE county = 'Kent' AND injuries > 2")
    >>> verbalize(tree, "crashes", "How many crashes with over 2 injuries in Kent?")[0]
    'Using the crashes table, find the number of records where county is Kent and injuries is greater than 2.'
    >>> request, withheld = verbalize(tree, "crashes", "How many crashes had over 2 injuries?")
    >>> request
    'Using the crashes table, find the number of records where county is the given county and injuries is greater than 2.'
    >>> withheld
    [('county', 'Kent', "county = 'Kent'", 'is')]
    >>> verbalize(tree, "crashes", None)[1]
    []
    """
    withheld: list[tuple[str, str, str, str]] = []
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
    return text + ".", withheld


def _single_table(tree: exp.Expression) -> str | None:
    """The table of a single-table SELECT, else None."""
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
    return tables[0].name


def swap_table(tree: exp.Select, old: str, new: str) -> str:
    """The query over another table (qualified column references follow).

    >>> swap_table(sqlglot.parse_one("SELECT t1.a FROM t1 WHERE t1.b = 1"), "t1", "t2")
    'SELECT t2.a FROM t2 WHERE t2.b = 1'
    >>> swap_table(sqlglot.parse_one('SELECT a FROM "Crash Data 2019"'), "Crash Data 2019", "Crash Data 2020")
    'SELECT a FROM "Crash Data 2020"'
    """
    copy = tree.copy()
    for table in copy.find_all(exp.Table):
        if table.name == old:
            table.set("this", exp.to_identifier(new))
    for column in copy.find_all(exp.Column):
        if column.table == old:
            column.set("table", exp.to_identifier(new))
    return copy.sql(dialect="sqlite")


# -- the upstream tree ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Split:
    name: str
    data: Path  # <split>/data


def _splits(source: Path) -> list[_Split]:
    """The split trees under ``--source`` (checkout or the repository root holding it, split
    folder or data folder)."""

    def is_data(folder: Path) -> bool:
        return folder.is_dir() and any(
            (folder / name).is_dir()
            for name in ("database", "new_schema", CROSS_FOLDER, *(f for f, _ in QUERY_FOLDERS))
        )

    if is_data(source / "data"):
        return [_Split(source.name, source / "data")]
    if is_data(source):
        return [_Split(source.parent.name, source)]
    if (source / REPOSITORY_FOLDER).is_dir():  # the repository's root holds the checkout
        return _splits(source / REPOSITORY_FOLDER)
    return [
        _Split(child.name, child / "data")
        for child in sorted(source.iterdir())
        if is_data(child / "data")
    ]


def _database_id(name: str) -> str:
    """A file-safe database name: the upstream name when it is one, else a slug plus a hash.

    >>> _database_id("traffic"), _database_id("Vermont Crash Data... - 96")
    ('traffic', 'vermont_crash_data_96_4aae38da')
    """
    if re.fullmatch(r"[A-Za-z0-9_]+", name):
        return name
    return f"{slug(name, max_length=40)}_{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def _number(name: str) -> str:
    found = re.search(r"(\d+)\.json$", name)
    return found.group(1) if found else slug(name.rsplit(".", 1)[0], max_length=24)


@dataclass
class _Candidate:
    """One kept query, before queries sharing a request are grouped into AVTs."""

    key: str
    split: str
    database: str  # database id
    request: str
    table: str
    tables: list[str]  # the tables the request's table phrase names (the query's first)
    ambiguities: list[dict[str, Any]]
    sql: str
    compare: dict[str, Any]
    source: dict[str, Any] = field(default_factory=dict)
    comments: dict[str, str] = field(default_factory=dict)  # table -> table_comment
    value_columns: dict[str, str] = field(default_factory=dict)  # ambiguity id -> column words

    @property
    def choices(self) -> tuple[tuple[str, str], ...]:
        return tuple((a["id"], a["resolution"]) for a in self.ambiguities)


class _Reader:
    """State of one conversion: registered databases, their columns and table comments."""

    def __init__(self, options: BuildOptions, workspace: Workspace, conversion: Conversion):
        self.options = options
        self.workspace = workspace
        self.conversion = conversion
        self.databases: dict[tuple[str, str], str | None] = {}  # (split, upstream) -> id
        self.columns: dict[str, dict[str, set[str]]] = {}
        self.comments: dict[tuple[str, str], dict[str, str]] = {}
        self.seen_sql: dict[tuple[str, str, str], str] = {}

    def database(self, split: _Split, name: str) -> str | None:
        """The workspace id of an upstream database (registered on first use), else None."""
        key = (split.name, name)
        if key not in self.databases:
            self.databases[key] = self._register(split, name)
        return self.databases[key]

    def _register(self, split: _Split, name: str) -> str | None:
        roots = [split.data / "database" / name]
        if self.options.databases is not None:
            roots.insert(0, self.options.databases / name)
        for folder in roots:
            files = [folder / f"{name}.db", folder / f"{name}.sqlite"]
            if folder.is_dir():
                files += sorted(folder.glob("*.db")) + sorted(folder.glob("*.sqlite"))
            for path in files:
                if path.is_file():
                    ident = _database_id(name)
                    if ident in self.workspace and split.name not in POOL_SPLITS:
                        ident = f"{slug(split.name)}_{ident}"
                    self.workspace.add_file(ident, path)
                    return ident
        return None

    def table_columns(self, database: str) -> dict[str, set[str]]:
        """Table -> lower-cased column names (read with a plain read-only connection)."""
        if database not in self.columns:
            path = self.workspace.path(database)
            connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                tables = connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY name"
                ).fetchall()
                out = {}
                for (table,) in tables:
                    quoted = table.replace('"', '""')
                    info = connection.execute(f'PRAGMA table_info("{quoted}")').fetchall()
                    out[table] = {row[1].lower() for row in info}
            finally:
                connection.close()
            self.columns[database] = out
        return self.columns[database]

    def table_comments(self, split: _Split, name: str) -> dict[str, str]:
        """Table -> its ``table_comment`` from ``new_schema/<db>_schema.json`` (empty if none)."""
        key = (split.name, name)
        if key not in self.comments:
            path = split.data / "new_schema" / f"{name}_schema.json"
            comments: dict[str, str] = {}
            if path.is_file():
                relative = f"{split.name}/data/new_schema/{path.name}"
                try:
                    data = json.loads(path.read_text("utf-8"))
                    self.conversion.inputs[relative] = sha256_file(path)
                    for table in data.get("tables") or []:
                        if isinstance(table, dict) and isinstance(table.get("table_name"), str):
                            comments[table["table_name"]] = str(table.get("table_comment") or "")
                except (*_ERRORS, json.JSONDecodeError) as error:
                    bad = self.conversion.notes.setdefault("unreadable_schema_files", {})
                    bad[relative] = f"{type(error).__name__}: {error}"[:200]
            self.comments[key] = comments
        return self.comments[key]


def _stem(actual: str, distinct: list[str], comments: dict[str, str]) -> tuple[str, str, list[str]]:
    """The words naming the candidate tables, how they were found (``term_origin``) and the
    tables they name (the query's table first)."""
    siblings = [t for t in distinct if table_stem([actual, t])]
    candidates = [actual, *(siblings or distinct)]
    stem = table_stem(candidates)
    if stem:
        return stem, "shared_table_name_words", candidates
    texts = [comments.get(t, "") for t in candidates]
    if all(texts):
        stem = " ".join(table_stem(texts).split()[:2])
        if stem:
            return stem, "shared_table_comment_words", candidates
    return "data", "default_phrase", candidates


def _stated_text(data: dict) -> tuple[str | None, str]:
    for name in ("natural_language_query", "problem_description"):
        value = data.get(name)
        if isinstance(value, str) and value.strip():
            return value, name
    return None, "none"


def _read_query(
    reader: _Reader, split: _Split, folder: str, db_name: str, path: Path, key: str
) -> _Candidate | Drop:
    workspace = reader.workspace
    data = _read_json(path, key, reader.conversion)
    if isinstance(data, Drop):
        return data
    if not isinstance(data, dict):
        return Drop(key, "malformed_item", f"not a JSON object but {type(data).__name__}")
    sql = data.get("sql")
    if not isinstance(sql, str) or not sql.strip():
        what = "missing" if sql is None else "empty" if isinstance(sql, str) else "not a string"
        return Drop(key, "missing_field", f"field 'sql' is {what}")
    if "results" not in data:
        return Drop(key, "missing_field", "field 'results' is missing")
    sql = sql.strip()
    normalized = " ".join(sql.rstrip(";").split())
    first = reader.seen_sql.setdefault((split.name, db_name, normalized), key)
    if first != key:
        return Drop(key, "duplicate_query", f"field 'sql' repeats {first}")
    if "```" in sql:
        return Drop(key, "fenced_sql", "field 'sql' contains a Markdown code fence")
    try:
        statements = [t for t in sqlglot.parse(sql, read="sqlite") if t is not None]
    except SqlglotError as error:
        message = " ".join(plain_text(str(error)).split())  # sqlglot underlines with ANSI codes
        return Drop(key, "unparsable_sql", f"field 'sql': {type(error).__name__}: {message}"[:300])
    if len(statements) != 1:
        return Drop(
            key, "not_single_table_select", f"field 'sql' holds {len(statements)} statements"
        )
    tree = statements[0]
    table = _single_table(tree)
    if table is None:
        return Drop(key, "not_single_table_select", "only single-table SELECT queries are kept")
    results = data["results"]
    if results == 0 or results == []:
        return Drop(key, "upstream_no_result", f"field 'results' is {results!r}")
    if not isinstance(results, list):
        return Drop(key, "malformed_item", f"field 'results' is a {type(results).__name__}")
    database = reader.database(split, db_name)
    if database is None:
        return Drop(key, "database_missing", f"no database/{db_name}/{db_name}.db")
    sql = sql.rstrip(";").strip()
    try:
        rows = workspace.execute(database, sql)
    except QueryError as error:
        return Drop(key, "reference_sql_failed", error.message[:300])
    if not rows:
        return Drop(key, "empty_result", "the query returns no rows")
    schema = reader.table_columns(database)
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
    stated, stated_from = _stated_text(data)
    comments = reader.table_comments(split, db_name)
    stem, stem_origin, named = _stem(actual, distinct, comments)
    request, withheld = verbalize(tree, stem, stated)
    table_term = f"{stem} table"
    ambiguities: list[dict[str, Any]] = [
        {
            "id": "table",
            "term": table_term,
            "kind": "critical",
            "resolution": f"the table {actual}",
            "response": f"I mean the {actual} table.",
            "sql_snippet": f"FROM {exp.to_identifier(actual).sql(dialect='sqlite')}",
        }
    ]
    origins = {"table": stem_origin}
    by_column: dict[str, dict[str, Any]] = {}
    value_columns: dict[str, str] = {}
    for column, value, condition, op_words in withheld:
        entry = by_column.get(column)
        if entry is not None:  # one ambiguity per column: "the given county" twice
            entry["resolution"] += f" or {op_words} {value}"
            entry["response"] = entry["response"].rstrip(".") + f" or {op_words} {value}."
            entry["sql_snippet"] += f" OR {condition}"
            continue
        ident = f"value_{slug(column)}"
        by_column[column] = {
            "id": ident,
            "term": f"given {column}",
            "kind": "critical",
            "resolution": f"{column} {op_words} {value}",
            "response": f"I mean {column} {op_words} {value}.",
            "sql_snippet": condition,
        }
        origins[ident] = "withheld_value_phrase"
        value_columns[ident] = column
    ambiguities += list(by_column.values())
    for ambiguity in ambiguities:
        span = find_term(request, ambiguity["term"])
        if span is None:
            return Drop(key, "term_not_in_request", f"{ambiguity['term']!r} not in {request!r}")
        problem = term_problem(span.phrase)
        if problem is not None:
            return Drop(key, "unusable_term", f"{span.phrase!r} is a {problem}")
        ambiguity["term"] = span.phrase
    return _Candidate(
        key=key,
        split=SPLIT_NAMES.get(split.name, split.name),
        database=database,
        request=request,
        table=actual,
        tables=named,
        ambiguities=ambiguities,
        sql=sql,
        compare=rules.model_dump(),
        comments={t: comments.get(t, "") for t in named},
        value_columns=value_columns,
        source={
            "kind": "taco",
            "split": split.name,
            "folder": folder,
            "file": key,
            "upstream_database": db_name,
            "upstream_tables": data.get("tables"),
            "table": actual,
            "distinct_alternatives": distinct,
            "natural_language_query": data.get("natural_language_query"),
            "stated_from": stated_from,
            "term_origin": origins,
        },
    )


def _read_json(path: Path, key: str, conversion: Conversion) -> Any:
    """A query file's JSON (its SHA-256 recorded as an input), or the drop saying why not."""
    conversion.inputs[key] = sha256_file(path)
    try:
        return json.loads(path.read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        return Drop(key, "unreadable_json", f"{type(error).__name__}: {error}"[:300])


def _query_files(split: _Split) -> list[tuple[str, str, Path, str]]:
    """``(folder, database, path, key)`` of every query file of a split, in reading order."""
    out = []
    for folder in (*(name for name, _ in QUERY_FOLDERS), CROSS_FOLDER):
        root = split.data / folder
        if not root.is_dir():
            continue
        for db_folder in sorted(p for p in root.iterdir() if p.is_dir()):
            for path in sorted(db_folder.glob("*.json")):
                key = f"{split.name}/data/{folder}/{db_folder.name}/{path.name}"
                out.append((folder, db_folder.name, path, key))
    return out


#: what a person asks about per-year tables without naming a year ("Which year?", "The latest?")
YEAR_WORDS: tuple[str, ...] = ("year", "latest", "most recent", "newest", "earliest")
_YEAR = re.compile(r"(?:19|20)\d\d")


def _alias_words(text: str) -> list[str]:
    """The words of a table name or comment in natural form, digits apart ("北京公交", "2019")."""
    return [w for w in re.findall(r"[^\W\d_]+|\d+", natural_name(text)) if len(w) > 1]


def _as_written(name: str) -> str:
    """A table name in natural form; a name with non-Latin letters as written (the matcher
    finds those as written)."""
    return name if any(c.isalpha() and ord(c) > 0x24F for c in name) else natural_name(name)


def table_aliases(tables: list[str], comments: dict[str, str], request: str) -> list[str]:
    """What tells candidate tables apart: the words of their names and ``table_comment``s that
    not every candidate has, table by table, then the names themselves, then - when they differ
    in a year - :data:`YEAR_WORDS`; words the request already uses and filler words ("table",
    "data") left out.

    >>> table_aliases(["crashes_2019", "crashes_2020"], {"crashes_2019": "Crashes in 2019"},
    ...               "Using the crashes table, list the month.")
    ['2019', '2020', 'crashes 2019', 'crashes 2020', 'year', 'latest', 'most recent', 'newest', 'earliest']
    >>> table_aliases(["north_ledger", "south_register"], {}, "Using the data table, list it.")
    ['north', 'ledger', 'south', 'register', 'north ledger', 'south register']
    """
    per_table = [_alias_words(t) + _alias_words(comments.get(t, "")) for t in tables]
    shared = set.intersection(*map(set, per_table)) if per_table else set()
    said = {w.lemma for w in words(request)}
    differing = [
        w
        for found in per_table
        for w in found
        if w not in shared and w not in _FILLER and not is_stop_word(w) and lemma(w) not in said
    ]
    cues = [
        c
        for c in (YEAR_WORDS if any(_YEAR.fullmatch(w) for w in differing) else ())
        if not {w.lemma for w in words(c)} & said
    ]
    return list(dict.fromkeys([*differing, *map(_as_written, tables), *cues]))


def _avt_aliases(kept: list[_Candidate]) -> dict[str, list[str]]:
    """Ambiguity id -> its aliases, shared by the readings of one AVT: for the table, what tells
    the candidate tables apart (:func:`table_aliases`); for a withheld value, the values the
    readings compare with and the column (:func:`~ambitab_gym.aliases.reading_aliases`)."""
    request = kept[0].request
    tables = sorted({t for k in kept for t in k.tables})
    comments = {t: c for k in kept for t, c in k.comments.items()}
    candidates = {"table": table_aliases(tables, comments, request)}
    terms = {a["id"]: a["term"] for k in kept for a in k.ambiguities}
    for ident in terms:
        if ident == "table":
            continue
        snippets = [a["sql_snippet"] for k in kept for a in k.ambiguities if a["id"] == ident]
        column = next(k.value_columns[ident] for k in kept if ident in k.value_columns)
        candidates[ident] = [*reading_aliases(snippets, dialect="sqlite"), column]
    out = {}
    for ident, names in candidates.items():
        others = [n for other, theirs in candidates.items() if other != ident
                  for n in (terms[other], *theirs)]  # fmt: skip
        usable = [n for n in names if term_problem(n) is None]
        out[ident] = clean_aliases(terms[ident], usable, others=others)
    return out


def _record_id(candidate: _Candidate) -> str:
    source = candidate.source
    tag = dict(QUERY_FOLDERS)[source["folder"]]
    digest = hashlib.sha256(candidate.key.encode("utf-8")).hexdigest()[:8]
    name = slug(source["upstream_database"], max_length=32)
    return f"taco-{slug(source['split'])}-{name}-{tag}{_number(candidate.key)}-{digest}"


def _items(candidates: list[_Candidate], conversion: Conversion) -> list[Item]:
    """Queries sharing a request on one database become the readings of one AVT."""
    groups: dict[tuple[str, str, str], list[_Candidate]] = {}
    for candidate in sorted(candidates, key=lambda c: c.key):
        groups.setdefault((candidate.split, candidate.database, candidate.request), []).append(
            candidate
        )
    items = []
    merged = 0
    for members in groups.values():
        kept: list[_Candidate] = []
        for member in members:
            twin = next((k for k in kept if k.choices == member.choices), None)
            if twin is not None:
                conversion.drops.append(
                    Drop(
                        member.key,
                        "indistinguishable_reading",
                        f"same request and withheld choices as {twin.key}",
                    )
                )
                continue
            kept.append(member)
        if len(kept) > 1:
            merged += 1
        aliases = _avt_aliases(kept)
        avt_id = "taco-avt-" + _record_id(kept[0]).removeprefix("taco-")
        records = []
        for member in kept:
            ambiguities = [{**a, "aliases": aliases[a["id"]]} for a in member.ambiguities]
            record_id = _record_id(member)
            records.append(
                parse_record(
                    {
                        "id": record_id,
                        "avt_id": avt_id,
                        "corpus": "taco",
                        "split": member.split,
                        "spec": {"request": member.request, "database": member.database},
                        "ambiguities": ambiguities,
                        "verification": {
                            "engine": "sqlite",
                            "database": member.database,
                            "reference_sql": member.sql,
                            "compare": member.compare,
                        },
                        "source": {**member.source, "avt_readings": len(kept)},
                    },
                    where=member.key,
                )
            )
        items.append(Item(kept[0].key, records))
    conversion.notes["avts_with_several_readings"] = merged
    return items


def convert(options: BuildOptions, workspace: Workspace) -> Conversion:
    """Convert TACO-Benchmark's tree (see the module docstring).

    Args:
        options: ``source`` is the TACO-Benchmark checkout (or the repository root holding
            it), one split folder (``us/``) or its ``data/`` folder; ``databases`` a folder of
            ``<db>/<db>.db`` when the databases live elsewhere; ``extra["taco_splits"]`` the
            splits to convert (default ``["us"]``).
        workspace: where the databases are registered.
    """
    source = options.source
    if not source.is_dir():
        raise BuildError(f"--source {source} must be the TACO-Benchmark checkout or a split folder")
    splits = _splits(source)
    if not splits:
        raise BuildError(
            f"no TACO split under {source}: expected <split>/data/ with database/, new_schema/ "
            "and new_sql_single/ (or point --source at us/ or us/data/)"
        )
    wanted = set(options.extra.get("taco_splits") or POOL_SPLITS)
    conversion = Conversion(
        corpus="taco",
        oracle="intent",
        description=(
            "AmbiTab-TACO built from TACO-Benchmark: US single-table SELECT queries verbalized "
            "with the table (and literal values their own question does not state) withheld; "
            "kept when executable, nonempty and some other table gives a different result."
        ),
        licence=UPSTREAM["licence"],
        upstream=UPSTREAM,
    )
    reader = _Reader(options, workspace, conversion)
    files = [(split, *entry) for split in splits for entry in _query_files(split)]
    candidates: list[_Candidate] = []
    for split, folder, db_name, path, key in progress(
        files, desc="taco", total=len(files), enabled=options.show_progress
    ):
        if folder == CROSS_FOLDER or split.name not in wanted:
            data = _read_json(path, key, conversion)
            if isinstance(data, Drop):
                conversion.drops.append(data)
            elif folder == CROSS_FOLDER:
                conversion.drops.append(
                    Drop(key, "cross_database", "the paper keeps single-database queries")
                )
            else:
                conversion.drops.append(
                    Drop(
                        key,
                        "split_not_converted",
                        f"split {split.name!r} is not in {sorted(wanted)} (extra taco_splits)",
                    )
                )
            continue
        try:
            result = _read_query(reader, split, folder, db_name, path, key)
        except _ERRORS as error:
            result = Drop(key, "malformed_item", f"{type(error).__name__}: {error}"[:300])
        if isinstance(result, Drop):
            conversion.drops.append(result)
        else:
            candidates.append(result)
    conversion.items = _items(candidates, conversion)
    return conversion
