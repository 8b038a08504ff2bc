"""Offline: read log files and write their records as CSV or JSON lines (`logwatch parse`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import tzinfo
from functools import partial

from ...errors import InputError
from ...parsing.assemble import Assembler
from ...parsing.events import Event, ServerInfo, Unparsed
from ...parsing.needles import NO_STATS_NEEDLES, VARIANT_NEEDLES, WANTS
from ...parsing.stamps import YearClock
from .containers import enveloped_events
from .inputs import Source, input_error, open_source, read_errors
from .route import sniff
from .stream import scan_lines

__all__ = ["ParseResult", "iter_source_events", "no_stats_hint", "repeats_note"]


@dataclass
class ParseResult:
    """What a parse run found, for the exit code and the no-stats hint."""

    files: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    stats_disabled: bool = False


def iter_source_events(
    source: Source, kind: str, zone: tzinfo, year: int | None,
    extra_needles: tuple[bytes, ...] = (), *, repeats: bool = False,
) -> Iterator[Event]:
    """Every event of one source wanted for `kind`, in file order. Raises `InputError`.

    `extra_needles`: for `stats` and `spec`, also parse the lines holding one of these byte strings
    (the offline summary asks for the start-up banner, to see restarts inside one file). `repeats`: a
    stats line written twice is counted once (`Assembler`), for the readers that count lines.
    """
    from ...parsing.line import parse_line  # its patterns are compiled when first needed

    path = None if source.is_stdin else source.path
    assembler = Assembler(source.name, partial(_clock_for_source, path, zone, year), repeats=repeats)
    with open_source(source, progress=True) as raw:
        want = WANTS.get(kind)
        try:
            if (fmt := sniff(raw)) != "plain":  # a container log: its envelopes, its stamps (containers.py);
                # the followers as needles too: a line after a stats line may be in the next block
                wanted = None if want is None else want.needles + want.followers + extra_needles
                yield from enveloped_events(raw, fmt, assembler, wanted)
            else:
                needles = None if want is None else want.needles + extra_needles
                followers = () if want is None else want.followers
                for number, line in scan_lines(raw, needles, followers=followers):
                    event = parse_line(line.decode("utf-8", "replace"))
                    if event is not None:
                        yield from assembler.feed(event, number)
        except read_errors as exc:  # a corrupt .gz shows at its first bytes, or later
            raise input_error(exc, source) from None
    yield from assembler.flush()


def repeats_note(count: int) -> str:
    """What the readers that count lines say on stderr of the stats lines they counted once.

    >>> repeats_note(2)[:60]
    '2 stats lines written twice (the same stamp, process, engine'
    """
    lines = "1 stats line" if count == 1 else f"{count} stats lines"
    return (f"{lines} written twice (the same stamp, process, engine and numbers) counted once: does the "
            "logging configuration have two handlers?")


def _clock_for_source(path: str | None, zone: tzinfo, year: int | None, first_stamp: str) -> YearClock:
    return YearClock.for_source(path, zone, year, first_stamp=first_stamp)


def no_rows_hint(sources: list[Source], kind: str, otherwise: str) -> str:
    """The one-line `NoStatsError` message of `parse --kind iterations` or `requests` without rows: the
    lines of the kind that could not be read, if any (a second, cheap look at the files), else
    `otherwise`."""
    from ...parsing.line import parse_line

    n, what, unreadable = len(sources), kind[:-1], 0
    first: tuple[str, int] | None = None
    for source in sources:
        if source.is_stream:  # read once already
            continue
        try:
            with open_source(source) as stream:
                for number, raw in scan_lines(stream, WANTS[kind].needles, followers=()):
                    event = parse_line(raw.decode("utf-8", "replace"))
                    if isinstance(event, Unparsed) and event.what == what:
                        unreadable += 1
                        first = first or (source.name, number)
        except (InputError, OSError, EOFError, ValueError):
            continue
    head = f"no {kind} records in {n} file{'s' if n != 1 else ''}"
    if first is None:
        return f"{head} ({otherwise})"
    return f"{head}: {_unreadable(unreadable, what, first)}"


def _unreadable(count: int, what: str, first: tuple[str, int]) -> str:
    """What the lines that could not be read were, the verb agreeing with their count.

    >>> _unreadable(1, "stats", ("a.log", 3))[:45]
    '1 line looks like stats lines but could not b'
    """
    lines = "1 line looks" if count == 1 else f"{count} lines look"
    return (f"{lines} like {what} lines but could not be read (first: {first[0]}, line {first[1]}): a vLLM "
            "format this version does not know, or damaged lines")


def no_stats_hint(sources: list[Source], stats_disabled: bool = False) -> str:
    """The one-line `NoStatsError` message for inputs without stats lines (summary, plot, backfill)."""
    return _no_stats_hint(sources, ParseResult(stats_disabled=stats_disabled))


def _no_stats_hint(sources: list[Source], result: ParseResult) -> str:
    """Why there were no stats lines, as far as the files tell (a second, cheap look at them)."""
    from ...parsing.line import parse_line

    n = len(sources)
    what = f"no stats lines in {n} file{'s' if n != 1 else ''}"
    disabled = result.stats_disabled
    requests = unreadable = 0
    first: tuple[str, int] | None = None  # the first unreadable stats line: its file and number
    needles = NO_STATS_NEEDLES + WANTS["stats"].needles + VARIANT_NEEDLES
    for source in sources:
        if source.is_stream:  # read once already: a second open would wait for a new writer
            continue
        try:
            with open_source(source) as stream:
                for number, raw in scan_lines(stream, needles, followers=()):
                    event = parse_line(raw.decode("utf-8", "replace"))
                    if isinstance(event, ServerInfo) and event.stats_logging_disabled:
                        disabled = True
                    elif isinstance(event, Unparsed) and event.what == "stats":
                        unreadable += 1
                        first = first or (source.name, number)
                    elif event is not None and event.kind == "access":
                        requests += 1
        except (InputError, OSError, EOFError, ValueError):
            continue
    if unreadable and first is not None:
        return f"{what} that could be read: {_unreadable(unreadable, 'stats', first)}"
    if disabled:
        return f"{what}: vLLM disabled stats logging (--disable-log-stats, or more than one API server)"
    if requests:
        return (
            f"{what}, but {requests} HTTP requests: vLLM may run with --disable-log-stats, more than one "
            "API server (--api-server-count 1 brings the line back), or a log level above INFO"
        )
    return (
        f"{what}: vLLM may run with --disable-log-stats or more than one API server, "
        "or these are not vLLM logs"
    )
