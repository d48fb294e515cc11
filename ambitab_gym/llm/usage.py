"""Accounting of LLM calls: token usage and latency per call, and totals.

* :class:`CallRecord` - one call (all its attempts).
* :class:`UsageSummary` - totals over many calls, with error counts by category.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CallRecord", "UsageSummary", "format_usage"]


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


@dataclass
class UsageSummary:
    """Totals over all calls of a client (kept even when the per-call history is trimmed).

    Example:
        >>> usage = UsageSummary()
        >>> usage.add(CallRecord("t", True, None, 1, 0.5, 0.6, 10, 3))
        >>> usage.calls, usage.total_tokens, usage.mean_latency_s
        (1, 13, 0.5)
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

    @property
    def retries(self) -> int:
        """Attempts beyond the first of each call."""
        return self.attempts - self.calls

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def mean_latency_s(self) -> float:
        return self.latency_s / self.ok if self.ok else 0.0

    def add(self, record: CallRecord) -> None:
        """Count one call."""
        self.calls += 1
        self.attempts += record.attempts
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
        }


def format_usage(by_role: dict[str, UsageSummary]) -> str:
    """One line per campaign: calls, retries, timeouts, mean latency and tokens per role.

    >>> usage = UsageSummary()
    >>> usage.add(CallRecord("t", True, None, 2, 0.5, 0.6, 10, 3, role="asker", timeouts=1))
    >>> format_usage({"asker": usage})
    'LLM calls: asker 1 (retries 1, timeouts 1, errors 0, mean latency 0.50 s, tokens 10+3)'
    """
    parts = [
        f"{role} {u.calls} (retries {u.retries}, timeouts {u.timeouts}, "
        f"errors {sum(u.errors.values())}, mean latency {u.mean_latency_s:.2f} s, "
        f"tokens {u.prompt_tokens}+{u.completion_tokens})"
        for role, u in by_role.items()
    ]
    return "LLM calls: " + ("; ".join(parts) if parts else "none")
