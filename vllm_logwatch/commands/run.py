"""`logwatch run -- vllm serve ...`: supervise vLLM in the main thread, serve the metrics from a thread.

The supervisor must own the main thread: the child's death signal is tied to the thread that forked
it, and signals are delivered there. uvicorn runs in a thread of its own (it installs no signal
handlers there); when the child is gone, the server is told to exit and joined.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..exporting.families import WithLabels

if TYPE_CHECKING:
    from ..config import RunSettings
    from ..exporting.exporter import ExporterMetrics
    from ..supervising.supervisor import ChildState

log = logging.getLogger("vllm_logwatch.run")


def vllm_stats_interval(environ: Mapping[str, str]) -> float | None:
    """The stats interval the child vLLM will use: `VLLM_LOG_STATS_INTERVAL` (vLLM >= 0.10.1; values
    <= 0 mean vLLM's default of 10 s). None when logwatch's environment does not set it: the command
    may set it itself (`env VLLM_LOG_STATS_INTERVAL=2 vllm serve`), so the lines' spacing tells, as in
    `watch`.

    >>> [vllm_stats_interval({"VLLM_LOG_STATS_INTERVAL": v}) for v in ("2", "0", "x")]
    [2.0, 10.0, 10.0]
    >>> vllm_stats_interval({}) is None
    True
    """
    if "VLLM_LOG_STATS_INTERVAL" not in environ:
        return None
    try:
        value = float(environ["VLLM_LOG_STATS_INTERVAL"])
    except ValueError:
        return 10.0
    return value if math.isfinite(value) and value > 0 else 10.0


def run_run(
    settings: RunSettings, command: Sequence[str], *, announce: Callable[[str], None] | None = None,
    echo: bool = True,
) -> int:
    """Start `command`, tee its output to `settings.log_dir` (and to our stdout unless `echo` is
    False), serve metrics; vLLM's exit code."""
    from prometheus_client.registry import CollectorRegistry

    from ..exporting.exporter import ExporterMetrics
    from ..exporting.history import History
    from ..live.feed import LineFeeder
    from ..live.records import open_records
    from ..parsing.masking import masked
    from ..parsing.stamps import resolve_zone
    from ..supervising.supervisor import Supervisor, command_facts, launch_name
    from ..web.server import bind_socket, create_app, http_server, url_of

    if not command:
        raise UsageError("give the command to run after --, e.g. logwatch run -- vllm serve MODEL")
    _check_log_dir(settings.log_dir)
    with contextlib.ExitStack() as stack:  # closed in reverse: the server, the socket, the records
        records = open_records(settings.records, stdout=False)
        if records is not None:
            stack.callback(records.close)
        sock = bind_socket(settings.listen, settings.port)
        stack.callback(sock.close)
        history = History()
        try:
            interval = settings.stats_interval or vllm_stats_interval(os.environ)  # --stats-interval first
            metrics = ExporterMetrics(stats_interval=interval, const_labels=settings.labels,
                                      on_stats=history.record)
        except (UsageError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        registry = CollectorRegistry()
        metrics.register(registry)
        if records is not None:
            registry.register(WithLabels(records, settings.labels))
            records.start()
        feeder = LineFeeder(metrics, resolve_zone(settings.tz), facts=masked(command_facts(command)),
                            records=records.put if records is not None else None)
        supervisor = Supervisor(
            command, log_dir=settings.log_dir, name=launch_name(settings.name, command),
            feeder=feeder, on_state=child_reporter(metrics), stop_timeout=settings.stop_timeout,
            restart=settings.restart, startup_grace=settings.startup_grace, echo_fd=1 if echo else None,
        )
        if not echo:
            log.info("standard output is closed: vLLM's output goes to the log file only")

        def status() -> dict[str, Any]:
            files = supervisor.file_stats()
            snapshot = metrics.status()
            # merged: spread whole, the metrics' child section (child_up, ...) would replace the supervisor's
            return {
                **snapshot,
                "mode": "run",
                "child": {**(snapshot.get("child") or {}),
                          "pid": supervisor.pid, "log_file": supervisor.log_path,
                          "restarts": supervisor.restarts, "last_exit_code": supervisor.last_exit_code,
                          "log_bytes_written": files.bytes_written, "log_write_errors": files.write_errors,
                          "log_bytes_dropped": files.bytes_dropped, "log_last_error": files.last_error},
            }

        web = settings.web_config
        app = create_app(registry, status, history=history, web=web, labels=settings.labels)
        server = http_server(app, web)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="logwatch-http",
                                  daemon=True)
        thread.start()
        stack.callback(thread.join, 10)
        stack.callback(setattr, server, "should_exit", True)
        port = sock.getsockname()[1]
        if announce is not None:
            announce(url_of(settings.listen, port, scheme=web.scheme if web is not None else "http"))
        code = supervisor.run()
    log.info("exiting with code %d", code)  # the last line, whatever came before
    return code


def child_reporter(metrics: ExporterMetrics) -> Callable[[ChildState], None]:
    """The supervisor's `on_state`: what it knows of the child, as the exporter's child metrics."""

    def report(state: ChildState) -> None:
        metrics.set_child(
            up=state.up, pid=state.pid, start_time=state.start_time, restarts=state.restarts,
            last_exit_code=state.last_exit_code, bytes_written=state.log_file.bytes_written,
            write_errors=state.log_file.write_errors, bytes_dropped=state.log_file.bytes_dropped,
            parse_bytes_dropped=state.parse_bytes_dropped, stdout_bytes_dropped=state.stdout_bytes_dropped,
        )

    return report


def _check_log_dir(path: str) -> None:
    """The launch files' folder, made if missing; one that cannot be made or written to is a usage
    error before vLLM starts (later, a failing log file never stops vLLM: its bytes still reach stdout)."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--log-dir {path}: cannot create it ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--log-dir {path}: not writable")

