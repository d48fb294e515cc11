"""Write tasks: BIRD-Interact's order of statements and test cases, run on a scratch state.

This module imports nothing from ``ambitab_gym``: the worker process
(:mod:`ambitab_gym.verify.worker`) loads it by path, and the verifier uses its comparison
helpers. It holds:

* :func:`split_statements` - SQL text cut into statements (quotes, ``$tag$`` bodies, nested
  comments; SQLite trigger bodies through ``sqlite3.complete_statement``).
* :func:`first_keyword` - the first keyword of a statement as the server's lexer sees it.
* upstream's comparison helpers, with upstream's behaviour: :func:`remove_comments`,
  :func:`remove_distinct`, :func:`remove_round`, :func:`preprocess_results`,
  :func:`process_decimals`, :func:`results_equal`.
* :class:`StatementError` and :class:`Adapter` - what an engine's scratch connection offers.
* :func:`run_task` - preprocess SQL, the submission, the test cases (or upstream's default
  check), clean-up SQL; answers ``("task", success, reason, detail)``.

Test cases are trusted corpus data (upstream's ``test_case(pred_sqls, sol_sqls, db_name,
conn)``). They run with upstream's helper names bound to the scratch connection, inside the
worker process whose wall-clock limit the parent enforces. Their code, assertion messages and
expected values never reach a verdict.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import json
import math
import re
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "TRANSACTION_WORDS",
    "Adapter",
    "paren_depths",
    "StatementError",
    "first_keyword",
    "preprocess_results",
    "process_decimals",
    "remove_comments",
    "remove_distinct",
    "remove_round",
    "results_equal",
    "run_task",
    "split_statements",
    "upstream_sql",
]

#: First keywords of transaction-control statements, refused in a PostgreSQL scratch session
#: (the whole task is one transaction that is never committed).
TRANSACTION_WORDS = frozenset(
    {"BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE"}
)


# -- lexing ------------------------------------------------------------------------------------


def _skip_noise(sql: str, i: int, nested: bool) -> int:
    """Index of the first character after whitespace and comments from ``i``."""
    n = len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            i = _end_of_block_comment(sql, i, nested)
        else:
            break
    return i


def _end_of_block_comment(sql: str, i: int, nested: bool) -> int:
    depth = 0
    n = len(sql)
    while i < n:
        if sql.startswith("/*", i):
            depth += 1
            i += 2
            if not nested and depth > 1:
                depth = 1
        elif sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def first_keyword(sql: str, *, nested_comments: bool = True) -> str:
    """The first word of a statement, upper-cased, after whitespace and comments.

    PostgreSQL nests block comments, so ``/* /* */ SELECT */ COMMIT`` is a ``COMMIT``.

    >>> first_keyword("  -- note\\n/* a /* b */ c */ commit")
    'COMMIT'
    >>> first_keyword("/* /* */ SELECT */ COMMIT", nested_comments=False)
    'SELECT'
    """
    i = _skip_noise(sql, 0, nested_comments)
    match = re.match(r"[A-Za-z_]+", sql[i:])
    return match.group(0).upper() if match else ""


_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")


def _code_positions(sql: str, nested: bool, quotes: str) -> Iterator[int]:
    """Indices of the characters of ``sql`` that are code: outside comments, string literals
    (``E'...'`` escapes where ``nested``), ``$tag$`` bodies (where ``nested``) and names quoted
    with one of ``quotes`` (``[`` closes with ``]``). The one lexer of this module."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == "/" and sql.startswith("/*", i):
            i = _end_of_block_comment(sql, i, nested)
        elif c == "'":
            escaped = (
                nested
                and i > 0
                and sql[i - 1] in "eE"
                and not (i > 1 and (sql[i - 2].isalnum() or sql[i - 2] in "_$"))
            )
            i += 1
            while i < n:
                if escaped and sql[i] == "\\":
                    i += 2
                    continue
                if sql[i] == "'":
                    if sql.startswith("''", i):
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif c in quotes:
            j = sql.find("]" if c == "[" else c, i + 1)
            i = n if j < 0 else j + 1
        elif (
            c == "$"
            and nested
            and not (i > 0 and (sql[i - 1].isalnum() or sql[i - 1] in "_$"))
            and (match := _DOLLAR.match(sql, i))
        ):
            j = sql.find(match.group(0), match.end())
            i = n if j < 0 else j + len(match.group(0))
        else:
            yield i
            i += 1


def split_statements(sql: str, dialect: str = "postgres") -> list[str]:
    """The statements of ``sql`` (comment-only pieces dropped, trailing ``;`` removed).

    ``dialect`` is ``postgres`` (nested comments, ``$tag$`` bodies, ``E'...'`` escapes) or
    ``sqlite`` (a ``CREATE TRIGGER`` body holds semicolons: pieces are joined until
    ``sqlite3.complete_statement`` says the statement is whole).

    >>> split_statements("UPDATE t SET x = 1; -- done\\nSELECT ';' AS s;")
    ['UPDATE t SET x = 1', "-- done\\nSELECT ';' AS s"]
    >>> split_statements("CREATE FUNCTION f() RETURNS int AS $$ BEGIN RETURN 1; END $$ "
    ...                  "LANGUAGE plpgsql; SELECT f()")[1]
    'SELECT f()'
    >>> split_statements("CREATE TRIGGER g AFTER INSERT ON t BEGIN DELETE FROM t; END; "
    ...                  "SELECT 1", "sqlite")
    ['CREATE TRIGGER g AFTER INSERT ON t BEGIN DELETE FROM t; END', 'SELECT 1']
    """
    nested = dialect == "postgres"
    pieces: list[str] = []
    start = 0
    for i in _code_positions(sql, nested, '"`' if nested else '"`['):
        if sql[i] == ";":
            pieces.append(sql[start:i])
            start = i + 1
    pieces.append(sql[start:])
    if dialect == "sqlite":
        joined: list[str] = []
        buffer = ""
        for piece in pieces:
            buffer = piece if not buffer else buffer + ";" + piece
            if sqlite3.complete_statement(buffer + ";"):
                joined.append(buffer)
                buffer = ""
        if buffer:
            joined.append(buffer)
        pieces = joined
    return [piece.strip() for piece in pieces if _skip_noise(piece, 0, nested) < len(piece)]


def paren_depths(sql: str, dialect: str = "postgres") -> tuple[int, int]:
    """``(lowest, final)`` parenthesis depth of ``sql`` outside strings, quoted names and
    comments (lexed as :func:`split_statements` does).

    A statement wrapped as ``SELECT * FROM (<statement>) AS q`` cannot close the wrapper's
    parenthesis when its lowest depth is 0 and its final depth is 0.

    >>> paren_depths("SELECT (1) AS ')' -- )")
    (0, 0)
    >>> paren_depths("SELECT 1) AS z CROSS JOIN (SELECT 2")
    (-1, 0)
    """
    depth = lowest = 0
    for i in _code_positions(sql, dialect == "postgres", '"'):
        if sql[i] == "(":
            depth += 1
        elif sql[i] == ")":
            depth -= 1
            lowest = min(lowest, depth)
    return lowest, depth


# -- upstream's comparison helpers (BIRD-Interact evaluation/src/eval_bird_interact.py) ----------


def remove_comments(sql_list: list[str]) -> list[str]:
    """Block and line comments removed, blank lines collapsed (upstream's regexes).

    >>> remove_comments(["/* a */ SELECT 1 -- b\\n"])
    ['SELECT 1']
    """
    cleaned = []
    for sql in sql_list:
        no_block = re.sub(r"/\*.*?\*/", "", sql, flags=re.DOTALL)
        no_line = re.sub(r"--.*?(\r\n|\r|\n)", r"\1", no_block)
        no_blank = re.sub(r"\n\s*\n+", "\n", no_line)
        cleaned.append(no_blank.strip())
    return cleaned


def remove_distinct(sql_list: list[str]) -> list[str]:
    """Space-separated ``DISTINCT`` tokens removed (upstream splits on single spaces).

    >>> remove_distinct(["SELECT DISTINCT a FROM t", "SELECT COUNT(DISTINCT a) FROM t"])
    ['SELECT a FROM t', 'SELECT COUNT(DISTINCT a) FROM t']
    """
    return [" ".join(t for t in q.split(" ") if t.lower() != "distinct") for q in sql_list]


def _remove_round_functions(sql: str) -> str:
    def matching_paren(text: str, start: int) -> int:
        depth = 0
        for i in range(start, len(text)):
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
                if depth == 0:
                    return i
        return -1

    def first_arg_end(text: str, start: int) -> int:
        depth = 0
        for i in range(start, len(text)):
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                if depth == 0:
                    return i
                depth -= 1
            elif text[i] == "," and depth == 0:
                return i
        return len(text)

    result = sql
    while True:
        match = re.search(r"ROUND\s*\(", result, re.IGNORECASE)
        if not match:
            break
        open_paren = match.end() - 1
        end_first = first_arg_end(result, open_paren + 1)
        close = matching_paren(result, open_paren)
        if close == -1:
            break
        inner = result[open_paren + 1 : end_first].strip()
        result = result[: match.start()] + inner + result[close + 1 :]
    return result


def remove_round(sql_list: list[str]) -> list[str]:
    """``ROUND(x, n)`` replaced by ``x``, nested ones too.

    >>> remove_round(["SELECT ROUND(ROUND(price, 2), 1) FROM t"])
    ['SELECT price FROM t']
    """
    return [_remove_round_functions(sql) for sql in sql_list]


def upstream_sql(sql_list: list[str]) -> list[str]:
    """What upstream's ``test_case_default`` runs: comments, DISTINCT and ROUND() removed."""
    return remove_round(remove_distinct(remove_comments(sql_list)))


def _round(item: Any, places: int) -> Any:
    if isinstance(item, decimal.Decimal):
        if not item.is_finite():
            return item
        quantizer = decimal.Decimal(1).scaleb(-places)
        try:
            return item.quantize(quantizer, rounding=decimal.ROUND_HALF_UP)
        except decimal.InvalidOperation:
            return item
    if isinstance(item, float):
        return round(item, places) if math.isfinite(item) else item
    if isinstance(item, (list, tuple)):
        return type(item)(_round(x, places) for x in item)
    if isinstance(item, dict):
        return {k: _round(v, places) for k, v in item.items()}
    return item


def process_decimals(results: list, decimal_places: int) -> list[tuple]:
    """Every Decimal (half up) and float of every row rounded to ``decimal_places``.

    >>> process_decimals([(decimal.Decimal("2.345"), 1.005, "x")], 2)
    [(Decimal('2.35'), 1.0, 'x')]
    """
    return [tuple(_round(item, decimal_places) for item in row) for row in results]


def preprocess_results(results: list | None, decimal_places: int = 2) -> list[tuple]:
    """Upstream's normalization: dates as ``YYYY-MM-DD``, numbers rounded (Decimal half up),
    dicts and lists as JSON text with sorted keys.

    >>> preprocess_results([(datetime.date(2024, 5, 1), {"b": 1.234, "a": [1]})])
    [('2024-05-01', '{"a": [1], "b": 1.23}')]
    """
    processed = []
    for row in results or []:
        out = []
        for item in row:
            if isinstance(item, (datetime.date, datetime.datetime)):
                out.append(item.strftime("%Y-%m-%d"))
                continue
            item = _round(item, decimal_places)
            if isinstance(item, (dict, list)):
                out.append(json.dumps(item, sort_keys=True, default=str))
            elif isinstance(item, (bytearray, memoryview)):
                out.append(bytes(item))
            else:
                out.append(item)
        processed.append(tuple(out))
    return processed


def results_equal(
    predicted: list | None, ground: list | None, *, order: bool, decimal_places: int = 2
) -> bool:
    """Upstream's ``ex_base`` comparison of two raw results: normalized, an empty result fails,
    in order when ``order``, else as sets.

    >>> results_equal([(1.004,), (2,)], [(2,), (1.0,)], order=False)
    True
    >>> results_equal([(1,), (2,)], [(2,), (1,)], order=True)
    False
    >>> results_equal([], [], order=False)
    False
    """
    pred = preprocess_results(predicted, decimal_places)
    gold = preprocess_results(ground, decimal_places)
    if not pred or not gold:
        return False
    if order:
        return pred == gold
    return set(pred) == set(gold)


# -- running a task ------------------------------------------------------------------------------


class StatementError(Exception):
    """A statement failed in the scratch state (``category`` is a query error category)."""

    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category
        self.message = message


class Adapter:
    """One engine's scratch connection, as :func:`run_task` uses it.

    Engines subclass it: :meth:`run` executes one statement under the limits and returns its
    rows (None when it returns none); :meth:`check` refuses an agent statement the sandbox does
    not admit; :meth:`split` cuts text into statements.
    """

    dialect = "postgres"
    #: the connection test cases receive as ``conn``
    conn: Any = None

    def split(self, sql: str) -> list[str]:
        return split_statements(sql, self.dialect)

    def check(self, statement: str) -> None:
        """Raise :class:`StatementError` for an agent statement the sandbox refuses."""

    def run(self, statement: str, timeout_s: float) -> list[tuple] | None:
        raise NotImplementedError

    def explain_cost(self, statement: str, timeout_s: float) -> float:
        """The planner's total cost of a statement (PostgreSQL's ``EXPLAIN``); 0 elsewhere."""
        return 0.0

    def savepoint(self) -> Callable[[], None]:
        """Mark the state; the returned callable restores it (upstream's BEGIN ... ROLLBACK)."""
        return lambda: None


def _helpers(adapter: Adapter, timeout_s: float, pred_result: Any) -> dict:
    """Upstream's test-case globals, bound to the scratch connection."""

    def perform_query(query, db_name=None, conn=None, **_ignored):
        rows = None
        for statement in adapter.split(query) if isinstance(query, str) else list(query):
            rows = adapter.run(statement, timeout_s)
        return rows, conn if conn is not None else adapter.conn

    def execute_queries(queries, db_name=None, conn=None, logger=None, section_title="", **_):
        if isinstance(queries, str):
            queries = [queries]
        result, execution_error, timeout_error = None, False, False
        for query in queries:
            try:
                result, _ = perform_query(query, db_name, conn)
            except StatementError as error:
                if error.category == "timeout":
                    timeout_error = True
                else:
                    execution_error = True
                break
        return result, execution_error, timeout_error

    def ex_base(pred_sqls, sol_sqls, db_name=None, conn=None, conditions=None):
        if not pred_sqls or not sol_sqls:
            return 0
        pred, pred_err, pred_to = execute_queries(pred_sqls, db_name, conn)
        gold, gold_err, gold_to = execute_queries(sol_sqls, db_name, conn)
        if pred_err or pred_to or gold_err or gold_to:
            return 0
        order = bool(conditions and conditions.get("order", False))
        return 1 if results_equal(pred, gold, order=order) else 0

    def test_case_default(pred_sqls, sol_sqls, db_name=None, conn=None, conditions=None):
        result = ex_base(upstream_sql(pred_sqls), upstream_sql(sol_sqls), db_name, conn, conditions)
        assert result == 1, f"ex_base returned {result} but expected 1."
        return result

    def performance_compare_by_qep(old_sqls, sol_sqls, db_name=None, conn=None):
        if not old_sqls or not sol_sqls:
            return 0

        def cost(sql_list) -> float:
            restore = adapter.savepoint()
            total = 0.0
            try:
                for sql in sql_list:
                    head = sql.strip().upper()
                    try:
                        if head.startswith(("SELECT", "INSERT", "UPDATE", "DELETE", "WITH")):
                            total += adapter.explain_cost(sql, timeout_s)
                        else:
                            perform_query(sql)
                    except StatementError:
                        pass
            finally:
                restore()
            return total

        return 1 if cost(sol_sqls) < cost(old_sqls) else 0

    def check_sql_function_usage(sqls, required_keywords):
        if not sqls:
            return 0
        combined = " ".join(sql.lower() for sql in sqls)
        return 1 if all(kw.lower() in combined for kw in required_keywords) else 0

    return {
        "__builtins__": __builtins__,
        "execute_queries": execute_queries,
        "perform_query_on_postgresql_databases": perform_query,
        "perform_query_on_sqlite_databases": perform_query,
        "perform_query_on_duckdb_databases": perform_query,
        "ex_base": ex_base,
        "test_case_default": test_case_default,
        "performance_compare_by_qep": performance_compare_by_qep,
        "check_sql_function_usage": check_sql_function_usage,
        "remove_distinct": remove_distinct,
        "remove_comments": remove_comments,
        "remove_round": remove_round,
        "preprocess_results": preprocess_results,
        "process_decimals": process_decimals,
        "process_decimals_recursive": _round,
        "pred_query_result": pred_result,
        "date": datetime.date,
        "datetime": datetime.datetime,
        "Decimal": decimal.Decimal,
        "json": json,
        "math": math,
        "re": re,
    }


def _reply(success: bool, reason: str, detail: str = "") -> tuple:
    return ("task", success, reason, detail[:1_000])


def run_task(adapter: Adapter, task: dict, timeout_s: float) -> tuple:
    """Run one write task on a fresh scratch state; ``("task", success, reason, detail)``.

    ``task`` holds ``preprocess`` (list of SQL texts), ``submission`` (SQL text), ``reference``
    (SQL text), ``tests`` (test-case sources), ``cleanup`` (list), ``db_name``, ``conditions``
    (dict or None) and ``trusted_submission`` (the reference run as the submission: its
    failures are the corpus's, reported as ``reference_error``).
    """
    trusted = bool(task.get("trusted_submission"))
    for text in task.get("preprocess") or ():
        for statement in adapter.split(text):
            try:
                adapter.run(statement, timeout_s)
            except StatementError as error:
                # Upstream logs and carries on; a broken preprocess statement breaks the task.
                return _reply(
                    False,
                    "reference_error",
                    f"this record's preprocess SQL fails ({error.category}); the corpus is broken",
                )
    pred_sqls = adapter.split(task["submission"])
    if not pred_sqls:
        return _reply(False, "no_sql", "no SQL statement was submitted")
    pred_result = None
    for number, statement in enumerate(pred_sqls, start=1):
        try:
            if not trusted:
                adapter.check(statement)
            pred_result = adapter.run(statement, timeout_s)
        except StatementError as error:
            where = f" (statement {number} of {len(pred_sqls)})" if len(pred_sqls) > 1 else ""
            if trusted:
                return _reply(False, "reference_error", f"{error.category}: {error.message}")
            return _reply(False, error.category, error.message + where)
    sol_sqls = adapter.split(task["reference"])
    db_name = task.get("db_name", "")
    tests = [t for t in task.get("tests") or () if str(t).strip()]
    failed = 0
    if tests:
        for source in tests:
            scope = _helpers(adapter, timeout_s, pred_result)
            try:
                exec(compile(source, "<test case>", "exec"), scope)
                scope["test_case"](list(pred_sqls), list(sol_sqls), db_name, adapter.conn)
            except Exception:  # noqa: BLE001 - a failed assertion or a broken expectation
                failed += 1
    else:
        scope = _helpers(adapter, timeout_s, pred_result)
        try:
            scope["test_case_default"](
                pred_sqls, sol_sqls, db_name, adapter.conn, task.get("conditions")
            )
        except Exception:  # noqa: BLE001
            failed = 1
    for text in task.get("cleanup") or ():
        for statement in adapter.split(text):
            # upstream ignores clean-up failures; the scratch state is discarded anyway
            with contextlib.suppress(StatementError):
                adapter.run(statement, timeout_s)
    if failed:
        count = len(tests) or 1
        return _reply(
            False,
            "mismatch",
            f"the submission did not pass this task's check ({failed} of {count} "
            f"test{'s' if count != 1 else ''} failed)",
        )
    return _reply(True, "match", "")
