"""The supervisor's stop and restart policy, driven through its seams: `popen` starts a scripted fake
child (a real pipe for its output, no process), read without a tee (`spawn_tee`), `killpg` delivers
signals to it, `clock` is a fake
clock that moves a quarter second at each reading, `tick=0` so that no wait is real. Stops are asked
the way a user does, with a real signal to this process while the supervisor's handlers are in place.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from vllm_logwatch.supervising.supervisor import ChildState, Stop, Supervisor, after_exit, decide_stop
from vllm_logwatch.supervising.tee import SinkStats


class FakeClock:
    """Monotonic seconds that move `step` at each reading, from 1000."""

    def __init__(self, step: float = 0.25) -> None:
        self.now, self.step = 1000.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class Feeder:
    """The parser's place: takes the chunks, keeps them."""

    def __init__(self) -> None:
        self.stats = SinkStats()
        self.data = b""

    def start(self) -> None: ...
    def put(self, data: bytes) -> None:
        self.data += data
    def relaunch(self, source: str | None) -> None: ...
    def close(self, timeout: float = 5.0) -> None: ...


@dataclass
class Launch:
    """What one fake vLLM does. `on_term`: its returncode on SIGTERM (None: it ignores SIGTERM);
    `exits_after`: it exits by itself with `code` after so many clock seconds; `signals`: signals
    sent to logwatch (this process) at clock seconds after the launch; `holds_pipe`: something it
    started keeps its output pipe open after it exits; `closes_pipe`: it closes its output at once and
    runs on (a wrapper's `exec >file 2>&1`); `cannot_start`: the exec fails with this reason."""

    on_term: int | None = 0
    exits_after: float | None = None
    code: int = 0
    signals: list[tuple[float, int]] = field(default_factory=list)
    holds_pipe: bool = False
    closes_pipe: bool = False
    cannot_start: str | None = None


class FakeChild:
    """Popen's face for one Launch: `poll`, `wait`, `pid`, `stdout` (the read end of a real pipe)."""

    def __init__(self, launch: Launch, clock: FakeClock, pid: int, err_fd: int) -> None:
        self.launch, self.clock, self.pid = launch, clock, pid
        self.returncode: int | None = None
        self.born = clock.now
        read, self._write = os.pipe()
        self.stdout = os.fdopen(read, "rb", buffering=0)
        if launch.cannot_start is not None:
            os.write(err_fd, launch.cannot_start.encode())
            self._exit(127)
            return
        os.write(self._write, b"(APIServer pid=1) INFO Starting vLLM API server\n")
        if launch.closes_pipe:
            self.close()

    def _exit(self, returncode: int) -> None:
        if self.returncode is None:
            self.returncode = returncode
            if not self.launch.holds_pipe and self._write >= 0:
                os.write(self._write, f"exiting {returncode}\n".encode())
                os.close(self._write)
                self._write = -1

    def close(self) -> None:
        if self._write >= 0:
            os.close(self._write)
            self._write = -1

    def poll(self) -> int | None:
        age = self.clock.now - self.born
        while self.launch.signals and age >= self.launch.signals[0][0]:
            signal.raise_signal(self.launch.signals.pop(0)[1])  # handled at once, in this thread
        if self.launch.exits_after is not None and age >= self.launch.exits_after:
            self._exit(self.launch.code)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        assert self.returncode is not None, "the supervisor waited for a child that is still running"
        return self.returncode

    def signalled(self, signum: int) -> None:
        if signum == signal.SIGKILL:
            self._exit(-signal.SIGKILL)
        elif signum == signal.SIGTERM and self.launch.on_term is not None:
            self._exit(self.launch.on_term)


class Script:
    """The seams: `popen` starts the next Launch, `killpg` signals the child with that pid (and
    records it, with the clock's time)."""

    def __init__(self, *launches: Launch, step: float = 0.25) -> None:
        self.launches = list(launches)
        self.clock = FakeClock(step)
        self.children: list[FakeChild] = []
        self.sent: list[tuple[float, int, str]] = []  # (time, pid, signal name)
        self.commands: list[list[str]] = []

    def popen(self, args: list[str], **kw: Any) -> FakeChild:
        assert kw["start_new_session"] and kw["stdout"] is not None
        self.commands.append(list(args))
        [err_fd] = kw["pass_fds"]
        child = FakeChild(self.launches.pop(0), self.clock, 4_000_000 + len(self.children), err_fd)
        self.children.append(child)
        return child

    def killpg(self, pgid: int, signum: int) -> None:
        [child] = [c for c in self.children if c.pid == pgid]
        self.sent.append((self.clock.now, pgid, signal.Signals(signum).name))
        child.signalled(signum)

    def names(self) -> list[str]:
        return [name for _, _, name in self.sent]

    def close(self) -> None:
        for child in self.children:
            child.close()


class NoTee:
    """The tee's place: the fake child's pipe is read directly (no process, no real time)."""

    pid = -1

    def wait(self, timeout: float | None = None) -> int:
        return 0

    def kill(self) -> None: ...


def no_tee(pipe_fd: int, path: str, echo_fd: int | None) -> tuple[NoTee, int, int]:
    Path(path).touch()  # the launch file, as the tee makes it
    stats_r, stats_w = os.pipe()
    os.close(stats_w)  # no totals: at its end at once
    return NoTee(), os.dup(pipe_fd), stats_r


def supervise(tmp_path: Path, script: Script, **kw: Any) -> tuple[Supervisor, int]:
    """Run a Supervisor over the script to its end: (the supervisor, its exit code)."""
    sup = Supervisor(["vllm", "serve", "m"], log_dir=str(tmp_path / "logs"), name="m", feeder=Feeder(),
                     echo_fd=None, clock=script.clock, popen=script.popen, killpg=script.killpg, tick=0,
                     **{"spawn_tee": no_tee, **kw})
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        code = sup.run()
    finally:
        script.close()
    assert {s: signal.getsignal(s) for s in before} == before  # the handlers given back
    return sup, code


def test_sigterm_then_sigkill_after_the_grace(tmp_path: Path) -> None:
    script = Script(Launch(on_term=None, signals=[(5.0, signal.SIGTERM)]))
    sup, code = supervise(tmp_path, script, stop_timeout=30.0, restart="always")
    assert script.names() == ["SIGTERM", "SIGKILL"]
    (term_at, pid, _), (kill_at, _, _) = script.sent
    assert pid == script.children[0].pid
    assert 30.0 <= kill_at - term_at <= 30.5  # not before the grace, and not long after
    assert code == 137 and sup.last_exit_code == 137
    assert sup.restarts == 0 and len(script.commands) == 1  # a stop asked for is never restarted


def test_a_child_that_exits_on_sigterm_gets_no_sigkill(tmp_path: Path) -> None:
    script = Script(Launch(on_term=0, signals=[(5.0, signal.SIGHUP)]))  # the ssh session closed
    _, code = supervise(tmp_path, script, stop_timeout=30.0)
    assert script.names() == ["SIGTERM"]
    assert code == 0  # vLLM's own code: it handled SIGTERM and exited 0


def test_a_second_ctrl_c_sends_sigkill_at_once(tmp_path: Path) -> None:
    script = Script(Launch(on_term=None, signals=[(5.0, signal.SIGINT), (8.0, signal.SIGINT)]))
    _, code = supervise(tmp_path, script, stop_timeout=30.0)
    assert script.names() == ["SIGTERM", "SIGKILL"]
    (term_at, _, _), (kill_at, _, _) = script.sent
    assert 3.0 <= kill_at - term_at < 4.0  # at the second Ctrl+C, not after the 30 s
    assert code == 137


def test_a_second_sigterm_does_not_skip_the_wait(tmp_path: Path) -> None:
    """Only a person's second Ctrl+C forces the stop: systemd or a script repeating SIGTERM waits."""
    script = Script(Launch(on_term=None, signals=[(5.0, signal.SIGTERM), (8.0, signal.SIGTERM)]))
    supervise(tmp_path, script, stop_timeout=30.0)
    (term_at, _, _), (kill_at, _, _) = script.sent
    assert kill_at - term_at >= 30.0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_child_that_closed_its_output_is_still_stopped(tmp_path: Path, signum: int) -> None:
    """A wrapper that sends its output elsewhere (`exec >>file 2>&1`) closes the pipe and runs on: a
    stop still reaches its group, and SIGKILL follows when it ignores SIGTERM."""
    script = Script(Launch(on_term=None, closes_pipe=True, signals=[(5.0, signum)]))
    _, code = supervise(tmp_path, script, stop_timeout=30.0)
    assert script.names() == ["SIGTERM", "SIGKILL"]
    (term_at, _, _), (kill_at, _, _) = script.sent
    assert 30.0 <= kill_at - term_at <= 30.5
    assert code == 137


def test_a_child_that_closed_its_output_is_waited_for(tmp_path: Path) -> None:
    script = Script(Launch(closes_pipe=True, exits_after=20.0, code=3))
    _, code = supervise(tmp_path, script)
    assert code == 3 and script.sent == []


def test_a_tee_that_cannot_start_stops_vllm(tmp_path: Path) -> None:
    """Nothing would drain vLLM's pipe: it is killed, said in one line, and not restarted."""
    def cannot(pipe_fd: int, path: str, echo_fd: int | None) -> tuple[NoTee, int, int]:
        raise OSError(11, "Resource temporarily unavailable")

    script = Script(Launch(on_term=None), Launch())
    sup = Supervisor(["vllm"], log_dir=str(tmp_path / "logs"), name="m", feeder=Feeder(), echo_fd=None,
                     clock=script.clock, popen=script.popen, killpg=script.killpg, tick=0, spawn_tee=cannot,
                     restart="always")
    try:
        code = sup.run()
    finally:
        script.close()
    assert script.names() == ["SIGKILL"] and code == 137 and len(script.commands) == 1


@pytest.mark.parametrize(("returncode", "code"),
                         [(-signal.SIGINT, 130), (-signal.SIGTERM, 143), (3, 3), (0, 0)])
def test_the_exit_code_is_the_childs_or_128_plus_its_signal(tmp_path: Path, returncode: int,
                                                            code: int) -> None:
    script = Script(Launch(exits_after=2.0, code=returncode))
    sup, got = supervise(tmp_path, script)
    assert got == code and sup.last_exit_code == code
    assert script.sent == []  # it ended by itself: nothing was sent


def test_stopped_by_sigterm_the_code_says_which_signal_ended_it(tmp_path: Path) -> None:
    script = Script(Launch(on_term=-signal.SIGTERM, signals=[(1.0, signal.SIGINT)]))
    _, code = supervise(tmp_path, script)
    assert code == 143 and script.names() == ["SIGTERM"]


def test_on_failure_restarts_after_a_backoff_then_exits_with_the_last_code(tmp_path: Path) -> None:
    script = Script(Launch(exits_after=100.0, code=1), Launch(exits_after=100.0, code=1),
                    Launch(exits_after=100.0, code=0))
    sup, code = supervise(tmp_path, script, restart="on-failure", startup_grace=60.0)
    assert code == 0 and sup.restarts == 2 and len(script.commands) == 3
    first, second, third = (child.born for child in script.children)
    assert 101.0 <= second - first <= 103.0  # ran 100 s, then waited 1 s (and read the clock a few times)
    assert 0.9 <= (third - second) - (second - first) <= 1.1  # then 2 s
    assert len(list((tmp_path / "logs").glob("m_*.log"))) == 3  # a launch file each


def test_a_child_failing_during_start_up_is_not_restarted(tmp_path: Path) -> None:
    script = Script(Launch(exits_after=5.0, code=1), Launch(exits_after=5.0, code=1))
    sup, code = supervise(tmp_path, script, restart="always", startup_grace=60.0)
    assert code == 1 and sup.restarts == 0 and len(script.commands) == 1


def test_a_stop_during_the_backoff_ends_the_wait(tmp_path: Path) -> None:
    """vLLM failed; while logwatch waits to start it again, Ctrl+C: logwatch exits, nothing restarts."""
    script = Script(Launch(exits_after=100.0, code=1), Launch())
    sup = Supervisor(["vllm"], log_dir=str(tmp_path / "logs"), name="m", feeder=Feeder(), echo_fd=None,
                     clock=script.clock, popen=script.popen, killpg=script.killpg, tick=0,
                     spawn_tee=no_tee, restart="always", startup_grace=60.0, backoff_max=60.0)
    real_clock = script.clock

    def clock() -> float:  # once its exit code is known, the clock is read only by the backoff wait
        now = real_clock()
        if sup.last_exit_code is not None and not waited:
            waited.append(now)
            signal.raise_signal(signal.SIGINT)
        return now

    waited: list[float] = []

    sup.clock = clock
    try:
        code = sup.run()
    finally:
        script.close()
    assert code == 1 and len(script.commands) == 1 and script.sent == [] and len(waited) == 1


def test_what_still_holds_the_pipe_gets_sigterm_after_1_s_and_sigkill_after_5_s(tmp_path: Path) -> None:
    script = Script(Launch(exits_after=2.0, code=0, holds_pipe=True))
    _, code = supervise(tmp_path, script)
    assert code == 0
    assert script.names() == ["SIGTERM", "SIGKILL"]  # to vLLM's group, and the pipe's other holders
    (term_at, _, _), (kill_at, _, _) = script.sent
    gone = script.children[0].born + 2.0
    assert 1.0 <= term_at - gone <= 1.5 and 5.0 <= kill_at - gone <= 5.5


def test_a_command_that_cannot_start_exits_127_with_no_launch_file(tmp_path: Path) -> None:
    script = Script(Launch(cannot_start="cannot start vllm: no such file or directory"))
    sup, code = supervise(tmp_path, script, restart="always")
    assert code == 127 and sup.log_path is None and script.sent == []
    assert list((tmp_path / "logs").glob("*.log")) == []


# The pure decisions, state in and decision out.

def step_names(step: Any) -> list[tuple[str, str, str]]:
    return [(s.target, s.signum.name, s.why) for s in step.sends]


def test_decide_stop_does_nothing_until_asked() -> None:
    step = decide_stop(Stop(), now=5.0, asked=False, forced=False, running=True, timeout=30.0)
    assert step.sends == () and step.state == Stop() and not step.give_up


def test_decide_stop_sends_sigterm_once_then_waits_out_the_grace() -> None:
    decide: Callable[..., Any] = decide_stop
    step = decide(Stop(), now=5.0, asked=True, forced=False, running=True, timeout=30.0)
    assert step_names(step) == [("group", "SIGTERM", "asked")] and step.wait == 30.0
    step = decide(step.state, now=20.0, asked=True, forced=False, running=True, timeout=30.0)
    assert step.sends == () and step.wait == 15.0
    step = decide(step.state, now=35.0, asked=True, forced=False, running=True, timeout=30.0)
    assert step_names(step) == [("group", "SIGKILL", "timeout")]
    step = decide(step.state, now=40.0, asked=True, forced=False, running=True, timeout=30.0)
    assert step.sends == ()  # one SIGKILL, however long the child takes to die


def test_decide_stop_forced_kills_at_once_even_before_the_first_look() -> None:
    step = decide_stop(Stop(), now=5.0, asked=True, forced=True, running=True, timeout=30.0)
    assert step_names(step) == [("group", "SIGTERM", "asked"), ("group", "SIGKILL", "forced")]


def test_after_exit_backoff_doubles_to_its_cap_and_starts_over_after_a_long_run() -> None:
    kw: dict[str, Any] = {"stopped": False, "started": True, "restart": "always", "startup_grace": 60.0,
                          "backoff_max": 60.0}
    assert after_exit(0, ran_for=100, backoff=32.0, **kw).wait == 32.0
    assert after_exit(0, ran_for=100, backoff=32.0, **kw).backoff == 60.0
    assert after_exit(0, ran_for=601, backoff=60.0, **kw).wait == 1.0  # ran > 10 minutes: a new failure
    assert after_exit(0, ran_for=100, backoff=1.0, **{**kw, "restart": "on-failure"}).action == "exit"
    assert after_exit(9, ran_for=100, backoff=1.0, **{**kw, "stopped": True}).action == "exit"
    assert after_exit(9, ran_for=100, backoff=1.0, **{**kw, "started": False}).action == "gave-up"


def dropping_tee(pipe_fd: int, path: str, echo_fd: int | None) -> tuple[NoTee, int, int]:
    """A tee whose totals say it dropped 5 bytes for the echo and 7 for the parser."""
    Path(path).touch()
    stats_r, stats_w = os.pipe()
    os.write(stats_w, b"[[0, 0, 0, null], [0, 0, 5, null], [0, 0, 7, null]]\n")
    os.close(stats_w)
    return NoTee(), os.dup(pipe_fd), stats_r


def test_the_bytes_a_tee_dropped_add_up_over_launches(tmp_path: Path) -> None:
    """Counters: each launch's drops join those before (the parser's were forgotten at a restart, so
    parse_bytes_dropped went down)."""
    states: list[ChildState] = []
    script = Script(Launch(exits_after=100.0, code=1), Launch(exits_after=100.0, code=0))
    sup, code = supervise(tmp_path, script, restart="on-failure", startup_grace=60.0,
                          spawn_tee=dropping_tee, on_state=states.append)
    assert code == 0 and sup.restarts == 1
    assert (states[-1].stdout_bytes_dropped, states[-1].parse_bytes_dropped) == (10, 14)
