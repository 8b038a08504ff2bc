"""Offline: read log files and write their records as CSV or JSON lines (`logwatch parse`)."""

from __future__ import annotations

from collections.abc import Iterator
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

__all__ = ["iter_source_events", "n_files", "no_rows_hint", "no_stats_hint", "repeats_note"]


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
    assembler = Assembler(source.name, partial(YearClock.for_source, path, zone, year), repeats=repeats)
    with open_source(source, progress=True) as raw:
        want = WANTS.get(kind)
        needles = None if want is None else want.needles + extra_needles
        followers = () if want is None else want.followers
        try:
            if (fmt := sniff(raw)) != "plain":  # a container log: its envelopes, its stamps (containers.py);
                # the followers as needles too: a line after a stats line may be in the next block
                wanted = None if needles is None else needles + followers
                yield from enveloped_events(raw, fmt, assembler, wanted)
            else:
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


def no_rows_hint(sources: list[Source], kind: str, otherwise: str) -> str:
    """The one-line `NoStatsError` message of `parse --kind iterations` or `requests` without rows: the
    lines of the kind that could not be read, if any, else `otherwise`."""
    what, unreadable = kind[:-1], 0
    first: tuple[str, int] | None = None
    for name, number, event in _second_look(sources, WANTS[kind].needles):
        if isinstance(event, Unparsed) and event.what == what:
            unreadable += 1
            first = first or (name, number)
    head = f"no {kind} records in {n_files(len(sources))}"
    if first is None:
        return f"{head} ({otherwise})"
    return f"{head}: {_unreadable(unreadable, what, first)}"


def n_files(n: int) -> str:
    """`1 file`, `2 files`."""
    return f"{n} file{'s' if n != 1 else ''}"


def _second_look(sources: list[Source], needles: tuple[bytes, ...]) -> Iterator[tuple[str, int, Event]]:
    """The events of the lines holding one of `needles`, with their file and line number: a second,
    cheap look at the files for a hint (a stream, read once already, is left out: a second open would
    wait for a new writer; a file that cannot be read is passed over)."""
    from ...parsing.line import parse_line

    for source in sources:
        if source.is_stream:
            continue
        try:
            with open_source(source) as stream:
                for number, raw in scan_lines(stream, needles, followers=()):
                    event = parse_line(raw.decode("utf-8", "replace"))
                    if event is not None:
                        yield source.name, number, event
        except (InputError, OSError, EOFError, ValueError):
            continue


def _unreadable(count: int, what: str, first: tuple[str, int]) -> str:
    """What the lines that could not be read were, the verb agreeing with their count.

    >>> _unreadable(1, "stats", ("a.log", 3))[:45]
    '1 line looks like stats lines but could not b'
    """
    lines = "1 line looks" if count == 1 else f"{count} lines look"
    return (f"{lines} like {what} lines but could not be read (first: {first[0]}, line {first[1]}): a vLLM "
            "format this version does not know, or damaged lines")


def no_stats_hint(sources: list[Source], disabled: bool = False) -> str:
    """The one-line `NoStatsError` message for inputs without stats lines (parse, summary, plot,
    backfill): why there were none, as far as the files tell."""
    what = f"no stats lines in {n_files(len(sources))}"
    requests = unreadable = 0
    first: tuple[str, int] | None = None  # the first unreadable stats line: its file and number
    needles = NO_STATS_NEEDLES + WANTS["stats"].needles + VARIANT_NEEDLES
    for name, number, event in _second_look(sources, needles):
        if isinstance(event, ServerInfo) and event.stats_logging_disabled:
            disabled = True
        elif isinstance(event, Unparsed) and event.what == "stats":
            unreadable += 1
            first = first or (name, number)
        elif event.kind == "access":
            requests += 1
    if first is not None:
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
