"""AmbiQT (column-synonym subset) over Spider SQLite databases -> AmbiTab-AmbiQT.

Each AmbiQT item replaces one Spider column by two synonyms (``extra_map``) and gives one query
per synonym. For every item this converter

1. rejects protected key columns (primary keys and both ends of foreign keys);
2. rebuilds the Spider database with both synonym columns: a seeded per-item draw picks the
   column that keeps the original values, the other is resampled from them with replacement
   (the database of a (column, copied synonym) variant is built once and shared);
3. runs both queries and rejects the item when either fails or both return equal results;
4. emits two records (one AVT): the same question, one hidden reading per synonym.

* :func:`convert` - the converter entry point used by :func:`ambitab_gym.convert.build_corpus`.
* :func:`rebuild_database` - step 2 for one variant.
* :func:`column_term` - the phrase of the question that names the ambiguous column.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
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
)
from ambitab_gym.records import TaskRecord, parse_record
from ambitab_gym.verify.base import QueryError
from ambitab_gym.verify.compare import results_match

__all__ = ["SPLIT_NAMES", "column_term", "convert", "rebuild_database"]

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


def column_term(question: str, column: str, natural: str | None = None) -> tuple[str, list[str]]:
    """The phrase of the question that names a column, and further names for it.

    Looks for the column's natural name (Spider's ``column_names``) or the column name with
    underscores as spaces, then for their longest runs of words (plurals allowed); the term
    is the text as the question writes it. Falls back to the natural name.

    >>> column_term("How old is each singer? Show the age.", "Age", "age")
    ('age', [])
    >>> column_term("Show the release years of songs.", "Song_release_year", "song release year")
    ('release years', ['song release year', 'Song_release_year'])
    >>> column_term("How many distinct countries?", "Country", "country")[0]
    'countries'

    """
    spaced = column.replace("_", " ").strip()
    candidates: list[str] = []
    for name in (natural or "", spaced, column):
        if name and name.lower() not in {c.lower() for c in candidates}:
            candidates.append(name)
    phrases: list[tuple[int, int, str]] = []
    for name in candidates[:2]:
        words = [w for w in re.split(r"[\s_]+", name) if w]
        for size in range(len(words), 0, -1):
            for start in range(len(words) - size + 1):
                phrase = " ".join(words[start : start + size])
                if size == 1 and len(phrase) < 3:
                    continue
                phrases.append((-size, -len(phrase), phrase))
    term = None
    for _, _, phrase in sorted(set(phrases)):
        words = [re.escape(w) for w in phrase.split()]
        last = phrase.split()[-1]
        if len(last) > 3 and last.lower().endswith("y"):
            words[-1] = re.escape(last[:-1]) + r"(?:y|ies)"
        else:
            words[-1] += r"(?:e?s)?"
        pattern = r"(?<!\w)" + r"[\s_]+".join(words) + r"(?!\w)"
        found = re.search(pattern, question, re.IGNORECASE)
        if found:
            term = found.group(0).lower()
            break
    if term is None:
        term = candidates[0] if candidates else column
    aliases = [c for c in candidates if c.lower() != term.lower()]
    return term, aliases


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
    term: str,
    aliases: list[str],
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
                    "term": term,
                    "aliases": aliases,
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
                    row, key, split, index, label, options, workspace, db_root, spider, variants
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
    for sql in (row["query1"], row["query2"]):
        try:
            results.append(workspace.execute(database, sql))
        except QueryError as error:
            return Drop(key, "reading_failed", error.message[:300])
        except sqlite3.Error as error:
            return Drop(key, "rebuild_failed", str(error)[:300])
    rules = compare_for(row["query1"])
    if results_match(results[0], results[1], rules):
        return Drop(key, "equal_results", "both readings return the same result")
    natural = None
    entry = spider.get(db_id)
    if entry:
        tables = [t.lower() for t in entry["table_names_original"]]
        if actual_table.lower() in tables:
            t_index = tables.index(actual_table.lower())
            for (t, c), (_, n) in zip(
                entry["column_names_original"], entry["column_names"], strict=False
            ):
                if t == t_index and c.lower() == actual_column.lower():
                    natural = n
    term, aliases = column_term(row["question"], actual_column, natural)
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
            term=term,
            aliases=aliases,
            sql=sql,
            copied=copied,
            synonyms=(syn1, syn2),
            source_file=label,
            index=index,
        )
        for n, (synonym, sql) in enumerate(((syn1, row["query1"]), (syn2, row["query2"])), start=1)
    ]
    return Item(key, records, min_records=2)
