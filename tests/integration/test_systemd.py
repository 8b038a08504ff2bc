"""The systemd units in systemd/, checked with systemd's own tools and by running what they run.

* `systemd-analyze verify` accepts both units with no warning. Verify insists that ExecStart's binary
  exists; the units name /usr/local/bin/logwatch (where `pip install` puts it system-wide), so the
  test verifies a temporary copy whose ExecStart names the `logwatch` found on PATH instead
  (`shutil.which("logwatch")`, else a wrapper script running this Python's `-m vllm_logwatch`).
  Nothing else in the copy changes.
* `systemd-analyze security --offline=yes` rates the hardening (no running systemd needed): the
  exposure scores stay at or below the limits below, and the options the design asks for are set.
* ExecStart expanded as systemd would (Environment= defaults, then the env file) is a command line
  `logwatch` accepts, with the timeouts and restart policies agreeing.
* The watch unit's command runs configured by the unit's environment alone, under no_new_privs and
  the kernel's memory-deny-write-execute (PR_SET_MDWE, what MemoryDenyWriteExecute= enforces).

Without systemd-analyze (Debian package `systemd`) the systemd-analyze tests skip, unless
LOGWATCH_REQUIRE_SYSTEMD is set (CI): then they fail.
"""

from __future__ import annotations

import ctypes
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import ROOT, free_port, required_tool

from vllm_logwatch.config import RunSettings, WatchSettings, load_settings
from vllm_logwatch.options import build_parser

pytestmark = pytest.mark.timeout(60)

SYSTEMD = ROOT / "systemd"
WATCH_UNIT = SYSTEMD / "vllm-logwatch.service"
RUN_UNIT = SYSTEMD / "vllm-serve.service"
ENV_EXAMPLE = SYSTEMD / "vllm.env.example"
UNIT_BINARY = "/usr/local/bin/logwatch"
EXPOSURE_LIMIT = {WATCH_UNIT.name: 1.5, RUN_UNIT.name: 2.5}
"""`systemd-analyze security` exposure, 0 (locked down) to 10 (exposed). Measured with systemd 252:
watch 1.2, run 1.8 (run mode keeps GPU access and W+X memory for CUDA)."""
REAL_LINE = ("(APIServer pid=1) INFO 11-29 19:23:55 [loggers.py:335] Engine 000: Avg prompt throughput: "
             "10.0 tokens/s, Avg generation throughput: 20.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, "
             "GPU KV cache usage: 4.0%, Prefix cache hit rate: 50.0%\n")


def systemd_analyze() -> str:
    return required_tool("systemd-analyze", "systemd", "LOGWATCH_REQUIRE_SYSTEMD")


def parse_unit(path: Path) -> dict[str, list[str]]:
    """`Section.Key` -> values in order (systemd allows a key more than once); continuations joined."""
    text = re.sub(r"\\\n\s*", " ", path.read_text(encoding="utf-8"))
    out: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        out.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return out


def one(unit: dict[str, list[str]], key: str) -> str:
    values = unit[f"Service.{key}"] if "." not in key else unit[key]
    assert len(values) == 1, (key, values)
    return values[0]


def seconds(value: str) -> float:
    units = {"": 1, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "ms": 0.001}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit]
    return total


def read_env_file(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return env


def unit_environment(unit: dict[str, list[str]], env_file: Path | None = None) -> dict[str, str]:
    """Environment= lines, then the env file on top (systemd: the file overrides Environment=)."""
    env: dict[str, str] = {}
    for value in unit.get("Service.Environment", []):
        for item in shlex.split(value):
            key, _, val = item.partition("=")
            env[key] = val
    if env_file is not None:
        env.update(read_env_file(env_file))
    return env


def expand_exec(command: str, env: dict[str, str]) -> list[str]:
    """systemd's ExecStart expansion: `${VAR}` is one word, a bare `$VAR` word splits at whitespace."""
    argv: list[str] = []
    for word in command.split():
        bare = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if bare:
            argv.extend(env.get(bare.group(1), "").split())
        else:
            argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), ""), word))
    return argv


def logwatch_binary(folder: Path) -> str:
    """The `logwatch` on PATH, else a wrapper running this interpreter's `-m vllm_logwatch`."""
    found = shutil.which("logwatch")
    if found:
        return found
    wrapper = folder / "logwatch"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m vllm_logwatch "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


@pytest.mark.parametrize("unit", [WATCH_UNIT, RUN_UNIT], ids=lambda p: p.name)
def test_systemd_analyze_verify(unit: Path, tmp_path: Path) -> None:
    analyze = systemd_analyze()
    text = unit.read_text(encoding="utf-8")
    assert f"ExecStart={UNIT_BINARY} " in text
    copy = tmp_path / unit.name
    copy.write_text(text.replace(f"ExecStart={UNIT_BINARY} ", f"ExecStart={logwatch_binary(tmp_path)} "))
    proc = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60,
                          check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    # verify also prints (and ignores) unknown keys and bad values: none may concern our unit.
    ours = [line for line in output.splitlines() if unit.name in line or str(tmp_path) in line]
    assert ours == [], output


@pytest.mark.parametrize("unit", [WATCH_UNIT, RUN_UNIT], ids=lambda p: p.name)
def test_systemd_analyze_security_exposure(unit: Path) -> None:
    analyze = systemd_analyze()
    limit = EXPOSURE_LIMIT[unit.name]
    proc = subprocess.run([analyze, "security", "--offline=yes", f"--threshold={limit * 10:.0f}",
                           "--no-pager", str(unit)], capture_output=True, text=True, timeout=60, check=False)
    output = proc.stdout + proc.stderr
    match = re.search(rf"Overall exposure level for {re.escape(unit.name)}: (\d+\.\d+)", output)
    assert match is not None, output
    exposure = float(match.group(1))
    print(f"{unit.name}: exposure {exposure}")
    assert proc.returncode == 0 and exposure <= limit, output
    passed = {line.split()[1] for line in output.splitlines() if line.startswith("✓")}
    for setting in ("NoNewPrivileges=", "ProtectSystem=", "ProtectHome=", "PrivateTmp=",
                    "ProtectKernelTunables=", "ProtectKernelModules=", "ProtectControlGroups=",
                    "RestrictSUIDSGID=", "LockPersonality=",
                    "User=/DynamicUser=", "RestrictNamespaces=~user", "CapabilityBoundingSet=~CAP_SYS_ADMIN",
                    "SystemCallArchitectures=", "RestrictRealtime="):
        assert setting in passed, f"{unit.name}: {setting} not hardened\n{output}"
    if unit == WATCH_UNIT:
        assert {"MemoryDenyWriteExecute=", "PrivateDevices=", "ProcSubset="} <= passed, output


def test_hardening_options() -> None:
    for path in (WATCH_UNIT, RUN_UNIT):
        unit = parse_unit(path)
        user = one(unit, "User")
        assert user not in {"root", "0"} and one(unit, "Group") == user, path.name
        for key, value in [("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                           ("PrivateTmp", "yes"), ("CapabilityBoundingSet", ""), ("RestrictSUIDSGID", "yes"),
                           ("ProtectKernelTunables", "yes"), ("ProtectKernelModules", "yes"),
                           ("Type", "exec")]:
            assert one(unit, key) == value, (path.name, key)
        assert unit["Service.StateDirectory"], path.name  # a writable place under ProtectSystem=strict
        assert unit["Service.RestrictAddressFamilies"] and unit["Service.SystemCallFilter"], path.name
    watch, run = parse_unit(WATCH_UNIT), parse_unit(RUN_UNIT)
    assert one(watch, "MemoryDenyWriteExecute") == "yes" and one(watch, "PrivateDevices") == "yes"
    # vLLM: CUDA/Triton/torch.compile JIT needs W+X memory, and the GPUs are devices.
    assert "Service.MemoryDenyWriteExecute" not in run and "Service.PrivateDevices" not in run
    assert "Service.PrivateUsers" not in run and "Service.ProcSubset" not in run
    assert one(run, "LogsDirectory") == "vllm"


def test_run_unit_command_is_one_logwatch_accepts_and_timeouts_agree() -> None:
    unit = parse_unit(RUN_UNIT)
    assert one(unit, "EnvironmentFile") == "/etc/vllm/env"
    env = unit_environment(unit, ENV_EXAMPLE)
    argv = expand_exec(one(unit, "ExecStart"), env)
    assert argv[0] == UNIT_BINARY and argv[1] == "run"
    args = build_parser().parse_args(argv[1:])
    logwatch_env = {k: v for k, v in env.items() if k.startswith("LOGWATCH_")}
    settings = load_settings(RunSettings, vars(args), logwatch_env)
    command = [word for word in args.child_command if word != "--"]
    assert command[:3] == [env["VLLM_BIN"], "serve", env["VLLM_MODEL"]]
    assert command[3:] == env["VLLM_ARGS"].split()
    assert settings.log_dir == "/var/log/vllm" and settings.name == "serve"
    # systemd must wait longer than logwatch's SIGTERM -> SIGKILL window, or it kills vLLM mid-shutdown.
    assert seconds(one(unit, "TimeoutStopSec")) > settings.stop_timeout + 10
    assert one(unit, "KillMode") == "mixed"  # SIGTERM to logwatch only; it stops vLLM itself
    assert "143" in one(unit, "SuccessExitStatus").split()  # logwatch exits 128+15 after a stop
    # The split: logwatch restarts a crashed vLLM; systemd only what logwatch gives up on.
    assert settings.restart == "on-failure" and one(unit, "Restart") == "on-failure"
    assert int(one(unit, "Unit.StartLimitBurst")) >= 1
    # The log folder is writable: the unit's own LogsDirectory.
    assert settings.log_dir == "/var/log/" + one(unit, "LogsDirectory")


def test_watch_unit_command_is_configured_by_its_environment() -> None:
    unit = parse_unit(WATCH_UNIT)
    env = unit_environment(unit)
    argv = expand_exec(one(unit, "ExecStart"), env)
    assert argv == [UNIT_BINARY, "watch"]
    settings = load_settings(WatchSettings, vars(build_parser().parse_args(argv[1:])), env)
    state_dir = "/var/lib/" + one(unit, "StateDirectory")
    assert settings.target == "/var/log/vllm"
    assert settings.state_file is not None and settings.state_file.startswith(state_dir + "/")
    assert settings.listen == "0.0.0.0" and settings.port == 9477  # Prometheus scrapes from elsewhere
    assert one(unit, "EnvironmentFile").startswith("-")  # optional: the defaults work without it


def _harden() -> None:
    """In the child before exec: no new privileges, and (kernel >= 6.3) no W+X memory, as the unit's
    NoNewPrivileges= and MemoryDenyWriteExecute= ask."""
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_mdwe, pr_mdwe_refuse_exec_gain = 38, 65, 1
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(pr_set_mdwe, pr_mdwe_refuse_exec_gain, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_MDWE")


def _mdwe_supported() -> bool:
    probe = subprocess.run([sys.executable, "-c", "pass"], preexec_fn=_harden, capture_output=True,
                           check=False)
    return probe.returncode == 0


def test_watch_unit_runs_hardened_from_its_environment(
    tmp_path: Path, poll_until: Callable[..., Any]
) -> None:
    """`logwatch watch` with no arguments, configured only by the unit's variables (paths moved into
    tmp_path, loopback instead of every address), with no W+X memory: it serves a line appended to
    the log folder and writes its state file."""
    if not _mdwe_supported():
        pytest.skip("this kernel has no PR_SET_MDWE (Linux >= 6.3)")
    env = unit_environment(parse_unit(WATCH_UNIT))
    logs, state = tmp_path / "logs", tmp_path / "state"
    logs.mkdir()
    state.mkdir(mode=0o700)
    port = free_port()
    state_file = state / Path(env["LOGWATCH_STATE_FILE"]).name
    env.update(LOGWATCH_TARGET=str(logs), LOGWATCH_STATE_FILE=str(state_file), LOGWATCH_LISTEN="127.0.0.1",
               LOGWATCH_PORT=str(port))
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")} | env
    out = tmp_path / "watch.out"
    with open(out, "wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "vllm_logwatch", "watch"], env=child_env,
                                stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, preexec_fn=_harden,
                                umask=0o077)
    try:
        def metrics() -> str | None:
            assert proc.poll() is None, out.read_text(errors="replace")
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
            except httpx.TransportError:
                return None
            return response.text if response.status_code == 200 else None

        poll_until(metrics, 20, "logwatch watch to serve /metrics")
        (logs / "serve_20261129_192328.log").write_text(REAL_LINE, encoding="utf-8")
        poll_until(lambda: 'vllm_logwatch_requests_running{engine="0"' in (metrics() or ""), 20,
                   "the appended stats line on /metrics")
        poll_until(state_file.exists, 20, "the state file")
    finally:
        proc.terminate()
        proc.wait(15)
    assert proc.returncode in (0, -15), out.read_text(errors="replace")
