"""`logwatch watch`: follow the log files in a worker thread, serve the metrics and the status page.

`server.serve` runs uvicorn in the main thread until SIGTERM or SIGINT; the pipeline is stopped (and
its state file written) in its `on_stop`. `-` (standard input) and a named pipe are read as a stream
(`following/stream.py`) to its end, and served on after it.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import logging
import os
import signal
import socket
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import EXIT_OK, UsageError
from ..exporting.history import History
from ..following.statefile import MAX_STATE_BYTES
from ..web.server import EXIT_SIGINT, bind_socket, create_app, serve, url_of
from ..web.webconfig import WebConfig

if TYPE_CHECKING:
    from ..following.stream import StreamSource

__all__ = ["run_watch"]

log = logging.getLogger(__name__)


def run_watch(
    settings: Any, *, announce: Callable[[str], None] | None = None, stdin_open: bool = True,
) -> int:
    """`logwatch watch`: follow `settings.target`, serve the metrics, stop cleanly; the exit code.

    `settings` is a `config.WatchSettings`; `announce` gets the metrics URL once serving (the status page
    is at `/`); `stdin_open=False`: the process was started with standard input closed (the command
    line put /dev/null there), so `-` is a usage error."""
    from prometheus_client.registry import CollectorRegistry

    from ..exporting.exporter import ExporterMetrics
    from ..following.follower import Follower
    from ..following.source import LineSource
    from ..live.pipeline import Pipeline
    from ..parsing.stamps import resolve_zone

    history = History()
    stream = _is_stream(settings.target)
    follower: LineSource
    try:
        metrics = ExporterMetrics(stats_interval=settings.stats_interval, const_labels=settings.labels,
                                  on_stats=history.record)
        if stream:
            follower = _open_stream(settings, stdin_open)
        else:
            follower = files = Follower(
                settings.target, pattern=settings.pattern, from_start=settings.from_start,
                state_file=settings.state_file, poll_interval=settings.poll_interval,
            )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    waiting = None if stream else _nothing_to_read(files.mode, files.target, settings.pattern)
    _check_state_file(settings.state_file)
    sock = bind_socket(settings.listen, settings.port)  # a port in use fails before anything starts
    pipeline = Pipeline(follower, metrics, zone=resolve_zone(settings.tz))
    registry = CollectorRegistry()
    pipeline.register(registry)
    web = settings.web_config
    app = create_app(registry, pipeline.status, pipeline.healthy, history, web=web)
    port = sock.getsockname()[1]
    shown_host = settings.listen
    if settings.listen in ("0.0.0.0", "::"):
        shown_host = socket.gethostname()
    url = url_of(shown_host, port, scheme=web.scheme if web is not None else "http")
    if stream:
        log.info("serving %s (listening on %s:%d); reading %s to its end", url, settings.listen, port,
                 follower.status()["target"])
    else:
        what = {"dir": f"folder (newest {settings.pattern})", "glob": "glob", "file": "file"}[files.mode]
        start = "its start" if settings.from_start else "its end"
        state = f", state in {settings.state_file}" if settings.state_file else ""
        log.info("serving %s (listening on %s:%d); following %s %s from %s%s", url, settings.listen, port,
                 what, files.target, start, state)
    if waiting:
        log.info("%s", waiting)
    _say_web_config(web)
    if announce is not None:
        announce(url)
    pipeline.start()
    signum = serve(app, settings.listen, port, on_stop=pipeline.stop, sock=sock, web=web)
    log.info("stopped%s", f" on {signal.Signals(signum).name}" if signum else "")
    return EXIT_SIGINT if signum == signal.SIGINT else EXIT_OK


def _say_web_config(web: WebConfig | None) -> None:
    """One line at start on what --web-config turned on (and a warning for passwords sent in clear)."""
    if web is None:
        return
    log.info("web config: %s", web.describe())
    if web.basic_auth_users and web.tls is None:
        log.warning("basic auth without TLS: passwords cross the network in clear text")


def _is_stream(target: str) -> bool:
    """`-` (standard input) or a named pipe: read as one stream to its end, not followed as a file."""
    try:
        return target == "-" or stat.S_ISFIFO(os.stat(target).st_mode)
    except OSError:
        return False


def _open_stream(settings: Any, stdin_open: bool) -> StreamSource:
    """The `StreamSource` of `-` or a named pipe; a state file with it is a usage error (a stream has
    no position to resume at), --from-start is said to mean nothing."""
    from ..following.stream import StreamSource

    if settings.state_file is not None:
        raise UsageError("--state-file: a stream (-, a pipe) has no position to resume at: leave "
                         "--state-file out, or follow the file the output is teed to")
    if settings.from_start:
        log.warning("--from-start means nothing for a stream: it is read from where it is now")
    if settings.target != "-":
        try:
            return StreamSource.open_fifo(settings.target, poll_interval=settings.poll_interval)
        except OSError as exc:
            reason = os.strerror(exc.errno or 0).lower()
            raise UsageError(f"{settings.target}: cannot open: {reason}") from None
    try:
        os.fstat(0)
        if not stdin_open:
            raise OSError("standard input was closed at start")
    except OSError:
        raise UsageError("-: standard input is closed: pipe the log in (docker logs -f vllm 2>&1 | "
                         "logwatch watch -)") from None
    return StreamSource(0, poll_interval=settings.poll_interval)


def _nothing_to_read(mode: str, target: str, pattern: str) -> str | None:
    """Why there is no file to read yet (said once at start), or None. A target that exists but is
    not a regular file (a device, a socket; a named pipe is read as a stream), or a loop of symbolic
    links, is a usage error: following needs a file that grows."""
    if mode == "file":
        if not os.path.exists(target):
            try:
                os.stat(target)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UsageError(f"{target}: a loop of symbolic links: it can never be read") from None
            return f"{target} does not exist yet: waiting for it"
        if not os.path.isfile(target):
            raise UsageError(f"{target} is not a regular file: follow the file vLLM's output is teed to, "
                             "pipe it into 'logwatch watch -', or run vLLM under 'logwatch run'")
        return None
    if mode == "dir":
        try:
            names = os.listdir(target)
        except OSError:
            return f"{target} cannot be listed yet: waiting for it"
        if not any(fnmatch.fnmatch(n, pattern) for n in names):
            return f"no {pattern} file in {target} yet: waiting for one"
        return None
    return None if glob.glob(target) else f"nothing matches {target} yet: waiting for a file"


def _check_state_file(path: str | None) -> None:
    """A state file that can never be written is a usage error at start, not an error counted forever;
    so is one that cannot be ours: not a regular file (a device, a pipe: reading it would never end or
    never begin; a link: each save replaces it) or bigger than a state file can be."""
    if path is None:
        return
    try:
        st = os.lstat(path)  # never open(): a pipe would block
    except OSError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise UsageError(f"--state-file {path}: is a symbolic link: give the path of the file itself (it is "
                         "replaced at each save)")
    if os.path.isdir(path):
        raise UsageError(f"--state-file {path}: is a folder: give the path of a file (written atomically, "
                         "next to itself)")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UsageError(f"--state-file {path}: is not a regular file (a device, a pipe, a socket)")
    if st is not None and st.st_size > MAX_STATE_BYTES:
        raise UsageError(f"--state-file {path}: is {st.st_size} bytes: not a state file (at most "
                         f"{MAX_STATE_BYTES >> 10} KiB)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"--state-file {path}: its folder {folder} does not exist")

