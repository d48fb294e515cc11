"""Default values shared by the env, the campaigns and the commands: one definition each.

A leaf module (it imports nothing from the package), so any module may read it. Change a
default here and every place that uses it follows: the env's constructor, the campaign configs,
the command-line options and their ``--help`` texts.

Protocol (paper A.2, C.1):

* :data:`BUDGET_SLACK` - decisions allowed beyond m (m + 3 decisions, the last one the stop).
* :data:`ZERO_AMBIGUITY` - what the env does with m = 0 records; :data:`CAMPAIGN_ZERO_AMBIGUITY`
  what campaigns do (skip asking, paper C.1).
* :data:`SEEDS` - the seeds of a campaign that names none.
* :data:`ASKER`, :data:`SOLVER`, :data:`ORACLE` - the components a campaign uses when it names
  none (registry names).

Campaigns and diagnostics (paper A.4, Appendix E):

* :data:`RESULTS_FILE`, :data:`RESULTS_DIR` - the DuckDB results file the commands write by
  default, in the folder ``RESULTS_DIR`` of the data home
  (:func:`ambitab_gym.corpora.home.data_home`).
* :data:`MAX_ERROR_RATE` - a campaign with a larger share of errored episodes fails (exit 1).
* :data:`PROGRESS_INTERVAL_S` - seconds between progress lines when stderr is not a terminal.
* :data:`ABORT_AFTER_ERRORS` - a campaign stops after this many episodes in a row ended in a
  server error (connection, timeout, 5xx, 429): the server is down, not the asker failing.
* :data:`CONCURRENCY`, :data:`LLM_CONCURRENCY` - episodes in flight without / with an LLM server.
* :data:`LLM_TIMEOUT_S`, :data:`LLM_CLIENT_CONCURRENCY` - one LLM request's time limit, and the
  requests one client keeps in flight.
* :data:`SLOT_START_INTERVAL_S` - seconds between the starts of a campaign's episode slots.
* :data:`BOOTSTRAP_RESAMPLES`, :data:`BOOTSTRAP_SEED`, :data:`SPEC_SEED`.

Verifier limits for submitted SQL (:class:`ambitab_gym.verify.Limits`) and trusted queries:

* :data:`QUERY_TIMEOUT_S`, :data:`MAX_ROWS`, :data:`MAX_SQL_LENGTH`, :data:`MAX_RESULT_BYTES`,
  :data:`MEMORY_LIMIT_MB`, :data:`ENGINE_THREADS`, :data:`REFERENCE_TIMEOUT_S`,
  :data:`SCHEMA_TIMEOUT_S`.

>>> BUDGET_SLACK, RESULTS_FILE, LLM_CONCURRENCY
(3, 'ambitab-results.duckdb', 64)
"""

from __future__ import annotations

__all__ = [
    "ABORT_AFTER_ERRORS",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "ASKER",
    "BUDGET_SLACK",
    "CAMPAIGN_ZERO_AMBIGUITY",
    "CONCURRENCY",
    "ENGINE_THREADS",
    "LLM_CLIENT_CONCURRENCY",
    "LLM_CONCURRENCY",
    "LLM_TIMEOUT_S",
    "MAX_ERROR_RATE",
    "MAX_RESULT_BYTES",
    "MAX_ROWS",
    "MAX_SQL_LENGTH",
    "MEMORY_LIMIT_MB",
    "ORACLE",
    "QUERY_TIMEOUT_S",
    "REFERENCE_TIMEOUT_S",
    "PROGRESS_INTERVAL_S",
    "RESULTS_DIR",
    "RESULTS_FILE",
    "SCHEMA_TIMEOUT_S",
    "SEEDS",
    "SLOT_START_INTERVAL_S",
    "SOLVER",
    "SPEC_SEED",
    "ZERO_AMBIGUITY",
    "concurrency_for",
]

#: Decisions beyond m: a record with m > 0 counted ambiguities allows m + 3 decisions, the last
#: reserved for stopping, so at most m + 2 questions (paper A.2).
BUDGET_SLACK: int = 3
#: The env's handling of m = 0 records: one decision meant for stopping.
ZERO_AMBIGUITY: str = "single_decision"
#: Campaigns skip clarification on m = 0 records (paper C.1).
CAMPAIGN_ZERO_AMBIGUITY: str = "skip"
#: Seeds of a campaign config that names none.
SEEDS: tuple[int, ...] = (0,)
#: The evaluated asker of an evaluation campaign that names none: pi_full.
ASKER: str = "full"
#: The solver of a campaign that names none: the offline interpretation solver.
SOLVER: str = "interpretation"
#: The oracle of a campaign that names none: the corpus's deterministic (reference) oracle.
ORACLE: str = "deterministic"

#: The results file of ``evaluate`` and ``leakage`` when none is given (in :data:`RESULTS_DIR`).
RESULTS_FILE: str = "ambitab-results.duckdb"
#: The folder of the default results file, inside the data home.
RESULTS_DIR: str = "results"
#: A campaign whose errored episodes exceed this share fails (``--max-error-rate``).
MAX_ERROR_RATE: float = 0.10
#: Seconds between progress lines on a non-terminal (``--progress-interval``).
PROGRESS_INTERVAL_S: float = 30.0
#: Consecutive episodes ended by a server error after which a campaign stops (``--abort-after``;
#: 0 never stops).
ABORT_AFTER_ERRORS: int = 20
#: Episodes in flight at once without an LLM server (scripted parts are CPU-bound).
CONCURRENCY: int = 1
#: Episodes (and requests) in flight at once against an LLM server, so it can batch.
LLM_CONCURRENCY: int = 64
#: Seconds one LLM request may take (``--llm-timeout``).
LLM_TIMEOUT_S: float = 120.0
#: Requests one :class:`~ambitab_gym.llm.LLMClient` keeps in flight when none is given.
LLM_CLIENT_CONCURRENCY: int = 16
#: Seconds between the first episodes of a campaign's slots (``--start-interval``): slot i
#: starts i x this after the run begins, so C slots reach the LLM server spread out rather than
#: in one burst, whose waves would last the whole run against a server with regular latency.
#: About the CPU one call costs the client's loop (docs/scale.md). 0: every slot at once.
SLOT_START_INTERVAL_S: float = 0.0004

#: Bootstrap resamples of the leakage intervals (paper Appendix E: 2,000).
BOOTSTRAP_RESAMPLES: int = 2000
#: The bootstrap's seed.
BOOTSTRAP_SEED: int = 0
#: The seed of the specification randomization's replacement map.
SPEC_SEED: int = 0

#: Wall-clock limit of one submitted query, seconds.
QUERY_TIMEOUT_S: float = 5.0
#: A submitted query returning more rows fails (``too_many_rows``).
MAX_ROWS: int = 100_000
#: Longer submitted SQL is refused before it reaches a database (``too_large``).
MAX_SQL_LENGTH: int = 100_000
#: A result whose values take more bytes fails (``too_large``).
MAX_RESULT_BYTES: int = 64 * 1024 * 1024
#: DuckDB's memory cap per engine, MiB.
MEMORY_LIMIT_MB: int = 512
#: Engine worker threads where the engine has them (DuckDB).
ENGINE_THREADS: int = 1
#: Wall-clock limit of a trusted reference query, seconds.
REFERENCE_TIMEOUT_S: float = 60.0
#: Wall-clock limit of reading a database's schema, seconds.
SCHEMA_TIMEOUT_S: float = 30.0


def concurrency_for(*, llm: bool) -> int:
    """The default episodes in flight: :data:`LLM_CONCURRENCY` with an LLM server, else
    :data:`CONCURRENCY`.

    >>> concurrency_for(llm=True), concurrency_for(llm=False)
    (64, 1)
    """
    return LLM_CONCURRENCY if llm else CONCURRENCY
