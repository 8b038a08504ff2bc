"""The command line of `logwatch`: one option builder per command, the help texts and epilogs.

`build_parser(only)` builds the others as one-line stubs, so `logwatch parse` starts without loading
the web server's settings (each live command's options come from its settings model in `config.py`).
"""

from __future__ import annotations

import argparse
import difflib
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import __version__
from .parsing.columns import RECORD_KINDS

if TYPE_CHECKING:
    from pydantic import BaseModel

_EPILOG = """Docs: README.md and docs/ in the source tree (not in the installed package); metric names:
           docs/metrics.md. Exit codes, signals: each command's --help."""


def _offline_epilog(none: str) -> str:
    """Exit codes of an offline command; `none`: what exit code 1 means for it."""
    return (f"Exit codes: 0 ok, 1 {none} in the inputs, 2 usage or I/O error (one line on stderr). A "
            "reader of stdout that goes away (| head) ends it quietly.")


def _serve_epilog(state: str) -> str:
    return (f"Signals: SIGTERM and SIGHUP stop it cleanly{state}, exit 0; SIGINT (Ctrl+C) the same, exit "
            "130. A reader of stdout that goes away never stops it. Exit code 2: a usage error at start "
            "(one line on stderr). Docs: docs/watch.md; metric names: docs/metrics.md.")


_RUN_EPILOG = """Signals: SIGTERM, SIGINT and SIGHUP (an ssh session closing) send SIGTERM to vLLM's process
               group, SIGKILL after --stop-timeout (at once on a second Ctrl+C); its output is drained to
               the end. If the reader of our stdout goes away (| head, a closed terminal), the echo stops
               (said on stderr, counted in vllm_logwatch_stdout_bytes_dropped_total); vLLM, the log file
               and the metrics go on. If logwatch itself dies (kill -9), vLLM gets SIGTERM. Exit code:
               vLLM's (128+N when signal N ended it), 127 when COMMAND cannot start, 2 a usage error
               before vLLM starts. Docs: docs/run.md."""


HELP: dict[str, str] = {
    "parse": "turn vLLM log files into CSV or JSON lines",
    "summary": "tok/s, tokens, KV usage per launch, and throughput by concurrency",
    "plot": "draw a run: tok/s, requests, KV usage, hit rates over time (needs matplotlib)",
    "watch": "follow vLLM's log files and serve Prometheus metrics at /metrics",
    "demo": "replay a bundled real vLLM log and serve its metrics, like watch",
    "run": "launch and supervise vLLM, tee its log to a launch file, serve its metrics live",
    "compare": "launches side by side: the arguments that differ, throughput by concurrency, a plot",
    "audit": "benchmark results against the server's log: did the server run what the benchmark asked?",
    "top": "the terminal view: a row per server and engine, from logs, exporters or vLLM's /metrics",
}
"""One line per command, for the top-level --help (built without loading every command's options)."""


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, description: str, epilog: str
) -> argparse.ArgumentParser:
    """A command's parser. argparse folds the texts' line breaks and indents into single spaces."""
    return sub.add_parser(name, help=HELP[name], description=description, epilog=epilog)


def _add_parse(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(sub, "parse", """
        Read vLLM log files (plain or .gz, globs, '-' for stdin) and write one record per stats
        line, in file order. CSV columns: time, file, line, engine, prompt_throughput,
        generation_throughput (tokens/s), running, waiting, swapped, gpu_kv_cache_usage_pct,
        cpu_kv_cache_usage_pct, prefix_cache_hit_rate_pct, prefix_cache_hit_rate_cpu_pct,
        mm_cache_hit_rate_pct, extra (JSON of other fields).""",
        _offline_epilog("no records of the asked kind"))
    p.add_argument("files", nargs="+", metavar="FILE", help="log files, globs, or - for stdin")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true",
                     help="""CSV with a header row (the default for --kind stats; iterations and requests
                     have CSV columns too; other kinds are JSON lines)""")
    fmt.add_argument("--jsonl", action="store_true", help="one JSON object per line, with a 'kind' key")
    fmt.add_argument("--openmetrics", action="store_true",
                     help="""OpenMetrics text with timestamps (the exporter's gauges and estimated counters,
                     ending in # EOF) for 'promtool tsdb create-blocks-from openmetrics'""")
    fmt.add_argument("--vm-import", action="store_true",
                     help="""the same series as Prometheus text with millisecond timestamps, which
                     VictoriaMetrics imports as it is: curl --data-binary @FILE
                     http://VM:8428/api/v1/import/prometheus""")
    p.add_argument("--label", action="append", metavar="KEY=VALUE",
                   help="""with --openmetrics or --vm-import: add this label to every series (repeat), e.g.
                   instance=gpu1:9477 to match the live exporter's scraped series""")
    p.add_argument(
        "--kind",
        choices=RECORD_KINDS,
        default="stats",
        help="""records to write: stats (default), spec (speculative decoding), transfer (KV/EC
        connector transfers), mfu (--enable-mfu-metrics lines), info (start-up facts), access (HTTP
        requests), log (warnings and errors, no text), iterations (engine steps,
        --enable-logging-iteration-details), requests (one row per request, --enable-log-requests; no
        prompt or output), all; exit 1 when the inputs hold none (for all: no stats line)""",
    )
    _add_year_tz(p)


def _year(text: str) -> int:
    """`--year`: a year a timestamp can have (datetime's range, one spare for New Year)."""
    try:
        year = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a year such as 2026") from None
    if not 1 <= year <= 9998:
        raise argparse.ArgumentTypeError(f"{text!r} is not a year such as 2026")
    return year


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number above 0")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return int(text)


def _add_answers(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target-tps", type=_positive, metavar="N",
                   help="""capacity: per launch (and per context row where the KV cache size is logged) the
                   most running requests at which the median stream gets N generation tok/s with
                   nothing waiting, its evidence, and the limit that binds (speed, max-num-seqs, KV cache)""")
    p.add_argument("--gpu-hour-cost", type=_positive, metavar="USD",
                   help="""cost: per launch and per day, $/1M generated and prompt tokens, busy share, idle
                   hours and their cost, at USD per GPU-hour""")
    p.add_argument("--gpus", type=_count, metavar="N",
                   help="""GPUs per launch for --gpu-hour-cost and the Pareto view (default: tensor x
                   pipeline x data parallel size from the launch's arguments, else 1)""")


def _add_tables(p: argparse.ArgumentParser, json_help: str) -> None:
    """--markdown or --json, as `fmt` (default: text, aligned)."""
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", dest="fmt", action="store_const", const="markdown", default="text",
                     help="Markdown tables (default: aligned text)")
    fmt.add_argument("--json", dest="fmt", action="store_const", const="json", help=json_help)


def _add_year_tz(
    p: argparse.ArgumentParser, tz: str = "zone the server logged in, e.g. UTC (default: this machine)"
) -> None:
    p.add_argument("--year", type=_year, help="""year of the log's first line (default: from the file name,
                   e.g. serve_20261129_120000.log, else the file's mtime, else this year)""")
    p.add_argument("--tz", metavar="ZONE", help=tz)


def _add_summary(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(sub, "summary", """
        Summarise vLLM logs: per launch (a file, or a restart inside one) the time span, stats
        lines, estimated prompt and generation tokens, peak and median generation tok/s, mean KV
        usage, share of intervals with requests waiting, the time between tokens, cache hit rates at
        the end; then tok/s, per-request tok/s and the time between tokens (Little's law) by the
        running requests an interval held throughout; with iteration lines, the engine step time by
        running streams; for logs that have them, speculative decoding (drafted, accepted,
        acceptance) and KV transfers (by result, GiB, transfer times). The data comes first;
        --explain adds what each column means.""",
        _offline_epilog("no stats line (with --by lora: no request line)"))
    p.add_argument("files", nargs="+", metavar="FILE", help="log files, globs, or - for stdin")
    p.add_argument("--by", choices=("launch", "engine", "none", "lora"), default="launch",
                   help="""one row and table per launch (default; engines summed), per launch and
                   engine, or one for all inputs; lora: requests by LoRA adapter from the request
                   lines (--enable-log-requests): finish reasons, end-to-end p50/p90 where timed""")
    _add_tables(p, """one JSON document (with the Pareto points: per-stream tok/s and total tok/s per GPU
                by running requests)""")
    p.add_argument("--explain", action="store_true",
                   help="after the tables, what each column means (the JSON always holds it)")
    _add_answers(p)
    _add_year_tz(p)


def _add_plot(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(sub, "plot", """
        Draw one image: stacked panels over time (prompt and generation tok/s; running and waiting
        requests; KV cache usage; prefix and MM cache hit rates), launches marked, one line per
        engine, and below them generation tok/s against running requests. Needs matplotlib: pip
        install matplotlib (in a clone: pip install '.[plot]').""", _offline_epilog("no stats line"))
    p.add_argument("files", nargs="+", metavar="FILE", help="log files, globs, or - for stdin")
    p.add_argument("-o", "--output", required=True, metavar="IMAGE",
                   help="""image file to write: .png (or .svg, .pdf); - writes PNG to standard output
                   (refused when it is a terminal)""")
    p.add_argument("--since", metavar="T",
                   help="start time, e.g. 2026-11-29 or '2026-11-29 19:24' (zone: --tz)")
    p.add_argument("--until", metavar="T", help="end time, same forms as --since")
    _add_year_tz(p)


_METAVARS = {
    "listen": "ADDR", "port": "N", "poll_interval": "S", "web_config": "FILE", "state_file": "PATH",
    "pattern": "GLOB", "select": "GLOB", "max_sources": "N", "source_grace": "S", "stats_interval": "S",
    "labels": "K=V", "tz": "ZONE", "records": "FILE", "log_dir": "DIR", "name": "NAME", "stop_timeout": "S",
    "startup_grace": "S", "speed": "X",
}
"""The metavar of each settings option; an on/off field is --x/--no-x, a Literal one takes its choices."""


def _add_settings(p: argparse.ArgumentParser, model: type[BaseModel], *fields: str) -> None:
    """One option per settings field, in this order, its help from the model (with env and default)."""
    from typing import Literal, get_args, get_origin

    from .config import option_help, option_name

    for field in fields:
        annotation = model.model_fields[field].annotation
        kwargs: dict[str, Any] = {"dest": field, "help": option_help(model, field)}
        if annotation is bool:
            kwargs.update(action=argparse.BooleanOptionalAction, default=None)
        elif get_origin(annotation) is Literal:
            kwargs.update(choices=get_args(annotation), default=None)
        else:
            kwargs["metavar"] = _METAVARS[field]
        if field in ("select", "labels"):
            kwargs["action"] = "append"
        p.add_argument(option_name(field), **kwargs)


_LISTEN = ("listen", "port", "poll_interval", "web_config")
_EXPORTING = ("stats_interval", "labels", "tz", "records")


def _add_watch(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .config import WatchSettings, option_help

    m = WatchSettings
    p = _command(sub, "watch", """
        Follow a vLLM log file, or the newest launch file in a folder (switching when a newer one
        appears), and serve Prometheus metrics at /metrics, a JSON status at /api/v1/status and
        /healthz. 'docker logs -f vllm 2>&1 | logwatch watch -' reads a pipe instead (also 'kubectl
        logs -f POD', 'journalctl -f -u vllm -o cat'): one launch, no --state-file; at its end the
        metrics stay served and the status says it ended. Every option can also be set with the
        environment variable shown; the command line wins over the environment, the environment over
        the default.""", _serve_epilog(" (state file written)"))
    p.add_argument("target", nargs="?", metavar="TARGET", help=option_help(m, "target"))
    _add_settings(p, m, *_LISTEN, "from_start", "state_file", "pattern", "layout", "select", "max_sources",
                  "source_grace", *_EXPORTING)


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .config import DemoSettings

    p = _command(sub, "demo", """
        Replay a real vLLM 0.32 log (bundled) into a temporary folder at SPEED times real time, one
        new launch file per pass, forever, and serve it exactly like 'logwatch watch' does. The
        folder is removed on exit.""", _serve_epilog(" (its temporary folder removed)"))
    _add_settings(p, DemoSettings, "speed", *_LISTEN)


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .config import RunSettings

    p = _command(sub, "run", """
        Run COMMAND (e.g. vllm serve MODEL ...) in its own session with stdout and stderr merged,
        write every byte to LOG_DIR/<name>_<YYYYmmdd_HHMMSS>.log and to our stdout, and serve the
        same metrics as 'watch' from the output, in process. A full or slow log disk never blocks
        vLLM: what cannot be written is dropped, counted and said on stderr.""", _RUN_EPILOG)
    _add_settings(p, RunSettings, "listen", "port", "web_config", "log_dir", "name", "restart",
                  "stop_timeout", "startup_grace", *_EXPORTING)
    p.add_argument("child_command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS",
                   help="the server to run, after --")


def _add_compare(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(sub, "compare", """
        Put vLLM launches side by side: each file is a launch, and so is each restart inside one (a
        new start-up banner). First the arguments that differ between the launches (only those;
        host, port and model_tag are left out) and the start-up facts that differ (vLLM version, KV
        cache size, ...); then per launch its throughput by running requests (median and p90
        generation tok/s, per-request tok/s, time between tokens, prompt tok/s, KV usage, share
        waiting, preemptions), hit rates, speculative acceptance, and the context x concurrency
        matrix where the KV cache size in tokens is logged (an estimate; the output says why). A
        launch whose start-up lines are not in the log is compared with its arguments unknown.""", """
        Exit codes: 0 ok, 1 no stats lines in the inputs, 2 usage or I/O error (one line on stderr;
        also an image that cannot be written). A reader of stdout that goes away (| head) ends it
        quietly.""")
    p.add_argument("files", nargs="+", metavar="FILE", help="log files, globs, or - for stdin")
    _add_tables(p, """one JSON document: launches (args, facts, by_concurrency rows, matrix) and
                differing_args""")
    p.add_argument("-o", "--output", metavar="IMAGE",
                   help="""also draw the comparison: generation tok/s and per-request tok/s against running
                   requests, one line per launch (median, p10-p90 band; broken at counts with no data),
                   and the Pareto frontier (per-stream tok/s against total tok/s per GPU); .png, .svg or
                   .pdf (needs matplotlib)""")
    _add_answers(p)
    _add_year_tz(p)


def _add_audit(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(sub, "audit", """
        Read benchmark result files (vllm bench serve --save-result JSON, vllm bench sweep folders,
        GuideLLM benchmarks JSON, AIPerf's profile_export_aiperf.json, llm-d Benchmark Reports 0.2,
        inference-perf stage metrics), find each run's window in the vLLM server's logs and say what
        the server really ran in it: the concurrency asked against Running (median, p10, p90), the
        share of samples with requests waiting, preemptions, KV cache peak, prefix cache hit rate,
        the server's generation tok/s against the client's output tok/s, the log's time between
        tokens against the client's ITL; and verdicts with their numbers: capped by max-num-seqs,
        KV-throttled, queueing, time between tokens differs, client-bound, idle, absent, another
        model, else ok. AIPerf's requests are joined to the log's request lines by X-Request-ID.""", """
        Exit codes: 0 ok (whatever the verdicts), 1 no stats lines in the logs, or no run's window
        holds a stats line of the benchmark's model (the line says which: another model, or the
        times the logs cover), 2 usage or I/O error, a result file cut short or of no known format
        (one line on stderr). Docs: docs/audit.md.""")
    p.add_argument("results", nargs="+", metavar="RESULT", help="""benchmark result files, or vllm bench
                   sweep output folders""")
    p.add_argument("--log", dest="logs", action="append", required=True, metavar="SERVER_LOG",
                   help="the vLLM server's log: a file, a glob, or - for stdin (repeatable)")
    _add_tables(p, """one JSON document: runs, each with the client's figures, the server's (server) and
                the verdicts""")
    p.add_argument("-o", "--output", metavar="IMAGE", help="""also draw it: per run the concurrency
                   asked and Running (median, p10-p90), max-num-seqs, the verdicts; .png, .svg or .pdf
                   (needs matplotlib)""")
    p.add_argument("--observability", metavar="DIR", help="""also write per run DIR/run-N.observability.yaml:
                   the server's Running, Waiting and KV cache usage in the run's window (statistics and
                   series) as the results.observability block of an llm-d Benchmark Report 0.2, a
                   partial to merge into the run's report""")
    p.add_argument("--clock-offset", type=float, default=0.0, metavar="S", help="""seconds to add to the
                   benchmark's times to get the log's (the log's clock minus the client's; default 0; at
                   most 1e9 either way)""")
    _add_year_tz(p, """zone of the log's stamps and of the result files' zone-less times, e.g. UTC
                 (default: this machine's zone)""")


def _add_top(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(sub, "top", """
        Show one vLLM server or a fleet in the terminal: a row per server and engine (state, age of
        the last stats line, tok/s with a sparkline, running, waiting, KV usage, prefix hit rate,
        time between tokens, preemptions, problems), a fleet line, a detail pane. A TARGET is a log
        file or folder (read here from its start, as 'watch' reads it), the URL of a logwatch
        exporter, or the URL of a vLLM server's own /metrics. Keys: ? shows them. Needs the 'top'
        extra: pip install 'vllm-logwatch[top]'. NO_COLOR is honoured. Docs: docs/top.md.""", """
        Exit codes: 0 ok (q, or --once printed its frame), 2 a usage error (one line on stderr).""")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="""log files or folders, http(s) URLs (default: $LOGWATCH_TARGET, else
                   http://127.0.0.1:$LOGWATCH_PORT/metrics, the exporter on this host)""")
    p.add_argument("--once", action="store_true",
                   help="""print one frame as text and exit (for scripts and READMEs); a vLLM URL is read
                   twice, --interval apart, for its rates""")
    p.add_argument("--detail", action="store_true",
                   help="with --once: each server's detail pane too; else open the pane at start")
    p.add_argument("--at", metavar="TIME",
                   help="""log targets as they were at TIME (ISO, e.g. 2026-11-29T19:25:00, in --tz);
                   left/right then step through their history""")
    p.add_argument("--step", type=_positive, default=60.0, metavar="S",
                   help="seconds the left and right keys move through a log's history (default 60)")
    p.add_argument("--interval", type=_positive, default=1.0, metavar="S",
                   help="seconds between two refreshes (default 1)")
    p.add_argument("--width", type=_count, metavar="N",
                   help="with --once: columns of the frame (default: the terminal's, else 100)")
    p.add_argument("--pattern", default="*.log", metavar="GLOB",
                   help="file names a folder target follows (default *.log), as watch's --pattern")
    p.add_argument("--tz", metavar="ZONE",
                   help="zone the server logged in, and of --at (default: this machine)")
    p.add_argument("--timeout", type=_positive, default=2.0, metavar="S",
                   help="seconds a URL may take to answer before its row shows it down (default 2)")
    p.add_argument("--basic-auth-user", dest="user", metavar="USER",
                   help="URL targets behind basic auth (an exporter's --web-config basic_auth_users)")
    p.add_argument("--basic-auth-password-file", dest="password_file", metavar="FILE",
                   help="the password for --basic-auth-user, first line of FILE (never on the command line)")
    p.add_argument("--tls-ca-file", dest="ca_file", metavar="FILE",
                   help="CA certificate(s) that signed the https targets' certificates")
    p.add_argument("--tls-cert-file", dest="cert_file", metavar="FILE",
                   help="client certificate, for an exporter whose web config asks for one")
    p.add_argument("--tls-key-file", dest="key_file", metavar="FILE", help="the client certificate's key")
    p.add_argument("--tls-insecure-skip-verify", dest="insecure", action="store_true",
                   help="do not check the https targets' certificates (a test host only)")


COMMANDS: dict[str, Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = {
    "parse": _add_parse, "summary": _add_summary, "plot": _add_plot,
    "watch": _add_watch, "demo": _add_demo, "run": _add_run, "compare": _add_compare, "audit": _add_audit,
    "top": _add_top,
}


def parse_command_line(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """`parser.parse_args(words)`, but an unknown option is refused by its command's own parser (its
    usage, not the top-level one) with the nearest option it has: `--cvs` -> "did you mean --csv?"."""
    args, extras = parser.parse_known_args(words)
    if extras:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        command: argparse.ArgumentParser = sub.choices[args.command]
        message = f"unrecognized arguments: {' '.join(extras)}"
        known = [o for action in command._actions for o in action.option_strings if o.startswith("--")]
        unknown = next((word.split("=", 1)[0] for word in extras if word.startswith("-")), None)
        close = difflib.get_close_matches(unknown, known, n=1, cutoff=0.75) if unknown else []
        command.error(message + (f" (did you mean {close[0]}?)" if close else ""))
    return args


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
    for name, add in COMMANDS.items():
        if only is None or only == name:
            add(sub)
        else:
            sub.add_parser(name, help=HELP[name])
    return parser
