"""The closed vocabularies of the package: verdict reasons, stop reasons, phases, conditions.

A leaf module (it imports only :mod:`ambitab_gym.errors`). Each vocabulary is a ``Literal``
type for annotations plus a tuple of its values for checks at the boundaries (where a value is
made or read back); :func:`check` raises a :class:`~ambitab_gym.errors.ConfigurationError`
naming the valid values.

* :data:`VerdictReason` / :data:`VERDICT_REASONS` - why a submission passed or failed
  (:class:`ambitab_gym.verify.Verdict`); :data:`QUERY_ERROR_CATEGORIES` are the ones an engine
  reports for a query (:class:`ambitab_gym.verify.QueryError`).
* :data:`StopReason` / :data:`STOP_REASONS` - why the asking phase ended
  (:attr:`ambitab_gym.trajectory.Trajectory.stop_reason`).
* :data:`Phase` / :data:`PHASES` - the env's phase (``ask``, ``sql``, ``done``; the
  observation's ``phase`` is its index).
* :data:`ReplyRead` / :data:`REPLY_READS` - how an agent's reply was read
  (:attr:`ambitab_gym.actions.ParsedAction.read`, ``info["reply_read"]``).
* :data:`EvaluationCondition` / :data:`EVALUATION_CONDITIONS` - the conditions of an evaluation
  campaign (paper C.1).

>>> check("budget", STOP_REASONS, "stop reason")
'budget'
>>> check("bored", STOP_REASONS, "stop reason")
Traceback (most recent call last):
...
ambitab_gym.errors.ConfigurationError: unknown stop reason 'bored'; use one of: asker, budget, skipped, fallback
"""

from __future__ import annotations

from typing import Literal, TypeVar, get_args

from ambitab_gym.errors import ConfigurationError

__all__ = [
    "EVALUATION_CONDITIONS",
    "PHASES",
    "QUERY_ERROR_CATEGORIES",
    "REPLY_READS",
    "STOP_REASONS",
    "VERDICT_REASONS",
    "EvaluationCondition",
    "Phase",
    "QueryErrorCategory",
    "ReplyRead",
    "StopReason",
    "VerdictReason",
    "check",
]

#: Why an engine refused or failed a query.
QueryErrorCategory = Literal[
    "timeout", "rejected", "syntax", "runtime", "too_many_rows", "too_large", "engine"
]
QUERY_ERROR_CATEGORIES: tuple[str, ...] = get_args(QueryErrorCategory)

#: Why a submission passed (``match``) or failed: the query error categories plus the
#: verifier's own (``mismatch``, ``no_sql``, ``reference_error``, ``unsupported``).
VerdictReason = Literal[
    "match",
    "mismatch",
    "no_sql",
    "timeout",
    "rejected",
    "syntax",
    "runtime",
    "too_many_rows",
    "too_large",
    "engine",
    "reference_error",
    "unsupported",
]
VERDICT_REASONS: tuple[str, ...] = get_args(VerdictReason)

#: Why the asking phase ended: the asker stopped, the budget ran out, an m = 0 record skipped
#: asking, or an unreadable asker reply was read as a stop (a fallback stop, paper C.3).
StopReason = Literal["asker", "budget", "skipped", "fallback"]
STOP_REASONS: tuple[str, ...] = get_args(StopReason)

#: The env's phase: asking questions, waiting for SQL (``agent`` mode), or over.
Phase = Literal["ask", "sql", "done"]
PHASES: tuple[str, ...] = get_args(Phase)

#: How an agent's reply (an action, or a model's raw reply) was read: a question, a stop, SQL
#: (SQL phase), or nothing recognisable (read as text anyway: a question or SQL that earns nothing).
ReplyRead = Literal["question", "stop", "sql", "unreadable"]
REPLY_READS: tuple[str, ...] = get_args(ReplyRead)

#: Conditions of an evaluation campaign: pi_none, the evaluated asker, pi_full (paper C.1).
EvaluationCondition = Literal["none", "asker", "full"]
EVALUATION_CONDITIONS: tuple[str, ...] = get_args(EvaluationCondition)

_T = TypeVar("_T", bound=str)


def check(value: _T, vocabulary: tuple[str, ...], what: str) -> _T:
    """``value`` when it belongs to ``vocabulary``; else a ConfigurationError naming the valid
    values (``what`` names the vocabulary in the message)."""
    if value not in vocabulary:
        raise ConfigurationError(f"unknown {what} {value!r}; use one of: {', '.join(vocabulary)}")
    return value
