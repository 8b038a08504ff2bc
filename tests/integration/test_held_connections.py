"""Connections held open without finishing a request (nothing sent, or one header line every second)
against a real `logwatch watch` under a limit of 256 descriptors: the server closes a request head not
finished within its deadline, keeps at most its share of the descriptors in connections (the oldest
unfinished closed first), so `/healthz` answers and the follower still opens its files, and a
SIGTERM meanwhile exits at once without a traceback (`web/gate.py`)."""

from __future__ import annotations

import contextlib
import os
import resource
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support import WatchProcess, poll_until, run_watch

from vllm_logwatch.web.gate import HEAD_TIMEOUT

pytestmark = pytest.mark.timeout(60)

LIMIT = 256
HELD = 300
LINE = "INFO 07-05 11:29:01 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s\n"
HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"  # headers never finished


def limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def two_sources(tmp_path: Path) -> Path:
    """A folder of two launch scripts' files: a many-source watch, with its half of the descriptors."""
    root = tmp_path / "logs"
    root.mkdir()
    for i in range(2):
        (root / f"serve_s{i}_20250705_112901.log").write_text(LINE)
    return root


@contextlib.contextmanager
def held(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections, each with a request head that is never finished."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            socks.append(sock)
            with contextlib.suppress(OSError):  # closed already by the server: it was the oldest
                sock.sendall(HEAD)
        yield socks
    finally:
        for sock in socks:
            sock.close()


def fresh_get(watch: WatchProcess, path: str) -> httpx.Response:
    """On a new connection (the watch's client may hold one from before)."""
    return httpx.get(f"{watch.url}{path}", timeout=5, headers={"Connection": "close"})


def lines_read(watch: WatchProcess) -> float:
    text = fresh_get(watch, "/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm_logwatch_log_lines_total{"))


def test_healthz_answers_while_300_half_open_connections_are_held_under_256_descriptors(
        tmp_path: Path) -> None:
    root = two_sources(tmp_path)
    with run_watch(root, "--from-start", "--poll-interval", "0.2", preexec=limit_descriptors,
                   log_dir=tmp_path) as watch:
        poll_until(lambda: lines_read(watch) == 2, 10, "the two lines")
        with held(watch.port, HELD):
            started = time.monotonic()
            assert fresh_get(watch, "/healthz").status_code == 200
            assert time.monotonic() - started < 2
            with open(root / "serve_s0_20250705_112901.log", "a") as log:
                log.write(LINE)
            poll_until(lambda: lines_read(watch) == 3, 10, "the follower to read a new line")
            assert len(os.listdir(f"/proc/{watch.proc.pid}/fd")) < LIMIT
            assert fresh_get(watch, "/api/v1/status").json()["http"]["accept_errors"] == 0
    err = watch.stderr()
    assert "Traceback" not in err and "too many open files" not in err.lower(), err[-2000:]


def test_a_request_head_not_finished_in_time_is_closed(tmp_path: Path) -> None:
    """Three connections: one sends nothing; one sends a line of its head every second; one had an
    answer, then does the same for its next request (the idle keep-alive timer no longer helps)."""
    with run_watch(two_sources(tmp_path), log_dir=tmp_path) as watch:
        silent = socket.create_connection(("127.0.0.1", watch.port), timeout=5)
        trickle = socket.create_connection(("127.0.0.1", watch.port), timeout=5)
        trickle.sendall(HEAD)
        again = socket.create_connection(("127.0.0.1", watch.port), timeout=5)
        again.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b'{"status":"ok"}'):
            answer += again.recv(65536)
        again.sendall(HEAD)
        opened = time.monotonic()
        socks = {"silent": silent, "trickle": trickle, "again": again}
        closed: dict[str, float] = {}
        while len(closed) < len(socks) and time.monotonic() - opened < HEAD_TIMEOUT + 5:
            waiting = [sock for name, sock in socks.items() if name not in closed]
            ready, _, _ = select.select(waiting, [], [], 1.0)  # also the pace of the trickle
            for name, sock in socks.items():
                try:
                    if name in closed or (sock in ready and sock.recv(65536)):
                        continue
                    if sock not in ready:
                        if name != "silent":
                            sock.sendall(b"X-a: b\r\n")
                        continue
                except ConnectionError:
                    pass
                closed[name] = time.monotonic() - opened
        for sock in socks.values():
            sock.close()
    assert set(closed) == set(socks), f"still open after {HEAD_TIMEOUT + 5} s: {set(socks) - set(closed)}"
    assert all(HEAD_TIMEOUT - 1 <= after <= HEAD_TIMEOUT + 2 for after in closed.values()), closed


def test_sigterm_while_300_connections_are_held_exits_at_once_without_a_traceback(tmp_path: Path) -> None:
    with run_watch(two_sources(tmp_path), preexec=limit_descriptors, log_dir=tmp_path) as watch, \
            held(watch.port, HELD):
        with contextlib.suppress(httpx.TransportError):  # once answered or not, the server saw them all
            fresh_get(watch, "/healthz")
        started = time.monotonic()
        assert watch.stop(timeout=8) == 0
        took = time.monotonic() - started
    err = watch.stderr()
    assert "Exception in callback" not in err and "Traceback" not in err, err[-2000:]
    assert took < 3, f"{took:.1f} s to exit"
