"""The house keeps its shape: no import cycle (function-level imports included), a stage package
imports only the stages below it, no module past 800 lines (modules are sized by concept), and
`logwatch parse` loads neither the web server nor watchdog."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, TESTS

PACKAGE = ROOT / "vllm_logwatch"
MAX_LINES = 800

# Which stages each stage may import (besides itself and the top-level errors, shown and config).
ALLOWED: dict[str, set[str]] = {
    "parsing": set(),
    "following": {"parsing"},
    "exporting": {"parsing"},
    "supervising": set(),
    "live": {"parsing", "following", "exporting", "supervising"},
    "offline": {"parsing", "exporting"},
    "web": {"exporting"},
    "terminal": {"parsing", "exporting", "offline"},
    "commands": {"parsing", "following", "exporting", "supervising", "live", "offline", "web", "terminal"},
}
TOP_SHARED = {"errors", "shown", "config"}
# Inside offline/, by job: which subpackages each may import (besides itself and offline/children.py).
OFFLINE_ALLOWED: dict[str, set[str]] = {
    "reading": set(),
    "output": {"reading"},
    "summary": {"reading"},
    "plot": {"reading"},
    "compare": {"reading", "summary", "plot"},
    "audit": {"reading", "summary", "plot"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """Every module of the package that `name` imports, at any depth of its code."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join([*base, node.module] if node.module else base)
            else:
                stem = node.module or ""
            # `from . import page` names the module page, not the package it sits in
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in MODULES else stem for a in node.names]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name and target != "vllm_logwatch":
                found.add(target)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def test_no_import_cycle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert cycles == []


def stage_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 else None


@pytest.mark.parametrize("name", sorted(n for n in MODULES if stage_of(n)))
def test_a_stage_imports_only_the_stages_below_it(name: str) -> None:
    stage = stage_of(name)
    assert stage in ALLOWED, f"{name}: a stage package the layout does not know"
    wrong = []
    for target in GRAPH[name]:
        other = stage_of(target)
        if other is None:
            if target.split(".")[-1] not in TOP_SHARED:
                wrong.append(target)
        elif other != stage and other not in ALLOWED[stage]:
            wrong.append(target)
    assert wrong == [], f"{name} ({stage}) may import {sorted(ALLOWED[stage])} and {sorted(TOP_SHARED)}"


def offline_part(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "offline" else None


@pytest.mark.parametrize("name", sorted(n for n in MODULES if offline_part(n)))
def test_an_offline_subpackage_imports_only_the_ones_below_it(name: str) -> None:
    part = offline_part(name)
    assert part in OFFLINE_ALLOWED, f"{name}: an offline subpackage the layout does not know"
    wrong = [target for target in GRAPH[name] if stage_of(target) == "offline"
             and (other := offline_part(target)) is not None and other != part
             and other not in OFFLINE_ALLOWED[part]]
    assert wrong == [], f"{name} ({part}) may import offline/{sorted(OFFLINE_ALLOWED[part])}"


def test_offline_is_a_few_packages_by_job() -> None:
    """At most 10 modules at offline/'s top level; the rest in the subpackages above."""
    top = [p.name for p in (PACKAGE / "offline").iterdir()
           if p.suffix == ".py" or (p / "__init__.py").exists()]
    assert len(top) <= 10, top
    assert {p for p in top if not p.endswith(".py")} == set(OFFLINE_ALLOWED)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_past_800_lines(name: str) -> None:
    assert len(MODULES[name].read_text().splitlines()) <= MAX_LINES


def test_parse_loads_neither_the_web_server_nor_watchdog(tmp_path: Path) -> None:
    log = TESTS / "data" / "002.log"
    code = ("import sys\nfrom vllm_logwatch.cli import main\n"
            f"for kind in ('--csv', '--jsonl'):\n    main(['parse', {str(log)!r}, kind])\n"
            "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'fastapi', 'uvicorn', 'watchdog', "
            "'starlette'})\nprint(loaded, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_every_command_names_its_settings_class() -> None:
    """A command's `settings` is typed with its pydantic class from config.py (so mypy checks each
    `settings.x`), never `Any`."""
    import vllm_logwatch.config as config

    classes = {name for name, value in vars(config).items()
               if isinstance(value, type) and name.endswith("Settings")}
    seen = 0
    for path in sorted((PACKAGE / "commands").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                    if arg.arg == "settings":
                        seen += 1
                        annotation = ast.unparse(arg.annotation) if arg.annotation else None
                        assert annotation in classes, f"{path.name}:{node.lineno} settings: {annotation}"
    assert seen >= 5


def test_parse_csv_of_a_plain_log_loads_no_server_library() -> None:
    """`parse --csv` of a plain log loads neither the exporter's nor the web server's libraries, nor
    matplotlib."""
    log = TESTS / "data" / "002.log"
    code = ("import sys\nfrom vllm_logwatch.cli import main\n"
            f"code = main(['parse', {str(log)!r}, '--csv'])\n"
            "heavy = {'prometheus_client', 'fastapi', 'uvicorn', 'matplotlib'}\n"
            "print(code, sorted({m.split('.')[0] for m in sys.modules} & heavy), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "0 []"
    assert done.stdout.count("\n") > 1  # it did write the rows
