"""The trusted verifier: runs a submitted query and compares it with the cached reference result.

* :class:`Verdict` - success plus a reason for every failure; never carries reference data.
* :class:`Verifier` - ``verify(record, sql) -> Verdict``; nothing it does raises into the caller.
* :class:`VerifierStats` - the verifier's counters: verifications, memo hits, executions, time.

A campaign's verifier is made with ``memo=True`` (the campaign runner does). Then the verdict
of a read-only record for an exact SQL text is kept and answered again without executing, and
the rows of each query run (a reference or a submission) are kept by (engine, database, exact
SQL text): the same text submitted again, for any record of that database, is compared with
those rows instead of running again (a reference query is another record's submission more
often than not). Both are sound because databases are read-only and a result depends only on
the database, the SQL text and the limits: a run is reused only when it finished within the
submission time limit, under the same row and byte limits, on the submissions' own connection
identity (never PostgreSQL's reference role); verdicts that may be transient (``timeout``,
``runtime``, ``engine``, ...) and write tasks are never kept; both stores are bounded
(:data:`MEMO_MAX_ENTRIES`, :data:`MEMO_MAX_CHARS`, :data:`RUN_MAX_CELLS`,
:data:`RUNS_MAX_CELLS`). Off by default, so a stand-alone verifier (and the verifier benchmarks)
runs every submission.

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
  Write tasks on PostgreSQL need ``engine_options={"admin_dsn": ...}`` (or ``load_dsn``: a
  superuser that clones and drops the scratch databases) and the templates that
  ``load_corpus_databases`` builds; without them they are ``unsupported``.
* ``reference_sql`` of a write task holds all of upstream's ``sol_sql`` statements (join the
  list with ``";\n"``); the verifier cuts it into ``sol_sqls`` again. Before the first
  submission the task runs once with the reference as the submission (cached): a reference that
  fails its own tests makes every verdict ``reference_error``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

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
from ambitab_gym.verify.compare import NormalizedReference, results_match
from ambitab_gym.verify.taskrun import preprocess_results, upstream_sql
from ambitab_gym.verify.worker import sql_text_problem
from ambitab_gym.vocabulary import VERDICT_REASONS, VerdictReason, check

__all__ = [
    "EngineOpener",
    "Verdict",
    "Verifier",
    "VerifierStats",
    "is_write_task",
    "postgres_only_feature",
    "upstream_conditions",
]

#: ``open_engine(engine_kind, database_name) -> Engine``
EngineOpener = Callable[[str, str], Engine]

logger = logging.getLogger(__name__)

#: Verdict reasons that depend only on the record, the SQL text and the limits (kept by the
#: memo). ``runtime`` and ``timeout`` may come from a crashed worker or a loaded machine,
#: ``engine`` from a lost connection: those run again.
_MEMO_REASONS = frozenset({"match", "mismatch", "syntax", "rejected", "too_many_rows", "too_large"})
#: Calls whose value changes from one run to the next (random numbers, clocks, sequences,
#: session identity): SQL naming one is never answered from the memo nor kept for reuse, so
#: every episode is scored on its own execution, as without the memo. Over-matching (a column
#: called ``random_seed``) only costs a re-execution.
_VOLATILE = re.compile(
    r"random|uuid|now\s*\(|'now'|current_(?:date|time|timestamp)|localtime|clock_timestamp"
    r"|timeofday|statement_timestamp|transaction_timestamp|setseed|nextval|txid|pg_backend_pid",
    re.IGNORECASE,
)
#: Bounds of the verdict memo and of the kept runs: entries, and characters of SQL text held in
#: their keys (each).
MEMO_MAX_ENTRIES = 65_536
MEMO_MAX_CHARS = 16_000_000
#: Results with more cells (rows x columns) than this are not kept for reuse.
RUN_MAX_CELLS = 10_000
#: Cells of all kept results together.
RUNS_MAX_CELLS = 2_000_000


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
class VerifierStats:
    """Counters of one :class:`Verifier` (logged at DEBUG level when it closes).

    Attributes:
        verifications: calls of :meth:`Verifier.verify`.
        memo_hits: verdicts answered from the memo (nothing executed).
        reused_runs: submissions and references judged by the kept rows of an earlier run of the
            same text on the same database (nothing executed).
        executions: submissions executed on an engine (read-only records).
        reference_runs: reference queries executed (each record's once, unless it failed or
            reused a run).
        wall_s: wall-clock seconds inside :meth:`Verifier.verify`.
        cpu_s: CPU seconds of the calling thread inside :meth:`Verifier.verify` (time a worker
            process spends is not in it; time waiting for another thread's GIL is not either);
            counted by a ``memo=True`` (campaign) verifier only: reading a thread's CPU clock is
            a system call, about a microsecond, which a stand-alone verifier does not pay.

    >>> stats = VerifierStats()
    >>> stats.verifications, stats.memo_hits
    (0, 0)
    """

    verifications: int = 0
    memo_hits: int = 0
    reused_runs: int = 0
    executions: int = 0
    reference_runs: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0


@dataclass
class _Reference:
    rows: list[tuple] | None
    error: str | None
    message: str = ""
    cached: bool = True
    #: the normalized rows with their set / multiset made once (plain comparisons only)
    prepared: NormalizedReference | None = None


#: Failures of a reference query that say nothing about the record (retried, never cached).
_TRANSIENT = ("engine",)
#: Each test case adds this many submission time limits to a write task's wall-clock budget,
#: on top of :data:`_TASK_BASE_LIMITS` (preprocess, submission, default check, clean-up).
_TASK_BASE_LIMITS = 3


def is_write_task(record: TaskRecord) -> bool:
    """Whether a record runs as a write task (module doc): preprocess or clean-up SQL, test
    cases, or an upstream ``Management`` category.

    >>> from ambitab_gym.records import parse_record
    >>> base = {"id": "w", "avt_id": "w", "corpus": "c", "spec": {"request": "r",
    ...         "database": "d"}, "verification": {"database": "d", "reference_sql": "SELECT 1"}}
    >>> is_write_task(parse_record(base))
    False
    >>> base["verification"]["test_cases"] = ["def test_case(p, s, d, c): pass"]
    >>> is_write_task(parse_record(base))
    True
    """
    spec = record.verification
    if spec.preprocess_sql or spec.cleanup_sql or spec.test_cases:
        return True
    category = record.source.get("category") if isinstance(record.source, dict) else None
    return str(category or "").lower() == "management"


def upstream_conditions(record: TaskRecord) -> dict | None:
    """The record's upstream BIRD-Interact ``conditions`` (``source["conditions"]``), if any."""
    conditions = record.source.get("conditions") if isinstance(record.source, dict) else None
    return conditions if isinstance(conditions, dict) else None


_DUCKDB_MISSING = (
    (
        re.compile(r"(?:Scalar|Table|Aggregate|Pragma)? ?Function with name \"?([\w.]+)", re.I),
        "the function {0}()",
    ),
    (re.compile(r"Type with name \"?([\w.]+)\"? does not exist", re.I), "the type {0}"),
    (re.compile(r"syntax error at or near \"([^\"]{1,40})\"", re.I), "PostgreSQL syntax at {0!r}"),
    (re.compile(r"Not implemented Error: ([^\n]{1,80})", re.I), "{0}"),
)


def postgres_only_feature(reference_sql: str, message: str) -> str | None:
    """What a PostgreSQL solution needs that DuckDB lacks, read from DuckDB's error, or None.

    >>> postgres_only_feature("SELECT json_object_agg(a, b) FROM t",
    ...     "Catalog Error: Scalar Function with name json_object_agg does not exist!")
    'the function json_object_agg()'
    >>> postgres_only_feature("CREATE FUNCTION f() RETURNS int AS $$ BEGIN RETURN 1; END $$ "
    ...     "LANGUAGE plpgsql", 'Parser Error: syntax error at or near "RETURNS"')
    'PL/pgSQL functions (CREATE FUNCTION ... LANGUAGE plpgsql)'
    >>> postgres_only_feature("SELECT x FROM t", "Binder Error: column x not found") is None
    True
    """
    lowered = reference_sql.lower()
    if re.search(r"language\s+'?plpgsql", lowered):
        return "PL/pgSQL functions (CREATE FUNCTION ... LANGUAGE plpgsql)"
    if re.search(r"\bcreate\s+(?:or\s+replace\s+)?(?:constraint\s+)?trigger\b", lowered):
        return "triggers (CREATE TRIGGER)"
    for pattern, template in _DUCKDB_MISSING:
        match = pattern.search(message)
        if match and ("does not exist" in message or template != _DUCKDB_MISSING[0][1]):
            return template.format(match.group(1))
    return None


class Verifier:
    """Executes submissions in a sandboxed engine and compares results with the reference.

    Read-only records run one ``SELECT`` on the engine's read-only fast path and compare it
    with the cached reference result; write tasks (:func:`is_write_task`) run in a private
    scratch state per verification (the module doc has the contract).

    Args:
        open_engine: returns the engine for ``(engine_kind, database_name)``; engines are cached.
        limits: limits for submitted queries.
        reference_timeout_s: time limit for the (trusted) reference queries.
        memo: keep verdicts per (record, exact SQL text) and the rows of each run per
            (engine, database, exact SQL text), so nothing runs twice (module doc: what is
            kept, and when); for campaigns, where every seed and condition submits again.

    Example:
        >>> from ambitab_gym.corpora import load_corpus
        >>> corpus = load_corpus("bird")
        >>> verifier = Verifier(corpus.open_engine)
        >>> record = corpus.records[0]
        >>> verifier.verify(record, record.verification.reference_sql).reason
        'match'
        >>> verifier.verify(record, "PRAGMA user_version = 3").reason
        'rejected'

        With ``memo=True`` the same submission again is answered without executing:

        >>> verifier = Verifier(corpus.open_engine, memo=True)
        >>> sql = "SELECT 1"
        >>> [verifier.verify(record, sql).reason for _ in range(3)]
        ['mismatch', 'mismatch', 'mismatch']
        >>> verifier.stats.executions, verifier.stats.memo_hits
        (1, 2)
        >>> verifier.verify(record, record.verification.reference_sql).reason
        'match'
        >>> verifier.stats.executions, verifier.stats.reused_runs
        (1, 1)
        >>> verifier.close()
    """

    def __init__(
        self,
        open_engine: EngineOpener,
        *,
        limits: Limits | None = None,
        reference_timeout_s: float = REFERENCE_TIMEOUT_S,
        memo: bool = False,
    ) -> None:
        self._open_engine = open_engine
        self.memo = memo
        self.stats = VerifierStats()
        self._memo: dict[tuple[str, str], Verdict] = {}
        self._memo_chars = 0
        self._runs: dict[tuple[str, str, str], list] = {}
        self._runs_chars = 0
        self._runs_cells = 0
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
        self._write_checks: dict[str, Verdict | None] = {}
        self._write_failures: dict[str, str] = {}
        # per record id: (record, normalized reference, rules) of a plain read-only
        # record whose reference ran (memo off), for _verify_read
        self._read_plans: dict[str, tuple] = {}

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
        conditions = upstream_conditions(record)
        sql = upstream_sql([spec.reference_sql])[0] if conditions is not None else None
        last, message = "engine", ""
        text = sql or spec.reference_sql
        run_key = (spec.engine, spec.database, text)
        for attempt in range(3):
            try:
                engine = self.engine(spec.engine, spec.database)
                # Engines that run trusted SQL under an identity of its own (PostgreSQL's
                # reference role) offer execute_reference; the others run it like any query.
                run = getattr(engine, "execute_reference", None)
                rows = self._runs.get(run_key) if self.memo and run is None else None
                if rows is not None:
                    self.stats.reused_runs += 1
                else:
                    self.stats.reference_runs += 1
                    began = time.perf_counter()
                    rows = (run or engine.execute)(text, limits=self._reference_limits).rows
                    if run is None:
                        self._keep_run(run_key, rows, time.perf_counter() - began)
            except QueryError as error:
                category = error.category
                if category in ("syntax", "rejected", "too_many_rows", "too_large") or (
                    category in ("runtime", "timeout") and category == last
                ):
                    cached = self._references[record.id] = _Reference(None, category, error.message)
                    return cached
                last, message = category, error.message
                time.sleep(0.05 * attempt)
                continue
            except Exception as error:  # engine unavailable, file missing, ...: not cached
                return _Reference(None, "engine", bounded_text(error), cached=False)
            if conditions is not None:
                cached = _Reference(preprocess_results(rows, self._decimals(record)), None)
            else:
                prepared = NormalizedReference(rows, spec.compare.float_decimals)
                cached = _Reference(prepared.rows, None, prepared=prepared)
            self._references[record.id] = cached
            return cached
        return _Reference(None, last, message, cached=False)

    @staticmethod
    def _decimals(record: TaskRecord) -> int:
        decimals = record.verification.compare.float_decimals
        return 2 if decimals is None else decimals

    def _keep_run(self, key: tuple[str, str, str], rows: list, took: float) -> None:
        """Keep a run's rows for the same text again (memo on, within the submission time
        limit, not too large), dropping the oldest runs beyond the bounds."""
        if not self.memo or took > self.limits.timeout_s or _VOLATILE.search(key[2]):
            return
        cells = len(rows) * len(rows[0]) if rows else 0
        if cells > RUN_MAX_CELLS:
            return
        runs = self._runs
        if key in runs:
            return
        runs[key] = rows
        self._runs_chars += len(key[2])
        self._runs_cells += cells
        while (
            len(runs) > MEMO_MAX_ENTRIES
            or self._runs_chars > MEMO_MAX_CHARS
            or self._runs_cells > RUNS_MAX_CELLS
        ):
            oldest = next(iter(runs))
            dropped = runs.pop(oldest)
            self._runs_chars -= len(oldest[2])
            self._runs_cells -= len(dropped) * len(dropped[0]) if dropped else 0

    def execute(self, record: TaskRecord, sql: str) -> QueryResult:
        """Run a submission on the record's database (sandboxed). Raises QueryError."""
        spec = record.verification
        return self.engine(spec.engine, spec.database).execute(sql, limits=self.limits)

    def verify(self, record: TaskRecord, sql: str | None) -> Verdict:
        """Verify a submission. Never raises: every failure is a :class:`Verdict`."""
        start = time.perf_counter()
        memo = self.memo
        cpu = time.thread_time() if memo else 0.0  # a system call: campaign verifiers only
        stats = self.stats
        stats.verifications += 1
        key = (
            (record.id, sql)
            if memo and isinstance(sql, str) and not _VOLATILE.search(sql)
            else None
        )
        verdict = self._memo.get(key) if key is not None else None  # type: ignore[arg-type]
        if verdict is not None:
            stats.memo_hits += 1
            verdict = Verdict(
                verdict.success, verdict.reason, verdict.detail, time.perf_counter() - start
            )
        else:
            verdict = self._verify(record, sql, start)
            if key is not None and verdict.reason in _MEMO_REASONS and not is_write_task(record):
                self._remember(key, verdict)  # type: ignore[arg-type]
        stats.wall_s += time.perf_counter() - start
        if memo:
            stats.cpu_s += time.thread_time() - cpu
        return verdict

    def _remember(self, key: tuple[str, str], verdict: Verdict) -> None:
        """Keep a verdict, dropping the oldest ones beyond the memo's bounds."""
        memo = self._memo
        memo[key] = verdict
        self._memo_chars += len(key[1])
        while len(memo) > MEMO_MAX_ENTRIES or self._memo_chars > MEMO_MAX_CHARS:
            oldest = next(iter(memo))
            del memo[oldest]
            self._memo_chars -= len(oldest[1])

    def _verify(self, record: TaskRecord, sql: str | None, start: float) -> Verdict:
        if not isinstance(sql, str) or not sql or sql.isspace():
            return Verdict(False, "no_sql", "no SQL was submitted")
        plan = self._read_plans.get(record.id)
        if plan is not None and plan[0] is record:
            return self._verify_read(plan, sql, start)
        if is_write_task(record):
            try:
                return self._verify_write(record, sql, start)
            except Exception as error:  # never escape into the env loop
                detail = bounded_text(f"{type(error).__name__}: {bounded_text(error)}")
                return Verdict(False, "engine", detail, time.perf_counter() - start)
        reference = self._reference(record)
        if reference.rows is None:
            return self._reference_failure(record, reference, start)
        conditions = upstream_conditions(record)
        if conditions is None and not self.memo and reference.prepared is not None:
            # A plain read-only record: what the checks above found is kept for its next
            # submissions (the same record object), which go straight to _verify_read.
            plan = (record, reference.prepared, record.verification.compare)
            self._read_plans[record.id] = plan
            return self._verify_read(plan, sql, start)
        if conditions is not None:
            sql = upstream_sql([sql])[0]
            if not sql.strip():
                return Verdict(False, "no_sql", "the submission holds only comments")
        rows = None
        if self.memo:
            spec = record.verification
            run_key = (spec.engine, spec.database, sql)
            if len(sql) <= self.limits.max_sql_length and not _VOLATILE.search(sql):
                rows = self._runs.get(run_key)
        if rows is not None:  # the same text ran before on this database: the same rows
            self.stats.reused_runs += 1
        else:
            began = time.perf_counter()
            rows = self._run(record, sql, start)
            if isinstance(rows, Verdict):
                return rows
            if self.memo:
                self._keep_run(run_key, rows, time.perf_counter() - began)
        if conditions is not None:
            return self._judge(
                rows, start, self._upstream_match, record, rows, reference.rows, conditions
            )
        return self._judge(
            rows,
            start,
            results_match,
            rows,
            reference.prepared or reference.rows,
            record.verification.compare,
            reference_normalized=True,
        )

    def _verify_read(self, plan: tuple, sql: str, start: float) -> Verdict:
        """A plain read-only record's submission (memo off): run on the record's engine,
        compared with its normalized reference (``plan``: record, reference, rules)."""
        record, reference, rules = plan
        rows = self._run(record, sql, start)
        if isinstance(rows, Verdict):
            return rows
        return self._judge(
            rows, start, results_match, rows, reference, rules, reference_normalized=True
        )

    def _run(self, record: TaskRecord, sql: str, start: float) -> list | Verdict:
        """A submission's rows on the record's database, or the verdict of its failure (never
        raises)."""
        self.stats.executions += 1
        try:
            return self.execute(record, sql).rows
        except QueryError as error:
            return Verdict(False, error.category, error.message, time.perf_counter() - start)
        except Exception as error:  # never escape into the env loop
            detail = bounded_text(f"{type(error).__name__}: {bounded_text(error)}")
            return Verdict(False, "engine", detail, time.perf_counter() - start)

    @staticmethod
    def _judge(rows: list, start: float, matches: Callable[..., bool], *args, **kwargs) -> Verdict:
        """The verdict on a submission's ``rows``: ``matches(*args, **kwargs)`` says whether they
        answer the request; a comparison that raises is a ``runtime`` failure (never raises)."""
        try:
            ok = matches(*args, **kwargs)
        except Exception as error:  # a value the comparison cannot handle: never escape
            detail = f"the result cannot be compared ({type(error).__name__}: {error})"
            return Verdict(False, "runtime", detail, time.perf_counter() - start)
        if ok:
            return Verdict(True, "match", "", time.perf_counter() - start)
        return Verdict(
            False,
            "mismatch",
            f"the result ({len(rows)} rows) does not answer the request as intended",
            time.perf_counter() - start,
        )

    def _upstream_match(
        self, record: TaskRecord, rows: list, reference: list[tuple], conditions: dict
    ) -> bool:
        """Upstream's ``ex_base``: normalized rows, an empty result fails, set unless order."""
        submitted = preprocess_results(rows, self._decimals(record))
        if not submitted or not reference:
            return False
        if conditions.get("order"):
            return submitted == reference
        return set(submitted) == set(reference)

    def _reference_failure(
        self, record: TaskRecord, reference: _Reference, start: float
    ) -> Verdict:
        elapsed = time.perf_counter() - start
        if not reference.cached:
            return Verdict(
                False,
                "engine",
                "the server interrupted this record's reference query (or the engine is "
                "unavailable); it will be retried on the next submission",
                elapsed,
            )
        spec = record.verification
        missing = (
            postgres_only_feature(spec.reference_sql, reference.message)
            if spec.engine == "duckdb" and reference.error in ("syntax", "runtime")
            else None
        )
        if missing is not None:
            return Verdict(False, "unsupported", self._unsupported(missing), elapsed)
        return Verdict(
            False,
            "reference_error",
            "this record's reference query cannot be executed; the corpus is broken "
            "(run `ambitab-gym validate` on it)",
            elapsed,
        )

    @staticmethod
    def _unsupported(missing: str) -> str:
        return (
            f"this record's solution needs PostgreSQL: DuckDB lacks {missing}; verify this "
            "corpus on PostgreSQL (engine='postgres')"
        )

    # -- write tasks -----------------------------------------------------------------------

    def _task(self, record: TaskRecord, sql: str, *, trusted: bool) -> dict[str, Any]:
        spec = record.verification
        return {
            "preprocess": list(spec.preprocess_sql),
            "submission": sql,
            "reference": spec.reference_sql,
            "tests": list(spec.test_cases),
            "cleanup": list(spec.cleanup_sql),
            "db_name": spec.database,
            "conditions": upstream_conditions(record),
            "trusted_submission": trusted,
        }

    def _run_task(self, engine: Engine, record: TaskRecord, sql: str, *, trusted: bool) -> tuple:
        limits = self._reference_limits if trusted else self.limits
        total_s = limits.timeout_s * (_TASK_BASE_LIMITS + len(record.verification.test_cases))
        task = self._task(record, sql, trusted=trusted)
        reply = engine.run_task(task, limits=limits, total_s=total_s)  # type: ignore[attr-defined]
        if not isinstance(reply, tuple) or len(reply) < 3:
            return ("error", "engine", "the engine gave no answer")
        return reply

    def _write_check(self, engine: Engine, record: TaskRecord) -> Verdict | None:
        """Whether the record's own solution passes its task (cached unless transient)."""
        if record.id in self._write_checks:
            return self._write_checks[record.id]
        spec = record.verification
        reply = self._run_task(engine, record, spec.reference_sql, trusted=True)
        if reply[0] == "task" and reply[1]:
            self._write_checks[record.id] = None
            return None
        category = reply[2] if reply[0] == "task" else reply[1]
        message = str(reply[3] if reply[0] == "task" else reply[2])
        if (
            reply[0] == "error"
            and category in ("runtime", "timeout")
            and (self._write_failures.get(record.id) != category)
        ):
            self._write_failures[record.id] = category  # cached when it happens twice
            category = "engine"
        if category in _TRANSIENT:
            return Verdict(
                False,
                "engine",
                "the engine interrupted this record's reference task; it will be retried on "
                "the next submission",
            )
        missing = (
            postgres_only_feature(spec.reference_sql, message) if spec.engine == "duckdb" else None
        )
        if missing is not None:
            verdict = Verdict(False, "unsupported", self._unsupported(missing))
        elif category == "unsupported":
            verdict = Verdict(False, "unsupported", message)
        else:
            verdict = Verdict(
                False,
                "reference_error",
                "this record's own solution does not pass its task; the corpus is broken "
                "(run `ambitab-gym validate` on it)",
            )
        self._write_checks[record.id] = verdict
        return verdict

    def _verify_write(self, record: TaskRecord, sql: str, start: float) -> Verdict:
        spec = record.verification
        engine = self.engine(spec.engine, spec.database)
        if not hasattr(engine, "run_task"):
            return Verdict(
                False,
                "unsupported",
                f"the {getattr(engine, 'name', 'engine')} engine cannot run tasks that write",
            )
        if len(sql) > self.limits.max_sql_length:
            return Verdict(
                False, "too_large", f"SQL text longer than {self.limits.max_sql_length} characters"
            )
        problem = sql_text_problem(sql)
        if problem is not None:
            return Verdict(False, problem[0], problem[1])  # type: ignore[arg-type]
        failed = self._write_check(engine, record)
        if failed is not None:
            return replace(failed, elapsed_s=time.perf_counter() - start)
        reply = self._run_task(engine, record, sql, trusted=False)
        elapsed = time.perf_counter() - start
        if reply[0] == "task":
            _, success, reason, detail = reply[:4]
            if reason not in VERDICT_REASONS:
                reason, detail = "engine", f"unexpected answer from the engine ({reason})"
            if reason == "reference_error":  # trusted SQL of the task failed this time
                reason = "engine"
                detail = "the engine interrupted this record's task; it will be retried"
            return Verdict(bool(success) and reason == "match", reason, str(detail), elapsed)
        category, message = reply[1], reply[2]
        if category not in VERDICT_REASONS:
            category = "engine"
        return Verdict(False, category, str(message), elapsed)

    def __getstate__(self) -> dict[str, Any]:
        """Pickling (Ray workers, subprocesses): open engines stay behind; the copy reopens its
        own on first use. Cached reference results travel with it."""
        return {**self.__dict__, "_engines": {}, "_read_plans": {}}

    def close(self) -> None:
        """Close every engine; the counters go to the log (DEBUG, ``extra["verifier_stats"]``)."""
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()
        self._read_plans.clear()
        if logger.isEnabledFor(logging.DEBUG):
            counters = asdict(self.stats)
            logger.debug("verifier closed: %s", counters, extra={"verifier_stats": counters})
