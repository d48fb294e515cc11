"""AmbiQT (column-synonym subset) over Spider SQLite databases -> AmbiTab-AmbiQT.

Each AmbiQT item replaces one Spider column by two synonyms (``extra_map``) and gives one query
per synonym. For every item this converter

1. rejects protected key columns (primary keys and both ends of foreign keys);
2. rebuilds the Spider database with both synonym columns: a seeded per-item draw picks the
   column that keeps the original values, the other is resampled from them with replacement
   (the database of a (column, copied synonym) variant is built once and shared);
3. runs both queries and rejects the item when either fails or both return equal results;
4. emits two records (one AVT): the same question, one hidden reading per synonym; the
   ambiguity's term is the question's phrase for the column, its aliases the names that tell the
   readings apart (both synonyms and the original column in natural form).

* :func:`convert` - the converter entry point used by :func:`ambitab_gym.convert.build_corpus`.
* :func:`rebuild_database` - step 2 for one variant.
* :func:`column_term` - the phrase of the question that names the ambiguous column.
* :func:`column_aliases` - the names of the two readings and the term's head.
* :func:`broad_words` - the words that do not single out one column of a database.
* :func:`quote_identifier` - a synonym quoted where SQLite would not parse it bare.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from ambitab_gym.aliases import GENERIC_NAMES, clean_aliases, natural_name, reading_aliases
from ambitab_gym.convert.common import (
    MALFORMED,
    BuildError,
    BuildOptions,
    Conversion,
    Drop,
    Item,
    TermChoice,
    Workspace,
    common_phrase,
    compare_for,
    extend_phrase,
    find_phrase,
    find_term,
    is_stop_word,
    malformed,
    progress,
    seeded_rng,
    sha256_file,
    term_problem,
    trim_phrase,
    words_match,
)
from ambitab_gym.records import TaskRecord, parse_record
from ambitab_gym.terms import Word, lemma, words
from ambitab_gym.verify.base import QueryError
from ambitab_gym.verify.compare import results_match

__all__ = [
    "SPLIT_NAMES",
    "broad_words",
    "column_aliases",
    "column_term",
    "convert",
    "quote_identifier",
    "rebuild_database",
]

#: AmbiQT file stem -> AmbiTab split
SPLIT_NAMES = {"train": "train", "validation": "dev", "dev": "dev", "test": "test"}

UPSTREAM = {
    "name": "AmbiQT (column synonyms) over Spider",
    "url": "https://github.com/testzer0/AmbiQT",
    "citation": "Bhaskar et al., 2023, Benchmarking and Improving Text-to-SQL Generation under Ambiguity",
    "licence": "AmbiQT code MIT; Spider and AmbiQT-derived records CC BY-SA 4.0",
}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _find_files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    for folder in (source / "benchmark" / "col-synonyms", source / "col-synonyms", source):
        files = (
            sorted(p for p in folder.glob("*.json") if p.stem in SPLIT_NAMES and p.is_file())
            if folder.is_dir()
            else []
        )
        if files:
            return files
    raise BuildError(
        f"no AmbiQT column-synonym files under {source}: give the AmbiQT checkout "
        "(it holds benchmark/col-synonyms/validation.json)"
    )


def _database_root(options: BuildOptions) -> Path:
    candidates = []
    if options.databases is not None:
        candidates.append(options.databases)
    base = options.source if options.source.is_dir() else options.source.parent
    candidates += [base / "spider" / "database", base.parent / "spider" / "database"]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise BuildError(
        "Spider's SQLite databases were not found: give Spider's database/ folder with "
        "--databases PATH (it holds <db>/<db>.sqlite)"
    )


def _spider_tables(source: Path) -> dict[str, dict]:
    base = source if source.is_dir() else source.parent
    for candidate in (base / "spider" / "tables.json", base / "tables.json"):
        if candidate.is_file():
            return {e["db_id"]: e for e in json.loads(candidate.read_text("utf-8"))}
    return {}


def _protected(database: Path, table: str, column: str, spider: dict | None) -> bool:
    """Whether a column is a primary key or either end of a foreign key."""
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        tables = [
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        for row in connection.execute(f"PRAGMA table_info({_q(table)})"):
            if row[1].lower() == column.lower() and row[5]:
                return True
        for other in tables:
            for fk in connection.execute(f"PRAGMA foreign_key_list({_q(other)})"):
                source_col, target_table, target_col = fk[3], fk[2], fk[4]
                if other.lower() == table.lower() and str(source_col).lower() == column.lower():
                    return True
                if (
                    str(target_table).lower() == table.lower()
                    and str(target_col or "").lower() == column.lower()
                ):
                    return True
    finally:
        connection.close()
    if spider:
        names = [t.lower() for t in spider["table_names_original"]]
        if table.lower() in names:
            index = names.index(table.lower())
            keys = set(spider.get("primary_keys", []))
            for pair in spider.get("foreign_keys", []):
                keys.update(pair)
            for i, (t, c) in enumerate(spider["column_names_original"]):
                if t == index and c.lower() == column.lower() and i in keys:
                    return True
    return False


def _actual_names(
    database: Path, table: str, column: str
) -> tuple[str, str, str, list[str]] | None:
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        tables = {
            r[0].lower(): r[0]
            for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        actual_table = tables.get(table.lower())
        if actual_table is None:
            return None
        info = connection.execute(f"PRAGMA table_info({_q(actual_table)})").fetchall()
    finally:
        connection.close()
    for row in info:
        if row[1].lower() == column.lower():
            return actual_table, row[1], row[2] or "", [r[1].lower() for r in info]
    return None


def _other_columns(database: Path, table: str, column: str, spider: dict | None) -> list[str]:
    """The names of every column of a database but ``table.column``: identifiers and, with
    Spider's ``tables.json`` entry, natural names."""
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        tables = [
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        pairs = [
            (t, r[1]) for t in tables for r in connection.execute(f"PRAGMA table_info({_q(t)})")
        ]
    finally:
        connection.close()
    if spider:
        originals = spider["table_names_original"]
        pairs += [
            (originals[t], natural)
            for (t, c), (_, natural) in zip(
                spider["column_names_original"], spider["column_names"], strict=False
            )
            if t >= 0
            and not (originals[t].lower() == table.lower() and c.lower() == column.lower())
        ]
    names = [
        n for t, n in pairs if not (t.lower() == table.lower() and n.lower() == column.lower())
    ]
    return list(dict.fromkeys(names))


def _collision(
    database: Path, table: str, synonyms: tuple[str, str], queries: list[str]
) -> str | None:
    """Why a synonym clashes with a column of another table the queries use, or None."""
    used = {
        t.lower()
        for sql in queries
        for t in re.findall(r'\b(?:from|join)\s+"?([A-Za-z_][\w]*)', sql, re.IGNORECASE)
    }
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        tables = [
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        for other in tables:
            if other.lower() == table.lower() or other.lower() not in used:
                continue
            columns = {r[1].lower() for r in connection.execute(f"PRAGMA table_info({_q(other)})")}
            for synonym in synonyms:
                if synonym.lower() in columns:
                    return f"{synonym} is also a column of {other}, which the queries use"
    finally:
        connection.close()
    return None


def rebuild_database(
    source: Path,
    target: Path,
    *,
    table: str,
    column: str,
    synonyms: tuple[str, str],
    copied: str,
    seed: int,
    variant_key: str,
) -> None:
    """Write a copy of a Spider database whose ``table.column`` became two synonym columns.

    The first synonym takes the original column's place, the second is appended (the layout
    does not depend on the draw). The ``copied`` synonym holds the original values; the other
    holds values resampled from them with replacement (seeded by ``seed`` and ``variant_key``).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> src = folder / "a.sqlite"
        >>> con = sqlite3.connect(src)
        >>> _ = con.executescript("CREATE TABLE t(id INTEGER PRIMARY KEY, age INT);"
        ...                       "INSERT INTO t VALUES (1, 20), (2, 30), (3, 40);")
        >>> con.close()
        >>> rebuild_database(src, folder / "b.sqlite", table="t", column="age",
        ...     synonyms=("years", "old"), copied="old", seed=0, variant_key="k")
        >>> con = sqlite3.connect(folder / "b.sqlite")
        >>> [r[1] for r in con.execute("PRAGMA table_info(t)")]
        ['id', 'years', 'old']
        >>> [r[0] for r in con.execute("SELECT old FROM t ORDER BY id")]
        [20, 30, 40]
        >>> set(r[0] for r in con.execute("SELECT years FROM t")) <= {20, 30, 40}
        True
        >>> con.close()
    """
    first, second = synonyms
    tmp = target.with_name(target.name + ".tmp")
    shutil.copyfile(source, tmp)
    connection = sqlite3.connect(tmp)
    connection.execute("PRAGMA synchronous = OFF")  # a scratch file, moved into place at the end
    connection.execute("PRAGMA journal_mode = MEMORY")
    try:
        declared = ""
        for row in connection.execute(f"PRAGMA table_info({_q(table)})"):
            if row[1] == column:
                declared = row[2] or ""
        connection.execute(f"ALTER TABLE {_q(table)} RENAME COLUMN {_q(column)} TO {_q(first)}")
        connection.execute(f"ALTER TABLE {_q(table)} ADD COLUMN {_q(second)} {declared}".rstrip())
        rows = connection.execute(
            f"SELECT rowid, {_q(first)} FROM {_q(table)} ORDER BY rowid"
        ).fetchall()
        values = [r[1] for r in rows]
        rng = seeded_rng(seed, "resample", variant_key)
        picks = rng.integers(0, len(values), size=len(values)) if values else []
        resampled = [values[int(i)] for i in picks]
        if copied == first:
            updates = [(value, row[0]) for value, row in zip(resampled, rows, strict=True)]
            connection.executemany(
                f"UPDATE {_q(table)} SET {_q(second)} = ? WHERE rowid = ?", updates
            )
        else:
            connection.execute(f"UPDATE {_q(table)} SET {_q(second)} = {_q(first)}")
            updates = [(value, row[0]) for value, row in zip(resampled, rows, strict=True)]
            connection.executemany(
                f"UPDATE {_q(table)} SET {_q(first)} = ? WHERE rowid = ?", updates
            )
        connection.commit()
        connection.execute("VACUUM")
    finally:
        connection.close()
    os.replace(tmp, target)


def _name_words(name: str) -> list[str]:
    """Words of a column or table name: underscores, spaces and camel case split."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name.replace("_", " "))
    return [w for w in spaced.split() if w]


def _related(word: str, name_word: str) -> bool:
    """Whether a question word is a form of a column-name word: one word up to plurals and
    shared stems (:func:`words_match`), or a common start of five letters or more covering two
    thirds of the shorter ("departure"/"departed")."""
    if words_match(word, name_word, stem=True):
        return True
    a, b = word.lower(), name_word.lower()
    shared = len(os.path.commonprefix([a, b]))
    return shared >= 5 and 3 * shared >= 2 * min(len(a), len(b))


def broad_words(other_columns: Iterable[str], table: str = "") -> frozenset[str]:
    """The lemmas that do not single out one column of a database: generic schema words, the
    words of its other columns' names and of the column's table.

    >>> {"date", "arrive", "rank", "dog", "name"} <= broad_words(["date arrived", "Weekly_rank"], "Dogs")
    True
    """
    names = [*other_columns, table]
    own = {w.lemma for name in names for w in words(" ".join(_name_words(name)))}
    return frozenset(own | GENERIC_NAMES)


def _specific_phrase(question: str, term: str, related: list[str]) -> str | None:
    """The first occurrence of a term widened over adjacent words that are forms of the
    column's own name words ("departure date" around "date"); None when none widens."""
    tokens = words(question)
    part = tuple(w.lemma for w in words(term))
    n = len(part)

    def joined(left: Word, right: Word) -> bool:
        return question[left.end : right.start].strip() == ""

    def names_column(token: Word) -> bool:
        return any(_related(question[token.start : token.end], r) for r in related)

    for i in range(len(tokens) - n + 1):
        if tuple(w.lemma for w in tokens[i : i + n]) != part:
            continue
        first, last = i, i + n - 1
        while (
            first > 0
            and joined(tokens[first - 1], tokens[first])
            and names_column(tokens[first - 1])
        ):
            first -= 1
        while (
            last + 1 < len(tokens)
            and joined(tokens[last], tokens[last + 1])
            and names_column(tokens[last + 1])
        ):
            last += 1
        if (first, last) != (i, i + n - 1):
            return question[tokens[first].start : tokens[last].end]
    return None


def column_term(
    question: str,
    column: str,
    natural: str | None = None,
    *,
    table: str = "",
    synonyms: tuple[str, ...] = (),
    other_columns: Iterable[str] = (),
) -> TermChoice | None:
    """The phrase of the question that names the ambiguous column, and how it was found.

    In order: a name of the column (Spider's natural name, the column name split into words)
    as the question writes it, plurals allowed (``column_name``); the same with shared stems,
    or a tail of a name holding its head word ("names" for "document name"), widened to the
    following words of its phrase (``column_name``); one of AmbiQT's synonyms or its tail
    (``synonym``); any other run of a name's words ("net worth" of "net worth millions").
    Never a phrase starting or ending with a function word ("of staff working"), and never
    only the noun of the column's table ("documents", "cartoons") unless the column is named
    so (``airlines.Airline``). A term made only of broad words (:func:`broad_words`: "date",
    "name", a word another column's name has) is widened to a more specific phrase of the
    question naming the column when there is one ("departure date" for ``date_departed``,
    not the first "date" of "arrival date"). None when nothing fits: the question names the
    column only by its table ("For each stadium, ...") or not at all.

    Args:
        question: the request.
        column: the column's identifier.
        natural: Spider's natural name of the column.
        table: the column's table (its natural name).
        synonyms: AmbiQT's two synonyms.
        other_columns: the names of the database's other columns.

    >>> column_term("How old is each singer? Show the age.", "Age", "age")
    TermChoice(term='age', aliases=(), origin='column_name')
    >>> column_term("Show the release years of songs.", "Song_release_year", "song release year")
    TermChoice(term='release years', aliases=(), origin='column_name')
    >>> column_term("What are the names of the documents?", "Document_Name", "document name",
    ...             table="Documents").term
    'names'
    >>> column_term("What are the create dates of all votes?", "created", "created").term
    'create dates'
    >>> column_term("List the gender of students.", "Sex", "sex", synonyms=("gender", "biological_sex"))
    TermChoice(term='gender', aliases=(), origin='synonym')
    >>> column_term("For each stadium, how many concerts play there?", "Name", "name",
    ...             table="stadium") is None
    True
    >>> column_term("List the arrival date and the departure date.", "date_departed",
    ...             other_columns=["date arrived"]).term
    'departure date'
    """
    names: list[str] = []
    for name in (natural or "", " ".join(_name_words(column))):
        if name.strip() and name.lower() not in {n.lower() for n in names}:
            names.append(name)
    table_words = [w.lower() for w in _name_words(table)]
    broad = broad_words(other_columns, table)
    related = [
        w
        for name in (*names, *synonyms)
        for w in _name_words(name)
        if not is_stop_word(w) and lemma(w) not in broad
    ]

    def whole_name(phrase: str) -> bool:
        mine = phrase.split()
        return any(
            len(mine) == len(theirs)
            and all(words_match(a, b, stem=True) for a, b in zip(mine, theirs, strict=True))
            for theirs in map(_name_words, names)
        )

    def tails(name: str) -> list[str]:
        parts = _name_words(name)
        return [" ".join(parts[i:]) for i in range(len(parts)) if not is_stop_word(parts[i])]

    def accept(span, origin: str, widen: bool = False) -> TermChoice | None:
        if span is None:
            return None
        if widen:
            span = extend_phrase(question, span, left=False)
        span = trim_phrase(question, span)
        if span is None or term_problem(span.phrase) is not None:
            return None
        if all(any(words_match(w, t) for t in table_words) for w in span.phrase.split()) and (
            not whole_name(span.phrase)
        ):
            return None  # the table's noun names the rows, not this column
        phrase = span.phrase
        if all(w.lemma in broad for w in words(phrase) if not is_stop_word(w.lemma)):
            phrase = _specific_phrase(question, phrase, related) or phrase
        return TermChoice(phrase, (), origin)

    steps: list[tuple[str, str, bool]] = []
    for name in names:
        steps.append((name, "column_name", False))
    for name in names:
        steps.append((name, "column_name", True))
    for name in names:
        steps += [(tail, "column_name", True) for tail in tails(name)[1:]]
    for synonym in synonyms:
        steps += [(tail, "synonym", True) for tail in tails(synonym)]
    for stem in (False, True):
        for phrase, origin, widen in steps:
            if widen != stem:
                continue
            found = accept(find_phrase(question, phrase, stem=stem), origin, widen=stem)
            if found is not None:
                return found
    for name in names:  # any other run of a name's words ("net worth" of "net worth millions")
        span = common_phrase(question, name, stem=True, exclude=table_words)
        found = accept(span, "column_name", widen=True)
        if found is not None:
            return found
    return None


def _noun_form(word: str) -> bool:
    """Whether a word is its own lemma or a plural of it (not "made" or "created")."""
    folded, base = word.lower(), lemma(word)
    return folded in (base, base + "s", base + "es", base[:-1] + "ies")


def column_aliases(
    term: str,
    readings: list[str],
    names: Iterable[str],
    *,
    broad: frozenset[str] = frozenset(),
) -> list[str]:
    """The aliases of a column-synonym ambiguity: what tells its readings apart, in natural form.

    The two synonym columns (:func:`~ambitab_gym.aliases.reading_aliases` over the readings'
    SQL), the original column's names, and the head noun of a compound term ("companies" of
    "record companies", "miles" of "miles per gallon"; not a verb form such as "made") unless
    it is a broad word (:func:`broad_words`: "year" where another column is a year); finished
    with :func:`~ambitab_gym.aliases.clean_aliases`.

    Args:
        term: the ambiguity's term.
        readings: the two readings' SQL.
        names: the original column's names (Spider's natural name, the identifier).
        broad: lemmas that do not single out the column.

    >>> column_aliases("age", ["SELECT years_old FROM singer", "SELECT birthdate FROM singer"],
    ...                ["age", "Age"])
    ['years old', 'birthdate']
    >>> column_aliases("record companies", ["SELECT recording_label FROM orchestra",
    ...                "SELECT audio_company FROM orchestra"], ["record company"])
    ['recording label', 'audio company', 'companies']
    >>> column_aliases("release year", ["SELECT track_release_year FROM singer",
    ...                "SELECT composition_release_year FROM singer"], ["song release year"],
    ...                broad=frozenset({"year"}))
    ['track release year', 'composition release year', 'song release year']
    >>> column_aliases("miles per gallon", ["SELECT fuel_efficiency FROM cars_data",
    ...                "SELECT mileage_per_gallon FROM cars_data"], ["mpg"])
    ['fuel efficiency', 'mileage per gallon', 'mpg', 'miles']
    """
    candidates = [*reading_aliases(readings, dialect="sqlite"), *map(natural_name, names)]
    parts = term.split()
    before = next((i for i, w in enumerate(parts) if is_stop_word(w)), len(parts))
    head = parts[before - 1] if before else ""  # "miles" of "miles per gallon"
    if len(parts) > 1 and head and lemma(head) not in broad and _noun_form(head):
        candidates.append(head)
    return clean_aliases(term, [c for c in candidates if term_problem(c) is None])


def quote_identifier(sql: str, name: str) -> str:
    """The SQL with every use of a column name quoted where the bare name would not parse
    (a hyphen, a space, a leading digit or an SQL keyword); string literals are left alone.

    >>> print(quote_identifier("SELECT e-mail FROM t WHERE T1.e-mail = 'e-mail'", "e-mail"))
    SELECT "e-mail" FROM t WHERE T1."e-mail" = 'e-mail'
    >>> quote_identifier("SELECT order FROM t ORDER BY order", "order")
    'SELECT "order" FROM t ORDER BY "order"'
    >>> quote_identifier("SELECT age FROM t", "age")
    'SELECT age FROM t'
    """
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name.upper() not in _KEYWORDS
    if plain:
        return sql
    words = [re.escape(w) for w in name.split()]
    pattern = re.compile(r'(?<![\w"])' + r"\s+".join(words) + r'(?![\w"])', re.IGNORECASE)
    keyword = name.upper() in _KEYWORDS
    parts = re.split(r"('(?:[^']|'')*')", sql)
    out = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(part)
            continue

        def replace(found: re.Match[str], _part: str = part) -> str:
            if keyword:
                after = _part[found.end() :].lstrip().upper()
                if after.startswith("BY") and found.group(0).upper() in {"ORDER", "GROUP"}:
                    return found.group(0)
            return _q(name)

        out.append(pattern.sub(replace, part))
    return "".join(out)


_KEYWORDS = frozenset(
    [
        "ABORT",
        "ACTION",
        "ADD",
        "AFTER",
        "ALL",
        "ALTER",
        "ANALYZE",
        "AND",
        "AS",
        "ASC",
        "ATTACH",
        "BEFORE",
        "BEGIN",
        "BETWEEN",
        "BY",
        "CASCADE",
        "CASE",
        "CAST",
        "CHECK",
        "COLLATE",
        "COLUMN",
        "COMMIT",
        "CONFLICT",
        "CONSTRAINT",
        "CREATE",
        "CROSS",
        "CURRENT_DATE",
        "CURRENT_TIME",
        "CURRENT_TIMESTAMP",
        "DATABASE",
        "DEFAULT",
        "DEFERRABLE",
        "DEFERRED",
        "DELETE",
        "DESC",
        "DETACH",
        "DISTINCT",
        "DROP",
        "EACH",
        "ELSE",
        "END",
        "ESCAPE",
        "EXCEPT",
        "EXCLUSIVE",
        "EXISTS",
        "EXPLAIN",
        "FOR",
        "FOREIGN",
        "FROM",
        "FULL",
        "GLOB",
        "GROUP",
        "HAVING",
        "IF",
        "IN",
        "INDEX",
        "INNER",
        "INSERT",
        "INTERSECT",
        "INTO",
        "IS",
        "ISNULL",
        "JOIN",
        "KEY",
        "LEFT",
        "LIKE",
        "LIMIT",
        "MATCH",
        "NATURAL",
        "NOT",
        "NOTNULL",
        "NULL",
        "OF",
        "OFFSET",
        "ON",
        "OR",
        "ORDER",
        "OUTER",
        "PRIMARY",
        "REFERENCES",
        "RIGHT",
        "ROLLBACK",
        "SELECT",
        "SET",
        "TABLE",
        "THEN",
        "TO",
        "TRANSACTION",
        "UNION",
        "UNIQUE",
        "UPDATE",
        "USING",
        "VALUES",
        "VIEW",
        "WHEN",
        "WHERE",
        "WITH",
    ]
)


def _record(
    *,
    record_id: str,
    avt_id: str,
    split: str,
    row: dict,
    database: str,
    table: str,
    column: str,
    synonym: str,
    choice: TermChoice,
    sql: str,
    copied: str,
    synonyms: tuple[str, str],
    source_file: str,
    index: int,
) -> TaskRecord:
    return parse_record(
        {
            "id": record_id,
            "avt_id": avt_id,
            "corpus": "ambiqt",
            "split": split,
            "spec": {"request": row["question"].strip(), "database": database},
            "ambiguities": [
                {
                    "id": f"column_{column.lower()}",
                    "term": choice.term,
                    "aliases": list(choice.aliases),
                    "kind": "critical",
                    "resolution": f"the {synonym} column of the {table} table",
                    "response": f"I mean the {synonym} column of the {table} table.",
                    "sql_snippet": f"{table}.{synonym}",
                }
            ],
            "verification": {
                "engine": "sqlite",
                "database": database,
                "reference_sql": sql,
                "compare": compare_for(sql).model_dump(),
            },
            "source": {
                "kind": "ambiqt",
                "file": source_file,
                "index": index,
                "db_id": row["db_id"],
                "orig_example_idx": row.get("orig_example_idx"),
                "orig_query": row.get("orig_query"),
                "table": table,
                "column": column,
                "synonyms": list(synonyms),
                "copied_column": copied,
                "term_origin": {f"column_{column.lower()}": choice.origin},
            },
        }
    )


def convert(options: BuildOptions, workspace: Workspace) -> Conversion:
    """Convert an AmbiQT checkout (column synonyms) plus Spider's databases.

    Args:
        options: ``source`` is the AmbiQT checkout (or its ``col-synonyms`` folder or one
            file); ``databases`` is Spider's ``database/`` folder.
        workspace: where the rebuilt databases go.
    """
    files = _find_files(options.source)
    db_root = _database_root(options)
    spider = _spider_tables(options.source)
    conversion = Conversion(
        corpus="ambiqt",
        oracle="intent",
        description=(
            "AmbiTab-AmbiQT built from AmbiQT's column-synonym subset: each Spider column that "
            "AmbiQT renames holds both synonyms, one with the original values and one resampled "
            "from them; each item yields one record per synonym reading."
        ),
        licence="CC BY-SA 4.0 (Spider and AmbiQT data); see provenance",
        upstream=UPSTREAM,
    )
    base = options.source if options.source.is_dir() else options.source.parent
    for path in files:
        conversion.inputs[_relative(path, base)] = sha256_file(path)
    variants: dict[str, str] = {}  # database name -> variant description
    finder = None
    if options.llm_url:
        from ambitab_gym.convert.hooks import LLMClient, LLMTermFinder

        finder = LLMTermFinder(
            LLMClient(
                options.llm_url, options.model or "", seed=options.seed, cache=options.llm_cache
            )
        )
    for path in files:
        split = SPLIT_NAMES[path.stem]
        rows = json.loads(path.read_text("utf-8"))
        label = _relative(path, base)
        for index, row in progress(
            list(enumerate(rows)), desc=f"ambiqt {path.stem}", enabled=options.show_progress
        ):
            key = f"{label}#{index}"
            try:
                item = _convert_item(
                    row,
                    key,
                    split,
                    index,
                    label,
                    options,
                    workspace,
                    db_root,
                    spider,
                    variants,
                    finder,
                )
            except MALFORMED as error:
                item = malformed(key, error)
            if isinstance(item, Drop):
                conversion.drops.append(item)
            else:
                conversion.items.append(item)
    conversion.notes["rebuilt_databases"] = len(variants)
    return conversion


def _relative(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return path.name


def _convert_item(
    row: dict,
    key: str,
    split: str,
    index: int,
    label: str,
    options: BuildOptions,
    workspace: Workspace,
    db_root: Path,
    spider: dict[str, dict],
    variants: dict[str, str],
    finder=None,
) -> Item | Drop:
    extra = row.get("extra_map") or {}
    changes = [(t, c, s) for t, m in extra.items() for c, s in m.items()]
    if len(changes) != 1:
        return Drop(key, "not_single_column", f"extra_map renames {len(changes)} columns")
    table, column, synonyms = changes[0]
    if not isinstance(synonyms, list) or len(synonyms) != 2:
        return Drop(key, "not_single_column", "extra_map needs exactly two synonyms")
    db_id = row["db_id"]
    source_db = db_root / db_id / f"{db_id}.sqlite"
    if not source_db.is_file():
        return Drop(key, "database_missing", f"{source_db} not found")
    names = _actual_names(source_db, table, column)
    if names is None:
        return Drop(key, "column_not_found", f"{table}.{column} is not in {db_id}")
    actual_table, actual_column, _, existing = names
    syn1, syn2 = str(synonyms[0]), str(synonyms[1])
    if syn1.lower() == syn2.lower() or {syn1.lower(), syn2.lower()} & (
        set(existing) - {actual_column.lower()}
    ):
        return Drop(key, "synonym_collides", f"{syn1}/{syn2} clash with columns of {actual_table}")
    queries = []
    for sql in (row["query1"], row["query2"]):
        for synonym in (syn1, syn2):
            sql = quote_identifier(sql, synonym)
        queries.append(sql)
    clash = _collision(source_db, actual_table, (syn1, syn2), queries)
    if clash:
        return Drop(key, "synonym_collides", clash)
    if _protected(source_db, actual_table, actual_column, spider.get(db_id)):
        return Drop(key, "protected_key_column", f"{actual_table}.{actual_column} is a key column")
    identity = "|".join([db_id, row["question"], row["query1"], row["query2"]])
    copied = syn1 if seeded_rng(options.seed, "copied", identity).random() < 0.5 else syn2
    variant = "|".join([db_id, actual_table, actual_column, syn1, syn2])
    database = f"{db_id}_{hashlib.sha256((variant + '|' + copied).encode()).hexdigest()[:8]}"
    if database not in workspace:

        def build(target: Path, *, _s=source_db, _t=actual_table, _c=actual_column) -> None:
            rebuild_database(
                _s,
                target,
                table=_t,
                column=_c,
                synonyms=(syn1, syn2),
                copied=copied,
                seed=options.seed,
                variant_key=variant,
            )

        workspace.add_built(database, build)
        variants[database] = variant
    results = []
    for sql in queries:
        try:
            results.append(workspace.execute(database, sql))
        except QueryError as error:
            if "ambiguous column name" in error.message.lower():
                return Drop(key, "synonym_collides", error.message[:300])
            return Drop(key, "reading_failed", error.message[:300])
        except sqlite3.Error as error:
            return Drop(key, "rebuild_failed", str(error)[:300])
    rules = compare_for(queries[0])
    if results_match(results[0], results[1], rules):
        return Drop(key, "equal_results", "both readings return the same result")
    natural = None
    entry = spider.get(db_id)
    table_natural = actual_table
    if entry:
        tables = [t.lower() for t in entry["table_names_original"]]
        if actual_table.lower() in tables:
            t_index = tables.index(actual_table.lower())
            table_natural = entry.get("table_names", entry["table_names_original"])[t_index]
            for (t, c), (_, n) in zip(
                entry["column_names_original"], entry["column_names"], strict=False
            ):
                if t == t_index and c.lower() == actual_column.lower():
                    natural = n
    question = str(row["question"]).strip()
    others = _other_columns(source_db, actual_table, actual_column, entry)
    choice = column_term(
        question,
        actual_column,
        natural,
        table=table_natural,
        synonyms=(syn1, syn2),
        other_columns=others,
    )
    if choice is None and finder is not None:
        found = finder.find(question, f"the {natural or actual_column} column of {table_natural}")
        if found and term_problem(found) is None and find_term(question, found) is not None:
            choice = TermChoice(found, (), "llm")
    if choice is None:
        return Drop(
            key, "no_term_in_request", f"the question never names {actual_table}.{actual_column}"
        )
    aliases = column_aliases(
        choice.term,
        queries,
        [n for n in (natural, actual_column) if n],
        broad=broad_words(others, table_natural),
    )
    choice = TermChoice(choice.term, tuple(aliases), choice.origin)
    avt_id = f"ambiqt-{split}-{index:05d}"
    records = [
        _record(
            record_id=f"{avt_id}-{n}",
            avt_id=avt_id,
            split=split,
            row=row,
            database=database,
            table=actual_table,
            column=actual_column,
            synonym=synonym,
            choice=choice,
            sql=sql,
            copied=copied,
            synonyms=(syn1, syn2),
            source_file=label,
            index=index,
        )
        for n, (synonym, sql) in enumerate(((syn1, queries[0]), (syn2, queries[1])), start=1)
    ]
    return Item(key, records, min_records=2)
