"""The reply cache (issue 32): reruns of an LLM campaign reproduce exactly, whatever the server does.

The scripted server (``ambitab_gym.testing.llm_server``) is made nondeterministic: its solver
writes ``SELECT n`` and its responder answers ``... n`` with n counting the requests it has
answered, so a rerun without the cache gets other replies (checked), and every test counts the
requests the server received.

* Two runs of a campaign with one cache store the same rows (every column but timings), and the
  second makes no request; from the command line, also with ``--llm-cache-only`` and no server.
* Two worker processes (``ProcessExecutor``) share one cache file: the rerun makes no request.
* A campaign interrupted mid-run and resumed with the cache replays the replies it had.
* A damaged file, a file that is not SQLite, another program's SQLite database and a newer
  layout are refused with a message saying so.
* The key is the request body without the URL: another server with the same model hits; another
  model, message, sampling or seed misses.
* llama.cpp (xllamacpp, SmolLM2-135M, one slot; skipped without them): with prompt caching on
  (its default), one request with one seed gets another reply once its prompt is cached; with
  ``cache_prompt: false`` it repeats; with the reply cache a rerun replays the first reply
  without a request (3-25 s here, on 2 shared cores).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from llm_helpers import llama_server

from ambitab_gym.cli import main as cli_main
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
from ambitab_gym.llm import LLMClient, ReplyCache, ReplyCacheError
from ambitab_gym.llm.cache import request_key
from ambitab_gym.llm.usage import format_usage
from ambitab_gym.testing.llm_server import ROLE_MARKERS, ScriptRule, role_rules

CORPUS = "AmbiTab-Bird-v0"
#: columns that measure time, the only ones allowed to differ between runs
TIMING = ("timings", "elapsed_s", "created_at")


def shifting_rules(latency_s: float | None = None) -> list[ScriptRule]:
    """The four roles, the solver's SQL and the responder's answer numbered by the requests the
    server has answered: the same request gets another reply on every run."""
    rules = role_rules(
        ["Which period do you mean?"],
        matcher=json.dumps({"action": "unanswerable()"}),
        latency_s=latency_s,
    )
    return [
        *rules[:2],
        ScriptRule(
            json.dumps({"answer": "Answer {n}."}), when=ROLE_MARKERS["responder"],
            latency_s=latency_s,
        ),
        ScriptRule(
            json.dumps({"type": "final_sql", "output": "SELECT {n}"}),
            when=ROLE_MARKERS["solver"], latency_s=latency_s,
        ),
    ]  # fmt: skip


def config(limit: int = 6) -> CampaignConfig:
    return CampaignConfig(
        CORPUS, asker="llm:direct", solver="llm", conditions=("asker",), seeds=(0,), limit=limit
    )


def rows(path: Path) -> list[dict]:
    """The stored episodes without their timing columns, in a fixed order."""
    with ResultsStore(path) as store:
        found = [{k: v for k, v in row.items() if k not in TIMING} for row in store.episodes()]
    return sorted(found, key=lambda r: (r["condition"], r["seed"], r["record_id"]))


def log_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


# -- reruns ----------------------------------------------------------------------------------------


def test_a_rerun_with_the_cache_makes_no_call_and_stores_the_same_rows(
    serve, make_client, tmp_path
):
    server = serve(shifting_rules())
    cache = tmp_path / "replies.sqlite"
    first = make_client(server.url, cache=cache, log_path=tmp_path / "first.jsonl")
    run_campaign(config(), tmp_path / "a.duckdb", concurrency=3, llm_client=first, progress=False)
    made = server.stats()["requests"]
    assert made > 6 and first.usage.calls == made and first.usage.cache_hits == 0
    with ReplyCache(cache) as stored:
        assert len(stored) == made

    again = make_client(server.url, cache=cache, log_path=tmp_path / "again.jsonl")
    run_campaign(config(), tmp_path / "b.duckdb", concurrency=3, llm_client=again, progress=False)
    assert server.stats()["requests"] == made  # not one request
    assert rows(tmp_path / "b.duckdb") == rows(tmp_path / "a.duckdb")
    usage = again.usage
    assert (usage.calls, usage.attempts, usage.prompt_tokens, usage.cache_hits) == (0, 0, 0, made)
    assert usage.cached_prompt_tokens == first.usage.prompt_tokens
    assert "cache hits" in format_usage(again.usage_by_role)
    entries = log_lines(tmp_path / "again.jsonl")
    assert len(entries) == made and all(e["cached"] and e["attempts"] == 0 for e in entries)
    assert not any(e["cached"] for e in log_lines(tmp_path / "first.jsonl"))

    # the control: without the cache, the same campaign gets other replies from this server
    plain = make_client(server.url)
    run_campaign(config(), tmp_path / "c.duckdb", concurrency=3, llm_client=plain, progress=False)
    assert rows(tmp_path / "c.duckdb") != rows(tmp_path / "a.duckdb")


def _evaluate(url: str, tmp_path: Path, results: str, *extra: str) -> list[str]:
    return (
        ["evaluate", CORPUS, "--asker", "llm:direct", "--solver", "llm", "--oracle", "llm"]
        + ["--limit", "2", "--json", "--no-progress", "--results", str(tmp_path / results)]
        + ["--llm-url", url, "--model", "m", "--concurrency", "2", *extra]
    )


def test_evaluate_with_llm_cache_reruns_without_a_call_or_a_server(serve, tmp_path, capsys):
    server = serve(shifting_rules())
    cache = str(tmp_path / "replies.sqlite")
    assert cli_main(_evaluate(server.url, tmp_path, "a.duckdb", "--llm-cache", cache)) == 0
    out, err = capsys.readouterr()
    assert f"LLM replies come from/go to the cache {cache} (0 stored)" in err
    made = server.stats()["requests"]
    assert json.loads(out.splitlines()[-1])["llm_usage"]["solver"]["cache_hits"] == 0

    assert cli_main(_evaluate(server.url, tmp_path, "b.duckdb", "--llm-cache", cache)) == 0
    out, err = capsys.readouterr()
    assert server.stats()["requests"] == made
    usage = json.loads(out.splitlines()[-1])["llm_usage"]
    assert sum(u["calls"] for u in usage.values()) == 0
    assert sum(u["cache_hits"] for u in usage.values()) == made
    assert rows(tmp_path / "b.duckdb") == rows(tmp_path / "a.duckdb")

    # someone else, without the server (nor a GPU): the cache and the same command line
    url = server.url
    server.stop()
    argv = _evaluate(url, tmp_path, "c.duckdb", "--llm-cache", cache, "--llm-cache-only")
    assert cli_main(argv) == 0
    out, err = capsys.readouterr()
    assert "replies come from the cache" in err and "only (--llm-cache-only)" in err
    assert rows(tmp_path / "c.duckdb") == rows(tmp_path / "a.duckdb")

    # without the cache, the line says what a rerun needs instead
    server = serve(shifting_rules())
    assert cli_main(_evaluate(server.url, tmp_path, "d.duckdb")) == 0
    err = capsys.readouterr().err
    assert "no --llm-cache: a rerun reproduces only if the server is deterministic" in err
    assert "--no-cache-prompt" in err and "VLLM_BATCH_INVARIANT=1" in err


def test_cache_only_fails_a_request_the_cache_lacks(make_client, tmp_path):
    cache = ReplyCache(tmp_path / "replies.sqlite", offline=True)
    client = make_client("http://127.0.0.1:9/v1", cache=cache, log_path=tmp_path / "log.jsonl")
    with pytest.raises(Exception) as caught:
        client.chat([{"role": "user", "content": "hello"}], seed=1)
    assert getattr(caught.value, "category", None) == "cache_miss"
    assert "--llm-cache-only" in str(caught.value)
    assert client.usage.errors == {"cache_miss": 1} and client.usage.attempts == 0
    (entry,) = log_lines(tmp_path / "log.jsonl")
    assert entry["error"].startswith("cache_miss") and entry["cached"] is False


def test_process_workers_share_one_cache_file(serve, tmp_path):
    from ambitab_gym.evaluation.process_executor import ProcessExecutor

    server = serve(shifting_rules())
    cache = tmp_path / "replies.sqlite"
    with ProcessExecutor(workers=2) as executor:
        executor.chunk = 2
        with LLMClient(server.url, "m", cache=cache) as client:
            run_campaign(
                config(4), tmp_path / "a.duckdb", concurrency=4, llm_client=client,
                progress=False, executor=executor,
            )  # fmt: skip
            made = server.stats()["requests"]
            assert client.usage.calls == made > 4 and client.usage.cache_hits == 0
        with ReplyCache(cache) as stored:  # both workers wrote to the one file
            assert len(stored) == made
        with LLMClient(server.url, "m", cache=cache) as client:
            run_campaign(
                config(4), tmp_path / "b.duckdb", concurrency=4, llm_client=client,
                progress=False, executor=executor,
            )  # fmt: skip
            assert server.stats()["requests"] == made
            assert client.usage.calls == 0 and client.usage.cache_hits == made
        assert len(set(executor.worker_pids)) == 2
    assert rows(tmp_path / "b.duckdb") == rows(tmp_path / "a.duckdb")


class StoreDied(Exception):
    """The results store 'dies' (as a killed campaign would) after a few rows."""


class DyingStore(ResultsStore):
    survive = 3

    def add_episode(self, row: dict) -> None:
        if self.survive == 0:
            raise StoreDied
        self.survive -= 1
        super().add_episode(row)


def test_an_interrupted_campaign_resumed_with_the_cache_replays_its_replies(
    serve, make_client, tmp_path
):
    server = serve(shifting_rules(latency_s=0.02))
    cache = tmp_path / "replies.sqlite"
    results = tmp_path / "r.duckdb"
    first = make_client(server.url, cache=cache, log_path=tmp_path / "first.jsonl")
    store = DyingStore(results)
    with pytest.raises(StoreDied):
        run_campaign(config(8), store, concurrency=4, llm_client=first, progress=False)
    store.close()
    stored = {row["record_id"] for row in rows(results)}
    assert len(stored) == 3
    made = server.stats()["requests"]
    before = {
        (e["episode"]["record"], e["role"], e["turn"]): e["raw"]
        for e in log_lines(tmp_path / "first.jsonl")
    }

    resumed = make_client(server.url, cache=cache, log_path=tmp_path / "resumed.jsonl")
    run_campaign(config(8), results, concurrency=4, llm_client=resumed, progress=False)
    assert len(rows(results)) == 8
    entries = log_lines(tmp_path / "resumed.jsonl")
    assert not {e["episode"]["record"] for e in entries} & stored  # resume: only the rest ran
    replayed = [e for e in entries if (e["episode"]["record"], e["role"], e["turn"]) in before]
    assert replayed, "no episode was in flight when the campaign stopped"
    # every call the interrupted run had made came back from the cache, as it was
    assert all(e["cached"] for e in replayed)
    assert [e["raw"] for e in replayed] == [
        before[(e["episode"]["record"], e["role"], e["turn"])] for e in replayed
    ]
    fresh = [e for e in entries if not e["cached"]]
    assert server.stats()["requests"] - made == len(fresh) == resumed.usage.calls
    assert resumed.usage.cache_hits == len(replayed)


# -- the key ---------------------------------------------------------------------------------------


def test_the_key_is_the_request_body_without_the_url(serve, make_client, tmp_path):
    one = serve([ScriptRule("Reply {n}.")])
    two = serve([ScriptRule("Other {n}.")])
    cache = tmp_path / "replies.sqlite"
    messages = [{"role": "user", "content": "Name a colour."}]
    asked = {"temperature": 0.7, "top_p": 0.9, "max_tokens": 20, "seed": 5}
    stored = make_client(one.url, cache=cache).chat(messages, **asked).text
    elsewhere = make_client(two.url, cache=cache)  # another server, the same model name
    assert elsewhere.chat(messages, **asked).text == stored == "Reply 0."
    assert two.stats()["requests"] == 0 and elsewhere.usage.cache_hits == 1

    changed = [
        ({"model": "another-model"}, messages, asked),
        ({}, [{"role": "user", "content": "Name a color."}], asked),
        ({}, messages + [{"role": "user", "content": "Another."}], asked),
        ({}, messages, {**asked, "temperature": 0.8}),
        ({}, messages, {**asked, "top_p": 0.95}),
        ({}, messages, {**asked, "max_tokens": 21}),
        ({}, messages, {**asked, "seed": 6}),
    ]
    for options, sent, params in changed:
        client = make_client(two.url, cache=cache, **options)
        assert client.chat(sent, **params).text.startswith("Other"), (options, sent, params)
        assert client.usage.cache_hits == 0 and client.usage.calls == 1
    assert two.stats()["requests"] == len(changed)
    # the key itself: the body's canonical JSON, key order ignored, every field counted
    body = {"model": "m", "messages": messages, **asked}
    assert request_key(body) == request_key(dict(reversed(list(body.items()))))
    assert len({request_key({**body, k: None}) for k in body} | {request_key(body)}) == 7


def test_role_calls_key_on_the_derived_seed_and_replay_the_answering_attempt(
    serve, make_client, tmp_path
):
    from ambitab_gym.llm import EpisodeKey, episode_scope

    server = serve([ScriptRule("Reply {n}.")])
    cache = tmp_path / "replies.sqlite"
    messages = [{"role": "user", "content": "Ask something."}]
    episode = EpisodeKey("c", "asker", 0, "rec-1")
    first = make_client(server.url, cache=cache)
    server.fail_next("http_500")  # the first attempt fails; the retry (another seed) answers
    with episode_scope(episode):
        answered = first.chat(messages, role="asker", turn=0)
        other_turn = first.chat(messages, role="asker", turn=1)
    assert answered.record.attempts == 2 and answered.text != other_turn.text
    again = make_client(server.url, cache=cache)
    with episode_scope(episode):
        replayed = again.chat(messages, role="asker", turn=0)
    assert (replayed.text, replayed.seed) == (answered.text, answered.seed)
    assert replayed.record.cached and again.usage.calls == 0
    with episode_scope(EpisodeKey("c", "asker", 1, "rec-1")):  # another seed: a miss
        again.chat(messages, role="asker", turn=0)
    assert again.usage.calls == 1 and again.usage.cache_hits == 1


# -- files that are not a reply cache --------------------------------------------------------------


def test_files_that_are_not_a_reply_cache_are_refused(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 20)
    with pytest.raises(
        ReplyCacheError, match="is not a usable ambitab-gym reply cache: it is not an SQLite"
    ):
        ReplyCache(text)

    damaged = tmp_path / "damaged.sqlite"
    good = ReplyCache(damaged)
    body = {"model": "m", "messages": []}
    good.put(request_key(body), body, '{"choices": []}', seed=None, attempts=1)
    good.close()
    data = bytearray(damaged.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)  # keep the header, ruin the pages
    damaged.write_bytes(bytes(data))
    for sidecar in ("-wal", "-shm"):
        Path(f"{damaged}{sidecar}").unlink(missing_ok=True)
    with pytest.raises(
        ReplyCacheError, match="is not a usable ambitab-gym reply cache: the file is damaged"
    ):
        ReplyCache(damaged)

    foreign = tmp_path / "other.sqlite"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER)")
    connection.close()
    with pytest.raises(
        ReplyCacheError, match=r"SQLite database of something else \(tables: orders\)"
    ):
        ReplyCache(foreign)

    newer = tmp_path / "newer.sqlite"
    ReplyCache(newer).close()
    with sqlite3.connect(newer) as connection:
        connection.execute("UPDATE cache_meta SET value = '2' WHERE name = 'version'")
    connection.close()
    with pytest.raises(ReplyCacheError, match="layout version 2; this ambitab-gym reads version 1"):
        ReplyCache(newer)


def test_evaluate_refuses_a_foreign_cache_before_anything_runs(serve, tmp_path, capsys):
    server = serve(shifting_rules())
    foreign = tmp_path / "results.sqlite"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE episodes (id INTEGER)")
    connection.close()
    argv = _evaluate(server.url, tmp_path, "r.duckdb", "--llm-cache", str(foreign))
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert f"{foreign} is not a usable ambitab-gym reply cache" in err
    assert server.stats()["requests"] == 0 and not (tmp_path / "r.duckdb").exists()


# -- a real server: llama.cpp's prompt cache changes replies, the reply cache does not -------------


@pytest.fixture(scope="module")
def one_slot_llama_url():
    # one slot: nothing but the prompt cache changes between requests
    with llama_server(n_ctx=2048, n_parallel=1) as url:
        yield url


def test_llamacpp_prompt_cache_changes_replies_and_the_reply_cache_does_not(
    one_slot_llama_url, make_client, tmp_path
):
    url = one_slot_llama_url
    system = "You are a careful assistant who answers questions about SQL databases. " * 6
    asked = {"temperature": 0.9, "top_p": 0.95, "max_tokens": 10, "seed": 7}
    other = [{"role": "user", "content": "Say hello."}]

    def messages(i: int) -> list[dict]:
        question = (
            f"Question {i}: explain what table number {i} of the shop database might hold and "
            "give one query."
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": question}]

    plain = make_client(url, model="smollm2", timeout_s=60)
    # prompt caching on (llama.cpp's default): the same request, the same seed, another reply
    # once its prompt is in the slot's cache (prompt evaluated as one token, not as a batch)
    for i in range(3):
        plain.chat(other, **asked)  # the slot now holds another prompt
        cold = plain.chat(messages(i), **asked).text
        warm = plain.chat(messages(i), **asked).text  # its prompt is cached now
        if cold != warm:
            break
    else:
        pytest.skip("this llama.cpp build gave bit-identical logits with and without its cache")
    # prompt caching off: the request repeats
    fixed = make_client(url, model="smollm2", timeout_s=60, extra_body={"cache_prompt": False})
    assert fixed.chat(messages(i), **asked).text == fixed.chat(messages(i), **asked).text
    # the reply cache: a rerun replays the first reply, whatever the server's caches hold now
    # (llama.cpp also keeps earlier prompts in host memory, --cache-ram, and restores them)
    cache = tmp_path / "replies.sqlite"
    fresh = messages(9)
    first = make_client(url, model="smollm2", timeout_s=60, cache=cache).chat(fresh, **asked)
    rerun = make_client(url, model="smollm2", timeout_s=60, cache=cache)
    assert rerun.chat(fresh, **asked).text == first.text
    assert rerun.usage.calls == 0 and rerun.usage.cache_hits == 1
