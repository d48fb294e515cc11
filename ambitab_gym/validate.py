"""The corpus validator: checks every invariant of ``docs/format.md`` and reports violations.

* :class:`Violation` - one broken invariant: the record id (None for the corpus), a check code
  and a message.
* :data:`CHECKS` - the check codes and what each one guards.
* :func:`validate_corpus` - run every check on a corpus (or a corpus folder, env id or name).
* :func:`resolve_corpus_folder` - find a corpus folder the way :func:`load_corpus` does, without
  loading its records.
* :func:`normalize_text`, :func:`is_trivial_secret`, :func:`leaks_into` - the leak rule.

The validator is a maintainer's tool: its messages quote resolutions and reference SQL and
must never be shown to an agent.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from ambitab_gym.corpora.corpus import (
    BUNDLED_DIR,
    ENV_IDS,
    Corpus,
    CorpusNotFound,
    Manifest,
    available_corpora,
    corpus_name,
)
from ambitab_gym.corpora.home import built_corpora_dir
from ambitab_gym.oracles import OracleContext, OracleTurn, canonical_question, deterministic_oracle
from ambitab_gym.records import PublicSpec, RecordError, TaskRecord, parse_record
from ambitab_gym.verify import Limits, QueryError, Verifier, results_match

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
    "leak": "no resolution, frozen response, sql snippet or reference SQL appears in the public "
    "spec",
    "reference_sql": "every reference SQL executes",
    "empty_result": "every reference result is non-empty (unless compare.allow_empty)",
    "distinct_results": "the interpretations of one AVT give pairwise different results",
}

#: Single words too common to count as a leak when a resolution consists of nothing else.
_COMMON_WORDS_TEXT = """a an the all any both each every either neither none no yes not and or of in on at to
    by for with from first last latest earliest total sum count average mean median max maximum
    min minimum most least more less top bottom best worst high low higher lower highest lowest
    new old recent current active inactive open closed one two three four five six seven eight
    nine ten year years month months day days week weeks date time name names number amount
    value values price cost rate score id ids distinct unique only also including excluded
    included inclusive exclusive ascending descending asc desc true false null"""
COMMON_WORDS: frozenset[str] = frozenset(_COMMON_WORDS_TEXT.split())

_WS = re.compile(r"\s+")
_NUMBER = re.compile(r"[-+]?(\d+([.,]\d+)*|\.\d+)%?")
_EDGE_PUNCT = " .,;:!?\"'`"
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


# -- the leak rule ---------------------------------------------------------------------------------


def normalize_text(text: str) -> str:
    """Lower-case, fold runs of whitespace into one space, strip edge punctuation and quotes.

    >>> normalize_text('  The  five\\nCustomers. ')
    'the five customers'
    """
    return _WS.sub(" ", text).strip().lower().strip(_EDGE_PUNCT)


def is_trivial_secret(text: str) -> bool:
    """Whether a secret is too short to count as leaked when it appears in the public spec.

    Trivial: shorter than three characters after :func:`normalize_text`, a single number
    (``5``, ``2019``, ``0.5``, ``15%``), or a single word of :data:`COMMON_WORDS`.

    >>> is_trivial_secret("5"), is_trivial_secret("Latest."), is_trivial_secret("years_old")
    (True, True, False)
    """
    norm = normalize_text(text)
    if len(norm) < 3:
        return True
    if " " in norm:
        return False
    return bool(_NUMBER.fullmatch(norm)) or norm in COMMON_WORDS


def leaks_into(secret: str, public: str) -> bool:
    """Whether a (non-trivial) secret appears in a public text.

    Both texts go through :func:`normalize_text`; the secret must then occur as a substring that
    does not start or end inside a word (so ``age`` is not found in ``average``).

    >>> leaks_into("the five customers who spent the most", "List THE five  customers who spent the most!")
    True
    >>> leaks_into("age", "the average price"), leaks_into("5", "top 5")
    (False, False)
    """
    if is_trivial_secret(secret):
        return False
    norm = normalize_text(secret)
    left = r"(?<!\w)" if norm[0].isalnum() or norm[0] == "_" else ""
    right = r"(?!\w)" if norm[-1].isalnum() or norm[-1] == "_" else ""
    return re.search(left + re.escape(norm) + right, normalize_text(public)) is not None


def _public_fields(spec: PublicSpec) -> list[tuple[str, str, bool]]:
    """(where, text, holds identifiers) for every agent-visible text of a spec."""
    fields = [("the request", spec.request, False)]
    if spec.schema_text:
        fields.append(("the schema", spec.schema_text, True))
    for column, meaning in spec.column_meanings.items():
        fields.append((f"the column meaning of {column!r}", meaning, False))
    for number, entry in enumerate(spec.external_knowledge, start=1):
        fields.append((f"external knowledge entry {number}", entry, False))
    return fields


def _secrets(record: TaskRecord) -> list[tuple[str, str]]:
    out = []
    for a in record.ambiguities:
        out.append((f"resolution of ambiguity {a.id!r}", a.resolution))
        if a.response:
            out.append((f"frozen response of ambiguity {a.id!r}", a.response))
        if a.sql_snippet:
            out.append((f"sql snippet of ambiguity {a.id!r}", a.sql_snippet))
    out.append(("reference SQL", record.verification.reference_sql))
    return out


# -- finding a corpus ------------------------------------------------------------------------------


def resolve_corpus_folder(reference: str | Path) -> tuple[Path, str]:
    """The folder and origin (``path``, ``built`` or ``bundled``) a reference names.

    Args:
        reference: a corpus folder, an env id (``AmbiTab-Bird-v0``) or a corpus name.

    Returns:
        ``(folder, origin)``; a built corpus in the data home wins over the bundled sample.

    Raises:
        CorpusNotFound: nothing answers to the reference.
    """
    path = Path(reference)
    if path.is_dir():
        if not (path / "manifest.json").is_file():
            raise CorpusNotFound(f"{path} is not a corpus folder: manifest.json is missing")
        return path.resolve(), "path"
    name = corpus_name(str(reference))
    for folder, origin in ((built_corpora_dir() / name, "built"), (BUNDLED_DIR / name, "bundled")):
        if (folder / "manifest.json").is_file():
            return folder, origin
    known = ", ".join(sorted(set(available_corpora()) | set(ENV_IDS)))
    raise CorpusNotFound(
        f"no corpus {str(reference)!r}: give an env id, a corpus name or a corpus folder "
        f"(available: {known}; `ambitab-gym list` shows them with their sizes)"
    )


# -- checks ----------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _file_checks(folder: Path, manifest: Manifest) -> list[Violation]:
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


def _count_checks(corpus: Corpus) -> list[Violation]:
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


def _record_manifest_checks(record: TaskRecord, manifest: Manifest) -> list[Violation]:
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


def _avt_checks(corpus: Corpus) -> list[Violation]:
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


def _frozen_response_checks(record: TaskRecord, oracle_kind: str) -> list[Violation]:
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


def _canonical_checks(record: TaskRecord, oracle_kind: str) -> list[Violation]:
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


def _leak_checks(record: TaskRecord, spec: PublicSpec) -> list[Violation]:
    out = []
    fields = _public_fields(spec)
    for what, secret in _secrets(record):
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


def _execution_checks(
    corpus: Corpus, verifier: Verifier, skip: set[str]
) -> tuple[list[Violation], dict[str, list[tuple]]]:
    out = []
    rows_by_id: dict[str, list[tuple]] = {}
    broken: set[tuple[str, str]] = set()
    for record in corpus.records:
        if record.id in skip or record.verification.preprocess_sql:
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
        rows = verifier.reference_rows(record)
        if rows is None:
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


def _distinct_checks(corpus: Corpus, rows_by_id: dict[str, list[tuple]]) -> list[Violation]:
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


def _check_loaded(corpus: Corpus, verifier: Verifier) -> list[Violation]:
    manifest = corpus.manifest
    corpus_level = _file_checks(corpus.path, manifest) + _count_checks(corpus)
    per_record: list[Violation] = []
    seen: set[str] = set()
    unrunnable: set[str] = set()
    for record in corpus.records:
        if record.id in seen:
            per_record.append(Violation(record.id, "unique_id", "the record id is repeated"))
        seen.add(record.id)
        per_record += _record_manifest_checks(record, manifest)
        if record.verification.database not in manifest.databases:
            unrunnable.add(record.id)
    per_record += _avt_checks(corpus)
    for record in corpus.records:
        per_record += _frozen_response_checks(record, manifest.oracle)
        per_record += _canonical_checks(record, manifest.oracle)
        try:
            spec = corpus.public_spec(record)
        except Exception:  # the database is missing or broken; reported by other checks
            spec = record.spec
        per_record += _leak_checks(record, spec)
    executed, rows_by_id = _execution_checks(corpus, verifier, unrunnable)
    per_record += executed
    per_record += _distinct_checks(corpus, rows_by_id)
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
                message = f"{path.name}:{number}: invalid JSON ({error.msg})"
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
    return _file_checks(folder, manifest) + found


def validate_corpus(
    corpus: Corpus | str | Path, *, verifier: Verifier | None = None
) -> list[Violation]:
    """Check every invariant of a corpus and return what breaks them (empty when it is sound).

    Checks (codes in :data:`CHECKS`): record schema and unique ids; the manifest (databases the
    records name, database files, checksums, split and record counts); AVT consistency; frozen
    responses where the intent oracle needs them; that the canonical question about each
    ambiguity, asked in annotation order in one dialogue as the full asker does, credits exactly
    that ambiguity under the corpus's deterministic oracle; leaks; that every reference SQL
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
