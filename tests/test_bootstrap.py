"""The AVT-cluster bootstrap against independent computations on constructed examples."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from ambitab_gym.diagnostics import (
    cluster_bootstrap,
    leakage_report,
    percentile_interval,
    union_clusters,
)


def rows_from(table: dict[str, dict[str, list]], metric: str = "success") -> list[dict]:
    """{avt: {condition: [values]}} -> episode rows."""
    out = []
    for avt, by_condition in table.items():
        for condition, values in by_condition.items():
            for i, value in enumerate(values):
                out.append(
                    {
                        "condition": condition,
                        "avt_id": avt,
                        "record_id": f"{avt}-{i}",
                        metric: value,
                    }
                )
    return out


def hand_percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (Hyndman-Fan type 7), by hand."""
    h = (len(sorted_values) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (h - low) * (sorted_values[high] - sorted_values[low])


def pooled_difference(table, draw, minuend="A", subtrahend="B") -> Fraction | None:
    """mean(minuend) - mean(subtrahend) over the concatenated rows of the drawn clusters."""
    a, b = [], []
    for avt in draw:
        a += [Fraction(v) for v in table[avt].get(minuend, []) if v is not None]
        b += [Fraction(v) for v in table[avt].get(subtrahend, []) if v is not None]
    if not a or not b:
        return None
    return sum(a) / len(a) - sum(b) / len(b)


# Three AVTs with unequal numbers of records (so the statistic is a ratio, not a mean of means).
TABLE = {
    "a": {"A": [1, 1], "B": [0, 1]},
    "b": {"A": [1], "B": [1]},
    "c": {"A": [0, 1, 1], "B": [0, 0, 0]},
}


def test_union_find_merges_linked_avts_and_labels_by_smallest_member():
    clusters = union_clusters(["e", "d", "c", "b", "a"], [("d", "b"), ("b", "e"), ("f", "c")])
    assert clusters == {"a": "a", "b": "b", "c": "c", "d": "b", "e": "b", "f": "c"}
    # the labels do not depend on the order of links or units
    again = union_clusters(["a", "b", "c", "d", "e"], [("f", "c"), ("e", "b"), ("b", "d")])
    assert again == clusters


def test_point_estimate_is_the_pooled_difference_of_macro_means():
    interval = cluster_bootstrap(rows_from(TABLE), "success", "A", "B", resamples=50)
    # A: 5 successes of 6 episodes, B: 2 of 6 -> 5/6 - 1/3 = 1/2
    assert interval.mean == pytest.approx(0.5, abs=1e-15)
    assert interval.units == 3


def test_every_resample_enumerated_matches_the_percentile_definition():
    draws = list(itertools.product(["a", "b", "c"], repeat=3))  # all 27 ordered resamples
    label_index = {"a": 0, "b": 1, "c": 2}
    indices = np.array([[label_index[x] for x in draw] for draw in draws])
    interval = cluster_bootstrap(rows_from(TABLE), "success", "A", "B", indices=indices)
    values = sorted(float(pooled_difference(TABLE, draw)) for draw in draws)
    assert interval.resamples == interval.valid == 27
    assert interval.lo == pytest.approx(hand_percentile(values, 0.025), abs=1e-12)
    assert interval.hi == pytest.approx(hand_percentile(values, 0.975), abs=1e-12)
    # a hand check of the extremes: drawing only "c" three times gives 2/3 - 0 = 2/3, the
    # largest value; drawing only "b" gives 0, the smallest
    assert values[-1] == pytest.approx(2 / 3) and values[0] == 0.0


def test_seeded_resampling_matches_a_brute_force_loop():
    rng = np.random.default_rng(2024)
    table = {
        f"avt{k}": {
            "A": list(rng.integers(0, 2, size=int(rng.integers(1, 4)))),
            "B": list(rng.integers(0, 2, size=int(rng.integers(1, 4)))),
        }
        for k in range(7)
    }
    interval = cluster_bootstrap(rows_from(table), "success", "A", "B", resamples=300, seed=11)
    # brute force: the same seeded draws, one resample at a time, in sorted cluster order
    labels = sorted(table)
    draws = np.random.default_rng(11).integers(0, len(labels), size=(300, len(labels)))
    values = [float(pooled_difference(table, [labels[i] for i in row])) for row in draws]
    ordered = sorted(values)
    assert interval.lo == pytest.approx(hand_percentile(ordered, 0.025), abs=1e-12)
    assert interval.hi == pytest.approx(hand_percentile(ordered, 0.975), abs=1e-12)
    assert interval.mean == pytest.approx(float(pooled_difference(table, labels)), abs=1e-12)


def test_paired_runs_move_together():
    # Within every AVT, A is exactly 0.5 above B with equal counts; levels differ a lot between
    # AVTs. Resampling whole AVTs keeps every resample at 0.5; resampling the two conditions
    # independently would not.
    table = {
        "a": {"A": [1, 1], "B": [1, 0]},
        "b": {"A": [1, 0], "B": [0, 0]},
        "c": {"A": [1, 1, 1, 1], "B": [1, 1, 0, 0]},
    }
    interval = cluster_bootstrap(rows_from(table), "success", "A", "B", resamples=500, seed=3)
    assert interval.mean == pytest.approx(0.5)
    assert interval.lo == pytest.approx(0.5) and interval.hi == pytest.approx(0.5)


def test_linked_avts_resample_as_one_cluster():
    # "a" and "c" are linked (a donor and its receiver): two units, four ordered resamples
    clusters = union_clusters(TABLE, [("c", "a")])
    draws = list(itertools.product([("a", "c"), ("b",)], repeat=2))
    label_index = {"a": 0, "b": 1}  # sorted cluster labels: "a" (holding a and c), "b"
    indices = np.array([[label_index[unit[0]] for unit in draw] for draw in draws])
    interval = cluster_bootstrap(
        rows_from(TABLE), "success", "A", "B", clusters=clusters, indices=indices
    )
    assert interval.units == 2
    values = sorted(
        float(pooled_difference(TABLE, [avt for unit in draw for avt in unit])) for draw in draws
    )
    assert interval.lo == pytest.approx(hand_percentile(values, 0.025), abs=1e-12)
    assert interval.hi == pytest.approx(hand_percentile(values, 0.975), abs=1e-12)


def test_ineligible_rows_are_skipped_and_empty_resamples_left_out():
    # AVT "z" has no eligible recall (m = 0): a resample of only "z" has no value
    table = {"y": {"A": [1.0, 0.5]}, "z": {"A": [None, None]}}
    indices = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    interval = cluster_bootstrap(rows_from(table, "recall"), "recall", "A", indices=indices)
    assert interval.mean == pytest.approx(0.75)
    assert interval.valid == 3 and interval.resamples == 4
    assert interval.lo == pytest.approx(0.75) and interval.hi == pytest.approx(0.75)


def test_percentile_interval_by_hand():
    values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    lo, hi = percentile_interval(values, confidence=0.8)
    ordered = sorted(values)
    assert lo == pytest.approx(hand_percentile(ordered, 0.1))
    assert hi == pytest.approx(hand_percentile(ordered, 0.9))
    with pytest.raises(ValueError):
        percentile_interval(values, confidence=1.0)


def test_report_uses_replacement_clusters_only_for_spec_randomization():
    rows = []
    for avt in ("a", "b", "c", "d"):
        for condition, value in (("spec:hybrid", 1.0), ("generic:hybrid", 0.0)):
            rows.append(
                {
                    "condition": condition,
                    "seed": 0,
                    "avt_id": avt,
                    "success": 0.0,
                    "recall": value,
                    "precision": None,
                    "error": None,
                }
            )
        rows.append({**rows[-1], "condition": "generic:reference"})
    report = leakage_report(rows, replacement_links=[("a", "b"), ("c", "b")], resamples=20)
    assert report.diagnostics["d_rec_spec"].interval.units == 2  # {a, b, c} and {d}
    assert report.diagnostics["d_rec_none"].interval.units == 4
    assert report.to_json()["d_rec_spec"] == {"mean": 100.0, "lo": 100.0, "hi": 100.0}
    assert report.diagnostics["d_j_resp"].mean is None  # its runs are absent
