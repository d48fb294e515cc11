"""The reference matcher against the labelled questions (tests/oracles/labelled_set.py).

The questions were written by readers who saw each task's request, schema and readings, never
its registered terms. The issue's targets are >= 90 % of natural questions credited to their
ambiguity and <= 5 % of negatives credited anything. The floors below are the figures measured
when the set was adopted (benchmarks/RESULTS.md), rounded down: they guard against a matcher or
an alias change that loses ground, and they say where the targets are not met yet.
"""

from __future__ import annotations

import pytest
from labelled_set import UPSTREAM, build_sources, load_questions, score


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    found, _ = build_sources(tmp_path_factory.mktemp("labelled"))
    return found


def _select(name: str, upstream: bool) -> list[dict]:
    return [q for q in load_questions(name) if q["task"].startswith("upstream/") == upstream]


def test_the_sets_are_labelled_as_documented():
    for name in ("questions", "heldout"):
        questions = load_questions(name)
        assert questions
        for q in questions:
            assert set(q) == {"task", "kind", "label", "question"}
            assert q["label"] == "none" or q["label"][0] == "A", q
            negative = q["kind"] in ("restatement", "off_topic", "generic", "other_ambiguity")
            assert negative == (q["label"] == "none"), q
    assert len({q["task"] for q in load_questions("questions")}) >= 80


def test_bundled_generated_and_fixture_tasks(sources):
    tuning = score(_select("questions", False), sources)
    assert tuning.skipped == 0
    assert tuning.rate(True) >= 0.88  # measured 0.889 (target 0.90)
    assert tuning.rate(False) <= 0.045  # measured 0.044
    assert tuning.kind_rate("restatement") >= 0.98  # measured 1.0
    assert tuning.kind_rate("exact_quote") == 1.0
    assert tuning.kind_rate("generic") == 1.0
    assert tuning.kind_rate("reading_contrast") >= 0.98
    heldout = score(_select("heldout", False), sources)
    assert heldout.rate(True) >= 0.94  # measured 0.943
    assert heldout.rate(False) <= 0.045  # measured 0.043


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason=f"upstream samples absent: {UPSTREAM}")
def test_tasks_built_from_upstream(sources):
    tuning = score(_select("questions", True), sources)
    # one AmbiQT item ("Which airports ...") names its column only through the table now and
    # is dropped by the converter: its ten questions are skipped
    assert tuning.skipped == 10
    assert tuning.rate(True) >= 0.86  # measured 0.863 (target 0.90)
    # measured 0.058 (6 questions); compound-term heads ("site" of "observation sites") and a
    # column word of a hint ("expense") also name a neighbouring question (was 0.029)
    assert tuning.rate(False) <= 0.06
    assert tuning.kind_rate("restatement") >= 0.96  # measured 0.962 (one reworded read-back)
    heldout = score(_select("heldout", True), sources)
    assert heldout.rate(True) >= 0.87  # measured 0.875 (target 0.90)
    assert heldout.rate(False) <= 0.125  # measured 0.125 (target 0.05)
