"""The trusted verifier and its sandboxed SQL engines (docs/design.md section 6, Verifier)."""

from __future__ import annotations

from ambitab_gym.verify.base import Engine, Limits, QueryError, QueryResult
from ambitab_gym.verify.compare import normalize_rows, normalize_value, results_match
from ambitab_gym.verify.sqlite import SQLiteEngine, build_sqlite
from ambitab_gym.verify.verifier import EngineOpener, Verdict, Verifier

__all__ = [
    "Engine",
    "EngineOpener",
    "Limits",
    "QueryError",
    "QueryResult",
    "SQLiteEngine",
    "Verdict",
    "Verifier",
    "build_sqlite",
    "normalize_rows",
    "normalize_value",
    "results_match",
]
