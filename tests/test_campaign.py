"""Evaluation campaigns (issue 4): a hand-computed campaign, resume after kill -9, baselines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bundled import ALL_ENV_IDS
from tiny_corpus import write_tiny_corpus

from ambitab_gym.cli import main
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_corpus(tmp_path / "tiny")


def test_hand_computed_campaign(tiny, tmp_path):
    """Every figure worked out from first principles.

    Solver: InterpretationSolver (default reading unless an answer reveals another).
    none:  A1 ok, A2 fail, B1 ok, B2 fail, B3 fail, C1 ok (m = 0 skips asking) -> SR 3/6.
    full:  every ambiguity revealed -> all six succeed -> SR 6/6; p = r = 1.
    asker ("Which region do you mean?", "Please elaborate.", stop):
      A1, A2: q1 names no term -> refusal, q2 refusal: n = 2, p = 0, r = 0, F1 = 0.
              solver keeps the default: A1 ok, A2 fail.
      B1: q1 credits reg ("the north region"), q2 nothing: p = 1/2, r = 1/2, F1 = 1/2.
          revealed: north -> B1 and B3 agree (1 each), B2 0 -> first max = B1: ok.
      B2: revealed south -> B2: ok.   p = 1/2, r = 1/2, F1 = 1/2.
      B3: revealed north -> B1 (default among ties) -> fail. p = 1/2, r = 1/2, F1 = 1/2.
      C1: skipped, no question: success, precision undefined, recall/F1 undefined.
      SR = (A1 + B1 + B2 + C1) / 6 = 4/6.
      precision over n >= 1 (A1, A2, B1, B2, B3) = (0 + 0 + .5 + .5 + .5) / 5 = 0.3
      recall and F1 over m >= 1 (same five) = 0.3 each.
    gain = 4/6 - 3/6 = 1/6; gap = 6/6 - 4/6 = 1/3.
    """
    config = CampaignConfig(str(tiny), asker="tiny_corpus:RegionThenElaborate", seeds=(0, 1))
    summary = run_campaign(config, tmp_path / "r.duckdb", progress=False)
    assert summary.episodes == 2 * 3 * 6
    assert summary.sr["none"].mean == pytest.approx(3 / 6)
    assert summary.sr["full"].mean == pytest.approx(1.0)
    assert summary.sr["asker"].mean == pytest.approx(4 / 6)
    assert summary.precision.mean == pytest.approx(0.3)
    assert summary.recall.mean == pytest.approx(0.3)
    assert summary.f1.mean == pytest.approx(0.3)
    assert summary.gain.mean == pytest.approx(1 / 6)
    assert summary.gap.mean == pytest.approx(1 / 3)
    assert summary.sr["asker"].sd == 0.0  # a deterministic asker: identical seeds

    with ResultsStore(tmp_path / "r.duckdb") as store:
        rows = {(r["condition"], r["seed"], r["record_id"]): r for r in store.episodes()}
    b3 = rows[("asker", 0, "B3")]
    assert b3["dialogue"][0]["credits"] == ["reg"] and b3["dialogue"][1]["credits"] == []
    assert b3["success"] == 0.0 and b3["stop_reason"] == "asker" and b3["n_questions"] == 2
    assert rows[("asker", 0, "C1")]["stop_reason"] == "skipped"
    assert rows[("full", 1, "B3")]["success"] == 1.0


def test_evaluate_command_json_and_csv(tiny, tmp_path, capsys):
    status = main(
        [
            "evaluate",
            str(tiny),
            "--asker",
            "tiny_corpus:RegionThenElaborate",
            "--seeds",
            "1",
            "--results",
            str(tmp_path / "r.duckdb"),
            "--csv",
            str(tmp_path / "e.csv"),
            "--json",
        ]
    )
    assert status == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    data = json.loads(last)
    assert data["sr_none"] == pytest.approx(0.5) and data["sr_asker"] == pytest.approx(4 / 6)
    assert data["sr_full"] == 1.0 and data["precision"] == pytest.approx(0.3)
    assert data["episodes"] == 18
    lines = (tmp_path / "e.csv").read_text().strip().splitlines()
    assert len(lines) == 19 and lines[0].startswith("campaign_id,condition,seed,record_id")


def test_evaluate_runs_several_corpora_into_one_table(tiny, tmp_path, capsys):
    # the tiny corpus (hand-computed above: 18 episodes a seed, SR asker 4/6) and a copy of it
    # in another folder: one campaign each, one table, one CSV file each
    other = write_tiny_corpus(tmp_path / "copy")
    args = ["--asker", "tiny_corpus:RegionThenElaborate", "--results", str(tmp_path / "r.duckdb")]
    csv = tmp_path / "e.csv"
    status = main(["evaluate", str(tiny), str(other), *args, "--csv", str(csv), "--json"])
    assert status == 0
    out = capsys.readouterr().out
    data = json.loads(out.strip().splitlines()[-1])
    assert [c["episodes"] for c in data["campaigns"]] == [18, 18] and data["failed"] is False
    assert all(c["sr_asker"] == pytest.approx(4 / 6) for c in data["campaigns"])
    first, second = (c["campaign_id"] for c in data["campaigns"])
    assert first != second
    rows = [line.split("  ")[0] for line in out.splitlines() if "±" in line]
    assert rows == ["tiny", f"tiny ({other})"]
    for path in (tmp_path / "e.1-tiny.csv", tmp_path / "e.2-tiny.csv"):
        assert len(path.read_text().strip().splitlines()) == 1 + 18
    assert not csv.exists()
    with ResultsStore(tmp_path / "r.duckdb") as store:
        assert {r["campaign_id"] for r in store.episodes()} == {first, second}
    # a name that is no corpus stops the call before any campaign runs
    results = tmp_path / "n.duckdb"
    status = main(["evaluate", str(tiny), str(tmp_path / "nope"), "--results", str(results)])
    assert status == 2 and not results.exists()


def test_rerun_resumes_without_duplicates(tiny, tmp_path):
    config = CampaignConfig(str(tiny), asker="generic", seeds=(0, 1))
    first = run_campaign(config, tmp_path / "r.duckdb", progress=False)
    second = run_campaign(config, tmp_path / "r.duckdb", progress=False)
    assert first == second and second.episodes == 36


def _episode_set(path):
    with ResultsStore(path) as store:
        rows = store.episodes()
    keep = (
        "condition",
        "seed",
        "record_id",
        "success",
        "precision",
        "recall",
        "f1",
        "sql",
        "dialogue",
    )
    return [tuple(json.dumps(r[k], sort_keys=True) for k in keep) for r in rows]


def test_kill_minus_9_then_resume_gives_the_uninterrupted_episode_set(tmp_path):
    marker = tmp_path / "started"
    env = {
        **os.environ,
        "PYTHONPATH": str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "AMBITAB_TEST_MARKER": str(marker),
    }
    args = [
        sys.executable,
        "-m",
        "ambitab_gym",
        "evaluate",
        "AmbiTab-Bird-v0",
        "--asker",
        "tiny_corpus:SlowFullAsker",
        "--seeds",
        "2",
        "--no-progress",
    ]
    interrupted = tmp_path / "interrupted.duckdb"
    process = subprocess.Popen(
        args + ["--results", str(interrupted)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    time.sleep(2.5)  # past the store's 2 s flush interval: some episodes are on disk
    assert process.poll() is None, "the campaign finished before it could be interrupted"
    process.send_signal(signal.SIGKILL)
    process.wait()
    partial = _episode_set(interrupted)
    total = 2 * 3 * 60
    assert 0 < len(partial) < total
    env.pop("AMBITAB_TEST_MARKER")
    subprocess.run(
        args + ["--results", str(interrupted)], env=env, check=True, stdout=subprocess.DEVNULL
    )
    clean = tmp_path / "clean.duckdb"
    subprocess.run(args + ["--results", str(clean)], env=env, check=True, stdout=subprocess.DEVNULL)
    resumed = _episode_set(interrupted)
    assert len(resumed) == len(set(resumed)) == total
    assert resumed == _episode_set(clean)
    assert set(partial) <= set(resumed)


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_full_asker_baseline_on_every_bundled_corpus(env_id, tmp_path):
    config = CampaignConfig(env_id, asker="full", seeds=(0,))
    summary = run_campaign(config, tmp_path / "r.duckdb", progress=False)
    assert summary.recall.mean == 1.0 and summary.precision.mean == 1.0
    assert summary.sr["full"].mean == 1.0
    # every bundled corpus has AVTs whose readings change the result
    assert summary.sr["full"].mean > summary.sr["none"].mean


# -- command-line arguments (issue 11) ---------------------------------------------------------------


def test_results_and_csv_in_missing_folders_are_created(tiny, tmp_path, capsys):
    results = tmp_path / "new" / "deeper" / "r.duckdb"
    csv = tmp_path / "other" / "e.csv"
    argv = ["evaluate", str(tiny), "--asker", "none", "--limit", "2"]
    status = main([*argv, "--results", str(results), "--csv", str(csv), "--no-progress"])
    assert status == 0, capsys.readouterr().err
    assert results.is_file()
    assert len(csv.read_text().strip().splitlines()) == 1 + 3 * 2  # header, 3 conditions x 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["evaluate", "{tiny}", "--limit", "-3"], "argument --limit: must be at least 1, not -3"),
        (["evaluate", "{tiny}", "--limit", "0"], "argument --limit: must be at least 1, not 0"),
        (["evaluate", "{tiny}", "--seeds", "0"], "argument --seeds: must be at least 1, not 0"),
        (["evaluate", "{tiny}", "--budget-slack", "0"], "argument --budget-slack: must be at"),
        (["evaluate", "{tiny}", "--concurrency", "-1"], "argument --concurrency: must be at"),
        (["evaluate", "{tiny}", "--results", "{file}/r.duckdb"], "{file} is a file, not a folder"),
        (["evaluate", "{tiny}", "--csv", "{tmp}"], "argument --csv: {tmp} is a folder"),
        (["leakage", "{tiny}", "--asker", "none", "--limit", "-3"], "argument --limit: must be"),
        (["leakage", "{tiny}", "--asker", "none", "--resamples", "0"], "argument --resamples"),
        (["leakage", "{tiny}", "--asker", "none", "--spec-seed", "-1"], "must be 0 or more"),
        (["report", "{tmp}/r.duckdb", "--dpi", "0"], "argument --dpi: must be at least 1"),
        (["report", "{tmp}/r.duckdb", "--out", "{file}"], "argument --out: {file} is a file"),
        (["play", "{tiny}", "--seed", "-1"], "argument --seed: must be 0 or more, not -1"),
        (["build", "ambiqt", "--source", "{tmp}", "--seed", "-1"], "argument --seed: must be 0"),
        (["rescore", "{tmp}/r.duckdb", "--resamples", "0"], "argument --resamples: must be"),
        (["rescore", "{tmp}/r.duckdb", "--bootstrap-seed", "-5"], "must be 0 or more, not -5"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(tiny, tmp_path, capsys, argv, message):
    marker = tmp_path / "a-file"
    marker.write_text("")
    fill = {"tiny": str(tiny), "tmp": str(tmp_path), "file": str(marker)}
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SystemExit) as exit_:
        main([a.format(**fill) for a in argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message.format(**fill) in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing left behind


def test_unreadable_results_file_is_a_clear_error(tiny, tmp_path, capsys):
    bad = tmp_path / "bad.duckdb"
    bad.write_text("not a database")
    status = main(["evaluate", str(tiny), "--limit", "1", "--results", str(bad)])
    err = capsys.readouterr().err
    assert status == 2 and f"cannot open results file {bad}" in err
    assert "Give another --results file." in err and bad.read_text() == "not a database"
