"""Screenshots of the status page in headless Chromium (as in test_browser.py), each saved in the
test's tmp_path and its DOM asserted: `watch` started at the end of a folder whose launch has start-up
lines (model and version shown, the skipped lines said); `watch --from-start` on an old log (the
launch ended, its age counted from the log's own stamps); and `logwatch demo` (the Replay badge and
why each pass ends with a failure; the silence between passes drawn as a gap in the charts)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import ROOT as REPO
from support import ManualWaker, poll_until
from test_browser import REAL_LINES, STAMP, STATS_AT, open_page

pytestmark = pytest.mark.timeout(90)

FACTS = """() => {
  const points = {};
  if (window.logwatch) for (const [label, charts] of Object.entries(window.logwatch.charts())) {
    points[label] = {};
    for (const [key, chart] of Object.entries(charts)) points[label][key] = chart.points;
  }
  const facts = {};
  for (const div of document.querySelectorAll('#server > div'))
    facts[div.querySelector('dt').textContent.trim()] = div.querySelector('dd [data-key]').textContent.trim();
  const row = document.querySelector('#engines tbody tr');
  const cells = {};
  if (row) for (const td of row.querySelectorAll('td[data-field]'))
    cells[td.dataset.field] = td.textContent.trim();
  const skipped = document.getElementById('skipped');
  const replay = document.getElementById('replay');
  const badge = document.getElementById('replay-badge');
  return {facts, cells, rows: document.querySelectorAll('#engines tbody tr:not(.empty)').length,
          skipped: skipped && !skipped.hidden ? skipped.textContent.trim() : null,
          replay: replay ? replay.textContent.trim() : null,
          badge: badge ? {text: badge.textContent.trim(), visible: badge.offsetWidth > 0} : null,
          connection: document.getElementById('connection').textContent.trim(),
          points: window.logwatch ? points : null,
          breaks: window.logwatch ? window.logwatch.charts() : null};
}"""


def shifted(lines: list[str], delta: timedelta) -> str:
    def move(m: re.Match[str]) -> str:
        old = datetime.strptime(f"2026-{m.group(1)}", "%Y-%m-%d %H:%M:%S")
        return m.group(0)[: m.start(1) - m.start(0)] + (old + delta).strftime("%m-%d %H:%M:%S")

    return "".join(STAMP.sub(move, line, count=1) for line in lines)


def read(page: Any, check: Callable[[dict[str, Any]], Any], what: str) -> dict[str, Any]:
    return poll_until(lambda: (lambda s: s if check(s) else None)(page.evaluate(FACTS)), 15, what)  # type: ignore[no-any-return]


def shoot(page: Any, path: Path) -> None:
    page.evaluate("() => document.fonts.ready")
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000


def test_watch_started_at_the_end_shows_the_launchs_model_and_version(
        browser: Any, tmp_path: Path, logwatch_watch: Callable[..., Any]) -> None:
    now = datetime.now().replace(microsecond=0)
    first = STATS_AT[40]
    delta = now - datetime.strptime(f"2026-{STAMP.search(REAL_LINES[first])[1]}",  # type: ignore[index]
                                    "%Y-%m-%d %H:%M:%S")
    log = tmp_path / "logs" / f"serve_{now:%Y%m%d_%H%M%S}.log"
    log.parent.mkdir()
    log.write_text(shifted(REAL_LINES[:first + 1], delta), encoding="utf-8")  # start-up lines and 41 stats
    errors: list[str] = []
    with logwatch_watch(log.parent) as watch:  # the README's way: a folder, from its end
        with open(log, "a", encoding="utf-8") as out:  # one more stats line, written now
            out.write(shifted(REAL_LINES[first + 1:STATS_AT[41] + 1], delta + timedelta(seconds=0)))
        page = open_page(browser, watch.url + "/", errors)
        state = read(page, lambda s: s["rows"] == 1 and s["facts"]["vLLM"] != "\u2014",
                     "the new stats line and the launch's version on the page")
        assert state["facts"]["Model"] == "tiny-llama" and state["facts"]["vLLM"] == "0.32.0"
        assert state["skipped"] and state["skipped"].startswith("Started at the end of the log: ")
        assert "--from-start" in state["skipped"]
        shoot(page, tmp_path / "watch-from-the-end.png")
        page.context.close()
    assert errors == []


def test_from_start_on_an_old_log_shows_it_ended_with_its_age_from_the_log(
        browser: Any, tmp_path: Path, logwatch_watch: Callable[..., Any]) -> None:
    log = tmp_path / "serve_20261129T192328Z.log"
    log.write_text("".join(REAL_LINES), encoding="utf-8")  # as recorded: it ends with its shutdown
    errors: list[str] = []
    with logwatch_watch(log, "--from-start") as watch:
        page = open_page(browser, watch.url + "/", errors)
        state = read(page, lambda s: s["rows"] == 1 and s["cells"].get("state") in ("ended", "dead"),
                     "the old launch's end on the page")
        assert state["cells"]["state"] == "ended"
        age = state["cells"]["age_seconds"]
        last = datetime(2026, 11, 29, 19, 26, 29)  # the log's last stats line, in this machine's zone
        hours = (datetime.now() - last).total_seconds() / 3600
        shown = re.match(r"(\d+) h \d+ min ago", age)  # by the log's stamps, not "4 s ago"
        assert hours > 24 and shown is not None and abs(int(shown[1]) - hours) < 1.1, age
        assert state["facts"]["Model"] == "tiny-llama"
        shoot(page, tmp_path / "from-start-old-log.png")
        page.context.close()
    assert errors == []


def test_demo_page_is_a_replay_with_gaps_as_gaps(browser: Any, tmp_path: Path, demo: str) -> None:
    errors: list[str] = []
    page = open_page(browser, demo + "/", errors)
    state = read(page, lambda s: (s["breaks"] or {}).get("0", {}).get("throughput", {}).get("nulls", 0) >= 2,
                 "two pass boundaries in the charts")
    assert state["badge"] == {"text": "Replay", "visible": True}
    assert state["replay"] and state["replay"].startswith(
        "Replay of a real vLLM log (serve_20261129T192328Z.log) at 100x, pass ")
    assert "EngineDeadError" in state["replay"] and "never reset" in state["replay"]
    breaks = state["breaks"]["0"]
    assert all(chart["spanGaps"] and not any(chart["spanGaps"]) for chart in breaks.values())
    assert all(chart["nulls"] >= 2 for chart in breaks.values())  # each chart breaks at each boundary
    shoot(page, tmp_path / "demo.png")
    page.context.close()
    assert errors == []


MANY = """() => {
  const pairs = (selector) => {
    const out = {};
    for (const div of document.querySelectorAll(selector + ' > div'))
      out[div.querySelector('dt').textContent.trim()] = div.querySelector('dd').textContent.trim();
    return out;
  };
  const table = (id, key) => {
    const heads = [...document.querySelectorAll('#' + id + ' thead th')].map(
      th => th.firstChild.textContent.trim());
    const out = {};
    for (const tr of document.querySelectorAll('#' + id + ' tbody tr[' + key + ']')) {
      const row = {};
      [...tr.cells].forEach((cell, i) => { row[heads[i]] = cell.textContent.trim(); });
      out[tr.getAttribute(key)] = row;
    }
    return out;
  };
  return {facts: pairs('#server'), exporter: pairs('#exporter'), sources: table('sources', 'data-source'),
          engines: table('engines', 'data-engine'), live: document.body.classList.contains('js') &&
          document.getElementById('connection').textContent.includes('Live')};
}"""
_HOURS = re.compile(r"(\d+) h \d+ min ago")


def _pods(root: Path) -> dict[str, Path]:
    """A kubelet tree of two pods: the latency run's CRI log (gzipped here) and the LoRA run's."""
    import gzip

    data = REPO / "tests" / "data"
    a, b = root / "llm_vllm-a-5d9f_0a1b" / "vllm", root / "llm_vllm-b-7c1e_2c3d" / "vllm"
    for folder in (a, b):
        folder.mkdir(parents=True)
    (a / "0.log").write_bytes(gzip.decompress((data / "latency" / "serve.cri.log.gz").read_bytes()))
    (b / "0.log").write_bytes((data / "lora" / "serve.cri.log").read_bytes())
    return {"llm/vllm-a-5d9f/vllm": a / "0.log", "llm/vllm-b-7c1e/vllm": b / "0.log"}


def _scripts(root: Path) -> dict[str, Path]:
    """A tee folder holding the launch files of two scripts (auto layout reads it as `scripts`)."""
    root.mkdir()
    data = REPO / "tests" / "data" / "compare"
    qwen, llama = root / "qwen_20261201T180244Z.log", root / "llama_20261201T180747Z.log"
    qwen.write_bytes((data / "mns16-prefix" / "serve_20261201T180244Z.log").read_bytes())
    llama.write_bytes((data / "small-model" / "serve_20261201T180747Z.log").read_bytes())
    return {"qwen": qwen, "llama": llama}


def _alone(path: Path) -> dict[str, Any]:
    """The status a watch of that file alone gives, read to its end (in this process)."""
    from vllm_logwatch.exporting.exporter import ExporterMetrics
    from vllm_logwatch.following.follower import Follower
    from vllm_logwatch.live.pipeline import Pipeline

    pipeline = Pipeline(Follower(str(path), from_start=True, waker=ManualWaker()), ExporterMetrics())
    while pipeline.step():
        pass
    return pipeline.status()


@pytest.mark.parametrize("layout", ["scripts", "pods"])
def test_a_folder_of_many_sources_shows_each_ones_facts_counters_and_ages_from_the_log(
        browser: Any, tmp_path: Path, logwatch_watch: Callable[..., Any], layout: str) -> None:
    """The page of a watch of a folder with several sources (two launch scripts' files, auto layout; a
    kubelet tree, --layout pods) says what the page of one file says, per source: the start-up facts,
    the exporter's counters (added up in the Exporter block), each engine's age from the log's stamps
    and the state a watch of that file alone gives it; /metrics serves no unlabelled zero beside them."""
    root = tmp_path / layout
    files = _scripts(root) if layout == "scripts" else _pods(root)
    args = ("--from-start",) if layout == "scripts" else ("--from-start", "--layout", "pods")
    lines = {name: path.read_bytes().count(b"\n") for name, path in files.items()}
    alone = {name: _alone(path) for name, path in files.items()}
    errors: list[str] = []
    with logwatch_watch(root, *args) as watch:
        poll_until(lambda: (s := watch.status())["counters"]["log_lines"] == sum(lines.values())
                            and s, 15, "every line read")
        page = open_page(browser, watch.url + "/", errors)
        state = poll_until(lambda: (s := page.evaluate(MANY))["live"] and len(s["engines"]) == 2 and s,
                           15, "the live page")
        assert state["facts"]["Sources"] == "2"
        assert state["facts"]["vLLM"] == "0.32.0"
        models = {a["server"].get("served_model_name") for a in alone.values()} - {None}
        assert set(state["facts"]["Models"].split(", ")) == models
        assert state["exporter"]["Following"] == str(root)
        assert state["exporter"]["Lines read"] == f"{sum(lines.values()):,}"
        assert state["exporter"]["Launches"] == "2"
        warnings = sum(a["counters"]["log_messages"]["WARNING"] for a in alone.values())
        assert state["exporter"]["Warnings"] == f"{warnings:,}"
        for name, one in alone.items():
            row = state["sources"][name]
            assert row["Model"] == (one["server"].get("served_model_name") or "\u2014")
            assert row["vLLM"] == (one["server"].get("vllm_version") or "\u2014")
            assert row["Max model length"] == (f'{one["server"]["max_model_len"]:,}'
                                               if "max_model_len" in one["server"] else "\u2014")
            assert row["Lines read"] == f"{lines[name]:,}" and row["Launches"] == "1"
            engine, single = state["engines"][f"{name} #0"], one["engines"]["0"]
            assert engine["State"] == {"ok": "active"}.get(single["state"], single["state"])
            hours = _HOURS.match(engine["Last stats line"])  # from the log's stamps, not "4 s ago"
            assert hours is not None and abs(int(hours[1]) - single["age_seconds"] / 3600) < 1.1
        if layout == "pods":
            assert state["engines"]["llm/vllm-b-7c1e/vllm #0"]["State"] == "stalled"
        samples = watch.samples()
        own = {"vllm_logwatch_read_errors_total", "vllm_logwatch_state_errors_total", "vllm_logwatch_sources",
               "vllm_logwatch_http_invalid_requests_total"}
        label = "script" if layout == "scripts" else "pod"
        unlabelled = {name for name, labels in samples if name not in own and label not in dict(labels)}
        assert unlabelled == set(), unlabelled
        shoot(page, tmp_path / f"watch-{layout}.png")
        page.context.close()
    assert errors == []


def test_a_chart_of_one_stats_line_spans_ten_minutes_and_a_narrow_page_shows_the_whole_caption(
        browser: Any, tmp_path: Path, logwatch_watch: Callable[..., Any]) -> None:
    """A log with one stats line: its charts spanned Jun 2027 to Jun 2029, nothing visible. At 420 px
    the engines table scrolls sideways, and its caption, inside the scroll box, was cut mid-sentence."""
    log = tmp_path / "serve.cri.log"
    log.write_bytes((REPO / "tests" / "data" / "lora" / "serve.cri.log").read_bytes())
    errors: list[str] = []
    with logwatch_watch(log, "--from-start") as watch:
        page = open_page(browser, watch.url + "/", errors)
        charts = poll_until(lambda: page.evaluate("() => window.logwatch && window.logwatch.charts()"),
                            15, "the charts of the one stats line")
        spans = {label: {key: chart["span"] for key, chart in per.items()} for label, per in charts.items()}
        assert spans == {"0": {"throughput": 600, "requests": 600, "cache": 600}}
        page.context.close()
        narrow = browser.new_context(viewport={"width": 420, "height": 900}).new_page()
        narrow.goto(watch.url + "/")
        box = narrow.evaluate("""() => { const table = document.getElementById('engines');
          const text = document.getElementById(table.getAttribute('aria-describedby') || 'none')
            || table.querySelector('caption');
          const r = text.getBoundingClientRect();
          return {right: r.right, wide: table.getBoundingClientRect().width,
                  text: text.textContent.trim()}; }""")
        assert box["wide"] > 420 and box["right"] <= 420, box  # the table scrolls, its caption does not
        assert box["text"].startswith("Values of each engine's last stats line.")
        narrow.context.close()
    assert errors == []
