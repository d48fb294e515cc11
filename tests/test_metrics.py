"""p(tau), r(tau), R_F1 and the reported C.3 scores (paper Definition 2, eq. 1-2, C.3), by hand."""

from __future__ import annotations

import pytest

from ambitab_gym.metrics import (
    EpisodeScore,
    eligible_value,
    episode_precision,
    episode_recall,
    macro_means,
    question_f1,
    score_credits,
)

AB = frozenset({"a", "b"})


@pytest.mark.parametrize(
    ("credits", "amb", "p", "r", "f1"),
    [
        # two productive questions, full coverage
        ([{"a"}, {"b"}], AB, 1.0, 1.0, 1.0),
        # repeat: q2 re-credits a -> p = 1/2, r = 1/2, F1 = 1/2
        ([{"a"}, {"a"}], AB, 0.5, 0.5, 0.5),
        # irrelevant question then a productive one: p = 1/2, r = 1/2
        ([set(), {"b"}], AB, 0.5, 0.5, 0.5),
        # three questions, two productive, full coverage: p = 2/3, r = 1 -> F1 = 0.8
        ([{"a"}, set(), {"b"}], AB, 2 / 3, 1.0, 0.8),
        # one question credits both (multi-answer oracle): p = 1, r = 1
        ([{"a", "b"}], AB, 1.0, 1.0, 1.0),
        # credit that is a subset of earlier ones is unproductive
        ([{"a", "b"}, {"b"}], AB, 0.5, 1.0, 2 / 3),
        # nothing productive: p = r = 0 -> F1 = 0
        ([set(), set()], AB, 0.0, 0.0, 0.0),
        # stop at once on an ambiguous record: p undefined, r = 0, F1 = 0
        ([], AB, None, 0.0, 0.0),
        # m = 0, abstain: F1 = 1, recall undefined
        ([], frozenset(), None, None, 1.0),
        # m = 0, asking: F1 = 0
        ([set()], frozenset(), 0.0, None, 0.0),
        # credits of non-counted ambiguities (outside Amb) do not count
        ([{"order"}, {"a"}], AB, 0.5, 0.5, 0.5),
    ],
)
def test_hand_worked(credits, amb, p, r, f1):
    credits = [frozenset(c) for c in credits]
    if p is None:
        assert episode_precision(credits, amb) is None
    else:
        assert episode_precision(credits, amb) == pytest.approx(p)
    if r is None:
        assert episode_recall(credits, amb) is None
    else:
        assert episode_recall(credits, amb) == pytest.approx(r)
    assert question_f1(credits, amb) == pytest.approx(f1)


# -- the reported scores (C.3): populations and fallback stops -----------------------------------


@pytest.mark.parametrize(
    ("credits", "amb", "fallback", "expected"),
    [
        # the reward's m = 0 convention (F1 = 1 for abstaining) is not a reported F1
        ([], frozenset(), False, (None, None, None)),
        ([set()], frozenset(), False, (0.0, None, None)),
        # stop at once with ambiguities: F1 = 0 is reported, precision is not
        ([], AB, False, (None, 0.0, 0.0)),
        ([{"a"}, set(), {"b"}], AB, False, (2 / 3, 1.0, 0.8)),
        # a fallback stop keeps its precision, loses recall and F1
        ([{"a"}, set(), {"b"}], AB, True, (2 / 3, None, None)),
        ([], AB, True, (None, None, None)),
    ],
)
def test_reported_scores(credits, amb, fallback, expected):
    got = score_credits([frozenset(c) for c in credits], amb, fallback=fallback)
    assert got == pytest.approx(expected)


def test_macro_means_over_rows_and_scores_agree():
    rows = [
        # p = 2/3, r = 1, F1 = 0.8, verified
        {
            "precision": 2 / 3,
            "recall": 1.0,
            "f1": 0.8,
            "success": 1.0,
            "n_questions": 3,
            "stop_reason": "asker",
        },
        # stored before fallback stops were scored apart: the row's recall/F1 are ignored
        {
            "precision": 1.0,
            "recall": 0.5,
            "f1": 2 / 3,
            "success": 0.0,
            "n_questions": 1,
            "stop_reason": "fallback",
        },
        # m = 0, skipped
        {
            "precision": None,
            "recall": None,
            "f1": None,
            "success": 1.0,
            "n_questions": 0,
            "stop_reason": "skipped",
        },
        # ask-only: nothing verified
        {
            "precision": None,
            "recall": 0.0,
            "f1": 0.0,
            "success": None,
            "n_questions": 0,
            "stop_reason": "asker",
        },
    ]
    out = macro_means(rows)
    assert out["precision"] == pytest.approx((2 / 3 + 1.0) / 2)
    assert out["recall"] == pytest.approx(0.5) and out["f1"] == pytest.approx(0.4)
    assert out["success"] == pytest.approx(2 / 3)
    assert out["questions"] == 1.0 and out["episodes"] == 4 and out["fallback_stops"] == 1
    assert (out["precision_episodes"], out["recall_episodes"], out["success_episodes"]) == (2, 2, 3)
    assert macro_means([EpisodeScore.from_row(r) for r in rows]) == out
    assert eligible_value(rows[1], "recall") is None and eligible_value(rows[1], "precision") == 1.0
