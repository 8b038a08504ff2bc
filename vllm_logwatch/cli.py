"""`logwatch`: a thin shell. Parse argv, call one `run_*` function, map errors to exit codes.

Each command imports its own modules when it runs, so `logwatch parse` never loads the web server.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence

from . import __version__
from .errors import EXIT_OK, LogwatchError

__all__ = ["build_parser", "main"]

_EPILOG = "Docs and metric names: README.md. Exit codes: 0 ok, 1 no stats lines, 2 usage or I/O error."


def _cmd_parse(args: argparse.Namespace) -> int:
    from .report import run_parse

    if not args.jsonl and args.kind != "stats":
        from .errors import UsageError

        raise UsageError(f"--csv writes stats records only; use --jsonl for --kind {args.kind}")
    run_parse(args.files, fmt="jsonl" if args.jsonl else "csv", kind=args.kind, year=args.year, tz=args.tz)
    return EXIT_OK


def _add_parse(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "parse",
        help="turn vLLM log files into CSV or JSON lines",
        description=(
            "Read vLLM log files (plain or .gz, globs, '-' for stdin) and write one record per stats "
            "line, in file order. CSV columns: time, file, line, engine, prompt_throughput, "
            "generation_throughput (tokens/s), running, waiting, swapped, gpu_kv_cache_usage_pct, "
            "cpu_kv_cache_usage_pct, prefix_cache_hit_rate_pct, prefix_cache_hit_rate_cpu_pct, "
            "mm_cache_hit_rate_pct, extra (JSON of other fields)."
        ),
        epilog=_EPILOG,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="log files, globs, or - for stdin")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="CSV with a header row (the default)")
    fmt.add_argument("--jsonl", action="store_true", help="one JSON object per line, with a 'kind' key")
    p.add_argument(
        "--kind",
        choices=("stats", "spec", "info", "access", "log", "all"),
        default="stats",
        help="records to write: stats (default), spec (speculative decoding), info (start-up facts), "
        "access (HTTP requests), log (warnings and errors, no text), all",
    )
    p.add_argument(
        "--year",
        type=int,
        help="year of the log's first line (default: from the file name, e.g. serve_20261129_120000.log, "
        "else the file's mtime, else this year)",
    )
    p.add_argument("--tz", metavar="ZONE", help="zone the server logged in, e.g. UTC (default: this machine)")
    p.set_defaults(func=_cmd_parse)


_COMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [_add_parse]


def build_parser() -> argparse.ArgumentParser:
    """The whole command line, for `main` and for the committed `--help` texts."""
    parser = argparse.ArgumentParser(
        prog="logwatch",
        description="Turn vLLM server logs into data: Prometheus metrics, CSV, summaries.",
        epilog=_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `logwatch` console script; returns the exit code."""
    # A closed pipe (`logwatch parse x.log | head`) ends us quietly, like any Unix filter.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except LogwatchError as exc:
        print(f"logwatch {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
