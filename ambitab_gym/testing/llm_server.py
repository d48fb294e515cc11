"""A small scripted OpenAI-compatible server for tests and benchmarks (loopback only).

* :class:`ScriptRule` - one scripted behaviour: when a request matches, reply with this text (or
  the n-th of several texts), after this latency, or fail with this fault.
* :func:`role_rules` - a script for the four roles (asker and solver of
  :mod:`ambitab_gym.policies.llm_prompts`, matcher and responder of
  :mod:`ambitab_gym.oracles.llm_prompts`): the asker asks the given questions in turn, then stops.
* :data:`ROLE_MARKERS` - the phrase that tells each role's requests apart.
* :data:`FAULTS`, :class:`ScriptServer` - re-exported from
  :mod:`ambitab_gym.testing.llm_server_core` (the asyncio HTTP/1.1 core).
* :class:`ScriptedServer` - a real HTTP/1.1 server on 127.0.0.1 speaking
  ``POST /v1/chat/completions`` (and, when configured, ``GET /v1/models``, llama.cpp's
  ``GET /props`` and an API-key check), run in a background thread or in a
  separate process, with a control API to read the requests it received, its statistics
  (requests, most requests in flight at once) and to queue faults.

Faults: ``timeout`` (no answer for ``hang_s`` seconds), ``http_500``, ``http_503``, ``http_429``
(with ``Retry-After: 0``), ``malformed_json`` (200 with a truncated body), ``context_overflow``
(400 with the usual "maximum context length" message; also sent by itself when a prompt has more
than ``max_context_tokens`` words) and ``disconnect`` (the connection closes without an answer).

Token usage is counted in whitespace-separated words: ``prompt_tokens`` over the contents of all
messages, ``completion_tokens`` over the reply, so tests can compute the expected numbers.

Run it standalone: ``python -m ambitab_gym.testing.llm_server --config rules.json`` prints
``LISTENING http://127.0.0.1:PORT/v1`` and serves until its standard input closes.

This module is test tooling: it knows the prompts of both sides of the trust boundary (to route
on their markers), and no module of the package imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ambitab_gym.oracles.llm_prompts import ROLE_MARKERS as ORACLE_ROLE_MARKERS
from ambitab_gym.policies.llm_prompts import ROLE_MARKERS as AGENT_ROLE_MARKERS
from ambitab_gym.testing.llm_server_core import FAULTS, ScriptRule, ScriptServer

try:  # optional: a separate server process runs on libuv's event loop when uvloop is installed
    import uvloop
except ImportError:  # pragma: no cover - depends on the environment
    uvloop = None

__all__ = [
    "ASKER_TURN_PATTERN",
    "FAULTS",
    "ROLE_MARKERS",
    "ScriptRule",
    "ScriptServer",
    "ScriptedServer",
    "main",
    "role_rules",
]

#: A phrase found in every system prompt of each of the four roles.
ROLE_MARKERS: dict[str, str] = {**AGENT_ROLE_MARKERS, **ORACLE_ROLE_MARKERS}

#: Matches once per earlier question in any asker prompt (ledger, direct and chat layouts).
#: ``Q(?<=^Q)`` is ``^Q`` written so that every branch starts with a character: the regular
#: expression engine then skips to the next Y, Q or quote instead of trying every position.
ASKER_TURN_PATTERN = r'(?m)(?:You asked:|Q(?<=^Q)\d+: |"clarification", "output": "[^<])'


def role_rules(
    questions: Sequence[str] = ("Which one do you mean?",),
    *,
    matcher: str = '{"reasoning": "scripted", "action": "unanswerable()"}',
    responder: str = '{"answer": "Scripted answer."}',
    solver: str = '{"reasoning": "scripted", "type": "final_sql", "output": "SELECT 1"}',
    latency_s: float | None = None,
) -> list[ScriptRule]:
    """A script for the four LLM roles, told apart by their :data:`ROLE_MARKERS`.

    The asker's n-th decision asks ``questions[n]`` (as JSON), and stops after the last one.

    Example:
        >>> [r.when for r in role_rules()]
        ['sharpen a database request', 'route one clarifying question', 'the person who wrote the database request', 'write the final SQL query']
    """
    asks = [json.dumps({"type": "clarification", "output": q}) for q in questions]
    asks.append(json.dumps({"type": "done", "output": None}))
    return [
        ScriptRule(asks, when=ROLE_MARKERS["asker"], count=ASKER_TURN_PATTERN, latency_s=latency_s),
        ScriptRule(matcher, when=ROLE_MARKERS["matcher"], latency_s=latency_s),
        ScriptRule(responder, when=ROLE_MARKERS["responder"], latency_s=latency_s),
        ScriptRule(solver, when=ROLE_MARKERS["solver"], latency_s=latency_s),
    ]


class ScriptedServer:
    """A scripted OpenAI-compatible server on 127.0.0.1 (a thread, or a separate process).

    Args:
        rules: the script; the first rule whose ``when`` matches a request applies. A request no
            rule matches gets the reply ``OK``.
        latency_s: seconds every reply waits (a rule may override it).
        max_context_tokens: prompts longer than this (in words) are rejected as context overflow.
        hang_s: how long the ``timeout`` fault keeps a request waiting.
        model: the model name a reply carries when its request names none.
        models: the names ``GET /v1/models`` lists; None (the default): no such route (404),
            so clients' pre-flight checks only warn and any model name is accepted.
        api_key: when set, every request without ``Authorization: Bearer <api_key>`` gets a 401
            (the control routes excepted).
        slots: when set, ``GET /props`` (at the root) reports ``total_slots`` like llama.cpp,
            and at most that many requests are answered at once (the others wait their turn).
        structured_output: accept ``response_format``; False: such requests get a 400, as from
            a server without structured output.
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
        models: Sequence[str] | None = None,
        api_key: str | None = None,
        slots: int | None = None,
        structured_output: bool = True,
        process: bool = False,
        record_requests: bool = True,
    ) -> None:
        self.config: dict[str, Any] = {
            "rules": [r.to_dict() for r in rules],
            "latency_s": latency_s,
            "max_context_tokens": max_context_tokens,
            "hang_s": hang_s,
            "model": model,
            "models": None if models is None else list(models),
            "api_key": api_key,
            "slots": slots,
            "structured_output": structured_output,
            "record_requests": record_requests,
        }
        self.process = process
        self.url = ""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: ScriptServer | None = None
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
        server = ScriptServer(self.config)
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
        command = [sys.executable, "-m", "ambitab_gym.testing.llm_server", "--config", "-"]
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
    server = ScriptServer(config)
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
        argv: ``--config FILE`` (``-``: one JSON line on standard input), ``--port`` (0: any),
            ``--asyncio`` (asyncio's own event loop; default: uvloop's when installed).

    Returns:
        The exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m ambitab_gym.testing.llm_server")
    parser.add_argument("--config", default=None, help="JSON file with rules ('-': stdin line)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--asyncio", action="store_true", help="asyncio's own event loop even with uvloop installed"
    )
    args = parser.parse_args(argv)
    if args.config == "-":
        config = json.loads(sys.stdin.readline())
    elif args.config:
        with open(args.config, encoding="utf-8") as handle:
            config = json.load(handle)
    else:
        config = {}
    # the benchmarks' server: less CPU per request means less latency added when a wave of
    # requests arrives at once (each waits for those before it)
    factory = uvloop.new_event_loop if uvloop is not None and not args.asyncio else None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_serve(config, "127.0.0.1", args.port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
