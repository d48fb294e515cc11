"""Corpus selection: ``gym.make(ID, corpus=PATH)``, built corpora over bundled samples, the env
stating (in its metadata and one log line) which corpus it loaded, and no surprise lookups: a
folder in the working directory named like a corpus changes nothing unless passed as a path."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import ambitab_gym  # registers the env ids
from ambitab_gym.cli import main
from ambitab_gym.corpora import BUNDLED_DIR, Corpus, CorpusNotFound, load_corpus
from ambitab_gym.records import RecordError
from ambitab_gym.validate import validate_corpus

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
        # the default split (docs/env.md, Splits): the bundled file's train records
        text = (BUNDLED_DIR / "bird" / "records.jsonl").read_text("utf-8")
        train = [r["id"] for r in map(json.loads, text.splitlines()) if r["split"] == "train"]
        assert [r.id for r in env.unwrapped.records] == train
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


def test_an_unknown_record_id_names_ids_to_use_instead():
    """The corpus lookup ``--record`` goes through: close ids (else the first few) and the file
    that lists them all."""
    corpus = load_corpus(BUNDLED_DIR / "bird")
    with pytest.raises(KeyError) as caught:
        corpus.record("nope")
    assert caught.value.args[0] == (
        "corpus 'bird' has no record 'nope' (ids look like 'bird-0001', 'bird-0002', "
        f"'bird-0003'; the {len(corpus)} record ids are the 'id' fields of "
        f"{corpus.path / 'records.jsonl'})"
    )
    with pytest.raises(KeyError, match=r"closest ids: 'bird-00\d1'"):
        corpus.record("bird-001")


# -- no surprise lookups: a folder in the working directory named like a corpus is ignored ------

DECOYS = ("ambiqt", "AmbiTab-AmbiQT-v0", "taco", "AmbiTab-TACO-v0")


@pytest.fixture
def decoy_cwd(tmp_path, monkeypatch):
    """A working directory holding corpus-shaped folders named like corpora and env ids, each
    with a valid manifest but a broken ``records.jsonl``: loading one fails loudly."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for name in DECOYS:
        source = "taco" if "taco" in name.lower() else "ambiqt"
        shutil.copytree(BUNDLED_DIR / source, cwd / name)
        (cwd / name / "records.jsonl").write_text("{broken json\n", "utf-8")
    monkeypatch.chdir(cwd)
    return cwd


def corpus_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ambitab_gym.corpora"]


@pytest.mark.parametrize(
    ("env_id", "name"), [("AmbiTab-AmbiQT-v0", "ambiqt"), ("AmbiTab-TACO-v0", "taco")]
)
def test_gym_make_ignores_a_corpus_named_folder_in_the_working_directory(
    decoy_cwd, data_home, caplog, env_id, name
):
    with caplog.at_level(logging.INFO, logger="ambitab_gym"):
        env = gym.make(env_id)
    try:
        unwrapped = env.unwrapped
        assert unwrapped.corpus.origin == "bundled"
        assert unwrapped.corpus.path == (BUNDLED_DIR / name).resolve()
        assert len(unwrapped.records) == len(
            (BUNDLED_DIR / name / "records.jsonl").read_text("utf-8").splitlines()
        )
        env.reset(seed=0)
    finally:
        env.close()
    lines = corpus_lines(caplog)
    assert len(lines) == 1 and "bundled" in lines[0]
    assert str((BUNDLED_DIR / name).resolve()) in lines[0]
    for reference in (name, env_id, f"ambitab_gym:{env_id}"):
        assert load_corpus(reference).path == (BUNDLED_DIR / name).resolve()


def test_a_built_corpus_still_wins_over_the_bundled_one_next_to_decoys(decoy_cwd, data_home):
    built = data_home / "corpora" / "ambiqt"
    kept = edited_copy(built, source="ambiqt", keep_avts=2)
    env = gym.make("AmbiTab-AmbiQT-v0")
    try:
        assert env.unwrapped.corpus.origin == "built"
        assert env.unwrapped.corpus.path == built.resolve()
        assert [r.id for r in env.unwrapped.records] == [r["id"] for r in kept]
    finally:
        env.close()


def test_a_folder_is_used_only_when_given_as_a_path(decoy_cwd, data_home):
    good = decoy_cwd / "mine"
    shutil.copytree(BUNDLED_DIR / "ambiqt", good)
    for reference in ("./mine", str(good), Path("mine")):
        corpus = load_corpus(reference)
        assert corpus.origin == "path" and corpus.path == good.resolve()
    # the decoy itself is reachable as a path, and then its broken records fail loudly
    with pytest.raises(RecordError):
        load_corpus("./ambiqt")
    with pytest.raises(RecordError):
        gym.make("AmbiTab-AmbiQT-v0", corpus=Path("ambiqt"))
    # a bare word is a name, never a folder here; the message says how to pass the folder
    with pytest.raises(CorpusNotFound, match=r"pass it as a path \('\./mine'\)"):
        load_corpus("mine")


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("reference", ["ambiqt", "AmbiTab-AmbiQT-v0"])
def test_validate_command_ignores_decoys(decoy_cwd, data_home, capsys, reference):
    status, out, _ = run_cli(["validate", reference, "--json"], capsys)
    report = json.loads(out.strip().splitlines()[-1])
    assert (status, report["ok"], report["origin"]) == (0, True, "bundled"), report
    assert Path(report["path"]) == (BUNDLED_DIR / "ambiqt").resolve()
    assert validate_corpus(reference) == []
    # the decoy, named as a path, is the one validated (and it is broken)
    status, out, _ = run_cli(["validate", "./AmbiTab-AmbiQT-v0", "--json"], capsys)
    report = json.loads(out.strip().splitlines()[-1])
    assert status == 1 and report["origin"] == "path" and not report["ok"]


def test_list_command_ignores_decoys(decoy_cwd, data_home, capsys):
    status, out, _ = run_cli(["list", "--json"], capsys)
    entries = json.loads(out.strip().splitlines()[-1])
    assert status == 0
    paths = {Path(e["path"]).resolve() for e in entries}
    assert (BUNDLED_DIR / "ambiqt").resolve() in paths
    assert all(decoy_cwd not in p.parents for p in paths), paths
    assert all("error" not in e for e in entries)


def test_evaluate_command_ignores_decoys(decoy_cwd, data_home, capsys):
    results = decoy_cwd.parent / "r.duckdb"
    argv = ["evaluate", "AmbiTab-AmbiQT-v0", "--limit", "2", "--results", str(results)]
    status, out, err = run_cli([*argv, "--json", "--no-progress"], capsys)
    assert status == 0, err
    assert f"corpus ambiqt (bundled, {(BUNDLED_DIR / 'ambiqt').resolve()}, checksum " in err
    assert json.loads(out.strip().splitlines()[-1])["episodes"] > 0
