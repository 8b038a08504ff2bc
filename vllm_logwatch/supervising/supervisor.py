"""Run vLLM as a child: tee its output to a launch file and our stdout, feed the parser, stop it
well, restart it if asked (what it does for the user: docs/run.md). The tee is a process of its own
(`tee.py`), so neither a slow log disk nor logwatch's parsing stalls vLLM; if logwatch dies the child
gets SIGTERM (`_deathsig`).

Signals only set a flag; the main loop (in the main thread: the death signal is tied to the thread
that forked the child) does the work, as the pure functions at the end decide it: `decide_stop` says
which signals to send to whom and when to ask again, `after_exit` whether to launch vLLM again and when.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime
from types import FrameType
from typing import Literal, Protocol

from .tee import SinkStats, TeeProcess, read_stats, spawn_tee

log = logging.getLogger("vllm_logwatch.run")

_STARTED = (b"Starting vLLM", b"Application startup complete", b'"GET /health HTTP')
_READ = 1 << 20
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
JOB_STOP_SIGNALS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


def _read_all(fd: int) -> bytes:
    """Everything until EOF from a pipe, which is closed after."""
    with open(fd, "rb") as pipe:
        return pipe.read()


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


@dataclass(eq=False)
class Supervisor:
    """Runs the child until it ends (or until stopped), restarting it per `restart`.

    `run()` returns logwatch's exit code: the child's, or 128+N when signal N ended it. It knows nothing
    of metrics: every chunk goes to the log file and the echo (by the tee) and to `feeder`; what it knows
    of the child goes to `on_state`. What to do when is `decide_stop`'s and `after_exit`'s; `popen` (start
    the child), `spawn_tee` (start its tee: `tee.spawn_tee`), `clock` (seconds, monotonic), `killpg`
    (signal a process group) and `tick` (the longest wait between two looks at the child) are the seams
    tests replace (tests/unit/supervising/).
    """

    command: Sequence[str]
    _: KW_ONLY
    log_dir: str
    name: str
    feeder: ChunkConsumer
    on_state: Callable[[ChildState], None] | None = None
    stop_timeout: float = 30.0
    restart: Restart = "no"
    startup_grace: float = 60.0
    backoff_max: float = 60.0
    echo_fd: int | None = 1
    clock: Callable[[], float] = time.monotonic
    popen: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen
    spawn_tee: Callable[[int, str, int | None], tuple[TeeProcess, int, int]] = spawn_tee
    killpg: Callable[[int, int], None] = os.killpg
    tick: float = 0.5

    def __post_init__(self) -> None:
        self.command = list(self.command)
        self.restarts = 0
        self.last_exit_code: int | None = None
        self.pid: int | None = None
        self.start_time: float | None = None
        self.log_path: str | None = None
        self._tee = [SinkStats(), SinkStats(), SinkStats()]  # this launch's file, echo, parse
        self._done_files = SinkStats()
        self._done_echo = self._done_parse = 0  # echoed and parsed bytes dropped by the launches before
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

    def _on_job_stop(self, signum: int, frame: FrameType | None) -> None:
        """Ctrl+Z on `logwatch run` stops vLLM's group too and `fg` resumes both, as a shell does for a
        job (vLLM's own session keeps it out of the terminal's job control: stopped alone, logwatch
        would leave it blocked in `write()` on a full pipe)."""
        pgid = self._group
        if pgid is not None:
            _signal_group(pgid, signal.SIGSTOP)
        signal.signal(signum, signal.SIG_DFL)
        try:
            os.kill(os.getpid(), signum)  # stops here until SIGCONT (or at once, in an orphaned group,
        finally:                          # where the kernel discards a terminal stop signal)
            signal.signal(signum, self._on_job_stop)
            if pgid is not None:
                _signal_group(pgid, signal.SIGCONT)

    def run(self) -> int:
        """Launch, supervise, restart; returns the exit code. SIGTERM, SIGINT and SIGHUP (an ssh
        session closing) all stop vLLM's group gracefully, for the duration (a second Ctrl+C without
        waiting); the originals come back.
        Ctrl+Z (SIGTSTP, SIGTTIN, SIGTTOU) stops vLLM's group with logwatch (`_on_job_stop`)."""
        previous = {s: signal.signal(s, self._on_signal) for s in _STOP_SIGNALS}
        previous.update({s: signal.signal(s, self._on_job_stop) for s in JOB_STOP_SIGNALS})
        self.feeder.start()
        try:
            return self._loop()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
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
        with selectors.DefaultSelector() as sel:
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stop:
                left = deadline - self.clock()
                if left <= 0:
                    return False
                for key, _ in sel.select(min(left, self.tick)):
                    os.read(key.fd, 512)
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
        self._add_done()
        try:
            tee, data_fd, stats_fd = self.spawn_tee(proc.stdout.fileno(), self.log_path, self.echo_fd)
        except OSError as exc:  # no process to drain vLLM's pipe: vLLM would soon block on it
            log.error("cannot start the tee of vLLM's output (%s): stopping vLLM", exc.strerror or exc)
            _signal_group(proc.pid, signal.SIGKILL, self.killpg)
            proc.stdout.close()
            return exit_code_of(proc.wait()), False, self.clock() - started_at
        pipe = os.fstat(proc.stdout.fileno()).st_ino  # vLLM's pipe: who else holds it, at the end
        proc.stdout.close()  # the tee's alone: if the tee were gone, vLLM would not wait on a full pipe
        self.feeder.relaunch(self.log_path)
        self.pid, self.start_time, self._group = proc.pid, time.time(), proc.pid
        log.info("started vLLM (pid %d), log %s", proc.pid, self.log_path)
        self._report(up=True)
        try:
            started = self._pump(proc, data_fd, stats_fd, pipe, tee.pid)
        finally:
            self._group = None
            self._end_tee(tee, data_fd, stats_fd)
        code = exit_code_of(proc.wait())
        self._report(up=False)
        ended = f" (ended by {_signal_name(code - 128)})" if code > 128 and code - 128 < 65 else ""
        log.info("vLLM (pid %d) exited with code %d%s", proc.pid, code, ended)
        return code, started, self.clock() - started_at

    def _end_tee(self, tee: TeeProcess, data_fd: int, stats_fd: int) -> None:
        """The tee ends with vLLM's pipe, once its queues are written; if something still holds that
        pipe after the stop gave up on it, the tee is ended too."""
        os.close(data_fd)
        try:
            tee.wait(timeout=35.0)
        except subprocess.TimeoutExpired:
            tee.kill()
            tee.wait()
        os.set_blocking(stats_fd, True)
        self._read_tee_stats(_read_all(stats_fd))

    def _read_tee_stats(self, data: bytes) -> None:
        """The last of the tee's totals in `data` (JSON lines)."""
        for line in reversed(data.split(b"\n")):
            if line and (stats := read_stats(line)) is not None and len(stats) == 3:
                self._tee = stats
                return

    def _pump(self, proc: subprocess.Popen[bytes], fd: int, stats_fd: int, pipe: int, tee: int) -> bool:
        """Take the tee's copy of the child's bytes to the parser until the child has exited and its pipe
        is drained; stop the child when asked, also once it has closed its end of the pipe and runs on."""
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        sel.register(stats_fd, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        started, tail = False, b""
        stop, wait = Stop(), self.tick
        last_report = self.clock()
        eof, closed_looks = False, 0
        while True:
            for key, _ in sel.select(wait):
                if key.fd == self._wake_r:
                    os.read(self._wake_r, 512)
                    continue
                if key.fd == stats_fd:
                    got = os.read(stats_fd, 1 << 16)  # whole lines: each was written at once, under PIPE_BUF
                    if not got:
                        sel.unregister(stats_fd)
                    self._read_tee_stats(got)
                    continue
                data = os.read(fd, _READ)
                if not data:  # the pipe closed; the child may run on (`exec >file 2>&1`)
                    eof = True
                    sel.unregister(fd)
                    break
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
                self._send(send, proc.pid, pipe, tee)
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

    def _send(self, send: Send, pgid: int, pipe: int, tee: int) -> None:
        if send.why == "asked":
            log.info("stopping vLLM: SIGTERM to its group, SIGKILL after %g s (a second Ctrl+C: at once)",
                     self.stop_timeout)
        elif send.why == "timeout":
            log.warning("vLLM still running %g s after SIGTERM: SIGKILL to its group", self.stop_timeout)
        elif send.why == "forced":
            log.warning("a second Ctrl+C: SIGKILL to vLLM's group")
        if send.target == "group":
            _signal_group(pgid, send.signum, self.killpg)
        else:
            self._signal_leftovers(pgid, pipe, tee, send.signum)

    def _signal_leftovers(self, pgid: int, pipe: int, tee: int, signum: int) -> None:
        """vLLM is gone: its group, and whoever else but the tee still holds its pipe (a helper that left
        the group with `setsid()`), get `signum`."""
        _signal_group(pgid, signum, self.killpg)
        for pid in pipe_holders(pipe) - {tee}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    # -- state ------------------------------------------------------------------------------------

    def _add_done(self) -> None:
        """A launch's tee is done: its totals join those of the launches before."""
        self._done_files = self.file_stats()
        self._done_echo += self._tee[1].bytes_dropped
        self._done_parse += self._tee[2].bytes_dropped
        self._tee = [SinkStats(), SinkStats(), SinkStats()]

    def file_stats(self) -> SinkStats:
        """Log-file totals over all launches."""
        current = self._tee[0]
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
            stdout_bytes_dropped=self._done_echo + self._tee[1].bytes_dropped,
            parse_bytes_dropped=(self.feeder.stats.bytes_dropped + self._done_parse
                                 + self._tee[2].bytes_dropped),
        ))


def pipe_holders(pipe: int, proc: str = "/proc") -> set[int]:
    """The pids of the other processes that hold the pipe with inode `pipe` open (empty where /proc is
    not): one vLLM started that called `setsid()` left vLLM's group, so a stop reaches it by the pipe."""
    try:
        target = f"pipe:[{pipe}]"
        entries = [e.name for e in os.scandir(proc) if e.name.isdigit()]
    except OSError:
        return set()
    me = os.getpid()
    found: set[int] = set()
    for name in entries:
        pid = int(name)
        if pid == me:
            continue
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to look at
            for link in os.scandir(f"{proc}/{name}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(link.path) == target:
                        found.add(pid)
                        break
    return found


def _signal_group(pgid: int, signum: int, killpg: Callable[[int, int], None] = os.killpg) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        killpg(pgid, signum)


# -- the decisions, as pure functions --------------------------------------------------------

LEFTOVER_TERM = 1.0  # seconds after vLLM exited: SIGTERM to whoever still holds its output pipe
LEFTOVER_KILL = 5.0  # ... SIGKILL to them, and the pipe is no longer drained

Target = Literal["group", "leftovers"]
Why = Literal["asked", "forced", "timeout", "leftovers"]
Restart = Literal["no", "on-failure", "always"]


def exit_code_of(returncode: int) -> int:
    """Popen's returncode -> a shell-style exit code (128+N when signal N ended the child).

    >>> exit_code_of(-15), exit_code_of(-2), exit_code_of(3)
    (143, 130, 3)
    """
    return 128 - returncode if returncode < 0 else returncode


@dataclass(frozen=True)
class Send:
    """One signal to send: to vLLM's process group, or (vLLM gone) to its group and every other
    process still holding its output pipe."""

    target: Target
    signum: signal.Signals
    why: Why


@dataclass(frozen=True)
class Stop:
    """Where the stopping of one child stands; a launch starts with `Stop()`."""

    term_at: float | None = None  # SIGTERM sent to vLLM's group (a stop was asked)
    killed: bool = False  # SIGKILL sent to vLLM's group
    exited_at: float | None = None  # when vLLM was first seen gone
    leftovers_termed: bool = False  # SIGTERM sent to what still holds the pipe


@dataclass(frozen=True)
class Step:
    """`decide_stop`'s answer: the signals to send now, in order, the next state, whether to stop
    draining the pipe, and how long (at most) until the next decision is due (inf: none is)."""

    state: Stop
    sends: tuple[Send, ...] = field(default=())
    give_up: bool = False
    wait: float = math.inf


def decide_stop(state: Stop, *, now: float, asked: bool, forced: bool, running: bool,
                timeout: float) -> Step:
    """The next step of a stop. `asked`: a stop was requested (SIGTERM, SIGINT, SIGHUP to logwatch);
    `forced`: a second Ctrl+C came while stopping; `running`: vLLM has not exited; `timeout`:
    `--stop-timeout`.

    A stop sends SIGTERM to vLLM's group, then SIGKILL once `timeout` has passed (or at once when
    forced). Once vLLM has exited, whatever still holds its pipe gets SIGTERM after 1 s and SIGKILL
    after 5 s, and the pipe is given up.

    >>> step = decide_stop(Stop(), now=10.0, asked=True, forced=False, running=True, timeout=30.0)
    >>> [(s.target, s.signum.name) for s in step.sends], step.wait
    ([('group', 'SIGTERM')], 30.0)
    >>> step = decide_stop(step.state, now=40.0, asked=True, forced=False, running=True, timeout=30.0)
    >>> [(s.target, s.signum.name, s.why) for s in step.sends]
    [('group', 'SIGKILL', 'timeout')]
    """
    sends: list[Send] = []
    if running:
        term_at = state.term_at
        if asked and term_at is None:
            sends.append(Send("group", signal.SIGTERM, "asked"))
            state = replace(state, term_at=now)
            term_at = now
        if term_at is None or state.killed:
            return Step(state, tuple(sends))
        if forced or now - term_at >= timeout:
            sends.append(Send("group", signal.SIGKILL, "forced" if forced else "timeout"))
            return Step(replace(state, killed=True), tuple(sends))
        return Step(state, tuple(sends), wait=max(0.0, term_at + timeout - now))
    exited_at = state.exited_at if state.exited_at is not None else now
    state = replace(state, exited_at=exited_at)
    gone_for = now - exited_at
    if not state.leftovers_termed and gone_for >= LEFTOVER_TERM:
        sends.append(Send("leftovers", signal.SIGTERM, "leftovers"))
        state = replace(state, leftovers_termed=True)
    if gone_for >= LEFTOVER_KILL:
        sends.append(Send("leftovers", signal.SIGKILL, "leftovers"))
        return Step(state, tuple(sends), give_up=True, wait=0.0)
    due = LEFTOVER_KILL if state.leftovers_termed else LEFTOVER_TERM
    return Step(state, tuple(sends), wait=max(0.0, exited_at + due - now))


@dataclass(frozen=True)
class Afterwards:
    """`after_exit`'s answer: `exit` (with the child's code), `gave-up` (it failed during start-up:
    exit, said as an error) or `restart` after `wait` seconds, with `backoff` the wait after that."""

    action: Literal["exit", "gave-up", "restart"]
    wait: float = 0.0
    backoff: float = 1.0


def after_exit(code: int, *, stopped: bool, started: bool, ran_for: float, restart: Restart,
               startup_grace: float, backoff: float, backoff_max: float) -> Afterwards:
    """After vLLM exited with `code` (already `exit_code_of`'d): exit with it, or launch again.

    A stop that was asked for is never restarted; `on-failure` restarts a non-zero code, `always`
    any; a child that never reached "started", or ran less than `startup_grace`, is not restarted
    (a start-up failure would only loop). Waits double from 1 s up to `backoff_max`, and start again
    from 1 s after a run of more than ten times `backoff_max`.

    >>> after_exit(1, stopped=False, started=True, ran_for=100, restart="on-failure",
    ...            startup_grace=60, backoff=4, backoff_max=60)
    Afterwards(action='restart', wait=4, backoff=8)
    """
    if stopped or not (restart == "always" or (restart == "on-failure" and code != 0)):
        return Afterwards("exit")
    if not started or ran_for < startup_grace:
        return Afterwards("gave-up")
    if ran_for > 10 * backoff_max:
        backoff = 1.0  # it ran well for a long time: this is a new failure, not a loop
    return Afterwards("restart", wait=backoff, backoff=min(backoff * 2, backoff_max))
