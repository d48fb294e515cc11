"""SQL fragments in words: what a person means by a part of a query, said without SQL.

BIRD-Interact annotates an ambiguity with the part of the solution it stands for
(``sql_snippet``) and often no written response; the reference oracle answers with these words
instead of the fragment, since an answer must not hand over SQL
(:func:`ambitab_gym.oracles.sqltext.answer_reveals_sql`). A fragment is parsed with sqlglot - as
an expression, a condition, a clause (``WHERE``, ``ORDER BY``, ``LIMIT``, ``FROM ... JOIN``,
``SET``, ``ADD COLUMN``) or a column list - and said node by node: ``LIMIT 10`` -> "the first
ten", ``ORDER BY x DESC`` -> "ordered from the highest x down", ``snr > 10`` -> "snr above 10",
``IN`` lists, ``BETWEEN``, ``AND``/``OR``, ``CASE``, arithmetic, aggregates ("the average of
..."), columns in natural form (:func:`ambitab_gym.aliases.natural_name`). What is not covered
(unknown functions, fragments that do not parse) becomes a general phrase naming the columns
involved ("a value worked out from x and y").

* :func:`verbalize` - a fragment in words.
* :func:`parse_fragment` - a fragment as a sqlglot tree, or None.
* :func:`fragment_names` - the columns, tables, JSON keys and compared values a fragment names,
  in natural form (aliases of the ambiguity it resolves).
* :func:`code_names` - the same, read from text that mixes SQL into English (evidence hints).
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from ambitab_gym.aliases import natural_name
from ambitab_gym.oracles.sqltext import answer_reveals_sql
from ambitab_gym.terms import STOP_WORDS

__all__ = ["code_names", "fragment_names", "parse_fragment", "verbalize"]

# the table the clause wrappers query: never said, never an alias
_WRAPPER_TABLE = "t1"
_WRAPPERS = (
    (
        re.compile(
            r"^(?:where|order\s+by|group\s+by|having|limit|"
            r"(?:(?:inner|left|right|full|cross|natural)\s+)?(?:outer\s+)?join)\b",
            re.IGNORECASE,
        ),
        f"SELECT * FROM {_WRAPPER_TABLE} {{}}",
    ),
    (re.compile(r"^from\b", re.IGNORECASE), "SELECT * {}"),
    (re.compile(r"^set\b", re.IGNORECASE), f"UPDATE {_WRAPPER_TABLE} {{}}"),
    (
        re.compile(r"^(?:add|drop|alter)\s+column\b", re.IGNORECASE),
        f"ALTER TABLE {_WRAPPER_TABLE} {{}}",
    ),
)
_CONNECTOR = re.compile(r"^(?:and|or)\s+", re.IGNORECASE)  # a condition cut out of a list
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*\s*:=\s*")  # PL/pgSQL "v_x := expression"
_TRAILING_ALIAS = re.compile(r"\s+as\s+([A-Za-z_][\w\s-]*?)\s*$", re.IGNORECASE)
_NUMBER_WORDS = re.findall(
    r"\S+",
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty",
)
_MAX_WORDS = 90  # longer than this, a formula is no longer something a person says
_FALLBACK = "the meaning we use for it in this database"


def _parse(text: str, dialect: str | None) -> exp.Expression | None:
    try:
        trees = [t for t in sqlglot.parse(text, read=dialect) if t is not None]
    except (sqlglot.errors.SqlglotError, ValueError, RecursionError):
        return None
    # a Command is text sqlglot could not parse ("REPLACE(...)" read as a statement)
    return trees[0] if len(trees) == 1 and not isinstance(trees[0], exp.Command) else None


def parse_fragment(fragment: str, dialect: str | None = None) -> exp.Expression | None:
    """A fragment as a sqlglot tree: parsed as it is, as a clause of a query on a stand-in
    table, or as a ``SELECT`` list; a trailing ``AS label`` that does not parse is kept as an
    alias; None when nothing parses.

    >>> parse_fragment("ORDER BY x DESC").sql()
    'SELECT * FROM t1 ORDER BY x DESC'
    >>> parse_fragment("COUNT(*) as good signals").sql()
    'COUNT(*) AS "good signals"'
    >>> parse_fragment("CASE WHEN ... END") is None
    True
    """
    text = _ASSIGNMENT.sub("", fragment.strip()).strip().rstrip(";,").strip()
    text = _CONNECTOR.sub("", text)
    if not text:
        return None
    label = _TRAILING_ALIAS.search(text)
    candidates = [(text, None)]
    if label is not None:
        candidates.append((text[: label.start()].strip(), label.group(1)))
    for candidate, alias in candidates:
        template = next((t for p, t in _WRAPPERS if p.match(candidate)), None)
        for form in [template] if template else ["{}", "SELECT {}"]:
            tree = _parse(form.format(candidate), dialect)
            if tree is None:
                continue
            tree.meta["stand_in"] = template is not None
            if alias is not None:
                tree = exp.Alias(this=tree, alias=exp.to_identifier(alias, quoted=True))
            return tree
    return None


# -- saying a tree ------------------------------------------------------------------------


def _join(items: list[str], word: str = "and") -> str:
    items = [i for i in items if i]
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {word} {items[-1]}"


def _number_word(node: exp.Expression) -> str:
    if isinstance(node, exp.Literal) and not node.is_string and str(node.this).isdigit():
        n = int(str(node.this))
        return _NUMBER_WORDS[n] if n < len(_NUMBER_WORDS) else str(n)
    return _say(node)


def _columns(node: exp.Expression) -> list[str]:
    names = (natural_name(c.name) for c in node.find_all(exp.Column) if c.name)
    return list(dict.fromkeys(n for n in names if n))


def _general(node: exp.Expression | None, text: str = "") -> str:
    """What is not said node by node: the columns it is worked out from."""
    if node is not None:
        columns = _columns(node)
    else:
        columns = list(dict.fromkeys(n for k, n in _code_tokens(text) if k == "column"))
    if not columns:
        return _FALLBACK
    return f"a value worked out from {_join(columns)}"


def _value(node: exp.Literal) -> str:
    return f'"{node.this}"' if node.is_string else str(node.this)


def _count(node: exp.Count, entity: str = "rows") -> str:
    inner = node.this
    if inner is None or isinstance(inner, exp.Star):
        return f"the number of {entity}"
    if isinstance(inner, exp.Distinct):
        return f"the number of different {_join([_say(e) for e in inner.expressions])}"
    return f"the number of {_say(inner)}"


def _filtered(node: exp.Filter, entity: str | None = None) -> str:
    condition = node.expression.this if isinstance(node.expression, exp.Where) else node.expression
    agg = node.this
    if isinstance(agg, exp.Count):
        if entity and (agg.this is None or isinstance(agg.this, exp.Star)):
            return f"the number of {entity}, those with {_say(condition)}"
        return f"{_count(agg)} with {_say(condition)}"
    return f"{_say(agg)} over the rows with {_say(condition)}"


def _like(node: exp.Like) -> str:
    pattern = node.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        return f"{_say(node.this)} like {_say(pattern)}"
    text = str(pattern.this)
    core = text.strip("%")
    if text.startswith("%") and text.endswith("%") and len(text) > 1:
        how = "containing"
    elif text.endswith("%"):
        how = "starting with"
    elif text.startswith("%"):
        how = "ending with"
    else:
        how = "matching"
    return f'{_say(node.this)} {how} "{core}"'


def _is(node: exp.Is, negate: bool = False) -> str:
    negate = negate != bool(node.args.get("negate"))
    subject = _say(node.this)
    if isinstance(node.expression, exp.Null):
        return f"a known {subject}" if negate else f"no {subject}"
    return f"{subject} {'not ' if negate else ''}{_say(node.expression)}"


def _not(node: exp.Not) -> str:
    inner = node.this
    if isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.In):
        return f"{_say(inner.this)} not one of {_join([_say(e) for e in inner.expressions], 'or')}"
    if isinstance(inner, exp.Is):
        return _is(inner, negate=True)
    if isinstance(inner, exp.Like):
        return _like(inner).replace(" containing ", " not containing ", 1)
    return f"not {_say(inner)}"


def _case(node: exp.Case) -> str:
    subject = node.this
    parts = []
    for branch in node.args.get("ifs") or []:
        condition = branch.this
        said = f"{_say(subject)} is {_say(condition)}" if subject is not None else _say(condition)
        parts.append(f"{_say(branch.args.get('true'))} when {said}")
    default = node.args.get("default")
    if default is not None:
        parts.append(f"otherwise {_say(default)}")
    return ", ".join(parts)


def _key(node: exp.Expression) -> str:
    """An ordering key said after "the highest": without its own article."""
    said = _say(node)
    return re.sub(r"^(?:the|a) ", "", said)


def _ordered(node: exp.Ordered) -> str:
    key = _key(node.this)
    return f"from the highest {key} down" if node.args.get("desc") else f"from the lowest {key} up"


_ARITHMETIC_NODES = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.DPipe)


def _order(node: exp.Order) -> str:
    said = f"ordered {', then '.join(_say(k) for k in node.expressions)}"
    return f"{_say(node.this)}, {said}" if node.this is not None else said


def _binary(word: str):
    return lambda n: f"{_operand(n.this)} {word} {_operand(n.expression)}"


def _argument(node: exp.Expression) -> str:
    """A function's argument: a formula in parentheses, so that words do not run together."""
    said = _say(node)
    return f"({said})" if isinstance(node, _ARITHMETIC_NODES) else said


def _aggregate(word: str):
    return lambda n: f"{word} {_argument(n.this)}"


def _round(node: exp.Round) -> str:
    decimals = node.args.get("decimals")
    if decimals is None:
        return f"{_say(node.this)} rounded"
    return f"{_say(node.this)} rounded to {_say(decimals)} decimals"


def _coalesce(node: exp.Coalesce) -> str:
    fallbacks = [_say(e) for e in node.expressions]
    return f"{_say(node.this)}, or {_join(fallbacks, 'or')} when it is missing"


def _percentile(node: exp.WithinGroup) -> str:
    inner, order = node.this, node.expression
    keys = order.expressions if isinstance(order, exp.Order) else []
    if isinstance(inner, (exp.PercentileCont, exp.PercentileDisc)) and keys:
        column = _say(keys[0].this if isinstance(keys[0], exp.Ordered) else keys[0])
        share = inner.this
        if isinstance(share, exp.Literal) and str(share.this) in ("0.5", ".5"):
            return f"the median of {column}"
        return f"the {_say(share)} percentile of {column}"
    return _general(node)


def _json(node: exp.JSONExtract | exp.JSONExtractScalar) -> str:
    """A key read out of a JSON column: "the bath count in dwelling specs"."""
    path = node.expression
    keys = [k.this for k in path.find_all(exp.JSONPathKey)] if path is not None else []
    source = node.this
    while isinstance(source, (exp.JSONExtract, exp.JSONExtractScalar)):
        source = source.this
    if not keys or not isinstance(keys[-1], str):
        return _general(node)
    return f"the {natural_name(keys[-1])} in {_say(source)}"


def _operand(node: exp.Expression) -> str:
    """An operand of arithmetic: a phrase with commas of its own in parentheses."""
    said = _say(node)
    return f"({said})" if isinstance(node, (exp.Coalesce, exp.Case)) else said


def _paren(node: exp.Paren) -> str:
    inner = node.this
    if isinstance(inner, (exp.Column, exp.Literal, exp.Paren)):
        return _say(inner)
    return f"({_say(inner)})"


def _column(node: exp.Column) -> str:
    return "everything" if isinstance(node.this, exp.Star) else natural_name(node.name)


def _alias(node: exp.Alias) -> str:
    inner, label = node.this, natural_name(node.alias)
    if label and isinstance(inner, exp.Count) and isinstance(inner.this, (exp.Star, type(None))):
        return _count(inner, label)
    if label and isinstance(inner, exp.Filter):
        return _filtered(inner, label)
    return _top(inner)


def _join_phrase(node: exp.Join) -> str:
    table = natural_name(node.this.name) if isinstance(node.this, exp.Table) else _say(node.this)
    on = node.args.get("on")
    said = f"matched with the {table}"
    if isinstance(on, exp.EQ) and all(isinstance(s, exp.Column) for s in (on.this, on.expression)):
        left, right = natural_name(on.this.name), natural_name(on.expression.name)
        return f"{said} by {left if left == right else _join([left, right])}"
    return f"{said} with {_say(on)}" if on is not None else said


def _select(node: exp.Select) -> str:
    stand_in = node.meta.get("stand_in", False)
    parts = []
    expressions = [e for e in node.expressions if not isinstance(e, exp.Star)]
    if expressions:
        parts.append(_join([_top(e) for e in expressions]))
    source = node.args.get("from_") or node.args.get("from")
    joins = node.args.get("joins") or []
    if not expressions and source is not None:
        table = source.this
        name = natural_name(table.name) if isinstance(table, exp.Table) else ""
        if name and not (stand_in and table.name == _WRAPPER_TABLE):
            parts.append(" ".join([f"the {name}", *(_join_phrase(j) for j in joins)]))
    where = node.args.get("where")
    if where is not None:
        lead = "for those with" if expressions else "only those with"
        parts.append(f"{lead} {_say(where.this)}")
    group = node.args.get("group")
    if group is not None:
        parts.append(f"per {_join([_say(e) for e in group.expressions])}")
    having = node.args.get("having")
    if having is not None:
        parts.append(f"keeping the groups with {_say(having.this)}")
    order = node.args.get("order")
    keys = list(order.expressions) if order is not None else []
    limit = node.args.get("limit")
    count = _number_word(limit.expression) if limit is not None and limit.expression else None
    if count and len(keys) == 1:
        key = keys[0]
        side = "highest" if key.args.get("desc") else "lowest"
        parts.append(f"the {count} with the {side} {_key(key.this)}")
    else:
        if keys:
            parts.append(f"ordered {', then '.join(_ordered(k) for k in keys)}")
        if count:
            parts.append(f"the first {count}")
    return ", ".join(parts) if parts else _general(node)


def _update(node: exp.Update) -> str:
    sets = [
        f"set {_say(e.this)} to {_say(e.expression)}" if isinstance(e, exp.EQ) else _say(e)
        for e in node.expressions
    ]
    said = _join(sets)
    where = node.args.get("where")
    return f"{said} for those with {_say(where.this)}" if where is not None else said


def _alter(node: exp.Alter) -> str:
    out = []
    for action in node.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            kind = action.args.get("kind")
            kind_name = kind.sql().lower() if kind is not None else ""
            kind_name = "true/false" if kind_name == "boolean" else kind_name
            out.append(
                f"a new {kind_name} column called {natural_name(action.name)}".replace("  ", " ")
            )
        else:
            out.append(_general(action))
    return _join(out)


_SAY = {
    exp.Column: _column,
    exp.Identifier: lambda n: natural_name(n.name),
    exp.Literal: _value,
    exp.Boolean: lambda n: "true" if n.this else "false",
    exp.Null: lambda n: "nothing",
    exp.Star: lambda n: "everything",
    exp.Paren: _paren,
    exp.Neg: lambda n: f"minus {_say(n.this)}",
    exp.Add: _binary("plus"),
    exp.Sub: _binary("minus"),
    exp.Mul: _binary("times"),
    exp.Div: _binary("divided by"),
    exp.Mod: _binary("modulo"),
    exp.DPipe: _binary("followed by"),
    exp.JSONExtract: _json,
    exp.JSONExtractScalar: _json,
    exp.Cast: lambda n: _say(n.this),
    exp.TryCast: lambda n: _say(n.this),
    exp.Nullif: lambda n: _say(n.this),
    exp.Replace: lambda n: _say(n.this),
    exp.Lower: lambda n: _say(n.this),
    exp.Upper: lambda n: _say(n.this),
    exp.Trim: lambda n: _say(n.this),
    exp.Abs: _aggregate("the absolute value of"),
    exp.Round: _round,
    exp.Coalesce: _coalesce,
    exp.Length: _aggregate("the length of"),
    exp.Avg: _aggregate("the average of"),
    exp.Sum: _aggregate("the total of"),
    exp.Max: _aggregate("the highest"),
    exp.Min: _aggregate("the lowest"),
    exp.Median: _aggregate("the median of"),
    exp.Stddev: _aggregate("the standard deviation of"),
    exp.StddevSamp: _aggregate("the standard deviation of"),
    exp.StddevPop: _aggregate("the standard deviation of"),
    exp.Variance: _aggregate("the variance of"),
    exp.VariancePop: _aggregate("the variance of"),
    exp.GroupConcat: _aggregate("the list of"),
    exp.ArrayAgg: _aggregate("the list of"),
    exp.Count: _count,
    exp.Filter: _filtered,
    exp.WithinGroup: _percentile,
    exp.Distinct: lambda n: f"different {_join([_say(e) for e in n.expressions])}",
    exp.Case: _case,
    exp.GT: _binary("above"),
    exp.LT: _binary("below"),
    exp.GTE: lambda n: f"{_say(n.this)} of {_say(n.expression)} or more",
    exp.LTE: lambda n: f"{_say(n.this)} of {_say(n.expression)} or less",
    exp.EQ: _binary("equal to"),
    exp.NEQ: _binary("other than"),
    exp.Between: lambda n: (
        f"{_say(n.this)} between {_say(n.args['low'])} and {_say(n.args['high'])}"
    ),
    exp.In: lambda n: (
        f"{_say(n.this)} one of {_join([_say(e) for e in n.expressions], 'or')}"
        if n.expressions
        else _general(n)
    ),
    exp.Like: _like,
    exp.ILike: _like,
    exp.Is: _is,
    exp.Not: _not,
    exp.And: lambda n: _join([_say(e) for e in n.flatten()]),
    exp.Or: lambda n: _join([_say(e) for e in n.flatten()], "or"),
    exp.Alias: _alias,
    exp.Ordered: _ordered,
    exp.Order: _order,
    exp.Select: _select,
    exp.Update: _update,
    exp.Alter: _alter,
}

_CONDITIONS = (exp.Predicate, exp.Connector, exp.Not)


def _say(node: exp.Expression | None) -> str:
    if node is None:
        return ""
    say = _SAY.get(type(node))
    return say(node) if say is not None else _general(node)


def _top(node: exp.Expression) -> str:
    """A tree said as the whole of what a person means: a column as "the x", a condition as
    "those with ..."."""
    if isinstance(node, exp.Paren):
        return _top(node.this)
    if isinstance(node, exp.Column):
        return f"the {_column(node)}"
    if isinstance(node, _CONDITIONS):
        return f"those with {_say(node)}"
    return _say(node)


def verbalize(fragment: str, dialect: str | None = None) -> str:
    """A fragment in words, with no SQL in them (checked with
    :func:`~ambitab_gym.oracles.sqltext.answer_reveals_sql`; what fails the check, is longer
    than a person would say or does not parse becomes a general phrase).

    Args:
        fragment: a part of a query: an expression, a condition, a clause, a column list.
        dialect: its sqlglot dialect.

    >>> verbalize("LIMIT 10"), verbalize("ORDER BY x DESC")
    ('the first ten', 'ordered from the highest x down')
    >>> verbalize("s.SnrRatio > 10 AND s.Band IN ('L', 'S')")
    'those with snr ratio above 10 and band one of "L" or "S"'
    >>> verbalize("my_func(a.x, a.y_z)")
    'a value worked out from x and y z'
    """
    tree = parse_fragment(fragment, dialect)
    said = _top(tree) if tree is not None else _general(None, fragment)
    said = " ".join(said.split())
    if len(said.split()) > _MAX_WORDS or answer_reveals_sql(said):
        said = _general(tree, fragment)
    return _FALLBACK if answer_reveals_sql(said) else said


# -- names --------------------------------------------------------------------------------


def _plain_value(text: str) -> str | None:
    """A string literal as a name: without LIKE wildcards; not a single character ("-" of a
    bond type, "c" of an element) nor more than four words."""
    text = text.strip().strip("%").strip()
    return text if len(text) > 1 and len(text.split()) <= 4 else None


def _named_number(text: str) -> bool:
    """Whether a compared number can name a reading: not a single digit (0 and 1, "top 3",
    "2 decimals" turn up in any question)."""
    try:
        number = float(text)
    except ValueError:
        return False
    return not (number.is_integer() and 0 <= number <= 9)


def _compared(node: exp.Expression) -> bool:
    parent = node.parent
    while isinstance(parent, (exp.Neg, exp.Paren)):
        parent = parent.parent
    return isinstance(parent, exp.Predicate)


def fragment_names(fragment: str, dialect: str | None = None) -> list[str]:
    """The columns, tables, JSON keys and values a fragment names, in order, natural form,
    unique: the words a person uses to ask about what it resolves. Values are the strings and the numbers a
    condition compares with (not a formula's constants, nor single digits). A fragment that does
    not parse is read with :func:`code_names`.

    >>> fragment_names("s.SnrRatio - 0.1 * ABS(s.NoiseFloorDbm) > 10 AND band = 'Ka'")
    ['snr ratio', 'noise floor dbm', '10', 'band', 'Ka']
    >>> fragment_names("FROM Observatories o JOIN Telescopes t ON o.Station = t.Station")
    ['observatories', 'telescopes', 'station']
    """
    tree = parse_fragment(fragment, dialect)
    if tree is None:
        return code_names(fragment)
    stand_in = tree.meta.get("stand_in", False)
    names: list[str] = []
    for node in tree.dfs():
        if isinstance(node, exp.Column) and node.name:
            names.append(natural_name(node.name))
        elif isinstance(node, exp.JSONPathKey) and isinstance(node.this, str):
            names.append(natural_name(node.this))
        elif isinstance(node, exp.Table) and node.name:
            if not (stand_in and node.name == _WRAPPER_TABLE):
                names.append(natural_name(node.name))
        elif isinstance(node, exp.Literal):
            if node.is_string:
                names.append(_plain_value(str(node.this)) or "")
            elif _compared(node) and _named_number(str(node.this)):
                names.append(str(node.this))
    return list(dict.fromkeys(n for n in names if n))


_TOKEN = re.compile(
    r"(?P<string>'(?:[^']|'(?=[A-Za-z]))*'|\"[^\"]*\")"
    r"|(?P<quoted>`[^`]+`)"
    r"|(?P<number>\d+(?:\.\d+)?)"
    r"|(?P<name>[A-Za-z_]\w*(?:-[A-Za-z]\w*)*)"
    r"|(?P<op><=|>=|<>|!=|:=|\|\||[-+*/%=<>(),.;])"
)
_COMPARISON = frozenset({"=", "<", ">", "<=", ">=", "<>", "!="})
# where an English phrase before a name stops: function words and the verbs of evidence hints
_PHRASE_STOPS = STOP_WORDS | frozenset(
    {"refer", "refers", "mean", "means", "indicate", "indicates", "denote", "denotes", "stand"}
)
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "||", ":="})
_SQL_WORDS = frozenset(
    re.findall(
        r"\S+",
        """
    select from where and or not in is null like between case when then else end as on join
    inner left right outer full cross group order by having limit offset distinct asc desc union
    all exists if set update insert into values delete create replace function table column add
    alter drop true false cast with filter within over partition returns return begin declare
    """,
    )
)


def _code_tokens(text: str) -> list[tuple[str, str]]:
    """``("column", natural name)`` and ``("value", text)`` of :func:`code_names`, in order."""
    tokens = list(_TOKEN.finditer(text))
    out: list[tuple[str, str]] = []
    calls: list[bool] = []  # per open parenthesis: whether it opens a function call

    def at(i: int) -> str:
        return tokens[i].group().lower() if 0 <= i < len(tokens) else ""

    def dotted(i: int, j: int) -> bool:  # tokens i and j touch a "." between them
        return i >= 0 and j < len(tokens) and tokens[i].end() == tokens[j].start()

    for i, match in enumerate(tokens):
        kind, token = match.lastgroup, match.group()
        before, after = at(i - 1), at(i + 1)
        if token == "(":
            calls.append(tokens[i - 1].lastgroup == "name" if i else False)
        elif token == ")" and calls:
            calls.pop()
        elif kind == "string" and token[1:].startswith("$."):  # a JSON path: its last key
            out.append(("column", natural_name(token[1:-1].rsplit(".", 1)[-1])))
        elif kind == "string":
            out.append(("value", _plain_value(token[1:-1]) or ""))
        elif kind == "quoted":
            out.append(("column", natural_name(token[1:-1])))
        elif kind == "number":
            between = before == "between" or (before == "and" and at(i - 3) == "between")
            compared = before in _COMPARISON or after in _COMPARISON or between
            if compared and _named_number(token):
                out.append(("value", token))
        elif kind == "name" and token.lower() not in _SQL_WORDS and after != "(" and before != "as":
            if after == "." and dotted(i, i + 1):
                continue  # a qualifier: often a table alias
            in_call = bool(calls) and calls[-1] and before in ("(", ",") and after in (")", ",")
            code = (
                "_" in token
                or re.search(r"[a-z][A-Z]", token) is not None
                or (before == "." and dotted(i - 1, i))
                or bool({before, after} & (_COMPARISON | _ARITHMETIC))
                or in_call
            )
            if code:
                out.append(("column", natural_name(_phrase(tokens, i))))
    return [(k, n) for k, n in out if n]


def _phrase(tokens: list[re.Match[str]], i: int) -> str:
    """The name at ``i`` with the plain words before it when they are one English phrase
    ("scheduled flight time" of "refers to scheduled flight time > 7")."""
    start = i
    while start > 0:
        previous = tokens[start - 1]
        word = previous.group().lower()
        if previous.lastgroup != "name" or word in _SQL_WORDS or word in _PHRASE_STOPS:
            break
        start -= 1
    return " ".join(t.group() for t in tokens[start : i + 1])


def code_names(text: str) -> list[str]:
    """The columns and values a text names in SQL, even with English around it: names written
    as code (snake or camel case, quoted with backticks, a column after a qualifier, next to an
    operator - with the English words before it that make one phrase -, or alone in a call's
    parentheses) in natural form; strings in single or double
    quotes; numbers a comparison or ``BETWEEN`` uses (not single digits). Qualifiers (often
    table aliases), function names, labels after ``AS`` and SQL keywords are left out.

    >>> code_names("long trip refers to duration > 1800")
    ['duration', '1800']
    >>> code_names("spending refers to SUM(quantity * unit_price) on orders not cancelled")
    ['quantity', 'unit price']
    >>> code_names("gold-eyed refers to colour = 'Gold' where eye_colour_id = T2.id")
    ['colour', 'Gold', 'eye colour id', 'id']
    >>> code_names("long-haul refers to scheduled flight time > 7 hours")
    ['scheduled flight time']
    """
    return list(dict.fromkeys(name for _, name in _code_tokens(text)))
