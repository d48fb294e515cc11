"""The scripted server's fast paths: whole-head reads, templated completions, cached word counts.

Each test talks to a real server on 127.0.0.1 over raw sockets (HTTP/1.1 written by hand), or
checks a fast path against the slow computation it replaces.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from ambitab_gym.testing import llm_server_core as core
from ambitab_gym.testing.llm_server import ScriptedServer, ScriptRule


def _chat_body(*contents: str, model: str = "m") -> bytes:
    messages = [{"role": "user", "content": c} for c in contents]
    return json.dumps({"model": model, "messages": messages}).encode()


def _request(body: bytes, *headers: str) -> bytes:
    head = ["POST /v1/chat/completions HTTP/1.1", "Host: 127.0.0.1"]
    head += [*headers, "Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _read_response(sock: socket.socket, buffer: bytearray) -> tuple[int, dict, bytes]:
    """One HTTP response from ``sock`` (``buffer`` keeps what came after it)."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection before answering"
        buffer += chunk
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    length = int(headers["content-length"])
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk
        rest += chunk
    buffer[:] = rest[length:]
    return status, headers, rest[:length]


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.fixture
def server():
    with ScriptedServer([ScriptRule(reply="alpha beta gamma")]) as running:
        yield running


def _address(server: ScriptedServer) -> tuple[str, int]:
    host, port = server.url.split("//")[1].split("/")[0].split(":")
    return host, int(port)


def test_many_headers(server):
    extra = [f"X-Filler-{i}: {'v' * 40}" for i in range(300)]  # a 17 kB head
    body = _chat_body("one two three")
    with socket.create_connection(_address(server), timeout=10) as sock:
        sock.sendall(_request(body, *extra))
        status, headers, payload = _read_response(sock, bytearray())
    assert status == 200
    assert headers["content-type"] == "application/json"
    answer = json.loads(payload)
    assert answer["choices"][0]["message"]["content"] == "alpha beta gamma"
    assert answer["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}


def test_pipelined_requests_on_one_connection(server):
    texts = ["a", "a b", "a b c d", "x " * 50]
    with socket.create_connection(_address(server), timeout=10) as sock:
        sock.sendall(b"".join(_request(_chat_body(t)) for t in texts))  # all before any answer
        buffer = bytearray()
        answers = [_read_response(sock, buffer) for _ in texts]
    assert [status for status, _, _ in answers] == [200] * len(texts)
    tokens = [json.loads(payload)["usage"]["prompt_tokens"] for _, _, payload in answers]
    assert tokens == [len(t.split()) for t in texts]
    ids = [json.loads(payload)["id"] for _, _, payload in answers]
    assert ids == [f"chatcmpl-scripted-{i}" for i in range(1, len(texts) + 1)]
    assert server.stats()["requests"] == len(texts)


def test_head_and_body_split_across_packets(server):
    body = _chat_body("split " * 30)
    data = _request(body)
    cut = data.index(b"\r\n\r\n")
    with socket.create_connection(_address(server), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # the head cut inside its blank line, then the body in three pieces
        for piece in (data[:7], data[7 : cut + 2], data[cut + 2 : cut + 30], data[cut + 30 :]):
            sock.sendall(piece)
            time.sleep(0.02)
        status, _, payload = _read_response(sock, bytearray())
    assert status == 200
    assert json.loads(payload)["usage"]["prompt_tokens"] == 30


def test_connection_close_is_honoured(server):
    with socket.create_connection(_address(server), timeout=10) as sock:
        sock.sendall(_request(_chat_body("bye now"), "Connection: close"))
        status, _, payload = _read_response(sock, bytearray())
        assert status == 200
        assert json.loads(payload)["usage"]["prompt_tokens"] == 2
        assert _closed(sock)


def test_keep_alive_serves_the_next_request(server):
    with socket.create_connection(_address(server), timeout=10) as sock:
        buffer = bytearray()
        for words in (1, 2):
            sock.sendall(_request(_chat_body("w " * words)))
            status, _, payload = _read_response(sock, buffer)
            assert (status, json.loads(payload)["usage"]["prompt_tokens"]) == (200, words)


def test_garbage_request_line_closes_the_connection(server):
    with socket.create_connection(_address(server), timeout=10) as sock:
        sock.sendall(b"NONSENSE\r\n\r\n")
        assert _closed(sock)
    assert server.stats()["requests"] == 0


def test_retry_after_header_of_a_fault(server):
    server.fail_next("http_429")
    with socket.create_connection(_address(server), timeout=10) as sock:
        sock.sendall(_request(_chat_body("hello")))
        status, headers, _ = _read_response(sock, bytearray())
    assert status == 429
    assert headers["retry-after"] == "0"


@pytest.mark.parametrize(
    ("model", "content"),
    [
        ("m", "plain"),
        ("Qwen/Qwen3-8B", 'quotes " and \\ backslashes\nnew lines\ttabs'),
        ("modèle", "unicode: é ü 漢字 emoji 🙂 and control \x01"),
        (None, ""),
        (7, '<think>why</think>\n\n{"answer": 1}'),
        ({"nested": [1, 2.5]}, "x" * 5000),
    ],
)
def test_completion_template_is_the_json_of_the_completion(model, content):
    served, created, prompt_tokens = 12, 1_700_000_000, 345
    completion = {
        "id": f"chatcmpl-scripted-{served}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(content.split()),
            "total_tokens": prompt_tokens + len(content.split()),
        },
    }
    expected = json.dumps(completion, ensure_ascii=False).encode("utf-8")
    got = core._completion(served, created, model, content, prompt_tokens, len(content.split()))
    assert got == expected


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": [1, 2.5, "x", null, true], "b": {"c": "\\u00e9"}}',
        b'{"a": NaN, "b": Infinity}',  # the standard library's extension
        b'{"big": 123456789012345678901234567890}',  # beyond 64 bits
        b'{"s": "\\ud800"}',  # a lone surrogate
        '{"s": "utf-16"}'.encode("utf-16"),
        b'{"dup": 1, "dup": 2}',
    ],
)
def test_loads_agrees_with_the_standard_library(body):
    assert repr(core._loads(body)) == repr(json.loads(body))


@pytest.mark.parametrize("body", [b"", b"{", b'{"a": 1} x', b"\xff\xfe\x00"])
def test_loads_rejects_what_the_standard_library_rejects(body):
    with pytest.raises((json.JSONDecodeError, UnicodeDecodeError)):
        json.loads(body)
    with pytest.raises((json.JSONDecodeError, UnicodeDecodeError)):
        core._loads(body)


def test_cached_word_counts_agree_with_split():
    script = core._Script({})
    texts = ["", " ", "one", " two  words ", "tab\tand\nnew line", "nbsp\u00a0word", "\u3000x y"]
    texts += ["word " * 600, None, 12, ["list"]]
    for _ in range(2):  # the second time from the cache
        assert [script.words(t) for t in texts] == [len(str(t or "").split()) for t in texts]


def test_word_cache_stays_bounded():
    script = core._Script({})
    for i in range(core._WORD_CACHE_SIZE + 10):
        assert script.words(f"w{i} x") == 2
    assert len(script.word_counts) <= core._WORD_CACHE_SIZE


@pytest.mark.parametrize(
    "body",
    [
        b'{"x": [[{"y": 99999999999999999999}]]}',  # nested, beyond 64 bits
        b'{"x": -99999999999999999999}',
        b'{"x": 18446744073709551615}',  # 2**64 - 1
        b'{"x": 1e300, "y": 1.5, "z": 9223372036854775807}',
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7}',
    ],
)
def test_loads_keeps_integers_beyond_64_bits(body):
    got, expected = core._loads(body), json.loads(body)
    assert repr(got) == repr(expected)


#: the asker-turn pattern as first written (``^Q``): the faster one must match the same
_FIRST_ASKER_TURN_PATTERN = r'(?m)(?:You asked:|^Q\d+: |"clarification", "output": "[^<])'


def test_asker_turn_pattern_matches_as_first_written():
    import random
    import re

    from ambitab_gym.testing.llm_server import ASKER_TURN_PATTERN

    fast, first = re.compile(ASKER_TURN_PATTERN), re.compile(_FIRST_ASKER_TURN_PATTERN)
    rng = random.Random(19)
    pieces = ["Q", "Q7: ", "1", "23", ":", " ", "\n", "\r\n", "You asked:", "<", "x", "é"]
    pieces += ['"clarification", "output": "', '"clarification", "output": "<']
    texts = ["", "Q1: a", "\nQ1: a", "xQ1: a", "Q1:a", "Q: a"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 40))) for _ in range(5000)]
    for text in texts:
        assert fast.findall(text) == first.findall(text), text
    assert len(fast.findall("Q1: a\nQ2: b\nzQ3: c\nYou asked: d")) == 3
