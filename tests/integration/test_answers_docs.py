"""The answers' examples in docs/offline.md and docs/compare.md are what the commands print today: each
```text block that starts with `$ logwatch ... --target-tps` is found, verbatim, in the output of its
command, and the Pareto JSON of offline.md is `summary --json`'s `answers.pareto`."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from support import TESTS

ROOT = TESTS.parent
BLOCK = re.compile(r"```text\n\$ (logwatch [^\n]*--target-tps[^\n]*)\n(.*?)\n```", re.S)


def run(command: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", *command.split()[1:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("page", ["offline.md", "compare.md"])
def test_the_answer_examples_are_what_the_commands_print(page: str) -> None:
    blocks = BLOCK.findall((ROOT / "docs" / page).read_text())
    assert blocks, page
    for command, shown in blocks:
        assert shown in run(command), command


def test_the_pareto_example_is_summary_json() -> None:
    page = (ROOT / "docs" / "offline.md").read_text()
    shown = page.split("its `answers.pareto`):\n\n```json\n", 1)[1].split("\n```", 1)[0]
    log = "tests/data/compare/tight-kv/serve_20261201T180609Z.log"
    doc = json.loads(run(f"logwatch summary {log} --tz UTC --json"))
    assert json.loads(shown) == doc["answers"]["pareto"]
