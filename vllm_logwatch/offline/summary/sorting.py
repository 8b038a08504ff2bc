"""The summary's sorted columns: `sorted(compress(column, mask))`, by numpy (a numpy array: a list of
months of floats would take four times its memory).

The summary's medians and quantiles are exact: they read a sorted list of a row's values. On months of
logs that is millions of floats, and CPython's sort of them was the largest part of `summary`; numpy's
stable sort of the same values gives the same list (the same floats in the same order: equal values,
such as -0.0 and 0.0, keep their order as `sorted` keeps it) in a tenth of the time. The columns hold
no NaN (the summary stores finite numbers, or masks the NaN out), the one value whose place in `sorted`
depends on its neighbours.

>>> from array import array
>>> column = array("d", [3.0, -0.0, 1.0, 0.0])
>>> [float(v) for v in sorted_selected(column, b"\\x01\\x01\\x00\\x01")]
[-0.0, 0.0, 3.0]
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

import numpy as np


def sorted_selected(column: array[float], mask: bytes) -> Sequence[float]:
    """`sorted(compress(column, mask))` of a column of floats (`mask`: a byte a value, 1 keeps it)."""
    values = np.frombuffer(column, dtype=np.float64)
    keep = np.frombuffer(mask, dtype=np.bool_)
    return np.sort(values[keep], kind="stable")  # type: ignore[return-value]


def sorted_ratios(numerators: array[float], denominators: array[int], mask: bytes) -> Sequence[float]:
    """`sorted(map(truediv, compress(numerators, mask), compress(denominators, mask)))`; the
    denominators kept by `mask` are not 0 and below 2**53 (exact as floats, as `truediv` takes them)."""
    keep = np.frombuffer(mask, dtype=np.bool_)
    top = np.frombuffer(numerators, dtype=np.float64)[keep]
    bottom = np.frombuffer(denominators, dtype=np.int64)[keep].astype(np.float64)
    return np.sort(top / bottom, kind="stable")  # type: ignore[return-value]


def quantile_sorted(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of a sorted sequence, linear between closest ranks (numpy's default).

    >>> quantile_sorted([1.0, 2.0, 3.0, 4.0], 0.9)
    3.7
    """
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    if lo + 1 >= len(ordered):
        return float(ordered[-1])
    return round(float(ordered[lo]) + (float(ordered[lo + 1]) - float(ordered[lo])) * (pos - lo), 10)


def median_sorted(ordered: Sequence[float]) -> float:
    """`statistics.median` of an already sorted sequence (the same arithmetic, no second copy)."""
    n = len(ordered)
    if n % 2 == 1:
        return float(ordered[n // 2])
    return (float(ordered[n // 2 - 1]) + float(ordered[n // 2])) / 2
