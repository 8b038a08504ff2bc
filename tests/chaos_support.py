"""What the chaos tests share (tests/integration/test_chaos.py, test_chaos_sources.py): numbered vLLM
stats lines, a writer that appends them and rotates its file as loggers and container runtimes do, and
the exactly-once ledger of one source across a chain of `logwatch watch` processes.

Line `n` (1, 2, ...) says `Running: n reqs`, so a scrape shows the last line counted (the engine's
`vllm_logwatch_requests_running`, L) next to how many lines this process counted
(`vllm_logwatch_stats_lines_total`, C). After a process ends, its state file names a file and an
offset: the line ending there is P, the last line that process had on disk (test_chaos.py's docstring
says why `L - C == P(i-1)` and `L <= P(i)` mean 0 lost and 0 counted twice).
"""

from __future__ import annotations

import itertools
import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path

E0 = frozenset({("engine", "0"), ("model_name", "unknown")})
LINE = ("(APIServer pid=12) INFO {stamp} [loggers.py:259] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
        "Avg generation throughput: 1.0 tokens/s, Running: {n} reqs, Waiting: 0 reqs, GPU KV cache usage: "
        "4.8%, Prefix cache hit rate: 0.0%\n")
RUNNING = re.compile(rb"Running: (\d+) reqs")

Envelope = Callable[[int, str], bytes]
"""What the file holds for a vLLM line: (its second of the day, the line) -> the bytes written."""


def plain(second: int, line: str) -> bytes:
    """vLLM's own log: the line as it is."""
    return line.encode()


def hms(second: int) -> str:
    return f"{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}"


class Writer:
    """vLLM's log: numbered stats lines with increasing stamps (one second apart, from 05:00:00), each
    in its `envelope`, and the rotations done to it."""

    def __init__(self, path: Path, rng: random.Random, envelope: Envelope = plain) -> None:
        self.path, self.rng, self.envelope = path, rng, envelope
        self.n = 0  # lines written
        self.first = 1  # the number of the current file's first line
        self.rotated = 0
        self.f = open(path, "ab", buffering=0)  # noqa: SIM115 - kept open like a logger's handle
        self.events: dict[str, int] = {"rename": 0, "copytruncate": 0, "delete": 0}

    def line(self) -> bytes:
        self.n += 1
        second = 5 * 3600 + self.n
        return self.envelope(second, LINE.format(stamp=f"07-05 {hms(second)}", n=self.n))

    def lines(self, count: int) -> bytes:
        return b"".join(self.line() for _ in range(count))

    def append(self, count: int) -> None:
        self.f.write(self.lines(count))

    def _aside(self) -> Path:
        self.rotated += 1
        return self.path.with_name(f"{self.path.name}.{self.rotated}")

    def rename(self, aside: Path | None = None) -> None:
        """logrotate's create (kubelet's and Docker's rotation too): rename (to `aside`, else `.1`,
        `.2`, ...); the writer still writes to its open file (the late write); then it reopens the
        path, a new file."""
        os.rename(self.path, aside or self._aside())
        self.append(self.rng.randint(1, 3))
        self._reopen()
        self.events["rename"] += 1

    def delete(self) -> None:
        os.unlink(self.path)
        self.append(self.rng.randint(0, 2))  # into the deleted file: the follower still holds it open
        self._reopen()
        self.events["delete"] += 1

    def copytruncate(self) -> None:
        shutil.copyfile(self.path, self._aside())
        os.truncate(self.path, 0)  # the handle is O_APPEND: the next line goes to offset 0
        self.first = self.n + 1
        # Often refill at once past the old size: only the changed first bytes tell the follower.
        self.append(self.rng.choice([1, 5, 40, 120]))
        self.events["copytruncate"] += 1

    def _reopen(self) -> None:
        self.f.close()
        self.f = open(self.path, "ab", buffering=0)  # noqa: SIM115
        self.first = self.n + 1


def line_before(path: Path, offset: int, first: int) -> int:
    """P: the number of the line that ends at `offset` of the file at `path`, whose first line is
    `first` (`first - 1` at offset 0)."""
    if offset == 0:
        return first - 1
    data = path.read_bytes()[:offset]
    assert data.endswith(b"\n"), "a state names the end of a line"
    match = RUNNING.search(data[data.rfind(b"\n", 0, len(data) - 1) + 1:])
    assert match is not None
    return int(match.group(1))


Scrape = tuple[float, float, float]
"""What one scrape showed of a source: (C, L, its log lines)."""


class Ledger:
    """One source across a chain of processes: each one's scrapes checked against the P of the one
    before and its own, and the ranges of lines each counted."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.before = 0  # P of the previous process
        self.counted: list[tuple[int, int]] = []  # per process: the lines it counted, first and last

    def process(self, seen: list[Scrape], after: int, end: str) -> None:
        """A process ended (`end`: kill, term, last) with state file P == `after`; `seen`: its scrapes."""
        for count, last, log_lines in seen:
            assert log_lines == count, f"{self.name}: every line is a stats line"
            if count:
                assert last - count == self.before, (
                    f"{self.name} {end}: a scrape counted {count} lines up to {last}, but the previous "
                    f"process had {self.before} on disk")
            assert last <= after, f"{self.name} {end}: a scrape showed line {last}, the state file {after}"
        self.counted.append((self.before + 1, after))
        self.before = after

    def complete(self, written: int) -> None:
        """After the last process: the ranges tile 1 .. `written`, 0 lost, 0 counted twice."""
        assert self.before == written, f"{self.name}: the last process had {self.before} of {written} lines"
        assert sum(last - first + 1 for first, last in self.counted) == written, (self.name, self.counted)
        for (_, last), (first, _) in itertools.pairwise(self.counted):
            assert first == last + 1, (self.name, self.counted)
