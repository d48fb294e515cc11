"""The leak rule of the corpus validator: no secret of a record appears in its public spec.

* :data:`COMMON_WORDS` - single words too common to count as a leak on their own.
* :func:`normalize_text`, :func:`is_trivial_secret`, :func:`leaks_into` - the rule.
* :func:`public_fields`, :func:`secrets_of` - what is compared with what.

Secrets: every resolution, frozen response and sql snippet of the record, and its reference
SQL. Public texts: the request, the schema, the column meanings and the external knowledge.
"""

from __future__ import annotations

import re

from ambitab_gym.records import PublicSpec, TaskRecord

__all__ = [
    "COMMON_WORDS",
    "is_trivial_secret",
    "leaks_into",
    "normalize_text",
    "public_fields",
    "secrets_of",
]

#: Single words too common to count as a leak when a resolution consists of nothing else.
_COMMON_WORDS_TEXT = """
    a an the all any both each every either neither none no yes not and or of in on at to by
    for with from first last latest earliest total sum count average mean median max maximum
    min minimum most least more less top bottom best worst high low higher lower highest
    lowest new old recent current active inactive open closed one two three four five six
    seven eight nine ten year years month months day days week weeks date time name names
    number amount value values price cost rate score id ids distinct unique only also
    including excluded included inclusive exclusive ascending descending asc desc true false
    null
"""
COMMON_WORDS: frozenset[str] = frozenset(_COMMON_WORDS_TEXT.split())

_WS = re.compile(r"\s+")
_NUMBER = re.compile(r"[-+]?(\d+([.,]\d+)*|\.\d+)%?")
_EDGE_PUNCT = " .,;:!?\"'`"


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


def public_fields(spec: PublicSpec) -> list[tuple[str, str, bool]]:
    """``(where, text, holds_identifiers)`` for every agent-visible text of a spec."""
    fields = [("the request", spec.request, False)]
    if spec.schema_text:
        fields.append(("the schema", spec.schema_text, True))
    for column, meaning in spec.column_meanings.items():
        fields.append((f"the column meaning of {column!r}", meaning, False))
    for number, entry in enumerate(spec.external_knowledge, start=1):
        fields.append((f"external knowledge entry {number}", entry, False))
    return fields


def secrets_of(record: TaskRecord) -> list[tuple[str, str]]:
    """``(what, text)`` for every secret of a record."""
    out = []
    for a in record.ambiguities:
        out.append((f"resolution of ambiguity {a.id!r}", a.resolution))
        if a.response:
            out.append((f"frozen response of ambiguity {a.id!r}", a.response))
        if a.sql_snippet:
            out.append((f"sql snippet of ambiguity {a.id!r}", a.sql_snippet))
    out.append(("reference SQL", record.verification.reference_sql))
    return out
