"""Building a corpus folder from an upstream release: convert, check, write, validate, register.

* :data:`SOURCES` - source name (``ambiqt``, ``ew-bird``, ...) -> corpus name.
* :class:`BuildReport` - what a build produced (the ``--json`` object).
* :func:`build_corpus` - the whole pipeline; the corpus appears at ``out`` only when it passed
  validation (it is written beside it first and moved into place at the end).
* :func:`check_items` - the shared checks: every record's database exists and its reference
  SQL executes with a nonempty result; items with too few surviving records are dropped.
* :func:`term_quality` - how many counted ambiguity terms occur in their request and how they
  were derived (in the manifest and the ``--json`` report).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ambitab_gym.convert.common import (
    BuildError,
    BuildOptions,
    Conversion,
    Drop,
    Item,
    Workspace,
    count_term_origins,
    find_term,
    progress,
    sha256_file,
)
from ambitab_gym.corpora.corpus import ENV_IDS
from ambitab_gym.corpora.home import built_corpora_dir
from ambitab_gym.records import FORMAT_VERSION, PublicSpec, TaskRecord, dump_records
from ambitab_gym.verify.base import QueryError
from ambitab_gym.verify.compare import normalize_rows, results_match

__all__ = [
    "SOURCES",
    "BuildReport",
    "build_corpus",
    "check_items",
    "corpus_for_source",
    "term_quality",
]

logger = logging.getLogger("ambitab_gym")

#: source name as typed on the command line -> corpus name
SOURCES: dict[str, str] = {
    "ambiqt": "ambiqt",
    "ew-bird": "ew_bird",
    "ambrosia": "ambrosia",
    "taco": "taco",
    "bird-interact": "bird_interact",
    "bird": "bird",
}

_MODULES = {
    "ambiqt": "ambitab_gym.convert.ambiqt",
    "ew_bird": "ambitab_gym.convert.ew_bird",
    "ambrosia": "ambitab_gym.convert.ambrosia",
    "taco": "ambitab_gym.convert.taco",
    "bird_interact": "ambitab_gym.convert.bird_interact",
    "bird": "ambitab_gym.convert.bird",
}


def corpus_for_source(source: str) -> str:
    """The corpus name for a source name (``ew-bird`` and ``ew_bird`` both work).

    >>> corpus_for_source("bird-interact")
    'bird_interact'
    """
    key = source.strip().lower()
    if key in SOURCES:
        return SOURCES[key]
    if key in SOURCES.values():
        return key
    raise BuildError(f"unknown source {source!r}; choose one of: {', '.join(SOURCES)}")


@dataclass
class BuildReport:
    """The outcome of a build (printed as JSON by ``ambitab-gym build --json``).

    ``terms`` is :func:`term_quality` of the written records.

    Example:
        >>> BuildReport("taco", "/tmp/x", 2, 2, 2, {"empty_result": 1}).as_dict()["dropped"]
        {'empty_result': 1}
    """

    corpus: str
    out: str | None
    records: int
    avts: int
    retained_items: int
    dropped: dict[str, int]
    violations: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    terms: dict[str, Any] | None = None
    dropped_by_type: dict[str, dict[str, Any]] | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "corpus": self.corpus,
            "out": self.out,
            "records": self.records,
            "avts": self.avts,
            "retained_items": self.retained_items,
            "dropped": dict(sorted(self.dropped.items())),
        }
        if self.terms is not None:
            data["terms"] = self.terms
        if self.dropped_by_type:
            data["dropped_by_type"] = self.dropped_by_type
        if self.error is not None:
            data["error"] = self.error
            data["violations"] = self.violations
        return data

    @property
    def ok(self) -> bool:
        return self.error is None


def term_quality(records: list[TaskRecord]) -> dict[str, Any]:
    """Counted ambiguities (once per AVT), how many have a term occurring in their request (by
    the deterministic oracle's rule), that share, and how the terms were derived
    (``source.term_origin``).

    >>> term_quality([])
    {'counted_ambiguities': 0, 'in_request': 0, 'share_in_request': None, 'origins': {}}
    """
    counted = in_request = 0
    seen: set[str] = set()
    for record in records:
        if record.avt_id in seen:
            continue
        seen.add(record.avt_id)
        for ambiguity in record.ambiguities:
            if ambiguity.counted:
                counted += 1
                in_request += find_term(record.spec.request, ambiguity.term) is not None
    return {
        "counted_ambiguities": counted,
        "in_request": in_request,
        "share_in_request": round(in_request / counted, 4) if counted else None,
        "origins": count_term_origins(records),
    }


def _failure_reason(error: QueryError) -> str:
    return "reference_timeout" if error.category == "timeout" else "reference_sql_failed"


def _record_checks() -> Callable[[TaskRecord, PublicSpec, str], list[tuple[str, str]]] | None:
    """The validator's per-record checks, when :mod:`ambitab_gym.validate` is installed."""
    try:
        checks = importlib.import_module("ambitab_gym.validate.checks")
    except ImportError:
        return None

    def run(record: TaskRecord, spec: PublicSpec, oracle: str) -> list[tuple[str, str]]:
        found = []
        for violation in (
            checks.frozen_response_checks(record, oracle)
            + checks.term_checks(record)
            + checks.canonical_checks(record, oracle)
            + checks.leak_checks(record, spec)
        ):
            found.append((str(violation.check), str(violation.message)))
        return found

    return run


def _same_result(a: list[tuple], b: list[tuple], ra: TaskRecord, rb: TaskRecord) -> bool:
    rules_a, rules_b = ra.verification.compare, rb.verification.compare
    na = normalize_rows(a, rules_a.float_decimals)
    nb = normalize_rows(b, rules_b.float_decimals)
    return results_match(b, na, rules_a, reference_normalized=True) or results_match(
        a, nb, rules_b, reference_normalized=True
    )


def check_items(
    conversion: Conversion, workspace: Workspace, *, show_progress: bool = False
) -> tuple[list[Item], list[Drop]]:
    """The shared build checks on every record of every item.

    A record is left out when its database is missing (``database_missing``), its reference
    SQL fails (``reference_sql_failed`` / ``reference_timeout``) or returns no rows
    (``empty_result``), its result equals an earlier reading's (``duplicate_result``), or one
    of the validator's record checks fails (the check's code: ``frozen_response``,
    ``term_in_request``, ``term_words``, ``canonical_question``, ``leak``). Records with write
    statements (preprocess SQL) are not executed. An item keeps its surviving records when at
    least ``min_records`` survive; otherwise it is dropped with the reason of its first lost
    record. An item whose request and database repeat an earlier retained item's is dropped
    (``duplicate_request``): different AVTs never share the public request.

    Returns:
        the retained items and the drops (items and single readings).
    """
    kept: list[Item] = []
    drops: list[Drop] = []
    requests: dict[tuple[str, str], str] = {}
    record_checks = _record_checks()
    schemas: dict[str, str | None] = {}
    total = len(conversion.items)
    for item in progress(conversion.items, desc="checking", total=total, enabled=show_progress):
        survivors: list[TaskRecord] = []
        results: list[list[tuple] | None] = []
        lost: list[Drop] = []
        for record in item.records:
            database = record.verification.database
            if database not in workspace:
                lost.append(Drop(record.id, "database_missing", f"no database {database!r}"))
                continue
            rows: list[tuple] | None = None
            if conversion.check_references and not record.verification.preprocess_sql:
                try:
                    rows = workspace.execute(database, record.verification.reference_sql)
                except QueryError as error:
                    lost.append(Drop(record.id, _failure_reason(error), error.message[:300]))
                    continue
                if not rows and not record.verification.compare.allow_empty:
                    lost.append(
                        Drop(record.id, "empty_result", "the reference SQL returns no rows")
                    )
                    continue
                twin = next(
                    (
                        other.id
                        for other, other_rows in zip(survivors, results, strict=True)
                        if other_rows is not None and _same_result(rows, other_rows, record, other)
                    ),
                    None,
                )
                if twin is not None:
                    lost.append(Drop(record.id, "duplicate_result", f"same result as {twin}"))
                    continue
            if record_checks is not None:
                if database not in schemas:
                    schemas[database] = workspace.schema_text(database)
                spec = record.spec
                if not spec.schema_text and schemas[database]:
                    spec = spec.model_copy(update={"schema_text": schemas[database]})
                problems = record_checks(record, spec, conversion.oracle)
                if problems:
                    lost.append(Drop(record.id, problems[0][0], problems[0][1][:300]))
                    continue
            survivors.append(record)
            results.append(rows)
        if len(survivors) >= max(1, item.min_records):
            spec = survivors[0].spec
            request = (" ".join(spec.request.split()), spec.database)
            if request in requests:
                drops.append(
                    Drop(
                        item.key,
                        "duplicate_request",
                        f"same request and database as {requests[request]}",
                        item.group,
                    )
                )
                continue
            requests[request] = item.key
            kept.append(Item(item.key, survivors, item.min_records, item.group))
            drops.extend(lost)  # single readings lost from a retained item
        else:
            reason = lost[0].reason if lost else "too_few_readings"
            detail = "; ".join(f"{d.item}: {d.reason} ({d.detail})" for d in lost) or (
                f"{len(survivors)} of {len(item.records)} readings survive, "
                f"{item.min_records} needed"
            )
            drops.append(Drop(item.key, reason, detail[:500], item.group))
    return kept, drops


def drops_by_group(items: list[Item], drops: list[Drop]) -> dict[str, dict[str, Any]]:
    """Per item kind: its source items, the items dropped by reason and each reason's share.

    Args:
        items: the retained items.
        drops: every drop; those without a group (or of single readings) are not counted.

    Example:
        >>> kept = [Item("a", [], group="vague"), Item("c", [], group="scope")]
        >>> drops_by_group(kept, [Drop("b", "no_term_in_request", group="vague")])
        ... # doctest: +NORMALIZE_WHITESPACE
        {'scope': {'items': 1, 'dropped': {}, 'share_dropped': {}},
         'vague': {'items': 2, 'dropped': {'no_term_in_request': 1},
                   'share_dropped': {'no_term_in_request': 0.5}}}
    """
    seen: dict[str, set[str]] = {}
    reasons: dict[str, Counter] = {}
    for item in items:
        if item.group:
            seen.setdefault(item.group, set()).add(item.key)
    for drop in drops:
        if drop.group:
            seen.setdefault(drop.group, set()).add(drop.item)
            reasons.setdefault(drop.group, Counter())[drop.reason] += 1
    out = {}
    for group in sorted(seen):
        total, counts = len(seen[group]), reasons.get(group, Counter())
        out[group] = {
            "items": total,
            "dropped": dict(sorted(counts.items())),
            "share_dropped": {r: round(n / total, 4) for r, n in sorted(counts.items())},
        }
    return out


def _validate(folder: Path) -> list[dict[str, str]] | None:
    """Run ``ambitab_gym.validate`` on the written corpus; None when it is not installed."""
    try:
        validate = importlib.import_module("ambitab_gym.validate")
    except ImportError:
        logger.warning("ambitab_gym.validate is not available: the corpus was not validated")
        return None
    from ambitab_gym.corpora.corpus import Corpus

    corpus = Corpus(folder, origin="path")
    violations = validate.validate_corpus(corpus)
    return [
        {"record_id": str(v.record_id), "check": str(v.check), "message": str(v.message)}
        for v in violations
    ]


def _splits(records: list[TaskRecord]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        entry = out.setdefault(record.split, {"records": 0, "avts": set(), "databases": set()})
        entry["records"] += 1
        entry["avts"].add(record.avt_id)
        entry["databases"].add(record.spec.database)
    return {
        name: {
            "records": e["records"],
            "avts": len(e["avts"]),
            "databases": sorted(e["databases"]),
        }
        for name, e in out.items()
    }


def _write(
    conversion: Conversion,
    workspace: Workspace,
    items: list[Item],
    drops: list[Drop],
    options: BuildOptions,
) -> tuple[list[TaskRecord], dict[str, int]]:
    import ambitab_gym

    records = [record for item in items for record in item.records]
    ids = Counter(r.id for r in records)
    repeated = sorted(i for i, n in ids.items() if n > 1)
    if repeated:
        raise BuildError(f"converter bug: repeated record ids {repeated[:5]}; please report it")
    used = {r.verification.database for r in records} | {r.spec.database for r in records}
    files = workspace.finalize(used)
    root = workspace.root
    dump_records(records, root / "records.jsonl")
    with (root / "dropped.jsonl").open("w", encoding="utf-8") as handle:
        for drop in drops:
            handle.write(json.dumps(drop.as_dict(), ensure_ascii=False) + "\n")
    dropped = dict(sorted(Counter(d.reason for d in drops).items()))
    ambiguities = sum(len(r.ambiguities) for r in records)
    manifest = {
        "name": conversion.corpus,
        "env_id": next((k for k, v in ENV_IDS.items() if v == conversion.corpus), None),
        "version": ambitab_gym.__version__,
        "format_version": FORMAT_VERSION,
        "description": conversion.description,
        "oracle": conversion.oracle,
        "engine": conversion.engine,
        "dialect": conversion.dialect,
        "splits": _splits(records),
        "counts": {
            "records": len(records),
            "avts": len({r.avt_id for r in records}),
            "retained_items": len(items),
            "ambiguities": ambiguities,
            "counted_ambiguities": sum(r.m for r in records),
            "zero_ambiguity_records": sum(1 for r in records if not r.ambiguities),
            "terms": term_quality(records),
            "databases": len(files),
            "dropped": sum(dropped.values()),
        },
        "databases": {
            name: {"file": rel, "sha256": sha256_file(root / rel)} for name, rel in files.items()
        },
        "records": {"file": "records.jsonl", "sha256": sha256_file(root / "records.jsonl")},
        "dropped": {
            "file": "dropped.jsonl",
            "sha256": sha256_file(root / "dropped.jsonl"),
            "reasons": dropped,
        },
        "licence": conversion.licence,
        "provenance": {
            "kind": "built",
            "converter": f"ambitab_gym.convert.{_module_name(conversion.corpus)}",
            "ambitab_gym_version": ambitab_gym.__version__,
            "seed": options.seed,
            "upstream": conversion.upstream,
            "inputs": dict(sorted(conversion.inputs.items())),
            "model_hooks": (
                {"llm_url": options.llm_url, "model": options.model} if options.llm_url else None
            ),
            **conversion.notes,
        },
    }
    text = json.dumps(manifest, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    (root / "manifest.json").write_text(text, encoding="utf-8")
    return records, dropped


def _module_name(corpus: str) -> str:
    return _MODULES[corpus].rsplit(".", 1)[-1]


def _check_out(out: Path) -> None:
    if out.exists() and (
        not out.is_dir() or (any(out.iterdir()) and not (out / "manifest.json").is_file())
    ):
        raise BuildError(
            f"{out} exists and is not a corpus folder; choose another --out or remove it yourself"
        )


def _install(tmp: Path, out: Path) -> None:
    """Move the built folder into place, replacing an earlier corpus there."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def build_corpus(
    source: str, options: BuildOptions, *, out: str | Path | None = None, validate: bool = True
) -> BuildReport:
    """Convert an upstream release into a corpus folder.

    Args:
        source: ``ambiqt``, ``ew-bird``, ``ambrosia``, ``taco``, ``bird-interact`` or ``bird``.
        options: the source path, databases, seed and hooks.
        out: the corpus folder; default ``<data home>/corpora/<name>``, where ``gym.make``
            finds it.
        validate: run ``ambitab_gym.validate`` on the result (a build with violations is not
            installed and the report carries them).

    Returns:
        The report; ``report.ok`` is False when validation failed (nothing was installed).

    Raises:
        BuildError: when the input cannot be read (nothing surviving the conversion is a
            failed report, with the drop counts).
    """
    corpus = corpus_for_source(source)
    options.source = Path(options.source).expanduser()
    if not options.source.exists():
        raise BuildError(f"--source {options.source} does not exist")
    if options.databases is not None:
        options.databases = Path(options.databases).expanduser()
        if not options.databases.exists():
            raise BuildError(f"--databases {options.databases} does not exist")
    extra = options.extra or {}
    for option, given in (
        ("--responses", options.responses),
        ("--ground-truth", extra.get("ground_truth")),
    ):
        if given is not None and not Path(given).exists():
            raise BuildError(f"{option} {given} does not exist")
    target = Path(out).expanduser() if out is not None else built_corpora_dir() / corpus
    target = target.resolve()
    _check_out(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.building-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    workspace = Workspace(tmp)
    try:
        module = importlib.import_module(_MODULES[corpus])
        conversion: Conversion = module.convert(options, workspace)
        items, check_drops = check_items(conversion, workspace, show_progress=options.show_progress)
        drops = list(conversion.drops) + check_drops
        if not items:
            reasons = Counter(d.reason for d in drops)
            summary = ", ".join(f"{r}: {n}" for r, n in sorted(reasons.items())) or "no items"
            return BuildReport(
                corpus=corpus,
                out=None,
                records=0,
                avts=0,
                retained_items=0,
                dropped=dict(sorted(reasons.items())),
                error=f"no {corpus} item survived the conversion ({summary}); " + _hint(reasons),
            )
        records, dropped = _write(conversion, workspace, items, drops, options)
        report = BuildReport(
            corpus=corpus,
            out=str(target),
            records=len(records),
            avts=len({r.avt_id for r in records}),
            retained_items=len(items),
            dropped=dropped,
            terms=term_quality(records),
            dropped_by_type=drops_by_group(items, drops) or None,
        )
        violations = _validate(tmp) if validate else None
        if violations:
            report.out = None
            report.violations = violations
            report.error = (
                f"the built corpus failed validation ({len(violations)} violations); "
                "it was not installed"
            )
            return report
        _install(tmp, target)
        return report
    finally:
        workspace.close()
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(tmp)


def _hint(reasons: Counter) -> str:
    if reasons.get("database_missing"):
        return "give the upstream databases with --databases PATH"
    if reasons.get("no_reference_sql"):
        return "this release withholds its solutions; give them with --ground-truth PATH"
    return "see the reasons above"
