"""`parse_line` never raises: a bug of ours on a line is counted under the kind of line it was, and
logged once with our traceback, never with the line (it may hold a user's prompt)."""

from __future__ import annotations

import logging

import pytest

from vllm_logwatch.parsing import line as parse_module
from vllm_logwatch.parsing.events import Unparsed
from vllm_logwatch.parsing.line import parse_line

SECRET = "my-customer-acme-corp-merger-plans"
HEAD = "INFO 11-29 19:26:05 [metrics.py:101]"
LINES = {
    "stats": f"INFO 11-29 19:26:05 [loggers.py:335] Engine 000: Avg prompt throughput: 1.0 tokens/s {SECRET}",
    "spec": f"{HEAD} SpecDecoding metrics: Mean acceptance length: 2.2 {SECRET}",
    "transfer": f"{HEAD} KV Transfer metrics: Num successful transfers=4 {SECRET}",
    "info": f"INFO 11-29 19:26:05 [api_server.py:1277] vLLM API server version 0.32.0 {SECRET}",
    "log": f"WARNING 11-29 19:26:05 [serving.py:12] {SECRET}",
}


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the message reader, whatever the line."""
    def fail(*args: object, **kwargs: object) -> None:
        raise KeyError(SECRET)

    monkeypatch.setattr(parse_module, "_parse_message", fail)
    monkeypatch.setattr(parse_module, "_internal_errors", [])


@pytest.mark.parametrize("kind", sorted(LINES))
def test_a_bug_is_counted_under_the_kind_of_line(broken: None, kind: str) -> None:
    event = parse_line(LINES[kind])
    assert isinstance(event, Unparsed)
    assert event.what == kind


def test_a_bug_is_logged_once_and_never_with_the_line(broken: None, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="vllm_logwatch.parsing.line"):
        for text in LINES.values():
            parse_line(text)
    assert len(caplog.records) == 1
    said = caplog.records[0].getMessage()
    assert "internal error reading a" in said and "KeyError" in said
    assert SECRET not in said


@pytest.mark.parametrize("line", [
    f"{HEAD} Prefix cache hit rate: GPU: 1.2.3%, CPU: 0.00%",
    "INFO 12-02 02:10:20 [loggers.py:199] Engine 000: Iteration(1): 0 context requests, "
    + "9" * 5000 + " context tokens, 1 generation requests, 1 generation tokens, "
    "iteration elapsed time: 3.00 ms",
])
def test_a_malformed_number_is_a_counted_skip_not_a_bug(line: str, caplog: pytest.LogCaptureFixture) -> None:
    """A number vLLM never prints (`1.2.3`, a count past int()'s 4,300-digit limit) leaves the line
    unread, counted under its kind, with no internal error logged (it was one: float() and int() raised)."""
    with caplog.at_level(logging.DEBUG):
        event = parse_line(line)
    assert isinstance(event, Unparsed) and event.what in ("prefix", "iteration")
    assert not caplog.records
