"""The summary's sorted columns by numpy (`summary/build.py`) are `sorted(compress(...))`'s, float for
float, signed zeros in the same order, whichever way a column goes (numpy's as an array, read by the
summary's median and quantile as it reads a list)."""

from __future__ import annotations

from array import array
from itertools import compress
from operator import truediv

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_logwatch.offline.summary.build import median_sorted as _median_sorted
from vllm_logwatch.offline.summary.build import quantile_sorted as _quantile_sorted
from vllm_logwatch.offline.summary.build import sorted_ratios, sorted_selected

VALUE = st.one_of(st.sampled_from([0.0, -0.0, 1.0, 1e300, -1e-300]),
                  st.floats(allow_nan=False, allow_infinity=False))
ROWS = st.lists(st.tuples(VALUE, st.integers(1, 512), st.booleans()), max_size=200)


@settings(max_examples=25, deadline=None)
@given(ROWS)
def test_numpy_sorts_as_sorted(rows: list[tuple[float, int, bool]]) -> None:
    column = array("d", [v for v, _, _ in rows])
    counts = array("q", [c for _, c, _ in rows])
    mask = bytes(int(k) for _, _, k in rows)
    want = sorted(compress(column, mask))
    assert repr(list(map(float, sorted_selected(column, mask)))) == repr(want)
    ratios = sorted(map(truediv, compress(column, mask), compress(counts, mask)))
    assert repr(list(map(float, sorted_ratios(column, counts, mask)))) == repr(ratios)
    if want:
        ordered = sorted_selected(column, mask)
        for q in (0.1, 0.5, 0.9):
            assert _quantile_sorted(ordered, q) == _quantile_sorted(want, q)
        median = _median_sorted(ordered)
        assert type(median) is float and repr(median) == repr(_median_sorted(want))
