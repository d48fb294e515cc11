"""Corpus selection: ``gym.make(ID, corpus=PATH)``, built corpora over bundled samples, and the
env stating (in its metadata and one log line) which corpus it loaded."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import ambitab_gym  # registers the env ids
from ambitab_gym.corpora import BUNDLED_DIR, Corpus, CorpusNotFound, load_corpus

MARKER = "(edited copy)"


def edited_copy(target: Path, source: str = "bird", keep_avts: int = 2) -> list[dict]:
    """Copy a bundled corpus to ``target`` keeping its first AVTs, with a marked request."""
    shutil.copytree(BUNDLED_DIR / source, target)
    path = target / "records.jsonl"
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    avt_ids = list(dict.fromkeys(r["avt_id"] for r in records))[:keep_avts]
    kept = [r for r in records if r["avt_id"] in avt_ids]
    for record in kept:
        record["spec"]["request"] = f"{record['spec']['request']} {MARKER}"
    path.write_text("".join(json.dumps(r) + "\n" for r in kept), "utf-8")
    return kept


def selection_lines(caplog) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "ambitab_gym" and r.levelno == logging.INFO and "corpus" in r.getMessage()
    ]


def test_corpus_path_is_loaded(tmp_path, data_home):
    folder = tmp_path / "my_bird"
    kept = edited_copy(folder)
    env = gym.make("AmbiTab-Bird-v0", corpus=str(folder))
    try:
        unwrapped = env.unwrapped
        assert unwrapped.corpus.path == folder.resolve()
        assert [r.id for r in unwrapped.records] == [r["id"] for r in kept]
        assert unwrapped.metadata["corpus"] == "bird"
        assert unwrapped.metadata["corpus_origin"] == "path"
        assert Path(unwrapped.metadata["corpus_path"]) == folder.resolve()
        assert env.spec.kwargs["corpus"] == str(folder)
        obs, _ = env.reset(seed=0)
        assert obs["task"].splitlines()[0].endswith(MARKER)
    finally:
        env.close()


def test_corpus_path_wins_over_the_env_ids_own_corpus(tmp_path, data_home):
    folder = tmp_path / "bird_copy"
    edited_copy(folder)
    env = gym.make("ambitab_gym:AmbiTab-TACO-v0", corpus=folder)
    try:
        assert env.unwrapped.metadata["corpus"] == "bird"
        assert env.unwrapped.metadata["corpus_origin"] == "path"
    finally:
        env.close()


def test_bundled_sample_without_a_built_corpus(data_home, caplog):
    with caplog.at_level(logging.INFO, logger="ambitab_gym"):
        env = gym.make("AmbiTab-Bird-v0")
    try:
        meta = env.unwrapped.metadata
        assert meta["corpus_origin"] == "bundled"
        assert Path(meta["corpus_path"]) == (BUNDLED_DIR / "bird").resolve()
        assert len(env.unwrapped.records) == len(load_corpus("bird").records)
        lines = selection_lines(caplog)
        assert len(lines) == 1
        assert "bundled" in lines[0].getMessage()
    finally:
        env.close()


def test_built_corpus_in_the_data_home_takes_precedence(data_home, caplog):
    built = data_home / "corpora" / "bird"
    kept = edited_copy(built, keep_avts=3)
    with caplog.at_level(logging.INFO, logger="ambitab_gym"):
        env = gym.make("AmbiTab-Bird-v0")
    try:
        unwrapped = env.unwrapped
        assert unwrapped.metadata["corpus"] == "bird"
        assert unwrapped.metadata["corpus_origin"] == "built"
        assert Path(unwrapped.metadata["corpus_path"]) == built.resolve()
        assert [r.id for r in unwrapped.records] == [r["id"] for r in kept]
        obs, _ = env.reset(seed=1)
        assert obs["task"].splitlines()[0].endswith(MARKER)
        lines = selection_lines(caplog)
        assert len(lines) == 1, [r.getMessage() for r in lines]
        message = lines[0].getMessage()
        assert "built" in message and str(built.resolve()) in message
    finally:
        env.close()


def test_selection_by_name_follows_the_data_home(data_home):
    built = data_home / "corpora" / "ew_bird"
    edited_copy(built, source="ew_bird", keep_avts=1)
    assert load_corpus("ew_bird").origin == "built"
    assert load_corpus("AmbiTab-EW-Bird-v0").path == built.resolve()
    shutil.rmtree(built)
    assert load_corpus("AmbiTab-EW-Bird-v0").origin == "bundled"


def test_built_corpus_runs_an_episode(data_home):
    built = data_home / "corpora" / "bird"
    kept = edited_copy(built)
    env = gym.make("AmbiTab-Bird-v0", mode="agent")
    try:
        record = next(r for r in kept if r["ambiguities"])
        env.reset(seed=0, options={"record_id": record["id"]})
        env.step(ambitab_gym.STOP)
        _, _, terminated, _, info = env.step(record["verification"]["reference_sql"])
        assert terminated and info["success"] is True
    finally:
        env.close()


def test_unknown_corpus_says_what_is_available(tmp_path, data_home):
    with pytest.raises(CorpusNotFound, match="available: .*AmbiTab-Bird-v0"):
        gym.make("AmbiTab-Bird-v0", corpus="no_such_corpus")
    with pytest.raises(CorpusNotFound, match="manifest.json is missing"):
        Corpus(tmp_path)
