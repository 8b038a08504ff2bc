"""`logwatch watch` and `logwatch demo` as users run them: settings and their precedence, then real
subprocesses on real files (new launch files, SIGTERM and restart, bad input), read over HTTP."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

from vllm_logwatch.cli import main
from vllm_logwatch.commands.demo import Replayer
from vllm_logwatch.config import DemoSettings, WatchSettings, env_name, load_settings, option_name
from vllm_logwatch.errors import UsageError

pytestmark = pytest.mark.timeout(60)

REPO = ROOT
REAL_LOG = REPO / "tests" / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
# Split on "\n" only, as the follower does (the log holds bare "\r" from progress bars).
REAL_LINES = [line + "\n" for line in REAL_LOG.read_bytes().decode("utf-8").split("\n")[:-1]]
STATS = [line for line in REAL_LINES if "Avg prompt throughput" in line]
E0 = {"engine": "0", "model_name": "unknown"}
MB = 1 << 20


def append(path: Path, data: str | bytes) -> None:
    with open(path, "ab") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def running(watch: Any, expected: float) -> float:
    return float(watch.wait_sample("vllm_logwatch_requests_running", E0, expected))


# -- settings ------------------------------------------------------------------------------------


def test_command_line_beats_environment_beats_defaults() -> None:
    env = {"LOGWATCH_PORT": "9600", "LOGWATCH_LABELS": "cluster=a, host=gpu1", "LOGWATCH_FROM_START": "yes",
           "LOGWATCH_TARGET": "/env/logs", "LOGWATCH_STATS_INTERVAL": ""}
    s = load_settings(WatchSettings, {"target": "/cli/logs", "port": "9500", "labels": None}, env)
    assert (s.target, s.port, s.from_start) == ("/cli/logs", 9500, True)
    assert s.labels == {"cluster": "a", "host": "gpu1"}
    assert (s.listen, s.poll_interval, s.stats_interval, s.pattern) == ("0.0.0.0", 1.0, None, "*.log")
    s = load_settings(WatchSettings, {"labels": ["team=x"], "from_start": False}, env)
    assert (s.target, s.labels, s.from_start) == ("/env/logs", {"team": "x"}, False)
    assert load_settings(DemoSettings, {}, {}).listen == "127.0.0.1"


@pytest.mark.parametrize(("argv", "env", "message"), [
    (["--port", "abc"], {}, "--port 'abc': Input should be a valid integer"),
    ([], {"LOGWATCH_PORT": "70000"}, "LOGWATCH_PORT '70000': Input should be less than or equal to 65535"),
    (["--poll-interval", "0"], {}, "--poll-interval '0': poll interval must be a positive number of seconds"),
    (["--stats-interval", "nan"], {}, "--stats-interval 'nan': stats interval must be a positive number"),
    (["--label", "bad label=x"], {}, "--label 'bad label': not a valid label name, or one the exporter uses"),
    (["--label", "nolabel"], {}, "--label: 'nolabel' is not k=v"),
    (["--tz", "Mars/Olympus"], {}, "--tz 'Mars/Olympus': unknown time zone 'Mars/Olympus'"),
    (["--label", "engine=x"], {}, "--label 'engine': not a valid label name, or one the exporter uses"),
    (["--state-file", "/", "--port", "0"], {}, "--state-file /: is a folder: give the path of a file"),
    (["--state-file", "/dev/null/state/state.json", "--port", "0"], {},
     "--state-file /dev/null/state/state.json: cannot make its folder /dev/null/state: not a directory"),
])
def test_invalid_values_are_one_line_usage_errors(
    argv: list[str], env: dict[str, str], message: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    for key in [k for k in os.environ if k.startswith("LOGWATCH_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["watch", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"logwatch watch: {message}"), err
    assert err.count("\n") == 1


def test_a_missing_target_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOGWATCH_TARGET", raising=False)
    with pytest.raises(UsageError, match=r"^TARGET is required \(or set LOGWATCH_TARGET\)$"):
        load_settings(WatchSettings, {}, {})


def options_table(docs: str, command: str) -> dict[str, str]:
    """docs/watch.md's options table of `command`: the option's spelling -> its variable (two cells)."""
    section = docs.split(f"### `logwatch {command} ", 1)[1].split("\n#", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| `")]
    return {cells[0].removeprefix("| "): cells[1] for cells in rows}


def test_help_and_docs_show_every_option_with_its_variable(capsys: pytest.CaptureFixture[str]) -> None:
    docs = (REPO / "docs" / "watch.md").read_text(encoding="utf-8")  # its options tables
    for command, model in (("watch", WatchSettings), ("demo", DemoSettings)):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        table = options_table(docs, command)
        assert len(table) == len(model.model_fields), (command, sorted(table))  # no row for a gone option
        for field in model.model_fields:
            assert f"[env {env_name(field)}; default " in text, (command, field)
            row = [env for option, env in table.items() if option.startswith(f"`{option_name(field)}")]
            assert row and f"`{env_name(field)}`" in row[0], (command, field, row)


def test_a_device_target_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    # A named pipe is read like stdin (tests/integration/test_watch_stdin.py); a device never ends.
    assert main(["watch", "/dev/zero", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err == ("logwatch watch: /dev/zero is not a regular file: follow the file vLLM's output is teed "
                   "to, pipe it into 'logwatch watch -', or run vLLM under 'logwatch run'\n")


# -- watch, end to end --------------------------------------------------------------------------


def test_watch_follows_the_newest_launch_file(
    tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    old = tmp_path / "serve_20261129_120000.log"
    append(old, "".join(STATS[:2]))
    os.utime(old, (1_700_000_000, 1_700_000_000))
    with logwatch_watch(tmp_path) as watch:
        assert watch.sample("vllm_logwatch_requests_running", E0) is None, "old launches are history"
        new = tmp_path / "serve_20261129_192328.log"
        append(new, "".join(REAL_LINES[:140]))  # start-up lines, then the first two stats lines
        model = {"engine": "0", "model_name": "tiny-llama"}
        assert watch.wait_sample("vllm_logwatch_requests_running", model, 2) == 2
        tokens = watch.sample("vllm_logwatch_generation_tokens_total", model)
        assert tokens == pytest.approx((603.0 + 1727.3) * 2)
        info = {"version": "0.32.0", "model_name": "tiny-llama", "model": "<workdir>/tiny-llama"}
        assert watch.sample("vllm_logwatch_server_info", info) == 1
        status = watch.status()
        assert status["follower"]["path"] == str(new)
        assert status["engines"]["0"]["last"]["running"] == 2
    log = watch.stderr()
    assert re.search(rf"serving http://127\.0\.0\.1:{watch.port}/metrics .*following folder", log), log
    assert f"following {new} (a new launch file)" in log
    assert "Traceback" not in log


def test_an_empty_folder_is_said_once_then_its_first_file_is_read(
    tmp_path: Path, logwatch_watch: Callable[..., Any]
) -> None:
    with logwatch_watch(tmp_path) as watch:
        assert f"no *.log file in {tmp_path} yet: waiting for one" in watch.stderr()
        append(tmp_path / "serve_20261129_192328.log", "".join(REAL_LINES[:140]))
        model = {"engine": "0", "model_name": "tiny-llama"}
        assert watch.wait_sample("vllm_logwatch_requests_running", model, 2) == 2


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
def test_sigterm_exits_0_and_a_restart_counts_no_line_twice(
    tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any], stop: int
) -> None:
    log = tmp_path / "serve_20261129_192328.log"
    state = tmp_path / "state" / "logwatch.json"
    state.parent.mkdir()
    append(log, "".join(STATS[:5]))
    args = ("--from-start", "--state-file", str(state))
    with logwatch_watch(log, *args) as watch:
        watch.wait_sample("vllm_logwatch_stats_lines_total", E0, 5)
        assert watch.stop(stop) == 0
    assert state.exists(), watch.stderr()
    assert f"stopped on {signal.Signals(stop).name}" in watch.stderr()

    append(log, "".join(STATS[5:8]))
    with logwatch_watch(log, *args) as watch:
        # Only the three new lines: 5 + 3 = 8 stats lines in the file, none counted twice.
        poll_until(lambda: watch.status()["pipeline"]["lines_applied"] == 3, 10, "the three new lines")
        assert watch.sample("vllm_logwatch_stats_lines_total", E0) == 3
        assert watch.sample("vllm_logwatch_log_lines_total") == 3
        assert watch.status()["follower"]["offset"] == log.stat().st_size
        assert watch.stop(signal.SIGINT) == 130
    assert f'"offset": {log.stat().st_size}' in state.read_text()


def test_a_10_mb_line_without_newline_is_cut_and_memory_stays_bounded(
    tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    log = tmp_path / "serve_20261129_192328.log"
    log.touch()
    with logwatch_watch(tmp_path, "--from-start") as watch:
        rss_before = watch.rss_bytes()
        append(log, b"x" * (10 * MB))
        watch.wait_sample("vllm_logwatch_lines_cut_total", None, 1)
        poll_until(lambda: watch.status()["follower"]["read_offset"] == 10 * MB, 15, "the whole 10 MB read")
        assert watch.status()["follower"]["held_bytes"] == 0, "the tail of a cut line is skipped, not kept"
        append(log, "\n" + STATS[0])
        running(watch, 16)
        assert watch.rss_bytes() - rss_before < 20 * MB
        assert watch.get("/healthz").status_code == 200


def _unreadable_needs_capability_drop() -> bool:
    return os.geteuid() == 0


def test_an_unreadable_file_is_a_counted_error_and_a_clear_status(
    tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    # Root reads any file whatever its mode (CAP_DAC_OVERRIDE). So, as root, the exporter runs without
    # that capability (dropped from its bounding set before exec): chmod 000 then works as for any user.
    old = tmp_path / "serve_20261129_120000.log"
    append(old, STATS[0])
    os.utime(old, (1_700_000_000, 1_700_000_000))
    with logwatch_watch(tmp_path, "--from-start", "--poll-interval", "0.2",
                        drop_root_read=_unreadable_needs_capability_drop()) as watch:
        running(watch, 16)
        locked = tmp_path / "serve_20261129_192328.log"
        fd = os.open(locked, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o000)  # never readable, not even briefly
        os.write(fd, STATS[1].encode())
        os.close(fd)
        watch.wait_sample("vllm_logwatch_read_errors_total", None, lambda v: v >= 2)
        follower = watch.status()["follower"]
        assert follower["stats"]["last_error"] == f"permission denied: {locked}"
        assert follower["path"] == str(old), "still on the last readable file"
        assert watch.get("/healthz").status_code == 200
        locked.chmod(0o644)
        running(watch, 2)
    assert watch.stderr().count(f"permission denied: {locked}") == 1, "logged once"


def test_ten_thousand_engines_fold_into_other(
    tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    log = tmp_path / "serve_20261129_192328.log"
    log.touch()
    template = STATS[0].replace("Engine 000:", "Engine {:05d}:")
    with logwatch_watch(tmp_path, "--from-start") as watch:
        rss_before = watch.rss_bytes()
        append(log, "".join(template.format(n) for n in range(10_000)))
        poll_until(lambda: watch.status()["pipeline"]["lines_applied"] == 10_000, 30, "10,000 lines applied")
        samples = watch.samples()
        engines = {dict(labels).get("engine") for name, labels in samples
                   if name == "vllm_logwatch_requests_running"}
        assert len(engines) == 65 and "other" in engines
        overflow = ("vllm_logwatch_label_overflow_total", frozenset({("label", "engine")}))
        assert samples[overflow] == 10_000 - 64
        assert watch.rss_bytes() - rss_before < 40 * MB  # 31.6 MB in one CI run (2026-12-06)
        assert watch.get("/healthz").status_code == 200


def test_a_binary_file_in_the_folder_is_read_harmlessly(
    tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    first = tmp_path / "serve_20261129_120000.log"
    append(first, STATS[0])
    os.utime(first, (1_700_000_000, 1_700_000_000))
    with logwatch_watch(tmp_path, "--from-start") as watch:
        running(watch, 16)
        binary = tmp_path / "core_dump.log"
        append(binary, os.urandom(4 * MB).replace(b"\n", b"\0"))  # no newline: one long cut line
        poll_until(lambda: watch.status()["follower"]["path"] == str(binary), 15,
                   "the switch to the binary file")
        watch.wait_sample("vllm_logwatch_lines_cut_total", None, lambda v: v >= 1)
        assert watch.get("/healthz").status_code == 200
        assert watch.sample("vllm_logwatch_requests_running", E0) is None, "a new file is a new launch"
        after = tmp_path / "serve_20261129_192328.log"
        append(after, STATS[1])
        running(watch, 2)


# -- demo ------------------------------------------------------------------------------------------


def test_replayer_writes_launch_files_with_stamps_moving_forward(tmp_path: Path) -> None:
    replayer = Replayer(tmp_path, speed=10_000, passes=2, now=lambda: datetime(2027, 3, 1, 8, 0, 0))
    entries = replayer.entries
    replayer.run()
    first, second = replayer.files
    assert first.name == "demo_20270301_080000.log"
    assert second.name > first.name
    assert first.read_bytes().count(b"\n") == len(entries) == 2301
    assert second.read_bytes().count(b"\n") == len(entries)
    stamps = re.findall(r" (\d\d-\d\d \d\d:\d\d:\d\d) \[", first.read_text(encoding="utf-8"))
    assert stamps[0] == "03-01 08:00:00" and stamps[-1] == "03-01 08:02:56"
    second_stamps = re.findall(r" (\d\d-\d\d \d\d:\d\d:\d\d) \[", second.read_text(encoding="utf-8"))
    assert second_stamps[0] == "03-01 08:02:58", "the next pass starts after the previous one ended"


def test_demo_serves_live_metrics_and_cleans_up(
    tmp_path: Path, free_port: int, poll_until: Callable[..., Any]
) -> None:
    import httpx

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    env.update(TMPDIR=str(scratch), PYTHONUNBUFFERED="1")
    out, err = tmp_path / "demo.out", tmp_path / "demo.err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "vllm_logwatch", "demo", "--speed", "100", "--port",
                                 str(free_port)], stdout=stdout, stderr=stderr, env=env)
    try:
        url = f"http://127.0.0.1:{free_port}/metrics"
        poll_until(lambda: url in out.read_text(), 20, "the URL on stdout")

        def throughput() -> bool:
            try:
                text = httpx.get(url).text
            except httpx.TransportError:
                return False
            series = 'generation_throughput_tokens_per_second{engine="0",model_name="tiny-llama"}'
            return f"vllm_logwatch_{series}" in text

        poll_until(throughput, 20, "live values from the replayed log")
        assert len(list(scratch.iterdir())) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(15)
    assert code == 0, err.read_text()
    assert list(scratch.iterdir()) == [], "the temporary folder is removed"


def test_demo_outlives_a_reader_of_stdout_that_went_away(
    tmp_path: Path, free_port: int, poll_until: Callable[..., Any]
) -> None:
    """`logwatch demo | head -c 0`: the announcement gets EPIPE; demo says so once and goes on serving."""
    import httpx

    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    env.update(TMPDIR=str(tmp_path), PYTHONUNBUFFERED="1")
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read: the first write fails with EPIPE
    err = tmp_path / "demo.err"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "vllm_logwatch", "demo", "--speed", "100", "--port",
                                 str(free_port)], stdout=write_end, stderr=stderr, env=env)
    os.close(write_end)
    try:
        poll_until(lambda: "stdout: broken pipe" in err.read_text(), 20, "the EPIPE said on stderr")
        assert proc.poll() is None, err.read_text()

        def serving() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{free_port}/healthz").status_code == 200
            except httpx.TransportError:
                return False

        poll_until(serving, 10, "demo still serving")
    finally:
        proc.send_signal(signal.SIGHUP)
        code = proc.wait(15)
    assert code == 0, err.read_text()
    text = err.read_text()
    assert text.count("stdout: broken pipe") == 1 and "Traceback" not in text, text


def test_demo_speed_too_small_to_wait_is_a_usage_error() -> None:
    done = subprocess.run([sys.executable, "-m", "vllm_logwatch", "demo", "--speed", "1e-300", "--port", "0"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr == "logwatch demo: --speed '1e-300': speed must be a number from 0.01 to 10000\n"
