"""SQL text helpers shared by the oracle side and the env: clause segments, normalization, and
the detection and redaction of SQL in oracle answers.

* :func:`sql_segments` - the reference SQL cut into clause segments with sqlglot.
* :func:`normalize_sql`, :func:`match_segment` - compare SQL text after sqlglot tokenization
  (the LLM matcher's ``unlabeled`` routes must copy a segment).
* :func:`answer_reveals_sql` - whether an oracle answer shows SQL in code shape or a fragment of
  the reference query (the env's privileged per-turn flag).
* :func:`redact_sql` - the answer with its SQL cut out (the response guard).

This module reads only the text it is given: it imports no policy, prompt or env, so the env can
flag answers without loading the oracle's prompts (:mod:`ambitab_gym.oracles.access`
re-exports it).
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

import sqlglot
from sqlglot import exp

__all__ = [
    "MIN_FRAGMENT_TOKENS",
    "MIN_REVEALED_SEGMENT",
    "answer_reveals_sql",
    "match_segment",
    "normalize_sql",
    "redact_sql",
    "sql_segments",
]


def _arg(node: exp.Expression, *names: str) -> Any:
    for name in names:  # sqlglot renamed "from"/"with" to "from_"/"with_"
        value = node.args.get(name)
        if value:
            return value
    return None


def _cut(node: exp.Expression, dialect: str, out: list[str]) -> None:
    if isinstance(node, exp.SetOperation):
        _cut(node.left, dialect, out)
        kind = type(node).__name__.upper()
        out.append(f"{kind}{' ALL' if not node.args.get('distinct', True) else ''}")
        _cut(node.right, dialect, out)
        for name in ("order", "limit", "offset"):
            if node.args.get(name):
                out.append(node.args[name].sql(dialect=dialect))
        return
    if not isinstance(node, exp.Select):
        out.append(node.sql(dialect=dialect))
        return
    with_ = _arg(node, "with_", "with")
    if with_ is not None:
        for cte in with_.expressions:
            out.append(f"WITH {cte.alias} AS ({cte.this.sql(dialect=dialect)})")
    distinct = "DISTINCT " if node.args.get("distinct") else ""
    columns = ", ".join(e.sql(dialect=dialect) for e in node.expressions)
    out.append(f"SELECT {distinct}{columns}")
    from_ = _arg(node, "from_", "from")
    if from_ is not None:
        out.append(from_.sql(dialect=dialect))
    for join in node.args.get("joins") or []:
        out.append(join.sql(dialect=dialect))
    for name in ("where", "group", "having", "qualify", "order", "limit", "offset"):
        if node.args.get(name):
            out.append(node.args[name].sql(dialect=dialect))


def sql_segments(sql: str, dialect: str = "sqlite") -> tuple[str, ...]:
    """Cut SQL into clause segments: each CTE, SELECT list, FROM, each JOIN, WHERE, GROUP BY,
    HAVING, ORDER BY, LIMIT, OFFSET (set operations: both sides and the operator).

    Args:
        sql: the reference SQL.
        dialect: its sqlglot dialect (``sqlite``, ``postgres``, ``duckdb``).

    Returns:
        The segments in clause order; the whole statement when sqlglot cannot parse it.

    Example:
        >>> sql_segments("SELECT name FROM staff s JOIN dept d ON s.d = d.id "
        ...              "WHERE salary > 10 ORDER BY salary DESC LIMIT 3")
        ('SELECT name', 'FROM staff AS s', 'JOIN dept AS d ON s.d = d.id', 'WHERE salary > 10', 'ORDER BY salary DESC', 'LIMIT 3')
    """
    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        trees = []
    if not trees:
        return (sql.strip(),)
    out: list[str] = []
    for tree in trees:
        _cut(tree, dialect, out)
    return tuple(dict.fromkeys(s for s in out if s.strip()))


# -- SQL in plain sight: segment matching and leak detection ------------------------------

_AS = {"as"}


def normalize_sql(text: str, dialect: str = "sqlite") -> str | None:
    """SQL text as a canonical token string (keywords and names case-folded, ``AS`` dropped,
    string literals kept); None when sqlglot cannot tokenize it.

    >>> normalize_sql("where  Salary>10") == normalize_sql("WHERE salary > 10")
    True
    >>> normalize_sql("FROM staff s") == normalize_sql("FROM staff AS s")
    True
    """
    try:
        tokens = sqlglot.tokenize(text, read=dialect)
    except (sqlglot.errors.TokenError, sqlglot.errors.ParseError, ValueError):
        return None
    out = []
    for token in tokens:
        if token.token_type == sqlglot.tokens.TokenType.STRING:
            out.append(repr(token.text))
        elif token.text.casefold() not in _AS:
            out.append(token.text.casefold())
    return " ".join(out) or None


#: The fewest tokens a copied part of a clause segment needs to count as a segment.
MIN_FRAGMENT_TOKENS = 3


def match_segment(argument: str, segments: tuple[str, ...], dialect: str = "sqlite") -> str | None:
    """The segment of ``segments`` an ``unlabeled(...)`` argument copies, compared after
    :func:`normalize_sql`: the whole segment, or a run of at least :data:`MIN_FRAGMENT_TOKENS`
    consecutive tokens of it (``SUM(amount)`` out of ``ORDER BY SUM(amount) DESC``). None when
    it copies none of them: SQL that is not in the reference query, placeholders, echoes.

    >>> segs = sql_segments("SELECT name FROM staff s WHERE salary > 10 ORDER BY SUM(x) DESC")
    >>> match_segment("where salary>10", segs), match_segment("sum(x)", segs)
    ('WHERE salary > 10', 'ORDER BY SUM(x) DESC')
    >>> match_segment("<sql segment>", segs), match_segment("WHERE salary > 99", segs)
    (None, None)
    """
    wanted = _normalized(argument.strip().rstrip(";"), dialect)
    if not wanted:
        return None
    fragment = len(wanted.split()) >= MIN_FRAGMENT_TOKENS
    for segment in segments:
        normalized = _normalized(segment, dialect) or ""
        if segment == argument or normalized == wanted:
            return segment
    if fragment:
        for segment in segments:
            if f" {wanted} " in f" {_normalized(segment, dialect) or ''} ":
                return segment
    return None


# normalize_sql memoized for match_segment: every routed question of an episode normalizes the
# same reference segments again (a pure function; bounded, thread-safe)
_normalized = functools.lru_cache(maxsize=4096)(normalize_sql)


_SQL_SHAPE = re.compile(
    # a SELECT list in code shape (``*``, a call, a comma list, a qualified name) before FROM
    r"\bselect\s+(?:distinct\s+)?(?:\*|[\w.]+\s*\(|[\w.]+\s*,|\w+\.\w+)[\s\S]{0,400}?\bfrom\b"
    # a clause keyword followed closely by an operator, a qualified name, an aggregate, ASC/DESC
    r"|\b(?:where|group\s+by|order\s+by|having|join|on)\s+[^.!?;\n]{0,60}?"
    r"(?:[=<>]|\w\.\w|\b(?:count|sum|avg|min|max)\s*\(|\b(?:desc|asc)\b)",
    re.IGNORECASE,
)
# keywords written as code: upper-case SELECT ... FROM, LIMIT n
_SQL_CODE = re.compile(r"\bSELECT\b[\s\S]{1,400}?\bFROM\b|\bLIMIT\s+\d+\b")
_SEGMENT_CACHE: dict[tuple[str, str], tuple[str, ...]] = {}
_SEGMENT_LOCK = threading.Lock()

#: The shortest reference-SQL segment (in normalized characters) whose appearance in an answer
#: counts as revealing the reference query.
MIN_REVEALED_SEGMENT = 12


def _reference_segments(sql: str, dialect: str) -> tuple[str, ...]:
    key = (sql, dialect)
    with _SEGMENT_LOCK:
        cached = _SEGMENT_CACHE.get(key)
    if cached is None:
        normalized = (normalize_sql(s, dialect) for s in sql_segments(sql, dialect))
        cached = tuple(n for n in normalized if n and len(n) >= MIN_REVEALED_SEGMENT)
        with _SEGMENT_LOCK:
            if len(_SEGMENT_CACHE) > 4096:
                _SEGMENT_CACHE.clear()
            _SEGMENT_CACHE[key] = cached
    return cached


def answer_reveals_sql(
    answer: str, reference_sql: str | None = None, dialect: str = "sqlite"
) -> bool:
    """Whether an oracle answer shows SQL: code-shaped SQL (``SELECT ... FROM``, or a clause
    keyword followed by a comparison, ordering or aggregate), or a clause segment of the
    reference query at least :data:`MIN_REVEALED_SEGMENT` normalized characters long.

    Cheap for plain answers: nothing is tokenized unless a SQL keyword is present.

    >>> answer_reveals_sql("The five customers who spent the most.")
    False
    >>> answer_reveals_sql("SELECT name FROM staff ORDER BY salary DESC LIMIT 3")
    True
    >>> answer_reveals_sql("I meant where salary > 10 only", "SELECT name FROM staff WHERE salary > 10")
    True
    """
    if not answer or not _SQL_KEYWORD.search(answer):
        return False
    if _SQL_SHAPE.search(answer) or _SQL_CODE.search(answer):
        return True
    if reference_sql:
        text = _normalized(answer, dialect)  # the same canned answers recur (the refusal)
        if text:
            padded = f" {text} "
            return any(f" {seg} " in padded for seg in _reference_segments(reference_sql, dialect))
    return False


_SQL_KEYWORD = re.compile(
    r"\b(?:select|from|where|group\s+by|order\s+by|having|limit|join|with)\b", re.IGNORECASE
)
_REDACTED = "[SQL removed by the response guard]"


def redact_sql(answer: str) -> str:
    """The answer without its SQL: fenced code blocks, and from the first SQL-shaped clause to
    the end of its sentence, become a redaction marker.

    >>> redact_sql("Use SELECT name FROM staff WHERE salary > 10. Thanks.")
    'Use [SQL removed by the response guard] Thanks.'
    """
    text = re.sub(r"```[\s\S]*?(?:```|$)", _REDACTED, answer)
    pattern = re.compile(
        r"(?:\bwith\b\s+\w+\s+as\s*\(|\bselect\b|\b(?:where|group\s+by|order\s+by|having|limit|join)\b)"
        r"[\s\S]*?(?:;|\.(?=\s|$)|$)",
        re.IGNORECASE,
    )
    out = pattern.sub(_REDACTED, text)
    return out if out.strip() else _REDACTED
