"""Shared fixtures for tests that run real processes (uvicorn's `tests/utils.py` `run_server` is the model).

* `free_port` - an unused TCP port on 127.0.0.1.
* `poll_until` - call a function until it returns something truthy, or fail after a deadline. Tests
  wait for a condition this way and never sleep to synchronise.
* `run_app` - `with run_app(app) as client:` serves an ASGI app with a real uvicorn on a free
  loopback port, in a thread, and yields an `httpx.Client` for it (uvicorn's `run_server` pattern).
* `logwatch_watch` - `with logwatch_watch(target, "--from-start") as watch:` runs `logwatch watch` as
  a real subprocess on a free loopback port, waits for `/healthz`, and stops it with SIGTERM on exit.
  `watch.sample(name, labels)`, `watch.wait_sample(...)`, `watch.status()`, `watch.get(path)`,
  `watch.stop()` (returns the exit code) and `watch.stderr()` help the test.
* `prometheus` - `with prometheus([watch.address]) as prom:` runs a real Prometheus (Debian package
  `prometheus`) on a free loopback port, scraping the targets every second, with its storage in the
  test's tmp_path; `prom.wait_value(query, expected)` polls its HTTP API. Without the binary the test
  is skipped, unless `LOGWATCH_REQUIRE_PROMETHEUS` is set (CI sets it): then it fails.

Subprocess output goes to files (never to pipes nobody reads, which would block the child).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import support
from support import PrometheusServer, WatchProcess


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/integration/ (real processes, real binaries) is marked `integration`,
    so `pytest -m "not integration"` (or `make smoke`) runs the unit tests alone."""
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)


_SIGPIPE = signal.getsignal(signal.SIGPIPE)
"""The test process's own SIGPIPE action (Python ignores it: a write to a closed pipe is an OSError)."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
        item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """`main` of an offline command restores the default SIGPIPE action (right for a CLI: `| head`). Give
    the test process its own back after every test, its fixtures included: a module's fixture that ran
    `main` once left the default in place for every later test, and the next one writing to a closed
    pipe or socket killed the process (a pytest-xdist worker "not properly terminated")."""
    try:
        return (yield)
    finally:
        signal.signal(signal.SIGPIPE, _SIGPIPE)


@pytest.fixture
def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (free when returned; bind it soon)."""
    return support.free_port()


@pytest.fixture
def poll_until() -> Callable[..., Any]:
    """`poll_until(check, timeout=10, what="...")`: wait for `check()` to be truthy, with a deadline."""
    return support.poll_until


@pytest.fixture
def run_app() -> Callable[..., contextlib.AbstractContextManager[httpx.Client]]:
    """`run_app(app)`: a context manager serving `app` with a real uvicorn in a thread; yields a client."""
    return support.run_app


@pytest.fixture
def logwatch_watch(tmp_path: Path) -> Callable[..., contextlib.AbstractContextManager[WatchProcess]]:
    """`logwatch_watch(target, *extra_args, env=None, port=None, drop_root_read=False)`: a context
    manager running `logwatch watch TARGET --listen 127.0.0.1 --port PORT *extra_args`; yields a
    `WatchProcess`; SIGTERM on exit. `drop_root_read` runs it without root's DAC override (see
    `support.drop_dac_capabilities`). Its stderr is in tmp_path."""

    def run(target: str | Path, *args: str, **kwargs: Any) -> contextlib.AbstractContextManager[WatchProcess]:
        kwargs.setdefault("log_dir", tmp_path)
        return support.run_watch(target, *args, **kwargs)

    return run


@pytest.fixture
def prometheus(tmp_path: Path) -> Callable[..., contextlib.AbstractContextManager[PrometheusServer]]:
    """`prometheus(targets, scrape_interval="500ms")`: a context manager running a real Prometheus that
    scrapes `targets` ("host:port") at /metrics; yields a `PrometheusServer`."""

    def run(targets: Sequence[str], **kwargs: Any) -> contextlib.AbstractContextManager[PrometheusServer]:
        return support.run_prometheus(tmp_path / "prometheus", targets, **kwargs)

    return run


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[str]:
    """A real `logwatch demo --speed 100` (a pass of the bundled log in about 2 s); its base URL."""
    with support.run_demo(tmp_path) as base:
        yield base


CHROMIUM = "/usr/bin/chromium"
_REQUIRE_BROWSER = "LOGWATCH_REQUIRE_BROWSER"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    # The network is closed here: without these Chromium keeps trying to phone home.
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium (Debian's) for a module of the status page's browser tests (each test opens
    its own context); missing, a skip, or a failure under LOGWATCH_REQUIRE_BROWSER (CI)."""
    if not os.path.exists(CHROMIUM):
        support.missing(f"{CHROMIUM} is missing (apt-get install chromium)", _REQUIRE_BROWSER)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        support.missing("the playwright package is missing (pip install playwright)", _REQUIRE_BROWSER)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
