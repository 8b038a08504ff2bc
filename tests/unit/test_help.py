"""`--help` of every command equals the committed text in tests/help/, so docs and CLI cannot drift.

Regenerate after a deliberate change: LOGWATCH_REGEN_GOLDEN=1 python -m pytest tests/unit/test_help.py
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import TESTS

HELP = TESTS / "help"
COMMANDS = ["", "parse", "summary", "plot", "watch", "demo", "run", "compare", "audit", "top"]


def help_text(command: str) -> str:
    args = [sys.executable, "-m", "vllm_logwatch", *([command] if command else []), "--help"]
    env = {**os.environ, "COLUMNS": "100"}
    env = {k: v for k, v in env.items() if not k.startswith("LOGWATCH_")}  # defaults, not this shell's
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c or "logwatch")
def test_help_matches_committed_text(command: str) -> None:
    golden = HELP / f"{command or 'logwatch'}.txt"
    text = help_text(command)
    if os.environ.get("LOGWATCH_REGEN_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_each_help_says_what_its_command_does() -> None:
    """summary and plot have no --kind, demo has no state file, and the installed package holds no
    docs/: their help said otherwise; `summary --by lora` exits 1 for want of request lines, which its
    help did not say."""
    from vllm_logwatch.options import build_parser

    parser = build_parser()
    helps = {name: " ".join(p.format_help().split())
             for name, p in parser._subparsers._group_actions[0].choices.items()}  # type: ignore[union-attr]
    assert "asked kind" not in helps["plot"] and "1 no stats line in the inputs" in helps["plot"]
    assert "asked kind" not in helps["summary"]
    assert "1 no stats line (with --by lora: no request line) in the inputs" in helps["summary"]
    assert "asked kind" in helps["parse"]
    assert "state file" not in helps["demo"] and "state file written" in helps["watch"]
    assert "in the source tree" in " ".join(parser.format_help().split())
