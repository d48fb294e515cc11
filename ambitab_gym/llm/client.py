"""An async client for OpenAI-compatible chat-completions servers (vLLM, llama.cpp, Ollama, ...).

* :class:`LLMClient` - ``await client.achat(messages)`` (and a blocking ``client.chat``): base URL,
  model, API key from the environment, per-attempt timeouts, retries with exponential backoff on
  429/5xx/timeouts/lost connections, a concurrency limit, sampling parameters and seed passed
  through, a switch that disables thinking, and token usage and latency recorded per call.
* :class:`ChatResult` - the text of one completion (thinking stripped) with its accounting.
* :class:`CallRecord` and :class:`UsageSummary` - per-call and aggregated accounting.
* :func:`response_format` - the ``response_format`` request field asking for JSON that follows
  a schema (structured output).
* :data:`DEFAULT_CONCURRENCY` - requests in flight when nobody says otherwise.
* :class:`LLMError` and its subclasses - every failure carries a ``category`` (``timeout``,
  ``connection``, ``http_500``, ``http_429``, ``malformed_output``, ``context_overflow``, ...)
  that evaluation campaigns record on the episode.

The client keeps one connection pool and one semaphore per event loop, so the same client serves
campaigns running on the caller's loop and blocking calls made from plain code (which run on a
private loop in a background thread owned by the client, see :meth:`LLMClient.run_sync`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from ambitab_gym import defaults
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.llm.errors import (
    LLMConnectionError,
    LLMContextOverflow,
    LLMError,
    LLMHTTPError,
    LLMMalformedResponse,
    LLMTimeout,
)
from ambitab_gym.llm.usage import CallRecord, UsageSummary
from ambitab_gym.textutil import strip_thinking

__all__ = [
    "DEFAULT_CONCURRENCY",
    "CallRecord",
    "ChatResult",
    "LLMClient",
    "LLMConnectionError",
    "LLMContextOverflow",
    "LLMError",
    "LLMHTTPError",
    "LLMMalformedResponse",
    "LLMTimeout",
    "UsageSummary",
    "response_format",
]

T = TypeVar("T")

#: Requests in flight when the command line does not say (``defaults.LLM_CONCURRENCY``).
DEFAULT_CONCURRENCY: int = defaults.LLM_CONCURRENCY


def response_format(name: str, schema: dict) -> dict:
    """An OpenAI ``response_format`` asking for JSON that follows ``schema``.

    >>> response_format("answer", {"type": "object"})["json_schema"]["name"]
    'answer'
    """
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


# Phrases servers use when a prompt does not fit the context window (OpenAI, vLLM, llama.cpp,
# Ollama, TGI).
_OVERFLOW = re.compile(
    r"context[_ ]length|maximum context|context (?:size|window)|exceeds? the (?:available )?"
    r"context|too many tokens|prompt is too long|input is too long|n_ctx",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ChatResult:
    """One completion.

    Attributes:
        text: the message content with any ``<think>...</think>`` block removed.
        raw: the message content as the server sent it.
        finish_reason: the server's finish reason.
        record: the call's accounting.
    """

    text: str
    raw: str
    finish_reason: str | None
    record: CallRecord


#: Connections per httpx pool. httpcore's pool scans every connection on each request (and
#: every idle one for each of them), so one pool of 64 connections costs milliseconds per request;
#: several small pools keep that near constant.
_SHARD_SIZE = 4


@dataclass
class _LoopState:
    """One event loop's connection pools (shards) and concurrency limit."""

    shards: list[httpx.AsyncClient]
    loads: list[int]
    semaphore: asyncio.Semaphore

    def pick(self) -> int:
        """The least busy shard (it always has a free connection under the semaphore)."""
        index = min(range(len(self.loads)), key=self.loads.__getitem__)
        self.loads[index] += 1
        return index


class _LoopThread:
    """A private event loop running in a daemon thread (for blocking calls)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="ambitab-llm-loop", daemon=True
        )
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a blocking LLM call was made from the client's own loop")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


def _normalize_base_url(base_url: str) -> str:
    base = base_url.strip().rstrip("/")
    if not base:
        raise ConfigurationError("the LLM base URL is empty; pass e.g. http://127.0.0.1:8000/v1")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(
            f"the LLM base URL {base_url!r} must look like http://HOST:PORT/v1"
        )
    if parts.path in ("", "/"):
        base += "/v1"  # servers mount the OpenAI routes under /v1
    return base


class LLMClient:
    """An OpenAI-compatible chat-completions client (async, with a blocking wrapper).

    Args:
        base_url: the server's OpenAI base URL, e.g. ``http://127.0.0.1:8000/v1`` (a bare
            ``http://HOST:PORT`` gets ``/v1`` appended).
        model: the model name the server expects.
        api_key: the API key; default: read from the ``api_key_env`` environment variable
            (no ``Authorization`` header when neither is set, as local servers need none).
        api_key_env: the environment variable holding the key.
        concurrency: requests in flight at once, per event loop.
        timeout_s: wall-clock limit of one HTTP attempt.
        max_retries: further attempts after a timeout, lost connection, 429 or 5xx.
        backoff_s: the first backoff; it doubles with every retry up to ``max_backoff_s``.
            A ``Retry-After`` header (in seconds) takes precedence when it is larger.
        max_backoff_s: the longest backoff.
        temperature, top_p, top_k, seed, max_tokens: sampling parameters passed through when set;
            a call may override each of them.
        disable_thinking: send ``chat_template_kwargs: {"enable_thinking": false}`` (Qwen3-style
            chat templates); ``<think>`` blocks are stripped from replies in any case.
        extra_body: further request fields sent with every call.
        structured_output: ask the LLM parts built on this client for JSON-schema constrained
            output (``response_format``); a part may override it.
        history: how many per-call records to keep in :attr:`calls` (totals are always kept).

    Example:
        >>> from ambitab_gym.testing.llm_server import ScriptedServer, ScriptRule
        >>> with ScriptedServer([ScriptRule(reply="Hello there.")]) as server:
        ...     with LLMClient(server.url, "scripted") as client:
        ...         result = client.chat([{"role": "user", "content": "Say hello"}])
        >>> result.text, result.record.prompt_tokens, result.record.completion_tokens
        ('Hello there.', 2, 2)
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 16,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
        disable_thinking: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        structured_output: bool = False,
        history: int = 10_000,
    ) -> None:
        if not model:
            raise ValueError("name the model the server serves (e.g. --model Qwen/Qwen3-8B)")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.base_url = _normalize_base_url(base_url)
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get(api_key_env) or None
        self.concurrency = int(concurrency)
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.params: dict[str, Any] = {
            "temperature": temperature,
            "top_p": top_p,
            "top_k": top_k,
            "seed": seed,
            "max_tokens": max_tokens,
        }
        self.disable_thinking = bool(disable_thinking)
        self.extra_body = dict(extra_body or {})
        self.structured_output = bool(structured_output)
        self.calls: deque[CallRecord] = deque(maxlen=history)
        self._usage = UsageSummary()
        self._lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )
        self._runner: _LoopThread | None = None

    @classmethod
    def from_options(
        cls,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 16,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        disable_thinking: bool = False,
        **options: Any,
    ) -> LLMClient:
        """The client the CLI builds from its options (see :func:`ambitab_gym.llm.client_from_args`).

        Returns:
            A new :class:`LLMClient`; further keyword options go to its constructor.
        """
        return cls(
            base_url,
            model,
            api_key_env=api_key_env,
            concurrency=concurrency,
            timeout_s=timeout_s,
            max_retries=max_retries,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            disable_thinking=disable_thinking,
            **options,
        )

    def __repr__(self) -> str:
        return f"LLMClient({self.base_url!r}, model={self.model!r}, concurrency={self.concurrency})"

    # -- accounting ------------------------------------------------------------------------------

    @property
    def usage(self) -> UsageSummary:
        """Totals over every call so far (a copy)."""
        with self._lock:
            copy = UsageSummary(**{**self._usage.__dict__, "errors": Counter(self._usage.errors)})
        return copy

    def _record(self, record: CallRecord) -> None:
        with self._lock:
            self.calls.append(record)
            self._usage.add(record)

    # -- event loops -----------------------------------------------------------------------------

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            n_shards = -(-self.concurrency // _SHARD_SIZE)
            size = -(-self.concurrency // n_shards)
            limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
            shards = [
                httpx.AsyncClient(
                    headers=headers,
                    timeout=httpx.Timeout(self.timeout_s),
                    limits=limits,
                    trust_env=False,
                )
                for _ in range(n_shards)
            ]
            state = _LoopState(shards, [0] * n_shards, asyncio.Semaphore(self.concurrency))
            self._loops[loop] = state
        return state

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of this client (or of a part using it) to completion, blocking.

        It runs on the client's private event loop in a background thread, so this works in
        plain code and also from inside a running event loop (which it blocks meanwhile).
        """
        with self._lock:
            if self._runner is None:
                self._runner = _LoopThread()
            runner = self._runner
        return runner.run(coro)

    async def aclose(self) -> None:
        """Close the connection pool of the current event loop."""
        loop = asyncio.get_running_loop()
        state = self._loops.pop(loop, None)
        if state is not None:
            for shard in state.shards:
                await shard.aclose()

    def close(self) -> None:
        """Close the private loop's pool and stop its thread (async pools: use :meth:`aclose`)."""
        with self._lock:
            runner, self._runner = self._runner, None
        if runner is not None:
            asyncio.run_coroutine_threadsafe(self.aclose(), runner.loop).result(timeout=10)
            runner.stop()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
        self.close()

    # -- calls -----------------------------------------------------------------------------------

    def _body(self, messages: Sequence[Mapping[str, str]], overrides: Mapping[str, Any]) -> dict:
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages]}
        chosen = {**self.params, **{k: v for k, v in overrides.items() if v is not None}}
        for key, value in chosen.items():
            if value is not None:
                body[key] = value
        body.update(self.extra_body)
        if self.disable_thinking:
            kwargs = dict(body.get("chat_template_kwargs") or {})
            kwargs["enable_thinking"] = False
            body["chat_template_kwargs"] = kwargs
        return body

    def _backoff(self, attempt: int, response: httpx.Response | None) -> float:
        delay = min(self.backoff_s * (2 ** (attempt - 1)), self.max_backoff_s)
        if response is not None:
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(response.headers.get("retry-after", 0)), 60.0))
        return delay

    async def achat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        tag: str = "",
        **params: Any,
    ) -> ChatResult:
        """One chat completion.

        Args:
            messages: OpenAI chat messages (``{"role": ..., "content": ...}``).
            tag: a label stored with the call's accounting.
            **params: request fields for this call (``temperature``, ``seed``, ``max_tokens``,
                ``stop``, ...); ``None`` values fall back to the client's defaults.

        Returns:
            The completion with its accounting.

        Raises:
            LLMError: a subclass whose ``category`` names the failure.
        """
        state = self._state()
        url = f"{self.base_url}/chat/completions"
        body = self._body(messages, params)
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        started = time.perf_counter()
        attempts = 0
        latency = 0.0
        while True:
            attempts += 1
            response: httpx.Response | None = None
            error: LLMError | None = None
            async with state.semaphore:
                sent = time.perf_counter()
                shard = state.pick()
                try:
                    response = await asyncio.wait_for(
                        state.shards[shard].post(url, content=payload), timeout=self.timeout_s
                    )
                except (asyncio.TimeoutError, httpx.TimeoutException):
                    error = LLMTimeout(f"no answer from {url} within {self.timeout_s:g} s")
                except httpx.TransportError as exc:
                    error = LLMConnectionError(f"{url}: {type(exc).__name__}: {exc}")
                finally:
                    state.loads[shard] -= 1
                latency = time.perf_counter() - sent
            if response is not None:
                status = response.status_code
                if status == 200:
                    try:
                        return self._success(response, tag, attempts, latency, started)
                    except LLMError as exc:
                        exc.attempts = attempts
                        self._fail(exc, tag, attempts, latency, started)
                        raise
                text = response.text[:500]
                if status in (400, 413, 422) and _OVERFLOW.search(text):
                    exc = LLMContextOverflow(
                        f"the prompt does not fit the model's context window: {text}",
                        status=status,
                        attempts=attempts,
                    )
                    self._fail(exc, tag, attempts, latency, started)
                    raise exc
                error = LLMHTTPError(
                    f"{url} answered {status}: {text}", status=status, attempts=attempts
                )
                if status != 429 and status < 500:
                    self._fail(error, tag, attempts, latency, started)
                    raise error
            assert error is not None
            if attempts > self.max_retries:
                error.attempts = attempts
                self._fail(error, tag, attempts, latency, started)
                raise error
            await asyncio.sleep(self._backoff(attempts, response))

    def _fail(self, error: LLMError, tag: str, attempts: int, latency: float, started: float):
        elapsed = time.perf_counter() - started
        self._record(CallRecord(tag, False, error.category, attempts, latency, elapsed))

    def _success(
        self, response: httpx.Response, tag: str, attempts: int, latency: float, started: float
    ) -> ChatResult:
        try:
            payload = response.json()
            choice = payload["choices"][0]
            message = choice.get("message") or {}
            content = message.get("content")
            if content is None:
                content = ""
            if not isinstance(content, str):
                raise TypeError("message content is not text")
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError) as exc:
            raise LLMMalformedResponse(
                f"the server's answer is not a chat completion ({type(exc).__name__}): "
                f"{response.text[:200]!r}"
            ) from None
        usage = payload.get("usage") or {}
        record = CallRecord(
            tag,
            True,
            None,
            attempts,
            latency,
            time.perf_counter() - started,
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
        )
        self._record(record)
        return ChatResult(strip_thinking(content), content, choice.get("finish_reason"), record)

    def chat(
        self, messages: Sequence[Mapping[str, str]], *, tag: str = "", **params: Any
    ) -> ChatResult:
        """Blocking :meth:`achat` (runs on the client's private event loop)."""
        return self.run_sync(self.achat(messages, tag=tag, **params))
