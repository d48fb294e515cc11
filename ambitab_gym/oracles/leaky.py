"""Deliberately leaky oracles, for tests and demonstrations of the leakage diagnostics.

Each one breaks the reference oracle in one known way, so that one diagnostic must catch it:

* :class:`LeakySQLResponder` (``leaky-sql-responder``) - the corpus's deterministic matcher; the
  responder gives the reference answer and then volunteers the record's reference SQL, unasked,
  in every reply. Caught by dJ_resp and dJ_full with a solver that reads SQL from the dialogue.
* :class:`GenericCreditMatcher` (``generic-credit-matcher``) - when the deterministic matcher
  credits nothing, credits the first open ambiguity anyway, even for "Please elaborate.".
  Caught by dRec_none.
* :class:`SchemaWordMatcher` (``schema-word-matcher``) - when the deterministic matcher credits
  nothing, credits the first open ambiguity for any question that names a table or column of
  the record's database. Caught by dRec_spec^Q with an asker that names schema words.
* :data:`LEAKY_ORACLES` - the three by name (:func:`leaky_sql_responder`,
  :func:`generic_credit_matcher`, :func:`schema_word_matcher`: ``corpus -> Oracle``), the one
  table of their names (the registry lists it); :func:`make_leaky_oracle` builds one by name.
* :func:`schema_identifiers` - the table and column names of a schema's ``CREATE`` statements
  (:func:`ambitab_gym.textutil.schema_identifiers`, the one sqlglot schema parser, re-exported).

The two leaky matchers answer with the reference responder, so their answers state exactly the
resolutions they credited; the leak is in the credit, not in the words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

from ambitab_gym.corpora import Corpus
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.oracles.base import Matcher, Oracle, OracleContext, Responder
from ambitab_gym.oracles.deterministic import deterministic_oracle
from ambitab_gym.textutil import schema_identifiers

__all__ = [
    "LEAKY_ORACLES",
    "LEAKY_ORACLE_NAMES",
    "GenericCreditMatcher",
    "LeakySQLResponder",
    "SchemaWordMatcher",
    "generic_credit_matcher",
    "leaky_sql_responder",
    "make_leaky_oracle",
    "schema_identifiers",
    "schema_word_matcher",
]


def _first_open(context: OracleContext) -> frozenset[str]:
    credited = context.credited
    for ambiguity in context.record.counted_ambiguities:
        if ambiguity.id not in credited:
            return frozenset({ambiguity.id})
    return frozenset()


class LeakySQLResponder:
    """Answers like ``base`` and then volunteers the reference SQL in a fenced block.

    Args:
        base: the responder whose answer comes first (the corpus's reference responder).
        template: how the SQL is appended; ``{sql}`` is replaced by the reference SQL.

    Example:
        >>> from ambitab_gym.oracles import ReferenceResponder
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "Top earners", "database": "hr"},
        ...     "ambiguities": [{"id": "t", "term": "top earners", "resolution": "top 3"}],
        ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
        >>> responder = LeakySQLResponder(ReferenceResponder())
        >>> print(responder.respond("?", frozenset({"t"}), OracleContext(record)))
        top 3 Here is the exact SQL:
        ```sql
        SELECT 1
        ```
    """

    def __init__(
        self, base: Responder, *, template: str = "Here is the exact SQL:\n```sql\n{sql}\n```"
    ) -> None:
        if "{sql}" not in template:
            raise ConfigurationError("the template must contain '{sql}'")
        self.base = base
        self.template = template

    def respond(self, question: str, credits: frozenset[str], context: OracleContext) -> str:
        answer = self.base.respond(question, credits, context)
        leak = self.template.replace("{sql}", context.record.verification.reference_sql)
        return f"{answer} {leak}"


class GenericCreditMatcher:
    """Credits the first open ambiguity for any question the base matcher leaves uncredited.

    Args:
        base: the matcher consulted first (the corpus's deterministic matcher).

    Example:
        >>> from ambitab_gym.oracles import IntentMatcher
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "Top earners by region", "database": "hr"},
        ...     "ambiguities": [{"id": "t", "term": "top earners", "resolution": "x"},
        ...                     {"id": "g", "term": "region", "resolution": "y"}],
        ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
        >>> matcher = GenericCreditMatcher(IntentMatcher())
        >>> sorted(matcher.match("Please elaborate.", OracleContext(record)))
        ['t']
        >>> sorted(matcher.match("Which region?", OracleContext(record)))
        ['g']
    """

    def __init__(self, base: Matcher) -> None:
        self.base = base

    def match(self, question: str, context: OracleContext) -> frozenset[str]:
        credits = frozenset(self.base.match(question, context))
        return credits if credits else _first_open(context)


def _identifier_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    variants: set[str] = set()
    for name in names:
        variants.add(name.lower())
        variants.add(name.replace("_", " ").lower())  # "first_name" is also named "first name"
    variants = {v for v in variants if v.strip()}
    if not variants:
        return None
    words = [r"\s+".join(re.escape(w) for w in v.split()) for v in variants]
    alternation = "|".join(sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternation})(?!\w)", re.IGNORECASE)


class SchemaWordMatcher:
    """Credits the first open ambiguity for any question naming a table or column of the database.

    The base matcher is consulted first; only questions it leaves uncredited reach the schema
    test. Names match case-insensitively as whole words, with underscores also read as spaces.

    Args:
        base: the matcher consulted first (the corpus's deterministic matcher).
        identifiers: database name -> its table and column names.

    Example:
        >>> from ambitab_gym.oracles import IntentMatcher
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "Top earners", "database": "hr"},
        ...     "ambiguities": [{"id": "t", "term": "top earners", "resolution": "x"}],
        ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
        >>> matcher = SchemaWordMatcher(IntentMatcher(), lambda db: ["staff", "first_name"])
        >>> sorted(matcher.match("Is the first name needed?", OracleContext(record)))
        ['t']
        >>> sorted(matcher.match("Please elaborate.", OracleContext(record)))
        []
    """

    def __init__(self, base: Matcher, identifiers: Callable[[str], Iterable[str]]) -> None:
        self.base = base
        self._identifiers = identifiers
        self._patterns: dict[str, re.Pattern[str] | None] = {}

    def _pattern(self, database: str) -> re.Pattern[str] | None:
        if database not in self._patterns:
            self._patterns[database] = _identifier_pattern(self._identifiers(database))
        return self._patterns[database]

    def match(self, question: str, context: OracleContext) -> frozenset[str]:
        credits = frozenset(self.base.match(question, context))
        if credits:
            return credits
        pattern = self._pattern(context.record.verification.database)
        if pattern is not None and pattern.search(str(question)):
            return _first_open(context)
        return frozenset()


class _CorpusIdentifiers:
    """``database -> identifiers`` of a corpus's schema (a class, not a closure: it pickles)."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.dialect = {"sqlite": "sqlite", "duckdb": "duckdb", "postgres": "postgres"}.get(
            corpus.engine_kind(corpus.manifest.engine)
        )

    def __call__(self, database: str) -> list[str]:
        return schema_identifiers(self.corpus.schema_text(database), self.dialect, strict=True)


def _corpus_identifiers(corpus: Corpus) -> Callable[[str], list[str]]:
    return _CorpusIdentifiers(corpus)


def leaky_sql_responder(corpus: Corpus) -> Oracle:
    """Deterministic matcher; every answer ends with the reference SQL (caught by dJ_resp)."""
    reference = deterministic_oracle(corpus.manifest.oracle)
    return Oracle(reference.matcher, LeakySQLResponder(reference.responder))


def generic_credit_matcher(corpus: Corpus) -> Oracle:
    """Credits the first open ambiguity for any question (caught by dRec_none)."""
    reference = deterministic_oracle(corpus.manifest.oracle)
    return Oracle(GenericCreditMatcher(reference.matcher), reference.responder)


def schema_word_matcher(corpus: Corpus) -> Oracle:
    """Credits the first open ambiguity for any schema word (caught by dRec_spec^Q)."""
    reference = deterministic_oracle(corpus.manifest.oracle)
    return Oracle(
        SchemaWordMatcher(reference.matcher, _corpus_identifiers(corpus)), reference.responder
    )


#: The leaky oracles by name (``--oracle``; the registry lists this table): name -> factory.
LEAKY_ORACLES: Mapping[str, Callable[[Corpus], Oracle]] = MappingProxyType(
    {
        "leaky-sql-responder": leaky_sql_responder,
        "generic-credit-matcher": generic_credit_matcher,
        "schema-word-matcher": schema_word_matcher,
    }
)
#: The names :func:`make_leaky_oracle` (and ``--oracle``) accept.
LEAKY_ORACLE_NAMES: tuple[str, ...] = tuple(LEAKY_ORACLES)


def make_leaky_oracle(name: str, corpus: Corpus) -> Oracle:
    """A leaky oracle by name, built on the corpus's deterministic oracle.

    Args:
        name: one of :data:`LEAKY_ORACLE_NAMES`.
        corpus: the corpus whose deterministic matcher and reference responder it builds on.

    Example:
        >>> from ambitab_gym.corpora import load_corpus
        >>> make_leaky_oracle("generic-credit-matcher", load_corpus("bird")).name
        'GenericCreditMatcher+ReferenceResponder'
    """
    factory = LEAKY_ORACLES.get(name)
    if factory is None:
        raise ConfigurationError(
            f"unknown leaky oracle {name!r}; use one of {', '.join(LEAKY_ORACLE_NAMES)}"
        )
    return factory(corpus)
