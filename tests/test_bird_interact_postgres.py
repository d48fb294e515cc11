"""BIRD-Interact on a real PostgreSQL server agrees with its default DuckDB run.

The bundled sample databases are loaded into a throwaway PostgreSQL 15 cluster; every record is
verified against the reference SQL of every record of its AVT (itself and its siblings) on both
engines, and the verdicts must agree: the record's own reference succeeds and the other readings
fail, on DuckDB and on PostgreSQL alike.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)

import ambitab_gym
from ambitab_gym.corpora import load_corpus
from ambitab_gym.verify import Verifier, results_match
from ambitab_gym.verify.postgres import load_corpus_databases
from ambitab_gym.verify.verifier import is_write_task

CORPUS = "bird_interact"
ENV_ID = "AmbiTab-BIRD-Interact-v0"


@pytest.fixture(scope="module")
def reader_dsn(postgres_cluster):  # noqa: F811
    return load_corpus_databases(load_corpus(CORPUS), postgres_cluster.dsn())


@pytest.fixture(scope="module")
def verifiers(reader_dsn, postgres_cluster):  # noqa: F811
    duck_corpus = load_corpus(CORPUS)
    # the Management tasks write: their scratch databases need a superuser connection
    options = {"dsn": reader_dsn, "admin_dsn": postgres_cluster.dsn()}
    pg_corpus = load_corpus(CORPUS, engine_override="postgres", options=options)
    duck, pg = Verifier(duck_corpus.open_engine), Verifier(pg_corpus.open_engine)
    yield duck_corpus, duck, pg
    duck.close()
    pg.close()


def test_every_record_gets_the_same_verdicts_on_both_engines(verifiers):
    corpus, duck, pg = verifiers
    assert corpus.manifest.engine == "duckdb" and len(corpus.records) > 0
    disagreements = []
    for record in corpus.records:
        for sibling in corpus.siblings(record):
            sql = sibling.verification.reference_sql
            on_duck, on_pg = duck.verify(record, sql), pg.verify(record, sql)
            expected = sibling.id == record.id
            if not (on_duck.success == on_pg.success == expected):
                disagreements.append(
                    (record.id, sibling.id, expected, on_duck.reason, on_pg.reason, on_pg.detail)
                )
    assert disagreements == []


def test_reference_results_match_across_engines(verifiers):
    corpus, duck, pg = verifiers
    for record in corpus.records:
        if is_write_task(record):  # no result to compare: checked by its test cases above
            continue
        on_duck, on_pg = duck.reference_rows(record), pg.reference_rows(record)
        assert on_duck is not None and on_pg is not None, record.id
        assert results_match(
            on_pg, on_duck, record.verification.compare, reference_normalized=True
        ), record.id


def test_gym_make_runs_on_the_server(reader_dsn):
    assert ambitab_gym.STOP  # the import registers the env ids
    corpus = load_corpus(CORPUS)
    record = next(r for r in corpus.records if r.m > 0)
    env = gym.make(ENV_ID, engine="postgres", engine_options={"dsn": reader_dsn}, mode="agent")
    try:
        unwrapped = env.unwrapped
        assert unwrapped.corpus.engine_override == "postgres"
        obs, _ = env.reset(options={"record_id": record.id})
        if not record.spec.schema_text:  # the schema comes from the server's catalogs
            assert "CREATE TABLE" in obs["task"]
        obs, _, terminated, _, _ = env.step(ambitab_gym.STOP)
        assert not terminated and obs["phase"] == 1
        _, _, terminated, _, info = env.step(record.verification.reference_sql)
        assert terminated and info["success"] is True
        engine = unwrapped.verifier.engine(record.verification.engine, record.verification.database)
        assert engine.name == "postgres"
        obs, _ = env.reset(options={"record_id": record.id})
        env.step(ambitab_gym.STOP)
        _, _, _, _, info = env.step("DROP TABLE IF EXISTS anything")
        assert info["success"] is False and info["verdict_reason"] == "rejected"
    finally:
        env.close()
