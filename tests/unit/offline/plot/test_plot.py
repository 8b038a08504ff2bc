"""`logwatch plot`: the figure of a real log, inspected panel by panel and point by point.

docs/plot-example.png is this figure for the real vLLM 0.32 log; to redraw it:
`logwatch plot tests/data/real-vllm-cpu/serve_*.log -o docs/plot-example.png --tz UTC`.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, TESTS

pytest.importorskip("matplotlib")

from datetime import UTC

from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from vllm_logwatch.cli import main
from vllm_logwatch.offline.plot.collect import PANEL_TITLES, collect, draw
from vllm_logwatch.offline.reading.launches import iter_summary_records
from vllm_logwatch.parsing.events import EngineStats

DATA = TESTS / "data"
REAL_CPU_LOG = next((DATA / "real-vllm-cpu").glob("serve_*.log"))


def stats_of(*paths: Path, year: str | None = None) -> list[EngineStats]:
    records = iter_summary_records([str(p) for p in paths], tz="UTC", year=int(year) if year else None)
    return [e for _, e in records if isinstance(e, EngineStats)]


def figure_of(*paths: Path, year: str | None = None) -> Figure:
    return draw(collect(iter_summary_records([str(p) for p in paths], tz="UTC",
                                            year=int(year) if year else None)))


def data_lines(ax: object) -> dict[str, Line2D]:
    lines = ax.get_lines()
    return {line.get_label(): line for line in lines if not line.get_label().startswith("_")}


def finite_points(line: Line2D) -> int:
    return sum(1 for y in line.get_ydata() if math.isfinite(y))


def test_real_log_figure_panels_labels_and_points() -> None:
    stats = stats_of(REAL_CPU_LOG)
    assert len(stats) == 78
    fig = figure_of(REAL_CPU_LOG)
    axes = fig.axes
    assert len(axes) == 5
    assert [ax.get_title(loc="left").split(" (")[0] for ax in axes] == list(PANEL_TITLES)
    assert [ax.get_ylabel() for ax in axes] == [
        "tokens/s", "requests", "% of KV cache", "hit rate, %", "generation tokens/s"]
    assert axes[3].get_xlabel() == "time (UTC)"
    assert axes[4].get_xlabel() == "requests running"
    assert "serve_20261129T192328Z.log" in fig.get_suptitle() and "tiny-llama" in fig.get_suptitle()
    # The time panels share one x axis.
    assert all(ax.get_shared_x_axes().joined(axes[0], ax) for ax in axes[:4])

    # One engine: series named by metric; one point per stats line that carries the value.
    expected = {
        0: {"generation": 78, "prompt": 78},
        1: {"running": 78, "waiting": 78},
        2: {"KV cache usage": 78},
        3: {"prefix cache": 78},  # no MM cache field in this log: no MM line
    }
    for index, series in expected.items():
        lines = data_lines(axes[index])
        assert {name: finite_points(lines[name]) for name in lines} == series
        assert axes[index].get_legend() is not None
    ys = data_lines(axes[1])["running"].get_ydata()
    assert list(ys) == [e.running for e in stats]

    # The launch is marked on every time panel (an unlabelled vertical line).
    for ax in axes[:4]:
        marks = [line for line in ax.get_lines() if line.get_label().startswith("_")]
        assert len(marks) == 1

    # Scatter: one dot per busy line; the median line: one point per running count seen.
    (dots,) = [c for c in axes[4].collections if isinstance(c, PathCollection)]
    busy = [e for e in stats if e.running]
    assert len(dots.get_offsets()) == len(busy)
    median = data_lines(axes[4])["median per running count"]
    assert list(median.get_xdata()) == sorted({e.running for e in busy})


def test_engines_are_separate_lines_and_launches_months_apart_are_facets() -> None:
    fig = figure_of(DATA / "021.log", DATA / "039.log", year="2025")
    first, second = fig.axes[0], fig.axes[5]  # axes 5-8: the second facet's time panels
    names = {"generation, engine 0", "prompt, engine 0", "generation, engine 1", "prompt, engine 1"}
    assert set(data_lines(first)) == names
    assert set(data_lines(second)) == {"generation, engine 0", "prompt, engine 0"}
    # engine 0: one line in 021 (its own facet), five in 039 (the other); engine 1 only in 021.
    assert finite_points(data_lines(first)["generation, engine 0"]) == 1
    assert finite_points(data_lines(second)["generation, engine 0"]) == 5
    assert finite_points(data_lines(first)["generation, engine 1"]) == 1
    for ax in (first, second):
        marks = [line for line in ax.get_lines() if line.get_label().startswith("_")]
        assert len(marks) == 1


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_plot_writes_png_and_since_until_select(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.png"
    code = main(["plot", str(REAL_CPU_LOG), "-o", str(out), "--tz", "UTC",
                 "--since", "2026-11-29 19:24:00", "--until", "2026-11-29T19:24:59"])
    assert code == 0, capsys.readouterr().err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
    code = main(["plot", str(REAL_CPU_LOG), "-o", str(out), "--tz", "UTC", "--since", "2027-01-01"])
    assert code == 1
    assert "no stats lines with a time between 2027-01-01 and the end" in capsys.readouterr().err


def test_bad_time_and_bad_format_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", str(REAL_CPU_LOG), "-o", str(tmp_path / "x.png"), "--since", "yesterday"]) == 2
    assert "bad time 'yesterday'" in capsys.readouterr().err
    assert main(["plot", str(REAL_CPU_LOG), "-o", str(tmp_path / "x.nope"), "--tz", "UTC"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("logwatch plot: ") and err.count("\n") == 1


def test_single_stats_line_and_new_year(tmp_path: Path) -> None:
    line = ("(APIServer pid=7) INFO {} [loggers.py:259] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: {} tokens/s, Running: 2 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 1.0%")
    one = tmp_path / "serve_20261129_100000.log"
    one.write_text(line.format("11-29 10:00:10", 50.0) + "\n")
    lines = data_lines(figure_of(one).axes[0])
    assert finite_points(lines["generation"]) == 1
    assert lines["generation"].get_marker() == "o"  # a lone point is drawn as a dot

    span = tmp_path / "serve_20251231_235950.log"
    stamps = ["12-31 23:59:50", "01-01 00:00:00", "01-01 00:00:10"]
    span.write_text("\n".join(line.format(s, 10.0 * (i + 1)) for i, s in enumerate(stamps)) + "\n")
    gen = data_lines(figure_of(span).axes[0])["generation"]
    xs = list(gen.get_xdata())
    assert xs == sorted(xs) and xs[-1] - xs[0] == pytest.approx(20 / 86400)  # 20 s, not a year back
    assert list(gen.get_ydata()) == [10.0, 20.0, 30.0]


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_missing_matplotlib_is_a_clear_message(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from vllm_logwatch.cli import main\n"
        f"sys.exit(main(['plot', {str(REAL_CPU_LOG)!r}, '-o', {str(tmp_path / 'x.png')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == ("logwatch plot: plot needs matplotlib: pip install matplotlib (or, in a clone: "
                           "pip install '.[plot]')\n")
    # Both commands work: matplotlib is published, and the clone's pyproject has the extra.
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^plot = \[[^\]]*"matplotlib', pyproject, re.M), "the clone's extra holds matplotlib"
    assert not (tmp_path / "x.png").exists()


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_output_dash_writes_png_to_standard_output(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "vllm_logwatch", "plot", str(REAL_CPU_LOG), "-o", "-", "--tz", "UTC"]
    proc = subprocess.run(command, capture_output=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert proc.stdout.startswith(b"\x89PNG\r\n\x1a\n") and len(proc.stdout) > 20_000
    assert list(tmp_path.iterdir()) == []  # no file named '-'


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_output_dash_to_a_terminal_is_a_usage_error(tmp_path: Path) -> None:
    """An image is no text for a terminal: refused in one line, before the logs are read."""
    import pty

    leader, follower = pty.openpty()
    try:
        command = [sys.executable, "-m", "vllm_logwatch", "plot", str(REAL_CPU_LOG), "-o", "-"]
        proc = subprocess.run(command, stdout=follower, stderr=subprocess.PIPE, timeout=120, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 2
    assert proc.stderr.decode() == ("logwatch plot: -o -: standard output is a terminal: redirect it "
                                    "(-o - > run.png) or give a file name\n")
    assert list(tmp_path.iterdir()) == []


def test_help_says_what_dash_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plot", "--help"])
    assert "- writes PNG to standard output" in " ".join(capsys.readouterr().out.split())


def test_facets_split_on_hours_apart_or_another_model_and_merge_past_six() -> None:
    from datetime import datetime, timedelta

    from vllm_logwatch.offline.plot.collect import MAX_FACETS, facets, unrelated
    from vllm_logwatch.offline.reading.launches import Launch

    t = datetime(2026, 11, 29, 10)
    hour = timedelta(hours=1)
    runs = [(0, "m", 0), (1, "m", 2), (2, "m", 9), (3, "other", 10)]  # index, model, start (hours)
    launches = {i: (Launch(i, f"{i}.log", 1, model_name=m), t + h * hour) for i, m, h in runs}
    ends = {i: start + hour / 2 for i, (_, start) in launches.items()}
    drawn = facets(launches, ends)
    assert [f.launches for f in drawn] == [[0, 1], [2], [3]]  # 1.5 h apart: together; 6.5 h: apart
    assert [f.model for f in drawn] == ["m", "m", "other"]
    assert unrelated(launches, ends, drawn) == (
        "warning: these logs look unrelated: 2 models (m, other); drawn in 3 facets side by side, one "
        "per run of launches")
    many = {i: (Launch(i, f"{i}.log", 1), t + i * 10 * hour) for i in range(9)}
    assert len(facets(many, {i: s for i, (_, s) in many.items()})) == MAX_FACETS == 6
    one = {0: launches[0]}
    assert unrelated(one, ends, facets(one, ends)) is None


def test_two_models_get_a_scatter_colour_and_a_median_each() -> None:
    logs = sorted((DATA / "compare").glob("*/serve_*.log"))
    tiny, small = (next(p for p in logs if p.parent.name == name) for name in ("mns8-prefix", "small-model"))
    fig = figure_of(tiny, small)
    medians = sorted(label for label in data_lines(fig.axes[4]) if label.startswith("median"))
    assert medians == ["median, small-llama", "median, tiny-llama"]
    dots = [c.get_label() for c in fig.axes[4].collections]
    assert dots == ["stats line, tiny-llama", "stats line, small-llama"]


def test_a_fall_back_s_repeated_hour_ends_the_axis_at_the_last_line() -> None:
    """Berlin, 2026-10-25: lines from 02:30 CEST to 02:20 CET (the clocks went back at 03:00). By
    their wall clocks the last would be 02:59:50 CEST, 30 minutes early, and the axis would end there."""
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from matplotlib.dates import date2num

    from vllm_logwatch.offline.plot.collect import collect, draw
    from vllm_logwatch.offline.reading.launches import Launch

    berlin, t0 = ZoneInfo("Europe/Berlin"), datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    times = [(t0 + timedelta(seconds=10 * i)).astimezone(berlin) for i in range(301)]
    launch = Launch(0, "dst.log", 1, model_name="m")
    stats = [EngineStats(time=t, engine=0, running=2, waiting=0, generation_throughput=100.0) for t in times]
    data = collect([(launch, e) for e in stats])
    assert data.launches[0][1] == times[0] and data.ends[0] == times[-1]
    assert draw(data).axes[0].get_xlim()[1] > date2num(times[-1])


@pytest.mark.parametrize("tuning", ["fast", "general"])
def test_until_in_a_fall_back_s_repeated_hour_is_a_utc_time(tmp_path: Path, tuning: str) -> None:
    """Lines from 02:30 CEST to 02:20 CET (Berlin, 2026-10-25): `--until '2026-10-25 02:40'` (CEST, the
    first pass) keeps the 61 lines up to it, not the CET lines of 02:00 to 02:20 an hour later."""
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from vllm_logwatch.commands.plot import run_plot
    from vllm_logwatch.offline.reading.ranges import DEFAULT_TUNING

    berlin, t0 = ZoneInfo("Europe/Berlin"), datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    line = ("(APIServer pid=1) INFO {:%m-%d %H:%M:%S} [loggers.py:259] Engine 000: Avg prompt throughput: "
            "0.0 tokens/s, Avg generation throughput: 100.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 1.0%")
    log = tmp_path / "serve_20261025_023000.log"
    log.write_text("".join(line.format((t0 + timedelta(seconds=10 * i)).astimezone(berlin)) + "\n"
                           for i in range(301)))
    drawn = run_plot([str(log)], str(tmp_path / "x.png"), until="2026-10-25 02:40", tz="Europe/Berlin",
                     tuning=DEFAULT_TUNING if tuning == "fast" else None)
    assert drawn == 61
