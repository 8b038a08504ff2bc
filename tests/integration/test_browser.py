"""The status page in a real browser: headless Chromium (Debian's `chromium`) driven by Playwright's
Python package, against a real `logwatch watch` following a real vLLM log that grows while we look.

Without /usr/bin/chromium (or the playwright package) these tests are skipped, unless
`LOGWATCH_REQUIRE_BROWSER` is set (CI sets it): then they fail. Playwright's own browser downloads
are never used (`executable_path`).

The first test leaves a screenshot of the page in its tmp_path (`status-page.png`).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

from vllm_logwatch.web.page import format_number

pytestmark = pytest.mark.timeout(90)

REPO = ROOT
REAL_LOG = REPO / "tests" / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
# Split on "\n" only, as the follower does (the log holds bare "\r" from progress bars).
REAL_LINES = [line + "\n" for line in REAL_LOG.read_bytes().decode("utf-8").split("\n")[:-1]]
STATS_AT = [n for n, line in enumerate(REAL_LINES) if "Avg prompt throughput" in line]
STAMP = re.compile(r"(?<![A-Za-z])(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d)")
E0 = {"engine": "0", "model_name": "tiny-llama"}
FIRST = 60  # stats lines in the log when the page first loads: two minutes of history for the charts


class GrowingLog:
    """The real log, written as if vLLM were writing it now: stamps moved so that the stats line the
    file ends at is stamped `now`, later lines keeping the log's own 2-second spacing."""

    def __init__(self, folder: Path, stats_lines: int) -> None:
        now = datetime.now().replace(microsecond=0)
        self.path = folder / f"serve_{now:%Y%m%d_%H%M%S}.log"
        self.delta = now - self._stamp(REAL_LINES[STATS_AT[stats_lines - 1]])
        self.written = 0  # stats lines written
        self._next = 0  # index in REAL_LINES
        self.append(stats_lines)

    @staticmethod
    def _stamp(line: str) -> datetime:
        m = STAMP.search(line)
        assert m is not None
        return datetime.strptime(f"2026-{m.group(1)}", "%Y-%m-%d %H:%M:%S")

    def _shift(self, line: str) -> str:
        def move(m: re.Match[str]) -> str:
            new = (self._stamp(m.group(0)) + self.delta).strftime("%m-%d %H:%M:%S")
            return m.group(0)[: m.start(1) - m.start(0)] + new

        return STAMP.sub(move, line, count=1)

    def append(self, stats_lines: int = 1) -> dict[str, float]:
        """Write up to and including the next `stats_lines` stats lines; the last one's values."""
        end = STATS_AT[self.written + stats_lines - 1] + 1
        with open(self.path, "a", encoding="utf-8") as out:
            out.write("".join(self._shift(line) for line in REAL_LINES[self._next:end]))
        self._next, self.written = end, self.written + stats_lines
        return self.last()

    def last(self) -> dict[str, float]:
        line = REAL_LINES[STATS_AT[self.written - 1]]
        fields = dict(re.findall(r"(Avg generation throughput|Running|CPU KV cache usage): ([\d.]+)", line))
        return {"generation": float(fields["Avg generation throughput"]), "running": float(fields["Running"]),
                "kv_pct": float(fields["CPU KV cache usage"])}


# What the page shows for engine 0: each cell's data-value and text, the table's stale flag, the banner.
READ_PAGE = """() => {
  const points = {};
  if (window.logwatch) for (const [label, charts] of Object.entries(window.logwatch.charts())) {
    points[label] = {};
    for (const [key, chart] of Object.entries(charts)) points[label][key] = chart.points;
  }
  const row = document.querySelector('#engines tr[data-engine="0"]');
  const cells = {};
  if (row) for (const td of row.querySelectorAll('td[data-field]'))
    cells[td.dataset.field] = {value: td.dataset.value, text: td.textContent.trim()};
  return {cells, stale: document.getElementById('engines').dataset.stale || 'false',
          disconnected: document.body.classList.contains('disconnected'),
          connection: document.getElementById('connection').textContent.trim(),
          points: window.logwatch ? points : null,
          instance: window.logwatch ? window.logwatch.history.instance : null};
}"""


def gauges(watch: Any) -> dict[str, float]:
    """The three numbers the tests compare, from /metrics (KV as the page shows it: percent)."""
    samples = watch.samples()

    def one(name: str) -> float:
        return samples[(f"vllm_logwatch_{name}", frozenset(E0.items()))]

    return {"generation": one("generation_throughput_tokens_per_second"), "running": one("requests_running"),
            "kv_pct": one("kv_cache_usage_ratio") * 100}


def shown(state: dict[str, Any]) -> dict[str, float] | None:
    """The same three numbers as the page shows them (None until the row exists)."""
    cells = state["cells"]
    if not cells or not cells["last.generation_throughput"]["value"]:
        return None
    out = {"generation": float(cells["last.generation_throughput"]["value"]),
           "running": float(cells["last.running"]["value"]),
           "kv_pct": float(cells["last.kv_cache_usage_pct"]["value"])}
    # The text says the same as the value, formatted as the server formats it.
    assert cells["last.generation_throughput"]["text"] == format_number(out["generation"], 1)
    assert cells["last.running"]["text"] == format_number(out["running"], 0)
    assert cells["last.kv_cache_usage_pct"]["text"] == format_number(out["kv_pct"], 1)
    return out


def same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-9) for k in a)


def open_page(browser: Any, url: str, errors: list[str], **context: Any) -> Any:
    page = browser.new_context(viewport={"width": 1280, "height": 900}, **context).new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    return page


def wait_page(page: Any, poll_until: Callable[..., Any], check: Callable[[dict[str, Any]], Any],
              what: str, timeout: float = 10.0) -> Any:
    """Poll the page (its DOM, read in one evaluate) until `check(state)` is truthy; that result."""
    return poll_until(lambda: check(page.evaluate(READ_PAGE)), timeout, what)


def test_page_follows_a_growing_log_and_matches_metrics(
    browser: Any, tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    log = GrowingLog(tmp_path, FIRST)
    errors: list[str] = []
    with logwatch_watch(log.path, "--from-start") as watch:
        watch.wait_sample("vllm_logwatch_stats_lines_total", E0, FIRST)
        page = open_page(browser, watch.url + "/", errors)
        first = wait_page(page, poll_until, lambda s: s["points"] and shown(s), "the first numbers")
        assert same(first, gauges(watch)) and same(first, log.last())
        seen = [first]
        for _ in range(4):  # each line differs from the one before in at least one of the three
            expected = log.append()
            poll_until(lambda expected=expected: same(gauges(watch), expected), 10,
                       f"/metrics to show {expected}")

            def fresh(state: dict[str, Any], expected: dict[str, float] = expected) -> Any:
                now = shown(state)
                return now if now is not None and same(now, expected) else None

            seen.append(wait_page(page, poll_until, fresh, f"the page to show {expected}"))
            assert same(seen[-1], gauges(watch)), "the page and /metrics agree"
        assert all(not same(a, b) for a, b in itertools.pairwise(seen)), "the numbers changed with each line"

        # The charts have a point per stats line, one chart each for throughput, requests and KV cache.
        total = FIRST + 4
        points = wait_page(page, poll_until, lambda s: s["points"] if s["points"].get("0", {}).get(
            "throughput") == total else None, f"{total} points per chart")
        assert points == {"0": {"throughput": total, "requests": total, "cache": total}}
        state = page.evaluate(READ_PAGE)
        assert state["stale"] == "false" and state["connection"].startswith("Live")
        assert state["cells"]["state"]["text"] in ("active", "idle")
        assert re.fullmatch(r"\d+ s ago every 2 s", state["cells"]["age_seconds"]["text"])
        page.evaluate("() => document.fonts.ready")
        shot = tmp_path / "status-page.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        page.context.close()
    assert errors == [], "no script error on the page"


def test_page_says_disconnected_then_reconnects_to_a_restarted_exporter(
    browser: Any, tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any],
    free_port: int,
) -> None:
    log = GrowingLog(tmp_path, FIRST)
    errors: list[str] = []
    with logwatch_watch(log.path, "--from-start", port=free_port) as watch:
        watch.wait_sample("vllm_logwatch_stats_lines_total", E0, FIRST)
        page = open_page(browser, watch.url + "/", errors)
        before = wait_page(page, poll_until, lambda s: s["instance"] and shown(s) and s, "the live page")
        assert same(shown(before) or {}, log.last())
        assert watch.stop() == 0

    # Gone: the page says so, greys the numbers (still the last ones, marked as old) and keeps trying.
    down = wait_page(page, poll_until, lambda s: s if s["disconnected"] else None, "the page to notice")
    assert down["stale"] == "true"
    assert down["connection"].startswith("Disconnected from the exporter: the numbers below are from ")
    colour = page.evaluate("""() => getComputedStyle(document.querySelector(
        '#engines tr[data-engine="0"] td[data-field="last.generation_throughput"]')).color""")
    assert colour == "rgb(87, 96, 106)", "greyed out (the muted text colour)"
    assert down["cells"]["state"]["text"] == "unknown", "no state claimed while nobody reads the log"
    aged = wait_page(page, poll_until, lambda s: re.search(r"from [2-9] s ago", s["connection"]) and s,
                     "the age of the numbers to grow")
    assert aged["disconnected"]

    expected = log.append(2)  # vLLM wrote on while the exporter was down
    assert not same(expected, shown(before) or {})
    with logwatch_watch(log.path, "--from-start", port=free_port) as watch:
        watch.wait_sample("vllm_logwatch_stats_lines_total", E0, FIRST + 2)

        def back(state: dict[str, Any]) -> dict[str, Any] | None:
            now = shown(state)
            ok = not state["disconnected"] and now is not None and same(now, expected)
            return state if ok and state["points"].get("0", {}).get("throughput") == FIRST + 2 else None

        after = wait_page(page, poll_until, back, "the page to reconnect with fresh numbers")
        assert same(shown(after) or {}, gauges(watch))
        assert after["stale"] == "false" and after["connection"].startswith("Live")
        assert after["instance"] != before["instance"], "the charts were refetched from the new exporter"
        page.context.close()
    assert errors == [], "no script error on the page"


def test_without_javascript_the_page_is_a_table_of_current_numbers(
    browser: Any, tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    log = GrowingLog(tmp_path, FIRST)
    errors: list[str] = []
    with logwatch_watch(log.path, "--from-start") as watch:
        watch.wait_sample("vllm_logwatch_stats_lines_total", E0, FIRST)
        page = open_page(browser, watch.url + "/", errors, java_script_enabled=False)
        state = page.evaluate(READ_PAGE)  # Playwright's own evaluate runs even with page scripts off
        assert state["points"] is None, "page.js did not run"
        assert same(shown(state) or {}, gauges(watch))
        assert "JavaScript is off: this page reloads every 10 s." in state["connection"]
        headers = page.eval_on_selector_all("#engines thead th", "ths => ths.map(th => th.textContent)")
        assert "Generation (tok/s)" in [" ".join(h.split()) for h in headers]
        assert page.locator("meta[http-equiv=refresh]").count() == 1
        page.context.close()
    assert errors == []
