"""Task records: the on-disk format of AmbiTab corpora and its three views.

A :class:`TaskRecord` fixes one hidden interpretation (theta) of an ambiguous verifiable task.
It carries three kinds of fields, for the three audiences of the trust boundary:

* :class:`PublicSpec` - what the agent (asker and solver) may see;
* :class:`Ambiguity` - what the oracle knows (terms, resolutions, frozen responses);
* :class:`VerificationSpec` - what only the verifier reads (reference SQL, comparison rules).

Records are JSON Lines (UTF-8, one record per line, every line a record; the file may end with
a newline and may start with a UTF-8 byte-order mark). :func:`load_records` reads them and names
the file, line, record id and field of anything malformed - invalid UTF-8, a blank line, invalid
JSON, a bad field, a repeated id - and says what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ambitab_gym.errors import CorpusError

__all__ = [
    "FORMAT_VERSION",
    "Ambiguity",
    "CompareRules",
    "PublicSpec",
    "RecordError",
    "TaskRecord",
    "VerificationSpec",
    "COUNTED_KINDS",
    "dump_records",
    "iter_records",
    "json_error_text",
    "load_records",
    "parse_record",
]

FORMAT_VERSION = 1

AmbiguityKind = Literal["critical", "knowledge", "non_critical"]
#: Kinds that count for credits, precision, recall and rewards (paper C.3).
COUNTED_KINDS: frozenset[str] = frozenset({"critical", "knowledge"})


class RecordError(CorpusError, ValueError):
    """A record (or a corpus file) is malformed; the message names where and what (a
    :class:`~ambitab_gym.errors.CorpusError` and a ``ValueError``, category ``record``).

    >>> try:
    ...     parse_record({"id": "r9"}, where="records.jsonl:3")
    ... except RecordError as error:
    ...     print(str(error)[:40])
    records.jsonl:3 (record 'r9'): avt_id: F
    """

    category = "record"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PublicSpec(_Frozen):
    """The public task specification x: everything the agent may read.

    Example:
        >>> spec = PublicSpec(request="List the top earners.", database="company")
        >>> spec.request
        'List the top earners.'
    """

    request: str = Field(min_length=1)
    database: str = Field(min_length=1)
    schema_text: str | None = Field(default=None, alias="schema")
    column_meanings: dict[str, str] = Field(default_factory=dict)
    external_knowledge: tuple[str, ...] = ()

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Ambiguity(_Frozen):
    """A registered ambiguity alpha and what the record's interpretation decides for it.

    Example:
        >>> a = Ambiguity(id="top", term="top earners", resolution="the three highest paid")
        >>> a.counted, a.names
        (True, ('top earners',))
    """

    id: str = Field(min_length=1)
    term: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()
    kind: AmbiguityKind = "critical"
    resolution: str = Field(min_length=1)
    response: str | None = None
    sql_snippet: str | None = None
    evidence: str | None = None

    @property
    def counted(self) -> bool:
        """Whether the ambiguity counts for credits, p, r and rewards."""
        return self.kind in COUNTED_KINDS

    @property
    def names(self) -> tuple[str, ...]:
        """The term followed by its aliases."""
        return (self.term, *self.aliases)


class CompareRules(_Frozen):
    """How a submitted result is compared with the reference result.

    >>> CompareRules().order, CompareRules(order="ordered", float_decimals=2).float_decimals
    ('set', 2)
    """

    order: Literal["set", "multiset", "ordered"] = "set"
    float_decimals: int | None = Field(default=4, ge=0, le=12)
    column_order: bool = True
    allow_empty: bool = False


class VerificationSpec(_Frozen):
    """What the trusted verifier needs: engine, database, reference SQL and comparison rules.

    >>> VerificationSpec(database="hr", reference_sql="SELECT 1").engine
    'sqlite'
    """

    engine: Literal["sqlite", "duckdb", "postgres"] = "sqlite"
    database: str = Field(min_length=1)
    reference_sql: str = Field(min_length=1)
    compare: CompareRules = CompareRules()
    test_cases: tuple[str, ...] = ()
    preprocess_sql: tuple[str, ...] = ()
    cleanup_sql: tuple[str, ...] = ()


class TaskRecord(_Frozen):
    """One interpretation of an ambiguous verifiable task (one line of ``records.jsonl``).

    Example:
        >>> record = parse_record({
        ...     "id": "demo-1", "avt_id": "demo-avt-1", "corpus": "demo", "split": "train",
        ...     "spec": {"request": "List the top earners.", "database": "company"},
        ...     "ambiguities": [{"id": "top", "term": "top earners",
        ...                      "resolution": "the three highest paid employees"}],
        ...     "verification": {"database": "company",
        ...                      "reference_sql": "SELECT name FROM staff LIMIT 3"}})
        >>> record.m, record.counted_ambiguities[0].term
        (1, 'top earners')
    """

    format_version: int = FORMAT_VERSION
    id: str = Field(min_length=1)
    avt_id: str = Field(min_length=1)
    corpus: str = Field(min_length=1)
    split: str = "all"
    spec: PublicSpec
    ambiguities: tuple[Ambiguity, ...] = ()
    verification: VerificationSpec
    source: dict = Field(default_factory=dict)

    @field_validator("format_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != FORMAT_VERSION:
            raise ValueError(
                f"format version {value} is not supported (this ambitab-gym reads {FORMAT_VERSION})"
            )
        return value

    @field_validator("ambiguities")
    @classmethod
    def _unique_ambiguity_ids(cls, value: tuple[Ambiguity, ...]) -> tuple[Ambiguity, ...]:
        ids = [a.id for a in value]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"ambiguity ids must be unique, repeated: {duplicates}")
        return value

    @cached_property
    def name_entries(self) -> tuple[tuple[str, tuple[str, ...], str | None], ...]:
        """``(ambiguity id, term and aliases, evidence)`` per ambiguity in annotation order:
        what the deterministic matchers search, gathered once per record."""
        return tuple((a.id, a.names, a.evidence) for a in self.ambiguities)

    @property
    def counted_ambiguities(self) -> tuple[Ambiguity, ...]:
        """The ambiguities in Amb (critical and knowledge), in annotation order."""
        return tuple(a for a in self.ambiguities if a.counted)

    @property
    def m(self) -> int:
        """|Amb|: the number of counted ambiguities."""
        return sum(1 for a in self.ambiguities if a.counted)

    def ambiguity(self, ambiguity_id: str) -> Ambiguity:
        """The ambiguity with this id."""
        for a in self.ambiguities:
            if a.id == ambiguity_id:
                return a
        raise KeyError(ambiguity_id)


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "record"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def parse_record(data: dict, *, where: str = "record") -> TaskRecord:
    """Validate one record given as a dict.

    Args:
        data: the decoded JSON object.
        where: a prefix for error messages (file and line).

    Returns:
        The validated, immutable record.

    Raises:
        RecordError: naming ``where``, the record id and the offending field.
    """
    if not isinstance(data, dict):
        raise RecordError(f"{where}: a record must be a JSON object, got {type(data).__name__}")
    try:
        return TaskRecord.model_validate(data)
    except ValidationError as error:
        record_id = data.get("id", "?")
        raise RecordError(f"{where} (record {record_id!r}): {_describe(error)}") from None


def json_error_text(error: json.JSONDecodeError) -> str:
    """A JSON error of one line as "what at column N" (some of json's messages end in "at").

    >>> try:
    ...     json.loads('{"id": "r1')
    ... except json.JSONDecodeError as error:
    ...     json_error_text(error)
    'Unterminated string starting at column 8'
    """
    return f"{error.msg.removesuffix(' at')} at column {error.colno}"


def iter_records(path: str | Path) -> Iterator[TaskRecord]:
    """Yield the records of a JSON Lines file, failing loudly on the first bad line.

    Record ``i`` (from 0) is on line ``i + 1``: every line must hold a record. A blank line is
    an error (JSON Lines has no empty values; a blank line in the middle usually means a record
    was lost when the file was edited); only the newline that ends the last line is allowed.

    Raises:
        RecordError: naming the file and line (and the record id and field where there is one).
    """
    path = Path(path)
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte-order mark (Windows editors write one)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise RecordError(
                    f"{where}: not valid UTF-8 (byte 0x{raw[error.start]:02x} at byte "
                    f"{error.start + 1} of the line); save the file as UTF-8"
                ) from None
            if not line.strip():
                raise RecordError(
                    f"{where}: blank line; every line of a records file must hold one record "
                    "(remove the line)"
                )
            try:
                data = json.loads(line)
            except json.JSONDecodeError as error:
                message = f"{where}: invalid JSON ({json_error_text(error)})"
                raise RecordError(message) from None
            except RecursionError:
                raise RecordError(f"{where}: invalid JSON (nested too deeply)") from None
            except ValueError as error:  # e.g. an integer literal of more than 4,300 digits
                raise RecordError(f"{where}: invalid JSON ({error})") from None
            yield parse_record(data, where=where)


def load_records(path: str | Path) -> list[TaskRecord]:
    """Read every record of a JSON Lines file; ids must be unique.

    Raises:
        RecordError: on malformed JSON, invalid fields or a repeated id.
    """
    records: list[TaskRecord] = []
    seen: dict[str, int] = {}
    for index, record in enumerate(iter_records(path)):
        if record.id in seen:
            raise RecordError(
                f"{path}: record id {record.id!r} is repeated "
                f"(records {seen[record.id] + 1} and {index + 1})"
            )
        seen[record.id] = index
        records.append(record)
    return records


def dump_records(records: Iterable[TaskRecord], path: str | Path) -> None:
    """Write records as JSON Lines (stable key order, UTF-8)."""
    with Path(path).open("w", encoding="utf-8") as handle:
        for record in records:
            data = record.model_dump(mode="json", by_alias=True)
            handle.write(json.dumps(data, ensure_ascii=False))
            handle.write("\n")
