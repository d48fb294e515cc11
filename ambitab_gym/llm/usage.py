"""Accounting of LLM calls: token usage and latency per call, and totals.

* :class:`CallRecord` - one call (all its attempts).
* :class:`UsageSummary` - totals over many calls, with error counts by category.
* :class:`UsageMeter`, :func:`usage_meter`, :func:`meter_call` - the calls made inside a scope
  (one campaign episode), per role: the client reports every call to the meter of the running
  context, so episodes in flight at once on one client are counted apart.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CallRecord",
    "UsageMeter",
    "UsageSummary",
    "format_usage",
    "meter_call",
    "usage_meter",
]


@dataclass(frozen=True)
class CallRecord:
    """The accounting of one ``achat`` call (all its attempts).

    Attributes:
        tag: the caller's label (e.g. ``asker:checklist-ledger``, ``oracle:matcher``).
        ok: whether a completion came back.
        category: the error category when not ok.
        attempts: HTTP attempts made.
        latency_s: duration of the last HTTP attempt.
        elapsed_s: from the call to its end, including waiting for a slot and backoff.
        prompt_tokens, completion_tokens: as the server reported them (0 when it did not).
        role: the LLM role (``asker``, ``matcher``, ``responder``, ``solver``; "" when unnamed).
        timeouts: attempts that ran into the timeout.
        cached: the reply came from the reply cache (:mod:`ambitab_gym.llm.cache`): no request
            was sent (``attempts`` 0); the tokens are those the server reported when it made it.
    """

    tag: str
    ok: bool
    category: str | None
    attempts: int
    latency_s: float
    elapsed_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    role: str = ""
    timeouts: int = 0
    cached: bool = False


@dataclass
class UsageSummary:
    """Totals over all calls of a client (kept even when the per-call history is trimmed).

    Calls answered by the reply cache are counted apart: ``cache_hits`` and their tokens in
    ``cached_prompt_tokens``/``cached_completion_tokens``; ``calls``, ``ok``, ``attempts``, the
    tokens and the latency are the server's work only (a call the cache could not answer under
    ``--llm-cache-only`` is a call that failed with ``cache_miss``, with no attempt).

    Example:
        >>> usage = UsageSummary()
        >>> usage.add(CallRecord("t", True, None, 1, 0.5, 0.6, 10, 3))
        >>> usage.add(CallRecord("t", True, None, 0, 0.0, 0.0, 10, 3, cached=True))
        >>> usage.calls, usage.total_tokens, usage.mean_latency_s, usage.cache_hits
        (1, 13, 0.5, 1)
    """

    calls: int = 0
    ok: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    elapsed_s: float = 0.0
    errors: Counter = field(default_factory=Counter)
    timeouts: int = 0
    #: attempts beyond the first of each call
    retries: int = 0
    cache_hits: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def mean_latency_s(self) -> float:
        return self.latency_s / self.ok if self.ok else 0.0

    def add(self, record: CallRecord) -> None:
        """Count one call (a cache hit apart from the server's calls)."""
        if record.cached:
            self.cache_hits += 1
            self.cached_prompt_tokens += record.prompt_tokens
            self.cached_completion_tokens += record.completion_tokens
            return
        self.calls += 1
        self.attempts += record.attempts
        if record.attempts > 1:
            self.retries += record.attempts - 1
        self.elapsed_s += record.elapsed_s
        self.timeouts += record.timeouts
        if record.ok:
            self.ok += 1
            self.prompt_tokens += record.prompt_tokens
            self.completion_tokens += record.completion_tokens
            self.latency_s += record.latency_s
        else:
            self.errors[record.category or "llm_error"] += 1

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "calls": self.calls,
            "ok": self.ok,
            "attempts": self.attempts,
            "retries": self.retries,
            "timeouts": self.timeouts,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "mean_latency_s": self.mean_latency_s,
            "errors": dict(self.errors),
            "cache_hits": self.cache_hits,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "cached_completion_tokens": self.cached_completion_tokens,
        }


def format_usage(by_role: dict[str, UsageSummary]) -> str:
    """One line per campaign: calls, retries, timeouts, mean latency and tokens per role, and
    the calls the reply cache answered (with their tokens), if any.

    >>> usage = UsageSummary()
    >>> usage.add(CallRecord("t", True, None, 2, 0.5, 0.6, 10, 3, role="asker", timeouts=1))
    >>> format_usage({"asker": usage})
    'LLM calls: asker 1 (retries 1, timeouts 1, errors 0, mean latency 0.50 s, tokens 10+3)'
    >>> usage.add(CallRecord("t", True, None, 0, 0.0, 0.0, 7, 2, role="asker", cached=True))
    >>> format_usage({"asker": usage})  # doctest: +NORMALIZE_WHITESPACE
    'LLM calls: asker 1 (retries 1, timeouts 1, errors 0, mean latency 0.50 s, tokens 10+3;
    cache hits 1, tokens 7+2)'
    """
    parts = [
        f"{role} {u.calls} (retries {u.retries}, timeouts {u.timeouts}, "
        f"errors {sum(u.errors.values())}, mean latency {u.mean_latency_s:.2f} s, "
        f"tokens {u.prompt_tokens}+{u.completion_tokens}"
        + (
            f"; cache hits {u.cache_hits}, tokens "
            f"{u.cached_prompt_tokens}+{u.cached_completion_tokens})"
            if u.cache_hits
            else ")"
        )
        for role, u in by_role.items()
    ]
    return "LLM calls: " + ("; ".join(parts) if parts else "none")


@dataclass
class UsageMeter:
    """Calls and tokens per role inside one :func:`usage_meter` scope.

    Example:
        >>> with usage_meter() as meter:
        ...     meter_call(CallRecord("t", True, None, 1, 0.1, 0.1, 7, 2, role="asker"))
        >>> meter.to_dict(), meter.prompt_tokens, meter.completion_tokens
        ({'asker': {'calls': 1, 'prompt_tokens': 7, 'completion_tokens': 2}}, 7, 2)
    """

    by_role: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, record: CallRecord) -> None:
        """Count one call (its tokens when it succeeded). A reply from the reply cache counts
        as the call it replays, with the tokens the server reported then, so an episode's
        counts are the same whether its replies came from the server or the cache."""
        counts = self.by_role.setdefault(
            record.role or record.tag or "other",
            {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0},
        )
        counts["calls"] += 1
        if record.ok:
            counts["prompt_tokens"] += record.prompt_tokens
            counts["completion_tokens"] += record.completion_tokens

    @property
    def prompt_tokens(self) -> int:
        return sum(c["prompt_tokens"] for c in self.by_role.values())

    @property
    def completion_tokens(self) -> int:
        return sum(c["completion_tokens"] for c in self.by_role.values())

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{role: {"calls", "prompt_tokens", "completion_tokens"}}``, roles sorted."""
        return {role: dict(self.by_role[role]) for role in sorted(self.by_role)}


_METER: contextvars.ContextVar[UsageMeter | None] = contextvars.ContextVar(
    "ambitab_llm_usage_meter", default=None
)


@contextlib.contextmanager
def usage_meter() -> Iterator[UsageMeter]:
    """Count the LLM calls made inside (this task and tasks it starts) on a new meter."""
    meter = UsageMeter()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


def meter_call(record: CallRecord) -> None:
    """Count a call on the meter of the running context, if any (the client calls it)."""
    meter = _METER.get()
    if meter is not None:
        meter.add(record)
