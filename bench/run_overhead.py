"""What `logwatch run` costs a chatty vLLM, against the launch script's `tee`, measured in the same run.

A child writes realistic vLLM lines (uvicorn access lines, and one stats line per 1000 lines) at a
fixed rate, 200,000 lines/s for 10 s by default, paced in 5 ms batches, and records its own wall time
(start to last write). A child whose reader keeps up finishes in 10.0 s; one whose reader is slow
blocks on the full pipe and takes longer. The same child runs, alternately, under

    logwatch run --listen 127.0.0.1 --port <free> --log-dir <tmp> -- python run_overhead.py child ...
    bash -c 'python run_overhead.py child ... | tee -a <tmp>/tee.log >/dev/null'

(logwatch's stdout, where it echoes the child, also goes to /dev/null). Printed per mode: the child's
wall time (median of the repetitions: the number the target is about, <= 1.1x tee's), the whole
command's wall time (logwatch's own start-up and shutdown included), peak RSS (of logwatch or tee
alone, and of the process tree), and a check that the log file got every byte.

    python bench/run_overhead.py                      # 3 repetitions of each, 200k lines/s, 10 s
    python bench/run_overhead.py --repeat 5 --rate 200000 --seconds 10 --results bench/RESULTS.md
    python bench/run_overhead.py child --rate 200000 --seconds 10 --report r.json   # the child alone
    python bench/run_overhead.py --flat-out           # also: the child writing as fast as it can

With --results the numbers and the exact command are appended to that file under "## run".
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

LINGER = 4.0  # seconds the child stays after its last line, for the /metrics probe (not timed)
BATCH_LINES = 1000  # one stats line per batch: "a stats line every ~1000 lines"

_PATHS = [b"POST /v1/completions"] * 3 + [b"POST /v1/chat/completions"] * 2 + [
    b"GET /metrics", b"GET /health", b"GET /v1/models"]
_STATS = (
    "(APIServer pid=29214) INFO {stamp} [loggers.py:335] Engine 000: "
    "Avg prompt throughput: {p:.1f} tokens/s, "
    "Avg generation throughput: {g:.1f} tokens/s, Running: {r} reqs, Waiting: {w} reqs, "
    "CPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: {hit:.1f}%\n"
)


# -- the child ------------------------------------------------------------------------------------

def _access_block(seed: int) -> bytes:
    """999 uvicorn access lines, as vLLM's API server prints them under load."""
    import random

    rnd = random.Random(seed)
    lines = []
    for _ in range(BATCH_LINES - 1):
        path = rnd.choice(_PATHS)
        status = b"200 OK" if rnd.random() < 0.995 else b"400 Bad Request"
        port = rnd.randrange(32768, 61000)
        lines.append(b'INFO:     127.0.0.1:%d - "%s HTTP/1.1" %s\n' % (port, path, status))
    return b"".join(lines)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def child(rate: int, seconds: float, report: str | None, linger: float = 0.0) -> int:
    """Write `rate` lines/s for `seconds` to stdout, in batches of 1000 every 1000/rate s; then stay
    `linger` seconds (so logwatch's /metrics can be read while it still runs)."""
    import random

    rnd = random.Random(0)

    def stats(_: int) -> bytes:
        return _STATS.format(stamp=time.strftime("%m-%d %H:%M:%S"), p=rnd.uniform(0, 3000),
                             g=rnd.uniform(500, 2500), r=rnd.randrange(17), w=rnd.randrange(9),
                             kv=rnd.uniform(0, 5), hit=rnd.uniform(50, 90)).encode()

    batches = max(1, round(rate * seconds / BATCH_LINES))
    return _write_batches(batches, BATCH_LINES / rate if rate > 0 else 0.0, stats, report, linger)


def _write_batches(batches: int, period: float, stats: Callable[[int], bytes], report: str | None,
                   linger: float) -> int:
    """Write `batches` blocks of access lines, each ended by a stats line, one every `period` s
    (0: flat out); report the wall time to `report`, then stay `linger` seconds."""
    blocks = [_access_block(seed) for seed in range(16)]
    written = 0
    t0 = time.monotonic()
    for i in range(batches):
        if period:
            delay = t0 + i * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        data = blocks[i % len(blocks)] + stats(i)
        _write_all(1, data)
        written += len(data)
    wall = time.monotonic() - t0
    if report:
        _report(report, wall, batches, written)
    time.sleep(linger)
    return 0


def _report(path: str, wall: float, batches: int, written: int) -> None:
    tmp = path + ".tmp"
    Path(tmp).write_text(json.dumps({"wall_s": wall, "lines": batches * BATCH_LINES, "bytes": written,
                                     "stats_lines": batches, "lines_per_s": batches * BATCH_LINES / wall}))
    os.replace(tmp, path)


# -- the driver -----------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _PeakRss(threading.Thread):
    """Polls VmHWM (the kernel's own peak) of one process until it exits."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kib, self.done = pid, 0, threading.Event()
        self.start()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kib = max(self.peak_kib, int(line.split()[1]))
            except (OSError, ValueError):
                return
            self.done.wait(0.05)


class _Probe(threading.Thread):
    """Once the child reported its last write: how long until logwatch's /metrics counts every line."""

    def __init__(self, port: int, report: Path, timeout: float) -> None:
        super().__init__(daemon=True)
        self.port, self.report, self.timeout = port, report, timeout
        self.lag_s: float | None = None
        self.seen: dict[str, float] = {}
        self.start()

    def run(self) -> None:
        from prometheus_client.parser import text_string_to_metric_families

        while not self.report.exists():
            time.sleep(0.01)
        want = json.loads(self.report.read_text())
        t0 = time.monotonic()
        while time.monotonic() - t0 < self.timeout:
            try:
                url = f"http://127.0.0.1:{self.port}/metrics"
                with urllib.request.urlopen(url, timeout=2) as resp:
                    text = resp.read().decode()
            except OSError:
                time.sleep(0.05)
                continue
            self.seen = {}
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    self.seen[sample.name] = self.seen.get(sample.name, 0.0) + sample.value
            if self.seen.get("vllm_logwatch_log_lines_total", 0) >= want["lines"]:
                self.lag_s = time.monotonic() - t0
                return
            time.sleep(0.05)


def _measure(cmd: list[str], report: Path, watch_pid_of: str | None = None,
             probe_port: int | None = None, linger: float = 0.0) -> dict[str, Any]:
    """Run `cmd`; its wall time, the child's own report, peak RSS of the tree (wait4) and of one process."""
    report.unlink(missing_ok=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    probe = _Probe(probe_port, report, linger) if probe_port else None
    watcher = None
    if watch_pid_of is None:
        watcher = _PeakRss(proc.pid)
    elif watch_pid_of == "tee":
        watcher = _find_and_watch(proc.pid, b"tee")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if watcher is not None:
        watcher.done.set()
        watcher.join()
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} exited with {proc.returncode}:\n{stderr[-3000:]}")
    child_report = json.loads(report.read_text())
    row = {"wall_s": wall - linger, "child_s": child_report["wall_s"], "bytes": child_report["bytes"],
           "rate": child_report["lines_per_s"], "tree_rss_mib": usage.ru_maxrss / 1024,
           "tree_cpu_s": usage.ru_utime + usage.ru_stime,
           "rss_mib": (watcher.peak_kib / 1024) if watcher else None}
    if probe is not None:
        probe.join()
        row["parse_lag_s"] = probe.lag_s
        row["parsed_lines"] = probe.seen.get("vllm_logwatch_log_lines_total", 0)
        row["parsed_stats"] = probe.seen.get("vllm_logwatch_stats_lines_total", 0)
        row["want_lines"], row["want_stats"] = child_report["lines"], child_report["stats_lines"]
    return row


def _find_and_watch(parent: int, name: bytes) -> _PeakRss | None:
    """The `tee` under `bash -c` (bash forks it): found by its parent and name, then watched."""
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                comm = (entry / "comm").read_bytes().strip()
            except OSError:
                continue
            if comm == name and int(stat[stat.rfind(")") + 2:].split()[1]) == parent:
                return _PeakRss(int(entry.name))
        time.sleep(0.005)
    return None


def _tee(child_cmd: list[str], target: Path) -> list[str]:
    """The launch script's way: `child | tee -a FILE >/dev/null`."""
    return ["bash", "-c", f"{shlex.join(child_cmd)} | tee -a {shlex.quote(str(target))} >/dev/null"]


def _logwatch(log_dir: Path, child_cmd: list[str], port: int) -> list[str]:
    return [sys.executable, "-m", "vllm_logwatch", "run", "--listen", "127.0.0.1",
            "--port", str(port), "--log-dir", str(log_dir), "--", *child_cmd]


def _parsed(row: dict[str, Any]) -> str:
    if "parsed_lines" not in row:
        return ""
    lag = "never (within the linger)" if row["parse_lag_s"] is None else f"{row['parse_lag_s']:.2f} s"
    return (f", parsed {row['parsed_lines']:,.0f}/{row['want_lines']:,} lines and {row['parsed_stats']:,.0f}/"
            f"{row['want_stats']:,} stats lines, all parsed {lag} after the last write")


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s (runs: {', '.join(f'{v:.2f}' for v in values)})"


def drive(args: argparse.Namespace) -> int:
    here = Path(__file__).resolve()
    py = sys.executable
    check = subprocess.run([py, "-m", "vllm_logwatch", "run", "--help"], capture_output=True, check=False)
    if check.returncode != 0:
        raise SystemExit("`logwatch run` is not available in this checkout (logwatch run --help failed)")
    rows: dict[str, list[dict[str, Any]]] = {"tee": [], "logwatch": []}
    with tempfile.TemporaryDirectory(prefix="run-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        report = tmp / "child.json"
        child_cmd = [py, str(here), "child", "--rate", str(args.rate), "--seconds", str(args.seconds),
                     "--report", str(report), "--linger", str(LINGER)]
        # The child into /dev/null: can it reach the rate at all?
        alone = _measure([*child_cmd[:-2], "--linger", "0"], report)
        print(f"child alone (stdout /dev/null): {alone['rate']:,.0f} lines/s, {alone['child_s']:.2f} s, "
              f"{alone['bytes'] / 1e6:.0f} MB", flush=True)
        for rep in range(args.repeat):
            order = ("tee", "logwatch") if rep % 2 == 0 else ("logwatch", "tee")
            for mode in order:
                log_dir = tmp / f"logs-{mode}-{rep}"
                log_dir.mkdir()
                if mode == "tee":
                    target = log_dir / "tee.log"
                    row = _measure(_tee(child_cmd, target), report, watch_pid_of="tee", linger=LINGER)
                else:
                    port = _free_port()
                    cmd = _logwatch(log_dir, child_cmd, port)
                    row = _measure(cmd, report, probe_port=port, linger=LINGER)
                    target = next(log_dir.glob("*.log"))
                row["complete"] = target.stat().st_size == row["bytes"]
                rows[mode].append(row)
                print(f"  {mode:8} child {row['child_s']:.2f} s ({row['rate']:,.0f} lines/s), command "
                      f"{row['wall_s']:.2f} s, peak RSS {row['rss_mib'] or 0:.0f} MiB (tree "
                      f"{row['tree_rss_mib']:.0f} MiB), CPU {row['tree_cpu_s']:.1f} s (tree), "
                      f"log file complete: {row['complete']}{_parsed(row)}",
                      flush=True)
        flat = None
        if args.flat_out:
            flat = {}
            fast_cmd = [py, str(here), "child", "--rate", "0", "--lines", str(int(args.rate * args.seconds)),
                        "--report", str(report), "--linger", str(LINGER)]
            flat["tee"] = _measure(_tee(fast_cmd, tmp / "flat.log"), report)
            port = _free_port()
            flat["logwatch"] = _measure(_logwatch(tmp / "flat-logwatch", fast_cmd, port), report,
                                        probe_port=port, linger=LINGER)

    child_tee = [r["child_s"] for r in rows["tee"]]
    child_lw = [r["child_s"] for r in rows["logwatch"]]
    ratio = statistics.median(child_lw) / statistics.median(child_tee)
    whole_ratio = statistics.median(r["wall_s"] for r in rows["logwatch"]) / statistics.median(
        r["wall_s"] for r in rows["tee"])
    lines = [
        f"child: {args.rate:,} lines/s for {args.seconds:g} s ({alone['bytes'] / 1e6:.0f} MB; "
        f"alone into /dev/null it reached {alone['rate']:,.0f} lines/s), {args.repeat} repetitions, "
        "alternating",
        f"child wall time under tee:          {_fmt(child_tee)}",
        f"child wall time under logwatch run: {_fmt(child_lw)}",
        f"ratio logwatch / tee (child wall time, medians): {ratio:.3f}x (target <= 1.1x)",
        f"whole command wall time: tee {_fmt([r['wall_s'] for r in rows['tee']])}; logwatch "
        f"{_fmt([r['wall_s'] for r in rows['logwatch']])}; ratio {whole_ratio:.3f}x (includes logwatch's "
        f"start-up and shutdown)",
        f"peak RSS: logwatch {max(r['rss_mib'] or 0 for r in rows['logwatch']):.0f} MiB (whole tree "
        f"{max(r['tree_rss_mib'] for r in rows['logwatch']):.0f} MiB); tee "
        f"{max(r['rss_mib'] or 0 for r in rows['tee']):.1f} MiB "
        f"(tree {max(r['tree_rss_mib'] for r in rows['tee']):.0f} MiB)",
        f"CPU time of the whole tree (child included): tee {_fmt([r['tree_cpu_s'] for r in rows['tee']])}; "
        f"logwatch {_fmt([r['tree_cpu_s'] for r in rows['logwatch']])}",
        f"log file complete (every byte): tee {all(r['complete'] for r in rows['tee'])}, logwatch "
        f"{all(r['complete'] for r in rows['logwatch'])}",
        "logwatch's parser (its /metrics read before the child exits): "
        + "; ".join(_parsed(r).lstrip(", ") for r in rows["logwatch"]),
    ]
    if flat:
        lines.append(f"flat out ({int(args.rate * args.seconds):,} lines as fast as the child can): tee "
                     f"{flat['tee']['child_s']:.2f} s ({flat['tee']['rate']:,.0f} lines/s), logwatch "
                     f"{flat['logwatch']['child_s']:.2f} s ({flat['logwatch']['rate']:,.0f} lines/s)"
                     f"{_parsed(flat['logwatch'])}")
    print("\n".join(lines))
    if args.results:
        command = "python " + shlex.join(["bench/run_overhead.py", *sys.argv[1:]])
        _append_results(Path(args.results), command, lines)
    return 0 if ratio <= 1.1 else 1


def _append_results(path: Path, command: str, lines: list[str]) -> None:
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    cpu = os.cpu_count()
    block = [f"### {when} ({cpu} cores, Python {sys.version.split()[0]})", "", f"    {command}", "",
             *[f"- {line}" for line in lines], ""]
    text = path.read_text() if path.exists() else ""
    if "## run\n" not in text:
        text = text.rstrip("\n") + ("\n\n" if text else "") + "## run\n\n"
        text += "`logwatch run` against the launch script's `tee`: bench/run_overhead.py (child wall time " \
                "at a fixed 200,000 lines/s).\n\n"
        path.write_text(text + "\n".join(block) + "\n")
        return
    # Append at the end of the "## run" section (before the next "## " heading, if any).
    start = text.index("## run\n")
    nxt = text.find("\n## ", start + 1)
    end = len(text) if nxt < 0 else nxt + 1
    section = text[start:end].rstrip("\n") + "\n\n" + "\n".join(block) + "\n"
    path.write_text(text[:start] + section + ("\n" + text[end:] if nxt >= 0 else ""))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["child"]:
        ap = argparse.ArgumentParser(prog="run_overhead.py child")
        ap.add_argument("--rate", type=int, default=200_000, help="lines per second (0: as fast as possible)")
        ap.add_argument("--seconds", type=float, default=10.0)
        ap.add_argument("--lines", type=int, help="with --rate 0: how many lines")
        ap.add_argument("--report", help="write the child's own wall time here (JSON)")
        ap.add_argument("--linger", type=float, default=0.0, help="seconds to stay after the last line")
        a = ap.parse_args(argv[1:])
        if a.rate == 0:
            return _flat_child(a.lines or 2_000_000, a.report, a.linger)
        return child(a.rate, a.seconds, a.report, a.linger)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--flat-out", action="store_true", help="also time the child unpaced (information)")
    ap.add_argument("--results", metavar="MD", help="append the results to this Markdown file under '## run'")
    return drive(ap.parse_args(argv))


def _flat_child(lines: int, report: str | None, linger: float) -> int:
    stats = _STATS.format(stamp=time.strftime("%m-%d %H:%M:%S"), p=1000.0, g=2000.0, r=8, w=0, kv=1.0,
                          hit=70.0).encode()
    return _write_batches(max(1, lines // BATCH_LINES), 0.0, lambda _: stats, report, linger)


if __name__ == "__main__":
    sys.exit(main())
