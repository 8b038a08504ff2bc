"""`logwatch`: a thin shell. Parse argv, call one `run_*` function, map errors to exit codes.

Each command imports its own modules when it runs, so `logwatch parse` never loads the web server.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .errors import EXIT_OK, EXIT_USAGE, LogwatchError, OutputError, UsageError
from .options import COMMANDS, build_parser, parse_command_line
from .shown import ShownFormatter, shown_path

if TYPE_CHECKING:
    from .offline.summary.answers import Asked

def _cmd_parse(args: argparse.Namespace) -> None:
    if args.openmetrics or args.vm_import:
        from .commands.parse import run_openmetrics

        flag = "--openmetrics" if args.openmetrics else "--vm-import"
        if args.kind != "stats":
            raise UsageError(f"{flag} writes the stats metrics (and spec-decode counters); drop --kind")
        run_openmetrics(args.files, year=args.year, tz=args.tz, labels=args.label, millis=args.vm_import)
        return
    if args.label:
        raise UsageError("--label adds labels to --openmetrics and --vm-import series; CSV and JSON lines "
                         "have none")
    from .commands.parse import run_parse

    if args.csv and args.kind not in ("stats", "iterations", "requests"):
        raise UsageError(
            f"--csv writes stats, iterations and requests records; use --jsonl for --kind {args.kind}")
    # Stats come as CSV unless --jsonl was asked; other kinds as JSON lines unless --csv was (iterations and
    # requests have CSV columns too).
    csv = args.csv or (args.kind == "stats" and not args.jsonl)
    run_parse(args.files, fmt="csv" if csv else "jsonl", kind=args.kind, year=args.year, tz=args.tz)


def _cmd_summary(args: argparse.Namespace) -> None:
    from .commands.summary import run_summary

    run_summary(args.files, by=args.by, fmt=args.fmt, year=args.year, tz=args.tz, asked=_asked(args),
                explain=args.explain)


def _cmd_plot(args: argparse.Namespace) -> None:
    from .commands.plot import run_plot

    run_plot(args.files, args.output, since=args.since, until=args.until, year=args.year, tz=args.tz)


def _cmd_compare(args: argparse.Namespace) -> None:
    from .commands.compare import run_compare

    run_compare(args.files, fmt=args.fmt, output=args.output, year=args.year, tz=args.tz, asked=_asked(args))


def _cmd_audit(args: argparse.Namespace) -> None:
    from .commands.audit import run_audit

    run_audit(args.results, args.logs, fmt=args.fmt, output=args.output, clock_offset=args.clock_offset,
              year=args.year, tz=args.tz, observability=args.observability)


def _asked(args: argparse.Namespace) -> Asked:
    from .offline.summary.answers import Asked

    return Asked(target_tps=args.target_tps, gpu_hour_cost=args.gpu_hour_cost, gpus=args.gpus)


def _log_to_stderr() -> None:
    """One line per event on stderr; only the long-running commands log (the library never configures it)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ShownFormatter("%(asctime)s logwatch %(levelname)s %(message)s",
                                        datefmt="%Y-%m-%dT%H:%M:%S"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def _cmd_watch(args: argparse.Namespace) -> int:
    from .commands.watch import run_watch
    from .config import WatchSettings, load_settings

    settings = load_settings(WatchSettings, vars(args))
    _log_to_stderr()
    return run_watch(settings, stdin_open=0 not in args.closed_fds)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .commands.demo import run_demo
    from .config import DemoSettings, load_settings

    settings = load_settings(DemoSettings, vars(args))
    _log_to_stderr()

    def announce(url: str) -> None:
        base = url.removesuffix("/metrics")
        _say(f"logwatch demo: status page at {base}/ , metrics at {url} (Ctrl+C stops)")

    return run_demo(settings, announce=announce)


def _cmd_run(args: argparse.Namespace) -> int:
    from .commands.run import run_run
    from .config import RunSettings, load_settings

    command = list(args.child_command)
    if command[:1] == ["--"]:
        command = command[1:]
    settings = load_settings(RunSettings, vars(args))
    _log_to_stderr()

    def announce(url: str) -> None:
        logging.getLogger("vllm_logwatch.run").info("metrics at %s", url)

    return run_run(settings, command, announce=announce, echo=1 not in args.closed_fds)


def _cmd_top(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from .commands.top import TopOptions, run_top

    given = {field.name: getattr(args, field.name) for field in fields(TopOptions)}
    return run_top(TopOptions(**{**given, "targets": tuple(args.targets)}))


_HANDLERS: dict[str, Callable[[argparse.Namespace], int | None]] = {
    "parse": _cmd_parse, "summary": _cmd_summary, "plot": _cmd_plot,
    "watch": _cmd_watch, "demo": _cmd_demo, "run": _cmd_run, "compare": _cmd_compare,
    "audit": _cmd_audit, "top": _cmd_top,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `logwatch` console script; returns the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    args = parse_command_line(parser, words)
    if args.command in _OFFLINE:
        # A closed pipe (`logwatch parse x.log | head`) ends an offline command quietly, like any Unix
        # filter. Never in watch, run or demo: there a vanished reader of stdout must not end us (nor,
        # through its death signal, vLLM); Python's SIG_IGN turns it into EPIPE, which the echo counts.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if args.command in _TO_STDOUT and sys.stdout is None:  # started with standard output closed (>&-)
        print(f"logwatch {args.command}: standard output is closed: nowhere to write", file=sys.stderr)
        return EXIT_USAGE
    if args.command not in _OFFLINE:
        args.closed_fds = _hold_std_fds()
    try:
        code = _HANDLERS[args.command](args) or EXIT_OK
        if args.command in _TO_STDOUT:
            sys.stdout.flush()  # a full disk must show here, not at exit
    except LogwatchError as exc:
        if isinstance(exc, OutputError):
            _drop_stdout()
        print(f"logwatch {args.command}: {shown_path(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        if args.command not in _OFFLINE:
            raise
        # The offline commands turn every input error into an InputError: this is their output.
        _drop_stdout()
        print(f"logwatch {args.command}: cannot write the output: {shown_path(str(exc.strerror or exc))}",
              file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return code


_OFFLINE = frozenset({"parse", "summary", "plot", "compare", "audit"})
"""Commands whose inputs' errors all become InputError: an OSError out of them is from the output."""
_TO_STDOUT = frozenset({"parse", "summary", "compare", "audit"})


def _say(text: str) -> None:
    """A line on stdout for a long-running command; a reader that went away (EPIPE) only loses it."""
    try:
        print(text, flush=True)
    except OSError as exc:
        logging.getLogger("vllm_logwatch").warning("stdout: %s: it gets nothing more; serving goes on",
                                                   (exc.strerror or str(exc)).lower())
        _drop_stdout()


def _hold_std_fds() -> frozenset[int]:
    """Open /dev/null on any of fds 0-2 that we were started without (`>&-`), so that no socket, pipe
    or log file of ours is ever given fd 1 and sent vLLM's echo; the fds that were closed."""
    closed: list[int] = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(fd)
    for fd in closed:
        devnull = os.open(os.devnull, os.O_RDWR)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)
    return frozenset(closed)


def _drop_stdout() -> None:
    """After a write error, point stdout at /dev/null: the text still buffered must not fail again
    (with a second message) when the interpreter flushes it at exit."""
    if sys.stdout is None:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
