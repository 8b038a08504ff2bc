"""`logwatch top` for real: `--once` over real logs against `summary` and `parse`, a vLLM server's own
/metrics (a recorded snapshot of the real CPU server, served by a tiny HTTP server), and the
interactive view driven in tmux (send-keys, capture-pane) at 80x24 and 160x48 over a real
`logwatch watch` (behind TLS and basic auth), a real `logwatch demo`, a folder of three real logs being
appended to, and a URL that is down.

One watch, one demo and two tmux sessions for the whole module; every wait polls with a deadline.
"""

from __future__ import annotations

import contextlib
import csv
import http.server
import io
import os
import re
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import bcrypt
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import (
    ROOT,
    TESTS,
    TLSFiles,
    WatchProcess,
    free_port,
    make_tls_files,
    poll_until,
    required_tool,
    run_demo,
    run_watch,
)

from vllm_logwatch import cli
from vllm_logwatch.commands.top import TopOptions, build_board
from vllm_logwatch.terminal.render import pct, tps

REAL = TESTS / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
LOGS = {"alpha": TESTS / "data" / "002.log", "beta": REAL, "gamma": TESTS / "data" / "010.log"}
VLLM_METRICS = TESTS / "data" / "real-vllm-cpu" / "metrics_final.prom"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out


def _last_row(capsys: pytest.CaptureFixture[str], log: Path) -> dict[str, str]:
    rows = list(csv.DictReader(io.StringIO(_run(capsys, "parse", str(log), "--csv"))))
    return rows[-1]


def _concurrency_lines(text: str) -> list[list[str]]:
    """The rows of the first throughput-by-concurrency table in `text`, as words."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lower().startswith("throughput by concurrency")),
                 len(lines))  # none: nothing ran
    rows: list[list[str]] = []
    for line in lines[start + 1:]:
        words = line.split()
        if not words:
            if rows:
                break
            continue
        if words[0][0].isdigit() or words[0].startswith(">"):
            rows.append(words)
    return rows


def test_once_over_a_folder_of_real_logs_shows_what_parse_and_summary_say(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, log in LOGS.items():
        shutil.copy(log, tmp_path / f"{name}.log")
    frame = _run(capsys, "top", "--once", "--detail", "--width", "80", str(tmp_path))
    assert frame.startswith("fleet 3 servers ")
    tables = 0
    for name, log in LOGS.items():
        last = _last_row(capsys, log)
        row = _cells(frame, name + " ")  # the table comes before the panes
        # server state age gen/s prompt/s run wait KV% hit% TBT preempt
        kv = float(last["gpu_kv_cache_usage_pct"] or last["cpu_kv_cache_usage_pct"]) / 100
        hit = last["prefix_cache_hit_rate_pct"]
        assert row[3:9] == [tps(float(last["generation_throughput"])), tps(float(last["prompt_throughput"])),
                            last["running"], last["waiting"], pct(kv),
                            pct(float(hit) / 100) if hit else "-"], name
        summary = _run(capsys, "summary", str(log))
        pane = frame[frame.index(f"\n{name}  logwatch"):]
        assert _concurrency_lines(pane) == _concurrency_lines(summary), name
        tables += bool(_concurrency_lines(summary))
    assert tables == 2  # gamma's log has no interval with a request running


def test_many_log_targets_are_read_by_one_thread(tmp_path: Path) -> None:
    """Each log target was a watch's pipeline with its own threads (its follower's, its housekeeping's,
    its file notifications') waking every second: 50 targets cost 4.3% of a core idle. One thread now
    polls them all, and a line appended to any of them still shows."""
    data = REAL.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    files = [tmp_path / f"server{i}.log" for i in range(6)]
    for f in files:
        f.write_bytes(data[:cut])
    before = threading.active_count()
    board = build_board(TopOptions(targets=tuple(map(str, files)), interval=0.05))
    try:
        board.start(0.05)
        assert threading.active_count() - before <= 1, [t.name for t in threading.enumerate()]
        with open(files[3], "ab") as f:
            f.write(data[cut:])
        last = _parse_last(REAL)

        def shown() -> bool:
            gen = {v.name: v.engines[0].get("gen_tps") for v in board.refresh() if v.engines}
            return gen.get("server3.log") == float(last["generation_throughput"])

        poll_until(shown, 10, "the appended lines read")
    finally:
        board.close()


class _Snapshot(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as vLLM's uvicorn
    body = VLLM_METRICS.read_bytes()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def vllm_url() -> Iterator[str]:
    """A recorded /metrics of the real vLLM CPU server, served as vLLM serves it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Snapshot)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def test_once_over_a_vllm_servers_own_metrics(vllm_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    frame = _run(capsys, "top", "--once", "--detail", "--width", "100", "--interval", "0.2", vllm_url)
    row = _cells(frame, "127.0.0.1:")  # the counters did not move between the two reads
    assert row[1:4] == ["idle", "0s", "0.0"], frame
    assert "KV tokens: 524288" in frame and "KV blocks: 4096" in frame and "block size: 128" in frame
    # time between tokens: 280,060 of 296,322 observations at most 10 ms: the median is in the first
    # bucket, 10 ms x (296,322 / 2) / 280,060 = 5.3 ms (Prometheus' histogram_quantile)
    [tbt] = [line.split() for line in frame.splitlines() if line.startswith("time between tokens")]
    assert tbt[3:5] == ["all", "5.3ms"], frame


PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> tuple[TLSFiles, Path, Path]:
    """The watch's TLS files, its --web-config (TLS and basic auth), the password file top reads."""
    folder = tmp_path_factory.mktemp("top-tls")
    tls = make_tls_files(folder)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    config = folder / "web.yml"
    config.write_text(f"tls_server_config:\n  cert_file: {tls.server_cert}\n  key_file: {tls.server_key}\n"
                      f"basic_auth_users:\n  prometheus: '{hashed}'\n", encoding="utf-8")
    password = folder / "password"
    password.write_text(PASSWORD + "\n", encoding="utf-8")
    return tls, config, password


@pytest.fixture(scope="module")
def watch(tmp_path_factory: pytest.TempPathFactory,
          secrets: tuple[TLSFiles, Path, Path]) -> Iterator[WatchProcess]:
    """One real `logwatch watch` over the real log, behind TLS and basic auth, for the module."""
    tls, config, _ = secrets
    folder = tmp_path_factory.mktemp("top-watch")
    shutil.copy(REAL, folder / REAL.name)
    with run_watch(folder, "--from-start", "--web-config", str(config), scheme="https",
                   client_options={"verify": ssl.create_default_context(cafile=str(tls.ca)),
                                   "auth": ("prometheus", PASSWORD)}) as process:
        process.wait_sample("vllm_logwatch_stats_lines_total", {"engine": "0", "model_name": "tiny-llama"},
                            expected=78)
        yield process


DEMO_SPEED = 8
"""The demo's pace: its first stats line ~3 s after start, then one every 0.25 s (the log's 2 s / 8)."""


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real `logwatch demo` for the module (not waited for: the tmux test waits for its row)."""
    with run_demo(tmp_path_factory.mktemp("top-demo"), DEMO_SPEED, wait=False) as base:
        yield base


def _exporter_row(text: str) -> tuple[str, ...]:
    """gen/s prompt/s run wait KV% hit% as top shows them, from an exporter's /metrics text."""
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples
              if s.labels.get("engine") == "0"}
    lw = "vllm_logwatch_"
    return (tps(values.get(lw + "generation_throughput_tokens_per_second")),
            tps(values.get(lw + "prompt_throughput_tokens_per_second")),
            *(f"{values[lw + n]:.0f}" if lw + n in values else "-" for n in ("requests_running",
                                                                               "requests_waiting")),
            pct(values.get(lw + "kv_cache_usage_ratio")), pct(values.get(lw + "prefix_cache_hit_ratio")))


def _auth(secrets: tuple[TLSFiles, Path, Path]) -> list[str]:
    tls, _, password = secrets
    return ["--tls-ca-file", str(tls.ca), "--basic-auth-user", "prometheus",
            "--basic-auth-password-file", str(password)]


def test_once_over_an_exporter_behind_tls_and_basic_auth(
        watch: WatchProcess, secrets: tuple[TLSFiles, Path, Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    tls = secrets[0]
    frame = _run(capsys, "top", "--once", "--width", "160", watch.url, *_auth(secrets))
    assert _cells(frame, f":{watch.port}")[1] == "idle", frame
    without = _run(capsys, "top", "--once", "--width", "160", watch.url, "--tls-ca-file", str(tls.ca))
    assert _cells(without, f":{watch.port}")[1] == "down" and "HTTP 401" in without, without
    untrusted = _run(capsys, "top", "--once", "--detail", "--width", "160", watch.url)
    assert "certificate not trusted" in untrusted, untrusted


class Tmux:
    """A `logwatch top` in a tmux session of its own size."""

    def __init__(self, name: str, width: int, height: int, args: list[str], env: dict[str, str]) -> None:
        self.binary = required_tool("tmux", "tmux", "LOGWATCH_REQUIRE_TMUX")
        self.name = name
        command = " ".join([sys.executable, "-m", "vllm_logwatch", "top", *args])
        exports = " ".join(f"{k}={v}" for k, v in {"PYTHONPATH": str(ROOT), **env}.items())
        self.tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height),
                  f"env -u COLUMNS -u LINES {exports} {command}; echo top-exited-$?; sleep 600")
        self.tmux("resize-window", "-t", name, "-x", str(width), "-y", str(height))  # a server's default-size

    def tmux(self, *args: str) -> str:
        return subprocess.run([self.binary, *args], check=True, capture_output=True, text=True,
                              timeout=10).stdout

    def screen(self, escapes: bool = False) -> str:
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", self.name)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def wait(self, check: str | object, what: str, timeout: float = 20.0) -> str:
        last = [""]

        def seen() -> str | None:
            screen = last[0] = self.screen()
            assert "Traceback" not in screen, screen
            ok = check(screen) if callable(check) else check in screen
            return screen if ok else None

        try:
            return poll_until(seen, timeout, what, interval=0.1)
        except pytest.fail.Exception:
            raise AssertionError(f"{what}: the screen was\n{last[0]}") from None

    def close(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self.tmux("kill-session", "-t", self.name)


def _cells(screen: str, start: str) -> list[str]:
    """The words of the first line that starts with `start` (or whose first word ends with it)."""
    return next(line.split() for line in screen.splitlines()
                if line.startswith(start) or (line.split() or [""])[0].endswith(start))


def test_tmux_80x24_over_a_watch_the_demo_and_a_down_url_every_key(
        watch: WatchProcess, demo_url: str, secrets: tuple[TLSFiles, Path, Path]) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    session = Tmux(f"top-{os.getpid()}-a", 80, 24, [watch.url, demo_url, down, *_auth(secrets)], {})
    try:
        demo_port = demo_url.rpartition(":")[2]
        served: list[tuple[float, tuple[str, ...]]] = []  # the demo's /metrics as read, (when, row)

        def demo_as_served(screen: str) -> bool:
            """The demo's row shows what its /metrics served in the last seconds (a stats line every
            0.25 s; top shows what it read up to a refresh ago)."""
            with contextlib.suppress(httpx.TransportError):
                served.append((time.monotonic(), _exporter_row(httpx.get(demo_url + "/metrics").text)))
            recent = {row for at, row in served if at > time.monotonic() - 3}
            cells = next((words for line in screen.splitlines() if (words := line.split())
                          and words[0].endswith(f":{demo_port}")), [])
            return len(cells) > 8 and tuple(cells[3:9]) in recent and cells[3:9] != ["-"] * 6

        session.wait(demo_as_served, "the demo's row showing what its /metrics serves")
        screen = session.wait(lambda s: "(1 down)" in s and "idle" in s, "the watch's row and the down one")
        labels = {"engine": "0", "model_name": "tiny-llama"}
        sample = watch.sample
        row = _cells(screen, f":{watch.port}")
        assert row[1] == "idle"
        assert row[3:9] == [
            tps(sample("vllm_logwatch_generation_throughput_tokens_per_second", labels)),
            tps(sample("vllm_logwatch_prompt_throughput_tokens_per_second", labels)),
            f"{sample('vllm_logwatch_requests_running', labels):.0f}",
            f"{sample('vllm_logwatch_requests_waiting', labels):.0f}",
            pct(sample("vllm_logwatch_kv_cache_usage_ratio", labels)),
            pct(sample("vllm_logwatch_prefix_cache_hit_ratio", labels))]
        assert all(len(line) <= 80 for line in screen.splitlines())
        session.keys("?")
        session.wait("logwatch top: keys", "the help")
        session.keys("x")
        session.wait(lambda s: "logwatch top: keys" not in s, "any key to close the help")
        for sort in ("gen", "waiting", "kv", "state", "name"):
            session.keys("s")
            session.wait(f"sort {sort}", f"s to sort by {sort}")
        session.keys("p")
        session.wait("paused", "p to pause")
        session.keys("p")
        session.wait(lambda s: "paused" not in s, "p again to go on")
        session.keys("/")
        session.wait("filter: a word", "/ opens the filter box")
        session.keys("zzz", "Enter")
        session.wait(lambda s: "filter zzz" in s and "idle" not in s and "down " not in s,
                     "a filter of no row")
        session.keys("/")
        # the box itself, not the status line's `filter zzz` (there already: keys sent before the box
        # opened went to the table, and the filter stayed)
        session.wait(lambda s: any("zzz" in line and "filter zzz" not in line for line in s.splitlines()),
                     "/ opens the filter box with its word")
        session.keys("C-u", "Enter")
        session.wait(lambda s: "filter zzz" not in s and "idle" in s, "an empty filter: every row")
        names = sorted(f"127.0.0.1:{u.rpartition(':')[2]}" for u in (watch.url, demo_url, down))

        def pane_of(name: str) -> Callable[[str], bool]:
            return lambda s: any(line.startswith(name + "  ") for line in s.splitlines())

        session.keys("Enter")
        session.wait(pane_of(names[0]), "enter: the first row's detail pane")
        session.keys("j")
        session.wait(pane_of(names[1]), "j: the next row's detail pane")
        session.keys("k")
        session.wait(pane_of(names[0]), "k: back to the first row's pane")
        session.keys("Escape")
        session.wait(lambda s: not any(pane_of(n)(s) for n in names), "escape closes the pane")
        session.keys("q")
        session.wait("top-exited-0", "q to quit")
    finally:
        session.close()


def test_tmux_160x48_logs_being_appended_vllm_metrics_down_url_no_color(
        tmp_path: Path, vllm_url: str) -> None:
    halves: dict[str, bytes] = {}
    for name, log in LOGS.items():
        data = log.read_bytes()
        cut = data.index(b"\n", len(data) // 2) + 1
        (tmp_path / f"{name}.log").write_bytes(data[:cut])
        halves[name] = data[cut:]
    down = f"http://127.0.0.1:{free_port()}"
    session = Tmux(f"top-{os.getpid()}-b", 160, 48, [str(tmp_path), vllm_url, down, "--interval", "0.3"],
                   {"NO_COLOR": "1"})
    try:
        session.wait(lambda s: "gamma" in s and "(1 down)" in s and "tiny-llama" in s, "every row")
        for name, rest in halves.items():
            with open(tmp_path / f"{name}.log", "ab") as f:
                f.write(rest)
        last = {name: _parse_last(log) for name, log in LOGS.items()}

        def caught_up(screen: str) -> bool:
            return all(_cells(screen, name + " ")[3] == tps(float(row["generation_throughput"]))
                       for name, row in last.items())

        screen = session.wait(caught_up, "the appended lines on screen")
        vllm_row = _cells(screen, ":" + vllm_url.removesuffix("/metrics").rpartition(":")[2])
        assert vllm_row[1:4] == ["idle", "0s", "0.0"]
        assert "gen last 5m" in screen and "model" in screen and "connection refused" in screen
        assert all(len(line) <= 160 for line in screen.splitlines())
        coloured = session.screen(escapes=True)
        # NO_COLOR: Textual paints in greys only (the 256-colour greys 232-255, black and white)
        shades = {int(n) for n in re.findall(r"\x1b\[(?:[0-9;]*;)?[34]8;5;(\d+)", coloured)}
        assert shades and shades <= {0, 7, 8, 15, 16, 231, *range(232, 256)}, shades
        assert "8;2;" not in coloured  # no true colour either
        session.keys("Left")
        session.wait(lambda s: "[at 20" in s, "left: back in the logs' history")
        session.keys("End")
        session.wait(lambda s: "[at 20" not in s, "end: back to now")
        session.keys("q")
        session.wait("top-exited-0", "q to quit")
    finally:
        session.close()


def _parse_last(log: Path) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-m", "vllm_logwatch", "parse", str(log), "--csv"], check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    return list(csv.DictReader(io.StringIO(out)))[-1]


def test_the_readme_frame_is_what_top_prints(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("$ logwatch top --once"):]
    command, _, rest = block.partition("\n")
    shown = rest[:rest.index("```")].rstrip("\n")
    args = command.removeprefix("$ logwatch ").split()
    frame = _run(capsys, *args)
    assert "\n".join(line.rstrip() for line in frame.splitlines()) == shown
