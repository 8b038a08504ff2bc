"""Year-less vLLM stamps to full times: the year from the file name, the mtime or --year; New Year
rollover; --tz."""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from vllm_logwatch.cli import main
from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.parsing.stamps import YearClock, iso_time, resolve_zone, year_hint_from_name

UTC = ZoneInfo("UTC")
NY = ZoneInfo("America/New_York")


def stats_line(stamp: str, running: int = 1) -> str:
    return (
        f"(APIServer pid=1) INFO {stamp} [loggers.py:335] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
        f"Avg generation throughput: 2.0 tokens/s, Running: {running} reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 1.0%\n"
    )


def set_mtime(path: Path, when: datetime) -> None:
    ts = when.timestamp()
    os.utime(path, (ts, ts))


def times(path: Path, *extra: str) -> list[str]:
    out = io.StringIO()
    args = [str(path), *extra]
    run_parse(args[:1], fmt="jsonl", tz=_opt(args, "--tz") or "UTC", year=_year(args), out=out)
    return [json.loads(line)["time"] for line in out.getvalue().splitlines()]


def _opt(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def _year(args: list[str]) -> int | None:
    value = _opt(args, "--year")
    return int(value) if value else None


# --- the file name ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("serve_20261129_192328.log", (2026, 11, 29)),
        ("logs/qwen_20270105_000001.log", (2027, 1, 5)),
        ("serve_20261129T192328Z.log", (2026, 11, 29)),
        ("/var/log/vllm-2026-11-29.log", (2026, 11, 29)),
        ("vllm-2025-01-31-restart.log.gz", (2025, 1, 31)),
        ("20261129.log", (2026, 11, 29)),
        ("serve.log", None),
        ("/logs/2026-11-29/serve.log", None),  # only the base name counts
        ("serve_20261329_000000.log", None),  # month 13
        ("serve_20261100_000000.log", None),  # day 0
        ("port8000_pid123456.log", None),
    ],
)
def test_year_hint_from_name(name: str, expected: tuple[int, int, int] | None) -> None:
    assert year_hint_from_name(name) == expected


def test_year_from_name_beats_mtime(tmp_path: Path) -> None:
    log = tmp_path / "serve_20241129_120000.log"
    log.write_text(stats_line("11-29 12:00:10"))
    set_mtime(log, datetime(2026, 3, 1, tzinfo=UTC))
    assert times(log) == ["2024-11-29T12:00:10+00:00"]


def test_name_in_december_first_line_in_january(tmp_path: Path) -> None:
    """The launch script named the file in its zone; vLLM logs in UTC, already in the new year."""
    clock = YearClock.for_source("serve_20261231_235900.log", UTC, first_stamp="01-01 04:59:10")
    assert clock.to_datetime("01-01 04:59:10") == datetime(2027, 1, 1, 4, 59, 10, tzinfo=UTC)
    clock = YearClock.for_source("serve_20270101_003000.log", UTC, first_stamp="12-31 19:30:00")
    assert clock.to_datetime("12-31 19:30:00") == datetime(2026, 12, 31, 19, 30, tzinfo=UTC)
    # a day's difference in the same month is not New Year
    clock = YearClock.for_source("serve_20261201_020000.log", UTC, first_stamp="11-30 21:00:00")
    assert clock.year == 2026


# --- the mtime ----------------------------------------------------------------------------------


def test_year_from_mtime(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(stats_line("06-15 08:00:00") + stats_line("06-15 08:00:10"))
    set_mtime(log, datetime(2024, 6, 15, 9, 0, tzinfo=UTC))
    assert times(log) == ["2024-06-15T08:00:00+00:00", "2024-06-15T08:00:10+00:00"]


def test_mtime_in_january_first_line_in_december(tmp_path: Path) -> None:
    """The mtime dates the last line: a file from December into January starts the year before."""
    log = tmp_path / "vllm.log"
    log.write_text(stats_line("12-31 23:59:50") + stats_line("01-01 00:00:00") + stats_line("01-02 10:00:00"))
    set_mtime(log, datetime(2027, 1, 2, 10, 0, 5, tzinfo=UTC))
    assert times(log) == [
        "2026-12-31T23:59:50+00:00", "2027-01-01T00:00:00+00:00", "2027-01-02T10:00:00+00:00",
    ]


def test_mtime_later_than_first_line_same_year(tmp_path: Path) -> None:
    log = tmp_path / "copied.log"
    log.write_text(stats_line("03-01 10:00:00"))
    set_mtime(log, datetime(2025, 3, 5, tzinfo=UTC))
    assert times(log) == ["2025-03-01T10:00:00+00:00"]


def test_year_override_beats_name_and_mtime(tmp_path: Path) -> None:
    log = tmp_path / "serve_20261129_120000.log"
    log.write_text(stats_line("11-29 12:00:10"))
    set_mtime(log, datetime(2025, 1, 1, tzinfo=UTC))
    assert times(log, "--year", "2023") == ["2023-11-29T12:00:10+00:00"]


def test_year_override_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(stats_line("12-31 23:59:59") + stats_line("01-01 00:00:09"))
    assert main(["parse", "--jsonl", "--year", "2030", "--tz", "UTC", str(log)]) == 0
    got = [json.loads(line)["time"] for line in capsys.readouterr().out.splitlines()]
    assert got == ["2030-12-31T23:59:59+00:00", "2031-01-01T00:00:09+00:00"]


def test_no_path_uses_this_year() -> None:
    clock = YearClock.for_source(None, UTC, first_stamp="01-01 00:00:00")
    assert clock.year == datetime.now(UTC).year
    missing = YearClock.for_source("/nonexistent/dir/vllm.log", UTC)
    assert missing.year == datetime.now(UTC).year


# --- rollover inside a file -----------------------------------------------------------------------


def test_december_to_january_rollover() -> None:
    clock = YearClock(2026, UTC)
    stamps = ["12-31 23:59:50", "12-31 23:59:59", "01-01 00:00:09", "01-01 00:00:19", "02-01 00:00:00"]
    assert [d.year for d in map(clock.to_datetime, stamps) if d] == [2026, 2026, 2027, 2027, 2027]


def test_late_december_line_after_new_year_stays_in_old_year() -> None:
    """Processes interleave: a line stamped 23:59:59 may be printed after one stamped 00:00:00."""
    clock = YearClock(2026, UTC)
    stamps = ["12-31 23:59:58", "01-01 00:00:00", "12-31 23:59:59", "01-01 00:00:01", "01-01 00:00:02"]
    got = [clock.to_datetime(s) for s in stamps]
    assert [d.isoformat() if d else None for d in got] == [
        "2026-12-31T23:59:58+00:00", "2027-01-01T00:00:00+00:00", "2026-12-31T23:59:59+00:00",
        "2027-01-01T00:00:01+00:00", "2027-01-01T00:00:02+00:00",
    ]


def test_silent_december_still_rolls_over() -> None:
    clock = YearClock(2026, UTC)
    assert [d.year for d in map(clock.to_datetime, ["11-28 10:00:00", "01-05 10:00:00"]) if d] == [2026, 2027]


def test_one_month_step_back_is_not_a_new_year() -> None:
    clock = YearClock(2026, UTC)
    got = [clock.to_datetime(s) for s in ("04-01 00:00:00", "03-31 23:59:59", "04-01 00:00:01")]
    assert [d.year for d in got if d] == [2026, 2026, 2026]


def test_bad_stamps_give_no_time() -> None:
    clock = YearClock(2027, UTC)
    assert clock.to_datetime("02-29 10:00:00") is None  # not a leap year
    assert clock.to_datetime("13-01 10:00:00") is None
    assert clock.to_datetime("xx-yy zz") is None
    assert YearClock(2028, UTC).to_datetime("02-29 10:00:00") == datetime(2028, 2, 29, 10, tzinfo=UTC)


# --- zones --------------------------------------------------------------------------------------


def test_zone_offsets_in_iso_output(tmp_path: Path) -> None:
    log = tmp_path / "serve_20261129_120000.log"
    log.write_text(stats_line("11-29 19:23:55") + stats_line("07-05 11:29:01"))
    assert times(log, "--tz", "UTC") == ["2026-11-29T19:23:55+00:00", "2027-07-05T11:29:01+00:00"]
    log2 = tmp_path / "serve_20260705_120000.log"
    log2.write_text(stats_line("07-05 11:29:01") + stats_line("11-29 19:23:55"))
    assert times(log2, "--tz", "America/New_York") == [
        "2026-07-05T11:29:01-04:00", "2026-11-29T19:23:55-05:00",
    ]


def test_same_stamp_different_instants_by_zone() -> None:
    utc = YearClock(2026, UTC).to_datetime("11-29 19:23:55")
    ny = YearClock(2026, NY).to_datetime("11-29 19:23:55")
    assert utc is not None and ny is not None
    assert (ny - utc).total_seconds() == 5 * 3600
    assert ny.astimezone(UTC).hour == 0


def test_resolve_zone() -> None:
    assert resolve_zone("UTC") == UTC
    assert resolve_zone("America/New_York") == NY
    assert resolve_zone(None).utcoffset(datetime(2026, 1, 1)) is not None  # this machine's zone
    for bad in ("Not/AZone", "../etc/passwd", "", "UTC+99"):
        if not bad:
            continue
        with pytest.raises(ValueError, match="unknown time zone") as info:
            resolve_zone(bad)
        assert "\n" not in str(info.value)


def test_bad_zone_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(stats_line("11-29 19:23:55"))
    assert main(["parse", "--tz", "Not/AZone", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Not/AZone" in err and "Traceback" not in err


# --- daylight saving time -----------------------------------------------------------------------

BERLIN = ZoneInfo("Europe/Berlin")
# 2026-11-01 01:00-02:00 comes twice in New York (EDT -04:00, then EST -05:00); 2026-10-25 02:00-03:00
# twice in Berlin (CEST +02:00, then CET +01:00).
FALL_BACK = {
    "America/New_York": ("11-01", "00", "01", "02", ["-04:00", "-05:00"]),
    "Europe/Berlin": ("10-25", "01", "02", "03", ["+02:00", "+01:00"]),
}


def fall_back_stamps(zone: str) -> tuple[list[str], list[str]]:
    """Stamps every 10 min through the repeated hour, the wall clock going back once; their offsets."""
    day, before, twice, after = FALL_BACK[zone][:4]
    summer, winter = FALL_BACK[zone][4]
    stamps = [f"{day} {before}:50:00"] + [f"{day} {twice}:{m}0:00" for m in range(6)]
    offsets = [summer] * 7
    stamps += [f"{day} {twice}:{m}0:00" for m in range(6)] + [f"{day} {after}:00:00"]
    offsets += [winter] * 7
    return stamps, offsets


@pytest.mark.parametrize("zone", sorted(FALL_BACK))
def test_the_repeated_hour_of_a_fall_back_gets_its_second_offset(zone: str) -> None:
    stamps, offsets = fall_back_stamps(zone)
    clock = YearClock(2026, ZoneInfo(zone))
    got = [clock.to_datetime(s) for s in stamps]
    assert [d.isoformat()[19:] if d else None for d in got] == offsets
    instants = [d.timestamp() for d in got if d]
    assert all(b - a == 600 for a, b in itertools.pairwise(instants)), instants


def test_lines_slightly_out_of_order_in_the_first_pass_stay_in_it() -> None:
    """Processes interleave their lines by a few seconds: that is not the clock going back an hour."""
    clock = YearClock(2026, NY)
    got = [clock.to_datetime(s) for s in ("11-01 01:30:05", "11-01 01:30:01", "11-01 01:59:59")]
    assert [d.isoformat()[19:] if d else None for d in got] == ["-04:00"] * 3


def test_a_log_silent_through_the_first_pass_starts_in_it() -> None:
    """Nothing tells the two passes apart then: the first one, as datetime's fold=0 does."""
    clock = YearClock(2026, NY)
    got = [clock.to_datetime(s) for s in ("11-01 00:20:00", "11-01 01:20:00", "11-01 02:20:00")]
    assert [d.isoformat()[19:] if d else None for d in got] == ["-04:00", "-04:00", "-05:00"]


def test_a_late_line_after_the_repeated_hour_is_in_its_second_pass() -> None:
    clock = YearClock(2026, NY)
    got = [clock.to_datetime(s) for s in ("11-01 01:59:00", "11-01 01:10:00", "11-01 02:00:01",
                                          "11-01 01:59:58")]
    assert [d.isoformat()[19:] if d else None for d in got] == ["-04:00", "-05:00", "-05:00", "-05:00"]


@pytest.mark.parametrize("zone", sorted(FALL_BACK))
def test_csv_jsonl_and_openmetrics_times_move_forward_through_a_fall_back(
        zone: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stamps, offsets = fall_back_stamps(zone)
    log = tmp_path / "serve_20261020_000000.log"
    log.write_text("".join(stats_line(s, i) for i, s in enumerate(stamps)))
    assert main(["parse", "--jsonl", "--tz", zone, str(log)]) == 0
    jsonl_times = [json.loads(line)["time"] for line in capsys.readouterr().out.splitlines()]
    assert [t[19:] for t in jsonl_times] == offsets
    csv_out = tmp_path / "out.csv"
    with open(csv_out, "w") as out:  # the fast CSV path (it keeps each hour's offset)
        command = [sys.executable, "-m", "vllm_logwatch", "parse", "--csv", "--tz", zone, str(log)]
        code = subprocess.run(command, stdout=out, stderr=subprocess.PIPE, text=True, timeout=60).returncode
    assert code == 0
    assert [row.split(",")[0] for row in csv_out.read_text().splitlines()[1:]] == jsonl_times
    assert main(["parse", "--openmetrics", "--tz", zone, str(log)]) == 0
    running = [line.split() for line in capsys.readouterr().out.splitlines()
               if line.startswith("vllm_logwatch_requests_running{")]
    assert [int(float(fields[1])) for fields in running] == list(range(len(stamps)))
    seconds = [float(fields[2]) for fields in running]
    assert all(b - a == 600 for a, b in itertools.pairwise(seconds)), seconds


@pytest.mark.parametrize("tz_env", ["Europe/Berlin", ":Europe/Berlin"])
def test_without_tz_the_machines_zone_gives_each_season_its_offset(
    tz_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --tz: the machine's zone (TZ, else /etc/localtime) with its rules, not today's offset for
    every line: a July line of a Berlin machine is +02:00, a December one +01:00."""
    monkeypatch.setenv("TZ", tz_env)
    zone = resolve_zone(None)
    clock = YearClock(2026, zone)
    assert clock.to_datetime("07-05 11:29:01").utcoffset().total_seconds() == 7200  # type: ignore[union-attr]
    assert clock.to_datetime("12-01 11:29:01").utcoffset().total_seconds() == 3600  # type: ignore[union-attr]


def test_without_tz_or_a_readable_zone_the_current_offset_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Not/A_Zone")
    zone = resolve_zone(None)
    assert zone.utcoffset(datetime.now()) is not None


def test_vllm_json_logging_keeps_its_year_whatever_the_file_says(tmp_path: Path) -> None:
    """vLLM's JSON formatter writes `asctime` with its year: a 2024 log in a file of a later year (its
    mtime, its name) is 2024, New Year included; no year is guessed."""
    log = tmp_path / "serve_20261129T192328Z.log"
    body = ("Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
            "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%")
    stamps = ["2024-12-31 23:59:50,001", "2025-01-01 00:00:00,002", "2025-01-01 00:00:10,003"]
    records = ({"asctime": s, "levelname": "INFO", "name": "vllm", "message": body} for s in stamps)
    log.write_text("".join(json.dumps(record) + "\n" for record in records))
    out = io.StringIO()
    run_parse([str(log)], fmt="csv", tz="UTC", out=out)
    times = [row.split(",")[0] for row in out.getvalue().splitlines()[1:]]
    assert times == ["2024-12-31T23:59:50+00:00", "2025-01-01T00:00:00+00:00", "2025-01-01T00:00:10+00:00"]


@pytest.mark.parametrize("zone", [UTC, ZoneInfo("Europe/Berlin"), ZoneInfo("Australia/Lord_Howe"), None])
def test_iso_time_is_isoformat_across_daylight_saving_steps(zone: ZoneInfo | None) -> None:
    """The hour's text made once: the same text as `isoformat` for each second of the hours around a
    spring-forward and a fall-back (Lord Howe's half-hour step), either fold, a fraction of a second,
    and a time without a zone."""
    for start in (datetime(2026, 3, 29, 0), datetime(2026, 10, 25, 0), datetime(2026, 4, 5, 0),
                  datetime(2026, 10, 4, 0)):
        for k in range(0, 4 * 3600, 61):
            for fold in (0, 1):
                t = start + timedelta(seconds=k, microseconds=250 * (k % 3 == 0))
                t = t.replace(tzinfo=zone, fold=fold)
                assert iso_time(t) == t.isoformat()
