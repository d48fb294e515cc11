"""The individual checks of the corpus validator and the :class:`Violation` they report.

* :class:`Violation` - one broken invariant: the record id (None for the corpus), a check code
  and a message.
* :data:`CHECKS` - the check codes and what each one guards.

Each ``*_checks`` function checks one invariant and returns its violations;
:func:`ambitab_gym.validate.validate_corpus` runs them all.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

from ambitab_gym.aliases import alias_problem
from ambitab_gym.corpora.corpus import Corpus, Manifest
from ambitab_gym.oracles import OracleContext, OracleTurn, canonical_question, deterministic_oracle
from ambitab_gym.records import PublicSpec, TaskRecord
from ambitab_gym.terms import find_term, term_problem
from ambitab_gym.validate.leaks import leaks_into, normalize_text, public_fields, secrets_of
from ambitab_gym.verify import Limits, QueryError, Verifier, results_match
from ambitab_gym.verify.verifier import is_write_task

__all__ = [
    "CHECKS",
    "Violation",
    "avt_checks",
    "canonical_checks",
    "count_checks",
    "distinct_checks",
    "duplicate_request_checks",
    "execution_checks",
    "file_checks",
    "frozen_response_checks",
    "leak_checks",
    "record_manifest_checks",
    "term_checks",
]

#: Check code -> the invariant it guards (in the order the checks run).
CHECKS: dict[str, str] = {
    "schema": "every line of records.jsonl is a valid record (format version, fields, kinds)",
    "unique_id": "record ids are unique",
    "manifest": "records name databases the manifest lists, the database files exist, the "
    "records' corpus and the split/record counts agree with the manifest",
    "checksum": "sha256 checksums in the manifest match the files",
    "avt": "records of one AVT share the spec, the split and the ambiguity ids, terms, aliases "
    "and kinds; a zero-ambiguity record is an AVT of its own",
    "frozen_response": "every ambiguity has a frozen response where the oracle needs one "
    "(intent oracle)",
    "canonical_question": "the canonical question about each ambiguity credits exactly that "
    "ambiguity under the corpus's deterministic oracle",
    "term_in_request": "the term of every counted ambiguity occurs in the public request, by the "
    "deterministic oracle's rule (whole words, case-insensitive)",
    "term_words": "no term or alias of a counted ambiguity is only function words, only SQL "
    "keywords, an SQL fragment or an instruction",
    "duplicate_request": "different AVTs never share the public request and database",
    "leak": "no resolution, frozen response, sql snippet or reference SQL appears in the public "
    "spec",
    "reference_sql": "every reference SQL executes (a write task: its own solution passes its "
    "task on a scratch copy; a solution that needs PostgreSQL is not checked on DuckDB)",
    "empty_result": "every reference result is non-empty (unless compare.allow_empty)",
    "distinct_results": "the interpretations of one AVT give pairwise different results",
}

_REFERENCE_LIMITS = Limits(timeout_s=60.0, max_sql_length=1_000_000)


@dataclass(frozen=True)
class Violation:
    """One broken invariant.

    Attributes:
        record_id: the record that breaks it, or None for the corpus as a whole.
        check: a code from :data:`CHECKS`.
        message: what is wrong and where.

    Example:
        >>> str(Violation("bird-0001", "leak", "the resolution appears in the request"))
        'bird-0001 [leak] the resolution appears in the request'
    """

    record_id: str | None
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.record_id or '(corpus)'} [{self.check}] {self.message}"

    def as_dict(self) -> dict:
        """The violation as a plain dict (for JSON)."""
        return asdict(self)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def file_checks(folder: Path, manifest: Manifest) -> list[Violation]:
    """``manifest``/``checksum``: the files the manifest lists exist and match their sha256.

    Args:
        folder: the corpus folder.
        manifest: its manifest.

    Returns:
        Corpus-level violations.
    """
    out: list[Violation] = []
    entries = [(f"database {n!r}", e.file, e.sha256) for n, e in manifest.databases.items()]
    entries.append(("records", manifest.records.file, manifest.records.sha256))
    for label, file, digest in entries:
        path = folder / file
        if not path.is_file():
            out.append(Violation(None, "manifest", f"{label}: file {file} is missing"))
        elif digest and _sha256(path) != digest:
            out.append(
                Violation(
                    None,
                    "checksum",
                    f"{label}: {file} does not match the manifest's sha256 (update the manifest "
                    "after editing the file)",
                )
            )
    return out


def _declared(value: object, key: str) -> int | None:
    if key == "records" and isinstance(value, int):
        return value
    if isinstance(value, dict) and isinstance(value.get(key), int):
        return value[key]
    return None


def count_checks(corpus: Corpus) -> list[Violation]:
    """``manifest``: split, record and AVT counts the manifest states agree with the records.

    Understands ``splits: {name: n}``, ``splits: {name: {"records": n, "avts": k}}`` and
    ``counts: {"records": n, "avts": k}``; counts the manifest does not state are not checked.

    Returns:
        Corpus-level violations.
    """
    out: list[Violation] = []
    extra = corpus.manifest.model_extra or {}
    actual: dict[str, list[TaskRecord]] = {}
    for record in corpus.records:
        actual.setdefault(record.split, []).append(record)
    actual_all = {"records": len(corpus.records), "avts": len(corpus.avts)}
    splits = extra.get("splits")
    if isinstance(splits, dict):
        for split, value in splits.items():
            records = actual.get(split, [])
            counted = {"records": len(records), "avts": len({r.avt_id for r in records})}
            for key, real in counted.items():
                declared = _declared(value, key)
                if declared is not None and declared != real:
                    out.append(
                        Violation(
                            None,
                            "manifest",
                            f"the manifest gives split {split!r} {declared} {key}, "
                            f"records.jsonl has {real}",
                        )
                    )
        missing = sorted(set(actual) - set(splits))
        if missing:
            out.append(Violation(None, "manifest", f"splits {missing} are not in the manifest"))
    counts = extra.get("counts")
    if isinstance(counts, dict):
        for key, real in actual_all.items():
            declared = counts.get(key)
            if isinstance(declared, int) and declared != real:
                out.append(
                    Violation(
                        None,
                        "manifest",
                        f"the manifest counts {declared} {key}, records.jsonl has {real}",
                    )
                )
    return out


def record_manifest_checks(record: TaskRecord, manifest: Manifest) -> list[Violation]:
    """``manifest``: the record's databases are in the manifest and its corpus is the manifest's.

    Returns:
        The record's violations.
    """
    out = []
    if record.corpus != manifest.name:
        out.append(
            Violation(
                record.id,
                "manifest",
                f"corpus is {record.corpus!r} but the manifest names {manifest.name!r}",
            )
        )
    for field, database in (
        ("spec.database", record.spec.database),
        ("verification.database", record.verification.database),
    ):
        if database not in manifest.databases:
            out.append(
                Violation(
                    record.id,
                    "manifest",
                    f"{field} {database!r} is not among the manifest's databases "
                    f"{sorted(manifest.databases)}",
                )
            )
    return out


def _shape(record: TaskRecord) -> tuple:
    return tuple((a.id, a.term, a.aliases, a.kind) for a in record.ambiguities)


def avt_checks(corpus: Corpus) -> list[Violation]:
    """``avt``: siblings share spec, split and ambiguity ids/terms/aliases/kinds with the first
    record of their AVT; a zero-ambiguity record forms an AVT of its own.

    Returns:
        Violations, each on the record that differs.
    """
    out = []
    for avt_id, records in corpus.avts.items():
        first = records[0]
        if len(records) > 1 and any(not r.ambiguities for r in records):
            for record in records:
                if not record.ambiguities:
                    out.append(
                        Violation(
                            record.id,
                            "avt",
                            f"a zero-ambiguity record must form an AVT of its own, but AVT "
                            f"{avt_id!r} has {len(records)} records",
                        )
                    )
        for record in records[1:]:
            differs = [
                what
                for what, same in (
                    ("spec", record.spec == first.spec),
                    ("split", record.split == first.split),
                    ("ambiguity ids/terms/aliases/kinds", _shape(record) == _shape(first)),
                )
                if not same
            ]
            if differs:
                out.append(
                    Violation(
                        record.id,
                        "avt",
                        f"differs from {first.id!r}, the first record of AVT {avt_id!r}, "
                        f"in: {', '.join(differs)}",
                    )
                )
    return out


def frozen_response_checks(record: TaskRecord, oracle_kind: str) -> list[Violation]:
    """``frozen_response``: under the intent oracle every ambiguity needs a ``response``.

    Args:
        record: the record.
        oracle_kind: the manifest's ``oracle`` (``intent`` or ``knowledge``).

    Returns:
        The record's violations.
    """
    if oracle_kind != "intent":
        return []
    return [
        Violation(
            record.id,
            "frozen_response",
            f"ambiguity {a.id!r} has no frozen response, which the intent oracle returns",
        )
        for a in record.ambiguities
        if not (a.response and a.response.strip())
    ]


def canonical_checks(record: TaskRecord, oracle_kind: str) -> list[Violation]:
    """``canonical_question``: the full asker's questions, one per distinct term in annotation
    order within one dialogue, each credit exactly their ambiguity under the deterministic oracle.

    Args:
        record: the record.
        oracle_kind: the manifest's ``oracle`` (``intent`` or ``knowledge``).

    Returns:
        The record's violations.
    """
    oracle = deterministic_oracle(oracle_kind)
    context = OracleContext(record)
    asked: dict[str, str] = {}
    out = []
    for ambiguity in record.ambiguities:
        key = normalize_text(ambiguity.term)
        if key in asked:
            out.append(
                Violation(
                    record.id,
                    "canonical_question",
                    f"ambiguity {ambiguity.id!r} has the same term {ambiguity.term!r} as "
                    f"{asked[key]!r}: one canonical question cannot reach both",
                )
            )
            continue
        asked[key] = ambiguity.id
        question = canonical_question(ambiguity.term)
        credits, answer = oracle.answer(question, context)
        context.turns.append(OracleTurn(question, answer, credits))
        if credits != frozenset({ambiguity.id}):
            got = sorted(credits) if credits else "nothing (a refusal or a tie)"
            out.append(
                Violation(
                    record.id,
                    "canonical_question",
                    f"{question!r} credits {got} under the {oracle_kind} oracle, not "
                    f"[{ambiguity.id!r}]",
                )
            )
    return out


def term_checks(record: TaskRecord) -> list[Violation]:
    """``term_in_request``/``term_words``/``alias_words``: every counted ambiguity is named by
    the request's own words (:func:`~ambitab_gym.terms.find_term`), neither its term nor an
    alias is only function words, only SQL keywords, an SQL fragment or an instruction
    (:func:`~ambitab_gym.terms.term_problem`), and no alias is a generic schema word or names
    another ambiguity of the record (:func:`~ambitab_gym.aliases.alias_problem`).

    Example:
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "Which gyms are popular?", "database": "d"},
        ...     "ambiguities": [{"id": "v", "term": "Which", "resolution": "x"},
        ...                     {"id": "w", "term": "busy", "resolution": "y"}],
        ...     "verification": {"database": "d", "reference_sql": "SELECT 1"}})
        >>> for v in term_checks(record):
        ...     print(v.check, v.message[:48])
        term_words ambiguity 'v': the term 'Which' is only function
        term_in_request ambiguity 'w': the term 'busy' does not occur in

    Args:
        record: the record.

    Returns:
        The record's violations.
    """
    out = []
    why = {
        "stop_word": "is only function words",
        "sql_keyword": "is only SQL keywords",
        "sql_fragment": "is an SQL fragment",
        "instruction": "is an instruction",
        "empty": "has no words",
    }
    request = record.spec.request
    for ambiguity in record.ambiguities:
        if not ambiguity.counted:
            continue
        for what, name in (("term", ambiguity.term), *(("alias", a) for a in ambiguity.aliases)):
            problem = term_problem(name)
            if problem is not None:
                out.append(
                    Violation(
                        record.id,
                        "term_words",
                        f"ambiguity {ambiguity.id!r}: the {what} {name!r} {why[problem]}",
                    )
                )
        others = [n for a in record.ambiguities if a.id != ambiguity.id for n in a.names]
        for alias in ambiguity.aliases:
            problem = alias_problem(alias, others=others)
            if problem in ("generic", "other_ambiguity"):
                out.append(
                    Violation(
                        record.id,
                        "alias_words",
                        f"ambiguity {ambiguity.id!r}: the alias {alias!r} "
                        + (
                            "names another ambiguity of the record"
                            if problem == "other_ambiguity"
                            else "is a generic schema word that many questions contain"
                        ),
                    )
                )
        if find_term(request, ambiguity.term) is None:
            out.append(
                Violation(
                    record.id,
                    "term_in_request",
                    f"ambiguity {ambiguity.id!r}: the term {ambiguity.term!r} does not occur in "
                    "the request (terms are the request's own words; a source name the request "
                    "does not use belongs in aliases)",
                )
            )
    return out


def duplicate_request_checks(corpus: Corpus) -> list[Violation]:
    """``duplicate_request``: no two AVTs share the public request and the database.

    Args:
        corpus: the corpus (its AVTs).

    Returns:
        Violations, each on the first record of a later AVT that repeats an earlier one.
    """
    out = []
    first: dict[tuple[str, str], str] = {}
    for avt_id, records in corpus.avts.items():
        spec = records[0].spec
        key = (" ".join(spec.request.split()), spec.database)
        if key in first:
            out.append(
                Violation(
                    records[0].id,
                    "duplicate_request",
                    f"AVT {avt_id!r} has the same request and database as AVT {first[key]!r}",
                )
            )
        else:
            first[key] = avt_id
    return out


def leak_checks(record: TaskRecord, spec: PublicSpec) -> list[Violation]:
    """``leak``: no secret of the record appears in its public spec (rule: :mod:`.leaks`).

    Args:
        record: the record (its secrets).
        spec: the public spec the agent sees (with the schema filled in).

    Returns:
        At most one violation per secret.
    """
    out = []
    fields = public_fields(spec)
    for what, secret in secrets_of(record):
        single_token = " " not in normalize_text(secret)
        for where, text, holds_identifiers in fields:
            if single_token and holds_identifiers:
                continue  # column and table names belong in the schema
            if leaks_into(secret, text):
                out.append(Violation(record.id, "leak", f"the {what} appears in {where}"))
                break
    return out


def _reference_error(verifier: Verifier, record: TaskRecord) -> str:
    spec = record.verification
    try:
        engine = verifier.engine(spec.engine, spec.database)
        engine.execute(spec.reference_sql, limits=_REFERENCE_LIMITS)
    except QueryError as error:
        return f"{error.category}: {error.message}"
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "it failed once and succeeded when run again"


def execution_checks(
    corpus: Corpus, verifier: Verifier, skip: set[str]
) -> tuple[list[Violation], dict[str, list[tuple]]]:
    """``reference_sql``/``empty_result``: every reference SQL executes and returns rows.

    A write task (:func:`~ambitab_gym.verify.verifier.is_write_task`: BIRD-Interact's
    Management tasks, preprocess/clean-up SQL, test cases) is verified instead: its own solution
    must pass its task on a scratch copy. A solution the engine cannot run because it needs
    PostgreSQL (verdict ``unsupported`` on DuckDB) is not a broken corpus: it is skipped (the
    built corpus's manifest counts such records, ``provenance.requires_postgres``).

    Args:
        corpus: the corpus.
        verifier: whose cached, normalized reference rows are used.
        skip: record ids not to execute (their database is not in the manifest).

    Returns:
        The violations and the normalized reference rows of the records that executed.
    """
    out = []
    rows_by_id: dict[str, list[tuple]] = {}
    broken: set[tuple[str, str]] = set()
    for record in corpus.records:
        if record.id in skip:
            continue
        key = (record.verification.engine, record.verification.database)
        if key in broken:
            continue
        try:
            verifier.engine(*key)
        except Exception as error:  # one report per database, not one per record
            broken.add(key)
            out.append(
                Violation(
                    None,
                    "reference_sql",
                    f"the {corpus.engine_kind(key[0])} engine cannot open database {key[1]!r}, "
                    f"so no reference SQL on it executes: {type(error).__name__}: {error}",
                )
            )
            continue
        if is_write_task(record):
            verdict = verifier.verify(record, record.verification.reference_sql)
            if not verdict.success and verdict.reason != "unsupported":
                out.append(
                    Violation(
                        record.id,
                        "reference_sql",
                        f"its own solution does not pass its task ({verdict.reason})",
                    )
                )
            continue
        rows = verifier.reference_rows(record)
        if rows is None:
            verdict = verifier.verify(record, record.verification.reference_sql)
            if verdict.reason == "unsupported":
                continue  # needs PostgreSQL; counted in the manifest, not a broken corpus
            reason = _reference_error(verifier, record)
            out.append(Violation(record.id, "reference_sql", f"does not execute: {reason}"))
            continue
        rows_by_id[record.id] = rows
        if not rows and not record.verification.compare.allow_empty:
            out.append(
                Violation(
                    record.id,
                    "empty_result",
                    "the reference result is empty (set compare.allow_empty if that is meant)",
                )
            )
    return out, rows_by_id


def distinct_checks(corpus: Corpus, rows_by_id: dict[str, list[tuple]]) -> list[Violation]:
    """``distinct_results``: no two records of an AVT have matching reference results.

    Two results match when either record's comparison rules accept the other's rows.

    Args:
        corpus: the corpus (its AVTs).
        rows_by_id: normalized reference rows of the records that executed.

    Returns:
        Violations, each on the later record of a matching pair.
    """
    out = []
    for records in corpus.avts.values():
        done = [r for r in records if r.id in rows_by_id]
        for j, later in enumerate(done):
            for earlier in done[:j]:
                a, b = rows_by_id[earlier.id], rows_by_id[later.id]
                ca, cb = earlier.verification.compare, later.verification.compare
                if results_match(b, a, ca, reference_normalized=True) or results_match(
                    a, b, cb, reference_normalized=True
                ):
                    out.append(
                        Violation(
                            later.id,
                            "distinct_results",
                            f"its reference result equals that of {earlier.id!r} (same AVT), "
                            "so the verifier cannot tell the interpretations apart",
                        )
                    )
                    break
    return out
