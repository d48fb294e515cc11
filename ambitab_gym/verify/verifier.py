"""The trusted verifier: runs a submitted query and compares it with the cached reference result.

* :class:`Verdict` - success plus a reason for every failure; never carries reference data.
* :class:`Verifier` - ``verify(record, sql) -> Verdict``; nothing it does raises into the caller.

Contract for write tasks and test cases (BIRD-Interact; for converters writing such records):

* A record is a **write task** when ``verification.preprocess_sql``, ``cleanup_sql`` or
  ``test_cases`` is non-empty, or ``source["category"] == "Management"``. Every other record
  keeps the read-only fast path (one ``SELECT``, compared with the cached reference result).
* A write task runs in a private scratch copy of the database, discarded afterwards (SQLite: an
  in-memory copy; DuckDB: an in-memory copy; PostgreSQL: a database cloned from a template and
  dropped), in a killable worker process under the same limits. Order, all on one connection:
  ``preprocess_sql`` (each item may hold several statements), the submission split into
  statements (``pred_sqls``; several allowed), then each test case, then ``cleanup_sql``.
  A failing submission statement fails the verdict with its engine category (``syntax``,
  ``runtime``, ``timeout``, ...), as upstream's execution error does.
* A test case is upstream's Python text defining ``test_case(pred_sqls, sol_sqls, db_name,
  conn)``: ``pred_sqls`` is the submission's statement list, ``sol_sqls`` the reference's
  (``reference_sql`` split into statements), ``db_name`` the record's database name, ``conn`` a
  DB-API connection to the scratch state (``sqlite3``, ``duckdb`` or ``psycopg``; its
  statements run inside the sandbox). It passes when it returns without raising; an
  ``AssertionError`` or any other exception is a failed test: verdict ``mismatch`` (the detail
  never shows the test's code or expectations). Its globals are upstream's helpers, with
  upstream's behaviour: ``execute_queries(queries, db_name, conn, logger=None,
  section_title="")`` -> ``(rows of the last statement or None, execution_error, timeout_error)``
  (``queries`` a list or one string), ``perform_query_on_postgresql_databases(query, db_name,
  conn=None)`` -> ``(rows, conn)`` (also under the SQLite/DuckDB names), ``ex_base(pred_sqls,
  sol_sqls, db_name, conn, conditions=None)`` -> 1/0, ``test_case_default(...)``,
  ``performance_compare_by_qep(old_sqls, sol_sqls, db_name, conn)``,
  ``check_sql_function_usage(sqls, keywords)``, ``remove_distinct``, ``remove_comments``,
  ``remove_round``, ``preprocess_results``, ``process_decimals``, ``pred_query_result`` (rows of
  the submission's last statement), ``date``, ``datetime``, ``Decimal``, ``json``, ``math``, ``re``.
* A write task without test cases is checked like upstream's ``test_case_default``.
* Conditions: a query task whose ``source["conditions"]`` is a dict (upstream BIRD-Interact) is
  compared like upstream's ``test_case_default``: comments, ``DISTINCT`` and ``ROUND()`` removed
  from both queries, dates as ``YYYY-MM-DD``, numbers rounded (``compare.float_decimals``, which
  the converter sets from ``conditions.decimal``, 2 when it is -1), JSON values as sorted text,
  an empty result fails, rows compared as a set unless ``conditions.order`` (then in order).
  Records without ``source["conditions"]`` keep ``verification.compare``.
* A PostgreSQL-only solution run on DuckDB (a PL/pgSQL function, a function DuckDB lacks)
  fails with ``unsupported`` naming what is missing; run the corpus with ``engine="postgres"``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ambitab_gym.defaults import REFERENCE_TIMEOUT_S
from ambitab_gym.records import TaskRecord
from ambitab_gym.verify.base import (
    MAX_MESSAGE_CHARS,
    Engine,
    Limits,
    QueryError,
    QueryResult,
    bounded_text,
)
from ambitab_gym.verify.compare import normalize_rows, results_match
from ambitab_gym.vocabulary import VERDICT_REASONS, VerdictReason, check

__all__ = ["EngineOpener", "Verdict", "Verifier"]

#: ``open_engine(engine_kind, database_name) -> Engine``
EngineOpener = Callable[[str, str], Engine]


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one submission.

    Attributes:
        success: whether the submission matches the record's interpretation.
        reason: one of :data:`~ambitab_gym.vocabulary.VERDICT_REASONS`: ``match``,
            ``mismatch``, ``no_sql``, ``timeout``, ``rejected``, ``syntax``, ``runtime``,
            ``too_many_rows``, ``too_large``, ``engine``, ``reference_error`` or
            ``unsupported`` (checked when the verdict is made).
        detail: an explanation about the *submitted* SQL (never about the reference), cut to
            :data:`~ambitab_gym.verify.base.MAX_MESSAGE_CHARS` characters.
        elapsed_s: time spent executing and comparing the submission.

    >>> verdict = Verdict(False, "timeout", "query ran longer than 5 s")
    >>> bool(verdict), verdict.reason
    (False, 'timeout')
    >>> len(Verdict(False, "runtime", "x" * 50_000).detail) <= 1_000
    True
    """

    success: bool
    reason: VerdictReason
    detail: str = ""
    elapsed_s: float = 0.0

    def __post_init__(self) -> None:
        check(self.reason, VERDICT_REASONS, "verdict reason")
        if not isinstance(self.detail, str) or len(self.detail) > MAX_MESSAGE_CHARS:
            object.__setattr__(self, "detail", bounded_text(self.detail))

    def __bool__(self) -> bool:
        return self.success


@dataclass
class _Reference:
    rows: list[tuple] | None
    error: str | None


class Verifier:
    """Executes submissions in a sandboxed engine and compares results with the reference.

    Args:
        open_engine: returns the engine for ``(engine_kind, database_name)``; engines are cached.
        limits: limits for submitted queries.
        reference_timeout_s: time limit for the (trusted) reference queries.

    Example:
        >>> from ambitab_gym.corpora import load_corpus
        >>> corpus = load_corpus("bird")
        >>> verifier = Verifier(corpus.open_engine)
        >>> record = corpus.records[0]
        >>> verifier.verify(record, record.verification.reference_sql).reason
        'match'
        >>> verifier.verify(record, "PRAGMA user_version = 3").reason
        'rejected'
    """

    def __init__(
        self,
        open_engine: EngineOpener,
        *,
        limits: Limits | None = None,
        reference_timeout_s: float = REFERENCE_TIMEOUT_S,
    ) -> None:
        self._open_engine = open_engine
        self.limits = limits or Limits()
        self._reference_limits = Limits(
            timeout_s=reference_timeout_s,
            max_rows=self.limits.max_rows,
            max_result_bytes=self.limits.max_result_bytes,
            max_sql_length=1_000_000,
            memory_limit_mb=self.limits.memory_limit_mb,
            threads=self.limits.threads,
        )
        self._engines: dict[tuple[str, str], Engine] = {}
        self._references: dict[str, _Reference] = {}

    def engine(self, kind: str, database: str) -> Engine:
        """The (cached) engine for a database."""
        key = (kind, database)
        engine = self._engines.get(key)
        if engine is None:
            engine = self._open_engine(kind, database)
            self._engines[key] = engine
        return engine

    def reference_rows(self, record: TaskRecord) -> list[tuple] | None:
        """The normalized reference result of a record (cached), or None if it fails."""
        return self._reference(record).rows

    def _reference(self, record: TaskRecord) -> _Reference:
        """The reference result, computed once; only a deterministic failure is cached.

        A transient failure (``engine``: cancelled, terminated, connection lost, server down)
        is retried at once and never cached; ``runtime`` and ``timeout`` (a crashed engine
        worker, a loaded machine) are cached only when a second attempt fails the same way.
        """
        cached = self._references.get(record.id)
        if cached is not None:
            return cached
        spec = record.verification
        last = "engine"
        for attempt in range(3):
            try:
                engine = self.engine(spec.engine, spec.database)
                # Engines that run trusted SQL under an identity of its own (PostgreSQL's
                # reference role) offer execute_reference; the others run it like any query.
                run = getattr(engine, "execute_reference", engine.execute)
                result = run(spec.reference_sql, limits=self._reference_limits)
            except QueryError as error:
                category = error.category
                if category in ("syntax", "rejected", "too_many_rows", "too_large") or (
                    category in ("runtime", "timeout") and category == last
                ):
                    cached = self._references[record.id] = _Reference(None, category)
                    return cached
                last = category
                time.sleep(0.05 * attempt)
                continue
            except Exception as error:  # engine unavailable, file missing, ...: not cached
                return _Reference(None, type(error).__name__)
            rows = normalize_rows(result.rows, spec.compare.float_decimals)
            cached = self._references[record.id] = _Reference(rows, None)
            return cached
        return _Reference(None, last)

    def execute(self, record: TaskRecord, sql: str) -> QueryResult:
        """Run a submission on the record's database (sandboxed). Raises QueryError."""
        spec = record.verification
        return self.engine(spec.engine, spec.database).execute(sql, limits=self.limits)

    def verify(self, record: TaskRecord, sql: str | None) -> Verdict:
        """Verify a submission. Never raises: every failure is a :class:`Verdict`."""
        start = time.perf_counter()
        if sql is None or not isinstance(sql, str) or not sql.strip():
            return Verdict(False, "no_sql", "no SQL was submitted")
        if record.verification.preprocess_sql or record.verification.cleanup_sql:
            return Verdict(
                False,
                "unsupported",
                "records that modify the database are not supported by the read-only verifier",
            )
        reference = self._reference(record)
        if reference.rows is None:
            return Verdict(
                False,
                "reference_error",
                "this record's reference query cannot be executed; the corpus is broken "
                "(run `ambitab-gym validate` on it)",
            )
        try:
            result = self.execute(record, sql)
        except QueryError as error:
            return Verdict(False, error.category, error.message, time.perf_counter() - start)
        except Exception as error:  # never escape into the env loop
            detail = bounded_text(f"{type(error).__name__}: {bounded_text(error)}")
            return Verdict(False, "engine", detail, time.perf_counter() - start)
        try:
            ok = results_match(
                result.rows, reference.rows, record.verification.compare, reference_normalized=True
            )
        except Exception as error:  # a value the comparison cannot handle: never escape
            detail = f"the result cannot be compared ({type(error).__name__}: {error})"
            return Verdict(False, "runtime", detail, time.perf_counter() - start)
        elapsed = time.perf_counter() - start
        if ok:
            return Verdict(True, "match", "", elapsed)
        return Verdict(
            False,
            "mismatch",
            f"the result ({len(result.rows)} rows) does not answer the request as intended",
            elapsed,
        )

    def close(self) -> None:
        """Close every engine."""
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()
