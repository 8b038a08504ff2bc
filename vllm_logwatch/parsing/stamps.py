"""vLLM prints `MM-DD HH:MM:SS` with no year and no zone. Give each stamp its full date.

The year comes from the file name a launch script gives its log (`serve_20261129_192328.log`,
`serve_20261129T192328Z.log`, `vllm-2026-11-29.log`), else from the file's mtime (the time of its
last line), else from `--year` or today. A December -> January step inside one file moves the
year on (a late December line right after it stays in the old year).

The stamps are local wall time without a zone, so at a daylight-saving fall-back one hour is printed
twice: when the wall clock goes back into it (by about the size of the shift), its second pass gets
datetime's `fold=1` and the later offset, and time keeps moving forward. Python subtracts and compares
two datetimes of one zone on their wall clocks (offset and fold ignored): take differences and order
through `utc` (`seconds_between`), or an hour across a fall-back is lost.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta, tzinfo
from operator import attrgetter
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_NAME_PATTERNS = (
    re.compile(r"(?<!\d)(20\d\d)(\d\d)(\d\d)[_T-]?\d{6}Z?(?!\d)"),
    re.compile(r"(?<!\d)(20\d\d)-(\d\d)-(\d\d)(?!\d)"),
    re.compile(r"(?<!\d)(20\d\d)(\d\d)(\d\d)(?!\d)"),
)


def year_hint_from_name(name: str) -> tuple[int, int, int] | None:
    """The (year, month, day) a launch script wrote into a log's file name, if any.

    >>> year_hint_from_name("logs/serve_20261129_192328.log")
    (2026, 11, 29)
    """
    base = os.path.basename(name)
    for pattern in _NAME_PATTERNS:
        m = pattern.search(base)
        if m:
            y, mo, d = (int(g) for g in m.groups())
            if 1 <= mo <= 12 and 1 <= d <= 31:
                return y, mo, d
    return None


def utc(t: datetime) -> datetime:
    """`t` in UTC, to subtract or order by (a naive `t` as it is).

    >>> berlin = ZoneInfo("Europe/Berlin")
    >>> cest = datetime(2026, 10, 25, 2, 30, tzinfo=berlin)
    >>> cet = datetime(2026, 10, 25, 2, 10, fold=1, tzinfo=berlin)  # 20 minutes later, on the second pass
    >>> cest < cet, utc(cest) < utc(cet)
    (False, True)
    """
    return t if t.tzinfo is None else t.astimezone(UTC)


def seconds_between(start: datetime, end: datetime) -> float:
    """`end - start` in seconds, in UTC: across a fall-back's repeated hour, not an hour short.

    >>> berlin = ZoneInfo("Europe/Berlin")
    >>> seconds_between(datetime(2026, 10, 25, 1, 30, tzinfo=berlin),
    ...                 datetime(2026, 10, 25, 3, 30, tzinfo=berlin))
    10800.0
    """
    return (utc(end) - utc(start)).total_seconds()


_MINUTE = [f"{m:02d}:" for m in range(60)]
_SECOND = [f"{s:02d}" for s in range(60)]
_HOUR_OF = attrgetter("year", "month", "day", "hour", "tzinfo", "fold")
_HOURS: dict[tuple[Any, ...], tuple[str, str]] = {}
"""A steady hour (`_HOUR_OF`: one UTC offset all through it) -> its ISO text before and after `MM:SS`."""


def iso_time(t: datetime) -> str:
    """`t.isoformat()`, the text of a whole second's hour (its date, hour and UTC offset) made once for
    all its rows (`parse --csv` and `--jsonl` write one per stats line).

    >>> iso_time(datetime(2026, 11, 29, 19, 24, 5, tzinfo=UTC))
    '2026-11-29T19:24:05+00:00'
    """
    hour = _HOURS.get(_HOUR_OF(t))
    if hour is None or t.microsecond:
        return _new_hour(t)
    return hour[0] + _MINUTE[t.minute] + _SECOND[t.second] + hour[1]


def _new_hour(t: datetime) -> str:
    text = t.isoformat()
    if not t.microsecond and YearClock.steady_hour(t):
        if len(_HOURS) >= 4096:  # months of hours; bounded for a reader that never stops
            _HOURS.clear()
        _HOURS[_HOUR_OF(t)] = (text[:14], text[19:])
    return text


def local_zone() -> tzinfo:
    """This machine's zone, with its rules (a July and a December line get their own offsets): `TZ`
    (`Europe/Berlin`, `:Europe/Berlin`, or a zone file's path), else /etc/localtime; else, when neither
    names a zone, the offset in force now."""
    named = os.environ.get("TZ", "").removeprefix(":")
    # A TZ that names no zone file (a POSIX rule such as CET-1CEST) is the C library's: its offset now.
    for candidate in [named] if named else ["/etc/localtime"]:
        try:
            if candidate.startswith("/"):
                with open(candidate, "rb") as fh:
                    return ZoneInfo.from_file(fh, key=_zone_key(candidate))
            return ZoneInfo(candidate)
        except (OSError, ValueError, ZoneInfoNotFoundError):
            continue
    zone = datetime.now().astimezone().tzinfo
    assert zone is not None
    return zone


def _zone_key(path: str) -> str:
    """`Europe/Berlin` for a link into a zoneinfo folder, else the path (the name a zone shows)."""
    target = os.path.realpath(path)
    _, found, key = target.partition("/zoneinfo/")
    return key if found else path


def resolve_zone(name: str | None) -> tzinfo:
    """`--tz` value -> tzinfo; None means this machine's zone. Raises ValueError on a bad name."""
    if not name:
        return local_zone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        hint = "use an IANA name such as UTC or Europe/Berlin"
        raise ValueError(f"unknown time zone {name!r} ({hint})") from exc


class YearClock:
    """Turns the year-less stamps of one file, in file order, into aware datetimes.

    >>> clock = YearClock(2025, ZoneInfo("UTC"))
    >>> clock.to_datetime("12-31 23:59:59").year, clock.to_datetime("01-01 00:00:09").year
    (2025, 2026)
    """

    def __init__(self, start_year: int, zone: tzinfo) -> None:
        self.year = start_year
        self.zone = zone
        self._last_month = 0
        self._last: datetime | None = None  # the last time given, for the repeated hour of a fall-back
        self._cache: tuple[str, datetime | None] = ("", None)

    @classmethod
    def for_source(
        cls, path: str | None, zone: tzinfo, year: int | None = None, first_stamp: str | None = None
    ) -> YearClock:
        """The clock for one source: `--year`, else the file name, else the file's mtime, else now."""
        if year is not None:
            return cls(year, zone)
        if path:
            hint = year_hint_from_name(path)
            if hint:
                start = hint[0]
                # The name holds the launch time, maybe in another zone than the lines: around New
                # Year the first line can fall in the next (or previous) year.
                first_month = _month_day(first_stamp)[0] if first_stamp else 0
                if hint[1] == 12 and first_month == 1:
                    start += 1
                elif hint[1] == 1 and first_month == 12:
                    start -= 1
                return cls(start, zone)
            try:
                mtime = datetime.fromtimestamp(os.stat(path).st_mtime, zone)
            except OSError:
                mtime = None
            if mtime is not None:
                start = mtime.year
                # The mtime dates the *last* line: a first line later in the year than the mtime was
                # written the year before (the file spans New Year).
                if first_stamp and _month_day(first_stamp) > (mtime.month, mtime.day):
                    start -= 1
                return cls(start, zone)
        return cls(datetime.now(zone).year, zone)

    def to_datetime(self, stamp: str) -> datetime | None:
        """`MM-DD HH:MM:SS` -> datetime, moving the year on at a December -> January step. A stamp
        with its year (`YYYY-MM-DD HH:MM:SS`: vLLM's JSON logging) is taken as it is, and sets the year.

        >>> clock = YearClock(2026, ZoneInfo("UTC"))
        >>> clock.to_datetime("2024-12-31 23:59:59").isoformat()
        '2024-12-31T23:59:59+00:00'
        >>> clock.to_datetime("2025-01-01 00:00:01").year
        2025
        >>> clock.to_datetime("01-01 00:00:02").year  # a year-less stamp after it: the same year
        2025
        """
        if stamp == self._cache[0]:
            return self._cache[1]
        if len(stamp) == 19 and stamp[4] == "-":
            try:
                year = int(stamp[:4])
            except ValueError:
                return None
            self.year, self._last_month = year, 0  # no year to guess: the next stamp starts from it
            dated = self.to_datetime(stamp[5:])
            self._cache = (stamp, dated)
            return dated
        try:
            month = int(stamp[0:2])
            year = self.year
            late = self._last_month == 1 and month == 12
            if late:
                # A line of another process written just before New Year, printed just after it:
                # it belongs to the old year, and the clock stays in the new one.
                year -= 1
            elif month < self._last_month - 1:
                # December -> January (or a longer silence across New Year: November -> January);
                # a step back by one month is a late line, not a new year
                year = self.year = self.year + 1
            value: datetime | None = self._unfold(datetime(
                year, month, int(stamp[3:5]), int(stamp[6:8]), int(stamp[9:11]),
                int(stamp[12:14]), tzinfo=self.zone,
            ))
            if not late:
                self._last_month = month
        except ValueError:
            value = None  # 02-29 in a non-leap year, or a damaged stamp: keep the record, no time
        if value is not None:
            self._last = value
        self._cache = (stamp, value)
        return value

    def _unfold(self, first: datetime) -> datetime:
        """`first` (fold=0), or its second pass (fold=1) when it falls in the repeated hour of a
        fall-back and the first pass would put it back in time by more than half the shift: the
        wall clock went back into that hour (a few seconds back are lines of processes that
        interleave, not a fall-back)."""
        second = first.replace(fold=1)
        earlier, later = first.utcoffset(), second.utcoffset()
        if earlier is None or later is None or earlier <= later or self._last is None:
            return first  # no repeated hour here (or nothing before it)
        shift: timedelta = earlier - later
        if seconds_between(first, self._last) > shift.total_seconds() / 2:
            return second
        return first

    @staticmethod
    def steady_hour(value: datetime) -> bool:
        """Whether every time in the hour of `value` has one offset (no daylight-saving step in it), so
        a caller may reuse the offset of one stamp for the others of that hour."""
        start = value.replace(minute=0, second=0, microsecond=0, fold=0)
        end = start.replace(minute=59, second=59)
        offsets = {t.utcoffset() for t in (start, start.replace(fold=1), end, end.replace(fold=1))}
        return len(offsets) == 1


def _month_day(stamp: str) -> tuple[int, int]:
    if len(stamp) == 19 and stamp[4] == "-":
        stamp = stamp[5:]
    try:
        return int(stamp[0:2]), int(stamp[3:5])
    except ValueError:
        return (0, 0)
