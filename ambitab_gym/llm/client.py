"""An async client for OpenAI-compatible chat-completions servers (vLLM, llama.cpp, Ollama, ...).

* :class:`LLMClient` - ``await client.achat(messages)`` (and a blocking ``client.chat``): base URL,
  model, API key from the environment, per-attempt timeouts, retries with exponential backoff on
  429/5xx/timeouts/lost connections, a concurrency limit, sampling parameters and seed passed
  through, a switch that disables thinking, and token usage and latency recorded per call.
* :class:`ChatResult` - the text of one completion (thinking stripped) with its accounting.
* :class:`CallRecord` and :class:`UsageSummary` - per-call and aggregated accounting.
* :func:`response_format` - the ``response_format`` request field asking for JSON that follows
  a schema (structured output).
* :class:`ServerInfo` - what :meth:`LLMClient.apreflight` (the pre-flight check of a server:
  reachable, key accepted, model listed by ``/v1/models``; llama.cpp's slot count) found.
* :class:`LLMError` and its subclasses - every failure carries a ``category`` (``timeout``,
  ``connection``, ``http_500``, ``http_429``, ``malformed_output``, ``context_overflow``, ...)
  that evaluation campaigns record on the episode.

The client keeps one connection pool and one semaphore per event loop, so the same client serves
campaigns running on the caller's loop and blocking calls made from plain code (which run on a
private loop in a background thread owned by the client, see :meth:`LLMClient.run_sync`).

Completions and the pre-flight check go over aiohttp (about a fifth of httpx's CPU time per request, measured in
``benchmarks/llm_throughput.py``): one keep-alive pool per loop, sized to the concurrency, and no
TLS context for plain ``http://`` servers (aiohttp builds its default contexts once per process,
when it is first imported, on the first call).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import logging
import os
import re
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ambitab_gym import defaults
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.llm.cache import CachedReply, ReplyCache, request_key
from ambitab_gym.llm.errors import (
    LLMAuthError,
    LLMCacheMiss,
    LLMConnectionError,
    LLMContextOverflow,
    LLMError,
    LLMHTTPError,
    LLMMalformedResponse,
    LLMTimeout,
    LLMUnknownModel,
)
from ambitab_gym.llm.sampling import (
    EpisodeKey,
    Sampling,
    SamplingTable,
    current_episode,
    derive_seed,
    episode_scope,
)
from ambitab_gym.llm.usage import CallRecord, UsageSummary, meter_call
from ambitab_gym.textutil import strip_thinking

__all__ = [
    "CallRecord",
    "ChatResult",
    "LLMClient",
    "LLMConnectionError",
    "LLMContextOverflow",
    "LLMError",
    "LLMHTTPError",
    "LLMMalformedResponse",
    "LLMTimeout",
    "ServerInfo",
    "UsageSummary",
    "response_format",
]

T = TypeVar("T")

logger = logging.getLogger("ambitab_gym.llm")


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
        parsed: what the caller's ``parse`` made of ``text`` (None without one).
        seed: the seed sent with the attempt that answered (None when none was sent).
    """

    text: str
    raw: str
    finish_reason: str | None
    record: CallRecord
    parsed: Any = None
    seed: int | None = None


@dataclass(frozen=True)
class ServerInfo:
    """What the pre-flight check of a server found (:meth:`LLMClient.apreflight`).

    Attributes:
        base_url: the server's OpenAI base URL.
        model: the model the client asks for.
        models: the names ``GET /v1/models`` lists; None when the server has no such route.
        slots: parallel slots the server reports (llama.cpp's ``/props`` ``total_slots``), else
            None (vLLM, Ollama and hosted APIs do not say).
        warnings: what the user should know but need not stop for.
    """

    base_url: str
    model: str
    models: tuple[str, ...] | None = None
    slots: int | None = None
    warnings: tuple[str, ...] = ()


def _served_match(model: str, served: Sequence[str]) -> bool:
    """Whether ``model`` names one of the served models (Ollama adds ``:latest`` to bare names)."""
    return model in served or f"{model}:latest" in served


def _read_models(response: _Reply) -> tuple[tuple[str, ...] | None, set[str]]:
    """The model ids of a ``/models`` answer and their ``owned_by`` values (None: unreadable)."""
    try:
        data = response.json()["data"]
        ids = tuple(str(item["id"]) for item in data)
        owners = {str(item.get("owned_by")) for item in data if isinstance(item, dict)}
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        return None, set()
    return ids, owners


def _llamacpp_slots(response: _Reply | None) -> int | None:
    """llama.cpp's parallel slots from its ``GET /props`` answer (``total_slots``), or None."""
    try:
        ok = response is not None and response.status_code == 200
        slots = response.json().get("total_slots") if ok else None
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return None
    return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None


class _Deadlines:
    """The wall-clock limit of every request on one event loop, kept by one timer.

    A client gives each of its requests the same limit, so their deadlines come in the order
    they start: the oldest pending one expires first. One timer is armed for it; when it
    fires, the requests past their deadline are cancelled (as aiohttp's own total timeout
    cancels them) and it is armed again for the oldest one left. A request costs a dict entry
    and its removal, not a timer handle, a timeout context and a heap operation of its own.

    >>> async def demo():
    ...     loop = asyncio.get_running_loop()
    ...     deadlines = _Deadlines(loop, 0.05)
    ...     token = deadlines.start(asyncio.current_task())
    ...     try:
    ...         await asyncio.sleep(1)
    ...     except asyncio.CancelledError:
    ...         return deadlines.end(token)
    >>> asyncio.run(demo())
    True
    """

    __slots__ = ("_next", "expired", "limit", "loop", "pending", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: float) -> None:
        self.loop = loop
        self.limit = limit
        self.pending: dict[int, tuple[float, asyncio.Task]] = {}  # oldest first
        self.expired: set[int] = set()
        self.timer: asyncio.TimerHandle | None = None
        self._next = 0

    def start(self, task: asyncio.Task) -> int:
        """A request of ``task`` starts now: its token for :meth:`end`."""
        token = self._next
        self._next = token + 1
        deadline = self.loop.time() + self.limit
        self.pending[token] = (deadline, task)
        if self.timer is None:
            self.timer = self.loop.call_at(deadline, self._expire)
        return token

    def end(self, token: int) -> bool:
        """The request is over: whether its deadline passed (its task was cancelled for it)."""
        if self.pending.pop(token, None) is not None:
            return False
        if token in self.expired:
            self.expired.discard(token)
            return True
        return False

    def _expire(self) -> None:
        self.timer = None
        now = self.loop.time()
        pending = self.pending
        while pending:
            token = next(iter(pending))
            deadline, task = pending[token]
            if deadline > now:
                self.timer = self.loop.call_at(deadline, self._expire)
                return
            del pending[token]
            self.expired.add(token)
            task.cancel()


@dataclass
class _LoopState:
    """One event loop's connection pool (an aiohttp session), concurrency limit, request
    deadlines and the requests in flight on it."""

    session: Any  # aiohttp.ClientSession (aiohttp is imported on the first call)
    semaphore: asyncio.Semaphore
    transport_errors: tuple[type[BaseException], ...]  # a lost or broken connection
    deadlines: _Deadlines
    chat_url: Any = None  # the completions URL as a yarl.URL (parsed once, not per request)
    chat_text: str = ""  # the same URL as text (for messages)
    base_url: str = ""  # the base URL both were built from
    in_flight: int = 0


def _drop_session(session: Any) -> None:
    """Let go of a loop's session once the loop itself is gone (collected: closed or abandoned).

    Nothing can await ``session.close()`` without the loop, and its sockets went with it, so the
    session is detached and its pool marked closed (aiohttp's synchronous half of ``close``);
    otherwise aiohttp reports both as leaked at every campaign's end.
    """
    connector = session.connector
    session.detach()
    if connector is not None and not connector.closed:
        with contextlib.suppress(Exception):
            connector._close()  # noqa: SLF001 - the loop-free part of BaseConnector.close


try:  # optional: orjson encodes and decodes request and reply bodies several times faster
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None


def _encode(body: dict[str, Any]) -> bytes:
    """A request body as UTF-8 JSON (orjson when installed; the standard library otherwise or
    for values orjson does not take, such as integers beyond 64 bits)."""
    if orjson is not None:
        with contextlib.suppress(TypeError):
            return orjson.dumps(body)
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def _decode(content: bytes) -> Any:
    """A reply body's JSON (errors are ``json.JSONDecodeError`` or ``UnicodeDecodeError``)."""
    if orjson is not None:
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            pass  # the standard library's error and message
    return json.loads(content)


class _Reply:
    """An HTTP answer, read in full: status, body and the ``Retry-After`` header."""

    __slots__ = ("content", "retry_after", "status_code")

    def __init__(self, status_code: int, content: bytes, retry_after: str | None = None) -> None:
        self.status_code = status_code
        self.content = content
        self.retry_after = retry_after

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return _decode(self.content)


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


async def _in_episode(episode: EpisodeKey, coro: Coroutine[Any, Any, T]) -> T:
    with episode_scope(episode):
        return await coro


def _jsonable(value: Any) -> Any:
    """JSON for the call log: dataclasses as dicts, sets as sorted lists, the rest as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


# the request fields a call's log line leaves out of its "sampling"
_NOT_SAMPLING = frozenset({"model", "messages", "response_format"})


class _Call:
    """What one ``achat`` call knows for its log line (``body``: the request of its latest
    attempt)."""

    __slots__ = ("body", "episode", "key", "messages", "role", "sampling", "seeds", "tag",
                 "timeouts", "turn")  # fmt: skip

    def __init__(
        self,
        tag: str,
        role: str | None,
        turn: int,
        episode: EpisodeKey | None,
        messages: Sequence[Mapping[str, str]],
    ) -> None:
        self.tag = tag
        self.role = role
        self.turn = turn
        self.episode = episode
        self.messages = messages
        self.sampling: Sampling | None = None
        self.body: dict[str, Any] = {}
        self.seeds: list[Any] = []
        self.timeouts = 0
        self.key: str | None = None  # the reply cache's key of the call (None: no cache)

    def entry(
        self,
        record: CallRecord,
        raw: str | None,
        finish_reason: str | None,
        parsed: Any,
        error: str | None,
    ) -> dict[str, Any]:
        return {
            "role": self.role or self.tag,
            "tag": self.tag,
            "episode": None if self.episode is None else self.episode.to_dict(),
            "turn": self.turn,
            "messages": [dict(m) for m in self.messages],
            "sampling": {k: v for k, v in self.body.items() if k not in _NOT_SAMPLING},
            "structured": "response_format" in self.body,
            "seeds": list(self.seeds),
            "raw": raw,
            "finish_reason": finish_reason,
            "parsed": parsed,
            "attempts": record.attempts,
            "retries": max(record.attempts - 1, 0),
            "timeouts": record.timeouts,
            "cached": record.cached,
            "latency_s": round(record.latency_s, 6),
            "elapsed_s": round(record.elapsed_s, 6),
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": record.completion_tokens,
            "error": error,
        }


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
            output (``response_format``; default on); a part may override it. A server that
            rejects ``response_format`` (a 400/422 to the first such call) is remembered in
            :attr:`structured_supported`, logged once, and asked again in plain JSON.
        history: how many per-call records to keep in :attr:`calls` (totals are always kept).
        sampling: per-role sampling (:class:`~ambitab_gym.llm.sampling.SamplingTable`, or
            ``{role: Sampling | {key: value}}`` laid over the defaults and over the
            ``temperature``/``top_p``/``top_k``/``max_tokens``/``seed`` given here, which apply
            to every role). Calls made with ``role=`` use it; see :attr:`sampling`.
        log_path: append one JSON line per call to this file (request messages, sampling, raw
            reply, parsed result, attempts, latency, tokens, error). It holds the oracle's
            privileged prompts: analyst data, never shown to the agent.
        cache: a reply cache (:class:`~ambitab_gym.llm.cache.ReplyCache`, or the path of its
            file): a call whose request it holds returns the stored reply without a request
            (``CallRecord.cached``, ``"cached": true`` in the log), and every reply the server
            sends is stored. The key is the first attempt's request body as the caller asked
            for it (model, messages, sampling, seed, ...), never the URL.

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
        concurrency: int = defaults.LLM_CLIENT_CONCURRENCY,
        timeout_s: float = defaults.LLM_TIMEOUT_S,
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
        structured_output: bool = True,
        history: int = 10_000,
        sampling: SamplingTable | Mapping[str, Sampling | Mapping[str, Any]] | None = None,
        log_path: str | Path | None = None,
        cache: ReplyCache | str | Path | None = None,
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
        self.api_key_env = api_key_env
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
        #: whether the server takes ``response_format``: None until the first call that sends it
        self.structured_supported: bool | None = None
        self.calls: deque[CallRecord] = deque(maxlen=history)
        self._usage = UsageSummary()
        self._usage_by_role: dict[str, UsageSummary] = {}
        if isinstance(sampling, SamplingTable):
            self.sampling: SamplingTable = sampling
        else:
            self.sampling = SamplingTable.build(
                roles=sampling,
                temperature=temperature,
                top_p=top_p,
                top_k=top_k,
                max_tokens=max_tokens,
                seed=seed,
            )
        self.log_path = Path(log_path) if log_path is not None else None
        #: the reply cache (None: every call goes to the server)
        self.cache: ReplyCache | None = (
            cache if cache is None or isinstance(cache, ReplyCache) else ReplyCache(cache)
        )
        self._log_lock = threading.Lock()
        self._lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )
        self._hot: tuple[weakref.ref, _LoopState] | None = None
        self._runner: _LoopThread | None = None
        #: the warning given once when requests queue past half the timeout (None: not yet)
        self.queue_hint: str | None = None
        #: the parallel slots the server reported to :meth:`apreflight` (None: unknown)
        self.server_slots: int | None = None

    @classmethod
    def from_options(
        cls,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = defaults.LLM_CLIENT_CONCURRENCY,
        timeout_s: float = defaults.LLM_TIMEOUT_S,
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

    # -- pickling (Ray workers, subprocesses) ----------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """The settings only: no connection pool, event loop, thread or lock is pickled; the
        copy opens its own connections on its first call, and counts its own calls and usage
        (accounting is per process)."""
        state = dict(self.__dict__)
        for name in ("_lock", "_log_lock", "_loops", "_hot", "_runner", "calls", "_usage"):
            state.pop(name, None)
        state["_usage_by_role"] = {}
        state["_history"] = self.calls.maxlen
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        history = state.pop("_history", None)
        self.__dict__.update(state)
        self.calls = deque(maxlen=history)
        self._usage = UsageSummary()
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._loops = weakref.WeakKeyDictionary()
        self._hot = None
        self._runner = None

    def on_server(self, base_url: str) -> LLMClient:
        """A copy of this client (same model and settings) that talks to another server
        serving the same model: a replica, e.g. one per Ray worker.

        >>> client = LLMClient("http://10.0.0.1:8000/v1", "m", temperature=0.0)
        >>> replica = client.on_server("http://10.0.0.2:8000")
        >>> replica.base_url, replica.model, replica.params == client.params
        ('http://10.0.0.2:8000/v1', 'm', True)
        """
        replica = copy.deepcopy(self)  # settings only (__getstate__): no pool or thread
        replica.base_url = _normalize_base_url(base_url)
        return replica

    def absorb_usage(self, by_role: Mapping[str, UsageSummary]) -> None:
        """Add calls that copies of this client made elsewhere (Ray workers report theirs per
        work unit) to this client's totals, per role.

        >>> client = LLMClient("http://10.0.0.1:8000/v1", "m")
        >>> client.absorb_usage({"asker": UsageSummary(calls=2, ok=2, prompt_tokens=30)})
        >>> client.usage.calls, client.usage_by_role["asker"].prompt_tokens
        (2, 30)
        """
        with self._lock:
            for role, usage in by_role.items():
                for total in (self._usage, self._usage_by_role.setdefault(role, UsageSummary())):
                    for name in (f.name for f in dataclasses.fields(usage)):
                        setattr(total, name, getattr(total, name) + getattr(usage, name))

    # -- accounting ------------------------------------------------------------------------------

    @property
    def usage(self) -> UsageSummary:
        """Totals over every call so far (a copy)."""
        with self._lock:
            copy = UsageSummary(**{**self._usage.__dict__, "errors": Counter(self._usage.errors)})
        return copy

    @property
    def usage_by_role(self) -> dict[str, UsageSummary]:
        """Totals per role (the ``role`` of each call, else its tag), copies."""
        with self._lock:
            return {
                role: UsageSummary(**{**usage.__dict__, "errors": Counter(usage.errors)})
                for role, usage in sorted(self._usage_by_role.items())
            }

    def _record(self, record: CallRecord) -> None:
        meter_call(record)  # the episode's own count (campaigns store it per episode)
        with self._lock:
            self.calls.append(record)
            self._usage.add(record)
            key = record.role or record.tag or "other"
            usage = self._usage_by_role.get(key)
            if usage is None:  # not setdefault: no UsageSummary built per call
                usage = self._usage_by_role[key] = UsageSummary()
            usage.add(record)

    def _logging(self) -> bool:
        """Whether calls are logged (a log file, or DEBUG on the ``ambitab_gym.llm`` logger):
        a call's log entry is only built then."""
        return self.log_path is not None or logger.isEnabledFor(logging.DEBUG)

    def _log_call(self, entry: dict[str, Any]) -> None:
        """Write one call to the log file (JSONL) and to the ``ambitab_gym.llm`` logger."""
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "LLM call %s turn %s attempts %d latency %.3fs tokens %d+%d error %s\n"
                "messages: %s\nreply: %s\nparsed: %s",
                entry["role"],
                entry["turn"],
                entry["attempts"],
                entry["latency_s"],
                entry["prompt_tokens"],
                entry["completion_tokens"],
                entry["error"],
                json.dumps(entry["messages"], ensure_ascii=False),
                entry["raw"],
                entry["parsed"],
            )
        if self.log_path is None:
            return
        line = json.dumps(entry, ensure_ascii=False, default=_jsonable) + "\n"
        with self._log_lock, self.log_path.open("a", encoding="utf-8") as handle:
            handle.write(line)

    # -- event loops -----------------------------------------------------------------------------

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        hot = self._hot  # the loop of the previous call: no weak-dictionary lookup per request
        if hot is not None and hot[0]() is loop:
            return hot[1]
        state = self._loops.get(loop)
        if state is None:
            import aiohttp  # noqa: PLC0415 - on the first call: its import builds TLS contexts

            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            # one pool of `concurrency` keep-alive connections; the semaphore keeps a free one
            # for every request, so a request never waits for or scans the pool
            connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=0)
            # no timeout of aiohttp's per request: every attempt's limit is kept by the loop's
            # _Deadlines (one timer for all of them); the pre-flight's GETs pass their own
            session = aiohttp.ClientSession(
                connector=connector,
                headers=headers,
                timeout=aiohttp.ClientTimeout(),
                trust_env=False,
            )
            state = _LoopState(
                session,
                asyncio.Semaphore(self.concurrency),
                (aiohttp.ClientError, OSError),
                _Deadlines(loop, self.timeout_s),
            )
            self._loops[loop] = state
            weakref.finalize(loop, _drop_session, session)  # a loop closed without aclose()
        self._hot = (weakref.ref(loop), state)
        return state

    async def _get(self, url: str, timeout: float) -> _Reply:
        """``GET url`` over this loop's pool (the pre-flight's requests), read in full."""
        import aiohttp  # noqa: PLC0415 - loaded with the pool in _state

        session = self._state().session
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as reply:
            return _Reply(reply.status, await reply.read())

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of this client (or of a part using it) to completion, blocking.

        It runs on the client's private event loop in a background thread, so this works in
        plain code and also from inside a running event loop (which it blocks meanwhile).
        The caller's episode (:func:`~ambitab_gym.llm.sampling.episode_scope`) goes with it.
        """
        with self._lock:
            if self._runner is None:
                self._runner = _LoopThread()
            runner = self._runner
        episode = current_episode()
        if episode is not None:
            coro = _in_episode(episode, coro)
        return runner.run(coro)

    async def aclose(self) -> None:
        """Close the connection pool of the current event loop."""
        loop = asyncio.get_running_loop()
        state = self._loops.pop(loop, None)
        self._hot = None
        if state is not None:
            await state.session.close()

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

    # -- pre-flight ------------------------------------------------------------------------------

    async def apreflight(self) -> ServerInfo:
        """Check the server before a campaign: reachable, key accepted, model served.

        Sends ``GET {base_url}/models`` (with the API key, if any) and ``GET /props`` at the
        server's root (llama.cpp reports its parallel slots there); no chat completion is made.
        A server without ``/models`` (404, 405, 501) only earns a warning, and so does a model
        name llama.cpp does not list (llama.cpp serves its one model under any name).

        Returns:
            What was found (:class:`ServerInfo`), with the warnings to show.

        Raises:
            LLMConnectionError: the server cannot be reached (the message names the URL).
            LLMTimeout: it accepted the connection but did not answer in time.
            LLMAuthError: it answered 401/403 (the message names the key's variable).
            LLMUnknownModel: ``/models`` does not list the model (the message lists those served).
            LLMHTTPError: ``/models`` answered another error status.
        """
        timeout = min(self.timeout_s, 30.0)
        url = f"{self.base_url}/models"
        notes: list[str] = []
        models: tuple[str, ...] | None = None
        try:
            response = await self._get(url, timeout)
        except (asyncio.TimeoutError, TimeoutError):
            raise LLMTimeout(
                f"the LLM server at {self.base_url} did not answer GET {url} within "
                f"{timeout:g} s; is it overloaded or still loading the model?"
            ) from None
        except self._state().transport_errors as exc:
            raise LLMConnectionError(
                f"cannot reach the LLM server at {self.base_url} ({type(exc).__name__}: "
                f"{exc}); start the server, or fix --llm-url (default $OPENAI_BASE_URL)"
            ) from None
        status = response.status_code
        if status in (401, 403):
            raise LLMAuthError(self._auth_message(status, response.text[:200]), status=status)
        if status in (404, 405, 501):
            notes.append(
                f"{self.base_url} has no /models route ({status}): the model name "
                f"{self.model!r} was not checked"
            )
        elif status != 200:
            raise LLMHTTPError(
                f"the LLM server at {self.base_url} answered {status} to GET {url}: "
                f"{response.text[:200]}",
                status=status,
            )
        else:
            models, owners = _read_models(response)
            if models is None:
                notes.append(f"{url} sent no model list: the model name was not checked")
            elif not _served_match(self.model, models):
                listed = ", ".join(models) or "none"
                if "llamacpp" in owners:
                    notes.append(
                        f"llama.cpp at {self.base_url} serves {listed}; it answers requests "
                        f"for {self.model!r} with that model"
                    )
                else:
                    raise LLMUnknownModel(
                        f"the LLM server at {self.base_url} does not serve the model "
                        f"{self.model!r}; it serves: {listed}. Pass one of them with --model "
                        "(or $AMBITAB_LLM_MODEL)",
                        model=self.model,
                        served=models,
                    )
        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        try:
            props = await self._get(f"{root}/props", timeout)
        except (asyncio.TimeoutError, TimeoutError, *self._state().transport_errors):
            props = None
        slots = _llamacpp_slots(props)
        self.server_slots = slots
        return ServerInfo(self.base_url, self.model, models, slots, tuple(notes))

    def preflight(self) -> ServerInfo:
        """Blocking :meth:`apreflight`."""
        return self.run_sync(self.apreflight())

    def _auth_message(self, status: int, text: str) -> str:
        variable = self.api_key_env
        if self.api_key:
            return (
                f"the LLM server at {self.base_url} refused the API key ({status}: {text}); "
                f"set ${variable} to a key it accepts, or name the variable holding one with "
                "--api-key-env"
            )
        return (
            f"the LLM server at {self.base_url} wants an API key ({status}) and none was sent: "
            f"${variable} is not set; set it, or name the variable holding the key with "
            "--api-key-env"
        )

    def _queue_hint(self, latency: float, in_flight: int) -> None:
        """Warn once when a request took over half the timeout: the server is queueing them."""
        with self._lock:
            if self.queue_hint is not None:
                return
            suggested = max(1, int(in_flight * self.timeout_s / 4 / max(latency, 1e-9)))
            slots = self.server_slots
            if in_flight <= 1 or suggested >= in_flight or (slots and in_flight <= slots):
                hint = (
                    f"a request to {self.base_url} took {latency:.1f} s of the "
                    f"{self.timeout_s:g} s timeout; the model is slow: raise --llm-timeout"
                )
            else:
                hint = (
                    f"a request to {self.base_url} took {latency:.1f} s of the "
                    f"{self.timeout_s:g} s timeout with {in_flight} requests in flight: the "
                    f"server is queueing them; try --concurrency {suggested} (or a larger "
                    "--llm-timeout)"
                )
            self.queue_hint = hint
        logger.warning("%s", hint)

    # -- calls -----------------------------------------------------------------------------------

    def _body(self, messages: Sequence[Mapping[str, str]], overrides: Mapping[str, Any]) -> dict:
        # the encoder takes dicts as they are (no copy); other mappings become dicts
        listed = [m if type(m) is dict else dict(m) for m in messages]
        body: dict[str, Any] = {"model": self.model, "messages": listed}
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

    def _backoff(self, attempt: int, response: _Reply | None) -> float:
        delay = min(self.backoff_s * (2 ** (attempt - 1)), self.max_backoff_s)
        if response is not None and response.retry_after is not None:
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(response.retry_after), 60.0))
        return delay

    def _structured_refused(self, status: int, text: str) -> None:
        """Remember that the server rejects ``response_format`` and say so once."""
        with self._lock:
            first = self.structured_supported is not False
            self.structured_supported = False
        if first:
            logger.warning(
                "%s rejected response_format (HTTP %d: %s); using plain JSON replies for this "
                "client (turn structured output off with --no-structured-output)",
                self.base_url,
                status,
                " ".join(text.split())[:160],
            )

    async def achat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        tag: str = "",
        role: str | None = None,
        turn: int = 0,
        sampling: Sampling | None = None,
        parse: Callable[[str], Any] | None = None,
        **params: Any,
    ) -> ChatResult:
        """One chat completion.

        Args:
            messages: OpenAI chat messages (``{"role": ..., "content": ...}``).
            tag: a label stored with the call's accounting.
            role: ``asker``, ``matcher``, ``responder`` or ``solver``: the call samples with
                ``sampling`` (default: the role's in :attr:`sampling`) and a seed derived for
                each attempt from the episode (:func:`~ambitab_gym.llm.sampling.current_episode`),
                the role, ``turn`` and the attempt number
                (:func:`~ambitab_gym.llm.sampling.derive_seed`), so a retry samples afresh.
            turn: the questions already asked in the episode (part of the derived seed).
            sampling: this call's sampling (with ``role``).
            parse: reads the reply text; its result is :attr:`ChatResult.parsed` and logged.
            **params: request fields for this call (``temperature``, ``seed``, ``max_tokens``,
                ``stop``, ``response_format``, ...); ``None`` values fall back to the client's
                defaults; set ones win over ``sampling``.

        Returns:
            The completion with its accounting.

        Raises:
            LLMError: a subclass whose ``category`` names the failure.
        """
        state = self._state()
        if state.base_url is not self.base_url:  # parsed once per loop and base URL
            import yarl  # noqa: PLC0415 - aiohttp's URL type (loaded with aiohttp in _state)

            state.base_url = self.base_url
            state.chat_text = f"{self.base_url}/chat/completions"
            state.chat_url = yarl.URL(state.chat_text)
        chat_url, url = state.chat_url, state.chat_text
        asked = params  # as the caller asked: the reply cache's key
        if params.get("response_format") is not None and self.structured_supported is False:
            params = {**params, "response_format": None}  # the server refused it: plain JSON
        call = _Call(tag, role, turn, current_episode(), messages)
        if role is not None:
            call.sampling = sampling or self.sampling[role]
        else:
            call.body = self._body(messages, params)
            payload = _encode(call.body)
        started = time.perf_counter()
        if self.cache is not None:
            replayed = self._from_cache(call, messages, asked, started, parse)
            if replayed is not None:
                return replayed
        attempts = 0
        latency = 0.0
        while True:
            attempts += 1
            if call.sampling is not None:
                assert role is not None
                seed = derive_seed(call.episode, role, turn, attempts, call.sampling.seed)
                call.body = self._body(messages, {**call.sampling.request_fields(seed), **params})
                payload = _encode(call.body)
            call.seeds.append(call.body.get("seed"))
            response: _Reply | None = None
            error: LLMError | None = None
            async with state.semaphore:
                sent = time.perf_counter()
                state.in_flight += 1
                in_flight = state.in_flight
                task = asyncio.current_task()
                assert task is not None
                cancelling = task.cancelling()
                deadlines = state.deadlines
                token = deadlines.start(task)
                expired = False
                try:
                    try:
                        async with state.session.post(chat_url, data=payload) as reply:
                            response = _Reply(
                                reply.status, await reply.read(), reply.headers.get("Retry-After")
                            )
                    finally:
                        # past its deadline the task was cancelled for it: undo that one
                        # cancellation (as asyncio.timeout does); another one still propagates
                        expired = deadlines.end(token) and task.uncancel() <= cancelling
                except asyncio.CancelledError:
                    if not expired:
                        raise
                except (asyncio.TimeoutError, TimeoutError):  # aiohttp's derive from these
                    expired = True
                except state.transport_errors as exc:
                    if not expired:
                        error = LLMConnectionError(f"{url}: {type(exc).__name__}: {exc}")
                finally:
                    in_flight = max(in_flight, state.in_flight)  # at the start or the end
                    state.in_flight -= 1
                if expired:
                    response = None
                    error = LLMTimeout(f"no answer from {url} within {self.timeout_s:g} s")
                    call.timeouts += 1
                latency = time.perf_counter() - sent
            if latency > self.timeout_s / 2 and self.queue_hint is None:
                self._queue_hint(latency, in_flight)
            if response is not None:
                status = response.status_code
                if status == 200:
                    if params.get("response_format") is not None:
                        self.structured_supported = True
                    try:
                        return self._success(response, call, attempts, latency, started, parse)
                    except LLMError as exc:
                        exc.attempts = attempts
                        self._fail(exc, call, attempts, latency, started)
                        raise
                text = response.text[:500]
                if status in (400, 413, 422) and _OVERFLOW.search(text):
                    exc = LLMContextOverflow(
                        f"the prompt does not fit the model's context window: {text}",
                        status=status,
                        attempts=attempts,
                    )
                    self._fail(exc, call, attempts, latency, started)
                    raise exc
                error = LLMHTTPError(
                    f"{url} answered {status}: {text}", status=status, attempts=attempts
                )
                if (
                    status in (400, 422)
                    and params.get("response_format") is not None
                    and self.structured_supported is not True
                ):
                    self._structured_refused(status, text)
                    params = {**params, "response_format": None}
                    if call.sampling is None:
                        call.body = self._body(messages, params)
                        payload = _encode(call.body)
                    attempts -= 1  # the plain-JSON request is a first attempt of its own
                    continue
                if status != 429 and status < 500:
                    self._fail(error, call, attempts, latency, started)
                    raise error
            assert error is not None
            if attempts > self.max_retries:
                error.attempts = attempts
                self._fail(error, call, attempts, latency, started)
                raise error
            logger.info(
                "LLM %s: attempt %d failed (%s), retrying", role or tag, attempts, error.category
            )
            await asyncio.sleep(self._backoff(attempts, response))

    def _fail(self, error: LLMError, call: _Call, attempts: int, latency: float, started: float):
        elapsed = time.perf_counter() - started
        record = CallRecord(
            call.tag,
            False,
            error.category,
            attempts,
            latency,
            elapsed,
            role=call.role or "",
            timeouts=call.timeouts,
        )
        self._record(record)
        if self._logging():
            self._log_call(call.entry(record, None, None, None, f"{error.category}: {error}"))

    @staticmethod
    def _read(response: _Reply) -> tuple[str, str | None, Mapping[str, Any]]:
        """The content, finish reason and usage of a chat completion's body."""
        try:
            payload = response.json()
            choice = payload["choices"][0]
            message = choice.get("message") or {}
            content = message.get("content")
            if content is None:
                content = ""
            if not isinstance(content, str):
                raise TypeError("message content is not text")
            usage = payload.get("usage") or {}
            finish = choice.get("finish_reason")
        except (
            json.JSONDecodeError,
            UnicodeDecodeError,
            KeyError,
            IndexError,
            TypeError,
            AttributeError,
        ) as exc:
            raise LLMMalformedResponse(
                f"the server's answer is not a chat completion ({type(exc).__name__}): "
                f"{response.text[:200]!r}"
            ) from None
        return content, finish, usage

    def _success(
        self,
        response: _Reply,
        call: _Call,
        attempts: int,
        latency: float,
        started: float,
        parse: Callable[[str], Any] | None = None,
    ) -> ChatResult:
        content, finish, usage = self._read(response)
        if call.key is not None:
            assert self.cache is not None
            earlier = self.cache.put(
                call.key,
                call.body,
                response.content.decode("utf-8", errors="replace"),
                seed=call.seeds[-1],
                attempts=attempts,
            )
            if earlier is not None:  # a call with the same request stored its reply first
                content, finish, _ = self._read(_Reply(200, earlier.response.encode("utf-8")))
        record = CallRecord(
            call.tag,
            True,
            None,
            attempts,
            latency,
            time.perf_counter() - started,
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
            role=call.role or "",
            timeouts=call.timeouts,
        )
        self._record(record)
        return self._finish(record, call, content, finish, parse, call.seeds[-1])

    def _finish(
        self,
        record: CallRecord,
        call: _Call,
        content: str,
        finish: str | None,
        parse: Callable[[str], Any] | None,
        seed: int | None,
    ) -> ChatResult:
        """Read a (recorded) reply with ``parse``, log the call, and return its result."""
        text = strip_thinking(content)
        try:
            parsed = parse(text) if parse is not None else None
        except Exception as exc:
            if self._logging():
                self._log_call(call.entry(record, content, finish, None, f"parse: {exc!r}"))
            raise
        if self._logging():
            self._log_call(call.entry(record, content, finish, parsed, None))
        return ChatResult(text, content, finish, record, parsed, seed)

    def _from_cache(
        self,
        call: _Call,
        messages: Sequence[Mapping[str, str]],
        asked: Mapping[str, Any],
        started: float,
        parse: Callable[[str], Any] | None,
    ) -> ChatResult | None:
        """The call's reply from the reply cache, or None (the call goes to the server, and
        ``call.key`` says where to store its reply).

        The key is the body of the call's first attempt as the caller asked for it (before a
        server's refusal of ``response_format`` changed it), so a rerun finds every reply the
        first run stored, whichever attempt answered it.

        Raises:
            LLMCacheMiss: the cache holds no reply and may not ask the server (offline).
        """
        cache = self.cache
        assert cache is not None
        if call.sampling is not None:
            assert call.role is not None
            seed = derive_seed(call.episode, call.role, call.turn, 1, call.sampling.seed)
            body = self._body(messages, {**call.sampling.request_fields(seed), **asked})
        else:
            body = self._body(messages, asked)
        call.key = request_key(body)
        stored = cache.get(call.key)
        if stored is None:
            if not cache.offline:
                return None
            call.body = body
            call.seeds.append(body.get("seed"))
            error = LLMCacheMiss(
                f"the reply cache {cache.path} holds no reply to this "
                f"{call.role or call.tag or 'LLM'} request, and --llm-cache-only (offline) "
                "does not ask the server"
            )
            self._fail(error, call, 0, 0.0, started)
            raise error
        return self._replay(stored, call, started, parse)

    def _replay(
        self,
        stored: CachedReply,
        call: _Call,
        started: float,
        parse: Callable[[str], Any] | None,
    ) -> ChatResult:
        """A stored reply as the call's result (no request: ``cached``, no attempt)."""
        with contextlib.suppress(json.JSONDecodeError):
            call.body = json.loads(stored.request)
        call.seeds.append(stored.seed)
        try:
            content, finish, usage = self._read(_Reply(200, stored.response.encode("utf-8")))
        except LLMMalformedResponse as exc:
            exc.attempts = 0
            self._fail(exc, call, 0, 0.0, started)
            raise
        record = CallRecord(
            call.tag,
            True,
            None,
            0,
            0.0,
            time.perf_counter() - started,
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
            role=call.role or "",
            cached=True,
        )
        self._record(record)
        return self._finish(record, call, content, finish, parse, stored.seed)

    def chat(
        self, messages: Sequence[Mapping[str, str]], *, tag: str = "", **params: Any
    ) -> ChatResult:
        """Blocking :meth:`achat` (runs on the client's private event loop)."""
        return self.run_sync(self.achat(messages, tag=tag, **params))
