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
are written from the annotation without SQL: the withheld entry in plain words
(:func:`knowledge_words`), or the SQL snippet said in words
(:func:`ambitab_gym.convert.verbalize.verbalize`). Counted ambiguities get as aliases their
annotation and knowledge-base names (the words and the abbreviation apart) and the columns and
values of their snippets (:func:`ambitab_gym.convert.verbalize.fragment_names`), none naming
another ambiguity of the task.

Databases: ``<db>/<db>.sqlite`` (SQLite dialect) is used as is; for the PostgreSQL dialect a
plain ``pg_dump`` (``<db>/*.sql``) or a SQLite file is turned into a DuckDB script (engine
``duckdb``, dialect ``postgres``; give ``engine_override="postgres"`` at load time to run on a
server). Tasks whose database is missing are dropped (``database_missing``).

Every task is kept, as upstream has it: ``Management`` tasks (which write) keep their category
(``source.category``), ``preprocess_sql``, ``clean_up_sqls`` (``verification.cleanup_sql``) and
test cases, and the verifier runs them on a scratch copy (:mod:`ambitab_gym.verify.verifier`'s
contract); a solution of several ``sol_sql`` items becomes one ``reference_sql`` holding all
its statements, in order, each ended by ``;`` (the verifier splits it into ``sol_sqls``). The
converter checks each solution itself: a query runs on the corpus database (``empty_result``,
``reference_sql_failed`` and ``reference_timeout`` drop it), a write task's ``preprocess_sql``
and solution run on a private scratch copy (test cases run at verification time). A PostgreSQL
solution that DuckDB cannot run because it uses a PostgreSQL-only feature (``JSON_OBJECT_AGG``,
``jsonb_agg``, ``ARRAY_REMOVE``, PL/pgSQL functions, triggers) is kept and marked
``source.requires = ["postgres"]`` with the feature in ``source.postgres_only``; the manifest's
provenance counts them (``requires_postgres``), and the build warns that on DuckDB their
verdict is ``unsupported``.

* :func:`convert` - the converter entry point.
* :func:`load_catalog` - a frozen-response catalog.
* :func:`knowledge_text` - one knowledge-base entry as text; :func:`knowledge_words` - the
  same as a person says it (no LaTeX), for responses.
* :func:`join_statements` - upstream's ``sol_sql`` list as one ``reference_sql``.
* :func:`writes`, :func:`check_solution`, :func:`run_on_scratch` - which records write, and
  the build's check of a solution (a write task on a scratch copy).
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

from ambitab_gym.aliases import clean_aliases, term_parts
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
from ambitab_gym.convert.verbalize import fragment_names, verbalize
from ambitab_gym.oracles.sqltext import answer_reveals_sql
from ambitab_gym.records import TaskRecord, parse_record
from ambitab_gym.verify.base import QueryError
from ambitab_gym.verify.taskrun import split_statements
from ambitab_gym.verify.verifier import postgres_only_feature

logger = logging.getLogger("ambitab_gym")

__all__ = [
    "check_solution",
    "convert",
    "join_statements",
    "knowledge_text",
    "knowledge_words",
    "load_catalog",
    "run_on_scratch",
    "writes",
]

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


def _response(entry: dict, dialect: str) -> str:
    """The frozen response of an annotation without an authored one: a knowledge annotation's
    withheld entry in plain words; a critical or non-critical annotation's SQL snippets said in
    words (:func:`verbalize`), followed by the entry folded into it, if any."""
    term, knowledge = entry["term"], entry["_entry"]
    if knowledge is not None and (entry["kind"] == "knowledge" or not entry["_snippets"]):
        return f'By "{term}" I mean {knowledge_words(knowledge)}'
    said = "; ".join(dict.fromkeys(verbalize(s, dialect) for s in entry["_snippets"]))
    response = f'By "{term}" I mean {said or "it as written"}.'
    return f"{response} {knowledge_words(knowledge)}" if knowledge is not None else response


_LATEX = (
    (re.compile(r"\\(?:text|mathrm|textbf|mathit)\{([^{}]*)\}"), r"\1"),
    (re.compile(r"\\frac\{([^{}]*)\}\{([^{}]*)\}"), r"(\1 / \2)"),
    (re.compile(r"\\sqrt\{([^{}]*)\}"), r"√(\1)"),
    (re.compile(r"_\{([^{}]*)\}"), r"_\1"),
    (re.compile(r"\{,\}"), ","),
)
_LATEX_SIGNS = {
    r"\times": "×", r"\cdot": "×", r"\leq": "≤", r"\geq": "≥", r"\neq": "≠",
    r"\&\&": "and", r"\%": "%", r"\log": "log", "$": "",
}  # fmt: skip


def knowledge_words(entry: dict[str, Any]) -> str:
    r"""A knowledge-base entry as a person says it: :func:`knowledge_text` without LaTeX
    markup, and with "where" said "in which" when the answer check
    (:func:`~ambitab_gym.oracles.sqltext.answer_reveals_sql`) would take "where x > 1" for SQL.

    >>> knowledge_words({"knowledge": "SNQI", "definition":
    ...     "$\\text{SNQI} = \\frac{\\text{Snr}}{2}$, where values above 0.5 are good."})
    'SNQI: Definition: SNQI = (Snr / 2), in which values above 0.5 are good.'
    """
    text = knowledge_text(entry)
    for _ in range(4):  # nested markup, innermost first
        for pattern, replacement in _LATEX:
            text = pattern.sub(replacement, text)
    for sign, word in _LATEX_SIGNS.items():
        text = text.replace(sign, word)
    text = " ".join(text.split())
    if answer_reveals_sql(text):
        text = re.sub(r"\bwhere\b", "in which", text)
        text = re.sub(r"\bWhere\b", "In which", text)
    return text


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
    task: dict, kb: dict[int, dict], catalog: dict, notes: dict, finder=None, dialect="postgres"
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
                    existing["_snippets"].append(snippet)
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
                "_snippets": [snippet] if snippet else [],
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
            entry["response"] = _response(entry, dialect)
            notes["template_responses"] = notes.get("template_responses", 0) + 1
        base, n = entry["id"], 2
        while entry["id"] in ids:
            entry["id"], n = f"{base}_{n}", n + 1
        ids.add(entry["id"])
        out.append(entry)
    _name_readings(out, dialect)
    for entry in out:
        for private in ("_template", "_snippets", "_entry", "_annotation", "_merged", "_unlocated"):
            entry.pop(private, None)
    return out, origins


def _name_variants(name: str) -> list[str]:
    """A knowledge-base name, and its words and abbreviation apart.

    >>> _name_variants("Lunar Interference Factor (LIF)")
    ['Lunar Interference Factor (LIF)', 'Lunar Interference Factor', 'LIF']
    """
    short = _abbreviation(name)
    if short is None:
        return [name]
    return [name, re.sub(r"\s*\([^()]*\)\s*$", "", name).strip(), short]


def _name_readings(entries: list[dict], dialect: str) -> None:
    """Give each counted ambiguity the words a person asks about it with: its annotation and
    knowledge-base names (with the words and abbreviation apart), then the columns and values of
    its SQL snippets (:func:`fragment_names`), then the parts of a compound term
    (:func:`~ambitab_gym.aliases.term_parts`). No alias names another ambiguity; a snippet's
    name loses to another ambiguity's own names ("snqi" in a count of signals with SNQI > 0
    stays with "Signal-to-Noise Quality Indicator (SNQI)")."""
    own = {
        e["id"]: [v for a in e["aliases"] for v in _name_variants(a)]
        if e["kind"] != "non_critical"
        else list(e["aliases"])
        for e in entries
    }
    found = {
        e["id"]: clean_aliases(
            e["term"], [n for s in e["_snippets"] for n in fragment_names(s, dialect)]
        )
        if e["kind"] != "non_critical"
        else []
        for e in entries
    }

    def others(entry: dict, *tiers: dict[str, list[str]]) -> list[str]:
        return [
            name
            for e in entries
            if e["id"] != entry["id"]
            for name in [e["term"], *(n for tier in tiers for n in tier[e["id"]])]
        ]

    named = {e["id"]: clean_aliases(e["term"], own[e["id"]], others(e, own)) for e in entries}
    for entry in entries:
        if entry["kind"] == "non_critical":
            continue
        from_snippets = clean_aliases(
            entry["term"], found[entry["id"]], others(entry, named, found)
        )
        parts = clean_aliases(  # "metric" of "quality metric", unless another term has it
            entry["term"], term_parts(entry["term"]), others(entry, own, found)
        )
        entry["aliases"] = clean_aliases(
            entry["term"], named[entry["id"]] + from_snippets + parts, others(entry, own)
        )


def _abbreviation(name: str) -> str | None:
    """The abbreviation a knowledge-base name gives in parentheses.

    >>> _abbreviation("Lunar Interference Factor (LIF)"), _abbreviation("Hot Jupiter")
    ('LIF', None)
    """
    match = re.search(r"\(([A-Za-z][A-Za-z0-9_]{1,11})\)\s*$", name.strip())
    return match.group(1) if match else None


def _snippet_twin(entry: dict, merged: dict[str, dict], counted: list[str]) -> str | None:
    """The critical annotation whose SQL snippet the knowledge annotation's snippet matches
    (token overlap of at least 0.3), or - failing that - the first whose snippet uses the
    knowledge's abbreviation as a name (``lif`` in ``aoi * (1 - lif)`` for "Lunar
    Interference Factor (LIF)": the critical computation builds on the withheld entry)."""
    best, best_key = 0.3, None
    uses: list[str] = []
    short = _abbreviation(str((entry.get("_entry") or {}).get("knowledge") or entry["term"]))
    for key in counted:
        other = merged[key]
        if other["kind"] != "critical" or other.get("_merged"):
            continue
        score = _snippet_overlap(entry["sql_snippet"] or "", other["sql_snippet"] or "")
        if score >= best:
            best, best_key = score, key
        if short and re.search(rf"\b{re.escape(short)}\b", other["sql_snippet"] or "", re.I):
            uses.append(key)
    return best_key if best_key is not None else (uses[0] if uses else None)


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
    needs: dict[str, int] = {}  # PostgreSQL-only feature -> tasks
    finder = None
    if options.llm_url:
        from ambitab_gym.convert.hooks import LLMClient, LLMTermFinder

        finder = LLMTermFinder(
            LLMClient(
                options.llm_url, options.model or "", seed=options.seed, cache=options.llm_cache
            )
        )
    contexts: dict[str, tuple[dict, dict, str | None]] = {}
    for task in progress(tasks, desc="bird-interact", enabled=options.show_progress):
        instance = str(task.get("instance_id"))
        key = f"{task_file.name}#{instance}"
        task = {
            **task,
            **{k: v for k, v in truth.get(instance, {}).items() if v not in (None, [], "")},
        }
        sols = [str(s) for s in task.get("sol_sql") or [] if str(s).strip()]
        if not sols:
            conversion.drops.append(
                Drop(key, "no_reference_sql", "the release withholds the solution")
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
        checked = check_solution(record, workspace)
        if isinstance(checked, Drop):
            conversion.drops.append(Drop(key, checked.reason, checked.detail))
            continue
        if checked is not None:
            record = _mark_postgres_only(record, checked)
            needs[checked] = needs.get(checked, 0) + 1
        if writes(record):
            notes["management_tasks"] = notes.get("management_tasks", 0) + 1
        if record.source["solution_statements"] > 1:
            notes["multi_statement_solutions"] = notes.get("multi_statement_solutions", 0) + 1
        conversion.items.append(Item(key, [record]))
    # the shared build checks would run write statements on the shared workspace database:
    # every solution was checked above (a query read-only, a write task on a scratch copy)
    conversion.check_references = False
    if needs:
        total = sum(needs.values())
        notes["requires_postgres"] = total
        notes["postgres_only_features"] = dict(sorted(needs.items()))
        logger.warning(
            "%d BIRD-Interact task(s) need PostgreSQL (%s): they are kept and marked "
            'source.requires = ["postgres"]; on the default DuckDB engine their verdict is '
            "'unsupported'. Verify them on a server: gym.make(..., engine='postgres', "
            "engine_options={'dsn': ...}) or load_corpus(..., engine_override='postgres').",
            total,
            ", ".join(sorted(needs)),
        )
    conversion.notes.update(notes)
    conversion.notes["dialect"] = dialect
    return conversion


def writes(record: TaskRecord) -> bool:
    """Whether a record is a write task: a ``Management`` category, preprocess or clean-up SQL
    or test cases (the verifier runs it on a scratch copy of its database)."""
    spec = record.verification
    category = str(record.source.get("category") or "").lower()
    return category == "management" or bool(
        spec.preprocess_sql or spec.cleanup_sql or spec.test_cases
    )


def join_statements(items: list[str]) -> str:
    """Upstream's ``sol_sql`` list as one ``reference_sql``: one item verbatim; several in
    order, each ended by ``;`` (a lone ``;`` on its own line when the item lacks one).

    >>> join_statements(["SELECT 1"])
    'SELECT 1'
    >>> print(join_statements(["UPDATE t SET a = 1", "SELECT a FROM t;"]))
    UPDATE t SET a = 1
    ;
    SELECT a FROM t;
    """
    if len(items) == 1:
        return items[0]
    parts = []
    for item in items:
        text = item.strip()
        parts.append(text if text.endswith(";") else f"{text}\n;")
    return "\n".join(parts)


def check_solution(record: TaskRecord, workspace: Workspace) -> Drop | str | None:
    """Run a record's solution where the verifier will: a query read-only on the corpus
    database, a write task's ``preprocess_sql`` and solution on a private scratch copy.

    Returns:
        None when it runs (and a query returns rows); the PostgreSQL-only feature DuckDB
        lacks (the record is kept and marked); or the :class:`Drop` (``reference_sql_failed``,
        ``reference_timeout``, ``empty_result``) of a broken solution.
    """
    spec = record.verification
    try:
        if writes(record):
            run_on_scratch(workspace, spec.database, [*spec.preprocess_sql, spec.reference_sql])
            return None
        rows = workspace.execute(spec.database, spec.reference_sql)
    except QueryError as error:
        if workspace.engine_of(spec.database) == "duckdb":
            missing = postgres_only_feature(spec.reference_sql, error.message)
            if missing is not None:
                return missing
        reason = "reference_timeout" if error.category == "timeout" else "reference_sql_failed"
        return Drop(record.id, reason, error.message[:300])
    if not rows and not spec.compare.allow_empty:
        return Drop(record.id, "empty_result", "the reference SQL returns no rows")
    return None


def run_on_scratch(workspace: Workspace, database: str, scripts: list[str]) -> None:
    """Run trusted write SQL (each item may hold several statements) on an in-memory copy of
    a workspace database; the copy is discarded. Raises :class:`QueryError`."""
    timeout = workspace.timeout_s
    if workspace.engine_of(database) == "sqlite":
        source = sqlite3.connect(f"file:{workspace.path(database)}?mode=ro", uri=True)
        scratch = sqlite3.connect(":memory:")
        try:
            source.backup(scratch)
            timer = threading.Timer(timeout, scratch.interrupt)
            timer.start()
            try:
                for script in scripts:
                    scratch.executescript(script)
            finally:
                timer.cancel()
        except sqlite3.Error as error:
            category = "timeout" if "interrupt" in str(error).lower() else "runtime"
            raise QueryError(category, str(error).splitlines()[0] if str(error) else "") from None
        finally:
            scratch.close()
            source.close()
        return
    import duckdb

    scratch = duckdb.connect(":memory:")
    timer = threading.Timer(timeout, scratch.interrupt)
    timer.start()
    try:
        scratch.execute(workspace.path(database).read_text("utf-8"))
        for script in scripts:
            scratch.execute(script)
    except duckdb.Error as error:
        category = "timeout" if "interrupt" in str(error).lower() else "runtime"
        raise QueryError(category, str(error).splitlines()[0]) from None
    finally:
        timer.cancel()
        scratch.close()


def _mark_postgres_only(record: TaskRecord, feature: str) -> TaskRecord:
    data = record.model_dump(mode="json", by_alias=True)
    data["source"] = {**data["source"], "requires": ["postgres"], "postgres_only": feature}
    return parse_record(data, where=record.id)


def _record(task, sols, database, engine, kb, meanings, catalog, notes, finder=None):
    instance = str(task["instance_id"])
    dialect = "sqlite" if engine == "sqlite" else "postgres"
    ambiguities, origins = _ambiguities(task, kb, catalog, notes, finder, dialect)
    withheld = _withheld_ids(task)
    visible = [knowledge_text(kb[i]) for i in sorted(kb) if i not in withheld]
    conditions = task.get("conditions") or {}
    decimal = conditions.get("decimal", -1)
    sql = join_statements(sols)
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
                "solution_statements": len(
                    split_statements(sql, "sqlite" if engine == "sqlite" else "postgres")
                ),
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
