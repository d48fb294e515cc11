"""The fast comparison path agrees with the plain reference path on every rule.

Known answers for each rule of the verification comparison (sets, multisets, order, float
decimals, column permutation, NULLs, ints vs floats, text, bytes) run through both paths;
every bundled record's reference result and its AVT siblings' results go through both; and
hypothesis draws result sets (floats near rounding boundaries, NaN, infinities, NULLs,
duplicates, permuted columns, unicode, bytes) on which both must give the same answer.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ambitab_gym.corpora import ENV_IDS, load_corpus
from ambitab_gym.records import CompareRules
from ambitab_gym.verify import QueryError, Verifier
from ambitab_gym.verify.compare import (
    NormalizedReference,
    normalize_rows,
    normalize_rows_reference,
    results_match,
    results_match_reference,
)
from ambitab_gym.verify.verifier import is_write_task


def _fast_plain(sub, ref, rules):
    return results_match(sub, ref, rules)


def _fast_prepared(sub, ref, rules):
    return results_match(sub, NormalizedReference(ref, rules.float_decimals), rules)


def _fast_normalized(sub, ref, rules):
    normalized = normalize_rows(ref, rules.float_decimals)
    return results_match(sub, normalized, rules, reference_normalized=True)


PATHS = {
    "fast": _fast_plain,
    "fast-prepared": _fast_prepared,
    "fast-normalized": _fast_normalized,
    "reference": results_match_reference,
}


def rules(order="set", decimals=4, column_order=True) -> CompareRules:
    return CompareRules(order=order, float_decimals=decimals, column_order=column_order)


NAN = float("nan")
INF = float("inf")

# (submitted, reference, rules, expected): each expected answer follows from the rule alone.
KNOWN = {
    "set-ignores-order": ([(2,), (1,)], [(1,), (2,)], rules("set"), True),
    "set-ignores-duplicates": ([(1,), (1,), (2,)], [(1,), (2,)], rules("set"), True),
    "set-missing-row": ([(1,)], [(1,), (2,)], rules("set"), False),
    "multiset-ignores-order": ([(2,), (1,)], [(1,), (2,)], rules("multiset"), True),
    "multiset-counts-duplicates": ([(1,), (1,), (2,)], [(1,), (2,)], rules("multiset"), False),
    "multiset-same-duplicates": ([(1,), (2,), (1,)], [(1,), (1,), (2,)], rules("multiset"), True),
    "ordered-needs-order": ([(2,), (1,)], [(1,), (2,)], rules("ordered"), False),
    "ordered-same-order": ([(1,), (2,)], [(1,), (2,)], rules("ordered"), True),
    "floats-rounded": ([(0.1 + 0.2,)], [(0.3,)], rules(decimals=4), True),
    "floats-differ-at-4": ([(0.1234,)], [(0.1235,)], rules(decimals=4), False),
    "floats-exact-without-decimals": ([(0.1 + 0.2,)], [(0.3,)], rules(decimals=None), False),
    # round(2.675, 2) is 2.67: 2.675 is stored as 2.67499999999999982236431605997495353221893310546875
    "boundary-2.675-to-2.67": ([(2.675,)], [(2.67,)], rules(decimals=2), True),
    "boundary-2.675-not-2.68": ([(2.675,)], [(2.68,)], rules(decimals=2), False),
    # 0.125 is exact in binary; round-half-even gives 0.12
    "boundary-0.125-to-0.12": ([(0.125,)], [(0.12,)], rules(decimals=2), True),
    "boundary-0.125-not-0.13": ([(0.125,)], [(0.13,)], rules(decimals=2), False),
    "int-equals-float": ([(1, 2)], [(1.0, 2.0)], rules(), True),
    "bool-equals-int": ([(True, False)], [(1, 0)], rules(), True),
    "negative-zero": ([(-0.0,)], [(0.0,)], rules(decimals=None), True),
    "tiny-negative-rounds-to-zero": ([(-0.00001,)], [(0.0,)], rules(decimals=4), True),
    "nan-equals-nan": ([(NAN,)], [(NAN,)], rules(), True),
    "nan-not-number": ([(NAN,)], [(0.0,)], rules(), False),
    "infinity": ([(INF, -INF)], [(INF, -INF)], rules(), True),
    "null-equals-null": ([(None, 1)], [(None, 1)], rules(), True),
    "null-not-zero": ([(None,)], [(0,)], rules(), False),
    "null-not-empty-text": ([(None,)], [("",)], rules(), False),
    "columns-permuted-allowed": ([("a", 1)], [(1, "a")], rules(column_order=False), True),
    "columns-permuted-refused": ([("a", 1)], [(1, "a")], rules(column_order=True), False),
    "columns-permuted-ordered": (
        [("a", 1), ("b", 2)],
        [(1, "a"), (2, "b")],
        rules("ordered", column_order=False),
        True,
    ),
    "columns-permuted-rows-differ": (
        [("a", 1), ("b", 3)],
        [(1, "a"), (2, "b")],
        rules("set", column_order=False),
        False,
    ),
    "wide-columns-as-bags": (
        [tuple(range(7, 0, -1)), tuple(range(8, 1, -1))],
        [tuple(range(1, 8)), tuple(range(2, 9))],
        rules("multiset", column_order=False),
        True,
    ),
    "wide-columns-bags-differ": (
        [tuple(range(7, 0, -1))],
        [tuple(range(2, 9))],
        rules("multiset", column_order=False),
        False,
    ),
    "width-differs": ([(1, 2)], [(1,)], rules(column_order=False), False),
    "empty-equals-empty": ([], [], rules(), True),
    "empty-not-rows": ([], [(1,)], rules(), False),
    "rows-not-empty": ([(1,)], [], rules(), False),
    "unicode": ([("Zürich", "東京")], [("Zürich", "東京")], rules(), True),
    "unicode-differs": ([("Zurich",)], [("Zürich",)], rules(), False),
    "bytes": ([(b"\x00\xff",)], [(b"\x00\xff",)], rules(), True),
    "memoryview-is-bytes": ([(memoryview(b"ab"),)], [(b"ab",)], rules(), True),
    "bytearray-is-bytes": ([(bytearray(b"ab"),)], [(b"ab",)], rules("multiset"), True),
    "bytes-not-text": ([(b"ab",)], [("ab",)], rules(), False),
    "decimal-rounded": ([(decimal.Decimal("0.30001"),)], [(0.3,)], rules(decimals=4), True),
    "date-is-iso-text": ([(dt.date(2020, 1, 2),)], [("2020-01-02",)], rules(), True),
    "list-cells": ([([1, 2.00001],)], [((1, 2.0),)], rules(), True),
    "rows-as-lists": ([[1, "a"]], [(1, "a")], rules(), True),
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("case", list(KNOWN))
def test_known_answers(case, path):
    submitted, reference, compare_rules, expected = KNOWN[case]
    assert PATHS[path](submitted, reference, compare_rules) is expected


def test_normalized_reference_refuses_other_decimals():
    reference = NormalizedReference([(0.12345,)], 2)
    with pytest.raises(ValueError, match="float_decimals"):
        results_match([(0.12,)], reference, rules(decimals=4))


def test_normalize_rows_identical_to_reference_path():
    rows = [(1, 0.12345, "x", None, b"b", True, NAN, -0.0, INF, decimal.Decimal("1.5"))]
    for decimals in (None, 0, 2, 4):
        fast, slow = normalize_rows(rows, decimals), normalize_rows_reference(rows, decimals)
        assert repr(fast) == repr(slow)
    assert normalize_rows(rows, 2)[0][:4] == (1, 0.12, "x", None)
    assert normalize_rows(rows, 2)[0][5:9] == (1, "NaN", 0.0, INF)


# -- every bundled record -----------------------------------------------------------------------


def _bundled_cases():
    for name in ENV_IDS.values():
        corpus = load_corpus(name)
        verifier = Verifier(corpus.open_engine)
        try:
            raw: dict[str, list] = {}
            for record in corpus.records:
                if is_write_task(record):
                    continue
                try:
                    raw[record.id] = verifier.execute(
                        record, record.verification.reference_sql
                    ).rows
                except QueryError:
                    continue
        finally:
            verifier.close()
        by_avt: dict[str, list] = {}
        for record in corpus.records:
            if record.id in raw:
                by_avt.setdefault(record.avt_id, []).append(record)
        for readings in by_avt.values():
            for gold in readings:
                for predicted in readings:
                    yield name, gold, raw[gold.id], raw[predicted.id], gold is predicted


BUNDLED = list(_bundled_cases())


def test_bundled_cases_cover_every_corpus():
    assert {name for name, *_ in BUNDLED} == set(ENV_IDS.values())
    assert sum(1 for *_, own in BUNDLED if own) >= 200


@pytest.mark.parametrize("column_order", [True, False])
def test_every_bundled_record_agrees(column_order):
    disagreements = []
    for name, gold, reference, predicted, own in BUNDLED:
        base = gold.verification.compare
        compare_rules = CompareRules(
            order=base.order, float_decimals=base.float_decimals, column_order=column_order
        )
        normalized = normalize_rows_reference(reference, base.float_decimals)
        assert repr(normalize_rows(reference, base.float_decimals)) == repr(normalized)
        prepared = NormalizedReference(reference, base.float_decimals)
        slow = results_match_reference(predicted, reference, compare_rules)
        fast = results_match(predicted, prepared, compare_rules)
        if own:
            assert slow is True, (name, gold.id)  # a reference matches itself
        if fast is not slow:
            disagreements.append((name, gold.id))
    assert disagreements == []


# -- randomized result sets ---------------------------------------------------------------------

BOUNDARY_FLOATS = st.one_of(
    st.sampled_from([0.125, 2.675, 1.005, 0.5, 1.5, 2.5, -2.675, 0.00005, 0.00015, 1e-300]),
    st.integers(-(10**6), 10**6).map(lambda k: (k + 0.5) / 10**4),  # half-way at 4 decimals
    st.integers(-(10**6), 10**6).map(lambda k: (k + 0.5) / 10**2),  # half-way at 2 decimals
)
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), BOUNDARY_FLOATS)
CELLS = {
    "int": st.integers(-(2**70), 2**70),
    "float": FLOATS,
    "int-or-float": st.one_of(st.integers(-5, 5), st.integers(-5, 5).map(float), FLOATS),
    "text": st.text(max_size=6),
    "bytes": st.binary(max_size=4),
    "bool": st.booleans(),
    "mixed": st.one_of(st.integers(-3, 3), FLOATS, st.text(max_size=3), st.binary(max_size=2)),
}


@st.composite
def result_pair(draw):
    """A reference result and a submission derived from it (or drawn independently)."""
    width = draw(st.integers(1, 4))
    kinds = [draw(st.sampled_from(sorted(CELLS))) for _ in range(width)]
    cell = [st.one_of(st.none(), CELLS[kind]) for kind in kinds]
    reference = draw(st.lists(st.tuples(*cell), max_size=6))
    how = draw(st.sampled_from(["same", "shuffled", "permuted", "perturbed", "dupes", "other"]))
    submitted = list(reference)
    if how == "shuffled":
        submitted = draw(st.permutations(reference))
    elif how == "permuted" and width > 1:
        order = draw(st.permutations(range(width)))
        submitted = [tuple(row[i] for i in order) for row in reference]
    elif how == "perturbed" and reference:
        i = draw(st.integers(0, len(reference) - 1))
        j = draw(st.integers(0, width - 1))
        value = reference[i][j]
        if isinstance(value, float) and math.isfinite(value):
            value = draw(st.sampled_from([value + 1e-9, value - 1e-9, value + 5e-5, float(value)]))
        elif isinstance(value, int) and not isinstance(value, bool):
            value = draw(st.sampled_from([float(value), value + 1, None]))
        else:
            value = draw(cell[j])
        row = list(reference[i])
        row[j] = value
        submitted = [*reference[:i], tuple(row), *reference[i + 1 :]]
    elif how == "dupes" and reference:
        submitted = reference + [draw(st.sampled_from(reference))]
    elif how == "other":
        submitted = draw(st.lists(st.tuples(*cell), max_size=6))
    return submitted, reference


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pair=result_pair(),
    order=st.sampled_from(["set", "multiset", "ordered"]),
    decimals=st.sampled_from([None, 0, 2, 4]),
    column_order=st.booleans(),
)
def test_random_results_agree(pair, order, decimals, column_order):
    submitted, reference = pair
    compare_rules = CompareRules(order=order, float_decimals=decimals, column_order=column_order)
    expected = results_match_reference(submitted, reference, compare_rules)
    for name, path in PATHS.items():
        assert path(submitted, reference, compare_rules) is expected, name
    assert repr(normalize_rows(submitted, decimals)) == repr(
        normalize_rows_reference(submitted, decimals)
    )


@settings(max_examples=300, deadline=None)
@given(value=FLOATS, decimals=st.sampled_from([0, 1, 2, 4, 6]))
def test_rounding_is_idempotent(value, decimals):
    """What makes an exact match of raw floats against normalized ones safe."""
    once = normalize_rows_reference([(value,)], decimals)
    assert repr(normalize_rows_reference(once, decimals)) == repr(once)
