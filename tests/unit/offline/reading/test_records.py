"""The summary's fast lane (`offline/reading/records.py`): its stamps' datetimes."""

from __future__ import annotations

from datetime import timezone


def test_block_times_are_the_stamps_datetimes() -> None:
    """`_Times.many` (an hour's later stamps from its datetime) gives what a call per stamp gives, on
    the daylight-saving days of two zones and in UTC: values, offsets and folds."""
    from zoneinfo import ZoneInfo

    from vllm_logwatch.offline.reading.records import _Times
    from vllm_logwatch.parsing.stamps import YearClock

    days = ("10-25", "11-01", "03-08", "03-29")
    stamps = b"".join(f"{day} {h:02d}:{m:02d}:{s:02d}".encode()
                      for day in days for h in range(24) for m in range(0, 60, 7) for s in range(0, 60, 13))
    stamps += b"11-01 01:61:00" + b"11-01 01:05:00"  # a stamp no datetime has, then its hour again
    n = len(stamps) // 14
    for zone in (timezone.utc, ZoneInfo("America/New_York"), ZoneInfo("Europe/Berlin")):
        clocks = [YearClock.for_source(None, zone, 2026, first_stamp="10-25 00:00:00") for _ in range(2)]
        many = _Times(lambda _s, c=clocks[0]: c).many(stamps, 0, n)  # type: ignore[misc]
        one = _Times(lambda _s, c=clocks[1]: c)  # type: ignore[misc]
        expected = [one(stamps[i * 14:(i + 1) * 14]) for i in range(n)]
        assert [(t, t and t.isoformat(), t and t.fold) for t in many] == \
            [(t, t and t.isoformat(), t and t.fold) for t in expected]
