"""Comparing a submitted result with the reference result.

* :func:`normalize_value` - one cell as a comparable value (floats rounded, dates as ISO text).
* :func:`results_match` - set, multiset or ordered comparison, optional column permutation.

NULLs compare equal to NULLs; integers and integral floats compare equal (``1 == 1.0``).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ambitab_gym.records import CompareRules

__all__ = ["normalize_rows", "normalize_value", "results_match"]

_MAX_PERMUTED_COLUMNS = 6


def normalize_value(value: Any, float_decimals: int | None) -> Any:
    """A cell as a hashable value that compares the way the rules say.

    >>> normalize_value(0.30000000000000004, 4), normalize_value(2.0, 4), normalize_value(None, 4)
    (0.3, 2.0, None)
    """
    if value is None or isinstance(value, (str, int)) and not isinstance(value, bool):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, decimal.Decimal):
        value = float(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if float_decimals is not None and not math.isinf(value):
            value = round(value, float_decimals)
        return 0.0 if value == 0 else value
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return tuple(normalize_value(v, float_decimals) for v in value)
    return str(value)


def normalize_rows(rows: Sequence[Sequence[Any]], float_decimals: int | None) -> list[tuple]:
    """Every cell of every row through :func:`normalize_value`."""
    return [tuple(normalize_value(v, float_decimals) for v in row) for row in rows]


def _same(submitted: list[tuple], reference: list[tuple], order: str) -> bool:
    if order == "ordered":
        return submitted == reference
    if order == "multiset":
        return Counter(submitted) == Counter(reference)
    return set(submitted) == set(reference)


def results_match(
    submitted: Sequence[Sequence[Any]],
    reference: Sequence[Sequence[Any]],
    rules: CompareRules,
    *,
    reference_normalized: bool = False,
) -> bool:
    """Whether a submitted result matches the reference under the comparison rules.

    Args:
        submitted: rows of the submitted query.
        reference: rows of the reference query.
        rules: order semantics, float rounding and column-order rule.
        reference_normalized: the reference rows are already normalized (cached).

    Example:
        >>> rules = CompareRules(order="set", column_order=False)
        >>> results_match([("b", 2), ("a", 1)], [(1, "a"), (2, "b")], rules)
        True
        >>> results_match([("a", 1)], [(1, "a"), (2, "b")], rules)
        False
    """
    sub = normalize_rows(submitted, rules.float_decimals)
    ref = (
        list(reference) if reference_normalized else normalize_rows(reference, rules.float_decimals)
    )
    width = len(ref[0]) if ref else None
    if sub and width is not None and any(len(row) != width for row in sub):
        return False
    if _same(sub, ref, rules.order):
        return True
    if rules.column_order or not sub or not ref or width is None or width < 2:
        return False
    if width > _MAX_PERMUTED_COLUMNS:
        # Too many permutations: compare each column as a bag of values instead of rows.
        def bags(rows: list[tuple]) -> list[str]:
            return sorted(
                repr(sorted(Counter(col).items(), key=repr)) for col in zip(*rows, strict=True)
            )

        return len(sub) == len(ref) and bags(sub) == bags(ref)
    for permutation in itertools.permutations(range(width)):
        permuted = [tuple(row[i] for i in permutation) for row in sub]
        if _same(permuted, ref, rules.order):
            return True
    return False
