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
import re
from pathlib import Path
from typing import Any

from ambitab_gym.convert.common import (
    MALFORMED,
    BuildError,
    BuildOptions,
    Conversion,
    Drop,
    Item,
    Span,
    Workspace,
    common_phrase,
    extend_phrase,
    find_phrase,
    find_term,
    malformed,
    progress,
    read_json_or_jsonl,
    sha256_file,
    slug,
    term_problem,
    trim_phrase,
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


def _snippet_overlap(a: str, b: str) -> float:
    """How much two SQL snippets overlap (Jaccard index of their word sets).

    >>> _snippet_overlap("s.SnrRatio - 0.1 * ABS(s.NoiseFloorDbm)", "s.snrratio - 0.1*abs(s.noisefloordbm) AS x")
    0.75
    """
    na, nb = a.lower(), b.lower()
    ta, tb = set(re.findall(r"\w+", na)), set(re.findall(r"\w+", nb))
    return len(ta & tb) / len(ta | tb) if ta | tb else 0.0


def _locate(request: str, names: list[str], taken: list[Span]) -> tuple[Span, bool] | None:
    """The request's phrase for an annotation: a name as written (plurals, stems), else the
    longest run of a name's words not held by another ambiguity, widened to its phrase.
    Returns the span and whether it was found whole."""
    for stem in (False, True):
        for name in names:
            span = find_phrase(request, name, stem=stem)
            span = trim_phrase(request, span) if span is not None else None
            if (
                span is not None
                and term_problem(span.phrase) is None
                and not any(span.start < t.end and t.start < span.end for t in taken)
            ):
                return span, True
    for name in names:
        span = common_phrase(request, name, stem=True, avoid=taken)
        if span is None:
            continue
        wide = extend_phrase(request, span, right=False)
        if not any(wide.start < t.end and t.start < wide.end for t in taken):
            span = wide
        if term_problem(span.phrase) is None:
            return span, False
    return None


def _ambiguities(
    task: dict, kb: dict[int, dict], catalog: dict, notes: dict, finder=None
) -> tuple[list[dict], dict[str, str]]:
    """The record's ambiguities (terms are phrases of the request) and their term origins."""
    merged: dict[str, dict] = {}
    order: list[str] = []
    instance = str(task["instance_id"])
    request = str(task.get("amb_user_query") or task.get("query") or "")
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
            merged[key] = {
                "id": f"{prefix}_{slug(term, max_length=40)}",
                "term": term,
                "aliases": [],
                "kind": kind,
                "resolution": resolution,
                "response": catalog.get((instance, key)),
                "sql_snippet": snippet or None,
                "evidence": knowledge_text(entry) if entry is not None else None,
                "_template": entry is None,
                "_entry": entry,
                "_annotation": term,
            }
            order.append(key)
    origins: dict[str, str] = {}
    taken: list[Span] = []
    # counted annotations found as written first, so partial matches avoid their phrases
    counted = [k for k in order if merged[k]["kind"] != "non_critical"]
    ranked = sorted(
        counted, key=lambda k: (find_term(request, merged[k]["term"]) is None, order.index(k))
    )
    for key in ranked:
        entry = merged[key]
        names = [entry["term"]]
        if entry["_entry"] is not None:
            names.append(str(entry["_entry"].get("knowledge") or ""))
            names = [n for n in names if n]
            named = common_phrase(request, names[-1], stem=True, avoid=taken)
            by_name = named is not None and len(named.phrase.split()) >= 2
            twin = _snippet_twin(entry, merged, counted)
            if twin is not None and find_term(request, entry["term"]) is None and not by_name:
                _merge_into(merged[twin], entry)
                entry["_merged"] = True
                notes["knowledge_merged_into_critical"] = (
                    notes.get("knowledge_merged_into_critical", 0) + 1
                )
                continue
            if entry["_entry"].get("description"):
                names.append(str(entry["_entry"]["description"]))
        found = _locate(request, names, taken)
        origin = "annotation" if entry["_entry"] is None else "knowledge_base"
        if found is None and finder is not None:
            phrase = finder.find(request, f"{entry['term']}: {entry['resolution']}")
            span = find_term(request, phrase) if phrase else None
            if span is not None and term_problem(span.phrase) is None:
                found, origin = (span, False), "llm"
        if found is None:
            entry["_unlocated"] = True
            continue
        span, whole = found
        taken.append(span)
        if span.phrase.lower() != entry["term"].lower():
            if term_problem(entry["term"]) is None:
                entry["aliases"].append(entry["term"])
            entry["term"] = span.phrase
            if origin == "annotation" and not whole:
                origin = "annotation_overlap"
        origins[entry["id"]] = origin
    out, ids = [], set()
    for key in order:
        entry = dict(merged[key])
        if entry.get("_merged"):
            continue
        if entry.get("_unlocated"):
            notes["unlocated_terms"] = notes.get("unlocated_terms", 0) + 1
            origins[entry["id"]] = "unlocated"
        if entry["response"] is None:
            knowledge = entry["_entry"]
            entry["response"] = _template_response(
                entry["term"], entry["kind"], entry["sql_snippet"] or "", knowledge
            )
            notes["template_responses"] = notes.get("template_responses", 0) + 1
        for private in ("_template", "_entry", "_annotation", "_merged", "_unlocated"):
            entry.pop(private, None)
        base, n = entry["id"], 2
        while entry["id"] in ids:
            entry["id"], n = f"{base}_{n}", n + 1
        ids.add(entry["id"])
        out.append(entry)
    return out, origins


def _snippet_twin(entry: dict, merged: dict[str, dict], counted: list[str]) -> str | None:
    """The critical annotation whose SQL snippet the knowledge annotation's snippet matches."""
    best, best_key = 0.3, None
    for key in counted:
        other = merged[key]
        if other["kind"] != "critical" or other.get("_merged"):
            continue
        score = _snippet_overlap(entry["sql_snippet"] or "", other["sql_snippet"] or "")
        if score >= best:
            best, best_key = score, key
    return best_key


def _merge_into(target: dict, knowledge: dict) -> None:
    """Fold a knowledge annotation into the critical one that names its phrase."""
    name = str(knowledge["_entry"].get("knowledge") or knowledge["term"])
    for alias in (knowledge["term"], name):
        if (
            alias
            and alias.lower() not in {a.lower() for a in target["aliases"]}
            and term_problem(alias) is None
            and alias.lower() != target["term"].lower()
        ):
            target["aliases"].append(alias)
    target["resolution"] = f"{target['resolution']}; {knowledge['resolution']}"
    target["evidence"] = knowledge["evidence"]
    target["_template"] = False
    if target["response"] is None and knowledge["response"] is not None:
        target["response"] = knowledge["response"]
    if target["response"] is None:
        target["_entry"] = knowledge["_entry"]


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
    finder = None
    if options.llm_url:
        from ambitab_gym.convert.hooks import LLMClient, LLMTermFinder

        finder = LLMTermFinder(LLMClient(options.llm_url, options.model or "", seed=options.seed))
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
            record = _record(task, sols, database, engine, kb, meanings, catalog, notes, finder)
        except MALFORMED as error:
            conversion.drops.append(malformed(key, error))
            continue
        unlocated = [
            a.term
            for a in record.ambiguities
            if record.source["term_origin"].get(a.id) == "unlocated"
        ]
        if unlocated:
            detail = f"no phrase of the request for {', '.join(map(repr, unlocated))}"
            conversion.drops.append(Drop(key, "no_term_in_request", detail[:300]))
            continue
        conversion.items.append(Item(key, [record]))
    conversion.notes.update(notes)
    conversion.notes["dialect"] = dialect
    return conversion


def _record(task, sols, database, engine, kb, meanings, catalog, notes, finder=None):
    instance = str(task["instance_id"])
    ambiguities, origins = _ambiguities(task, kb, catalog, notes, finder)
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
            "ambiguities": ambiguities,
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
                "term_origin": origins,
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
