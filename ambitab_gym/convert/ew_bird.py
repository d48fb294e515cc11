"""BIRD records and databases -> AmbiTab-EW-Bird (evidence withheld).

BIRD's ``evidence`` field holds hints separated by semicolons. Each hint becomes a masked
knowledge ambiguity: its term is the concept the hint defines ("X refers to ..." -> "X"), its
resolution is the hint, and the hint is withheld from the visible prompt (the public spec holds
the question only). Hints that define the same term are merged. Rows without evidence are
dropped (``no_evidence``): only ambiguity-bearing rows are evaluated. BIRD train becomes
``train`` and BIRD dev (or Mini-Dev) ``dev``.

The paper's row filter (keep a row when a model fails without the evidence and succeeds with
it) is the optional :class:`~ambitab_gym.convert.hooks.EvidenceBenefitFilter`, switched on by
``--llm-url`` and ``--model``.

* :func:`convert` - the converter entry point.
* :func:`split_evidence` - hints of an evidence string.
* :func:`hint_term` - the concept a hint defines.
* :func:`find_bird_files`, :func:`register_bird_databases` - shared with :mod:`.bird`.
"""

from __future__ import annotations

import re
from pathlib import Path

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
)
from ambitab_gym.records import TaskRecord, parse_record

__all__ = [
    "UPSTREAM",
    "convert",
    "find_bird_files",
    "hint_term",
    "register_bird_databases",
    "split_evidence",
]

UPSTREAM = {
    "name": "BIRD",
    "url": "https://bird-bench.github.io/",
    "citation": "Li et al., 2023, Can LLM Already Serve as A Database Interface? (BIRD)",
    "licence": "CC BY-SA 4.0",
}

_STRONG = re.compile(
    r"\s+(?:refers?\s+to|referring\s+to|refers?|means?|stands?\s+for|is\s+defined\s+as|"
    r"represents?|indicates?|denotes?)\s+|\s*(?:=|:)\s*",
    re.IGNORECASE,
)
_WEAK = re.compile(r"\s+(?:is|are)\s+", re.IGNORECASE)


def split_evidence(evidence: str | None) -> list[str]:
    """The hints of a BIRD evidence string: split on semicolons, trimmed, empties dropped.

    >>> split_evidence("a refers to x ; b refers to y;")
    ['a refers to x', 'b refers to y']
    >>> split_evidence("major refers to major_name.")
    ['major refers to major_name']
    >>> split_evidence("")
    []
    """
    hints = []
    for part in (evidence or "").split(";"):
        hint = part.strip().rstrip(".").strip()
        if hint:
            hints.append(hint)
    return hints


def hint_term(hint: str) -> str:
    """The concept a hint defines: the text before "refers to", "means", "=", ":" ...,
    else before "is"/"are", else the hint itself.

    >>> hint_term("non-carcinogenic molecules refers to label = '-'")
    'non-carcinogenic molecules'
    >>> hint_term("average number of oxygen atom = AVG(element = 'o')")
    'average number of oxygen atom'
    >>> hint_term("Angela Sanders is the full name")
    'Angela Sanders'
    >>> hint_term("most common bond type refers MAX(COUNT(bond_type))")
    'most common bond type'
    """
    for pattern in (_STRONG, _WEAK):
        parts = pattern.split(hint, maxsplit=1)
        if len(parts) == 2:
            term = parts[0].strip().strip("'\"`").strip()
            if term:
                return term
    return hint.strip()


def find_bird_files(source: Path) -> list[tuple[Path, str]]:
    """BIRD task files under ``source`` with their AmbiTab split.

    ``train.json`` -> train; ``dev.json`` and Mini-Dev's ``mini_dev_sqlite.json`` -> dev.
    """
    if source.is_file():
        name = source.name.lower()
        return [(source, "train" if name.startswith("train") else "dev")]
    found: list[tuple[Path, str]] = []
    for path in sorted(source.glob("*.json")):
        name = path.name.lower()
        if name in {"train.json"}:
            found.append((path, "train"))
        elif name in {"dev.json", "mini_dev_sqlite.json"}:
            found.append((path, "dev"))
    if not found:
        raise BuildError(
            f"no BIRD task file in {source}: give BIRD's dev/ or train/ folder "
            "(it holds dev.json or train.json)"
        )
    return found


def _database_roots(options: BuildOptions) -> list[Path]:
    base = options.source if options.source.is_dir() else options.source.parent
    roots = []
    if options.databases is not None:
        roots.append(options.databases)
    roots += [base / "dev_databases", base / "train_databases", base / "databases"]
    return [r for r in roots if r.is_dir()]


def register_bird_databases(options: BuildOptions, workspace: Workspace, db_ids: set[str]) -> None:
    """Register ``<root>/<db>/<db>.sqlite`` of every needed database that exists."""
    for root in _database_roots(options):
        for db_id in sorted(db_ids):
            if db_id in workspace:
                continue
            path = root / db_id / f"{db_id}.sqlite"
            if path.is_file():
                workspace.add_file(db_id, path)


def _ambiguities(hints: list[str]) -> list[dict]:
    merged: dict[str, dict] = {}
    for hint in hints:
        term = hint_term(hint)
        key = " ".join(term.lower().split())
        if key in merged:
            merged[key]["resolution"] += f"; {hint}"
            merged[key]["evidence"] += f"; {hint}"
            continue
        merged[key] = {
            "id": f"hint_{len(merged) + 1}",
            "term": term,
            "kind": "knowledge",
            "resolution": hint,
            "evidence": hint,
        }
    return list(merged.values())


def _record(row: dict, split: str, label: str, hints: list[str]) -> TaskRecord:
    qid = row.get("question_id", row.get("_index"))
    record_id = f"ew_bird-{split}-{qid}"
    sql = row["SQL"].strip()
    return parse_record(
        {
            "id": record_id,
            "avt_id": record_id,
            "corpus": "ew_bird",
            "split": split,
            "spec": {"request": row["question"].strip(), "database": row["db_id"]},
            "ambiguities": _ambiguities(hints),
            "verification": {
                "engine": "sqlite",
                "database": row["db_id"],
                "reference_sql": sql,
                "compare": {"order": "set"},
            },
            "source": {
                "kind": "bird",
                "file": label,
                "question_id": row.get("question_id"),
                "difficulty": row.get("difficulty"),
                "evidence": row.get("evidence", ""),
            },
        },
        where=f"{label}#{qid}",
    )


def convert(options: BuildOptions, workspace: Workspace) -> Conversion:
    """Convert BIRD's dev/ or train/ folder (task JSON plus ``*_databases/``).

    Args:
        options: ``source`` is the BIRD folder or task file; ``databases`` the folder of
            ``<db>/<db>.sqlite`` when not beside the task file; ``llm_url``/``model`` switch
            on the evidence-benefit row filter.
        workspace: where the databases are registered.
    """
    files = find_bird_files(options.source)
    conversion = Conversion(
        corpus="ew_bird",
        oracle="knowledge",
        description=(
            "AmbiTab-EW-Bird built from BIRD: each semicolon-separated evidence hint is a masked "
            "knowledge ambiguity withheld from the visible prompt."
        ),
        licence="CC BY-SA 4.0 (BIRD)",
        upstream=UPSTREAM,
    )
    rows_by_file = []
    for path, split in files:
        conversion.inputs[path.name] = sha256_file(path)
        rows = read_json_or_jsonl(path)
        rows_by_file.append((path.name, split, rows))
    register_bird_databases(
        options, workspace, {r["db_id"] for _, _, rs in rows_by_file for r in rs}
    )
    row_filter = None
    if options.llm_url:
        from ambitab_gym.convert.hooks import EvidenceBenefitFilter, LLMClient

        row_filter = EvidenceBenefitFilter(
            LLMClient(options.llm_url, options.model or "", seed=options.seed)
        )
        conversion.notes["row_filter"] = "evidence benefit (model fails without, succeeds with)"
    seen: set[str] = set()
    for label, split, rows in rows_by_file:
        for index, row in progress(
            list(enumerate(rows)), desc=f"ew-bird {label}", enabled=options.show_progress
        ):
            row = {**row, "_index": index}
            key = f"{label}#{row.get('question_id', index)}"
            hints = split_evidence(row.get("evidence"))
            if not hints:
                conversion.drops.append(Drop(key, "no_evidence", "the row has no evidence hint"))
                continue
            try:
                record = _record(row, split, label, hints)
            except MALFORMED as error:
                conversion.drops.append(malformed(key, error))
                continue
            if record.id in seen:
                conversion.drops.append(Drop(key, "duplicate_row", f"{record.id} appears twice"))
                continue
            seen.add(record.id)
            if row_filter is not None and record.spec.database in workspace:
                keep, why = row_filter.keep(
                    request=record.spec.request,
                    evidence=hints,
                    reference_sql=record.verification.reference_sql,
                    database=record.spec.database,
                    schema=workspace.schema_text(record.spec.database) or "",
                    execute=lambda db, sql: workspace.execute(db, sql),
                )
                if not keep:
                    conversion.drops.append(Drop(key, "no_evidence_benefit", why))
                    continue
            conversion.items.append(Item(key, [record]))
    return conversion
