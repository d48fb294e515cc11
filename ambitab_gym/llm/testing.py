"""A small scripted OpenAI-compatible server for tests and benchmarks (loopback only).

* :class:`ScriptRule` - one scripted behaviour: when a request matches, reply with this text (or
  the n-th of several texts), after this latency, or fail with this fault.
* :func:`role_rules` - a script for the four roles (asker, matcher, responder, solver) of
  :mod:`ambitab_gym.llm.prompts`: the asker asks the given questions in turn, then stops.
* :class:`ScriptedServer` - a real HTTP/1.1 server on 127.0.0.1 speaking
  ``POST /v1/chat/completions`` and ``GET /v1/models``, run in a background thread or in a
  separate process, with a control API to read the requests it received, its statistics
  (requests, most requests in flight at once) and to queue faults.

Faults: ``timeout`` (no answer for ``hang_s`` seconds), ``http_500``, ``http_503``, ``http_429``
(with ``Retry-After: 0``), ``malformed_json`` (200 with a truncated body), ``context_overflow``
(400 with the usual "maximum context length" message; also sent by itself when a prompt has more
than ``max_context_tokens`` words) and ``disconnect`` (the connection closes without an answer).

Token usage is counted in whitespace-separated words: ``prompt_tokens`` over the contents of all
messages, ``completion_tokens`` over the reply, so tests can compute the expected numbers.

Run it standalone: ``python -m ambitab_gym.llm.testing --config rules.json`` prints
``LISTENING http://127.0.0.1:PORT/v1`` and serves until its standard input closes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx

__all__ = ["ASKER_TURN_PATTERN", "FAULTS", "ScriptRule", "ScriptedServer", "main", "role_rules"]

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

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests"}
_REASONS |= {500: "Internal Server Error", 503: "Service Unavailable"}


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


#: Matches once per earlier question in any asker prompt (ledger, direct and chat layouts).
ASKER_TURN_PATTERN = r'(?m)(?:You asked:|^Q\d+: |"clarification", "output": "[^<])'


def role_rules(
    questions: Sequence[str] = ("Which one do you mean?",),
    *,
    matcher: str = '{"reasoning": "scripted", "action": "unanswerable()"}',
    responder: str = '{"answer": "Scripted answer."}',
    solver: str = '{"reasoning": "scripted", "type": "final_sql", "output": "SELECT 1"}',
    latency_s: float | None = None,
) -> list[ScriptRule]:
    """A script for the roles of :mod:`ambitab_gym.llm.prompts`, told apart by their markers.

    The asker's n-th decision asks ``questions[n]`` (as JSON), and stops after the last one.

    Example:
        >>> [r.when for r in role_rules()]
        ['sharpen a database request', 'route one clarifying question', 'the person who wrote the database request', 'write the final SQL query']
    """
    from ambitab_gym.llm.prompts import ROLE_MARKERS

    asks = [json.dumps({"type": "clarification", "output": q}) for q in questions]
    asks.append(json.dumps({"type": "done", "output": None}))
    return [
        ScriptRule(asks, when=ROLE_MARKERS["asker"], count=ASKER_TURN_PATTERN, latency_s=latency_s),
        ScriptRule(matcher, when=ROLE_MARKERS["matcher"], latency_s=latency_s),
        ScriptRule(responder, when=ROLE_MARKERS["responder"], latency_s=latency_s),
        ScriptRule(solver, when=ROLE_MARKERS["solver"], latency_s=latency_s),
    ]


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
        self.model = str(config.get("model", "scripted"))
        self.record_requests = bool(config.get("record_requests", True))
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


class _Server:
    """The asyncio HTTP server (one per loop)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.script = _Script(config)
        self.tasks: set[asyncio.Task] = set()
        self.server: asyncio.base_events.Server | None = None

    async def start(self, host: str, port: int) -> str:
        self.server = await asyncio.start_server(self.connection, host, port)
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
                line = await reader.readline()
                if not line.strip():
                    break
                method, target = line.decode("latin-1").split()[:2]
                headers: dict[str, str] = {}
                while True:
                    header = await reader.readline()
                    if header in (b"\r\n", b"\n", b""):
                        break
                    key, _, value = header.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                answer = await self.route(method, target.split("?")[0], headers, body)
                if answer is None:  # the "disconnect" fault
                    break
                status, payload, extra = answer
                head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}"]
                head += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
                head += [f"{k}: {v}" for k, v in extra.items()]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, OSError):
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
        if method == "POST" and path.endswith("/chat/completions"):
            return await self.chat(headers, body)
        if method == "GET" and path.endswith("/models"):
            return 200, _json({"object": "list", "data": [{"id": script.model}]}), {}
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
        try:
            try:
                request = json.loads(body)
                messages = request["messages"]
                text = "\n".join(str(m.get("content") or "") for m in messages)
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                return 400, _json({"error": {"message": "body is not a chat request"}}), {}
            if script.record_requests:
                script.requests.append(
                    {"body": request, "authorization": headers.get("authorization")}
                )
            rule, n = script.pick(text)
            fault = script.faults.popleft() if script.faults else (rule.fault if rule else None)
            prompt_tokens = sum(_words(m.get("content")) for m in messages)
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
            completion = {
                "id": f"chatcmpl-scripted-{script.served}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model", script.model),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": _words(content),
                    "total_tokens": prompt_tokens + _words(content),
                },
            }
            return 200, _json(completion), {}
        finally:
            script.in_flight -= 1

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


class ScriptedServer:
    """A scripted OpenAI-compatible server on 127.0.0.1 (a thread, or a separate process).

    Args:
        rules: the script; the first rule whose ``when`` matches a request applies. A request no
            rule matches gets the reply ``OK``.
        latency_s: seconds every reply waits (a rule may override it).
        max_context_tokens: prompts longer than this (in words) are rejected as context overflow.
        hang_s: how long the ``timeout`` fault keeps a request waiting.
        model: the model name ``/v1/models`` reports.
        process: run in a separate Python process (no shared GIL with the client: benchmarks).
        record_requests: keep every request body for :meth:`requests` (off for long benchmarks).

    Example:
        >>> with ScriptedServer([ScriptRule(reply="Hi!")]) as server:
        ...     response = httpx.post(server.url + "/chat/completions",
        ...         json={"model": "m", "messages": [{"role": "user", "content": "hello"}]})
        ...     server.stats()["requests"], response.json()["choices"][0]["message"]["content"]
        (1, 'Hi!')
    """

    def __init__(
        self,
        rules: Sequence[ScriptRule] = (),
        *,
        latency_s: float = 0.0,
        max_context_tokens: int | None = None,
        hang_s: float = 30.0,
        model: str = "scripted",
        process: bool = False,
        record_requests: bool = True,
    ) -> None:
        self.config: dict[str, Any] = {
            "rules": [r.to_dict() for r in rules],
            "latency_s": latency_s,
            "max_context_tokens": max_context_tokens,
            "hang_s": hang_s,
            "model": model,
            "record_requests": record_requests,
        }
        self.process = process
        self.url = ""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: _Server | None = None
        self._proc: subprocess.Popen | None = None
        self._control: httpx.Client | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        """Start serving; returns self (``url`` is then set)."""
        if self.url:
            return self
        if self.process:
            self._start_process()
        else:
            self._start_thread()
        self._control = httpx.Client(base_url=self.url.rsplit("/v1", 1)[0], timeout=30)
        return self

    def _start_thread(self) -> None:
        loop = asyncio.new_event_loop()
        server = _Server(self.config)
        ready = threading.Event()
        box: dict[str, Any] = {}

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                box["url"] = loop.run_until_complete(server.start("127.0.0.1", 0))
            except Exception as error:  # reported to the starting thread
                box["error"] = error
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(server.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="scripted-llm-server", daemon=True)
        self._thread.start()
        ready.wait(30)
        if "url" not in box:
            raise RuntimeError(f"the scripted server did not start: {box.get('error')}")
        self._loop, self._server, self.url = loop, server, box["url"]

    def _start_process(self) -> None:
        command = [sys.executable, "-m", "ambitab_gym.llm.testing", "--config", "-"]
        self._proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(self.config) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline().strip()
        if not line.startswith("LISTENING "):
            self._proc.kill()
            raise RuntimeError(f"the scripted server process did not start: {line!r}")
        self.url = line.split(" ", 1)[1]

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop = self._thread = None
        if self._proc is not None:
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.close()  # the process exits when its stdin closes
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        self.url = ""

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- control ---------------------------------------------------------------------------------

    def _call(self, method: str, path: str, payload: dict | None = None) -> Any:
        if self._control is None:
            raise RuntimeError("the scripted server is not running: call start()")
        response = self._control.request(method, path, json=payload)
        response.raise_for_status()
        return response.json()

    def requests(self) -> list[dict[str, Any]]:
        """Every chat request received: ``{"body": <request JSON>, "authorization": ...}``."""
        return self._call("GET", "/_scripted/requests")

    def stats(self) -> dict[str, Any]:
        """``requests`` served, ``in_flight``, ``max_in_flight``, ``faults`` produced so far."""
        return self._call("GET", "/_scripted/stats")

    def fail_next(self, fault: str, times: int = 1) -> None:
        """Answer the next ``times`` chat requests with ``fault`` (before any rule)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; choose from {FAULTS}")
        self._call("POST", "/_scripted/faults", {"fault": fault, "times": times})

    def reset(self, *, latency_s: float | None = None) -> None:
        """Forget requests, statistics and queued faults; optionally change the latency."""
        self._call(
            "POST", "/_scripted/reset", {} if latency_s is None else {"latency_s": latency_s}
        )


async def _serve(config: Mapping[str, Any], host: str, port: int) -> None:
    server = _Server(config)
    url = await server.start(host, port)
    print(f"LISTENING {url}", flush=True)
    loop = asyncio.get_running_loop()
    done = asyncio.Event()

    def watch_stdin() -> None:
        sys.stdin.read()  # returns when the parent closes our stdin (or dies)
        loop.call_soon_threadsafe(done.set)

    threading.Thread(target=watch_stdin, daemon=True).start()
    await done.wait()
    await server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Run a scripted server until standard input closes.

    Args:
        argv: ``--config FILE`` (``-``: one JSON line on standard input), ``--port`` (0: any).

    Returns:
        The exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m ambitab_gym.llm.testing")
    parser.add_argument("--config", default=None, help="JSON file with rules ('-': stdin line)")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    if args.config == "-":
        config = json.loads(sys.stdin.readline())
    elif args.config:
        with open(args.config, encoding="utf-8") as handle:
            config = json.load(handle)
    else:
        config = {}
    asyncio.run(_serve(config, "127.0.0.1", args.port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
