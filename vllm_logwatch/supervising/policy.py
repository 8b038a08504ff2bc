"""The supervisor's decisions, as pure functions: what it knows goes in, what to do comes out.

No clock, no signal, no process here: `Supervisor` reads its clock and the child's state, asks
`decide_stop` which signals to send to whom and how long it may wait before asking again, and asks
`after_exit` whether to launch vLLM again and after how long. `tests/unit/supervising/` drives both
through the supervisor's seams (`popen`, `clock`, `killpg`) with scripted fake children and a fake
clock; docs/run.md says what a user sees.
"""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass, field, replace
from typing import Literal

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
