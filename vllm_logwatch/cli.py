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

from . import __version__
from .errors import EXIT_OK, EXIT_USAGE, LogwatchError, OutputError

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["build_parser", "main"]

_EPILOG = "Docs and metric names: README.md. Exit codes and signals: each command's --help."
_OFFLINE_EPILOG = ("Exit codes: 0 ok, 1 no records of the asked kind in the inputs, 2 usage or I/O error "
                   "(one line on stderr). A reader of stdout that goes away (| head) ends it quietly.")
_SERVE_EPILOG = ("Signals: SIGTERM and SIGHUP stop it cleanly (state file written), exit 0; SIGINT (Ctrl+C) "
                 "the same, exit 130. A reader of stdout that goes away never stops it. Exit code 2: a "
                 "usage error at start (one line on stderr). Docs and metric names: README.md.")
_RUN_EPILOG = ("Signals: SIGTERM, SIGINT and SIGHUP (an ssh session closing) send SIGTERM to vLLM's process "
               "group, SIGKILL after --stop-timeout; its output is drained to the end. If the reader of our "
               "stdout goes away (| head, a closed terminal), the echo stops (said on stderr, counted in "
               "vllm_logwatch_stdout_bytes_dropped_total); vLLM, the log file and the metrics go on. If "
               "logwatch itself dies (kill -9), vLLM gets SIGTERM. Exit code: vLLM's (128+N when signal N "
               "ended it), 127 when COMMAND cannot start, 2 a usage error before vLLM starts.")


_HELP: dict[str, str] = {
    "parse": "turn vLLM log files into CSV or JSON lines",
    "summary": "tok/s, tokens, KV usage per launch, and throughput by concurrency",
    "plot": "draw a run: tok/s, requests, KV usage, hit rates over time (needs matplotlib)",
    "watch": "follow vLLM's log files and serve Prometheus metrics at /metrics",
    "demo": "replay a bundled real vLLM log and serve its metrics, like watch",
    "run": "launch and supervise vLLM, tee its log to a launch file, serve its metrics live",
}
"""One line per command, for the top-level --help (built without loading every command's options)."""


def _cmd_parse(args: argparse.Namespace) -> int:
    if args.openmetrics:
        from .parse_cmd import run_openmetrics

        if args.kind != "stats":
            from .errors import UsageError

            raise UsageError("--openmetrics writes the stats metrics (and spec-decode counters); drop --kind")
        run_openmetrics(args.files, year=args.year, tz=args.tz, labels=args.label)
        return EXIT_OK
    if args.label:
        from .errors import UsageError

        raise UsageError("--label adds labels to --openmetrics series; CSV and JSON lines have none")
    if not args.jsonl and args.kind == "stats":
        from .parse_cmd import run_csv  # no pydantic, no parser unless a line needs it

        run_csv(args.files, year=args.year, tz=args.tz)
        return EXIT_OK
    from .parse_cmd import run_parse

    if args.csv and args.kind != "stats":
        from .errors import UsageError

        raise UsageError(f"--csv writes stats records only; use --jsonl for --kind {args.kind}")
    # Other kinds than stats have no CSV columns: they come as JSON lines unless --csv was asked.
    run_parse(args.files, fmt="jsonl", kind=args.kind, year=args.year, tz=args.tz)
    return EXIT_OK


def _add_parse(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "parse",
        help=_HELP["parse"],
        description=(
            "Read vLLM log files (plain or .gz, globs, '-' for stdin) and write one record per stats "
            "line, in file order. CSV columns: time, file, line, engine, prompt_throughput, "
            "generation_throughput (tokens/s), running, waiting, swapped, gpu_kv_cache_usage_pct, "
            "cpu_kv_cache_usage_pct, prefix_cache_hit_rate_pct, prefix_cache_hit_rate_cpu_pct, "
            "mm_cache_hit_rate_pct, extra (JSON of other fields)."
        ),
        epilog=_OFFLINE_EPILOG,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="log files, globs, or - for stdin")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true",
                     help="CSV with a header row (the default for --kind stats; other kinds are JSON lines)")
    fmt.add_argument("--jsonl", action="store_true", help="one JSON object per line, with a 'kind' key")
    fmt.add_argument("--openmetrics", action="store_true",
                     help="OpenMetrics text with timestamps (the exporter's gauges and estimated counters, "
                     "ending in # EOF) for 'promtool tsdb create-blocks-from openmetrics'")
    p.add_argument("--label", action="append", metavar="KEY=VALUE",
                   help="with --openmetrics: add this label to every series (repeat), e.g. "
                   "instance=gpu1:9400 to match the live exporter's scraped series")
    p.add_argument(
        "--kind",
        choices=("stats", "spec", "transfer", "info", "access", "log", "all"),
        default="stats",
        help="records to write: stats (default), spec (speculative decoding), transfer (KV/EC "
        "connector transfers), info (start-up facts), access (HTTP requests), log (warnings and errors, "
        "no text), all; exit 1 when the inputs hold none (for all: no stats line)",
    )
    _add_year_tz(p)
    p.set_defaults(func=_cmd_parse)


def _year(text: str) -> int:
    """`--year`: a year a timestamp can have (datetime's range, one spare for New Year)."""
    try:
        year = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a year such as 2026") from None
    if not 1 <= year <= 9998:
        raise argparse.ArgumentTypeError(f"{text!r} is not a year such as 2026")
    return year


def _add_year_tz(p: argparse.ArgumentParser) -> None:
    p.add_argument("--year", type=_year, help="year of the log's first line (default: from the file name, "
                   "e.g. serve_20261129_120000.log, else the file's mtime, else this year)")
    p.add_argument("--tz", metavar="ZONE", help="zone the server logged in, e.g. UTC (default: this machine)")


def _cmd_summary(args: argparse.Namespace) -> int:
    from .summary_cmd import run_summary

    fmt = "markdown" if args.markdown else "json" if args.json else "text"
    run_summary(args.files, by=args.by, fmt=fmt, year=args.year, tz=args.tz)
    return EXIT_OK


def _add_summary(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "summary",
        help=_HELP["summary"],
        description=(
            "Summarise vLLM logs: per launch (a file, or a restart inside one) the time span, stats "
            "lines, estimated prompt and generation tokens, peak and median generation tok/s, mean KV "
            "usage, share of intervals with requests waiting, cache hit rates at the end; then tok/s "
            "by running requests (all busy intervals, and steady decode only); for logs that have "
            "them, speculative decoding (drafted, accepted, acceptance) and KV transfers (by result, "
            "GiB, transfer times). The output says what each column means."
        ),
        epilog=_OFFLINE_EPILOG,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="log files, globs, or - for stdin")
    p.add_argument("--by", choices=("launch", "engine", "none"), default="launch",
                   help="one row and table per launch (default; engines summed), per launch and "
                   "engine, or one for all inputs")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="Markdown tables (default: aligned text)")
    fmt.add_argument("--json", action="store_true", help="one JSON document")
    _add_year_tz(p)
    p.set_defaults(func=_cmd_summary)


def _cmd_plot(args: argparse.Namespace) -> int:
    from .plot_cmd import run_plot

    run_plot(args.files, args.output, since=args.since, until=args.until, year=args.year, tz=args.tz)
    return EXIT_OK


def _add_plot(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plot",
        help=_HELP["plot"],
        description=(
            "Draw one image: stacked panels over time (prompt and generation tok/s; running and "
            "waiting requests; KV cache usage; prefix and MM cache hit rates), launches marked, one "
            "line per engine, and below them generation tok/s against running requests. Needs "
            "matplotlib: pip install 'vllm-logwatch[plot]'."
        ),
        epilog=_OFFLINE_EPILOG,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="log files, globs, or - for stdin")
    p.add_argument("-o", "--output", required=True, metavar="IMAGE",
                   help="image file to write: .png (or .svg, .pdf); - writes PNG to standard output "
                   "(refused when it is a terminal)")
    p.add_argument("--since", metavar="T",
                   help="start time, e.g. 2026-11-29 or '2026-11-29 19:24' (zone: --tz)")
    p.add_argument("--until", metavar="T", help="end time, same forms as --since")
    _add_year_tz(p)
    p.set_defaults(func=_cmd_plot)


def _log_to_stderr() -> None:
    """One line per event on stderr; only the long-running commands log (the library never configures it)."""
    import logging

    from .shown import ShownFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ShownFormatter("%(asctime)s logwatch %(levelname)s %(message)s",
                                        datefmt="%Y-%m-%dT%H:%M:%S"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def _add_listen_options(p: argparse.ArgumentParser, model: type[BaseModel]) -> None:
    from .config import option_help

    p.add_argument("--listen", metavar="ADDR", help=option_help(model, "listen"))
    p.add_argument("--port", metavar="N", help=option_help(model, "port"))
    p.add_argument("--poll-interval", metavar="S", help=option_help(model, "poll_interval"))
    p.add_argument("--web-config", metavar="FILE", help=option_help(model, "web_config"))


def _cmd_watch(args: argparse.Namespace) -> int:
    from .config import WatchSettings, load_settings
    from .watchmode import run_watch

    settings = load_settings(WatchSettings, vars(args))
    _log_to_stderr()
    return run_watch(settings)


def _add_watch(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .config import WatchSettings, option_help

    m = WatchSettings
    p = sub.add_parser(
        "watch",
        help=_HELP["watch"],
        description=(
            "Follow a vLLM log file, or the newest launch file in a folder (switching when a newer one "
            "appears), and serve Prometheus metrics at /metrics, a JSON status at /api/v1/status and "
            "/healthz. Every option can also be set with the environment variable shown; the command "
            "line wins over the environment, the environment over the default."
        ),
        epilog=_SERVE_EPILOG,
    )
    p.add_argument("target", nargs="?", metavar="TARGET", help=option_help(m, "target"))
    _add_listen_options(p, m)
    p.add_argument("--from-start", action=argparse.BooleanOptionalAction, default=None,
                   help=option_help(m, "from_start"))
    p.add_argument("--state-file", metavar="PATH", help=option_help(m, "state_file"))
    p.add_argument("--pattern", metavar="GLOB", help=option_help(m, "pattern"))
    p.add_argument("--stats-interval", metavar="S", help=option_help(m, "stats_interval"))
    p.add_argument("--label", dest="labels", metavar="K=V", action="append", help=option_help(m, "labels"))
    p.add_argument("--tz", metavar="ZONE", help=option_help(m, "tz"))
    p.set_defaults(func=_cmd_watch)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .config import DemoSettings, load_settings
    from .demo import run_demo

    settings = load_settings(DemoSettings, vars(args))
    _log_to_stderr()

    def announce(url: str) -> None:
        base = url.removesuffix("/metrics")
        _say(f"logwatch demo: status page at {base}/ , metrics at {url} (Ctrl+C stops)")

    return run_demo(settings, announce=announce)


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .config import DemoSettings, option_help

    p = sub.add_parser(
        "demo",
        help=_HELP["demo"],
        description=(
            "Replay a real vLLM 0.32 log (bundled) into a temporary folder at SPEED times real time, one "
            "new launch file per pass, forever, and serve it exactly like 'logwatch watch' does. The "
            "folder is removed on exit."
        ),
        epilog=_SERVE_EPILOG,
    )
    p.add_argument("--speed", metavar="X", help=option_help(DemoSettings, "speed"))
    _add_listen_options(p, DemoSettings)
    p.set_defaults(func=_cmd_demo)


def _cmd_run(args: argparse.Namespace) -> int:
    from .config import RunSettings, load_settings
    from .runmode import run_run

    command = list(args.child_command)
    if command[:1] == ["--"]:
        command = command[1:]
    settings = load_settings(RunSettings, vars(args))
    _log_to_stderr()

    def announce(url: str) -> None:
        logging.getLogger("vllm_logwatch.run").info("metrics at %s", url)

    return run_run(settings, command, announce=announce, echo=not args.stdout_closed)


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .config import RunSettings, option_help

    m = RunSettings
    p = sub.add_parser(
        "run",
        help=_HELP["run"],
        description=(
            "Run COMMAND (e.g. vllm serve MODEL ...) in its own session with stdout and stderr merged, "
            "write every byte to LOG_DIR/<name>_<YYYYmmdd_HHMMSS>.log and to our stdout, and serve the "
            "same metrics as 'watch' from the output, in process. A full or slow log disk never blocks "
            "vLLM: what cannot be written is dropped, counted and said on stderr."
        ),
        epilog=_RUN_EPILOG,
    )
    p.add_argument("--listen", metavar="ADDR", help=option_help(m, "listen"))
    p.add_argument("--port", metavar="N", help=option_help(m, "port"))
    p.add_argument("--web-config", metavar="FILE", help=option_help(m, "web_config"))
    p.add_argument("--log-dir", metavar="DIR", help=option_help(m, "log_dir"))
    p.add_argument("--name", metavar="NAME", help=option_help(m, "name"))
    p.add_argument("--restart", choices=("no", "on-failure", "always"), default=None,
                   help=option_help(m, "restart"))
    p.add_argument("--stop-timeout", metavar="S", help=option_help(m, "stop_timeout"))
    p.add_argument("--startup-grace", metavar="S", help=option_help(m, "startup_grace"))
    p.add_argument("--stats-interval", metavar="S", help=option_help(m, "stats_interval"))
    p.add_argument("--label", dest="labels", metavar="K=V", action="append", help=option_help(m, "labels"))
    p.add_argument("--tz", metavar="ZONE", help=option_help(m, "tz"))
    p.add_argument("child_command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS",
                   help="the server to run, after --")
    p.set_defaults(func=_cmd_run)


_COMMANDS: dict[str, Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = {
    "parse": _add_parse, "summary": _add_summary, "plot": _add_plot,
    "watch": _add_watch, "demo": _add_demo, "run": _add_run,
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line, for `main` and for the committed `--help` texts. With `only`, the other
    commands get a one-line stub: their options (and the settings models behind them) are not loaded,
    so `logwatch parse` starts without the web server's settings."""
    parser = argparse.ArgumentParser(
        prog="logwatch",
        description="Turn vLLM server logs into data: Prometheus metrics, CSV, summaries.",
        epilog=_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, add in _COMMANDS.items():
        if only is None or only == name:
            add(sub)
        else:
            sub.add_parser(name, help=_HELP[name])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `logwatch` console script; returns the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words and words[0] in _COMMANDS else None)
    args = parser.parse_args(words)
    if args.command in _OFFLINE:
        # A closed pipe (`logwatch parse x.log | head`) ends an offline command quietly, like any Unix
        # filter. Never in watch, run or demo: there a vanished reader of stdout must not end us (nor,
        # through its death signal, vLLM); Python's SIG_IGN turns it into EPIPE, which the echo counts.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if args.command in _TO_STDOUT and sys.stdout is None:  # started with standard output closed (>&-)
        print(f"logwatch {args.command}: standard output is closed: nowhere to write", file=sys.stderr)
        return EXIT_USAGE
    if args.command not in _OFFLINE:
        args.stdout_closed = _hold_std_fds()
    try:
        code: int = args.func(args)
        if args.command in _TO_STDOUT:
            sys.stdout.flush()  # a full disk must show here, not at exit
    except LogwatchError as exc:
        if isinstance(exc, OutputError):
            _drop_stdout()
        print(f"logwatch {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        if args.command not in _OFFLINE:
            raise
        # The offline commands turn every input error into an InputError: this is their output.
        _drop_stdout()
        print(f"logwatch {args.command}: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return code


_OFFLINE = frozenset({"parse", "summary", "plot"})
"""Commands whose inputs' errors all become InputError: an OSError out of them is from the output."""
_TO_STDOUT = frozenset({"parse", "summary"})


def _say(text: str) -> None:
    """A line on stdout for a long-running command; a reader that went away (EPIPE) only loses it."""
    try:
        print(text, flush=True)
    except OSError as exc:
        logging.getLogger("vllm_logwatch").warning("stdout: %s: it gets nothing more; serving goes on",
                                                   (exc.strerror or str(exc)).lower())
        _drop_stdout()


def _hold_std_fds() -> bool:
    """Open /dev/null on any of fds 0-2 that we were started without (`>&-`), so that no socket, pipe
    or log file of ours is ever given fd 1 and sent vLLM's echo; True if stdout was one of them."""
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
    return 1 in closed


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
