"""`logwatch top`: the terminal view of one server or a fleet (docs/top.md).

A target is a log file or folder (read in this process through `watch.follow`, the one reader, from
its start), a logwatch exporter's URL or a vLLM server's own `/metrics` (`terminal/fetch.py`). The
rows, the detail pane and the keys are `terminal/`'s; this module wires them: the targets, `--at`,
`--once` (one frame as text, Rich alone) or the Textual app. With `--at TIME` a log target is shown as
it was at TIME: the same reader and exporter state as `watch`, with `CutMetrics`.
"""

from __future__ import annotations

import functools
import math
import os
import ssl
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..config import DEFAULT_PORT, WatchSettings
from ..errors import EXIT_OK, UsageError
from ..exporting.exporter import ExporterMetrics
from ..parsing.events import Event
from ..shown import printable

if TYPE_CHECKING:
    from ..terminal.board import Board, LogSource
    from ..terminal.render import Shown
    from ..terminal.view import ServerKey, ServerSnap, StatsBook


@dataclass(frozen=True)
class TopOptions:
    """What `logwatch top` was asked (options.py `_add_top`)."""

    targets: tuple[str, ...]
    once: bool = False
    detail: bool = False
    at: str | None = None
    step: float = 60.0
    interval: float = 1.0
    width: int | None = None
    pattern: str = "*.log"
    tz: str | None = None
    timeout: float = 2.0
    user: str | None = None
    password_file: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False


def default_targets(environ: dict[str, str] | os._Environ[str] = os.environ) -> tuple[str, ...]:
    """With no target: what `watch` would follow (`LOGWATCH_TARGET`), else the exporter on this host.

    >>> default_targets({}), default_targets({"LOGWATCH_PORT": "9500"})
    (('http://127.0.0.1:9477/metrics',), ('http://127.0.0.1:9500/metrics',))
    >>> default_targets({"LOGWATCH_TARGET": "/l"})
    ('/l',)
    """
    if environ.get("LOGWATCH_TARGET"):
        return (environ["LOGWATCH_TARGET"],)
    return (f"http://127.0.0.1:{environ.get('LOGWATCH_PORT') or DEFAULT_PORT}/metrics",)


def log_name(target: str) -> str:
    """A log target's name on screen: its file name, or its folder's name and a slash.

    >>> log_name("/var/log/vllm/serve_1.log"), log_name("/mnt/logs/")
    ('serve_1.log', 'logs/')
    """
    path = target.rstrip("/") or "/"
    base = os.path.basename(path) or path
    return printable(base + "/" if os.path.isdir(target) or target.endswith("/") else base)


POLLS = 8
"""Polls of a log target at most each time the board reads the logs (each up to `POLL_BYTES`)."""
RECOLLECT = 5.0
"""Seconds a log target's servers are kept while no line comes (ages are the tracker's, from `now`)."""


class CutMetrics(ExporterMetrics):
    """The exporter's state of one source as of `at` (epoch seconds), for `--at`: its clock stands at
    `at`, and it stops taking a source's lines at the first one stamped after it, so ages, stalls and
    every value are those the exporter served at that moment.

    >>> from dataclasses import replace
    >>> from datetime import datetime, timezone
    >>> from vllm_logwatch.parsing.line import parse_line
    >>> def at(stamp):
    ...     e = parse_line(f"INFO 11-29 {stamp} [loggers.py:1] Engine 000: Avg prompt throughput: "
    ...                    "1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, "
    ...                    "Waiting: 0 reqs, GPU KV cache usage: 4.5%")
    ...     return replace(e, time=datetime.fromisoformat(f"2026-11-29T{stamp}+00:00"))
    >>> cut = CutMetrics(at=datetime(2026, 11, 29, 19, 0, 5, tzinfo=timezone.utc).timestamp())
    >>> cut.set_replay(True)  # as the pipeline reads a backlog: each line timed by its stamp
    >>> cut.apply_many([at("19:00:00"), at("19:00:10"), at("19:00:01")])
    []
    >>> cut.status()["engines"]["0"]["age_seconds"]
    5.0
    """

    def __init__(self, *, at: float, **kwargs: Any) -> None:
        super().__init__(clock=lambda: at, **kwargs)
        self.at = at
        self.past = False
        """A line stamped after `at` was read: nothing more of this source is taken."""

    def apply_many(
        self, events: Iterable[Event], access: Mapping[tuple[str, str, int], int] | None = None,
        measured: Mapping[int, float] | None = None, *, ended_from: int | None = None,
    ) -> list[tuple[Event, Exception]]:
        if self.past:
            return []
        kept: list[Event] = []
        for event in events:
            if event.time is not None and event.time.timestamp() > self.at:
                self.past = True  # the block's access lines are left out with it (no stamp of their own)
                access = None
                break
            kept.append(event)
        if ended_from is not None and ended_from > len(kept):
            ended_from = None  # the launch's shutdown line is past `at`
        return super().apply_many(kept, access, measured, ended_from=ended_from)

    def new_launch(self, source: str | None = None) -> None:
        if not self.past:
            super().new_launch(source)

    def mark_shutdown(self) -> None:
        if not self.past:
            super().mark_shutdown()


class _LogTarget:
    """A log target read through `watch.follow` (from its start), into its own registry; polled by the
    board (`poll`), never started as a watch's pipeline."""

    def __init__(self, target: str, options: TopOptions, at: float | None) -> None:
        from prometheus_client.registry import CollectorRegistry

        from ..terminal.view import StatsBook
        from .watch import follow

        self.name = log_name(target)
        self.at = at
        self.book: StatsBook = StatsBook()
        settings = WatchSettings(target=target, from_start=True, pattern=options.pattern, tz=options.tz,
                                 port=0, poll_interval=min(1.0, options.interval))
        make = functools.partial(CutMetrics, at=at) if at is not None else None
        followed = follow(settings, self.book.record, stdin_open=False, make_metrics=make)
        if followed.stream:
            raise UsageError(f"{target}: a stream (-, a pipe) cannot be shown by top: give a log file or "
                             "folder, or the URL of the watch that reads it")
        self.pipeline = followed.pipeline
        self.registry = CollectorRegistry()
        self.pipeline.register(self.registry)
        self._snaps: dict[ServerKey, ServerSnap] | None = None
        self._moved: tuple[int, int] = (0, 0)

    def poll(self, polls: float = POLLS) -> None:
        """What was written since the last poll, in the board's reading thread: one thread reads every
        log target (`Board.start`), no pipeline of a watch's threads each. A burst is read a few polls'
        worth at a time (`POLL_BYTES` a poll), so one busy target does not hold up the others long.
        `polls=math.inf`: every line there is now (`--once`, `--at`: lines past it are read and left out,
        `CutMetrics`)."""
        done = 0
        while done < polls and self.pipeline.step():
            done += 1

    def snaps(self) -> dict[ServerKey, ServerSnap]:
        """Its servers as `/metrics` would show them now; collected and read again once a line was
        applied, else every `RECOLLECT` seconds (a stall, an age: what the clock alone changes)."""
        from ..terminal.view import read_families

        moved = (self.pipeline.keeper.pending.lines, int(time.monotonic() / RECOLLECT))
        if self._snaps is None or moved != self._moved:
            self._snaps, self._moved = read_families(self.registry.collect()), moved
        return self._snaps

    def close(self) -> None:
        self.pipeline.follower.close()


def _client(options: TopOptions) -> tuple[tuple[str, str] | None, ssl.SSLContext]:
    """How URL targets are read: basic auth's user and password, and the TLS context."""
    password = None
    if options.password_file is not None:
        try:
            with open(options.password_file, encoding="utf-8") as f:
                password = f.read().rstrip("\r\n")
        except OSError as exc:
            raise UsageError(f"--basic-auth-password-file {options.password_file}: "
                             f"{(exc.strerror or 'cannot read').lower()}") from None
    if password is not None and options.user is None:
        raise UsageError("--basic-auth-password-file needs --basic-auth-user")
    if options.key_file and not options.cert_file:
        raise UsageError("--tls-key-file needs --tls-cert-file")
    try:
        context = ssl.create_default_context(cafile=options.ca_file)
        if options.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if options.cert_file:
            context.load_cert_chain(options.cert_file, options.key_file)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise UsageError(f"--tls-*: cannot load the CA or certificate: {printable(str(exc))}") from None
    return (None if options.user is None else (options.user, password or "")), context


def _url(target: str) -> str:
    """A URL without a path is its server's `/metrics`."""
    from urllib.parse import urlsplit

    parts = urlsplit(target)
    if not parts.hostname:
        raise UsageError(f"{printable(target)}: not a URL with a host")
    return target if parts.path not in ("", "/") else target.rstrip("/") + "/metrics"


def parse_at(text: str, zone: Any) -> float:
    """`--at`: an ISO time (`2026-11-29T19:25:00`, `2026-11-29 19:25`, with or without a zone; without
    one, in `zone`) as epoch seconds. ValueError for anything else.

    >>> from datetime import timezone
    >>> parse_at("2026-11-29 19:25", timezone.utc), parse_at("2026-11-29T19:25:00+01:00", timezone.utc)
    (1795980300.0, 1795976700.0)
    """
    when = datetime.fromisoformat(text.strip())
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone)
    return when.timestamp()


def build_board(options: TopOptions) -> Board:
    """The targets of `options`, read once (log targets to their end, or to `--at`)."""
    from ..parsing.stamps import resolve_zone
    from ..terminal.board import Board
    from ..terminal.fetch import Fetcher, UrlTarget, is_url

    targets = options.targets or default_targets()
    urls = [t for t in targets if is_url(t)]
    files = [t for t in targets if not is_url(t)]
    at = None
    if options.at is not None:
        if urls:
            raise UsageError("--at: URL targets show now only; give log files or folders")
        try:
            at = parse_at(options.at, resolve_zone(options.tz))
        except ValueError:
            raise UsageError(f"--at {printable(options.at)}: not a time such as "
                             "2026-11-29T19:25:00") from None
    auth, context = _client(options) if urls else (None, None)
    url_targets = [UrlTarget(_url(u), auth, context) for u in urls]
    names = {u: t.name for u, t in zip(urls, url_targets, strict=True)}

    def make_logs(when: float | None) -> list[LogSource]:
        made: list[LogSource] = []
        for target in files:
            log_target = _LogTarget(target, options, when)
            log_target.poll(math.inf)
            made.append(log_target)
        return made

    logs = make_logs(at)
    order = [names.get(t) or log_name(t) for t in targets]
    return Board(logs, Fetcher(url_targets, options.timeout), order, remake=make_logs)


def run_top(options: TopOptions) -> int:
    """`logwatch top`: one frame on stdout (`--once`) or the interactive view until `q`."""
    from ..terminal.render import Shown

    if options.once:
        try:
            import rich  # noqa: F401
        except ImportError:
            raise UsageError("top needs Rich: pip install 'vllm-logwatch[top]'") from None
    else:
        try:
            import textual  # noqa: F401
        except ImportError:
            raise UsageError("top needs Textual: pip install 'vllm-logwatch[top]' (or use --once)") from None
        if not sys.stdout.isatty():
            raise UsageError("standard output is not a terminal: use --once for one frame as text")
    board = build_board(options)
    shown = Shown(detail=options.detail)
    try:
        if options.once:
            print_once(board, options, shown)
            return EXIT_OK
        from ..terminal.app import TopApp

        board.start(min(1.0, options.interval))
        TopApp(board, interval=options.interval, step=options.step, shown=shown).run()
        return EXIT_OK
    finally:
        board.close()


def print_once(board: Board, options: TopOptions, shown: Shown) -> None:
    """One frame as text: the fleet line, every row, and with `--detail` each server's pane. A vLLM
    server's throughput is a rate: its `/metrics` is read twice, `--interval` apart."""
    from rich.console import Console

    from ..terminal.render import detail, flat_rows, fleet_text, rows_table

    views = board.refresh(options.timeout)
    if any(v.kind == "vllm" for v in views):
        time.sleep(options.interval)  # the span the rates are taken over, not a wait for something
        views = board.refresh(options.timeout)
    if board.at is not None:
        shown.at_label = f"at {printable(options.at or '')}"
    width = options.width or (Console().width if sys.stdout.isatty() else 100)
    console = Console(width=width, highlight=False, soft_wrap=False, emoji=False)
    console.print(fleet_text(views, shown, width))
    rows = flat_rows(views, shown)
    console.print(rows_table(rows, width))
    if shown.detail:
        for view in views:
            console.print()
            console.print(detail(view))
