"""Comparing a submitted result with the reference result.

* :func:`normalize_value` - one cell as a comparable value (floats rounded, dates as ISO text).
* :func:`normalize_rows` - every cell of a result normalized, column by column: a column whose
  cells all keep their value (integers, text, blobs, NULLs) is not touched, a column of floats
  (or of decimals, made floats first) is rounded in one pass, any other column goes cell by
  cell through :func:`normalize_value`.
* :class:`NormalizedReference` - a reference result normalized once, with its row set and row
  multiset computed when a comparison first needs them (the verifier caches one per record).
* :func:`results_match` - set, multiset or ordered comparison, optional column permutation.
* :func:`results_match_reference`, :func:`normalize_rows_reference` - the plain, cell-by-cell
  implementation the fast path must agree with (kept for tests and as the specification).

NULLs compare equal to NULLs; integers and integral floats compare equal (``1 == 1.0``).

The fast path skips work the answer does not need, never a rule: results of different width,
or (ordered, multiset) of different length, cannot match; rows are compared exactly first and a
match is kept when every cell is of a type whose equality implies equality after normalization
(``int``, ``float``, ``str``, ``bytes``, ``bool``, ``None``; rounding is idempotent); otherwise
the submission is normalized and compared again, then under column permutations.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from ambitab_gym.records import CompareRules

__all__ = [
    "NormalizedReference",
    "normalize_rows",
    "normalize_rows_reference",
    "normalize_value",
    "results_match",
    "results_match_reference",
]

_MAX_PERMUTED_COLUMNS = 6

#: Cell types :func:`normalize_value` returns unchanged.
_KEPT = frozenset({type(None), int, str, bytes})
_NONE = type(None)
#: Cell types rounded in one pass by :func:`normalize_rows` (a float column, NULLs allowed).
_FLOATS = frozenset({float, type(None)})
#: Cell types made floats and rounded in one pass (a PostgreSQL or DuckDB ``numeric`` column).
_DECIMALS = frozenset({decimal.Decimal, type(None)})
#: Cell types for which ``a == normalize_value(b)`` implies ``normalize_value(a) ==
#: normalize_value(b)``: an exact match of such rows is a match after normalization.
_EXACT_SAFE = frozenset({type(None), int, str, bytes, bool, float})


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


def normalize_rows_reference(
    rows: Sequence[Sequence[Any]], float_decimals: int | None
) -> list[tuple]:
    """Every cell of every row through :func:`normalize_value` (the slow reference path).

    >>> normalize_rows_reference([(1, 0.12345), (True, None)], 2)
    [(1, 0.12), (1, None)]
    """
    return [tuple(normalize_value(v, float_decimals) for v in row) for row in rows]


def _float_column(column: tuple, decimals: int | None) -> list:
    """A column of floats and NULLs as :func:`normalize_value` makes it, in one pass."""
    if decimals is None:
        return [None if v is None else ("NaN" if v != v else (v if v else 0.0)) for v in column]
    # round() leaves infinities alone, as normalize_value does; NaN fails v == v.
    return [
        None if v is None else ((r if (r := round(v, decimals)) else 0.0) if v == v else "NaN")
        for v in column
    ]


def normalize_rows(rows: Sequence[Sequence[Any]], float_decimals: int | None) -> list[tuple]:
    """Every cell of every row as :func:`normalize_value` makes it, column by column.

    Identical to :func:`normalize_rows_reference` (same values, same types), but a column
    that holds only integers, text, blobs and NULLs is not touched and a column of floats is
    rounded in one pass.

    >>> normalize_rows([(1, 0.12345, "a"), (2, float("nan"), None)], 2)
    [(1, 0.12, 'a'), (2, 'NaN', None)]
    """
    if not rows:
        return []
    if len(set(map(len, rows))) != 1:  # ragged (never a query result): cell by cell
        return normalize_rows_reference(rows, float_decimals)
    columns = list(zip(*rows, strict=True))
    changed = False
    for index, column in enumerate(columns):
        kinds = set(map(type, column))
        if kinds <= _KEPT:
            continue
        changed = True
        if kinds <= _FLOATS:
            columns[index] = _float_column(column, float_decimals)
        elif kinds <= _DECIMALS:
            # normalize_value turns a Decimal into a float first, then rounds it as one
            floats = (
                [None if v is None else float(v) for v in column]
                if _NONE in kinds
                else list(map(float, column))
            )
            columns[index] = _float_column(floats, float_decimals)
        else:
            columns[index] = [normalize_value(v, float_decimals) for v in column]
    if changed:
        return list(zip(*columns, strict=True))
    if set(map(type, rows)) == {tuple}:
        return list(rows)  # type: ignore[arg-type]
    return list(map(tuple, rows))


class NormalizedReference:
    """A reference result normalized once; its row set and multiset made on first use.

    Args:
        rows: the reference rows.
        float_decimals: the rounding they were (or are to be) normalized with.
        normalized: ``rows`` are already normalized (:func:`normalize_rows`).

    Example:
        >>> reference = NormalizedReference([(1, 0.12345)], 2)
        >>> reference.rows, reference.width
        ([(1, 0.12)], 2)
        >>> results_match([(1, 0.1201)], reference, CompareRules(float_decimals=2))
        True
    """

    __slots__ = ("_counter", "_set", "float_decimals", "rows", "width")

    def __init__(
        self,
        rows: Sequence[Sequence[Any]],
        float_decimals: int | None,
        *,
        normalized: bool = False,
    ) -> None:
        self.rows: list[tuple] = list(rows) if normalized else normalize_rows(rows, float_decimals)
        self.float_decimals = float_decimals
        self.width: int | None = len(self.rows[0]) if self.rows else None
        self._set: set | None = None
        self._counter: Counter | None = None

    @property
    def row_set(self) -> set:
        """The rows as a set (made once)."""
        if self._set is None:
            self._set = set(self.rows)
        return self._set

    @property
    def row_counter(self) -> Counter:
        """The rows as a multiset (made once)."""
        if self._counter is None:
            self._counter = Counter(self.rows)
        return self._counter

    def same(self, rows: list, order: str) -> bool:
        """Whether ``rows`` equal the reference rows under ``order`` (no normalization)."""
        if order == "set":
            return set(rows) == self.row_set
        if order == "ordered":
            return rows == self.rows
        return Counter(rows) == self.row_counter


def _same(submitted: list[tuple], reference: list[tuple], order: str) -> bool:
    if order == "ordered":
        return submitted == reference
    if order == "multiset":
        return Counter(submitted) == Counter(reference)
    return set(submitted) == set(reference)


def _changed_by_rounding(row: Sequence[Any], decimals: int | None) -> bool:
    """Whether normalizing changes a float of ``row`` (NaN, or not yet rounded): such a row
    equals no normalized row, so an exact comparison is bound to fail and is skipped. Also
    True for a row holding a ``Decimal``: an exact match of such rows would not count (not
    an exact-safe type), so the comparison is skipped too."""
    for value in row:
        kind = type(value)
        if kind is float:
            if value != value or (decimals is not None and round(value, decimals) != value):
                return True
        elif kind is decimal.Decimal:
            return True
    return False


def _column_bags(rows: list[tuple]) -> list[str]:
    return sorted(repr(sorted(Counter(col).items(), key=repr)) for col in zip(*rows, strict=True))


def results_match(
    submitted: Sequence[Sequence[Any]],
    reference: Sequence[Sequence[Any]] | NormalizedReference,
    rules: CompareRules,
    *,
    reference_normalized: bool = False,
) -> bool:
    """Whether a submitted result matches the reference under the comparison rules.

    Args:
        submitted: rows of the submitted query.
        reference: rows of the reference query, or a :class:`NormalizedReference` (cached).
        rules: order semantics, float rounding and column-order rule.
        reference_normalized: the reference rows are already normalized (cached).

    Always the answer of :func:`results_match_reference`, with less work.

    Example:
        >>> rules = CompareRules(order="set", column_order=False)
        >>> results_match([("b", 2), ("a", 1)], [(1, "a"), (2, "b")], rules)
        True
        >>> results_match([("a", 1)], [(1, "a"), (2, "b")], rules)
        False
    """
    decimals = rules.float_decimals
    if not isinstance(reference, NormalizedReference):
        reference = NormalizedReference(reference, decimals, normalized=reference_normalized)
    elif reference.float_decimals != decimals:
        raise ValueError(
            f"the reference was normalized with float_decimals={reference.float_decimals}, "
            f"the rules say {decimals}"
        )
    order = rules.order
    width = reference.width
    sub = submitted if type(submitted) is list else list(submitted)
    if order != "set" and len(sub) != len(reference.rows):
        return False  # no permutation changes the number of rows
    if sub and width is not None:
        if not _changed_by_rounding(sub[0], decimals):
            # Exact rows first: with plain cell types, equal now means equal after
            # normalization (equal rows have the reference's width: checked after this).
            try:
                exact = reference.same(sub, order)
            except TypeError:  # an unhashable cell (a list, a bytearray): normalize first
                exact = False
            if exact and set(map(type, chain.from_iterable(sub))) <= _EXACT_SAFE:
                return True
        if set(map(len, sub)) != {width}:
            return False
    sub = normalize_rows(sub, decimals)
    if reference.same(sub, order):
        return True
    if rules.column_order or not sub or not reference.rows or width is None or width < 2:
        return False
    ref = reference.rows
    if width > _MAX_PERMUTED_COLUMNS:
        # Too many permutations: compare each column as a bag of values instead of rows.
        return len(sub) == len(ref) and _column_bags(sub) == _column_bags(ref)
    identity = tuple(range(width))
    for permutation in itertools.permutations(identity):
        if permutation == identity:
            continue  # compared above
        pick = itemgetter(*permutation)
        if reference.same(list(map(pick, sub)), order):
            return True
    return False


def results_match_reference(
    submitted: Sequence[Sequence[Any]],
    reference: Sequence[Sequence[Any]],
    rules: CompareRules,
    *,
    reference_normalized: bool = False,
) -> bool:
    """The plain implementation of the comparison rules (slow path; tests check the fast
    :func:`results_match` against it).

    >>> rules = CompareRules(order="multiset", column_order=True, float_decimals=2)
    >>> results_match_reference([(1, 0.499)], [(1.0, 0.5)], rules)
    True
    """
    sub = normalize_rows_reference(submitted, rules.float_decimals)
    ref = (
        list(reference)
        if reference_normalized
        else normalize_rows_reference(reference, rules.float_decimals)
    )
    width = len(ref[0]) if ref else None
    if sub and width is not None and any(len(row) != width for row in sub):
        return False
    if _same(sub, ref, rules.order):
        return True
    if rules.column_order or not sub or not ref or width is None or width < 2:
        return False
    if width > _MAX_PERMUTED_COLUMNS:
        return len(sub) == len(ref) and _column_bags(sub) == _column_bags(ref)
    for permutation in itertools.permutations(range(width)):
        permuted = [tuple(row[i] for i in permutation) for row in sub]
        if _same(permuted, ref, rules.order):
            return True
    return False
