"""`logwatch watch`: follow the log files in a worker thread, serve the metrics and the status page.

`server.serve` runs uvicorn in the main thread until SIGTERM or SIGINT; the pipeline is stopped (and
its state file written) in its `on_stop`.
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
from typing import Any

from ..errors import EXIT_OK, UsageError
from ..exporting.history import History
from ..following.statefile import MAX_STATE_BYTES
from ..web.server import EXIT_SIGINT, bind_socket, create_app, serve, url_of
from ..web.webconfig import WebConfig

__all__ = ["run_watch"]

log = logging.getLogger(__name__)


def run_watch(settings: Any, *, announce: Callable[[str], None] | None = None) -> int:
    """`logwatch watch`: follow `settings.target`, serve the metrics, stop cleanly; the exit code.

    `settings` is a `config.WatchSettings`; `announce` gets the metrics URL once serving (the status page
    is at `/`)."""
    from prometheus_client.registry import CollectorRegistry

    from ..exporting.exporter import ExporterMetrics
    from ..following.follower import Follower
    from ..live.pipeline import Pipeline
    from ..parsing.stamps import resolve_zone

    history = History()
    try:
        metrics = ExporterMetrics(stats_interval=settings.stats_interval, const_labels=settings.labels,
                                  on_stats=history.record)
        follower = Follower(
            settings.target, pattern=settings.pattern, from_start=settings.from_start,
            state_file=settings.state_file, poll_interval=settings.poll_interval,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    waiting = _nothing_to_read(follower.mode, follower.target, settings.pattern)
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
    what = {"dir": f"folder (newest {settings.pattern})", "glob": "glob", "file": "file"}[follower.mode]
    start = "its start" if settings.from_start else "its end"
    log.info("serving %s (listening on %s:%d); following %s %s from %s%s", url, settings.listen, port,
             what, follower.target, start, f", state in {settings.state_file}" if settings.state_file else "")
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


def _nothing_to_read(mode: str, target: str, pattern: str) -> str | None:
    """Why there is no file to read yet (said once at start), or None. A target that exists but is
    not a regular file (a pipe, a device), or a loop of symbolic links, is a usage error: following
    needs a file that grows."""
    if mode == "file":
        if not os.path.exists(target):
            try:
                os.stat(target)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UsageError(f"{target}: a loop of symbolic links: it can never be read") from None
            return f"{target} does not exist yet: waiting for it"
        if not os.path.isfile(target):
            raise UsageError(f"{target} is not a regular file: follow the file vLLM's output is teed to, or "
                             "run vLLM under 'logwatch run'")
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

