"""The scripted OpenAI-compatible server's core: rules, faults and the asyncio HTTP/1.1 server.

* :data:`FAULTS` - the faults it can produce.
* :class:`ScriptRule` - one scripted behaviour.
* :class:`ScriptServer` - the server on an asyncio event loop;
  :class:`ambitab_gym.testing.llm_server.ScriptedServer` runs it in a thread or a process and is
  what tests use.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

try:  # optional: parses request bodies several times faster (the llm-fast extra)
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None

__all__ = ["FAULTS", "ScriptRule", "ScriptServer"]

#: The faults the server can be told to produce.
FAULTS = (
    "timeout",
    "http_500",
    "http_503",
    "http_429",
    "malformed_json",
    "context_overflow",
    "disconnect",
)

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}
_REASONS |= {429: "Too Many Requests"}
_REASONS |= {500: "Internal Server Error", 503: "Service Unavailable"}

#: the longest request head (request line and headers) the server reads
_HEAD_LIMIT = 1 << 20

#: floats this large may be integers orjson could not hold (see ``_loads``)
_HUGE = float(2**63)

#: word counts kept per distinct message text (system prompts repeat across requests)
_WORD_CACHE_SIZE = 4096


@dataclass(frozen=True)
class ScriptRule:
    """One scripted behaviour of :class:`ScriptedServer`.

    Args:
        reply: the reply text, or several: without ``count`` they are used in turn, with
            ``count`` the n-th is used (the last one once n runs past the end). ``{n}`` in a reply
            is replaced by n.
        when: a regular expression searched in the request's message contents (all roles, joined
            by newlines); ``None`` matches every request. The first matching rule applies.
        count: a regular expression; n = the number of its matches in the message contents.
        latency_s: seconds to wait before answering (default: the server's ``latency_s``).
        fault: one of :data:`FAULTS` to produce instead of a reply.
        think: a reasoning text sent as ``<think>...</think>`` before the reply.

    Example:
        >>> rule = ScriptRule(reply=["first {n}", "second {n}"], count="Q:")
        >>> ScriptRule.from_dict(rule.to_dict()) == rule
        True
    """

    reply: str | tuple[str, ...] = "OK"
    when: str | None = None
    count: str | None = None
    latency_s: float | None = None
    fault: str | None = None
    think: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.reply, list):
            object.__setattr__(self, "reply", tuple(self.reply))
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; choose from {FAULTS}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out = asdict(self)
        if isinstance(self.reply, tuple):
            out["reply"] = list(self.reply)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScriptRule:
        """The rule of :meth:`to_dict`."""
        return cls(**dict(data))


def _words(text: Any) -> int:
    return len(str(text or "").split())


class _Script:
    """The server's state; lives on the server's event loop."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.rules = [ScriptRule.from_dict(r) for r in config.get("rules", [])]
        self.patterns = [
            (re.compile(r.when) if r.when else None, re.compile(r.count) if r.count else None)
            for r in self.rules
        ]
        self.latency_s = float(config.get("latency_s", 0.0))
        self.hang_s = float(config.get("hang_s", 30.0))
        self.max_context_tokens = config.get("max_context_tokens")
        self.structured_output = bool(config.get("structured_output", True))
        self.model = str(config.get("model", "scripted"))
        self.record_requests = bool(config.get("record_requests", True))
        models = config.get("models")
        self.models = None if models is None else [str(m) for m in models]
        self.api_key = config.get("api_key") or None
        self.slots = config.get("slots")
        self.word_counts: dict[str, int] = {}
        self.reset()

    def reset(self) -> None:
        self.faults: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.turns = [0] * len(self.rules)
        self.served = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.faulted: dict[str, int] = {}

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.served,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "faults": dict(self.faulted),
            "queued_faults": list(self.faults),
        }

    def words(self, value: Any) -> int:
        """:func:`_words` of a message content, remembered per distinct text (the same system
        prompt comes with many requests; hashing it costs a fraction of splitting it)."""
        if type(value) is not str:
            return _words(value)
        counts = self.word_counts
        n = counts.get(value)
        if n is None:
            if len(counts) >= _WORD_CACHE_SIZE:
                counts.clear()
            n = counts[value] = len(value.split())
        return n

    def pick(self, text: str) -> tuple[ScriptRule | None, int]:
        for i, (rule, (when, count)) in enumerate(zip(self.rules, self.patterns, strict=True)):
            if when is not None and not when.search(text):
                continue
            if count is not None:
                n = len(count.findall(text))
            else:
                n = self.turns[i]
                self.turns[i] += 1
            return rule, n
        return None, self.served


class ScriptServer:
    """The asyncio HTTP server (one per loop).

    Example:
        >>> ScriptServer({"rules": [{"reply": "hi"}]}).script.rules[0].reply
        'hi'
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.script = _Script(config)
        slots = self.script.slots
        #: with ``slots``, at most that many requests are answered at once (llama.cpp's slots)
        self.gate = asyncio.Semaphore(int(slots)) if slots else None
        self.tasks: set[asyncio.Task] = set()
        self.server: asyncio.base_events.Server | None = None

    async def start(self, host: str, port: int) -> str:
        self.server = await asyncio.start_server(self.connection, host, port, limit=_HEAD_LIMIT)
        sock = self.server.sockets[0].getsockname()
        return f"http://{sock[0]}:{sock[1]}/v1"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            while True:
                # the whole head at once (one buffer scan, one decode, one split), not a read
                # per header line: a wave of requests arriving together waits less
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError as exc:
                    head = exc.partial  # the peer closed: a head without its blank line
                    if not head.strip():
                        break
                lines = head.decode("latin-1").split("\n")  # "\r" goes with strip()
                if not lines[0].strip():
                    break
                method, target = lines[0].split()[:2]
                headers: dict[str, str] = {}
                for header in lines[1:]:
                    if header:
                        key, _, value = header.partition(":")
                        headers[key.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                answer = await self.route(method, target.split("?")[0], headers, body)
                if answer is None:  # the "disconnect" fault
                    break
                status, payload, extra = answer
                more = "".join(f"{k}: {v}\r\n" for k, v in extra.items()) if extra else ""
                writer.write(
                    f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: "
                    f"application/json\r\nContent-Length: {len(payload)}\r\n{more}\r\n".encode(
                        "latin-1"
                    )
                    + payload
                )
                if writer.transport.get_write_buffer_size():
                    await writer.drain()  # only when the socket did not take it all at once
                if headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, OSError):
            pass
        except asyncio.LimitOverrunError:  # a head longer than the reader's limit
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self.tasks.discard(task)
            writer.close()

    async def route(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, bytes, dict[str, str]] | None:
        script = self.script
        key = script.api_key
        if (
            key
            and not path.startswith("/_scripted/")
            and headers.get("authorization") != (f"Bearer {key}")
        ):
            error = {"message": "Incorrect API key provided.", "code": "invalid_api_key"}
            return 401, _json({"error": {**error, "type": "invalid_request_error"}}), {}
        if method == "POST" and path.endswith("/chat/completions"):
            return await self.chat(headers, body)
        if method == "GET" and path.endswith("/models") and script.models is not None:
            data = [{"id": m, "object": "model", "owned_by": "scripted"} for m in script.models]
            return 200, _json({"object": "list", "data": data}), {}
        if method == "GET" and path == "/props" and script.slots is not None:
            return 200, _json({"total_slots": int(script.slots), "model_path": "scripted"}), {}
        if method == "GET" and path == "/_scripted/requests":
            return 200, _json(script.requests), {}
        if method == "GET" and path == "/_scripted/stats":
            return 200, _json(script.stats()), {}
        if method == "POST" and path == "/_scripted/faults":
            data = json.loads(body or b"{}")
            fault = data.get("fault")
            if fault not in FAULTS:
                return 400, _json({"error": {"message": f"unknown fault {fault!r}"}}), {}
            script.faults.extend([fault] * int(data.get("times", 1)))
            return 200, _json(script.stats()), {}
        if method == "POST" and path == "/_scripted/reset":
            script.reset()
            data = json.loads(body or b"{}")
            if "latency_s" in data:
                script.latency_s = float(data["latency_s"])
            return 200, _json(script.stats()), {}
        return 404, _json({"error": {"message": f"no route {method} {path}"}}), {}

    async def chat(self, headers: dict[str, str], body: bytes):
        script = self.script
        script.served += 1
        script.in_flight += 1
        script.max_in_flight = max(script.max_in_flight, script.in_flight)
        admitted = False
        try:
            try:
                request = _loads(body)
                messages = request["messages"]
                text = "\n".join(str(m.get("content") or "") for m in messages)
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                return 400, _json({"error": {"message": "body is not a chat request"}}), {}
            if script.record_requests:
                script.requests.append(
                    {"body": request, "authorization": headers.get("authorization")}
                )
            if request.get("response_format") is not None and not script.structured_output:
                message = "response_format is not supported by this server"
                return 400, _json({"error": {"message": message, "type": "invalid_request"}}), {}
            if self.gate is not None:  # wait for a free slot
                await self.gate.acquire()
                admitted = True
            rule, n = script.pick(text)
            fault = script.faults.popleft() if script.faults else (rule.fault if rule else None)
            words = script.words
            prompt_tokens = sum([words(m.get("content")) for m in messages])
            limit = script.max_context_tokens
            if fault is None and limit is not None and prompt_tokens > int(limit):
                fault = "context_overflow"
            latency = rule.latency_s if rule and rule.latency_s is not None else script.latency_s
            if fault is not None:
                script.faulted[fault] = script.faulted.get(fault, 0) + 1
                return await self.fault(fault, prompt_tokens, latency)
            if latency > 0:
                await asyncio.sleep(latency)
            reply = "OK" if rule is None else rule.reply
            if isinstance(reply, tuple):
                reply = (
                    reply[min(n, len(reply) - 1)] if rule and rule.count else reply[n % len(reply)]
                )
            content = reply.replace("{n}", str(n))
            if rule is not None and rule.think:
                content = f"<think>{rule.think}</think>\n\n{content}"
            payload = _completion(
                script.served,
                int(time.time()),
                request.get("model", script.model),
                content,
                prompt_tokens,
                words(content),
            )
            return 200, payload, {}
        finally:
            script.in_flight -= 1
            if admitted and self.gate is not None:
                self.gate.release()

    async def fault(self, fault: str, prompt_tokens: int, latency: float):
        if latency > 0 and fault != "timeout":
            await asyncio.sleep(latency)
        if fault == "timeout":
            await asyncio.sleep(self.script.hang_s)
            return 200, _json({"choices": [{"message": {"content": "too late"}}]}), {}
        if fault == "disconnect":
            return None
        if fault == "malformed_json":
            return 200, b'{"id": "chatcmpl-broken", "choices": [{"message": {"content": "tru', {}
        if fault == "context_overflow":
            message = (
                f"This model's maximum context length is {self.script.max_context_tokens or 4096} "
                f"tokens. However, you requested {prompt_tokens} tokens. Please reduce the length "
                "of the messages."
            )
            error = {"message": message, "type": "invalid_request_error"}
            return 400, _json({"error": {**error, "code": "context_length_exceeded"}}), {}
        status = int(fault.split("_")[1])
        extra = {"Retry-After": "0"} if status == 429 else {}
        return status, _json({"error": {"message": f"scripted {fault}", "code": status}}), extra


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def _loads(body: bytes) -> Any:
    """``json.loads(body)``: orjson's faster parse when it is installed and takes the body
    (same objects for valid JSON); the standard library decides every body orjson refuses
    (NaN, lone surrogates, other encodings, invalid JSON) and every one holding a float of
    64-bit integer size or more (orjson reads integers beyond 64 bits as floats)."""
    if orjson is not None:
        with contextlib.suppress(orjson.JSONDecodeError):
            value = orjson.loads(body)
            if not _has_huge_float(value):
                return value
    return json.loads(body)


def _has_huge_float(value: Any) -> bool:
    """Whether a parsed JSON value holds a float of magnitude 2**63 or more."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float and abs(item) >= _HUGE:
            return True
    return False


def _completion(
    served: int, created: int, model: Any, content: str, prompt_tokens: int, completion: int
) -> bytes:
    """The chat completion's body: the bytes ``_json`` makes of the completion object (tested),
    from a template, with only the variable parts encoded."""
    return (
        f'{{"id": "chatcmpl-scripted-{served}", "object": "chat.completion", "created": '
        f'{created}, "model": {json.dumps(model, ensure_ascii=False)}, "choices": [{{"index": 0, '
        f'"message": {{"role": "assistant", "content": {json.dumps(content, ensure_ascii=False)}'
        f'}}, "finish_reason": "stop"}}], "usage": {{"prompt_tokens": {prompt_tokens}, '
        f'"completion_tokens": {completion}, "total_tokens": {prompt_tokens + completion}}}}}'
    ).encode()
