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
    Span,
    TermChoice,
    Workspace,
    compare_for,
    diff_phrase,
    find_term,
    is_stop_word,
    malformed,
    progress,
    seeded_rng,
    sha256_file,
    slug,
    strip_instructions,
    term_problem,
    words_match,
)
from ambitab_gym.records import parse_record

__all__ = [
    "ATTACHMENT_SUFFIX",
    "FEW_SHOT_SPLITS",
    "TEST_SHARE",
    "ambiguity_term",
    "public_request",
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

#: What both upstream loaders append to attachment questions (the public request carries it
#: exactly once; it is stripped before term extraction).
ATTACHMENT_SUFFIX = "Show them in one table."

#: Split labels of the few-shot rows (official: ``few_shot_examples``); they are excluded.
FEW_SHOT_SPLITS = frozenset({"few_shot_examples", "few_shot_example", "few_shot", "fewshot"})
#: Split labels whose rows are converted (official ``test``; re-splits ``train``/``validation``).
KEPT_SPLITS = frozenset({"test", "train", "validation", "dev", ""})

_QUANTIFIER = re.compile(r"\b(?:each|every|all(?:\s+(?:the|of\s+the))?|any|both)\s+", re.IGNORECASE)
_MODIFIER = (
    r"(?:with|without|that|who|which|having|in|on|at|from|of|for|near|whose|"
    r"[a-z]{2,}(?:ed|ing)|born|made|known|held|built|written|taken|given|led|sold|kept|found|"
    r"shown|seen|run)"  # participles: "born in 1970", "located in Boston", "offering yoga"
)
_MODIFIER_WORD = re.compile(_MODIFIER)


def split_gold_queries(cell: str) -> list[str]:
    """The SQL statements of a ``gold_queries`` cell (separated by blank lines).

    >>> split_gold_queries("SELECT 1;\\n\\nSELECT\\n  2\\n")
    ['SELECT 1', 'SELECT\\n  2']
    """
    parts = re.split(r"\n\s*\n", (cell or "").strip())
    return [p.strip().rstrip(";").strip() for p in parts if p.strip()]


def _normal_sql(sql: str) -> str:
    return " ".join(sql.replace(";", " ").split()).lower()


def _split_label(value: str | None) -> str:
    return re.sub(r"[\s-]+", "_", str(value or "").strip().lower())


def public_request(question: str, ambig_type: str) -> str:
    """The request as upstream loaders present it: the attachment suffix exactly once.

    >>> public_request("List hotels and restaurants with a pool.", "attachment")
    'List hotels and restaurants with a pool. Show them in one table.'
    >>> public_request("List hotels with a pool. Show them in one table.", "attachment")
    'List hotels with a pool. Show them in one table.'
    >>> public_request("Which shops are popular? Show them in one table.", "vague")
    'Which shops are popular?'
    """
    bare = strip_instructions(question)
    if (ambig_type or "").strip().lower() == "attachment":
        return f"{bare} {ATTACHMENT_SUFFIX}"
    return bare


def _tokens(text: str) -> list[re.Match[str]]:
    return list(re.finditer(r"[A-Za-z0-9][A-Za-z0-9'_-]*", text))


def _scope_span(question: str, readings: list[str]) -> Span | None:
    """The quantified noun phrase ("each streaming service"): the quantifier and the words
    after it that some reading repeats in the same order (the readings bound the phrase)."""
    reading_words = [[m.group(0) for m in _tokens(r)] for r in readings]
    for found in _QUANTIFIER.finditer(question):
        after = [m for m in _tokens(question) if m.start() >= found.end()]
        best = 0
        for words in reading_words:
            for start in range(len(words)):
                n = 0
                while (
                    n < len(after)
                    and start + n < len(words)
                    and not is_stop_word(after[n].group(0))
                    and words_match(after[n].group(0), words[start + n])
                    and question[
                        (after[n - 1].end() if n else found.end()) : after[n].start()
                    ].strip()
                    == ""
                ):
                    n += 1
                best = max(best, n)
        if best == 0 and after and not is_stop_word(after[0].group(0)):
            best = 1  # no reading repeats the noun: the quantifier and its first word
        if (
            best > 1
            and _ends_clause(question, after[best - 1].end())
            and _AUXILIARY.search(question[: found.start()])
        ):
            best -= 1  # "does every gym offer?": the last word is the verb
        if best:
            return Span(
                found.start(),
                after[best - 1].end(),
                question[found.start() : after[best - 1].end()],
            )
    return None


_AUXILIARY = re.compile(r"\b(?:do|does|did|can|could|will|would|should|have|has|had)\b", re.I)


def _ends_clause(text: str, position: int) -> bool:
    """Whether only closing punctuation follows a position up to the end of its sentence."""
    return re.match(r"\s*(?:[?.!;]|$)", text[position:]) is not None


def _attachment_span(question: str) -> Span | None:
    """The modifier whose attachment is ambiguous ("with a pool" in "hotels and restaurants
    with a pool"): the first modifier word within four words after "and"/"or" (after at least
    one word), up to the end of its clause."""
    words = _tokens(question)
    for index, word in enumerate(words):
        if word.group(0).lower() not in {"and", "or"}:
            continue
        for later in words[index + 2 : index + 6]:
            if _MODIFIER_WORD.fullmatch(later.group(0).lower()):
                start = later.start()
                end = start + len(re.split(r"[?.!,;]", question[start:], maxsplit=1)[0])
                clause = _tokens(question[start:end])
                while len(clause) > 1 and is_stop_word(clause[-1].group(0)):
                    clause.pop()
                end = start + clause[-1].end()
                return Span(start, end, question[start:end])
    return None


def ambiguity_term(question: str, ambig_type: str, readings: list[str]) -> TermChoice | None:
    """The phrase of an ambiguous question that its readings disagree on, and how it was found.

    The attachment suffix is stripped from the question and the readings first. ``scope``: the
    quantifier and the noun phrase after it, as far as a reading repeats it
    (``question_diff``); ``attachment``: the modifier after "X and Y" (``question_pattern``);
    ``vague``: the longest run of words no reading repeats (``question_diff``). None when no
    phrase of the question qualifies (see :func:`~ambitab_gym.convert.common.term_problem`).

    Args:
        question: the ambiguous question.
        ambig_type: ``scope``, ``attachment`` or ``vague``.
        readings: the questions of its unambiguous readings.

    >>> ambiguity_term("Which classes does every gym offer?", "scope",
    ...     ["Which classes are offered by all gyms?", "For each gym, which classes does it offer?"]).term
    'every gym'
    >>> ambiguity_term("What films does each streaming service offer?", "scope",
    ...     ["For each streaming service, what films does it offer?"]).term
    'each streaming service'
    >>> ambiguity_term("What activities does each club run?", "scope",
    ...     ["What activities do all clubs run?", "For each club, what does it run?"]).term
    'each club'
    >>> ambiguity_term("List hotels and restaurants with a pool. Show them in one table.", "attachment",
    ...     []).term
    'with a pool'
    >>> ambiguity_term("What's the most popular shop?", "vague",
    ...     ["What is the shop with most customers?", "What is the shop with the best rating?"]).term
    'popular'
    >>> ambiguity_term("Name the screenwriters and directors born in 1970.", "attachment", []).term
    'born in 1970'
    >>> ambiguity_term("Show them in one table.", "attachment", []) is None
    True
    """
    kind = (ambig_type or "").strip().lower()
    bare = strip_instructions(question)
    readings = [strip_instructions(r) for r in readings]
    attempts: list[tuple[Span | None, str]] = []
    if kind == "scope":
        attempts.append((_scope_span(bare, readings), "question_diff"))
    elif kind == "attachment":
        attempts.append((_attachment_span(bare), "question_pattern"))
    if readings:
        attempts.append((diff_phrase(bare, readings), "question_diff"))
    for span, origin in attempts:
        if span is not None and term_problem(span.phrase) is None:
            return TermChoice(span.phrase, (), origin)
    return None


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

    Rows whose ``split`` is a few-shot label (official ``few_shot_examples``) are excluded
    (``few_shot_example``); ``test`` and the re-split labels ``train``/``validation`` are
    converted; any other label is dropped (``unknown_split``). A database whose dump yields
    no table drops its items (``database_build_failed``). With ``--llm-url``/``--model`` the
    term fallback asks the model when the question gives no phrase; otherwise such an item is
    dropped (``no_term_in_request``).

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
    rows = [{**row, "_row": str(number)} for number, row in enumerate(rows, start=1)]
    kept_rows = []
    for row in rows:
        label = _split_label(row.get("split"))
        key = f"{source.name}:row{row['_row']}"
        if label in FEW_SHOT_SPLITS:
            if _truthy(row.get("is_ambiguous")):
                conversion.drops.append(
                    Drop(key, "few_shot_example", f"split {row.get('split')!r}")
                )
            continue
        if label not in KEPT_SPLITS:
            if _truthy(row.get("is_ambiguous")):
                conversion.drops.append(Drop(key, "unknown_split", f"split {row.get('split')!r}"))
            continue
        missing = [f for f in ("question", "gold_queries", "db_file", "db_dump") if not row.get(f)]
        if missing:
            conversion.drops.append(malformed(key, KeyError(f"empty field(s) {missing}")))
            continue
        kept_rows.append(row)
    rows = kept_rows
    names = _database_names([r["db_file"] for r in rows])
    dumps: dict[str, str] = {}
    for row in rows:
        dumps.setdefault(row["db_file"], row["db_dump"])
    skipped: dict[str, int] = {}
    failed: dict[str, str] = {}
    for db_file, dump in sorted(dumps.items()):
        name = names[db_file]

        def build(target: Path, *, _dump=dump, _name=name) -> None:
            skipped[_name] = build_from_dump(_dump, target)

        workspace.add_built(name, build)
        try:
            workspace.path(name)
        except (BuildError, sqlite3.Error, OSError) as error:
            failed[db_file] = str(error)[:300]
    readings: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        if not _truthy(row["is_ambiguous"]):
            for sql in split_gold_queries(row["gold_queries"])[:1]:
                readings.setdefault((row["db_file"], _normal_sql(sql)), []).append(row)
    finder = None
    if options.llm_url:
        from ambitab_gym.convert.hooks import LLMClient, LLMTermFinder

        finder = LLMTermFinder(LLMClient(options.llm_url, options.model or "", seed=options.seed))
    types: dict[str, str] = {}
    ambiguous = [r for r in rows if _truthy(r["is_ambiguous"])]
    for row in progress(ambiguous, desc="ambrosia", enabled=options.show_progress):
        key = f"{source.name}:row{row['_row']}"
        if row["db_file"] in failed:
            conversion.drops.append(Drop(key, "database_build_failed", failed[row["db_file"]]))
            continue
        try:
            item = _item(row, key, int(row["_row"]), names, readings, finder)
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
    conversion.notes["failed_dumps"] = len(failed)
    conversion.notes["attachment_suffix"] = ATTACHMENT_SUFFIX
    return conversion


def _item(row, key, index, names, readings, finder=None) -> Item | Drop:
    database = names[row["db_file"]]
    queries = split_gold_queries(row["gold_queries"])
    question = strip_instructions(row["question"])
    linked = []
    for sql in queries:
        candidates = readings.get((row["db_file"], _normal_sql(sql)), [])
        own = [
            c for c in candidates if strip_instructions(c.get("ambig_question") or "") == question
        ]
        chosen = (own or candidates or [None])[0]
        linked.append((sql, chosen))
    unlinked = [sql for sql, reading in linked if reading is None]
    linked = [(sql, reading) for sql, reading in linked if reading is not None]
    if len(linked) < 2:
        detail = f"{len(queries)} gold queries, {len(unlinked)} without a reading question"
        return Drop(key, "fewer_than_two_readings", detail)
    kind = row["ambig_type"].strip().lower()
    request = public_request(question, kind)
    reading_questions = [strip_instructions(reading["question"]) for _, reading in linked]
    choice = ambiguity_term(question, kind, reading_questions)
    if choice is None and finder is not None:
        found = finder.find(
            question, f"{kind} ambiguity; its readings: " + " | ".join(reading_questions)
        )
        span = find_term(question, found) if found else None
        if span is not None and term_problem(span.phrase) is None:
            choice = TermChoice(span.phrase, (), "llm")
    if choice is None:
        return Drop(key, "no_term_in_request", f"no {kind} phrase found in {question!r}"[:300])
    avt_id = f"ambrosia-{index:05d}"
    ident = slug(kind) or "ambiguity"
    records = []
    for n, (sql, reading) in enumerate(linked, start=1):
        intent = strip_instructions(reading["question"])
        records.append(
            parse_record(
                {
                    "id": f"{avt_id}-{n}",
                    "avt_id": avt_id,
                    "corpus": "ambrosia",
                    "split": "test",
                    "spec": {"request": request, "database": database},
                    "ambiguities": [
                        {
                            "id": ident,
                            "term": choice.term,
                            "aliases": list(choice.aliases),
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
                        "upstream_split": row.get("split"),
                        "reading": n,
                        "unlinked_gold_queries": len(unlinked),
                        "term_origin": {ident: choice.origin},
                    },
                },
                where=key,
            )
        )
    return Item(key, records, min_records=2)
