"""The reference oracle credits questions, not words: the restatement and shotgun probes earn
(about) nothing and the paper's reference checks hold, on every bundled corpus.

The probes never see a record: one repeats the public request (and mechanical variants of it)
up to the budget, the other names every table and column of the public schema in each
question. Definition 7 checks: pi_full^adv has recall = precision = 1, pi_none^adv recall 0.
"""

from __future__ import annotations

import pytest

from ambitab_gym.diagnostics import LeakageConfig, run_leakage
from ambitab_gym.diagnostics.estimates import PROBE_RECALL_LIMIT

CORPORA = ("bird", "ew_bird", "bird_interact", "ambrosia", "ambiqt", "taco")


@pytest.mark.parametrize("corpus", CORPORA)
def test_probes_earn_nothing_and_reference_checks_hold(corpus, tmp_path):
    config = LeakageConfig(
        corpus,
        asker="none",
        conditions=(
            "full_adv:reference",
            "generic:reference",
            "restatement:reference",
            "shotgun:reference",
        ),
    )
    report = run_leakage(config, tmp_path / "results.duckdb", progress=False, resamples=10)
    checks = report.checks
    assert checks["full_adv_recall"] == 1.0 and checks["full_adv_precision"] == 1.0
    assert checks["none_adv_recall"] == 0.0
    assert checks["restatement_recall"] <= PROBE_RECALL_LIMIT == 0.05
    assert checks["shotgun_recall"] <= PROBE_RECALL_LIMIT
    assert report.reference_ok is True


def test_reference_ok_fails_when_a_probe_is_credited():
    from ambitab_gym.diagnostics.estimates import leakage_report

    def rows(condition, recall, precision=1.0):
        return {
            "condition": condition,
            "seed": 0,
            "avt_id": "a",
            "success": None,
            "recall": recall,
            "precision": precision,
            "error": None,
        }

    good = [
        rows("full_adv:reference", 1.0),
        rows("generic:reference", 0.0),
        rows("restatement:reference", 0.0),
        rows("shotgun:reference", 0.0),
    ]
    assert leakage_report(good, resamples=10).reference_ok is True
    bad = [*good[:2], rows("restatement:reference", 0.5), good[3]]
    assert leakage_report(bad, resamples=10).reference_ok is False
