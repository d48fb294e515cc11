"""Known-answer tests for the LLM client's fast paths (issue 19, item 3).

* The attempt limit is kept by one timer per event loop (``_Deadlines``) instead of aiohttp's
  per-request timeout: a hung request still ends as ``LLMTimeout`` at its limit, requests that
  answer in time are never cancelled, a cancellation from elsewhere is not taken for a timeout,
  and the task that timed out goes on unharmed (its cancellation undone).
* JSON read by orjson (``textutil.json_loads``, the action reader's number-keeping decoder)
  gives exactly the standard library's value, or its error, on hand-picked edge cases and on
  randomized documents.

Everything runs against the real scripted HTTP server on 127.0.0.1 and the installed libraries.
"""

from __future__ import annotations

import asyncio
import json
import random
import time

import pytest

from ambitab_gym.evaluation.engine import run_loop
from ambitab_gym.llm import LLMClient
from ambitab_gym.llm.client import _Deadlines
from ambitab_gym.llm.errors import LLMTimeout
from ambitab_gym.testing.llm_server import ScriptedServer, ScriptRule
from ambitab_gym.textutil import json_loads

HELLO = [{"role": "user", "content": "hello"}]

#: what the action reader decoded with before orjson (numbers keep their literal text)
LITERAL_NUMBERS = json.JSONDecoder(parse_int=str, parse_float=str, parse_constant=str)


def _literal_numbers(text: str):
    return json_loads(text, literal_numbers=True)


# -- deadlines -------------------------------------------------------------------------------


def test_hung_requests_time_out_at_their_limit_and_fast_ones_are_untouched():
    rules = [
        ScriptRule(reply="slow", when="slow", latency_s=3.0),
        ScriptRule(reply="fast", latency_s=0.05),
    ]
    with (
        ScriptedServer(rules) as server,
        LLMClient(server.url, "m", timeout_s=0.4, max_retries=0, concurrency=8) as client,
    ):

        async def one(text: str, delay: float) -> tuple[str, float]:
            await asyncio.sleep(delay)
            start = time.perf_counter()
            try:
                result = await client.achat([{"role": "user", "content": text}])
                outcome = result.text
            except LLMTimeout:
                outcome = "timeout"
            # the task goes on: a timed-out request leaves no cancellation behind
            await asyncio.sleep(0.01)
            return outcome, time.perf_counter() - start

        async def main():
            jobs = [one("slow", 0.1 * i) for i in range(3)]
            jobs += [one("fast", 0.05 * i) for i in range(6)]
            return await asyncio.gather(*jobs)

        results = run_loop(main())
    slow, fast = results[:3], results[3:]
    assert [outcome for outcome, _ in slow] == ["timeout"] * 3
    for _, took in slow:  # the limit, not the server's 3 s
        assert 0.38 <= took < 1.5
    assert [outcome for outcome, _ in fast] == ["fast"] * 6
    assert client.usage.timeouts == 3 and dict(client.usage.errors) == {"timeout": 3}


def test_a_timed_out_attempt_is_retried_and_the_call_then_succeeds():
    with ScriptedServer([ScriptRule(reply="late but fine")], hang_s=5.0) as server:
        server.fail_next("timeout", times=1)
        with LLMClient(server.url, "m", timeout_s=0.3, max_retries=1, backoff_s=0.01) as client:
            result = client.chat(HELLO)
    assert result.text == "late but fine"
    assert (result.record.attempts, result.record.timeouts) == (2, 1)


def test_a_cancellation_from_elsewhere_is_not_taken_for_a_timeout():
    with (
        ScriptedServer([ScriptRule(reply="slow", latency_s=3.0)]) as server,
        LLMClient(server.url, "m", timeout_s=10, max_retries=0) as client,
    ):

        async def main() -> str:
            task = asyncio.create_task(client.achat(HELLO))
            await asyncio.sleep(0.2)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return "cancelled"
            return "finished"

        assert run_loop(main()) == "cancelled"
    assert client.usage.timeouts == 0


def test_deadlines_expire_oldest_first_and_forget_finished_requests():
    async def main():
        loop = asyncio.get_running_loop()
        deadlines = _Deadlines(loop, 0.15)
        outcomes: dict[str, str] = {}

        async def request(name: str, start: float, hold: float) -> None:
            await asyncio.sleep(start)
            task = asyncio.current_task()
            token = deadlines.start(task)
            try:
                await asyncio.sleep(hold)
            except asyncio.CancelledError:
                assert deadlines.end(token)
                task.uncancel()
                outcomes[name] = "expired"
            else:
                assert not deadlines.end(token)
                outcomes[name] = "done"
            await asyncio.sleep(0.05)  # no cancellation left behind in either case

        await asyncio.gather(
            request("a", 0.0, 1.0),  # expires at 0.15
            request("b", 0.02, 0.05),  # done at 0.07
            request("c", 0.05, 1.0),  # expires at 0.20
            request("d", 0.30, 0.05),  # after the others: done
            request("e", 0.31, 1.0),  # expires at 0.46 (the timer is armed again)
        )
        return outcomes, deadlines.pending, deadlines.expired, deadlines.timer

    outcomes, pending, expired, timer = asyncio.run(main())
    assert outcomes == {"a": "expired", "b": "done", "c": "expired", "d": "done", "e": "expired"}
    assert pending == {} and expired == set() and timer is None


# -- JSON ------------------------------------------------------------------------------------

EDGE_CASES = [
    '{"type": "done", "output": null}',
    '{"a": 1, "a": 2}',
    '{"n": 123456789012345678901234567890}',
    '{"n": 18446744073709551615, "m": -9223372036854775808}',
    '{"x": 1e400, "y": -1e400, "z": 1.7976931348623157e309}',
    '{"x": NaN, "y": Infinity, "z": -Infinity}',
    '{"s": "\\ud800"}',
    '{"s": "\\ud83d\\ude00 caf\\u00e9 \\u0000"}',
    '{"f": 0.1, "g": -0.0, "h": 1.0000000000000000001, "i": 5e-324}',
    '{"deep": ' + "[" * 50 + "1" + "]" * 50 + "}",
    "[" * 1200 + "]" * 1200,
    '{"t": "\t"}',
    "\ufeff{}",
    '{"a": 1} trailing',
    "{'a': 1}",
    "",
    "   ",
    '"just a string"',
    "-0",
    "true",
    '{"b": [true, false, null], "c": {"d": []}}',
    "9" * 5000,
]


def _same(fast, slow) -> None:
    """The same value (floats compared by representation: -0.0 and nan included), or the
    same error type."""
    assert type(fast) is type(slow)
    assert repr(fast) == repr(slow)


def _outcome(function, text):
    try:
        return function(text)
    except RecursionError:
        return "RecursionError"
    except ValueError as error:  # JSONDecodeError included, and int digit limits
        return f"ValueError:{type(error).__name__}"


@pytest.mark.parametrize("text", EDGE_CASES)
def test_json_loads_reads_edge_cases_as_the_standard_library(text):
    _same(_outcome(json_loads, text), _outcome(json.loads, text))


@pytest.mark.parametrize("text", EDGE_CASES)
def test_action_decoder_keeps_number_literals_as_before(text):
    _same(_outcome(_literal_numbers, text), _outcome(LITERAL_NUMBERS.decode, text))


def _random_value(rng: random.Random, depth: int = 0):
    kinds = ["int", "big", "float", "str", "bool", "null"]
    if depth < 4:
        kinds += ["list", "dict"] * 2
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.randint(-(2**63), 2**64 - 1)
    if kind == "big":
        return rng.choice([1, -1]) * rng.randint(2**64, 2**90)
    if kind == "float":
        return rng.choice([rng.uniform(-1e6, 1e6), rng.random() * 1e-300, 1e308 * rng.random()])
    if kind == "str":
        alphabet = "ab \"\\/\n\t\u00e9\u4e2d\U0001f600{}[]"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        "".join(rng.choice("kxy") for _ in range(rng.randint(1, 3))): _random_value(rng, depth + 1)
        for _ in range(rng.randint(0, 4))
    }


def test_randomized_documents_read_the_same_by_both_decoders():
    rng = random.Random(19)
    for _ in range(2000):
        document = json.dumps(_random_value(rng), ensure_ascii=rng.random() < 0.5)
        _same(_outcome(json_loads, document), _outcome(json.loads, document))
        _same(_outcome(_literal_numbers, document), _outcome(LITERAL_NUMBERS.decode, document))
