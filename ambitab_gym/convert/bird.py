"""AmbiTab-Bird: import released AmbiTab files, or rewrite BIRD tasks with a model.

AmbiTab-Bird's rewrites (underspecified requests, alternative readings, executable alternative
SQL and fixed resolutions) need a model, so the build is reproducible only from released files:

* **released files** (``--source`` is a ``records.jsonl`` in the AmbiTab format, or a folder
  holding one): every record is read with the record schema, grouped into its AVTs and checked
  against BIRD's databases (``--databases``: BIRD's ``dev_databases/`` or ``train_databases/``,
  or a folder holding them).
* **rewriting hook** (``--source`` is BIRD's ``dev/`` or ``train/`` folder with ``--llm-url`` and
  ``--model``): :class:`~ambitab_gym.convert.hooks.LLMRewriter` proposes a request, its
  ambiguities and one SQL per reading; readings that fail, return nothing or repeat another
  reading's result are dropped by the build checks. The paper's model-based admission filters
  (a solver miss without clarification, a necessity judgment) are not applied.

Terms in either path must be the request's own words: a counted ambiguity whose term occurs in
the request keeps it (``source.term_origin``: ``released`` or ``llm``); one whose term does
not is given the request's phrase that shares the most of its words (the old term becomes an
alias; ``relocated``); an AVT with a term that names no phrase of the request is dropped
(``no_term_in_request``).

Aliases: a knowledge ambiguity also gets the columns and values its evidence hints use and the
modifier of a compound term they set a condition for ("long" of "long trip";
:func:`~ambitab_gym.convert.ew_bird.hint_aliases`), from every reading of the AVT, so the
readings of an AVT share their aliases; no alias names another ambiguity of the AVT.

* :func:`convert` - the converter entry point.
* :func:`request_terms` - every counted term a phrase of the request.
* :func:`evidence_aliases` - the aliases an AVT's evidence hints add.
"""

from __future__ import annotations

import json
from pathlib import Path

from ambitab_gym.aliases import clean_aliases
from ambitab_gym.convert.common import (
    BuildError,
    BuildOptions,
    Conversion,
    Drop,
    Item,
    Workspace,
    common_phrase,
    extend_phrase,
    find_phrase,
    find_term,
    progress,
    sha256_file,
    slug,
    term_problem,
)
from ambitab_gym.convert.ew_bird import UPSTREAM as BIRD_UPSTREAM
from ambitab_gym.convert.ew_bird import (
    find_bird_files,
    hint_aliases,
    register_bird_databases,
    split_evidence,
)
from ambitab_gym.records import RecordError, TaskRecord, parse_record

__all__ = ["convert", "evidence_aliases", "request_terms"]

UPSTREAM = {
    "name": "AmbiTab-Bird over BIRD",
    "bird": BIRD_UPSTREAM,
    "licence": "CC BY-SA 4.0 (BIRD); released AmbiTab records under their own licence",
}


def _records_file(source: Path) -> Path | None:
    if source.is_file() and source.suffix == ".jsonl":
        return source
    if source.is_dir() and (source / "records.jsonl").is_file():
        return source / "records.jsonl"
    return None


def _database_options(options: BuildOptions) -> list[BuildOptions]:
    """One option set per folder that may hold ``<db>/<db>.sqlite``."""
    roots = []
    if options.databases is not None:
        roots.append(options.databases)
        roots += sorted(p for p in options.databases.glob("*_databases") if p.is_dir())
    return [BuildOptions(source=root, databases=root) for root in roots]


def convert(options: BuildOptions, workspace: Workspace) -> Conversion:
    """Import released AmbiTab-Bird records, or rewrite BIRD tasks through the model hook.

    Args:
        options: ``source`` is the released ``records.jsonl`` (or its folder), or BIRD's
            task folder together with ``llm_url`` and ``model``; ``databases`` holds BIRD's
            databases.
        workspace: where the databases are registered.
    """
    conversion = Conversion(
        corpus="bird",
        oracle="knowledge",
        description=(
            "AmbiTab-Bird: BIRD tasks rewritten to be underspecified, with alternative readings, "
            "executable alternative SQL and fixed resolutions; zero-ambiguity controls included."
        ),
        licence=UPSTREAM["licence"],
        upstream=UPSTREAM,
    )
    released = _records_file(options.source)
    if released is not None:
        _import(released, options, workspace, conversion)
        return conversion
    if not options.llm_url:
        raise BuildError(
            "AmbiTab-Bird's rewrites need a model: give the released AmbiTab-Bird records with "
            "--source PATH/records.jsonl, or BIRD's task folder with --llm-url URL --model NAME"
        )
    _rewrite(options, workspace, conversion)
    return conversion


def _import(
    path: Path, options: BuildOptions, workspace: Workspace, conversion: Conversion
) -> None:
    conversion.inputs[path.name] = sha256_file(path)
    conversion.notes["mode"] = "released AmbiTab files"
    avts: dict[str, list[TaskRecord]] = {}
    keys: dict[str, str] = {}
    lines = path.read_text("utf-8").splitlines()
    for number, line in progress(
        list(enumerate(lines, start=1)), desc="bird", enabled=options.show_progress
    ):
        if not line.strip():
            continue
        key = f"{path.name}:{number}"
        try:
            data = json.loads(line)
            data["corpus"] = "bird"
            record = parse_record(data, where=key)
        except (json.JSONDecodeError, RecordError) as error:
            conversion.drops.append(Drop(key, "invalid_record", str(error)[:300]))
            continue
        avts.setdefault(record.avt_id, []).append(record)
        keys.setdefault(record.avt_id, key)
    needed = {r.verification.database for rs in avts.values() for r in rs}
    for root_options in _database_options(options):
        register_bird_databases(root_options, workspace, needed)
    for avt_id, records in avts.items():
        key = f"{keys[avt_id]} ({avt_id})"
        fixed = request_terms(records, "released")
        if isinstance(fixed, str):
            conversion.drops.append(Drop(key, "no_term_in_request", fixed))
            continue
        conversion.items.append(Item(key, evidence_aliases(fixed)))


def request_terms(records: list[TaskRecord], origin: str) -> list[TaskRecord] | str:
    """The AVT's records with every counted term a phrase of the request, or why not.

    A term that occurs in the request is kept (``origin``); otherwise the request's phrase
    sharing the most of its words (or of an alias's) replaces it and the old term becomes an
    alias (``relocated``). Records of an AVT share the request and terms, so the first
    record decides for all.

    Example:
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "bird",
        ...     "spec": {"request": "List the top earning employees.", "database": "hr"},
        ...     "ambiguities": [{"id": "top", "term": "top earners", "resolution": "3 best"}],
        ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
        >>> fixed = request_terms([record], "released")[0]
        >>> fixed.ambiguities[0].term, fixed.ambiguities[0].aliases, fixed.source["term_origin"]
        ('top earning employees', ('top earners',), {'top': 'relocated'})
    """
    first = records[0]
    request = first.spec.request
    changes: dict[str, tuple[str, tuple[str, ...]]] = {}
    origins: dict[str, str] = {}
    for ambiguity in first.ambiguities:
        if not ambiguity.counted:
            continue
        if find_term(request, ambiguity.term) is not None and term_problem(ambiguity.term) is None:
            origins[ambiguity.id] = origin
            continue
        span = None
        for name in ambiguity.names:
            span = find_phrase(request, name, stem=True)
            if span is None:  # a partial match: widened to the phrase around it
                span = common_phrase(request, name, stem=True)
                span = extend_phrase(request, span) if span is not None else None
            if span is not None and term_problem(span.phrase) is None:
                break
            span = None
        if span is None:
            return f"the term {ambiguity.term!r} of ambiguity {ambiguity.id!r} names no phrase of the request"
        aliases = tuple(a for a in ambiguity.aliases if term_problem(a) is None)
        if term_problem(ambiguity.term) is None:
            aliases = (ambiguity.term, *aliases)
        changes[ambiguity.id] = (span.phrase, aliases)
        origins[ambiguity.id] = "relocated"
    out = []
    for record in records:
        ambiguities = [
            a.model_copy(update={"term": changes[a.id][0], "aliases": changes[a.id][1]})
            if a.id in changes
            else a
            for a in record.ambiguities
        ]
        source = {**(record.source or {}), "term_origin": origins}
        out.append(record.model_copy(update={"ambiguities": tuple(ambiguities), "source": source}))
    return out


def evidence_aliases(records: list[TaskRecord]) -> list[TaskRecord]:
    """The AVT's records with each counted ambiguity's aliases extended by what the evidence
    hints of its readings name (:func:`~ambitab_gym.convert.ew_bird.hint_aliases`, with each
    reading's query) and cleaned (:func:`~ambitab_gym.aliases.clean_aliases`: no duplicate by
    lemma, nothing generic, nothing naming another ambiguity of the AVT). Every record of the
    AVT gets the same aliases, so what a question is credited with never tells the readings apart.

    Example:
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "bird",
        ...     "spec": {"request": "How many long trips were there?", "database": "bikes"},
        ...     "ambiguities": [{"id": "long", "term": "long trips", "aliases": ["long trip"],
        ...         "kind": "knowledge", "resolution": "over 30 minutes",
        ...         "evidence": "long trip refers to duration > 1800"}],
        ...     "verification": {"database": "bikes",
        ...         "reference_sql": "SELECT COUNT(*) FROM trip WHERE duration > 1800"}})
        >>> evidence_aliases([record])[0].ambiguities[0].aliases
        ('long', 'duration', '1800')
    """
    first = records[0]
    candidates: dict[str, list[str]] = {}
    for ambiguity in first.ambiguities:
        found = list(ambiguity.aliases)
        if ambiguity.counted:
            for record in records:
                for reading in record.ambiguities:
                    if reading.id == ambiguity.id and reading.evidence:
                        hints = split_evidence(reading.evidence)
                        found += hint_aliases(
                            ambiguity.term, hints, record.verification.reference_sql
                        )
        candidates[ambiguity.id] = clean_aliases(ambiguity.term, found)
    aliases = {}
    for ambiguity in first.ambiguities:
        others = [
            name
            for other in first.ambiguities
            if other.id != ambiguity.id
            for name in (other.term, *candidates[other.id])
        ]
        aliases[ambiguity.id] = tuple(
            clean_aliases(ambiguity.term, candidates[ambiguity.id], others)
            if ambiguity.counted
            else ambiguity.aliases
        )
    return [
        record.model_copy(
            update={
                "ambiguities": tuple(
                    a.model_copy(update={"aliases": aliases.get(a.id, a.aliases)})
                    for a in record.ambiguities
                )
            }
        )
        for record in records
    ]


def _rewrite(options: BuildOptions, workspace: Workspace, conversion: Conversion) -> None:
    from ambitab_gym.convert.common import read_json_or_jsonl
    from ambitab_gym.convert.hooks import LLMClient, LLMRewriter

    conversion.notes["mode"] = "rewritten by a model (not the released AmbiTab-Bird)"
    rewriter = LLMRewriter(
        LLMClient(
            options.llm_url or "", options.model or "", seed=options.seed, cache=options.llm_cache
        )
    )
    files = find_bird_files(options.source)
    rows_by_file = []
    for path, split in files:
        conversion.inputs[path.name] = sha256_file(path)
        rows_by_file.append((path.name, split, read_json_or_jsonl(path)))
    register_bird_databases(
        options, workspace, {r["db_id"] for _, _, rs in rows_by_file for r in rs}
    )
    for label, split, rows in rows_by_file:
        for index, row in progress(
            list(enumerate(rows)), desc=f"bird {label}", enabled=options.show_progress
        ):
            qid = row.get("question_id", index)
            key = f"{label}#{qid}"
            if row["db_id"] not in workspace:
                conversion.drops.append(
                    Drop(key, "database_missing", f"no database {row['db_id']!r}")
                )
                continue
            proposal = rewriter.rewrite(row, workspace.schema_text(row["db_id"]) or "")
            item = _item_from_rewrite(proposal, row, split, key, qid) if proposal else None
            if item is None:
                conversion.drops.append(
                    Drop(key, "rewrite_failed", "the model gave no usable rewrite")
                )
                continue
            fixed = request_terms(item.records, "llm")
            if isinstance(fixed, str):
                conversion.drops.append(Drop(key, "no_term_in_request", fixed))
                continue
            item.records = evidence_aliases(fixed)
            conversion.items.append(item)


def _item_from_rewrite(proposal: dict, row: dict, split: str, key: str, qid) -> Item | None:
    avt_id = f"bird-{split}-{qid}"
    request = str(proposal.get("request") or "").strip()
    ambiguities = [a for a in proposal.get("ambiguities") or [] if isinstance(a, dict)]
    readings = [r for r in proposal.get("readings") or [] if isinstance(r, dict) and r.get("sql")]
    if not request or not readings:
        return None
    records = []
    try:
        if not ambiguities:  # a zero-ambiguity control: the original reading only
            readings = readings[:1]
        for n, reading in enumerate(readings, start=1):
            resolutions = reading.get("resolutions") or {}
            entries = []
            for a in ambiguities:
                ident = slug(str(a.get("id") or a.get("term") or "a"))
                entries.append(
                    {
                        "id": ident,
                        "term": str(a["term"]),
                        "kind": a.get("kind")
                        if a.get("kind") in ("critical", "knowledge")
                        else "critical",
                        "resolution": str(
                            resolutions.get(a.get("id")) or resolutions.get(a.get("term")) or ""
                        ),
                    }
                )
            records.append(
                parse_record(
                    {
                        "id": f"{avt_id}-{n}",
                        "avt_id": avt_id,
                        "corpus": "bird",
                        "split": split,
                        "spec": {"request": request, "database": row["db_id"]},
                        "ambiguities": entries,
                        "verification": {
                            "engine": "sqlite",
                            "database": row["db_id"],
                            "reference_sql": str(reading["sql"]).strip().rstrip(";"),
                            "compare": {"order": "set"},
                        },
                        "source": {
                            "kind": "bird-rewrite",
                            "question_id": row.get("question_id"),
                            "reading": n,
                        },
                    },
                    where=key,
                )
            )
    except (RecordError, KeyError):
        return None
    return Item(key, records, min_records=2 if ambiguities else 1)
