"""`logwatch plot` and `compare -o` on the inputs that used to draw badly, with what the eye needs
asserted on the figure itself: a run of days as a median line with a min-max band (prompt and
generation in distinct colours), launches days apart side by side with a warning, one instant as a
small window, KV cache on 0-100%, and no two tick labels overlapping (bounding boxes from the renderer).

The multi-day log is the bundled real vLLM log with its stamps rewritten: its start-up lines once, then
its stats lines again and again, 10 s apart, for three days. Each test saves its image in tmp_path.
"""

from __future__ import annotations

import io
import itertools
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from support import TESTS

pytest.importorskip("matplotlib")

from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.dates import num2date
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text

from vllm_logwatch.cli import main
from vllm_logwatch.commands.compare import run_compare
from vllm_logwatch.offline.plot.collect import collect, draw
from vllm_logwatch.offline.reading.launches import iter_summary_records

DATA = TESTS / "data"
REAL_CPU_LOG = next((DATA / "real-vllm-cpu").glob("serve_*.log"))
STAMP = re.compile(r"(INFO|WARNING|ERROR|DEBUG) (\d\d-\d\d \d\d:\d\d:\d\d)")


def restamped(lines: list[str], start: datetime, step: timedelta | None = None) -> list[str]:
    """`lines` with their vLLM stamps moved: by the shift that puts the first at `start`, or (`step`)
    each stamped line `step` after the previous one."""
    out, first, at = [], None, start
    for line in lines:
        m = STAMP.search(line)
        if m is None:
            out.append(line)
            continue
        old = datetime.strptime(f"{start.year}-{m.group(2)}", "%Y-%m-%d %H:%M:%S")
        first = first or old
        new = at if step is not None else start + (old - first)
        at += step or timedelta(0)
        out.append(line[:m.start(2)] + new.strftime("%m-%d %H:%M:%S") + line[m.end(2):])
    return out


def real_lines() -> list[str]:
    return REAL_CPU_LOG.read_text(encoding="utf-8").splitlines(keepends=True)


def multi_day_log(path: Path, days: int = 3) -> int:
    """The real log's start-up lines, then its stats lines 10 s apart for `days` days; the line count."""
    lines = real_lines()
    stats = [line for line in lines if "Avg generation throughput" in line]
    head = lines[:next(i for i, line in enumerate(lines) if "Avg generation throughput" in line)]
    count = days * 8640
    repeated = [stats[i % len(stats)] for i in range(count)]
    body = restamped(repeated, datetime(2026, 11, 1), timedelta(seconds=10))
    path.write_text("".join(restamped(head, datetime(2026, 10, 31, 23, 58)) + body), encoding="utf-8")
    return count


def figure(*paths: Path) -> Figure:
    return draw(collect(iter_summary_records([str(p) for p in paths], tz="UTC", year=2026)))


def labels_do_not_overlap(fig: Figure, axes: list[Axes]) -> None:
    """No two visible tick labels of an x axis overlap, measured by the renderer."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    fig.draw(renderer)
    for ax in axes:
        boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()
                 if t.get_visible() and t.get_text()]
        boxes.sort(key=lambda b: b.x0)
        for left, right in itertools.pairwise(boxes):
            assert left.x1 <= right.x0, f"tick labels overlap on {ax.get_title(loc='left')!r}: {left} {right}"


def days_of(ax: Axes) -> float:
    lo, hi = ax.get_xlim()
    return hi - lo


def test_multi_day_log_draws_median_and_band_in_distinct_colours(tmp_path: Path) -> None:
    log = tmp_path / "serve_20261031T235800Z.log"
    count = multi_day_log(log)
    fig = figure(log)
    fig.savefig(tmp_path / "multi-day.png", dpi=100)
    throughput, _, kv, _ = fig.axes[:4]
    lines = {line.get_label(): line for line in throughput.get_lines()
             if not line.get_label().startswith("_")}
    assert set(lines) == {"generation, median", "prompt, median"}
    bands = {c.get_label(): c for c in throughput.collections if isinstance(c, PolyCollection)}
    assert set(bands) == {"generation, min-max", "prompt, min-max"}
    gen, prompt = lines["generation, median"], lines["prompt, median"]
    assert to_rgba(gen.get_color()) != to_rgba(prompt.get_color())
    assert to_rgba(bands["generation, min-max"].get_facecolor()[0])[:3] == to_rgba(gen.get_color())[:3]
    assert len(gen.get_xdata()) <= 1200 < count  # one point per pixel column at most
    # The band holds the real log's extremes; the median line lies inside it.
    text = REAL_CPU_LOG.read_text(encoding="utf-8")
    real = [float(m.group(1)) for m in re.finditer(r"generation throughput: ([\d.]+)", text)]
    top = max(path.vertices[:, 1].max() for path in bands["generation, min-max"].get_paths())
    assert top == pytest.approx(max(real))
    assert 0 < max(gen.get_ydata()) < max(real)
    assert kv.get_ylim() == (0.0, 100.0)
    assert 2.9 < days_of(throughput) < 3.2
    labels_do_not_overlap(fig, [fig.axes[3]])


def test_launches_days_apart_are_facets_with_a_warning(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    lines = real_lines()
    first, second = tmp_path / "serve_20261129T192328Z.log", tmp_path / "serve_20261202T080000Z.log"
    first.write_text("".join(lines), encoding="utf-8")
    second.write_text("".join(restamped(lines, datetime(2026, 12, 2, 8, 0))), encoding="utf-8")
    out = tmp_path / "days-apart.png"
    assert main(["plot", str(first), str(second), "-o", str(out), "--tz", "UTC"]) == 0
    err = capsys.readouterr().err
    assert err == ("logwatch plot: warning: these logs look unrelated: 2.5 days between launches; "
                   "drawn in 2 facets side by side, one per run of launches\n")
    fig = figure(first, second)
    left, right = fig.axes[0], fig.axes[5]
    for ax, day in ((left, 29), (right, 2)):
        assert days_of(ax) < 5 / 1440  # each launch on its own ~3-minute axis, not a sliver of days
        assert num2date(sum(ax.get_xlim()) / 2).day == day
        (mark,) = [line for line in ax.get_lines() if line.get_label().startswith("_")]
        assert isinstance(mark, Line2D)
    labels_do_not_overlap(fig, [fig.axes[3], fig.axes[8]])
    # The launch labels are inside their facet, whole.
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax in (left, right):
        (note,) = [t for t in ax.texts if t.get_text().startswith("launch ")]
        box, frame = note.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 + 1, note.get_text()


def test_one_instant_is_a_small_window_that_says_so(tmp_path: Path) -> None:
    line = next(line for line in real_lines() if "Avg generation throughput" in line)
    log = tmp_path / "serve_20261129T192328Z.log"
    log.write_text(line, encoding="utf-8")
    fig = figure(log)
    fig.savefig(tmp_path / "one-instant.png", dpi=100)
    assert days_of(fig.axes[0]) == pytest.approx(10 / 1440)  # ten minutes, not five years
    assert any("nothing to draw over time" in t.get_text() for t in fig.axes[0].texts)
    labels_do_not_overlap(fig, [fig.axes[3]])


def bucketed_log(path: Path) -> None:
    """A launch whose running counts spread over 1-40 (its concurrency rows are buckets: 5-8, 9-16, ...)
    made from the real log's lines, each with its running count rewritten."""
    lines = [line for line in real_lines() if "Avg generation throughput" in line]
    # Each count on two lines in a row: the second closes an interval that count held (a row's).
    out = [re.sub(r"Running: \d+ reqs", f"Running: {1 + (i // 2 * 7) % 40} reqs", line)
           for i, line in enumerate(lines * 3)]
    path.parent.mkdir()
    path.write_text("".join(restamped(out, datetime(2026, 12, 1, 19, 0), timedelta(seconds=2))),
                    encoding="utf-8")


def test_compare_figure_ticks_do_not_collide_and_dots_say_how_many_intervals(tmp_path: Path) -> None:
    from vllm_logwatch.offline.compare.differences import build_compare_figure

    bucketed = tmp_path / "spread-load" / "serve_20261201T190000Z.log"
    bucketed_log(bucketed)
    logs = [*sorted(str(p) for p in (DATA / "compare").glob("*/serve_*.log")), str(bucketed)]
    out = tmp_path / "compare.png"
    cmp = run_compare(logs, tz="UTC", output=str(out), out=io.StringIO())
    assert out.stat().st_size > 20_000
    fig = build_compare_figure(cmp)
    fig.savefig(tmp_path / "compare-again.png")
    top, bottom = fig.axes[:2]
    labels = [t.get_text() for t in bottom.get_xticklabels()]
    assert "5-8" in labels and "9-16" in labels  # buckets, next to exact counts
    labels_do_not_overlap(fig, [bottom])
    # The legend names launches by their folders (the file names are all serve_<time>.log).
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    assert legend[0] == "mns16-prefix: model=tiny-llama, enable_prefix_caching=on, max_num_seqs=16"
    assert legend[1] == "mns8-prefix: max_num_seqs=8"
    assert any(text.startswith("spread-load") for text in legend)
    # A dot from one interval is smaller and fainter than one from many.
    dots = [c for c in top.collections if c.get_offsets().shape[0] and len(c.get_sizes()) > 1]
    sizes = [size for c in dots for size in c.get_sizes()]
    alphas = [rgba[3] for c in dots for rgba in c.get_facecolors()]
    assert min(sizes) < 10 < 40 < max(sizes) and min(alphas) < 0.5 < max(alphas) == 1.0
    notes = bottom.get_legend()
    assert notes.get_title().get_text() == "a dot's size: intervals in its row"
    assert [t.get_text() for t in notes.get_texts()][:3] == ["1 interval", "10 intervals", "50 intervals"]


def dollar_logs(tmp_path: Path) -> list[Path]:
    """Two copies of the real log named `a_$x^{$_...` and `b_$x^{$_...`, the second serving the model
    `m$\\frac{1}{$x`: matplotlib reads the text between two `$` as a formula (these do not parse)."""
    paths = [tmp_path / f"{c}_$x^{{$_20261129T192328Z.log" for c in "ab"]
    paths[0].write_text("".join(real_lines()), encoding="utf-8")
    text = "".join(real_lines())  # the args line prints a Python repr, the engine's line the name
    text = text.replace("'served_model_name': ['tiny-llama']", "'served_model_name': ['m$\\\\frac{1}{$x']")
    paths[1].write_text(text.replace("served_model_name=tiny-llama", "served_model_name=m$\\frac{1}{$x"),
                        encoding="utf-8")
    return paths


def drawn_literally(fig: Figure, *names: str) -> None:
    """Every text of `fig` has its `$` escaped (none read as a formula) and each name is drawn."""
    texts = [t.get_text() for t in fig.findobj(Text)]
    assert not [t for t in texts if re.search(r"(?<!\\)\$", t)]
    for name in names:
        assert any(name.replace("$", "\\$") in t for t in texts), name


def test_a_dollar_in_a_file_or_model_name_is_drawn_as_it_is(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    logs = dollar_logs(tmp_path)
    for log in logs:
        out = tmp_path / f"{log.name}.png"
        assert main(["plot", str(log), "-o", str(out), "--tz", "UTC"]) == 0, capsys.readouterr().err
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    drawn_literally(figure(*logs), "m$\\frac{1}{$x", "tiny-llama")
    drawn_literally(figure(logs[0]), logs[0].name)


def test_compare_draws_a_dollar_in_a_file_or_model_name_as_it_is(tmp_path: Path) -> None:
    from vllm_logwatch.offline.compare.differences import build_compare_figure

    logs = dollar_logs(tmp_path)
    out = tmp_path / "compare.png"
    cmp = run_compare([str(p) for p in logs], tz="UTC", output=str(out), out=io.StringIO())
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    drawn_literally(build_compare_figure(cmp), logs[0].name, "m$\\frac{1}{$x")


def test_compare_lines_break_at_counts_without_data_and_the_pareto_panel_is_a_frontier() -> None:
    """The throughput lines join two rows only when no running count lies between them (mns16-prefix has
    rows at 1, 7 and 8: no line from 1 to 7), and the Pareto panel draws each launch's points with one
    line through its non-dominated ones (no other point has both more total and more per-stream tok/s),
    left to right: it falls and never crosses itself."""
    from vllm_logwatch.offline.compare.differences import build_compare_figure, comparison_summary, row_x
    from vllm_logwatch.offline.summary.answers import pareto

    logs = sorted(str(p) for p in (DATA / "compare").glob("*/serve_*.log"))
    cmp = run_compare(logs, tz="UTC", out=io.StringIO())
    fig = build_compare_figure(cmp)
    top, bottom, front = fig.axes[:3]
    joined = 0
    for i, c in enumerate(cmp.launches):
        rows = {row_x(r): r for r in c.group.concurrency}
        for ax in (top, bottom):
            for line in (ln for ln in ax.get_lines() if ln.get_color() == f"C{i % 10}"):
                xs = list(line.get_xdata())
                for a, b in itertools.pairwise(xs):
                    assert rows[b].lo == (rows[a].hi or rows[a].lo) + 1, (c.name, rows[a].running,
                                                                          rows[b].running)
                    joined += 1
    assert joined > 0  # rows next to each other are still joined
    curves = pareto(comparison_summary(cmp), None)
    for i, curve in enumerate(c for c in curves if c["points"]):
        points = [(p["total_tps_per_gpu"], p["per_stream_tps"]) for p in curve["points"]]
        best = sorted(p for p in points if not any(q != p and q[0] >= p[0] and q[1] >= p[1] for q in points))
        (line,) = [ln for ln in front.get_lines() if ln.get_color() == f"C{i % 10}"]
        assert list(zip(line.get_xdata(), line.get_ydata(), strict=True)) == best, curve["launch"]
        assert all(b[1] < a[1] for a, b in itertools.pairwise(best))
        dots = sum(len(coll.get_offsets()) for coll in front.collections if coll.get_gid() == curve["launch"])
        assert dots == len(points), curve["launch"]  # every point is still drawn
