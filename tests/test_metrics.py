"""p(tau), r(tau) and R_F1 (paper Definition 2, eq. 1-2), worked by hand."""

from __future__ import annotations

import pytest

from ambitab_gym.metrics import episode_precision, episode_recall, question_f1

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
