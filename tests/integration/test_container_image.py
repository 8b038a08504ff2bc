"""deploy/docker/: the Dockerfile, the build context it gets, and the compose example.

No image is built here (no base image, no Docker daemon). What is checked instead:

* the Dockerfile parses with BuildKit's own parser (the `dockerfile` package), and its last stage is a
  slim Python base, runs as a non-root numeric user and has `logwatch` as its ENTRYPOINT;
* the image installs every runtime dependency at the version deploy/docker/constraints.txt pins;
* the build context, as Docker cuts it with the repository's .dockerignore (the Docker SDK's own
  matcher, `docker.utils.build.exclude_paths`), holds every file the Dockerfile copies, and pip
  builds from that context (with build isolation, as `pip wheel` in the image does) a wheel that has
  the package's data (the bundled demo log, the status page) and the `logwatch` entry point;
* the compose file's logwatch command is one `logwatch watch` accepts, its mounts are read-only, and
  run over a Docker containers folder (paths moved under tmp_path) it labels the vllm container's series.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import dockerfile
import pytest
import yaml
from docker.utils.build import exclude_paths
from support import ROOT
from test_kubernetes_manifests import logwatch_args

pytestmark = pytest.mark.timeout(180)

DOCKER = ROOT / "deploy" / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
COMPOSE = DOCKER / "compose.yaml"
CONSTRAINTS = "deploy/docker/constraints.txt"


def commands() -> list[dockerfile.Command]:
    return list(dockerfile.parse_file(str(DOCKERFILE)))


def last_stage() -> list[dockerfile.Command]:
    found = commands()
    start = max(i for i, c in enumerate(found) if c.cmd == "FROM")
    return found[start:]


def context_files() -> set[str]:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
    return {p for p in exclude_paths(str(ROOT), patterns) if (ROOT / p).is_file()}


def test_last_stage_is_slim_non_root_and_runs_logwatch() -> None:
    stage = last_stage()
    base = stage[0].value[0]
    args = {c.value[0].split("=")[0]: c.value[0].split("=", 1)[1] for c in commands() if c.cmd == "ARG"}
    image = re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], base)
    assert re.fullmatch(r"python:3\.\d+-slim", image), image
    [user] = [c.value[0] for c in stage if c.cmd == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0
    [entrypoint] = [c for c in stage if c.cmd == "ENTRYPOINT"]
    assert entrypoint.json and entrypoint.value == ("logwatch",)
    assert [c.value for c in stage if c.cmd == "EXPOSE"] == [("9477",)]
    # The state folder belongs to that user, so a named volume mounted there starts writable.
    assert any(f"-o {uid} -g {gid}" in c.value[0] and "/var/lib/vllm-logwatch" in c.value[0]
               for c in stage if c.cmd == "RUN")


def test_build_context_holds_what_the_dockerfile_copies() -> None:
    files = context_files()
    copied = [src for c in commands() if c.cmd == "COPY" and not any(f.startswith("--from") for f in c.flags)
              for src in c.value[:-1]]
    assert copied, "the Dockerfile copies nothing from the context"
    for src in copied:
        assert any(f == src or f.startswith(src.rstrip("/") + "/") for f in files), src
    # pyproject.toml names its readme: pip needs it in the context to build.
    assert re.search(r'^readme = "README.md"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert "README.md" in files
    # Nothing else of the checkout: no tests, no test logs, no git history; of deploy/, the pins alone.
    assert not {f for f in files if f.startswith(("tests/", ".git/", "bench/", "deploy/"))} - {CONSTRAINTS}


def test_image_installs_the_pinned_versions_of_every_runtime_dependency() -> None:
    """The image's pip install takes deploy/docker/constraints.txt, which pins (==) every runtime
    dependency of pyproject.toml at a version its requirement allows."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    [install] = [c.original for c in last_stage() if c.cmd == "RUN" and "pip install" in c.original]
    mount = re.search(r"--mount=type=bind,source=(\S+),target=(\S+)", install)
    assert mount and mount[1] == CONSTRAINTS, install
    assert f"--constraint {mount[2]}" in install, install
    assert CONSTRAINTS in context_files()
    pins: dict[str, str] = {}
    for line in (ROOT / CONSTRAINTS).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and re.fullmatch(r"[\w.!+-]+", version), line  # a pin, not a range
            pins[canonicalize_name(name)] = version
    block = re.search(r"^dependencies = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    assert block
    runtime = [Requirement(d) for d in re.findall(r'^\s*"([^"]+)",', block[1], re.M)]
    assert len(runtime) >= 10, runtime
    for req in runtime:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not pinned in {CONSTRAINTS}"
        assert req.specifier.contains(pins[name], prereleases=True), (req, pins[name])


def test_the_context_builds_a_wheel_that_runs(tmp_path: Path) -> None:
    context = tmp_path / "context"
    for name in context_files():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, context / name)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "--wheel-dir", str(wheels), str(context)], check=True, timeout=150,
                   capture_output=True)
    [wheel] = wheels.glob("vllm_logwatch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(re.fullmatch(r"vllm_logwatch/data/serve_.*\.log", n) for n in names)
    assert any(n.startswith("vllm_logwatch/web/static/") for n in names)
    # The wheel's entry point is the ENTRYPOINT the image runs.
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt")))
    assert "logwatch = vllm_logwatch.cli:main" in entry_points.decode()


def compose_service(name: str) -> dict[str, Any]:
    services: dict[str, dict[str, Any]] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    return services[name]


def test_compose_logwatch_reads_docker_logs_read_only() -> None:
    logwatch = compose_service("logwatch")
    settings = logwatch_args(logwatch["command"])
    assert settings.target == "/var/lib/docker/containers" and settings.layout == "docker"
    # --select matches the container's name, as compose sets it.
    assert settings.select == [compose_service("vllm")["container_name"]]
    mounts = {v.split(":")[1]: v for v in logwatch["volumes"]}
    assert mounts[settings.target] == "/var/lib/docker/containers:/var/lib/docker/containers:ro"
    assert settings.state_file is not None and settings.state_file.startswith("/var/lib/vllm-logwatch/")
    assert not mounts["/var/lib/vllm-logwatch"].startswith("/")  # a named volume, not a host folder
    assert logwatch["read_only"] is True and logwatch["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in logwatch["security_opt"]
    assert logwatch["build"] == {"context": "../..", "dockerfile": "deploy/docker/Dockerfile"}
    assert (COMPOSE.parent / logwatch["build"]["context"]).resolve() == ROOT
    version = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version and logwatch["image"] == f"vllm-logwatch:{version[1]}"
    assert compose_service("vllm")["logging"]["driver"] == "json-file"


def test_compose_command_follows_a_docker_containers_folder(tmp_path: Path) -> None:
    """The compose file's logwatch command, its paths moved under tmp_path, over a Docker containers
    folder holding vLLM's json-file log and another container's: the vllm container's series carry
    container="vllm"; --select leaves the other out."""
    import json

    from support import run_watch

    [bundled] = (ROOT / "vllm_logwatch" / "data").glob("serve_*.log")
    records = "".join(json.dumps({"log": line + "\n", "stream": "stderr",
                                  "time": f"2026-12-01T10:00:{i % 60:02d}.{i:09d}Z"}) + "\n"
                      for i, line in enumerate(bundled.read_text(encoding="utf-8").splitlines()))
    containers = tmp_path / "containers"
    for cid, name in (("a" * 64, "/vllm"), ("b" * 64, "/redis")):
        (containers / cid).mkdir(parents=True)
        (containers / cid / f"{cid}-json.log").write_text(records, encoding="utf-8")
        config = json.dumps({"ID": cid, "Name": name})
        (containers / cid / "config.v2.json").write_text(config, encoding="utf-8")
    moved = {"/var/lib/docker/containers": str(containers),
             "/var/lib/vllm-logwatch/state.json": str(tmp_path / "state.json")}
    args = [moved.get(word, word) for word in compose_service("logwatch")["command"]]
    logwatch_args(args)
    with run_watch(args[1], "--from-start", *args[2:]) as watch:
        watch.wait_sample("vllm_logwatch_stats_lines_total", {
            "container": "vllm", "engine": "0", "model_name": "tiny-llama"}, expected=lambda v: v > 0,
            timeout=20)
        seen = {dict(labels).get("container") for (_, labels) in watch.samples()}
    assert seen == {"vllm", None}, seen
