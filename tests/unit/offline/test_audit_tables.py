"""`logwatch audit`'s text and Markdown: every string a result file or a log chose (the model, the
file's name, another launch's model) is shown printable, and in Markdown as text, not markup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from vllm_logwatch.offline.audit.measures import Audited, find_windows, judge, measure, render_audit
from vllm_logwatch.offline.audit.results import Run
from vllm_logwatch.offline.reading.launches import Launch
from vllm_logwatch.parsing.events import EngineStats

T0 = datetime(2026, 12, 2, 2, 0, 0, tzinfo=UTC)
HOSTILE = "\x1b]0;pwned\x07\x1b[31mRED\x1b[0m <img src=x onerror=alert(1)>|x|\n# heading"


def audits() -> list[Audited]:
    runs = [Run(f"<img src=x onerror=alert(1)>|{n}.json", "vllm bench serve", HOSTILE,
                T0 + timedelta(seconds=s), T0 + timedelta(seconds=s + 9), 4, None, 100.0, 10, 0)
            for n, s in enumerate((0, 20))]
    mine = Launch(0, "serve.log", 1, model_name=HOSTILE)
    other = Launch(1, "b.log", 1, model_name=HOSTILE + "2")
    records = [(mine if s < 20 else other, EngineStats(time=T0 + timedelta(seconds=s), running=4, waiting=0))
               for s in (*range(10), *range(20, 30))]
    windows, _ = find_windows(runs, records)
    return [Audited(w, measure(w), judge(w, measure(w))) for w in windows]


def test_text_shows_no_control_character() -> None:
    text = render_audit(audits(), "text")
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07\\x1b[31mRED" in text
    assert not any(line.startswith("# ") for line in text.splitlines())


def test_markdown_holds_no_markup_and_one_row_per_run() -> None:
    md = render_audit(audits(), "markdown")
    assert "\x1b" not in md and "<" not in md and ">" not in md
    lines = md.splitlines()
    assert [line for line in lines if line.startswith("|")] == lines[:4]  # the head, its rule, two runs
    assert all(line.count(" | ") == 17 for line in lines[:4])
    assert "&lt;img src=x onerror=alert(1)&gt;\\|x\\|\\n# heading" in lines[2]
    assert not any(line.startswith("#") for line in lines)
    assert "another model: the benchmark's model is \\x1b]0;pwned" in md
