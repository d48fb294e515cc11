"""Non-privileged text utilities shared by both sides of the trust boundary.

Everything here reads text an agent may see (model replies, dialogue answers, the public
schema); nothing imports a module of the package, so any unit may use it without an import
cycle or a trust-boundary crossing.

* :func:`strip_thinking` - drop ``<think>...</think>`` reasoning from a model reply.
* :func:`find_json_object` - the first JSON object in a reply (bare, fenced or embedded).
* :func:`json_loads` - ``json.loads``, read by orjson when it is installed (the same value).
* :class:`CodeBlock` and :func:`code_blocks` - the Markdown code fences of a text.
* :class:`ReplyTemplate` - a prompt's reply format and its ``<...>`` placeholders: whether a
  reply copied a placeholder instead of filling it in (every LLM role's reader asks it).
* :func:`extract_sql` - the one SQL-from-text reader: model replies (the LLM solver, the
  converters' model hooks) and dialogue answers (the leakage probes' solver).
* :class:`SchemaNames`, :func:`schema_names` and :func:`schema_identifiers` - the table and
  column names that the ``CREATE`` statements of a schema declare, read with sqlglot by one
  parser (the question menu, the schema probe and the schema-word oracle).

Readers never raise on model text; they return ``None`` (or nothing) instead.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlglot
from sqlglot import exp

try:  # optional (the llm-fast extra): a faster JSON reader than the standard library's
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None

__all__ = [
    "CodeBlock",
    "PLACEHOLDER",
    "ReplyTemplate",
    "SchemaNames",
    "code_blocks",
    "extract_sql",
    "REASONING_TAGS",
    "find_json_object",
    "json_loads",
    "schema_identifiers",
    "schema_names",
    "strip_thinking",
    "unfence",
]

#: Tags of reasoning blocks: ``<think>`` (Qwen, DeepSeek-R1), ``<thinking>``, ``<reasoning>``.
REASONING_TAGS = ("think", "thinking", "reasoning")
_TAG_NAMES = "|".join(REASONING_TAGS)
_THINK_BLOCK = re.compile(rf"<(?:{_TAG_NAMES})>.*?</(?:{_TAG_NAMES})>", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(rf"</(?:{_TAG_NAMES})>", re.IGNORECASE)
_THINK_OPEN = re.compile(rf"<(?:{_TAG_NAMES})>", re.IGNORECASE)


def strip_thinking(text: str) -> str:
    """Remove reasoning blocks (``<think>``, ``<thinking>``, ``<reasoning>``, any case):
    closed blocks, a dangling ``...</think>`` prefix (when the chat template opened the block)
    and an unclosed ``<think>...`` tail (a reply cut off while reasoning leaves nothing).

    Idempotent, and linear in the length of the text (a hostile text of many unclosed tags
    is no slower than any other).

    >>> strip_thinking("<think>hmm, maybe 3</think>\\n\\nThree.")
    'Three.'
    >>> strip_thinking("reasoning the template opened</think>Answer")
    'Answer'
    >>> strip_thinking("Answer <think>never closed")
    'Answer'
    >>> strip_thinking("<reasoning>The user wants 2023.</reasoning> Which region?")
    'Which region?'
    """
    if "<" not in text:  # no tag at all: nothing to remove (the common reply)
        return text.strip()
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        # every open tag before the last close has a close after it: the non-greedy block
        # search scans each stretch once (after the last close it would rescan to the end)
        end = closes[-1].end()
        text = _THINK_BLOCK.sub("", text[:end]) + text[end:]
        closes = list(_THINK_CLOSE.finditer(text))
        if closes:
            text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.strip()


# -- code fences ---------------------------------------------------------------------------------

#: A Markdown code fence: ``` ```...``` ``` or ``~~~...~~~``.
_FENCE = re.compile(r"(```|~~~)(.*?)\1", re.DOTALL)
#: A text that is one fence and nothing else (surrounding whitespace aside).
_WHOLE_FENCE = re.compile(r"\A\s*(```|~~~)(.*?)\1\s*\Z", re.DOTALL)
_LABEL = re.compile(r"[A-Za-z0-9_+-]*")
#: Fence labels that mark SQL.
SQL_LABELS = frozenset({"sql", "sqlite", "postgres", "postgresql", "duckdb", "psql", "plpgsql"})
_INLINE_LABELS = SQL_LABELS | {"json"}


@dataclass(frozen=True)
class CodeBlock:
    """One Markdown code fence.

    Attributes:
        label: its language label, lower case ("" when it has none).
        body: its content, stripped.

    >>> code_blocks("Run ```sql\\nSELECT 1\\n``` then ```SELECT 2```")
    [CodeBlock(label='sql', body='SELECT 1'), CodeBlock(label='', body='SELECT 2')]
    """

    label: str
    body: str

    @property
    def is_sql(self) -> bool:
        """Labelled as SQL, or unlabelled and holding a query."""
        if self.label:
            return self.label in SQL_LABELS and bool(self.body)
        return _SQL_START.search(self.body) is not None


def code_blocks(text: str) -> list[CodeBlock]:
    """The code fences of ``text`` in order: ``` ```lang\\n...``` ```, ``` ```...``` ```, the inline
    ``` ```sql SELECT 1``` ```, or the same with ``~~~``. Labels are lower case (``SQL`` is
    ``sql``).

    >>> code_blocks("```json {\\"a\\": 1}```")
    [CodeBlock(label='json', body='{"a": 1}')]
    >>> code_blocks("~~~SQL\\r\\nSELECT 1\\r\\n~~~")
    [CodeBlock(label='sql', body='SELECT 1')]
    """
    return list(_blocks(text))


def _blocks(text: str) -> Iterator[CodeBlock]:
    """:func:`code_blocks`, one at a time (a reader that stops early reads no further)."""
    for found in _FENCE.finditer(text):
        yield _block(found.group(2))


def _block(inner: str) -> CodeBlock:
    head, newline, rest = inner.partition("\n")
    if newline and _LABEL.fullmatch(head.strip()):
        return CodeBlock(head.strip().lower(), rest.strip())
    word, _, after = inner.strip().partition(" ")
    if word.lower() in _INLINE_LABELS and after.strip():
        return CodeBlock(word.lower(), after.strip())
    return CodeBlock("", inner.strip())


def unfence(text: str) -> str:
    """The body of a text that is one code fence and nothing else (its label dropped); any
    other text unchanged.

    >>> unfence("```sql\\nSELECT 1\\n```"), unfence("~~~\\nWhich year?\\n~~~")
    ('SELECT 1', 'Which year?')
    >>> unfence("Run ```SELECT 1``` now")
    'Run ```SELECT 1``` now'
    """
    found = _WHOLE_FENCE.match(text)
    if found is None or found.group(1) in found.group(2):
        return text  # not one fence (two fences side by side hold the marker inside)
    return _block(found.group(2)).body


# -- JSON ------------------------------------------------------------------------------------------


#: Longest candidate read as a Python literal (single-quoted dicts); longer ones as JSON only.
_MAX_LITERAL_CHARS = 20_000
#: Longest text searched for a JSON object inside prose, and how many ``{`` are tried there.
_MAX_EMBEDDED_CHARS = 100_000
_MAX_EMBEDDED_TRIES = 64
#: How many fenced blocks that look like an object (``{...}``) are decoded at most.
_MAX_FENCED_TRIES = 64


# what json.loads(..., parse_int=str, parse_float=str, parse_constant=str) builds on every call,
# built once (a decoder holds no state between calls)
_LITERAL_NUMBERS = json.JSONDecoder(parse_int=str, parse_float=str, parse_constant=str)


def _holds(value: Any, kinds: tuple[type, ...]) -> bool:
    """Whether a decoded JSON value holds one of ``kinds`` anywhere (iteratively: no recursion
    limit)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind in kinds:
            return True
    return False


def json_loads(text: str, *, literal_numbers: bool = False) -> Any:
    """``json.loads(text)``: the same value and the same errors, read by orjson when it is
    installed. orjson's reading is kept only where it cannot differ from the standard
    library's: text orjson rejects (``NaN``, ``1e400``, escaped lone surrogates, integers past
    64 bits that it turns into floats, ...) and any value holding a float are read again by
    ``json.loads``.

    Args:
        text: the JSON text.
        literal_numbers: numbers keep their literal text (``parse_int``, ``parse_float`` and
            ``parse_constant`` are ``str``): a 5,000-digit integer or ``1e400`` is never
            converted; orjson's reading is then kept only for values holding no number.

    Returns:
        The decoded value.

    >>> json_loads('{"type": "done", "output": null, "n": [1, 2]}')
    {'type': 'done', 'output': None, 'n': [1, 2]}
    >>> json_loads("123456789012345678901234567890"), json_loads("1e400")
    (123456789012345678901234567890, inf)
    >>> json_loads('{"n": [1, 2.50], "x": "y"}', literal_numbers=True)
    {'n': ['1', '2.50'], 'x': 'y'}
    """
    if orjson is not None:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
        else:
            if not _holds(value, (int, float) if literal_numbers else (float,)):
                return value
    return _LITERAL_NUMBERS.decode(text) if literal_numbers else json.loads(text)


def _loads(text: str) -> Any:
    try:
        return json_loads(text)
    except RecursionError:
        return None
    except (json.JSONDecodeError, ValueError):
        pass
    if len(text) > _MAX_LITERAL_CHARS:
        return None
    try:  # single-quoted dicts, True/None: models write Python now and then
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def find_json_object(text: str) -> dict | None:
    """The first JSON object in ``text``: the whole text, a fenced block, or embedded in prose.

    >>> find_json_object('Sure! ```json\\n{"type": "done", "output": null}\\n``` Bye.')
    {'type': 'done', 'output': None}
    >>> find_json_object('I think {"answer": "three"} is right')
    {'answer': 'three'}
    >>> find_json_object("no object here") is None
    True

    Bounded on hostile text: at most 64 fenced blocks that look like an object are decoded
    (every decoding that fails tries a Python literal too), prose longer than 100,000
    characters is not searched, and at most 64 ``{`` inside prose are tried.
    """
    if not isinstance(text, str):
        return None
    whole = text.strip()
    if whole.startswith("{"):  # the whole text first: fences are looked for only when needed
        value = _loads(whole)
        if isinstance(value, dict):
            return value
    tries = 0
    for found in _FENCE.finditer(text):
        if "{" not in found.group(2):
            continue
        body = _block(found.group(2)).body
        if body.startswith("{") and body.endswith("}"):  # nothing else decodes to an object
            value = _loads(body)
            if isinstance(value, dict):
                return value
            tries += 1
            if tries >= _MAX_FENCED_TRIES:
                break
    if len(text) > _MAX_EMBEDDED_CHARS:
        return None
    decoder = json.JSONDecoder()
    for tries, match in enumerate(re.finditer(r"\{", text)):
        if tries >= _MAX_EMBEDDED_TRIES:
            break
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (json.JSONDecodeError, RecursionError, ValueError):
            continue
        if isinstance(value, dict):
            return value
    return None


# -- reply formats and their placeholders -----------------------------------------------------

#: An angle-bracket slot of a prompt's reply format, such as ``<your one question>``.
PLACEHOLDER = re.compile(r"<([^<>\n]+)>")
_WORD = re.compile(r"\w+")


def _words(text: str) -> tuple[str, ...]:
    """The words of ``text``, case folded: brackets, quotes, punctuation and spacing dropped."""
    return tuple(_WORD.findall(text.casefold()))


class ReplyTemplate:
    """The reply format a prompt shows a model, and the placeholders (``<...>`` slots) in it.

    A prompt writes ``text`` into its messages and its reply reader asks :meth:`echoes`, so the
    placeholders the reader rejects are the ones the prompt shows (one source, no second list).
    Small models copy the format instead of filling it in: ``{"output": "<your one question>"}``.

    Attributes:
        text: the format as the prompt shows it.
        placeholders: its ``<...>`` slots, in order, each once.

    Example:
        >>> fmt = ReplyTemplate('to ask: {"type": "clarification", "output": "<your one question>"}')
        >>> fmt.placeholders
        ('<your one question>',)
        >>> echoes = ("<your one question>", "  Your One QUESTION ", "<your one question>?",
        ...           "Question: <your one question>", '"<Your one question>"')
        >>> [fmt.echoes(t) for t in echoes]
        [True, True, True, True, True]
        >>> [fmt.echoes(t) for t in ("Which year? <your one question>", "Is x <= 5 a question?", "")]
        [False, False, False]
        >>> fmt.holds_placeholder("Which year? < your  one question >"), fmt.holds_placeholder("<b>")
        (True, False)
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.placeholders = tuple(dict.fromkeys(m.group(0) for m in PLACEHOLDER.finditer(text)))
        slots = {_words(p) for p in self.placeholders} - {()}
        self._slots = sorted(slots, key=len, reverse=True)  # the longest slot first
        self._words = frozenset(_words(text))

    def __repr__(self) -> str:
        return f"ReplyTemplate({self.text!r})"

    def echoes(self, value: str) -> bool:
        """Whether ``value`` copies the format instead of filling it in: once every placeholder
        in it is removed (compared as words: case, whitespace, brackets, quotes and punctuation
        ignored), nothing is left but words of the format itself (none, ``Question:``, ...).

        A value that holds no placeholder is no echo; nor is an empty one (readers treat that
        as empty already).
        """
        words = _words(value)
        found = False
        rest: list[str] = []
        i = 0
        while i < len(words):
            for slot in self._slots:
                if words[i : i + len(slot)] == slot:
                    found = True
                    i += len(slot)
                    break
            else:
                rest.append(words[i])
                i += 1
        return found and all(word in self._words for word in rest)

    def holds_placeholder(self, value: str) -> bool:
        """Whether ``value`` holds one of the placeholders in angle brackets anywhere (a
        reader that wants a verbatim copy of something else, such as an SQL segment, rejects
        that too)."""
        slots = set(self._slots)
        return any(_words(m.group(1)) in slots for m in PLACEHOLDER.finditer(value))


# -- SQL in text -----------------------------------------------------------------------------------

#: (A CTE's column list holds no parenthesis: ``[^()]*`` stops at the next one, so a search
#: reads each stretch of text a bounded number of times; ``[^)]*`` read on from every
#: ``WITH x (`` to the end of a text without ``)``, quadratic in the text.)
_SQL_START = re.compile(r"(?is)\b(WITH\s+\w+(?:\s*\([^()]*\))?\s+AS\s*\(|SELECT\b)")
#: The first word of a text that is an SQL statement already: a keyword in upper or lower case
#: (title case is prose: "With the data above, ..."), after comments and opening parentheses.
_STATEMENT_WORDS = (
    "select|with|values|explain|pragma|insert|update|delete|replace|create|drop|alter|"
    "attach|detach|from|table|show|describe|summarize|pivot|unpivot|copy|set|call|begin|"
    "commit|rollback|vacuum|analyze|reindex|truncate|merge|grant|revoke|load|install"
)
#: What may come before a statement's first word: whitespace, comments, opening parentheses.
#: Matched on its own (nothing follows it in the pattern, so it never backtracks: a block
#: comment ends at its first ``*/``); one pattern with the keyword after it backtracked into
#: the ways of splitting ``/*//*/...`` into comments, exponentially in the text's length.
_LEAD = re.compile(r"(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/|\(+)*", re.DOTALL)
_STATEMENT = re.compile(rf"(?:(?:{_STATEMENT_WORDS.upper()})|(?:{_STATEMENT_WORDS}))(?![\w'])")
_STRICT_START = re.compile(r"(?<![\w`])((?:SELECT|WITH)\s.*)", re.DOTALL)  # upper case only
_JSON_SQL_KEYS = ("output", "sql", "query", "final_sql")


def _is_statement(text: str) -> bool:
    """Whether ``text`` is an SQL statement as it stands (see :func:`extract_sql`, rule 0)."""
    if "```" in text or "~~~" in text:
        return False
    return _STATEMENT.match(text, _LEAD.match(text).end()) is not None


def _parses_as_query(candidate: str) -> bool:
    try:
        return isinstance(sqlglot.parse_one(candidate), exp.Query)
    except sqlglot.errors.SqlglotError:
        return False


def extract_sql(text: str, *, last: bool = False, strict: bool = False) -> str | None:
    """The SQL in a text; None when it holds none.

    Read in this order, after dropping ``<think>`` blocks:

    0. a text that is an SQL statement already (it starts with an SQL keyword in upper or lower
       case, after comments and opening parentheses, and holds no code fence) is the SQL as
       it is - ``INSERT ... SELECT``, ``WITH RECURSIVE``, ``(SELECT ...) UNION (...)`` or a
       JSON string literal inside the query stay whole; skipped when ``strict``;
    1. a JSON object's ``output``/``sql``/``query``/``final_sql`` string (a fenced value is
       unwrapped) - the solver's reply format; skipped when ``strict``;
    2. a code fence labelled as SQL, or unlabelled and holding a query (the first, or the
       last with ``last=True``);
    3. bare SQL: from the first ``SELECT``/``WITH ... AS (`` to the end of the text. With
       ``strict`` (text that is prose, such as an oracle's answer) only upper-case keywords
       count and the rest must parse as a query, so "customers with ..." is no SQL.

    Args:
        text: a model reply or a dialogue answer.
        last: prefer the last fence (dialogue answers and converter replies end with the
            final version) over the first (the solver's reply).
        strict: the text is prose that may contain SQL, not a reply meant to be SQL.

    Examples:
        >>> extract_sql('{"reasoning": "...", "type": "final_sql", "output": "SELECT 1"}')
        'SELECT 1'
        >>> extract_sql("<think>SELECT 0</think>Here it is:\\n```sql\\nSELECT name FROM t;\\n```")
        'SELECT name FROM t;'
        >>> extract_sql("The answer: select a FROM b WHERE c = 1")
        'select a FROM b WHERE c = 1'
        >>> extract_sql("x ```sql\\nSELECT 1\\n``` y ```SELECT 2```", last=True)
        'SELECT 2'
        >>> extract_sql("Customers with select orders, WITH care.", strict=True) is None
        True
        >>> extract_sql("no query") is None
        True
        >>> extract_sql("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
        ...             "SELECT i FROM n LIMIT 3")
        'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n LIMIT 3'
    """
    text = strip_thinking(text or "")
    if not strict and _is_statement(text):
        return text
    if not strict:
        obj = find_json_object(text)
        if obj is not None:
            for key in _JSON_SQL_KEYS:
                value = obj.get(key)
                if isinstance(value, str) and value.strip():
                    return unfence(value.strip())
    fenced = None
    for block in _blocks(text):
        if block.is_sql:
            fenced = block.body
            if not last:
                break
    if fenced is not None:
        return fenced
    if strict:
        bare = _STRICT_START.search(text)
        if bare is None:
            return None
        candidate = bare.group(1).strip()
        return candidate if _parses_as_query(candidate) else None
    found = _SQL_START.search(text)
    return text[found.start() :].strip() if found else None


# -- schema names ----------------------------------------------------------------------------------


class SchemaNames(NamedTuple):
    """The names a schema's ``CREATE TABLE``/``CREATE VIEW`` statements declare (fresh lists).

    Attributes:
        tables: table and view names in declaration order, without duplicates.
        columns: column names in declaration order (views declare none), without duplicates.

    >>> tables, columns = schema_names("CREATE TABLE shop_orders (order_id INT PRIMARY KEY, "
    ...                                "total REAL, PRIMARY KEY (order_id));")
    >>> tables, columns
    (['shop_orders'], ['order_id', 'total'])
    """

    tables: list[str]
    columns: list[str]


def _created(statement: exp.Expression) -> tuple[str | None, list[str]]:
    if not isinstance(statement, exp.Create):
        return None, []
    kind = str(statement.args.get("kind") or "").upper()
    if kind not in ("TABLE", "VIEW"):
        return None, []
    target = statement.this
    table = target.this if isinstance(target, exp.Schema) else target
    if not isinstance(table, exp.Table) or not table.name:
        return None, []
    columns: list[str] = []
    if kind == "TABLE" and isinstance(target, exp.Schema):
        columns = [c.name for c in target.expressions if isinstance(c, exp.ColumnDef) and c.name]
    return table.name, columns


def _statements(schema_text: str, dialect: str | None, strict: bool) -> list[exp.Expression]:
    try:
        return [s for s in sqlglot.parse(schema_text, read=dialect) if s is not None]
    except sqlglot.errors.SqlglotError as error:
        if strict:
            raise ValueError(
                f"cannot read the schema to find its table and column names: {error}"
            ) from None
    statements: list[exp.Expression] = []  # one unreadable statement spoils no other
    for piece in schema_text.split(";"):
        if not piece.strip():
            continue
        try:
            statements += [s for s in sqlglot.parse(piece, read=dialect) if s is not None]
        except sqlglot.errors.SqlglotError:
            continue
    return statements


@functools.lru_cache(maxsize=256)
def _declared(
    schema_text: str, dialect: str | None, strict: bool
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``((table, (column, ...)), ...)`` in declaration order (the one parser; cached)."""
    return tuple(
        (table, tuple(columns))
        for table, columns in map(_created, _statements(schema_text, dialect, strict))
        if table is not None
    )


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def schema_names(
    schema_text: str | None, dialect: str | None = None, *, strict: bool = False
) -> SchemaNames:
    """The table and the column names that a schema's ``CREATE`` statements declare (sqlglot).

    Constraints (``PRIMARY KEY (...)``, ``FOREIGN KEY ... REFERENCES``) are no columns, and a
    referenced table is no declaration. Parses are cached per schema text; the lists returned
    are the caller's own.

    Args:
        schema_text: ``CREATE TABLE``/``CREATE VIEW`` statements (other statements and
            comments are skipped); None or "" gives no names.
        dialect: a sqlglot dialect (``sqlite``, ``duckdb``, ``postgres``; None: the default).
        strict: raise ``ValueError`` when the text does not parse; by default the statements
            that parse are read and the rest skipped (the schema an agent sees is text).

    Returns:
        ``(tables, columns)``, each in declaration order without duplicates.

    >>> schema_names(None)
    SchemaNames(tables=[], columns=[])
    """
    if not schema_text or not schema_text.strip():
        return SchemaNames([], [])
    declared = _declared(schema_text, dialect, strict)
    return SchemaNames(
        _unique(table for table, _ in declared),
        _unique(column for _, columns in declared for column in columns),
    )


def schema_identifiers(
    schema_text: str | None, dialect: str | None = None, *, strict: bool = False
) -> list[str]:
    """Every name :func:`schema_names` finds, in declaration order: each table followed by its
    columns, without duplicates.

    >>> schema_identifiers("CREATE TABLE staff (staff_id INT, salary REAL);"
    ...                    "CREATE TABLE region (name TEXT)")
    ['staff', 'staff_id', 'salary', 'region', 'name']
    """
    if not schema_text or not schema_text.strip():
        return []
    declared = _declared(schema_text, dialect, strict)
    return _unique(name for table, columns in declared for name in (table, *columns))
