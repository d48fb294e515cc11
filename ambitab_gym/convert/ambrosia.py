"""Ambrosia's CSV -> AmbiTab-Ambrosia (one record per annotated reading).

Ambrosia (``ambrosia.csv``) has one row per ambiguous question (``is_ambiguous`` true, several
``gold_queries`` separated by blank lines) and one row per unambiguous reading (one gold query;
linked to its ambiguous question by ``db_file`` and the gold query). Every row carries the
SQLite script of its database in ``db_dump``.

For every ambiguous question of the test partition (few-shot rows are excluded) this converter
emits one record per reading: the ambiguous question is the request, the reading's own
question is its resolution (and frozen response), its SQL the reference. The ambiguity term
comes from the annotation type: the quantified phrase for ``scope``, the attached modifier for
``attachment`` and the words the readings replace for ``vague``. Databases are built from the
dumps by SQLite itself, so foreign keys with ``ON DELETE CASCADE``, transactions, pragmas,
indexes, views, updates and deletes all behave as in SQLite; statements SQLite rejects (other
dialects' ``SET`` or ``LOCK`` lines) are skipped and counted. Local train and test slices are
database-disjoint within each ambiguity type, toward a 20% test share, drawn with the seed.

* :func:`convert` - the converter entry point.
* :func:`build_from_dump` - a SQLite database from a dump, robustly.
* :func:`ambiguity_term` - the term of an ambiguous question.
* :func:`split_gold_queries` - the SQL of a ``gold_queries`` cell.
"""

from __future__ import annotations

import csv
import re
import sqlite3
import sys
from pathlib import Path

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
    seeded_rng,
    sha256_file,
    slug,
)
from ambitab_gym.records import parse_record

__all__ = [
    "TEST_SHARE",
    "ambiguity_term",
    "assign_splits",
    "build_from_dump",
    "convert",
    "split_gold_queries",
]

TEST_SHARE = 0.2

UPSTREAM = {
    "name": "Ambrosia",
    "url": "https://ambrosia-benchmark.github.io/",
    "citation": "Saparina & Lapata, 2024, AMBROSIA: A Benchmark for Parsing Ambiguous "
    "Questions into Database Queries",
    "licence": "see the Ambrosia release; its authors ask that the data not be re-uploaded "
    "to public repositories",
}

_STOP = {
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "and", "or", "with", "by", "from",
    "is", "are", "was", "were", "be", "do", "does", "did", "what", "which", "who", "whom",
    "how", "many", "much", "show", "list", "give", "me", "all", "each", "every", "that",
    "there", "their", "its", "it", "as", "than", "have", "has", "any", "can", "you", "i",
}  # fmt: skip
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")
_SCOPE = re.compile(r"\b(?:each|every|all(?:\s+the)?|any|both)\s+[A-Za-z][\w-]*", re.IGNORECASE)
_MODIFIER = (
    r"(?:with|without|that|who|which|having|in|on|at|from|of|for|near|located|offering|serving|"
    r"selling|providing|whose)"
)
_ATTACHMENT = re.compile(
    r"\b[\w-]+\s+(?:and|or)\s+(?:[\w-]+\s+){0,2}?[\w-]+\s+(" + _MODIFIER + r"\b[^?.!,;]*)",
    re.IGNORECASE,
)
_LAST_MODIFIER = re.compile(r"\b(" + _MODIFIER + r"\b[^?.!,;]*)[?.!]?\s*$", re.IGNORECASE)


def split_gold_queries(cell: str) -> list[str]:
    """The SQL statements of a ``gold_queries`` cell (separated by blank lines).

    >>> split_gold_queries("SELECT 1;\\n\\nSELECT\\n  2\\n")
    ['SELECT 1', 'SELECT\\n  2']
    """
    parts = re.split(r"\n\s*\n", (cell or "").strip())
    return [p.strip().rstrip(";").strip() for p in parts if p.strip()]


def _normal_sql(sql: str) -> str:
    return " ".join(sql.replace(";", " ").split()).lower()


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _vague_term(question: str, readings: list[str]) -> str | None:
    """The longest run of question words that some reading does not repeat."""
    reading_words = [{w.lower() for w in _words(r)} for r in readings]
    words = _words(question)
    flags = [any(w.lower() not in rw for rw in reading_words) for w in words]
    best: tuple[int, int] | None = None
    start = None
    for i, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            run = (start, i)
            content = [w for w in words[start:i] if w.lower() not in _STOP]
            if content and (best is None or i - start > best[1] - best[0]):
                best = run
            start = None
    if best is None:
        return None
    run = words[best[0] : best[1]]
    while run and run[0].lower() in _STOP:
        run = run[1:]
    while run and run[-1].lower() in _STOP:
        run = run[:-1]
    return " ".join(run) or None


def ambiguity_term(question: str, ambig_type: str, readings: list[str]) -> str:
    """The phrase of an ambiguous question that its readings disagree on.

    Args:
        question: the ambiguous question.
        ambig_type: ``scope``, ``attachment`` or ``vague``.
        readings: the questions of its unambiguous readings.

    >>> ambiguity_term("Which classes does every gym offer?", "scope", [])
    'every gym'
    >>> ambiguity_term("List hotels and restaurants with a pool.", "attachment", [])
    'with a pool'
    >>> ambiguity_term("Which restaurants are popular?", "vague",
    ...     ["Which restaurants have more than 100 reviews?", "Which restaurants are rated above 4?"])
    'popular'
    """
    kind = (ambig_type or "").strip().lower()
    term = None
    if kind == "scope":
        found = _SCOPE.search(question)
        term = found.group(0) if found else None
    elif kind == "attachment":
        found = _ATTACHMENT.search(question) or _LAST_MODIFIER.search(question)
        term = found.group(1).strip() if found else None
    if term is None and readings:
        term = _vague_term(question, readings)
    if term is None:
        found = _LAST_MODIFIER.search(question)
        term = found.group(1).strip() if found else None
    if term is None:
        content = [w for w in _words(question) if w.lower() not in _STOP]
        term = content[-1] if content else question.strip()
    return term


def _execute_statements(connection: sqlite3.Connection, script: str) -> int:
    """Run a script statement by statement, skipping the ones SQLite rejects."""
    skipped = 0
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if not sqlite3.complete_statement(buffer):
            continue
        statement, buffer = buffer.strip(), ""
        if not statement:
            continue
        try:
            connection.execute(statement)
        except sqlite3.Error:
            skipped += 1
    if buffer.strip():
        skipped += 1
    return skipped


def _scratch(path: Path) -> sqlite3.Connection:
    """A connection for building a database file (no fsync: a failed build is rebuilt)."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA synchronous = OFF")
    return connection


def build_from_dump(script: str, path: Path) -> int:
    """Build a SQLite database from an Ambrosia ``db_dump``.

    The whole script runs as SQLite runs it (cascading deletes included when the dump turns
    foreign keys on); when SQLite rejects a statement, the database is rebuilt statement by
    statement and the rejected statements are skipped.

    Returns:
        The number of skipped statements.

    Raises:
        BuildError: when no table came out of the dump.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "d.sqlite"
        >>> build_from_dump("SET NAMES utf8;\\nCREATE TABLE t(x);\\nINSERT INTO t VALUES (1);", path)
        1
        >>> sqlite3.connect(path).execute("SELECT x FROM t").fetchall()
        [(1,)]
    """
    path.unlink(missing_ok=True)
    connection = _scratch(path)
    skipped = 0
    try:
        try:
            connection.executescript(script)
        except sqlite3.Error:
            connection.close()
            path.unlink(missing_ok=True)
            connection = _scratch(path)
            skipped = _execute_statements(connection, script)
        if connection.in_transaction:
            connection.execute("COMMIT")
        tables = connection.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'")
        if not tables.fetchone()[0]:
            raise BuildError(f"the dump for {path.stem} creates no table")
    finally:
        connection.close()
    return skipped


def _truthy(value: str | None) -> bool:
    return str(value or "").strip().lower() in {"true", "1", "yes", "t"}


def _read_rows(path: Path) -> list[dict[str, str]]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = {"question", "gold_queries", "ambig_type", "db_file", "db_dump", "is_ambiguous"}
        missing -= set(reader.fieldnames or [])
        if missing:
            raise BuildError(f"{path}: not an Ambrosia CSV, columns {sorted(missing)} are missing")
        return list(reader)


def _database_names(db_files: list[str]) -> dict[str, str]:
    names: dict[str, str] = {}
    taken: set[str] = set()
    for db_file in sorted(set(db_files)):
        path = Path(db_file)
        for candidate in (
            slug(path.stem),
            slug(f"{path.parent.name}_{path.stem}"),
            slug("_".join(path.with_suffix("").parts[-3:])),
        ):
            if candidate not in taken:
                break
        else:
            candidate = f"{slug(path.stem)}_{len(taken)}"
        names[db_file] = candidate
        taken.add(candidate)
    return names


def assign_splits(items: list[Item], types: dict[str, str], seed: int) -> dict[str, str]:
    """Database -> split: database-disjoint within each ambiguity type, toward 20% test.

    Databases of a type are visited in a seeded order; each goes to ``test`` when that brings
    the type's test records closer to 20%, else to ``train``.

    Args:
        items: the converted items (their first record names the database).
        types: item key -> ambiguity type.
        seed: the build seed.
    """
    sizes: dict[str, dict[str, int]] = {}
    for item in items:
        database = item.records[0].spec.database
        kind = types[item.key]
        sizes.setdefault(kind, {}).setdefault(database, 0)
        sizes[kind][database] += len(item.records)
    split: dict[str, str] = {}
    for kind in sorted(sizes):
        databases = sorted(sizes[kind])
        order = seeded_rng(seed, "ambrosia-split", kind).permutation(len(databases))
        target = TEST_SHARE * sum(sizes[kind].values())
        test = 0
        for index in order:
            database = databases[int(index)]
            n = sizes[kind][database]
            if database in split:
                continue
            if len(databases) > 1 and abs(test + n - target) < abs(test - target):
                split[database] = "test"
                test += n
            else:
                split[database] = "train"
    return split


def convert(options: BuildOptions, workspace: Workspace) -> Conversion:
    """Convert ``ambrosia.csv`` (or a folder holding it).

    Args:
        options: ``source`` is the CSV or its folder.
        workspace: where the databases built from the dumps go.
    """
    source = options.source
    if source.is_dir():
        candidates = sorted(source.glob("*.csv"))
        if not candidates:
            raise BuildError(f"no Ambrosia CSV in {source}: give ambrosia.csv with --source")
        source = next((c for c in candidates if c.name == "ambrosia.csv"), candidates[0])
    rows = _read_rows(source)
    conversion = Conversion(
        corpus="ambrosia",
        oracle="intent",
        description=(
            "AmbiTab-Ambrosia built from Ambrosia's ambiguous test partition: one record per "
            "annotated reading (scope, attachment, vagueness) with its own SQL."
        ),
        licence=UPSTREAM["licence"],
        upstream=UPSTREAM,
        inputs={source.name: sha256_file(source)},
    )
    few_shot = {"few_shot", "fewshot", "few-shot"}
    rows = [{**row, "_row": str(number)} for number, row in enumerate(rows, start=1)]
    for row in rows:
        if (row.get("split") or "").strip().lower() in few_shot and _truthy(row["is_ambiguous"]):
            conversion.drops.append(Drop(f"{source.name}:row{row['_row']}", "few_shot_example"))
    rows = [r for r in rows if (r.get("split") or "test").strip().lower() not in few_shot]
    names = _database_names([r["db_file"] for r in rows])
    dumps: dict[str, str] = {}
    for row in rows:
        dumps.setdefault(row["db_file"], row["db_dump"])
    skipped: dict[str, int] = {}
    for db_file, dump in sorted(dumps.items()):
        name = names[db_file]

        def build(target: Path, *, _dump=dump, _name=name) -> None:
            skipped[_name] = build_from_dump(_dump, target)

        workspace.add_built(name, build)
    readings: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        if not _truthy(row["is_ambiguous"]):
            for sql in split_gold_queries(row["gold_queries"])[:1]:
                readings.setdefault((row["db_file"], _normal_sql(sql)), []).append(row)
    types: dict[str, str] = {}
    ambiguous = [r for r in rows if _truthy(r["is_ambiguous"])]
    for row in progress(ambiguous, desc="ambrosia", enabled=options.show_progress):
        key = f"{source.name}:row{row['_row']}"
        try:
            item = _item(row, key, int(row["_row"]), names, readings)
        except MALFORMED as error:
            item = malformed(key, error)
        if isinstance(item, Drop):
            conversion.drops.append(item)
            continue
        types[key] = row["ambig_type"].strip().lower()
        conversion.items.append(item)
    split = assign_splits(conversion.items, types, options.seed)
    for item in conversion.items:
        item.records = [
            r.model_copy(update={"split": split[r.spec.database]}) for r in item.records
        ]
    conversion.notes["skipped_dump_statements"] = skipped
    return conversion


def _item(row, key, index, names, readings) -> Item | Drop:
    database = names[row["db_file"]]
    queries = split_gold_queries(row["gold_queries"])
    linked = []
    for sql in queries:
        candidates = readings.get((row["db_file"], _normal_sql(sql)), [])
        own = [
            c
            for c in candidates
            if (c.get("ambig_question") or "").strip() == row["question"].strip()
        ]
        chosen = (own or candidates or [None])[0]
        linked.append((sql, chosen))
    unlinked = [sql for sql, reading in linked if reading is None]
    linked = [(sql, reading) for sql, reading in linked if reading is not None]
    if len(linked) < 2:
        detail = f"{len(queries)} gold queries, {len(unlinked)} without a reading question"
        return Drop(key, "fewer_than_two_readings", detail)
    question = row["question"].strip()
    kind = row["ambig_type"].strip().lower()
    reading_questions = [reading["question"].strip() for _, reading in linked]
    term = ambiguity_term(question, kind, reading_questions)
    avt_id = f"ambrosia-{index:05d}"
    records = []
    for n, (sql, reading) in enumerate(linked, start=1):
        intent = reading["question"].strip()
        records.append(
            parse_record(
                {
                    "id": f"{avt_id}-{n}",
                    "avt_id": avt_id,
                    "corpus": "ambrosia",
                    "split": "test",
                    "spec": {"request": question, "database": database},
                    "ambiguities": [
                        {
                            "id": slug(kind) or "ambiguity",
                            "term": term,
                            "kind": "critical",
                            "resolution": intent,
                            "response": f"I mean this: {intent}",
                        }
                    ],
                    "verification": {
                        "engine": "sqlite",
                        "database": database,
                        "reference_sql": sql,
                        "compare": compare_for(sql).model_dump(),
                    },
                    "source": {
                        "kind": "ambrosia",
                        "ambig_type": kind,
                        "db_file": row["db_file"],
                        "reading": n,
                        "unlinked_gold_queries": len(unlinked),
                    },
                },
                where=key,
            )
        )
    return Item(key, records, min_records=2)
