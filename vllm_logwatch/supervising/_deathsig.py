"""`python -m vllm_logwatch.supervising._deathsig PPID ERRFD -- COMMAND ...`: exec COMMAND so that it
gets SIGTERM if the `logwatch run` that started it dies, even by SIGKILL (Linux PR_SET_PDEATHSIG
survives exec).

A separate process step instead of `preexec_fn`, which is unsafe in a process with threads. ERRFD is
the write end of a pipe to the supervisor, closed by a successful exec: when COMMAND cannot start, the
reason goes there (and from there to logwatch's stderr), not into vLLM's output and its log file.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    """Set the death signal, check the parent is still there, then become the command."""
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m vllm_logwatch.supervising._deathsig EXPECTED_PPID ERRFD -- COMMAND ...",
              file=sys.stderr)
        return 2
    expected_parent, errfd, command = int(argv[0]), int(argv[1]), argv[3:]
    os.set_inheritable(errfd, False)  # closed by the exec: the supervisor's read ends with nothing
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the child may outlive a killed logwatch, as with any launch script
    if os.getppid() != expected_parent:
        return 143  # the parent died before the death signal was armed
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        reason = f"cannot start {command[0]}: {(exc.strerror or str(exc)).lower()}"
        try:
            os.write(errfd, reason.encode("utf-8", "replace")[:4096])
        except OSError:
            print(f"logwatch run: {reason}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
