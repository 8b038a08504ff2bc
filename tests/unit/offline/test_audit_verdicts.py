"""`logwatch audit`'s windows and verdicts on made-up stats records: a run whose window the log does not
cover is `absent` while another run is audited; idle lines are `idle`; a launch of another model is
named; the lines of one time from several engines are one sample."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from vllm_logwatch.cli import main
from vllm_logwatch.errors import InputError
from vllm_logwatch.offline.audit.measures import (
    Audited,
    find_windows,
    judge,
    measure,
    observability_partial,
    render_audit,
)
from vllm_logwatch.offline.audit.results import Run
from vllm_logwatch.offline.reading.launches import Launch
from vllm_logwatch.parsing.events import EngineStats, IterationStats

T0 = datetime(2026, 12, 2, 2, 0, 0, tzinfo=UTC)


def run(start: int, end: int, conc: int = 4, model: str = "m", itl_ms: float | None = None) -> Run:
    return Run("r.json", "vllm bench serve", model, T0 + timedelta(seconds=start),
               T0 + timedelta(seconds=end), conc, None, 100.0, 10, 0, itl_ms)


def line(second: int, running: int, waiting: int = 0, engine: int = 0, gen: float = 50.0) -> EngineStats:
    return EngineStats(time=T0 + timedelta(seconds=second), engine=engine, running=running, waiting=waiting,
                       generation_throughput=gen, cpu_kv_cache_usage_pct=1.0)


def launch(model: str, mns: int | None = 8) -> Launch:
    return Launch(0, "serve.log", 1, model_name=model, args={"max_num_seqs": mns})


def test_absent_idle_and_ok_side_by_side() -> None:
    lm = launch("m")
    records = [(lm, line(s, 4)) for s in range(0, 10)] + [(lm, line(s, 0, gen=0.0)) for s in range(20, 30)]
    windows, _span = find_windows([run(0, 9), run(20, 29), run(100, 110)], records)
    kinds = [[v.kind for v in judge(w, measure(w))] for w in windows]
    assert kinds == [["ok"], ["idle"], ["absent"]]


def test_engines_of_one_time_add_up_and_another_model_is_named() -> None:
    lm, other = launch("m"), launch("other")
    records = [(lm, line(s, 2, engine=e)) for s in range(0, 5) for e in (0, 1)]
    m = measure(find_windows([run(0, 4)], records)[0][0])
    assert (m.lines, m.samples, m.running_median) == (10, 5, 4.0)
    [w], _ = find_windows([run(0, 4)], [(other, line(s, 2)) for s in range(0, 5)])
    [verdict] = judge(w, measure(w))
    assert verdict.kind == "another model" and "other (5 lines)" in verdict.why


@pytest.mark.parametrize(("itl_ms", "differs"),
                         [(80.0, False), (70.0, False), (69.0, True), (94.0, False), (95.0, True)])
def test_server_time_between_tokens_against_the_client_s_itl(itl_ms: float, differs: bool) -> None:
    """4 running at 50 tok/s: a stream's token every 80 ms (Little's law); more than 15% off the client's
    mean ITL is a verdict with both numbers."""
    lm = launch("m")
    records = [(lm, line(s, 4)) for s in range(0, 10)]
    [w], _ = find_windows([run(0, 9, itl_ms=itl_ms)], records)
    m = measure(w)
    assert m.server_tbt_ms == pytest.approx(80.0)
    found = [v for v in judge(w, m) if v.kind == "time between tokens differs"]
    assert bool(found) == differs
    if found:
        assert "80.00 ms" in found[0].why and f"ITL {itl_ms:.2f} ms" in found[0].why


def test_with_iteration_lines_the_time_between_tokens_is_their_cadence() -> None:
    """Running 4 at 50 tok/s (80 ms by the Running count), but the iteration lines between the stats lines
    decode 2 streams a step: the cadence gives 40 ms, as `summary` does; the audit used the Running count
    even where the log had iteration lines, and did not say which it used."""
    lm = launch("m")
    records: list[tuple[Launch, EngineStats | IterationStats]] = []
    for s in range(0, 10):
        records += [(lm, IterationStats(time=T0 + timedelta(seconds=s), engine=0, iteration=10 * s + k,
                                        context_requests=0, context_tokens=0, generation_requests=2,
                                        generation_tokens=2, elapsed_ms=4.0)) for k in range(5)]
        records.append((lm, line(s, 4)))
    [w], _ = find_windows([run(0, 9, itl_ms=80.0)], records)
    m = measure(w)
    assert (m.lines, m.server_tbt_ms, m.server_tbt_from) == (10, pytest.approx(40.0), "iteration lines")
    [found] = [v for v in judge(w, m) if v.kind == "time between tokens differs"]
    assert "the log's 40.00 ms (the iteration lines' cadence)" in found.why
    assert "  40.00 steps  " in render_audit([Audited(w, m, judge(w, m))], "text")  # the table says which
    [w], _ = find_windows([run(0, 9, itl_ms=80.0)], [r for r in records if isinstance(r[1], EngineStats)])
    assert (measure(w).server_tbt_ms, measure(w).server_tbt_from) == (pytest.approx(80.0), "stats lines")


def test_a_clock_offset_moves_the_window() -> None:
    records = [(launch("m"), line(s, 4)) for s in range(3600, 3610)]
    [w], _ = find_windows([run(0, 9)], records, timedelta(hours=1))
    assert len(w.lines) == 10


@pytest.mark.parametrize("offset", ["nan", "inf", "-inf", "1e300", "-1e18", "1e10"])
def test_a_clock_offset_out_of_range_is_refused(offset: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "r.json", "--log", "serve.log", f"--clock-offset={offset}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"logwatch audit: --clock-offset {float(offset):g}: not a number of seconds "
                          "between -1e+09 and 1e+09\n")
    assert err.count("\n") == 1


def test_a_window_moved_past_the_last_date_is_refused() -> None:
    late = Run("late.json", "vllm bench serve", "m", datetime(9999, 12, 31, 23, 0, tzinfo=UTC),
               datetime(9999, 12, 31, 23, 30, tzinfo=UTC), 4, None, None, 1, 0)
    with pytest.raises(InputError, match=r"^late\.json: its times moved by --clock-offset 7200 are not "):
        find_windows([late], [], timedelta(hours=2))


def test_a_fall_back_s_repeated_hour_is_told_apart() -> None:
    """Berlin, 2026-10-25: 02:30 to 02:50 CEST, then the clocks go back and 02:00 to 02:59 comes again
    (CET). A run of the first pass has only its own lines (two times of one zone compare on their wall
    clocks), and the lines at 02:30 CEST and 02:30 CET are two samples, not one."""
    berlin = ZoneInfo("Europe/Berlin")

    def at(minute: int, fold: int) -> datetime:
        return datetime(2026, 10, 25, 2, minute, fold=fold, tzinfo=berlin)

    lm = launch("m")
    records = [(lm, replace(line(0, 4), time=at(m, fold))) for fold in (0, 1) for m in (30, 40)]
    first_pass = Run("r.json", "vllm bench serve", "m", at(30, 0), at(50, 0), 4, None, 100.0, 10, 0)
    [w], span = find_windows([first_pass], records)
    assert [e.time for e in w.lines] == [at(30, 0), at(40, 0)]
    assert (span.first, span.last) == (at(30, 0), at(40, 1))
    both = Run("r.json", "vllm bench serve", "m", at(30, 0), at(50, 1), 4, None, 100.0, 10, 0)
    [w], _ = find_windows([both], records)
    assert measure(w).samples == 4
    [component] = observability_partial(w)["results"]["observability"]["components"]
    assert len(component["time_series"]["num_requests_running"]["series"]) == 4  # its samples too


def test_real_runs_of_three_clients_against_the_server_log(capsys: pytest.CaptureFixture[str]) -> None:
    """tests/data/tbt/steps: vllm bench serve at 2, 4 and 8 streams (--max-num-seqs 4), then AIPerf at 3:
    each run's real concurrency, the cap and queueing verdicts, the log's time between tokens beside the
    client's, and AIPerf's requests joined to the log's request lines by X-Request-ID."""
    data = Path(__file__).resolve().parents[2] / "data" / "tbt" / "steps"
    files = [str(data / f"bench_c{n}.json") for n in (2, 4, 8)]
    files.append(str(data / "aiperf" / "profile_export_aiperf.json"))
    assert main(["audit", *files, "--log", str(data / "serve.log.gz"), "--tz", "UTC", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["client"], r["concurrency"], r["server"]["running_median"]) for r in runs] == [
        ("vllm bench serve", 2, 2.0), ("vllm bench serve", 4, 4.0), ("vllm bench serve", 8, 4.0),
        ("aiperf", 3, 3.0)]
    kinds = [{v["kind"] for v in r["verdicts"]} for r in runs]
    assert kinds[0] == {"ok"} and {"capped by max-num-seqs", "queueing"} <= kinds[2]
    assert all(r["server"]["server_tbt_ms"] and r["client_itl_ms"] for r in runs)
    # The server's time between tokens is summary's: the iteration lines' cadence (7.17, 9.51 and
    # 11.08 ms against the bench's 7.12, 9.63 and 10.97; the Running count gave 7.55, 11.25 and 10.54).
    assert {r["server"]["server_tbt_from"] for r in runs} == {"iteration lines"}
    for r in runs[:3]:
        assert r["server"]["server_tbt_ms"] == pytest.approx(r["client_itl_ms"], rel=0.02), r["concurrency"]
    # AIPerf's short requests: wall time per step counts what passes outside the steps (docs/audit.md).
    assert runs[3]["server"]["server_tbt_ms"] == pytest.approx(13.03, abs=0.01)
    assert "time between tokens differs" in kinds[3]
    joined = runs[3]["requests_joined"]
    assert joined["requests"] == 48 and joined["joined"] / joined["requests"] >= 0.95


@pytest.mark.parametrize("value", ["lots", [8], 1.5, float("inf"), True, None])
def test_a_max_num_seqs_that_is_no_whole_number_is_not_known(value: object) -> None:
    """A damaged or odd `non-default args:` line (`'max_num_seqs': 'lots'`) gives no cap, and the start-up
    facts' cap stands; it was `int()`ed and ended the audit with a traceback."""
    from vllm_logwatch.offline.audit.measures import max_num_seqs

    launch = Launch(0, "serve.log", 1, args={"max_num_seqs": value})
    assert max_num_seqs(launch) is None
    launch.facts["max_num_seqs"] = 16
    assert max_num_seqs(launch) == 16
