"""The corpus validator: checks every invariant of ``docs/format.md`` and reports violations.

* :func:`validate_corpus` - run every check on a corpus (or a corpus folder, env id or name).
* :class:`Violation` and :data:`CHECKS` (from :mod:`ambitab_gym.validate.checks`) - what a
  check reports, and the check codes.
* :func:`resolve_corpus_folder` - find a corpus folder the way :func:`load_corpus` does, without
  loading its records.
* :func:`summarize` - violations per check.
* :func:`normalize_text`, :func:`is_trivial_secret`, :func:`leaks_into` (from
  :mod:`ambitab_gym.validate.leaks`) - the leak rule.

The validator is a maintainer's tool: its messages quote resolutions and reference SQL and
must never be shown to an agent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ambitab_gym.corpora.corpus import (
    Corpus,
    Manifest,
    resolve_corpus,
)
from ambitab_gym.records import RecordError, json_error_text, parse_record
from ambitab_gym.validate.checks import (
    CHECKS,
    Violation,
    avt_checks,
    canonical_checks,
    count_checks,
    distinct_checks,
    duplicate_request_checks,
    execution_checks,
    file_checks,
    frozen_response_checks,
    leak_checks,
    record_manifest_checks,
    term_checks,
)
from ambitab_gym.validate.leaks import (
    COMMON_WORDS,
    is_trivial_secret,
    leaks_into,
    normalize_text,
)
from ambitab_gym.verify import Verifier

__all__ = [
    "CHECKS",
    "COMMON_WORDS",
    "Violation",
    "is_trivial_secret",
    "leaks_into",
    "normalize_text",
    "resolve_corpus_folder",
    "summarize",
    "validate_corpus",
]


# -- finding a corpus ------------------------------------------------------------------------------


def resolve_corpus_folder(reference: str | Path) -> tuple[Path, str]:
    """The folder and origin (``path``, ``built`` or ``bundled``) a reference names.

    The same resolver as :func:`load_corpus` and ``gym.make``
    (:func:`ambitab_gym.corpora.corpus.resolve_corpus`): an env id or name is the corpus built
    into the data home, else the bundled sample; a folder only when given as a path.

    Raises:
        CorpusNotFound: nothing answers to the reference.
    """
    return resolve_corpus(reference)


def _check_loaded(corpus: Corpus, verifier: Verifier) -> list[Violation]:
    manifest = corpus.manifest
    corpus_level = file_checks(corpus.path, manifest) + count_checks(corpus)
    per_record: list[Violation] = []
    seen: set[str] = set()
    unrunnable: set[str] = set()
    for record in corpus.records:
        if record.id in seen:
            per_record.append(Violation(record.id, "unique_id", "the record id is repeated"))
        seen.add(record.id)
        per_record += record_manifest_checks(record, manifest)
        if record.verification.database not in manifest.databases:
            unrunnable.add(record.id)
    per_record += avt_checks(corpus)
    per_record += duplicate_request_checks(corpus)
    for record in corpus.records:
        per_record += frozen_response_checks(record, manifest.oracle)
        per_record += canonical_checks(record, manifest.oracle)
        per_record += term_checks(record)
        try:
            spec = corpus.public_spec(record)
        except Exception:  # the database is missing or broken; reported by other checks
            spec = record.spec
        per_record += leak_checks(record, spec)
    executed, rows_by_id = execution_checks(corpus, verifier, unrunnable)
    per_record += executed
    per_record += distinct_checks(corpus, rows_by_id)
    order = {r.id: i for i, r in reversed(list(enumerate(corpus.records)))}
    codes = list(CHECKS)
    per_record.sort(key=lambda v: (order.get(v.record_id or "", -1), codes.index(v.check)))
    return corpus_level + per_record


def _scan_records(path: Path) -> list[Violation]:
    """Line-level problems of a records file that does not load: bad lines and repeated ids."""
    out: list[Violation] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                out.append(Violation(None, "schema", f"{path.name}:{number}: blank line"))
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as error:
                message = f"{path.name}:{number}: invalid JSON ({json_error_text(error)})"
                out.append(Violation(None, "schema", message))
                continue
            raw_id = data.get("id") if isinstance(data, dict) else None
            record_id = raw_id if isinstance(raw_id, str) and raw_id else None
            try:
                parse_record(data, where=f"{path.name}:{number}")
            except RecordError as error:
                out.append(Violation(record_id, "schema", str(error)))
            if record_id is not None:
                if record_id in seen:
                    message = f"the record id is repeated (lines {seen[record_id]} and {number})"
                    out.append(Violation(record_id, "unique_id", message))
                else:
                    seen[record_id] = number
    return out


def _check_unloadable(folder: Path, error: Exception) -> list[Violation]:
    try:
        manifest = Manifest.model_validate(
            json.loads((folder / "manifest.json").read_text("utf-8"))
        )
    except Exception:
        return [Violation(None, "manifest", str(error))]
    records_path = folder / manifest.records.file
    if not records_path.is_file():
        return [Violation(None, "manifest", f"records file {manifest.records.file} is missing")]
    found = _scan_records(records_path)
    if not found:
        found = [Violation(None, "schema", str(error))]
    return file_checks(folder, manifest) + found


def validate_corpus(
    corpus: Corpus | str | Path, *, verifier: Verifier | None = None
) -> list[Violation]:
    """Check every invariant of a corpus and return what breaks them (empty when it is sound).

    Checks (codes in :data:`CHECKS`): record schema and unique ids; the manifest (databases the
    records name, database files, checksums, split and record counts); AVT consistency; frozen
    responses where the intent oracle needs them; that the canonical question about each
    ambiguity, asked in annotation order in one dialogue as the full asker does, credits exactly
    that ambiguity under the corpus's deterministic oracle; that every counted ambiguity's term
    occurs in the request and no term or alias is only function words, only SQL keywords, an
    SQL fragment or an instruction; that no two AVTs share request and database; leaks; that every reference SQL
    executes and returns rows; that the interpretations of one AVT give pairwise different
    results (under either record's comparison rules, on the verifier's normalized rows).

    Leak rule: a resolution, frozen response, sql snippet or reference SQL leaks when, after
    lower-casing and folding whitespace, it occurs in the request, a column meaning, an external
    knowledge entry or the schema, not starting or ending inside a word. Trivial secrets are
    ignored: shorter than three characters, a single number, or a single common word (see
    :func:`is_trivial_secret`). Single-token secrets (``years_old``, ``singer.age``) are not
    looked for in the schema, where column names belong.

    When given a folder, env id or name whose records do not load, the schema and unique-id
    problems of every line are reported (with the manifest's file checks); the other checks run
    once the records load. Records with ``preprocess_sql`` are not executed (the read-only
    verifier does not support them).

    Args:
        corpus: a loaded :class:`Corpus`, or a corpus folder, env id or corpus name.
        verifier: the verifier whose normalized reference rows are compared; by default one is
            opened on the corpus and closed afterwards.

    Returns:
        The violations: corpus-level ones first, then by record in file order.

    Raises:
        CorpusNotFound: a folder, env id or name that names no corpus.

    Example:
        >>> validate_corpus("AmbiTab-AmbiQT-v0")
        []
    """
    if not isinstance(corpus, Corpus):
        folder, origin = resolve_corpus_folder(corpus)
        try:
            corpus = Corpus(folder, origin=origin)
        except RecordError as error:
            return _check_unloadable(folder, error)
    own = verifier is None
    verifier = verifier if verifier is not None else Verifier(corpus.open_engine)
    try:
        return _check_loaded(corpus, verifier)
    finally:
        if own:
            verifier.close()


def summarize(violations: Iterable[Violation]) -> dict[str, int]:
    """Violations per check code, in :data:`CHECKS` order.

    >>> summarize([Violation("r1", "leak", "x"), Violation(None, "checksum", "y")])
    {'checksum': 1, 'leak': 1}
    """
    counts: dict[str, int] = {}
    for v in violations:
        counts[v.check] = counts.get(v.check, 0) + 1
    return {code: counts[code] for code in CHECKS if code in counts}
