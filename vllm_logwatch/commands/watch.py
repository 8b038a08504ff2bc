"""`logwatch watch`: follow the log files in a worker thread, serve the metrics and the status page.

`server.serve` runs uvicorn in the main thread until SIGTERM or SIGINT; the pipeline is stopped (and
its state file written) in its `on_stop`. `-` (standard input) and a named pipe are read as a stream
(`following/stream.py`) to its end, and served on after it.
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import glob
import logging
import os
import signal
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..errors import EXIT_OK, UsageError
from ..exporting.families import WithLabels
from ..exporting.history import History
from ..following.layouts import SOURCE_LABELS, source_name, sources_now
from ..following.statefile import MAX_STATE_BYTES
from ..web.server import EXIT_SIGINT, bind_socket, create_app, serve, url_of

if TYPE_CHECKING:
    from ..config import WatchSettings
    from ..exporting.exporter import ExporterMetrics
    from ..following.follower import Follower
    from ..following.many import ManyFollower
    from ..following.source import LineSource
    from ..following.stream import StreamSource
    from ..live.pipeline import Pipeline
    from ..parsing.events import EngineStats

log = logging.getLogger(__name__)
MANY_SOURCE_CHARTS = 16
"""A many-source watch charts this many engines of its sources on the status page (the first to
print stats; a source silent for the charts' hour makes room)."""


def run_watch(
    settings: WatchSettings, *, announce: Callable[[str], None] | None = None, stdin_open: bool = True,
    extra_status: Callable[[], dict[str, Any]] | None = None,
) -> int:
    """`logwatch watch`: follow `settings.target`, serve the metrics, stop cleanly; the exit code.

    `announce` gets the metrics URL once serving (the status page is at `/`); `stdin_open=False`: the
    process was started with standard input closed (the command line put /dev/null there), so `-` is a
    usage error; `extra_status`: more keys for the status (the demo's `replay`)."""
    from prometheus_client.registry import CollectorRegistry

    from ..live.records import open_records

    history = History()

    def record(labels: Mapping[str, str], engine: str, stats: EngineStats, arrival: float) -> None:
        # many sources: each source's engines, named as the status names them
        label = f"{source_name(tuple(labels.items()))} #{engine}" if labels else engine
        history.record(label, stats, arrival)

    followed = follow(settings, record, stdin_open=stdin_open)
    pipeline = followed.pipeline
    if followed.many:
        history.max_series = MANY_SOURCE_CHARTS
    _check_state_file(settings.state_file)
    # --records, opened once the settings are known to be good; a restart resumes the records file where
    # the state file's mark says: each record once
    records = open_records(settings.records, state_file=pipeline.follower.state_file)
    pipeline.keeper.records = records
    try:  # the records file closed whatever happens from here (a port in use fails before anything starts)
        sock = bind_socket(settings.listen, settings.port)
        registry = CollectorRegistry()
        pipeline.register(registry)
        if records is not None:
            registry.register(WithLabels(records, settings.labels))
            records.start()
        web = settings.web_config
        status = pipeline.status
        if extra_status is not None:
            more = extra_status

            def status() -> dict[str, Any]:
                return {**pipeline.status(), **more()}

        app = create_app(registry, status, pipeline.healthy, history, web=web, labels=settings.labels)
        port = sock.getsockname()[1]
        url = url_of(settings.listen, port, scheme=web.scheme if web is not None else "http")
        state = f", state in {settings.state_file}" if settings.state_file else ""
        if followed.stream:
            log.info("serving %s (listening on %s:%d); reading %s to its end", url, settings.listen, port,
                     pipeline.follower.status()["target"])
        elif followed.many:
            start = "from their start" if settings.from_start else "from their end"
            chosen = f", those matching {' or '.join(settings.select)}" if settings.select else ""
            sources = cast("ManyFollower", pipeline.follower)
            log.info("serving %s (listening on %s:%d); following the sources of %s (layout %s%s) %s%s", url,
                     settings.listen, port, sources.target, sources.mode, chosen, start, state)
        else:
            files = cast("Follower", pipeline.follower)
            what = {"dir": f"folder (newest {settings.pattern})", "glob": "glob", "file": "file"}[files.mode]
            start = "its start" if settings.from_start else "its end"
            log.info("serving %s (listening on %s:%d); following %s %s from %s%s", url, settings.listen, port,
                     what, files.target, start, state)
        if followed.waiting:
            log.info("%s", followed.waiting)
        if web is not None:  # what --web-config turned on, and a warning for passwords sent in clear
            log.info("web config: %s", web.describe())
            if web.basic_auth_users and web.tls is None:
                log.warning("basic auth without TLS: passwords cross the network in clear text")
        if announce is not None:
            announce(url)
        pipeline.start()
        signum = serve(app, sock, pipeline.stop, web=web)
    finally:
        if records is not None:
            records.close()
    log.info("stopped%s", f" on {signal.Signals(signum).name}" if signum else "")
    return EXIT_SIGINT if signum == signal.SIGINT else EXIT_OK


StatsHook = Callable[[Mapping[str, str], str, "EngineStats", float], None]
"""Told of each stats line: the source's labels ({} for a one-source target), the engine label of its
series, the line, its arrival."""
MetricsMaker = Callable[..., "ExporterMetrics"]
"""`ExporterMetrics` or a subclass: called with `stats_interval`, `const_labels` and `on_stats`."""


@dataclass
class Followed:
    """What `follow` built: the pipeline over the target's follower, and what kind of target it is."""

    pipeline: Pipeline
    stream: bool
    many: bool
    waiting: str | None
    """Why there is nothing to read yet (said once at start), or None."""


def follow(settings: WatchSettings, on_stats: StatsHook | None = None, *, stdin_open: bool = True,
           make_metrics: MetricsMaker | None = None) -> Followed:
    """The follower and pipeline of `settings.target`, as `watch` reads it (a file, a folder of one
    script's files or of many sources, a glob, a stream), not started; `logwatch top` reads its log
    targets through it too. Bad settings are a `UsageError`."""
    from ..exporting.exporter import ExporterMetrics
    from ..following.follower import Follower
    from ..live.pipeline import Pipeline
    from ..parsing.stamps import resolve_zone

    maker: MetricsMaker = make_metrics or ExporterMetrics
    stream = _is_stream(settings.target)
    many = not stream and _is_many(settings)
    follower: LineSource
    metrics_for = waiting = None

    def hook(labels: Mapping[str, str]) -> Callable[[str, EngineStats, float], None] | None:
        return None if on_stats is None else functools.partial(on_stats, dict(labels))

    try:
        metrics = maker(stats_interval=settings.stats_interval, const_labels=settings.labels,
                        on_stats=None if many else hook({}))  # many: its sources tell
        if stream:
            follower = _open_stream(settings, stdin_open)
        elif many:
            follower = sources = _many(settings)
            waiting = _no_source_yet(sources)

            def metrics_for(labels: Mapping[str, str]) -> ExporterMetrics:
                return maker(stats_interval=settings.stats_interval,
                             const_labels={**settings.labels, **labels}, on_stats=hook(labels))
        else:
            follower = files = Follower(
                settings.target, pattern=settings.pattern, from_start=settings.from_start,
                state_file=settings.state_file, poll_interval=settings.poll_interval,
            )
            waiting = _nothing_to_read(files.mode, files.target, settings.pattern)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    pipeline = Pipeline(follower, metrics, zone=resolve_zone(settings.tz), metrics_for=metrics_for,
                        labels=settings.labels)
    return Followed(pipeline, stream, many, waiting)


def _is_many(settings: WatchSettings) -> bool:
    """Whether the target is read as many sources: with --layout, or a folder that holds at start a
    kubelet or Docker tree or the launch files of two or more scripts. A file, a glob, and a folder of
    one script's files (or none yet) are one source, as they always were. --layout or --select with a
    file or a glob is a usage error; so is a --label named like a source's label."""
    target = settings.target
    folder = settings.layout != "auto"
    if not folder and os.path.isdir(target):  # a kubelet or Docker tree, or two scripts' launch files
        layout, count = sources_now(target, None, settings.pattern)
        folder = layout in ("pods", "docker") or (layout == "scripts" and count > 1)
    if settings.select and not folder and os.path.isdir(target):
        raise UsageError(f"--select: {target} holds one launch script's files (or none yet): give --layout "
                         "(pods, docker or scripts) to read its sources")
    if folder and glob.has_magic(target):
        raise UsageError(f"--layout: {target} is a glob: give the folder that holds the sources")
    if folder and os.path.isfile(target):
        raise UsageError(f"--layout {settings.layout}: {target} is a file, not a folder of sources")
    if not folder and settings.select:
        raise UsageError(f"--select: {target} is not a folder: there is only one source to follow")
    if folder:
        taken = sorted(set(settings.labels) & SOURCE_LABELS)
        if taken:
            raise UsageError(f"--label {taken[0]}: the sources of a folder have that label already")
    return folder


def _many(settings: WatchSettings) -> ManyFollower:
    from ..following.many import ManyFollower, open_files_budget, raise_open_files_limit

    limit = raise_open_files_limit()
    open_files = open_files_budget(limit)
    log.debug("descriptor limit %d: at most %d log files open at once", limit, open_files)
    return ManyFollower(
        settings.target, layout=settings.layout, pattern=settings.pattern, select=settings.select,
        max_sources=settings.max_sources, grace=settings.source_grace, from_start=settings.from_start,
        state_file=settings.state_file, poll_interval=settings.poll_interval,
        open_files=open_files,
    )


_LAYOUT_HOLDS = {
    "pods": "<namespace>_<pod>_<uid>/<container>/<N>.log",
    "docker": "<id>/<id>-json.log",
    "scripts": "launch files",
}


def _no_source_yet(sources: ManyFollower) -> str | None:
    """What to say at start when the folder holds no source yet (its files may come later): a warning
    when the folder is not empty, since its layout (or --select) then finds nothing in what it holds."""
    if not os.path.isdir(sources.target):
        return f"{sources.target} does not exist yet: waiting for it"
    if sources.found_now():
        return None
    try:
        empty = not os.listdir(sources.target)
    except OSError:
        empty = True
    if empty:
        return f"no source in {sources.target} yet: waiting for one"
    layout = sources.layout or "auto"
    chosen = f" matching {' or '.join(sources.select)}" if sources.select else ""
    log.warning("layout %s finds 0 sources%s in %s (it reads %s): waiting for one; give --layout if the "
                "folder holds another layout", layout, chosen, sources.target, _LAYOUT_HOLDS.get(layout, "?"))
    return None


def _is_stream(target: str) -> bool:
    """`-` (standard input) or a named pipe: read as one stream (a pipe's, through each next writer), not
    followed as a file."""
    try:
        return target == "-" or stat.S_ISFIFO(os.stat(target).st_mode)
    except OSError:
        return False


def _open_stream(settings: WatchSettings, stdin_open: bool) -> StreamSource:
    """The `StreamSource` of `-` or a named pipe; a state file with it is a usage error (a stream has
    no position to resume at), --from-start is said to mean nothing."""
    from ..following.stream import StreamSource

    if settings.state_file is not None:
        raise UsageError("--state-file: a stream (-, a pipe) has no position to resume at: leave "
                         "--state-file out, or follow the file the output is teed to")
    if settings.layout != "auto" or settings.select:
        option = "--select" if settings.select else "--layout"
        raise UsageError(f"{option}: a stream (-, a pipe) is one source: give the folder that holds the "
                         "sources instead")
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
    never begin; a link: each save replaces it) or bigger than a state file can be. A missing folder
    is made (with its parents, mode 0700), as a user who names a path on a fresh host expects."""
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
                         f"{MAX_STATE_BYTES >> 20} MiB)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):  # a fresh host: made like `mkdir -p`, readable by us alone
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError as exc:
            reason = os.strerror(exc.errno or 0).lower()
            raise UsageError(f"--state-file {path}: cannot make its folder {folder}: {reason}") from None
        log.info("made the state file's folder %s", folder)

