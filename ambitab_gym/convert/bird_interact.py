"""BIRD-Interact tasks -> AmbiTab-BIRD-Interact.

Each task keeps its ambiguous request (``amb_user_query``), its solution SQL (PostgreSQL dialect
in the full release, SQLite in BIRD-Mini-Interact), preprocess/clean-up SQL, test cases and
comparison conditions, and its annotations: ``critical_ambiguity`` and ``knowledge_ambiguity``
items become counted ambiguities (``critical`` / ``knowledge``), ``non_critical_ambiguity``
items become ``non_critical`` ones, each with its ``sql_snippet``. Annotations that repeat a
term are merged into one ambiguity.

What the agent sees (the public spec): the request, the column meanings of the task's database
and its knowledge base *without* the entries the task withholds (``deleted_knowledge`` of its
knowledge ambiguities); those withheld entries become the resolutions of the knowledge
ambiguities instead. Frozen responses come from a catalog (``--responses``) when given, else
from a deterministic template built from the annotation.

Databases: ``<db>/<db>.sqlite`` (SQLite dialect) is used as is; for the PostgreSQL dialect a
plain ``pg_dump`` (``<db>/*.sql``) or a SQLite file is turned into a DuckDB script (engine
``duckdb``, dialect ``postgres``; give ``engine_override="postgres"`` at load time to run on a
server). Tasks whose database is missing are dropped (``database_missing``); ``Management``
tasks, which write, are dropped (``management_task``): the verifier is read-only.

* :func:`convert` - the converter entry point.
* :func:`load_catalog` - a frozen-response catalog.
* :func:`knowledge_text` - one knowledge-base entry as text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ambitab_gym.convert.common import (
    MALFORMED,
    BuildError,
    BuildOptions,
    Conversion,
    Drop,
    Item,
    Workspace,
    malformed,
    progress,
    read_json_or_jsonl,
    sha256_file,
    slug,
)
from ambitab_gym.convert.duckdb_scripts import pg_dump_to_duckdb_script, sqlite_to_duckdb_script
from ambitab_gym.records import parse_record

__all__ = ["convert", "knowledge_text", "load_catalog"]

UPSTREAM = {
    "name": "BIRD-Interact",
    "url": "https://bird-interact.github.io/",
    "citation": "Huo et al., 2026, BIRD-Interact",
    "licence": "CC BY-SA 4.0",
}

_KINDS = (
    ("critical_ambiguity", "critical", "c"),
    ("knowledge_ambiguity", "knowledge", "k"),
    ("non_critical_ambiguity", "non_critical", "n"),
)


def knowledge_text(entry: dict[str, Any]) -> str:
    """One knowledge-base entry as the agent reads it.

    >>> knowledge_text({"id": 0, "knowledge": "SNQI", "description": "Signal quality.",
    ...                 "definition": "SNQI = snr - 0.1 * |noise|"})
    'SNQI: Signal quality. Definition: SNQI = snr - 0.1 * |noise|'
    """
    parts = [f"{entry.get('knowledge', '').strip()}:"]
    if entry.get("description"):
        parts.append(str(entry["description"]).strip())
    if entry.get("definition"):
        parts.append(f"Definition: {str(entry['definition']).strip()}")
    return " ".join(parts)


def load_catalog(path: Path | None) -> dict[tuple[str, str], str]:
    """A frozen-response catalog: ``(instance_id, normalized term) -> response``.

    Accepts JSON Lines of ``{"instance_id", "term", "response"}`` or of
    ``{"instance_id", "responses": {term: response}}``, or one JSON object
    ``{instance_id: {term: response}}``.
    """
    if path is None:
        return {}
    text = path.read_text("utf-8").strip()
    out: dict[tuple[str, str], str] = {}

    def add(instance, term, response):
        if instance is not None and term and isinstance(response, str) and response.strip():
            out[(str(instance), _norm(term))] = response.strip()

    if text.startswith("{") and "\n{" not in text:
        data = json.loads(text)
        if "instance_id" not in data:
            for instance, mapping in data.items():
                for term, response in (mapping or {}).items():
                    add(instance, term, response)
            return out
    for entry in read_json_or_jsonl(path):
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("responses"), dict):
            for term, response in entry["responses"].items():
                add(entry.get("instance_id"), term, response)
        else:
            add(entry.get("instance_id"), entry.get("term"), entry.get("response"))
    return out


def _norm(term: str) -> str:
    return " ".join(str(term).lower().split())


def _find_task_file(source: Path) -> Path:
    if source.is_file():
        return source
    candidates = sorted(p for p in source.glob("*.jsonl") if not p.name.endswith("_kb.jsonl"))
    if not candidates:
        raise BuildError(f"no BIRD-Interact task file (*.jsonl) in {source}")
    return candidates[0]


def _db_folders(task_file: Path, options: BuildOptions, database: str) -> list[Path]:
    folders = []
    if options.databases is not None:
        folders += [options.databases / database, options.databases]
    folders += [task_file.parent / database]
    return [f for f in folders if f.is_dir()]


def _read_kb(folders: list[Path], database: str) -> dict[int, dict]:
    for folder in folders:
        path = folder / f"{database}_kb.jsonl"
        if path.is_file():
            return {int(e["id"]): e for e in read_json_or_jsonl(path) if "id" in e}
    return {}


def _read_meanings(folders: list[Path], database: str) -> dict[str, str]:
    for folder in folders:
        for name in (f"{database}_column_meaning_base.json", f"{database}_column_meaning.json"):
            path = folder / name
            if path.is_file():
                raw = json.loads(path.read_text("utf-8"))
                out = {}
                for key, value in sorted(raw.items()):
                    parts = key.split("|")
                    if len(parts) == 3 and parts[0] != database:
                        continue
                    short = ".".join(parts[-2:]) if len(parts) >= 2 else key
                    out[short] = (
                        value if isinstance(value, str) else json.dumps(value, sort_keys=True)
                    )
                return out
    return {}


def _register_database(
    database: str, folders: list[Path], dialect: str, workspace: Workspace
) -> str | None:
    """Register the database; returns its engine, or None when it is missing."""
    sqlite_file = next(
        (f / f"{database}.sqlite" for f in folders if (f / f"{database}.sqlite").is_file()), None
    )
    dumps = sorted(p for f in folders[:1] for p in f.glob("*.sql")) if folders else []
    if dialect == "sqlite":
        if sqlite_file is None:
            return None
        workspace.add_file(database, sqlite_file)
        return "sqlite"
    if dumps:
        script = "".join(pg_dump_to_duckdb_script(p.read_text("utf-8")) for p in dumps)
        workspace.add_script(database, script, engine="duckdb")
        return "duckdb"
    if sqlite_file is not None:
        workspace.add_script(database, sqlite_to_duckdb_script(sqlite_file), engine="duckdb")
        return "duckdb"
    return None


def _template_response(term: str, kind: str, snippet: str, knowledge: dict | None) -> str:
    if knowledge is not None:
        return f'By "{term}" I mean {knowledge_text(knowledge)}'
    if kind == "non_critical":
        return f'For "{term}", please do it this way: {snippet}'
    return f'By "{term}" I mean what this part of the query expresses: {snippet}'


def _ambiguities(task: dict, kb: dict[int, dict], catalog: dict, notes: dict) -> list[dict]:
    merged: dict[str, dict] = {}
    order: list[str] = []
    instance = str(task["instance_id"])
    annotations = task.get("user_query_ambiguity") or {}
    for field, kind, prefix in _KINDS:
        items = task.get(field) if field == "knowledge_ambiguity" else annotations.get(field)
        for item in items or []:
            term = str(item.get("term") or "").strip()
            snippet = str(item.get("sql_snippet") or "")  # verbatim
            if not snippet.strip():
                snippet = ""
            if not term:
                continue
            key = _norm(term)
            deleted = item.get("deleted_knowledge")
            entry = (
                kb.get(int(deleted))
                if isinstance(deleted, (int, str)) and str(deleted).lstrip("-").isdigit()
                else None
            )
            if key in merged:
                notes["merged_duplicate_terms"] = notes.get("merged_duplicate_terms", 0) + 1
                existing = merged[key]
                if snippet and snippet not in (existing["sql_snippet"] or ""):
                    before = existing["sql_snippet"]
                    existing["sql_snippet"] = f"{before}\n{snippet}" if before else snippet
                    if existing["_template"]:
                        existing["resolution"] = existing["sql_snippet"]
                if existing["kind"] == "non_critical" and kind != "non_critical":
                    existing["kind"] = kind
                continue
            resolution = knowledge_text(entry) if entry is not None else (snippet or term)
            response = catalog.get((instance, key))
            templated = response is None
            if templated:
                response = _template_response(term, kind, snippet, entry)
                notes["template_responses"] = notes.get("template_responses", 0) + 1
            merged[key] = {
                "id": f"{prefix}_{slug(term, max_length=40)}",
                "term": term,
                "kind": kind,
                "resolution": resolution,
                "response": response,
                "sql_snippet": snippet or None,
                "evidence": knowledge_text(entry) if entry is not None else None,
                "_template": templated and entry is None,
            }
            order.append(key)
    out, ids = [], set()
    for key in order:
        entry = dict(merged[key])
        entry.pop("_template")
        base, n = entry["id"], 2
        while entry["id"] in ids:
            entry["id"], n = f"{base}_{n}", n + 1
        ids.add(entry["id"])
        out.append(entry)
    return out


def _withheld_ids(task: dict) -> set[int]:
    out = set()
    for item in task.get("knowledge_ambiguity") or []:
        value = item.get("deleted_knowledge")
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            out.add(int(value))
    return out


def convert(options: BuildOptions, workspace: Workspace) -> Conversion:
    """Convert a BIRD-Interact task file with its knowledge bases, column meanings and databases.

    Args:
        options: ``source`` is the task JSONL (or its folder); ``databases`` the folder of
            per-database folders when not beside it; ``responses`` the frozen-response catalog;
            ``extra``: ``ground_truth`` (JSONL of withheld solutions by ``instance_id``) and
            ``dialect`` (``auto``, ``postgres`` or ``sqlite``).
        workspace: where the databases are registered.
    """
    task_file = _find_task_file(options.source)
    extra = options.extra or {}
    dialect = extra.get("dialect") or "auto"
    if dialect == "auto":
        dialect = "sqlite" if "mini" in task_file.name.lower() else "postgres"
    tasks = read_json_or_jsonl(task_file)
    conversion = Conversion(
        corpus="bird_interact",
        oracle="intent",
        engine="sqlite" if dialect == "sqlite" else "duckdb",
        dialect=dialect,
        description=(
            "AmbiTab-BIRD-Interact built from BIRD-Interact: ambiguous requests with their "
            "critical, knowledge and non-critical annotations, solution SQL and test cases; the "
            "knowledge the task withholds is answered by the oracle only."
        ),
        licence="CC BY-SA 4.0 (BIRD-Interact)",
        upstream=UPSTREAM,
        inputs={task_file.name: sha256_file(task_file)},
    )
    truth: dict[str, dict] = {}
    ground_truth = extra.get("ground_truth")
    if ground_truth:
        path = Path(ground_truth)
        conversion.inputs[path.name] = sha256_file(path)
        truth = {str(e["instance_id"]): e for e in read_json_or_jsonl(path) if "instance_id" in e}
    catalog = load_catalog(options.responses)
    if options.responses:
        conversion.inputs[Path(options.responses).name] = sha256_file(options.responses)
    notes: dict[str, Any] = {"template_responses": 0}
    contexts: dict[str, tuple[dict, dict, str | None]] = {}
    for task in progress(tasks, desc="bird-interact", enabled=options.show_progress):
        instance = str(task.get("instance_id"))
        key = f"{task_file.name}#{instance}"
        task = {
            **task,
            **{k: v for k, v in truth.get(instance, {}).items() if v not in (None, [], "")},
        }
        category = str(task.get("category") or "Query")
        if category.lower() == "management":
            conversion.drops.append(Drop(key, "management_task", "the task writes to the database"))
            continue
        sols = [s for s in task.get("sol_sql") or [] if str(s).strip()]
        if not sols:
            conversion.drops.append(
                Drop(key, "no_reference_sql", "the release withholds the solution")
            )
            continue
        if len(sols) > 1:
            conversion.drops.append(
                Drop(key, "multi_statement_solution", f"{len(sols)} statements")
            )
            continue
        database = str(task.get("selected_database") or "")
        if not database:
            conversion.drops.append(malformed(key, KeyError("selected_database")))
            continue
        if database not in contexts:
            folders = _db_folders(task_file, options, database)
            engine = _register_database(database, folders, dialect, workspace)
            contexts[database] = (
                _read_kb(folders, database),
                _read_meanings(folders, database),
                engine,
            )
        kb, meanings, engine = contexts[database]
        if engine is None:
            conversion.drops.append(
                Drop(key, "database_missing", f"no database {database!r} was given")
            )
            continue
        try:
            record = _record(task, sols, database, engine, kb, meanings, catalog, notes)
        except MALFORMED as error:
            conversion.drops.append(malformed(key, error))
            continue
        conversion.items.append(Item(key, [record]))
    conversion.notes.update(notes)
    conversion.notes["dialect"] = dialect
    return conversion


def _record(task, sols, database, engine, kb, meanings, catalog, notes):
    instance = str(task["instance_id"])
    withheld = _withheld_ids(task)
    visible = [knowledge_text(kb[i]) for i in sorted(kb) if i not in withheld]
    conditions = task.get("conditions") or {}
    decimal = conditions.get("decimal", -1)
    sql = sols[0]
    record_id = f"bird_interact-{slug(instance, max_length=80)}"
    return parse_record(
        {
            "id": record_id,
            "avt_id": record_id,
            "corpus": "bird_interact",
            "split": "all",
            "spec": {
                "request": str(task.get("amb_user_query") or task.get("query")).strip(),
                "database": database,
                "column_meanings": meanings,
                "external_knowledge": visible,
            },
            "ambiguities": _ambiguities(task, kb, catalog, notes),
            "verification": {
                "engine": engine,
                "database": database,
                "reference_sql": sql,
                "compare": {
                    "order": "ordered" if conditions.get("order") else "set",
                    "float_decimals": decimal if isinstance(decimal, int) and decimal >= 0 else 2,
                },
                "test_cases": [t for t in task.get("test_cases") or [] if str(t).strip()],
                "preprocess_sql": [s for s in task.get("preprocess_sql") or [] if str(s).strip()],
                "cleanup_sql": [s for s in task.get("clean_up_sqls") or [] if str(s).strip()],
            },
            "source": {
                "kind": "bird_interact",
                "instance_id": instance,
                "category": task.get("category"),
                "high_level": task.get("high_level"),
                "difficulty_tier": task.get("difficulty_tier"),
                "conditions": conditions,
                "external_knowledge_ids": task.get("external_knowledge") or [],
                "withheld_knowledge_ids": sorted(withheld),
                "masked_terms": sorted(
                    {
                        str(a.get("term"))
                        for group in ("critical_ambiguity", "non_critical_ambiguity")
                        for a in (task.get("user_query_ambiguity") or {}).get(group) or []
                        if a.get("is_mask")
                    }
                ),
            },
        },
        where=record_id,
    )
