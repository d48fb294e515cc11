"""Campaign identity (issue 17, item 4): the corpus origin, its checksum and the package version
are part of the campaign id; a results file refuses to mix a campaign's episodes over other data.

The built corpus is a real corpus folder in a fresh data home (what ``ambitab-gym build``
writes): a copy of the bundled sample, so the two share a name and differ in origin.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil

import pytest

from ambitab_gym.cli import main
from ambitab_gym.corpora import BUNDLED_DIR, load_corpus
from ambitab_gym.corpora.home import built_corpora_dir
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
from ambitab_gym.evaluation.identity import (
    CHECKSUM_CACHE,
    CampaignMismatch,
    corpus_checksum,
    corpus_files,
    identity_of,
)


def build_copy(name: str = "taco"):
    """A built corpus of the same name: the bundled folder copied into the data home."""
    target = built_corpora_dir() / name
    shutil.copytree(BUNDLED_DIR / name, target)
    return target


def test_checksum_is_the_sha256_of_manifest_records_and_databases(data_home):
    corpus = load_corpus("taco")
    lines = []
    for label, path in corpus_files(corpus):
        lines.append(f"{label}\t{hashlib.sha256(path.read_bytes()).hexdigest()}\n")
    assert corpus_checksum(corpus) == hashlib.sha256("".join(lines).encode()).hexdigest()
    names = [label for label, _ in corpus_files(corpus)]
    assert names[:2] == ["manifest.json", "records"]
    assert sorted(n.split(":", 1)[1] for n in names[2:]) == sorted(corpus.manifest.databases)


def test_checksum_follows_the_content_and_is_cached(data_home):
    folder = build_copy()
    corpus = load_corpus("taco")
    assert corpus.origin == "built"
    first = corpus_checksum(corpus)
    cache = json.loads((data_home / "cache" / CHECKSUM_CACHE).read_text())
    assert str((folder / "manifest.json").resolve()) in cache
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["description"] += " Rebuilt."
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert corpus_checksum(load_corpus("taco")) != first


def test_a_built_and_a_bundled_corpus_of_one_name_get_different_ids(data_home, tmp_path):
    config = CampaignConfig("AmbiTab-TACO-v0", asker="generic", limit=3)
    bundled = load_corpus("AmbiTab-TACO-v0")
    assert bundled.origin == "bundled"
    bundled_id = config.stored_id(bundled)
    build_copy()
    built = load_corpus("AmbiTab-TACO-v0")
    assert built.origin == "built"
    assert config.stored_id(built) != bundled_id
    # same bytes, other origin: the checksums agree, the ids do not
    assert identity_of(built).checksum == identity_of(bundled).checksum
    # another package version is another campaign too
    other = dataclasses.replace(identity_of(built), version="99.0.0")
    assert other.campaign_id(config.campaign_id) != config.stored_id(built)


def test_mixing_is_refused_and_new_campaign_keeps_them_apart(data_home, tmp_path):
    results = tmp_path / "r.duckdb"
    config = CampaignConfig("AmbiTab-TACO-v0", asker="generic", limit=3)
    first = run_campaign(config, results, progress=False)
    assert first.corpus["origin"] == "bundled" and first.episodes == 9
    build_copy()
    with pytest.raises(CampaignMismatch) as refused:
        run_campaign(config, results, progress=False)
    message = str(refused.value)
    assert first.campaign_id in message
    assert "corpus origin: 'built' here, 'bundled' stored" in message
    assert "--results" in message and "--new-campaign" in message
    with ResultsStore(results) as store:
        assert len(store.campaigns()) == 1 and len(store.episodes()) == 9  # nothing added
    second = run_campaign(config, results, progress=False, new_campaign=True)
    assert second.campaign_id != first.campaign_id and second.corpus["origin"] == "built"
    with ResultsStore(results) as store:
        stored = {c["campaign_id"]: c for c in store.campaigns()}
        assert set(stored) == {first.campaign_id, second.campaign_id}
        assert stored[second.campaign_id]["corpus_origin"] == "built"
        assert stored[first.campaign_id]["corpus_origin"] == "bundled"
        assert {c["campaign_name"] for c in stored.values()} == {config.campaign_id}
        assert len(store.episodes(first.campaign_id)) == len(store.episodes(second.campaign_id))
    # resuming the new campaign needs no flag, and runs nothing
    assert run_campaign(config, results, progress=False) == second


def test_the_command_refuses_with_exit_2_and_prints_the_corpus(data_home, tmp_path, capsys):
    results = tmp_path / "r.duckdb"
    argv = ["evaluate", "AmbiTab-TACO-v0", "--limit", "2", "--no-progress"]
    argv += ["--results", str(results), "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    bundled = identity_of(load_corpus("taco"))
    assert f"corpus taco (bundled, {bundled.path}, checksum {bundled.checksum[:12]})" in (
        captured.out
    )
    payload = json.loads(captured.out.strip().splitlines()[-1])
    assert payload["corpus"]["origin"] == "bundled"
    assert payload["corpus"]["checksum"] == bundled.checksum
    folder = build_copy()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds campaign" in err and "--new-campaign" in err and "'built' here" in err
    assert main([*argv, "--new-campaign"]) == 0
    out = capsys.readouterr().out
    assert f"corpus taco (built, {folder.resolve()}, checksum" in out
    with ResultsStore(results) as store:
        assert len(store.campaigns("evaluate")) == 2


def test_a_config_hash_still_finds_its_campaign(tmp_path):
    config = CampaignConfig("AmbiTab-TACO-v0", asker="generic", limit=2)
    summary = run_campaign(config, tmp_path / "r.duckdb", progress=False)
    assert summary.campaign_id == config.stored_id() != config.campaign_id
    with ResultsStore(tmp_path / "r.duckdb") as store:
        assert store.campaign(config.campaign_id)["campaign_id"] == summary.campaign_id
        assert store.episodes(config.campaign_id) == store.episodes(summary.campaign_id)
        assert len(store.episodes(config.campaign_id)) == summary.episodes == 6


def test_leakage_campaigns_refuse_mixing_too(data_home, tmp_path, capsys):
    results = tmp_path / "r.duckdb"
    argv = ["leakage", "AmbiTab-TACO-v0", "--asker", "generic"]
    argv += ["--oracle", "generic-credit-matcher", "--limit", "4", "--resamples", "50"]
    argv += ["--no-progress", "--results", str(results)]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "corpus taco (bundled," in first
    build_copy()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds campaign" in err and "'built' here, 'bundled' stored" in err
    assert main([*argv, "--new-campaign"]) == 0
    assert "corpus taco (built," in capsys.readouterr().out
    with ResultsStore(results) as store:
        campaigns = store.campaigns("leakage")
        assert [c["corpus_origin"] for c in campaigns] == ["bundled", "built"]
        counts = [len(store.episodes(c["campaign_id"])) for c in campaigns]
    assert counts[0] == counts[1] > 0


def test_a_campaign_from_before_identities_is_kept_apart(tmp_path):
    """A results file written by an earlier version: its campaign is keyed by the bare
    configuration hash and holds episodes; the same configuration now is refused, then (with
    new_campaign) stored next to it, and each id still reads its own episodes."""
    results = tmp_path / "r.duckdb"
    config = CampaignConfig("AmbiTab-TACO-v0", asker="generic", limit=2)
    with ResultsStore(results) as store:
        store.add_campaign(config.campaign_id, {"old": True}, kind="evaluate", corpus="taco")
        store.add_episode({"campaign_id": config.campaign_id, "condition": "none", "seed": 0,
                           "record_id": "old-record", "success": 1.0})
    with pytest.raises(CampaignMismatch, match="'unknown' stored"):
        run_campaign(config, results, progress=False)
    summary = run_campaign(config, results, progress=False, new_campaign=True)
    with ResultsStore(results) as store:
        listed = [c["campaign_id"] for c in store.campaigns()]
        assert listed == [config.campaign_id, summary.campaign_id]
        assert [r["record_id"] for r in store.episodes(config.campaign_id)] == ["old-record"]
        assert len(store.episodes(summary.campaign_id)) == summary.episodes == 6
        assert store.campaign(config.campaign_id)["config"] == {"old": True}
