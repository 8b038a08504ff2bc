"""`logwatch plot` over the fast lane: the figure of the general path on real logs, and memory flat in
the file size on a big generated log (every line's points kept would be ~330 MB at this size)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from support import TESTS

pytest.importorskip("matplotlib")

from vllm_logwatch.commands.plot import run_plot
from vllm_logwatch.offline.plot.collect import DPI, FIGSIZE, collect, draw
from vllm_logwatch.offline.reading.launches import iter_summary_records
from vllm_logwatch.offline.reading.ranges import Tuning

DATA = TESTS / "data"
REAL_CPU_LOG = next((DATA / "real-vllm-cpu").glob("serve_*.log"))
SMALL = Tuning(parallel_min_bytes=1, range_bytes=4096, dense_probe=512)
"""Every file through the worker processes."""

RSS_DRIVER = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "vllm_logwatch", "plot", *sys.argv[1:]], check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""
"""Linux keeps a process's peak RSS over exec, so a child forked from pytest would start at pytest's:
a small driver runs `logwatch plot` as its own child and reports that child's peak (and its workers')."""


def peak_rss_mb(*args: str) -> float:
    """Peak RSS (MB) of `logwatch plot ARGS`, its worker processes included."""
    proc = subprocess.run([sys.executable, "-c", RSS_DRIVER, *args], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1]) / 1024


def write_stats_log(path: Path, size: int) -> int:
    """About `size` bytes of common V1 stats lines, 10 s apart; returns the line count."""
    rng = random.Random(14)
    values = [(rng.uniform(0, 20000), rng.uniform(0, 3000), rng.randint(0, 64), rng.randint(0, 40),
               rng.uniform(0, 100), rng.uniform(0, 100)) for _ in range(997)]
    lines, written, secs = [], 0, 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size:
            p, g, r, w, kv, pfx = values[secs // 10 % 997]
            day, hh, mm, ss = 1 + secs // 86400, secs // 3600 % 24, secs // 60 % 60, secs % 60
            line = (f"(APIServer pid=42) INFO 11-{day:02d} {hh:02d}:{mm:02d}:{ss:02d} [loggers.py:335] "
                    f"Engine 000: Avg prompt throughput: {p:.1f} tokens/s, Avg generation throughput: "
                    f"{g:.1f} tokens/s, Running: {r} reqs, Waiting: {w} reqs, GPU KV cache usage: "
                    f"{kv:.1f}%, Prefix cache hit rate: {pfx:.1f}%\n")
            lines.append(line)
            written += len(line)
            secs += 10
            if len(lines) == 4096:
                out.write("".join(lines))
                lines.clear()
        out.write("".join(lines))
    return secs // 10


@pytest.mark.parametrize("logs", [[REAL_CPU_LOG], [DATA / "012.log", REAL_CPU_LOG, DATA / "017.log"],
                                  sorted(DATA.glob("*.log"))], ids=["real", "three", "every-log"])
def test_fast_lane_image_is_the_general_paths(tmp_path: Path, logs: list[Path]) -> None:
    paths = [str(p) for p in logs]
    fast, general = tmp_path / "fast.png", tmp_path / "general.png"
    drawn = run_plot(paths, str(fast), tz="UTC", year=2026, tuning=SMALL)
    assert drawn == run_plot(paths, str(general), tz="UTC", year=2026, tuning=None)
    assert fast.read_bytes() == general.read_bytes()


def test_fast_lane_image_is_the_general_paths_past_the_pixel_budget(tmp_path: Path) -> None:
    log = tmp_path / "serve_20261101_000000.log"
    write_stats_log(log, 2 << 20)  # ~8000 stats lines: every line decimated
    fast, general = tmp_path / "fast.png", tmp_path / "general.png"
    assert run_plot([str(log)], str(fast), tz="UTC", tuning=SMALL) == \
        run_plot([str(log)], str(general), tz="UTC", tuning=None)
    assert fast.read_bytes() == general.read_bytes()


def test_fast_lane_since_until_select_as_the_general_path(tmp_path: Path) -> None:
    fast, general = tmp_path / "fast.png", tmp_path / "general.png"
    window = {"since": "2026-11-29 19:23:58", "until": "2026-11-29 19:25:13", "tz": "UTC"}
    drawn = run_plot([str(REAL_CPU_LOG)], str(fast), tuning=SMALL, **window)  # type: ignore[arg-type]
    assert 0 < drawn < 78
    assert drawn == run_plot([str(REAL_CPU_LOG)], str(general), tuning=None, **window)  # type: ignore[arg-type]
    assert fast.read_bytes() == general.read_bytes()


def test_big_log_plot_memory_is_flat_and_lines_bounded(tmp_path: Path) -> None:
    log = tmp_path / "serve_20261101_000000.log"
    count = write_stats_log(log, 70 << 20)  # over the fast lane's parallel threshold (64 MB)
    small = peak_rss_mb(str(REAL_CPU_LOG), "-o", str(tmp_path / "small.png"))
    big = peak_rss_mb(str(log), "-o", str(tmp_path / "big.png"))
    assert (tmp_path / "big.png").stat().st_size > 10_000
    print(f"peak RSS {big:.0f} MB for {count} stats lines, {small:.0f} MB for a small log")
    assert big < small + 80, f"{big:.0f} MB for {count} stats lines vs {small:.0f} MB for a small log"
    assert big < 150, f"{big:.0f} MB"

    assert count > 200_000


def test_a_plot_of_many_lines_is_a_median_per_pixel_column_and_a_band(tmp_path: Path) -> None:
    """What is drawn: a median per pixel column of each line, and a min-max band where the extremes stay
    (ten times more lines than columns, read by the range workers as a big log is)."""
    log = tmp_path / "serve_20261101_000000.log"
    count = write_stats_log(log, 8 << 20)
    fig = draw(collect(iter_summary_records([str(log)], fast=SMALL, tz="UTC")))
    generation = next(line for line in fig.axes[0].get_lines() if line.get_label() == "generation, median")
    ys = list(generation.get_ydata())
    assert count > 10 * int(FIGSIZE[0] * DPI) and len(ys) <= int(FIGSIZE[0] * DPI)
    (band,) = [c for c in fig.axes[0].collections if c.get_label() == "generation, min-max"]
    edges = [y for path in band.get_paths() for y in path.vertices[:, 1]]
    assert max(edges) > 2990 and min(edges) < 10
    assert min(ys) > 500 and max(ys) < 2500  # uniform on 0-3000, ~20 a column: medians near 1500
