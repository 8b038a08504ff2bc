"""Chaos: a real `logwatch watch --state-file` while a writer appends numbered vLLM stats lines under
rename rotation (with a late write to the renamed file), copytruncate, delete and recreate, and the
exporter is stopped by SIGTERM or killed by SIGKILL within 0.3 s of a line becoming visible on
/metrics, then started again; several seeds. What is measured, exactly:

* Line `n` (1, 2, ...) says `Running: n reqs`, so a scrape shows the last line counted
  (`vllm_logwatch_requests_running`, L) and how many this process counted (`stats_lines_total`, C; and
  `log_lines_total`, the same here: every line is a stats line).
* After each process ends, its state file names a file and an offset; the line ending there is P, the
  last line that process had on disk. P of the first process's predecessor is 0.
* Every scrape of process i with C > 0 must show L - C == P(i-1): it counted exactly the lines after
  those its predecessor had on disk (none lost at the restart, none counted again), in order, without a
  gap; and L <= P(i): nothing a scrape showed was missing from its state file when it died (so no
  restart can count a line a scrape showed again). The last process, stopped once every line is
  visible, has P == the number of lines written. Process i counted the lines P(i-1)+1 .. P(i); these
  ranges tile 1 .. N: 0 lost, 0 counted twice.

The writer keeps every line visible under the documented rules. A file is renamed or deleted only once
the follower has opened it (lines may still be unread in it: the follower drains its descriptor when it
sees the new file; a file created and gone between two polls is never seen by anyone), and gets its
late lines before the new file appears. The exporter is only stopped or killed once it has reached the
current file (a restart cannot find a renamed file). Copytruncate happens once every line so far is
visible: a line written after the tailer's last read and before the truncate is gone from the file,
which no tailer can see (at logrotate's daily run, the file's tail has long been read). While the
exporter is down, lines are appended (and read at the restart) but files are not rotated.
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from chaos_support import E0, Ledger, Writer, line_before
from support import WatchProcess, poll_until, run_watch

from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.following.source import SAVE_INTERVAL

pytestmark = pytest.mark.timeout(60)


class Scrapes:
    """Every scrape of one process: (C, L, log lines)."""

    def __init__(self, watch: WatchProcess) -> None:
        self.watch = watch
        self.seen: list[tuple[float, float, float]] = []

    def scrape(self) -> tuple[float, float]:
        samples = self.watch.samples()
        count = samples.get(("vllm_logwatch_stats_lines_total", E0), 0.0)
        last = samples.get(("vllm_logwatch_requests_running", E0), 0.0)
        self.seen.append((count, last, samples[("vllm_logwatch_log_lines_total", frozenset())]))
        return count, last

    def wait_visible(self, n: int) -> None:
        poll_until(lambda: self.scrape()[1] == n, 15, f"line {n} on /metrics")

    def wait_opened(self, path: Path) -> None:
        ino = path.stat().st_ino
        poll_until(lambda: self.watch.status()["follower"]["inode"] == ino, 15, f"{path} opened")


def on_disk(state: Path, writer: Writer) -> int:
    """P: the number of the line just before the offset the state file names (in the current file)."""
    saved = json.loads(state.read_text())
    assert saved["ino"] == writer.path.stat().st_ino, "stopped only once the current file was reached"
    return line_before(writer.path, saved["offset"], writer.first)


def one_process(log: Path, args: tuple[str, ...], writer: Writer, end: str, writes: list[tuple[int, float]],
                tmp_path: Path) -> tuple[list[tuple[float, float, float]], int]:
    """Start `logwatch watch`, write and rotate while it runs, end it as `end` says (kill, term, last);
    its scrapes and P (the last line its state file has)."""
    rng = writer.rng
    with run_watch(log, *args, log_dir=tmp_path) as watch:
        scrapes = Scrapes(watch)
        for _ in range(rng.randint(2, 5)):
            writer.append(rng.randint(1, 30))
            if rng.random() < 0.5:
                scrapes.scrape()
            fault = rng.choice(["none", "rename", "copytruncate", "delete"])
            if fault == "copytruncate":
                scrapes.wait_visible(writer.n)  # see the module docstring
            elif fault != "none":
                scrapes.wait_opened(writer.path)  # see the module docstring
            if fault != "none":
                getattr(writer, fault)()
        writer.append(rng.randint(1, 5))
        scrapes.wait_visible(writer.n)  # the current file reached: a stop may come now
        if end == "last":
            assert watch.stop(signal.SIGTERM) == 0
        else:
            window = time.monotonic() + rng.uniform(0.0, 0.3)
            while time.monotonic() < window:  # lines keep coming until the signal
                writer.append(rng.randint(1, 3))
                scrapes.scrape()
            status = watch.status()["pipeline"]
            lived = time.time() - status["started_at"]
            assert status["state_writes"] <= lived / SAVE_INTERVAL + 1, "state writes at least 0.1 s apart"
            writes.append((status["state_writes"], lived))
            if end == "kill":
                watch.proc.send_signal(signal.SIGKILL)
                assert watch.proc.wait(10) == -signal.SIGKILL
            else:
                assert watch.stop(signal.SIGTERM) == 0
    return scrapes.seen, on_disk(log.parent / "state" / "logwatch.json", writer)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_line_lost_and_none_counted_twice_under_rotation_restarts_and_kill_9(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    log, state = tmp_path / "serve.log", tmp_path / "state" / "logwatch.json"
    state.parent.mkdir()
    writer = Writer(log, rng)
    args = ("--from-start", "--state-file", str(state), "--poll-interval", "0.2")
    ends = ["kill"] + [rng.choice(["kill", "kill", "term"]) for _ in range(2)] + ["last"]
    ledger = Ledger()
    writes: list[tuple[int, float]] = []  # per process killed or stopped early: state writes, seconds up
    started = time.monotonic()
    try:
        for end in ends:
            seen, after = one_process(log, args, writer, end, writes, tmp_path)
            ledger.process(seen, after, end)
            if end != "last":
                writer.append(rng.randint(0, 5))  # while it is down
    finally:
        writer.f.close()
    elapsed = time.monotonic() - started
    ledger.complete(writer.n)
    up = sum(t for _, t in writes)
    print(f"seed {seed}: {writer.n} lines, {writer.events}, ends {ends}, counted {ledger.counted}, "
          f"{sum(w for w, _ in writes)} state writes in {up:.1f} s up, {elapsed:.1f} s")


PROMPT = "ZQXJ-PLANTED-PROMPT"
REQUEST = ("(APIServer pid=12) INFO 07-05 05:00:00 [logger.py:43] Received request cmpl-{n}: prompt: "
           "'{secret} {n}', params: SamplingParams(n=1, temperature=0.7), prompt_token_ids: [1, 2, 3], "
           "lora_request: None.\n")


def records_of(path: Path) -> list[str]:
    """The stats records of a JSON-lines file, each without its `file` (the watch names a renamed file
    by the name it had when opened), as sortable text."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        del record["file"]
        out.append(json.dumps(record, sort_keys=True))
    return out


def test_the_record_stream_holds_every_stats_record_once_across_rotation_and_kill_9(tmp_path: Path) -> None:
    """`watch --records FILE --state-file STATE` killed with SIGKILL twice (just after a burst's last
    record reached the file, and while lines are still coming), restarted on the same state file, under
    rename rotation: the records file holds `parse --jsonl`'s stats records of the same bytes (every
    file, rotated ones too), none twice, none missing, and no prompt text."""
    rng = random.Random(5)
    log, state, records = tmp_path / "serve.log", tmp_path / "state.json", tmp_path / "records.jsonl"
    writer = Writer(log, rng)
    args = ("--from-start", "--tz", "UTC", "--state-file", str(state), "--records", str(records),
            "--poll-interval", "0.05")

    def burst(count: int) -> None:
        for _ in range(count):
            writer.append(1)
            writer.f.write(REQUEST.format(n=writer.n, secret=PROMPT).encode())

    def written(n: int) -> bool:
        return records.exists() and f'"running": {n},' in records.read_text(encoding="utf-8")

    try:
        for end in ("kill", "kill-flowing", "term"):
            with run_watch(log, *args, log_dir=tmp_path) as watch:
                burst(rng.randint(20, 60))
                poll_until(lambda: watch.status()["follower"]["inode"] == writer.path.stat().st_ino, 15,
                           "the current file opened")
                writer.rename()  # with a late write into the renamed file
                burst(rng.randint(20, 60))
                poll_until(lambda: written(writer.n), 15, f"line {writer.n}'s record")
                if end == "term":
                    assert watch.stop(signal.SIGTERM) == 0
                    continue
                if end == "kill-flowing":
                    window = time.monotonic() + rng.uniform(0.05, 0.3)
                    while time.monotonic() < window:  # lines keep coming until the signal
                        burst(rng.randint(1, 5))
                watch.proc.send_signal(signal.SIGKILL)  # "kill": the moment the burst's last record is in
                assert watch.proc.wait(10) == -signal.SIGKILL
            burst(rng.randint(0, 5))  # while it is down
    finally:
        writer.f.close()
    files = [str(log.with_name(f"{log.name}.{k}")) for k in range(1, writer.rotated + 1)] + [str(log)]
    with open(tmp_path / "parsed.jsonl", "w", encoding="utf-8") as out:
        run_parse(files, fmt="jsonl", tz="UTC", out=out)
    want, got = records_of(tmp_path / "parsed.jsonl"), records_of(records)
    assert len(want) == writer.n
    twice = [r for r, k in Counter(got).items() if k > 1]
    missing = Counter(want) - Counter(got)
    assert not twice and not missing, f"{len(twice)} records twice, {sum(missing.values())} missing"
    assert sorted(got) == sorted(want)
    assert PROMPT not in records.read_text(encoding="utf-8")
