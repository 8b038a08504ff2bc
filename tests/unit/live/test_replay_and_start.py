"""What the status says of a log that is not being written now (issue 25, points 2 and 3): `watch` started
at the end of a file shows its launch's start-up facts and says older lines were skipped; a backlog
replayed with --from-start is aged by its own stamps, and a launch that shut down or whose engine died
says so. Real files, a real Follower and Pipeline, stepped in this thread."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from support import TESTS, ManualWaker

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.following.follower import Follower
from vllm_logwatch.following.many import ManyFollower
from vllm_logwatch.live import pipeline as pipeline_module
from vllm_logwatch.live.pipeline import Pipeline
from vllm_logwatch.web.page import render

pytestmark = pytest.mark.timeout(30)

REAL_LOG = TESTS / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
LINES = REAL_LOG.read_bytes().split(b"\n")[:-1]
SHUTDOWN = next(i for i, line in enumerate(LINES) if b"shutdown triggered" in line)
LAST_STATS = datetime(2026, 11, 29, 19, 26, 29, tzinfo=UTC)  # the log's last stats line


def pipeline(target: Path, *, from_start: bool, state_file: str | None = None) -> Pipeline:
    follower = Follower(str(target), from_start=from_start, waker=ManualWaker(), state_file=state_file)
    return Pipeline(follower, ExporterMetrics(), zone=UTC)


def read_all(pipe: Pipeline) -> None:
    while pipe.step():
        pass


def test_watch_at_the_end_shows_the_launchs_start_up_facts_and_says_what_it_skipped(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(REAL_LOG.read_bytes())
    pipe = pipeline(log, from_start=False)
    read_all(pipe)
    status = pipe.status()
    assert status["server"]["vllm_version"] == "0.32.0"
    assert status["server"]["served_model_name"] == "tiny-llama"
    assert status["server"]["kv_cache_tokens"] == 524288
    assert status["skipped_bytes"] == log.stat().st_size
    # Nothing of the old lines is counted: no stats line, no message, no problem, no launch.
    assert status["engines"] == {} and status["launches"] == 0
    assert status["counters"]["log_lines"] == 0 and status["counters"]["log_messages"]["ERROR"] == 0
    assert not any(status["counters"]["problems"].values())
    html = render(status)
    assert "tiny-llama" in html and "0.32.0" in html
    assert "bytes of older lines were skipped" in html and "--from-start" in html


def test_start_up_facts_come_from_the_current_launch_only(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    second = REAL_LOG.read_bytes().replace(b"0.32.0", b"0.33.1")
    log.write_bytes(REAL_LOG.read_bytes() + second.replace(b"tiny-llama", b"other-model"))
    read_all(pipe := pipeline(log, from_start=False))
    server = pipe.status()["server"]
    assert (server["vllm_version"], server["served_model_name"]) == ("0.33.1", "other-model")


@pytest.mark.parametrize("chunk", [7, 4096])
def test_the_last_banner_is_found_across_chunk_boundaries(tmp_path: Path, chunk: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "serve.log"
    second = REAL_LOG.read_bytes().replace(b"0.32.0", b"0.33.1")
    log.write_bytes(REAL_LOG.read_bytes() + second)
    monkeypatch.setattr(pipeline_module, "_CHUNK", chunk)
    assert pipeline_module.launch_facts(str(log), log.stat().st_size)["vllm_version"] == "0.33.1"


def test_facts_read_before_the_start_are_the_facts_the_exporter_keeps(tmp_path: Path) -> None:
    """A runtime line (an EPLB rearrangement, a fault-tolerance status) before where `watch` started gave
    a server fact (`eplb_rearrange_seconds`, `ft_status`) the same line read after the start did not: the
    exporter counts such lines, it keeps no fact of them. Both now take `ServerInfo.facts("server")`."""
    log = tmp_path / "serve.log"
    data = TESTS / "data" / "vllm-0.34"
    runtime = [line for line in (data / "runtime.log").read_bytes().split(b"\n") if b"Async EPLB" in line]
    ft = [line for line in (data / "serve_20261120_100000.log").read_bytes().split(b"\n")
          if b"status -> HEALTHY" in line]
    log.write_bytes(b"\n".join([*LINES, *runtime, *ft]) + b"\n")
    facts = pipeline_module.launch_facts(str(log), log.stat().st_size)
    assert facts["vllm_version"] == "0.32.0"
    assert not {"eplb_rearrange_seconds", "eplb_async", "ft_status", "ft_engine"} & facts.keys()


def test_a_replayed_log_that_shut_down_reads_ended_aged_by_its_own_stamps(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(REAL_LOG.read_bytes())
    pipe = pipeline(log, from_start=True)
    read_all(pipe)
    engine = pipe.status()["engines"]["0"]
    assert engine["state"] == "ended"
    assert engine["age_seconds"] == pytest.approx(time.time() - LAST_STATS.timestamp(), abs=5)
    assert "ended" in render(pipe.status())


def test_a_log_ending_in_engine_dead_reads_dead(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    dead = (b"(APIServer pid=29214) ERROR 11-29 19:26:31 [async_llm.py:906] vllm.v1.engine.exceptions."
            b"EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.")
    log.write_bytes(b"\n".join([*LINES[:SHUTDOWN], dead]) + b"\n")
    read_all(pipe := pipeline(log, from_start=True))
    assert pipe.status()["engines"]["0"]["state"] == "dead"


def test_lines_read_live_after_the_backlog_are_timed_by_the_clock(tmp_path: Path) -> None:
    """Once caught up, a line is aged from when it was read (a live line stamped in another zone must
    not look hours old)."""
    log = tmp_path / "serve.log"
    log.write_bytes(b"\n".join(LINES[:SHUTDOWN]) + b"\n")
    read_all(pipe := pipeline(log, from_start=True))
    assert pipe.status()["engines"]["0"]["age_seconds"] > 86400
    stats = next(line for line in reversed(LINES[:SHUTDOWN]) if b"Avg prompt throughput" in line)
    with open(log, "ab") as out:  # its stamp, other numbers (the same line again is a copy, left out)
        out.write(stats.replace(b"Waiting: 0 reqs", b"Waiting: 1 reqs") + b"\n")
    read_all(pipe)
    assert pipe.status()["engines"]["0"]["age_seconds"] < 60


# -- many sources: the page of a folder of two launch scripts, or of a kubelet tree ------------------

QWEN = TESTS / "data" / "compare" / "mns16-prefix" / "serve_20261201T180244Z.log"
LLAMA = TESTS / "data" / "compare" / "small-model" / "serve_20261201T180747Z.log"
LORA = TESTS / "data" / "lora" / "serve.cri.log"  # a pod's container log with one stats line


def many(target: Path, *, from_start: bool = True, layout: str = "auto") -> Pipeline:
    follower = ManyFollower(str(target), layout=layout, from_start=from_start, waker=ManualWaker())
    return Pipeline(follower, ExporterMetrics(), zone=UTC,
                    metrics_for=lambda labels: ExporterMetrics(const_labels=labels))


def scripts_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "qwen_20261201T180244Z.log").write_bytes(QWEN.read_bytes())
    (folder / "llama_20261201T180747Z.log").write_bytes(LLAMA.read_bytes())
    return folder


def one_file(path: Path, *, from_start: bool = True) -> dict[str, Any]:
    read_all(pipe := pipeline(path, from_start=from_start))
    return pipe.status()


def lines_of(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def test_many_sources_show_each_sources_facts_and_counters_and_their_sums(tmp_path: Path) -> None:
    folder = scripts_folder(tmp_path)
    read_all(pipe := many(folder))
    status = pipe.status()
    by_name = {s["labels"]["script"]: s for s in status["sources"]}
    for name, path in (("qwen", QWEN), ("llama", LLAMA)):
        alone = one_file(path)
        source = by_name[name]
        assert source["server"]["vllm_version"] == alone["server"]["vllm_version"] == "0.32.0"
        assert source["server"]["served_model_name"] == alone["server"]["served_model_name"]
        assert source["counters"]["log_lines"] == alone["counters"]["log_lines"] == lines_of(path)
        assert source["launches"] == alone["launches"] == 1
    counters = status["counters"]  # the exporter's own block: over every source
    assert counters["log_lines"] == lines_of(QWEN) + lines_of(LLAMA)
    assert counters["log_messages"]["WARNING"] == sum(s["counters"]["log_messages"]["WARNING"]
                                                      for s in status["sources"])
    assert counters["http_requests"] > 0 and status["launches"] == 2
    html = render(status)
    for source in status["sources"]:
        assert source["server"]["served_model_name"] in html
    assert f'{lines_of(QWEN) + lines_of(LLAMA):,}' in html


def test_many_sources_age_and_state_their_engines_as_one_file_does(tmp_path: Path) -> None:
    folder = scripts_folder(tmp_path)
    pods = tmp_path / "pods" / "llm_vllm-b-7c1e_0f3a" / "vllm"
    pods.mkdir(parents=True)
    (pods / "0.log").write_bytes(LORA.read_bytes())
    for target, layout, files in ((folder, "auto", {"qwen": QWEN, "llama": LLAMA}),
                                  (tmp_path / "pods", "pods", {"llm/vllm-b-7c1e/vllm": LORA})):
        read_all(pipe := many(target, layout=layout))
        engines = pipe.status()["engines"]
        for name, path in files.items():
            alone = one_file(path)["engines"]["0"]
            engine = engines[f"{name} #0"]
            assert engine["state"] == alone["state"], name
            assert engine["age_seconds"] == pytest.approx(alone["age_seconds"], abs=5), name
            assert engine["age_seconds"] > 86400  # from the log's stamps, days ago
    assert one_file(LORA)["engines"]["0"]["state"] == "stalled"  # one line with a request running


def test_many_sources_started_at_their_end_show_each_launchs_facts(tmp_path: Path) -> None:
    folder = scripts_folder(tmp_path)
    read_all(pipe := many(folder, from_start=False))
    status = pipe.status()
    by_name = {s["labels"]["script"]: s for s in status["sources"]}
    assert by_name["llama"]["server"] == one_file(LLAMA, from_start=False)["server"] != {}
    assert by_name["qwen"]["server"]["vllm_version"] == "0.32.0"
    assert status["counters"]["log_lines"] == 0 and status["launches"] == 0


def test_many_sources_serve_no_series_without_their_labels(tmp_path: Path) -> None:
    """The watch's own series of a many-source watch are its errors (listing, state file) and the count
    of sources; everything else is a source's, labelled with it (no unlabelled zeros beside them)."""
    read_all(pipe := many(scripts_folder(tmp_path)))
    registry = CollectorRegistry()
    pipe.register(registry)
    unlabelled = {sample.name for family in registry.collect() for sample in family.samples
                  if "script" not in sample.labels}
    assert unlabelled <= {"vllm_logwatch_read_errors_total", "vllm_logwatch_state_errors_total",
                          "vllm_logwatch_sources", "vllm_logwatch_http_invalid_requests_total"}, unlabelled
    assert "vllm_logwatch_sources" in unlabelled


# -- an EngineDeadError of a planned stop is not an engine's death ------------------------------------

DEAD = LINES[next(i for i, line in enumerate(LINES) if b"EngineDeadError" in line)]


def problems(pipe: Pipeline) -> dict[str, int]:
    return {tag: n for tag, n in pipe.status()["counters"]["problems"].items() if n}


def test_an_engine_dead_error_after_the_shutdown_began_is_counted_apart(tmp_path: Path) -> None:
    """vLLM 0.32 stopped on purpose logs `shutdown triggered`, then an EngineDeadError as its engine core
    is stopped: a planned stop, not the engine's death (which fires the critical alert)."""
    log = tmp_path / "serve.log"
    log.write_bytes(REAL_LOG.read_bytes())
    read_all(pipe := pipeline(log, from_start=True))
    assert problems(pipe) == {"engine_dead_at_shutdown": 1}
    assert pipe.status()["engines"]["0"]["state"] == "ended"


def test_an_engine_dead_error_read_after_the_shutdown_line_in_a_later_block_is_counted_apart(
        tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(b"\n".join(LINES[:SHUTDOWN + 1]) + b"\n")
    read_all(pipe := pipeline(log, from_start=True))
    with open(log, "ab") as out:
        out.write(DEAD + b"\n")
    read_all(pipe)
    assert problems(pipe) == {"engine_dead_at_shutdown": 1}


def test_an_engine_dead_error_before_the_shutdown_or_in_the_next_launch_is_an_engines_death(
        tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    crash = b"\n".join([*LINES[:SHUTDOWN], DEAD, *LINES[SHUTDOWN:]]) + b"\n"  # died, then shut down
    log.write_bytes(crash + b"\n".join([*LINES[:SHUTDOWN], DEAD]) + b"\n")  # and the next launch died
    read_all(pipe := pipeline(log, from_start=True))
    assert problems(pipe) == {"engine_dead": 2, "engine_dead_at_shutdown": 1}
    assert pipe.status()["engines"]["0"]["state"] == "dead"
