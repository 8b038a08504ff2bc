"""`logwatch audit -o`'s figure: every text inside the image, and the image no wider than a bound
whatever the number of runs (past a few, the runs are drawn narrow and the figure says so)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vllm_logwatch.offline.audit.measures import Audited, Measures, Verdict, Window
from vllm_logwatch.offline.audit.results import Run

pytest.importorskip("matplotlib")

from matplotlib.text import Text

from vllm_logwatch.offline.audit.measures import MAX_WIDTH_IN, build_audit_figure

T0 = datetime(2026, 12, 2, 2, 0, 0, tzinfo=UTC)
KINDS = ("ok", "client-bound", "capped by max-num-seqs", "absent")


def audits(n: int) -> list[Audited]:
    out = []
    for i in range(n):
        run = Run(f"r{i}.json", "vllm bench serve", "m", T0 + timedelta(seconds=20 * i),
                  T0 + timedelta(seconds=20 * i + 9), 1 + i % 16, None, 100.0, 10, 0)
        m = Measures(lines=10, samples=10, running_median=2.0, running_p10=1.0, running_p90=3.0,
                     running_max=3, waiting_share=0.0, waiting_max=0, waiting_below_cap=0.0, preemptions=None,
                     kv_peak_pct=1.0, prefix_hit_pct=None, mm_hit_pct=None, server_gen_tok_s=50.0,
                     max_num_seqs=8)
        out.append(Audited(Window(run), m, [Verdict(KINDS[i % len(KINDS)], "why")]))
    return out


def test_a_one_run_figure_keeps_every_text_inside() -> None:
    fig = build_audit_figure(audits(1))
    fig.canvas.draw()
    width = fig.bbox.width
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text():
            box = text.get_window_extent()
            assert box.x0 >= 0 and box.x1 <= width, text.get_text()


@pytest.mark.integration  # over 0.2 s: make test, not smoke
def test_many_runs_keep_the_width_bounded_and_say_so() -> None:
    fig = build_audit_figure(audits(1000))
    assert fig.get_size_inches()[0] <= MAX_WIDTH_IN
    shown = " ".join(t.get_text() for t in fig.findobj(Text))
    assert "1000 runs" in shown
