"""Run vLLM as a child: tee its output to a launch file and our stdout, feed the parser, stop it
well, restart it if asked.

Like the launch script it replaces (`exec > >(tee -a logs/<name>_<date>.log) 2>&1; vllm serve ...`):
stdout and stderr merged into one pipe, every byte written unchanged and in order, a new timestamped
file per launch. Unlike it: a full or slow log disk never stalls vLLM (see `tee`), and if logwatch
dies the child gets SIGTERM (see `_deathsig`).

Signals only set a flag; the main loop (which must run in the main thread: the death signal is tied
to the thread that forked the child) does the work, as `policy.py` decides it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import Protocol

from .holders import pipe_holders
from .jobcontrol import JobControl
from .policy import Restart, Send, Stop, after_exit, decide_stop, exit_code_of
from .sinks import FileSink, SinkStats, StreamSink

__all__ = ["ChildState", "ChunkConsumer", "Supervisor", "command_facts", "exit_code_of", "launch_name"]

log = logging.getLogger("vllm_logwatch.run")

_STARTED = (b"Starting vLLM", b"Application startup complete", b'"GET /health HTTP')
_READ = 1 << 20
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _read_all(fd: int) -> bytes:
    """Everything until EOF from a pipe, which is closed after."""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class ChunkConsumer(Protocol):
    """Whoever else reads the child's bytes (run mode's parser): handed every chunk, never waited for."""

    stats: SinkStats

    def start(self) -> None: ...
    def put(self, data: bytes) -> None: ...
    def relaunch(self, source: str | None) -> None: ...
    def close(self, timeout: float = 5.0) -> None: ...


@dataclass(frozen=True)
class ChildState:
    """What the supervisor knows of the child and of its own sinks, handed to `on_state` at each
    change and once a second."""

    up: bool
    pid: int | None
    start_time: float | None
    restarts: int
    last_exit_code: int | None
    log_file: SinkStats
    stdout_bytes_dropped: int
    parse_bytes_dropped: int


def command_facts(command: Sequence[str]) -> dict[str, str | int]:
    """The served model name and port named on a `vllm serve` command line, if any.

    >>> command_facts(["vllm", "serve", "org/m", "--port", "8001", "--served-model-name", "m"])
    {'port': 8001, 'served_model_name': 'm'}
    """
    facts: dict[str, str | int] = {}
    args = list(command)
    for i, arg in enumerate(args):
        key, eq, value = arg.partition("=")
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        if key == "--served-model-name" and value and not value.startswith("-"):
            facts["served_model_name"] = value
        elif key == "--port" and value.isdigit():
            facts["port"] = int(value)
    serve_model = len(args) > 2 and args[1] == "serve" and not args[2].startswith("-")
    if "served_model_name" not in facts and serve_model:
        facts["model"] = args[2]
    return facts


def launch_name(name: str | None, command: Sequence[str]) -> str:
    """The log file's name stem: `--name`, else the served model name, else `vllm` (file-safe)."""
    raw = name or str(command_facts(command).get("served_model_name") or "vllm")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw).strip("._") or "vllm"


class Supervisor:
    """Runs the child until it ends (or until stopped), restarting it per `restart`.

    `run()` returns logwatch's exit code: the child's, or 128+N when signal N ended it. It knows
    nothing of metrics: every chunk goes to the log file, the echo and `feeder`; what it knows of
    the child goes to `on_state`. What to do when is `policy.py`'s; `popen` (start the child),
    `clock` (seconds, monotonic), `killpg` (signal a process group) and `tick` (the longest wait
    between two looks at the child) are the seams tests replace (tests/unit/supervising/).
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        log_dir: str,
        name: str,
        feeder: ChunkConsumer,
        on_state: Callable[[ChildState], None] | None = None,
        stop_timeout: float = 30.0,
        restart: Restart = "no",
        startup_grace: float = 60.0,
        backoff_max: float = 60.0,
        echo_fd: int | None = 1,
        clock: Callable[[], float] = time.monotonic,
        popen: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen,
        killpg: Callable[[int, int], None] = os.killpg,
        tick: float = 0.5,
    ) -> None:
        self.command = list(command)
        self.log_dir = log_dir
        self.name = name
        self.feeder = feeder
        self.on_state = on_state
        self.popen = popen
        self.stop_timeout = stop_timeout
        self.restart = restart
        self.startup_grace = startup_grace
        self.backoff_max = backoff_max
        self.clock = clock
        self.killpg = killpg
        self.tick = tick
        self.echo = StreamSink(echo_fd) if echo_fd is not None else None  # started by run()
        self.restarts = 0
        self.last_exit_code: int | None = None
        self.pid: int | None = None
        self.start_time: float | None = None
        self.log_path: str | None = None
        self._file: FileSink | None = None
        self._done_files = SinkStats()
        self._stop = False
        self._forced = False
        self._group: int | None = None  # the running child's process group
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    # -- control ----------------------------------------------------------------------------------

    def request_stop(self, force: bool = False) -> None:
        """Ask the loop to stop the child (safe from a signal handler or another thread); `force`:
        SIGKILL to its group now, without waiting for `stop_timeout`."""
        self._forced = self._forced or force
        self._stop = True
        with contextlib.suppress(OSError):  # a full pipe: a wake-up is already pending
            os.write(self._wake_w, b"x")

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """A stop signal; a Ctrl+C (SIGINT) while a stop is under way forces it."""
        self.request_stop(force=self._stop and signum == signal.SIGINT)

    def run(self) -> int:
        """Launch, supervise, restart; returns the exit code. SIGTERM, SIGINT and SIGHUP (an ssh
        session closing) all stop vLLM's group gracefully, for the duration (a second Ctrl+C without
        waiting); the originals come back.
        Ctrl+Z (SIGTSTP, SIGTTIN, SIGTTOU) stops vLLM's group with logwatch (`jobcontrol.py`)."""
        previous = {s: signal.signal(s, self._on_signal) for s in _STOP_SIGNALS}
        jobs = JobControl(lambda: self._group)
        jobs.install()
        if self.echo is not None:
            self.echo.start()
        self.feeder.start()
        try:
            return self._loop()
        finally:
            jobs.restore()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if self.echo is not None:
                self.echo.close()
            self.feeder.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _loop(self) -> int:
        backoff = 1.0
        while True:
            code, started, ran_for = self._run_once()
            self.last_exit_code = code
            self._report(up=False)
            then = after_exit(code, stopped=self._stop, started=started, ran_for=ran_for,
                              restart=self.restart, startup_grace=self.startup_grace, backoff=backoff,
                              backoff_max=self.backoff_max)
            if then.action == "gave-up":
                log.error("vLLM exited with %d during start-up (after %.0f s): not restarting", code, ran_for)
            if then.action != "restart":
                return code
            log.warning("vLLM exited with %d; restarting in %.0f s", code, then.wait)
            if self._sleep(then.wait):
                return code
            backoff = then.backoff
            self.restarts += 1

    def _sleep(self, seconds: float) -> bool:
        """Wait, but wake on a stop request; True if stopped."""
        deadline = self.clock() + seconds
        while not self._stop:
            left = deadline - self.clock()
            if left <= 0:
                return False
            sel = selectors.DefaultSelector()
            sel.register(self._wake_r, selectors.EVENT_READ)
            for key, _ in sel.select(min(left, self.tick)):
                os.read(key.fd, 512)
            sel.close()
        return True

    # -- one launch -------------------------------------------------------------------------------

    def _new_log_path(self) -> str:
        stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
        path = os.path.join(self.log_dir, f"{self.name}_{stamp}.log")
        n = 1
        while os.path.exists(path):  # a restart within the same second
            n += 1
            path = os.path.join(self.log_dir, f"{self.name}_{stamp}-{n}.log")
        return path

    def _run_once(self) -> tuple[int, bool, float]:
        """One child from start to end: (exit code, reached "started", seconds it ran). A command that
        cannot start gets no launch file and no "started" line: its reason, then its code (127)."""
        err_r, err_w = os.pipe()
        shim = [sys.executable, "-m", "vllm_logwatch.supervising._deathsig", str(os.getpid()), str(err_w),
                "--", *self.command]
        started_at = self.clock()
        try:
            proc = self.popen(
                shim, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True, bufsize=0, pass_fds=(err_w,),
            )
        finally:
            os.close(err_w)
        assert proc.stdout is not None
        with contextlib.suppress(OSError):  # Linux: a 1 MiB pipe (default 64 KiB) absorbs bursts
            fcntl.fcntl(proc.stdout.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
        cannot_start = _read_all(err_r)  # empty once the exec succeeded (it closes the pipe)
        if cannot_start:
            proc.stdout.close()
            code = exit_code_of(proc.wait())
            log.error("%s", cannot_start.decode("utf-8", "replace"))
            return code, False, self.clock() - started_at
        try:
            os.makedirs(self.log_dir, exist_ok=True)
        except OSError as exc:  # the folder went away: the file sink counts the failed writes
            log.warning("cannot create %s (%s): this launch's log file will fail", self.log_dir, exc.strerror)
        self.log_path = self._new_log_path()
        if self._file is not None:
            self._add_done(self._file)
        self._file = FileSink(self.log_path)
        self._file.start()
        self.feeder.relaunch(self.log_path)
        self.pid, self.start_time, self._group = proc.pid, time.time(), proc.pid
        log.info("started vLLM (pid %d), log %s", proc.pid, self.log_path)
        self._report(up=True)
        try:
            started = self._pump(proc, proc.stdout.fileno())
        finally:
            self._group = None
        proc.stdout.close()
        code = exit_code_of(proc.wait())
        self._file.close()
        self._report(up=False)
        ended = f" (ended by {_signal_name(code - 128)})" if code > 128 and code - 128 < 65 else ""
        log.info("vLLM (pid %d) exited with code %d%s", proc.pid, code, ended)
        return code, started, self.clock() - started_at

    def _pump(self, proc: subprocess.Popen[bytes], fd: int) -> bool:
        """Move the child's bytes until it has exited and its pipe is drained; stop it when asked, also
        once it has closed its end of the pipe and runs on."""
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        started, tail = False, b""
        stop, wait = Stop(), self.tick
        last_report = self.clock()
        eof, closed_looks = False, 0
        assert self._file is not None
        while True:
            for key, _ in sel.select(wait):
                if key.fd == self._wake_r:
                    os.read(self._wake_r, 512)
                    continue
                data = os.read(fd, _READ)
                if not data:  # the pipe closed; the child may run on (`exec >file 2>&1`)
                    eof = True
                    sel.unregister(fd)
                    break
                self._file.put(data)
                if self.echo is not None:
                    self.echo.put(data)
                self.feeder.put(data)
                if not started:
                    window = tail + data
                    started = any(marker in window for marker in _STARTED)
                    tail = window[-64:]
            now = self.clock()
            running = proc.poll() is None
            if eof and not running:
                break
            step = decide_stop(stop, now=now, asked=self._stop, forced=self._forced,
                               running=running, timeout=self.stop_timeout)
            stop = step.state
            for send in step.sends:
                self._send(send, proc.pid, fd)
            if step.give_up:
                break
            wait = min(self.tick, step.wait)
            if eof:  # look for the exit soon (it usually follows the close), then at each tick
                wait, closed_looks = min(wait, 0.01 * 2 ** closed_looks), min(closed_looks + 1, 8)
            if now - last_report >= 1.0:
                self._report(up=proc.poll() is None)
                last_report = now
        sel.close()
        return started

    def _send(self, send: Send, pgid: int, fd: int) -> None:
        if send.why == "asked":
            log.info("stopping vLLM: SIGTERM to its group, SIGKILL after %g s (a second Ctrl+C: at once)",
                     self.stop_timeout)
        elif send.why == "timeout":
            log.warning("vLLM still running %g s after SIGTERM: SIGKILL to its group", self.stop_timeout)
        elif send.why == "forced":
            log.warning("a second Ctrl+C: SIGKILL to vLLM's group")
        if send.target == "group":
            self._signal_group(pgid, send.signum)
        else:
            self._signal_leftovers(pgid, fd, send.signum)

    def _signal_group(self, pgid: int, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            self.killpg(pgid, signum)

    def _signal_leftovers(self, pgid: int, fd: int, signum: int) -> None:
        """vLLM is gone: its group, and whoever else still holds its pipe (a helper that left the
        group with `setsid()`), get `signum`."""
        self._signal_group(pgid, signum)
        for pid in pipe_holders(fd):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    # -- state ------------------------------------------------------------------------------------

    def _add_done(self, sink: FileSink) -> None:
        self._done_files.bytes_written += sink.stats.bytes_written
        self._done_files.write_errors += sink.stats.write_errors
        self._done_files.bytes_dropped += sink.stats.bytes_dropped

    def file_stats(self) -> SinkStats:
        """Log-file totals over all launches."""
        current = self._file.stats if self._file is not None else SinkStats()
        return SinkStats(
            bytes_written=self._done_files.bytes_written + current.bytes_written,
            write_errors=self._done_files.write_errors + current.write_errors,
            bytes_dropped=self._done_files.bytes_dropped + current.bytes_dropped,
            last_error=current.last_error,
        )

    def _report(self, up: bool) -> None:
        if self.on_state is None:
            return
        self.on_state(ChildState(
            up=up, pid=self.pid, start_time=self.start_time, restarts=self.restarts,
            last_exit_code=self.last_exit_code, log_file=self.file_stats(),
            stdout_bytes_dropped=self.echo.stats.bytes_dropped if self.echo is not None else 0,
            parse_bytes_dropped=self.feeder.stats.bytes_dropped,
        ))
