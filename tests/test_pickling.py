"""Envs, wrappers, adapters, engines and LLM clients pickle (issue 17 item 5, issue 18 item 4).

* After a verified solver-mode episode an env pickles; the copy holds no engine (they are
  reopened on first use), keeps the cached reference results, and plays the same episodes to
  the same verdicts as the original.
* With an LLM oracle attached (a real HTTP server on 127.0.0.1) an env pickles mid-episode: no
  connection pool, loop thread or lock travels; the copy continues the episode over its own
  connection, with its own usage count.
* Every wrapper (and a leakage stack, and the chat adapter) pickles mid-episode; the copy
  continues exactly as the original does.
* SQLite and DuckDB engines pickle by path and limits and answer the same queries; a
  PostgreSQL engine pickles by its connection settings, never a connection: an env verifying
  on a real PostgreSQL server, pickled, verifies alike over server sessions of its own.
* A pickled env runs in a freshly spawned process and returns the rewards the local env gives.
* The trainer adapters (TRL, verl, verifiers, SkyRL) pickle; a SkyRL env pickled mid-episode
  ends it with the original's reward.
"""

from __future__ import annotations

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import gymnasium as gym
import pytest
from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)

import ambitab_gym  # noqa: F401  (registers the env ids)
from ambitab_gym import registry
from ambitab_gym.corpora import load_corpus
from ambitab_gym.env import AmbiTabEnv
from ambitab_gym.evaluation.engine import create_oracle
from ambitab_gym.integrations.common import ChatSession
from ambitab_gym.llm import LLMClient
from ambitab_gym.oracles.llm import LLMMatcher
from ambitab_gym.policies.scripted import FullAsker
from ambitab_gym.testing.llm_server import ROLE_MARKERS, ScriptedServer, ScriptRule, role_rules
from ambitab_gym.verify import Limits
from ambitab_gym.verify.duckdb import DuckDBEngine, build_duckdb
from ambitab_gym.verify.postgres import PostgresEngine, load_corpus_databases
from ambitab_gym.verify.sqlite import SQLiteEngine
from ambitab_gym.verify.verifier import is_write_task
from ambitab_gym.wrappers import (
    AdversarialProbe,
    ChatMessages,
    HybridOracle,
    QuestionMenu,
    ResponseGuard,
    SpecificationRandomization,
)

CORPUS = load_corpus("bird")


def _solver_env(**kwargs) -> AmbiTabEnv:
    solver = registry.create("solver", "interpretation", corpus=CORPUS)
    return AmbiTabEnv(CORPUS, solver=solver, **kwargs)


def _full_episode(env, record_id: str) -> tuple[float, str, str | None]:
    """Play the full asker on one record; (reward, verdict reason, sql)."""
    env.reset(seed=0, options={"record_id": record_id})
    asker = FullAsker()
    asker.reset(seed=0, record=env.unwrapped.record)
    reward = 0.0
    while True:
        _, reward, terminated, truncated, _ = env.step(asker.act(env.unwrapped.public_view))
        if terminated or truncated:
            break
    trajectory = env.unwrapped.trajectory
    return float(reward), trajectory.verdict.reason, trajectory.sql


def test_an_env_pickles_after_a_verified_solver_mode_episode():
    env = _solver_env()
    record_ids = [r.id for r in CORPUS.records[:6]]
    before = [_full_episode(env, rid) for rid in record_ids]
    assert {reason for _, reason, _ in before} == {"match"}  # the verifier really ran
    assert env.verifier._engines  # an open engine (and its connection) the copy must not carry

    copy = pickle.loads(pickle.dumps(env))
    assert copy.verifier._engines == {}
    # the reference results computed so far travel (not recomputed in the copy)
    assert set(copy.verifier._references) == set(env.verifier._references) >= set(record_ids)
    after = [_full_episode(copy, rid) for rid in record_ids]
    assert after == before
    assert copy.verifier._engines  # reopened on first use
    # the original is untouched and still works
    assert _full_episode(env, record_ids[0]) == before[0]
    env.close()
    copy.close()


def test_an_env_with_an_llm_oracle_pickles_mid_episode():
    matcher = '{"reasoning": "scripted", "action": "labeled(\\"x\\")"}'
    rules = [
        ScriptRule(matcher, when=ROLE_MARKERS["matcher"]),
        ScriptRule('{"answer": "The scripted answer."}', when=ROLE_MARKERS["responder"]),
    ]
    with ScriptedServer(rules) as server, LLMClient(server.url, "m") as client:
        oracle = create_oracle("llm", CORPUS, llm_client=client)
        env = _solver_env(oracle=oracle)
        env.reset(seed=0, options={"record_id": CORPUS.records[0].id})
        env.step("What do you mean by that?")
        calls = server.stats()["requests"]
        assert calls >= 1 and client.usage.calls == calls
        assert client._loops or client._runner is not None  # a live pool / loop thread

        data = pickle.dumps(env)
        copy = pickle.loads(data)
        copied_client = copy.oracle.matcher.client
        assert isinstance(copy.oracle.matcher, LLMMatcher)
        assert copied_client is not client
        assert copied_client.base_url == client.base_url and copied_client.model == "m"
        assert copied_client.sampling == client.sampling
        # nothing live travelled: no pool, no loop thread; accounting starts afresh
        assert not copied_client._loops and copied_client._runner is None
        assert copied_client.usage.calls == 0
        # one client for matcher and responder, in the copy as in the original
        assert copy.oracle.responder.client is copied_client

        _, _, _, _, info = copy.step("And what about the other thing?")
        assert info["questions_asked"] == 2
        assert server.stats()["requests"] > calls  # the copy called over its own connection
        assert copied_client.usage.calls == server.stats()["requests"] - calls
        assert [t.answer for t in copy.trajectory.turns][:1] == [
            t.answer for t in env.trajectory.turns
        ]
        copied_client.close()


#: a record whose budget leaves room for questions after the first
MULTI = next(r.id for r in CORPUS.records if r.m >= 2)


def _wrapped(wrapper):
    env = wrapper(_solver_env())
    env.reset(seed=3, options={"record_id": MULTI})
    env.step(1 if isinstance(env, QuestionMenu) else "Which year do you mean?")
    return env


@pytest.mark.parametrize(
    "make",
    [
        lambda: _wrapped(ChatMessages),
        lambda: _wrapped(QuestionMenu),
        lambda: _wrapped(ResponseGuard),
        lambda: _wrapped(HybridOracle),
        lambda: _wrapped(SpecificationRandomization),
        lambda: _wrapped(AdversarialProbe),
        lambda: _wrapped(lambda e: SpecificationRandomization(HybridOracle(e))),
    ],
    ids=["chat", "menu", "guard", "hybrid", "spec-random", "adversarial", "stack"],
)
def test_wrappers_pickle_mid_episode_and_continue_alike(make):
    env = make()
    copy = pickle.loads(pickle.dumps(env))
    assert type(copy) is type(env)
    action = 2 if isinstance(env, QuestionMenu) else "STOP"  # a menu takes item numbers
    a = env.step(action)
    b = copy.step(action)
    assert a[1:4] == b[1:4]  # reward, terminated, truncated
    assert str(a[0]) == str(b[0])
    mine, theirs = env.unwrapped.trajectory, copy.unwrapped.trajectory
    assert [(t.question, t.answer, t.credits) for t in mine.turns] == [
        (t.question, t.answer, t.credits) for t in theirs.turns
    ]
    assert (mine.sql, mine.stop_reason) == (theirs.sql, theirs.stop_reason)


def test_gym_make_envs_and_the_chat_adapter_pickle():
    env = gym.make("AmbiTab-Bird-v0")
    env.reset(seed=1, options={"record_id": MULTI})
    env.step("Which one?")
    copy = pickle.loads(pickle.dumps(env))
    assert copy.step("STOP")[1:4] == env.step("STOP")[1:4]

    session = ChatSession("AmbiTab-Bird-v0")
    opening = session.start(record_id="bird-0014")
    session.step('What do you mean by "recently"?')
    restored = pickle.loads(pickle.dumps(session))
    assert opening
    assert restored.step("<STOP>")[1:3] == session.step("<STOP>")[1:3]
    assert restored.reward == session.reward


def test_sqlite_and_duckdb_engines_pickle_by_path_and_limits(tmp_path):
    record = CORPUS.records[0]
    limits = Limits(timeout_s=3.0, max_rows=50)
    sqlite_engine = CORPUS.open_engine(record.verification.engine, record.verification.database)
    assert isinstance(sqlite_engine, SQLiteEngine)
    sqlite_engine.limits = limits
    sql = record.verification.reference_sql
    expected = sqlite_engine.execute(sql)
    copy = pickle.loads(pickle.dumps(sqlite_engine))
    assert copy.path == sqlite_engine.path and copy.limits == limits
    assert copy._session is None  # no connection travelled
    assert copy.execute(sql) == expected
    copy.close()
    sqlite_engine.close()

    path = tmp_path / "t.duckdb"
    build_duckdb("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);", path)
    duck = DuckDBEngine(path, limits=limits)
    expected = duck.execute("SELECT sum(x) FROM t")
    duck_copy = pickle.loads(pickle.dumps(duck))
    assert duck_copy.limits == limits and duck_copy.worker_pid is None
    assert duck_copy.execute("SELECT sum(x) FROM t") == expected
    assert duck_copy.worker_pid != duck.worker_pid  # a worker process of its own
    duck.close()
    duck_copy.close()


def test_a_postgres_engine_pickles_its_settings_never_a_connection():
    engine = PostgresEngine(
        "host=127.0.0.1 port=1 user=agent", dbname="demo", pool_size=2, connect_timeout_s=1
    )
    copy = pickle.loads(pickle.dumps(engine))
    assert copy.dbname == "demo" and copy._params == engine._params
    assert copy._pool._size == 2 and copy._pool._idle == []
    with pytest.raises(Exception, match="cannot connect"):
        copy.execute("SELECT 1")  # it connects itself (here: nothing listens)
    engine.close()
    copy.close()


def _rewards_in_subprocess(data: bytes, record_ids: list[str]) -> list[tuple]:
    env = pickle.loads(data)
    return [_full_episode(env, rid) for rid in record_ids]


def test_a_pickled_env_runs_in_a_spawned_process():
    env = _solver_env()
    record_ids = [r.id for r in CORPUS.records[:4]]
    local = [_full_episode(env, rid) for rid in record_ids]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        remote = pool.submit(_rewards_in_subprocess, pickle.dumps(env), record_ids).result(120)
    assert remote == local
    env.close()


def test_an_llm_client_copy_keeps_settings_and_counts_its_own_calls():
    with ScriptedServer(role_rules()) as server:
        client = LLMClient(server.url, "m", temperature=0.3, max_retries=1, history=7)
        client.chat([{"role": "user", "content": "hello"}])
        copy = pickle.loads(pickle.dumps(client))
        assert (copy.base_url, copy.model, copy.params, copy.max_retries) == (
            client.base_url,
            client.model,
            client.params,
            1,
        )
        assert copy.calls.maxlen == 7 and len(copy.calls) == 0 and copy.usage.calls == 0
        copy.chat([{"role": "user", "content": "hello again"}])
        assert copy.usage.calls == 1 and client.usage.calls == 1
        assert server.stats()["requests"] == 2
        client.close()
        copy.close()


def test_an_env_verifying_on_postgres_pickles_and_opens_its_own_pool(postgres_cluster):  # noqa: F811
    reader_dsn = load_corpus_databases(load_corpus("bird_interact"), postgres_cluster.dsn())
    corpus = load_corpus("bird_interact", engine_override="postgres", options={"dsn": reader_dsn})
    solver = registry.create("solver", "interpretation", corpus=corpus)
    env = AmbiTabEnv(corpus, solver=solver)
    record_ids = [r.id for r in corpus.records if not is_write_task(r)][:3]
    before = [_full_episode(env, rid) for rid in record_ids]
    assert {reason for _, reason, _ in before} == {"match"}
    (engine,) = env.verifier._engines.values()
    assert isinstance(engine, PostgresEngine) and engine._pool._idle  # live connections

    copy = pickle.loads(pickle.dumps(env))
    assert copy.verifier._engines == {}
    assert [_full_episode(copy, rid) for rid in record_ids] == before
    (copied,) = copy.verifier._engines.values()
    assert copied is not engine and copied._params == engine._params
    mine = {c.info.backend_pid for c in engine._pool._idle}
    theirs = {c.info.backend_pid for c in copied._pool._idle}
    assert theirs and not mine & theirs  # its own server sessions
    env.close()
    copy.close()


def test_trainer_adapters_pickle():
    from ambitab_gym.integrations.skyrl import AmbiTabTextEnv
    from ambitab_gym.integrations.trl import AmbiTabToolEnvironment
    from ambitab_gym.integrations.verifiers import AmbiTabProtocol
    from ambitab_gym.integrations.verl import AmbiTabInteraction

    for adapter in (AmbiTabToolEnvironment(), AmbiTabInteraction({}), AmbiTabProtocol()):
        assert type(pickle.loads(pickle.dumps(adapter))) is type(adapter)
    env = AmbiTabTextEnv({"env_id": "AmbiTab-Bird-v0"}, {"record_id": "bird-0014"})
    env.init([])
    env.step('What do you mean by "recently"?')
    copy = pickle.loads(pickle.dumps(env))  # mid-episode
    mine, theirs = env.step("<STOP>"), copy.step("<STOP>")
    assert (theirs["done"], theirs["reward"]) == (mine["done"], mine["reward"]) == (True, 1.0)
