"""Errors of LLM calls; each carries a ``category`` that campaigns record on the episode.

* :class:`LLMError` - the base class (``category``, ``status``, ``attempts``).
* :class:`LLMTimeout` (``timeout``), :class:`LLMConnectionError` (``connection``),
  :class:`LLMHTTPError` (``http_<status>``), :class:`LLMContextOverflow` (``context_overflow``),
  :class:`LLMMalformedResponse` (``malformed_output``).
* :class:`LLMAuthError` (``auth``), :class:`LLMUnknownModel` (``unknown_model``): what the
  pre-flight check of a server (:meth:`ambitab_gym.llm.client.LLMClient.apreflight`) refuses.
* :class:`LLMCacheMiss` (``cache_miss``): a call the reply cache does not hold, made with the
  cache alone (``--llm-cache-only``).
"""

from __future__ import annotations

from ambitab_gym.errors import LLMServiceError

__all__ = [
    "LLMAuthError",
    "LLMCacheMiss",
    "LLMConnectionError",
    "LLMContextOverflow",
    "LLMError",
    "LLMHTTPError",
    "LLMMalformedResponse",
    "LLMTimeout",
    "LLMUnknownModel",
]


class LLMError(LLMServiceError):
    """A failed chat-completions call. ``category`` names the kind of failure.

    An :class:`ambitab_gym.errors.LLMServiceError` (and so an ``AmbiTabError`` and a
    ``RuntimeError``).

    Example:
        >>> LLMHTTPError("server error", status=503).category
        'http_503'
    """

    category = "llm_error"

    def __init__(
        self,
        message: str,
        *,
        category: str | None = None,
        status: int | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        if category is not None:
            self.category = category
        self.status = status
        self.attempts = attempts


class LLMTimeout(LLMError):
    """No complete answer within the per-attempt timeout (after all retries)."""

    category = "timeout"


class LLMConnectionError(LLMError):
    """The server could not be reached or dropped the connection (after all retries)."""

    category = "connection"


class LLMHTTPError(LLMError):
    """The server answered with an error status; ``category`` is ``http_<status>``."""

    def __init__(self, message: str, *, status: int, attempts: int = 1) -> None:
        super().__init__(message, category=f"http_{status}", status=status, attempts=attempts)


class LLMContextOverflow(LLMError):
    """The server rejected the prompt as longer than its context window (not retried)."""

    category = "context_overflow"


class LLMMalformedResponse(LLMError):
    """The server answered 200 with a body that is not a chat completion (not retried)."""

    category = "malformed_output"


class LLMAuthError(LLMError):
    """The server refused the API key (401/403), or wants one and none was sent."""

    category = "auth"


class LLMUnknownModel(LLMError):
    """The server's ``/v1/models`` does not list the requested model.

    Attributes:
        model: the requested name.
        served: the names the server lists.

    >>> LLMUnknownModel("no", model="m", served=("a",)).served
    ('a',)
    """

    category = "unknown_model"

    def __init__(self, message: str, *, model: str, served: tuple[str, ...]) -> None:
        super().__init__(message)
        self.model = model
        self.served = tuple(served)


class LLMCacheMiss(LLMError):
    """The reply cache holds no reply to the request, and the client may not ask the server
    (a :class:`~ambitab_gym.llm.cache.ReplyCache` opened with ``offline=True``)."""

    category = "cache_miss"

    def __init__(self, message: str) -> None:
        super().__init__(message, attempts=0)
