"""The live record stream (`--records`): `parse --jsonl`'s stats records, byte for byte, to a file that
rotates or to stdout; a sink that stops reading costs the reader nothing (dropped, counted, on
/metrics); a failed write is counted, never a traceback; run mode's feeder hands its records over."""

from __future__ import annotations

import io
import os
import threading
from datetime import UTC
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from support import TESTS

from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.errors import UsageError
from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.live import records
from vllm_logwatch.live.feed import LineFeeder
from vllm_logwatch.live.ingest import LaunchReader
from vllm_logwatch.live.records import RecordStream, open_records
from vllm_logwatch.parsing.assemble import Assembler
from vllm_logwatch.parsing.events import EngineStats, Event
from vllm_logwatch.parsing.stamps import YearClock

REAL_CPU_LOG = next((TESTS / "data" / "real-vllm-cpu").glob("serve_*.log"))


def real_events() -> list[Event]:
    """The real log's events as watch reads them (`LaunchReader`, blocks of 64 KiB)."""
    blocks: list[list[Event]] = []
    reader = LaunchReader(ExporterMetrics(clock=lambda: 1000.0),
                          Assembler(str(REAL_CPU_LOG), YearClock(2026, UTC)), records=blocks.append)
    data, first = REAL_CPU_LOG.read_bytes(), 1
    while data:
        cut = data.rfind(b"\n", 0, 65536) + 1 or len(data)
        reader.read(data[:cut], first)
        first += data[:cut].count(b"\n")
        data = data[cut:]
    reader.flush()
    return [event for block in blocks for event in block]


def jsonl() -> str:
    out = io.StringIO()
    run_parse([str(REAL_CPU_LOG)], fmt="jsonl", tz="UTC", out=out)
    return out.getvalue()


def counters(stream: RecordStream) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(stream)
    return {s.name: s.value for f in registry.collect() for s in f.samples if s.name.endswith("_total")}


def test_the_records_are_parse_jsonl_and_no_log_text(tmp_path: Path) -> None:
    stream = RecordStream(str(tmp_path / "records.jsonl"))
    stream.start()
    events = real_events()
    assert len(events) > 78 and sum(isinstance(e, EngineStats) for e in events) == 78  # others: left out
    for at in range(0, len(events), 50):
        stream.put(events[at:at + 50])
    stream.close()
    assert (tmp_path / "records.jsonl").read_text(encoding="utf-8") == jsonl()
    assert counters(stream) == {"vllm_logwatch_records_written_total": 78.0,
                                "vllm_logwatch_records_dropped_total": 0.0}


def test_the_file_rotates_and_keeps_every_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "records.jsonl"
    monkeypatch.setattr(records, "ROTATE_BYTES", 8192)
    stream = RecordStream(str(path))
    stream.start()
    for event in real_events():
        stream.put([event])
    stream.close()
    parts = [tmp_path / f"records.jsonl.{n}" for n in (3, 2, 1)] + [path]
    assert all(p.stat().st_size <= 8192 for p in parts)
    assert not (tmp_path / "records.jsonl.4").exists()  # three kept: the oldest records are gone
    kept = "".join(p.read_text(encoding="utf-8") for p in parts)
    assert jsonl().endswith(kept) and kept.count("\n") > 30


class StalledSink(io.StringIO):
    """A reader that stops reading: every write waits until `go` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def write(self, text: str) -> int:
        self.go.wait(30)
        return super().write(text)


def test_a_sink_that_stops_reading_costs_the_reader_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = StalledSink()
    monkeypatch.setattr("sys.stdout", sink)
    monkeypatch.setattr(records, "QUEUED", 20)
    stream = RecordStream("-")
    stream.start()
    events = real_events()
    for event in events:  # never waits: 78 stats records into a queue of 20 and a stalled writer
        stream.put([event])
    written, dropped = stream.counts()
    assert written == 0 and 78 - 20 - 1 <= dropped <= 78 - 20  # (the writer holds one batch)
    assert counters(stream)["vllm_logwatch_records_dropped_total"] == dropped
    sink.go.set()
    stream.close()
    assert stream.counts() == (78 - dropped, dropped) and sink.getvalue().count("\n") == 78 - dropped


def test_a_failed_write_is_counted_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    stream = RecordStream("/dev/full")
    stream.start()
    stream.put(real_events())
    stream.close()
    assert stream.counts() == (0, 78)
    assert "Traceback" not in capsys.readouterr().err


def test_run_mode_hands_its_records_over(tmp_path: Path) -> None:
    stream = RecordStream(str(tmp_path / "records.jsonl"))
    stream.start()
    feeder = LineFeeder(ExporterMetrics(clock=lambda: 1000.0), UTC, records=stream.put)
    feeder.relaunch(str(REAL_CPU_LOG))
    feeder.put(REAL_CPU_LOG.read_bytes())
    feeder.start()
    feeder.close(timeout=30)
    stream.close()
    got = (tmp_path / "records.jsonl").read_text(encoding="utf-8").splitlines()
    want = jsonl().splitlines()
    assert len(got) == len(want) == 78  # run mode numbers no lines: the rest is the same
    assert [g.replace('"line": null, ', "") for g in got] == [
        w.replace(w[w.index('"line": '):w.index(", ", w.index('"line": ')) + 2], "") for w in want]


def test_standard_output_is_refused_in_run_mode_and_a_bad_path_said() -> None:
    with pytest.raises(UsageError, match="standard output carries vLLM's output"):
        open_records("-", stdout=False)
    with pytest.raises(UsageError, match=r"--records /nonexistent/x\.jsonl: cannot open it"):
        open_records("/nonexistent/x.jsonl")
    assert open_records(None) is None


def test_a_fifo_or_device_is_refused_at_once(tmp_path: Path) -> None:
    """Opening a FIFO nobody reads would hang before vLLM starts; a device cannot rotate."""
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/null"):
        with pytest.raises(UsageError, match="not a regular file"):
            open_records(path)


def family(path: Path) -> str:
    """The records file and its rotated parts, oldest first, as one text."""
    parts = [path.with_name(f"{path.name}.{n}") for n in (3, 2, 1)] + [path]
    return "".join(p.read_text(encoding="utf-8") for p in parts if p.exists())


@pytest.mark.parametrize("behind", [0, 6])
def test_a_restart_at_the_state_files_mark_writes_each_record_once(
    tmp_path: Path, behind: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A state file saved after record 30 (with its mark) and the process killed after record 60, the
    file rotated in between: the restart reads records 31 ... again and writes only those after 60. With
    the writer `behind` at the mark (records 25-30 queued, then written), the same."""
    path, stats = tmp_path / "records.jsonl", [e for e in real_events() if isinstance(e, EngineStats)]
    monkeypatch.setattr(records, "ROTATE_BYTES", 8192)
    first = RecordStream(str(path))
    for at in range(0, 30, 3):
        first.put(stats[at:at + 3])
    assert first.mark(first.handed()) == {**first.mark(0), "behind": 30}  # nothing written: not started
    first.start()
    first.wait_written(30 - behind, 5)
    mark = first.mark(30 - behind)
    assert mark is not None and mark["behind"] == 0
    mark["behind"] = behind  # as if saved while the writer still had the last `behind` to write
    first.put(stats[30:60])
    first.close()
    assert path.with_name("records.jsonl.1").exists(), "rotated after the mark"
    with path.open("a", encoding="utf-8") as f:
        f.write('{"kind": "stats", "ti')  # and killed in the middle of a write
    second = RecordStream(str(path), resume=mark)
    second.start()
    for at in range(30, len(stats), 7):  # the lines after the state file's position, read again
        second.put(stats[at:at + 7])
    second.close()
    assert family(path) == jsonl() and second.counts() == (78 - 60, 0)


def test_records_never_written_before_a_kill_are_counted_as_dropped_at_the_restart(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    first = RecordStream(str(path))
    first.put(real_events())  # never written: the writer not started, as if killed at once
    mark = first.mark(first.handed())
    assert mark is not None and mark["behind"] == 78
    first.close()
    second, other, stdout = (RecordStream(str(path), resume=mark),
                             RecordStream(str(tmp_path / "other.jsonl"), resume=mark), RecordStream("-"))
    assert second.counts() == (0, 78)
    assert other.counts() == (0, 0)  # not the file the mark names
    assert stdout.mark(0) is None  # standard output: no mark, no promise across a restart
    for stream in (second, other, stdout):
        stream.close()
