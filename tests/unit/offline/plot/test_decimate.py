"""`logwatch plot`'s point budget (offline/plot/decimate.py): every point while few; past the figure's pixel
columns, each column's first, lowest, highest and last point, in time order, whatever the chunks."""

from __future__ import annotations

import math

import pytest

np = pytest.importorskip("numpy")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from vllm_logwatch.offline.plot.decimate import Decimator, Dots, decimate  # noqa: E402

values = st.one_of(st.floats(0, 1e6, allow_nan=False), st.just(math.nan))


def feed(columns: int, xs: list[float], ys: list[float], chunk: int) -> Decimator:
    d = Decimator(columns)
    for i in range(0, len(xs), chunk):
        d.extend(np.array(xs[i:i + chunk]), np.array(ys[i:i + chunk]))
    return d


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.lists(st.tuples(st.floats(0, 1e4, allow_nan=False), values), max_size=400),
       st.integers(1, 64), st.booleans())
@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_min_and_max_of_every_column_survive(columns: int, points: list[tuple[float, float]], chunk: int,
                                             in_order: bool) -> None:
    if in_order:
        points.sort()
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    d = feed(columns, xs, ys, chunk)
    kept_x, kept_y = d.points()
    if d.grid is None:  # few points: every one, NaN included, as it came
        assert len(points) <= columns
        assert kept_x.tolist() == xs
        assert [y if not math.isnan(y) else "nan" for y in kept_y.tolist()] == \
            [y if not math.isnan(y) else "nan" for y in ys]
        return
    origin, width = d.grid
    kept = list(zip(kept_x.tolist(), kept_y.tolist(), strict=True))
    assert kept_x.tolist() == sorted(kept_x.tolist())  # time order
    assert set(kept) <= set(points)  # no point made up
    by_column: dict[int, list[float]] = {}
    for x, y in points:
        if not math.isnan(y):
            by_column.setdefault(math.floor((x - origin) / width), []).append(y)
    assert len(by_column) <= columns  # never more columns than pixels
    assert len(kept) <= 4 * len(by_column)
    for column, ys_in in by_column.items():
        got = [y for x, y in kept if math.floor((x - origin) / width) == column]
        assert min(got) == min(ys_in) and max(got) == max(ys_in)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.lists(st.tuples(st.floats(0, 1e4, allow_nan=False), values), max_size=300),
       st.integers(1, 50), st.integers(1, 50))
@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_the_points_kept_do_not_depend_on_the_chunks(columns: int, points: list[tuple[float, float]],
                                                    a: int, b: int) -> None:
    """So the fast lane (runs of lines) and the general path (a record at a time) draw the same line."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    one, other = feed(columns, xs, ys, a).points(), feed(columns, xs, ys, b).points()
    assert np.array_equal(one[0], other[0]) and np.array_equal(one[1], other[1], equal_nan=True)


def test_every_point_kept_when_few_a_nan_included() -> None:
    d = Decimator(10)
    d.extend(np.array([1.0, 2.0]), np.array([5.0, math.nan]))
    d.extend(np.array([3.0, 4.0]), np.array([6.0, 7.0]))
    x, y = d.points()
    assert x.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert [v if not math.isnan(v) else None for v in y.tolist()] == [5.0, None, 6.0, 7.0]


def test_a_long_series_keeps_its_peak_and_dip() -> None:
    xs = np.arange(100_000, dtype=np.float64)
    ys = np.full(100_000, 50.0)
    ys[12_345], ys[67_890] = 1000.0, -3.0  # one-point peak and dip
    d = Decimator(100)
    d.extend(xs[:50_000], ys[:50_000])
    for i in range(50_000, 100_000, 999):
        d.extend(xs[i:i + 999], ys[i:i + 999])
    x, y = d.points()
    assert len(x) <= 4 * 100
    assert 1000.0 in y.tolist() and -3.0 in y.tolist()
    assert x[0] == 0.0 and x[-1] == 99_999.0


def test_decimate_is_the_same_over_kept_points_and_new_ones() -> None:
    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(0, 1000, 5000))
    y = rng.normal(size=5000)
    whole = decimate(x, y, 0.0, 16.0)
    kx, ky = decimate(x[:2500], y[:2500], 0.0, 8.0)
    part = decimate(np.concatenate((kx, x[2500:])), np.concatenate((ky, y[2500:])), 0.0, 16.0)
    assert whole[0].tolist() == part[0].tolist() and whole[1].tolist() == part[1].tolist()


def test_dots_all_while_few_then_one_per_cell() -> None:
    few = Dots(limit=100, width=10, height=10)
    few.extend(np.array([1.0, 1.0, 2.0]), np.array([5.0, 5.0, 7.0]))
    assert few.points()[0].tolist() == [1.0, 1.0, 2.0]
    many = Dots(limit=100, width=10, height=10)
    rng = np.random.default_rng(3)
    many.extend(rng.integers(1, 65, 20_000).astype(float), rng.uniform(0, 3000, 20_000))
    x, y = many.points()
    assert len(x) <= 11 * 11  # one a cell of the 10 x 10 grid (its far edges included)
    assert y.max() > 2900 and y.min() < 100


def test_band_median_within_half_a_percent_and_extremes_exact_whatever_the_chunks() -> None:
    rng = np.random.default_rng(11)
    xs = np.arange(20_000, dtype=np.float64)
    ys = np.where(rng.uniform(size=20_000) < 0.2, 0.0, rng.lognormal(7, 1, 20_000))
    whole, chunked = Decimator(100), Decimator(100)
    assert whole.band() is None
    whole.extend(xs, ys)
    for i in range(0, 20_000, 777):
        chunked.extend(xs[i:i + 777], ys[i:i + 777])
    band = whole.band()
    assert band is not None
    middle, median, low, high = band
    assert all(a.tolist() == b.tolist() for a, b in zip(band, chunked.band() or (), strict=True))
    assert len(middle) <= 100
    origin, width = whole.grid or (0.0, 1.0)
    column = np.floor((xs - origin) / width)
    for k, at in enumerate(middle):
        mine = ys[column == np.floor((at - origin) / width)]
        exact = float(np.sort(mine)[(len(mine) - 1) // 2])
        assert median[k] == pytest.approx(exact, rel=0.005, abs=1e-12)
        assert (low[k], high[k]) == (mine.min(), mine.max())
