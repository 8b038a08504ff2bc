"""`logwatch parse` end to end: output formats, kinds, inputs, and every bad input as one line on stderr
with the right exit code (0 ok, 1 no stats lines, 2 usage or I/O error) and never a traceback."""

from __future__ import annotations

import csv
import errno
import gzip
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, TESTS

from vllm_logwatch import cli
from vllm_logwatch.parsing.events import STATS_COLUMNS

DATA = TESTS / "data"
REAL_CPU_LOG = next((DATA / "real-vllm-cpu").glob("serve_*.log"))


def logwatch(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_logwatch", "parse", *args],
        input=stdin.decode("latin-1") if stdin is not None else None,
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["parse", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def jsonl(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def assert_one_line_error(err: str, *needles: str) -> None:
    assert err.startswith("logwatch parse: "), err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


# --- output ---------------------------------------------------------------------------------------


def test_csv_header_and_rows_real_log() -> None:
    proc = logwatch(str(DATA / "002.log"), "--tz", "UTC")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert tuple(rows[0]) == STATS_COLUMNS
    assert len(rows) == 6
    first = dict(zip(rows[0], rows[1], strict=True))
    assert first["time"] == "2026-05-19T10:13:11+00:00"
    assert first["file"].endswith("002.log") and first["line"] == "1" and first["engine"] == "0"
    assert (first["generation_throughput"], first["running"], first["waiting"]) == ("1055.3", "18", "43")
    assert (first["swapped"], first["cpu_kv_cache_usage_pct"], first["extra"]) == ("", "", "")


def test_csv_extra_column_is_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "serve_20261102_120000.log"
    log.write_text(
        "(APIServer pid=1) INFO 11-02 12:00:10 [loggers.py:236] Engine 000: Avg prompt throughput: 1.0 "
        "tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, "
        "Preemptions: 2, GPU KV cache usage: 4.8%, Prefix cache hit rate: 0.0%\n"
    )
    code, out, _ = run(capsys, str(log), "--tz", "UTC")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert json.loads(rows[0]["extra"]) == {"preemptions": 2.0}


def test_csv_v0_prefix_line_merged(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--tz", "UTC", str(DATA / "012.log"))
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["line"] for r in rows] == ["1", "3", "5"]
    rates = {(r["prefix_cache_hit_rate_pct"], r["prefix_cache_hit_rate_cpu_pct"]) for r in rows}
    assert rates == {("0.0", "90.0")}
    assert {r["waiting"] for r in rows} == {"0"} and {r["swapped"] for r in rows} == {"0"}


def test_jsonl_records_have_kind_first(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--jsonl", "--tz", "UTC", str(DATA / "012.log"))
    assert code == 0, err
    records = jsonl(out)
    assert len(records) == 3
    for record in records:
        assert next(iter(record)) == "kind" and record["kind"] == "stats"
        assert record["prefix_cache_hit_rate_cpu_pct"] == 90.0  # V0 prefix line merged in
        assert list(record)[1:] == list(STATS_COLUMNS)


def test_kind_transfer_gives_kv_transfer_records_with_their_engine(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    hdr = "(APIServer pid=1) INFO 11-29 10:00:10 "
    stats = (hdr + "[loggers.py:335] Engine {:03d}: Avg prompt throughput: 10.0 tokens/s, Avg generation "
             "throughput: 20.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, GPU KV cache usage: 4.0%\n")
    xfer = hdr + "[metrics.py:108] KV Transfer metrics: Num successful transfers={}, Num failed transfers=0\n"
    log = tmp_path / "serve_20261129_100000.log"
    secret = hdr + "[logger.py:1] Received request: 'secret prompt'\n"
    log.write_text(stats.format(0) + xfer.format(4) + secret + stats.format(1) + xfer.format(6))
    code, out, err = run(capsys, "--jsonl", "--kind", "transfer", "--tz", "UTC", str(log))
    assert code == 0, err
    records = jsonl(out)
    assert [(r["kind"], r["engine"], r["successful_transfers"], r["line"]) for r in records] == [
        ("transfer", 0, 4, 2), ("transfer", 1, 6, 5)]
    assert records[0]["time"] == "2026-11-29T10:00:10+00:00" and "secret" not in out


@pytest.mark.parametrize(
    ("kind", "log", "expected"),
    [
        ("spec", "019.log", ["spec", "spec"]),
        ("access", "057.log", ["access"] * 15),
        ("log", "021.log", ["log"] * 3),
        ("stats", "021.log", ["stats"] * 2),
    ],
)
def test_kind_filter(capsys: pytest.CaptureFixture[str], kind: str, log: str, expected: list[str]) -> None:
    code, out, err = run(capsys, "--jsonl", "--kind", kind, "--tz", "UTC", str(DATA / log))
    assert code == 0, err
    assert [r["kind"] for r in jsonl(out)] == expected


def test_kind_mfu_gives_every_mfu_line_and_says_when_none(capsys: pytest.CaptureFixture[str]) -> None:
    log = next((DATA / "compare" / "mns16-prefix").glob("serve_*.log"))  # --enable-mfu-metrics
    code, out, err = run(capsys, "--kind", "mfu", "--tz", "UTC", str(log))
    assert code == 0, err
    records = jsonl(out)
    raw = [line for line in log.read_text().splitlines() if "MFU: " in line]
    assert len(records) == len(raw) == 32
    assert {r["kind"] for r in records} == {"mfu"} and all(r["tflops_per_device"] >= 0 for r in records)
    assert [r["line"] for r in records] == [n for n, line in enumerate(log.read_text().splitlines(), 1)
                                            if "MFU: " in line]
    code, out, err = run(capsys, "--kind", "mfu", "--tz", "UTC", str(REAL_CPU_LOG))
    assert (code, out) == (1, "")
    assert err == "logwatch parse: no mfu records in 1 file (no MFU lines: vLLM runs without " \
        "--enable-mfu-metrics (vLLM >= 0.14))\n"


def test_the_kinds_offered_are_the_kinds_written(capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_logwatch.parsing.columns import RECORD_KINDS as KINDS

    with pytest.raises(SystemExit):
        cli.main(["parse", "--kind", "nonsense", str(REAL_CPU_LOG)])
    offered = capsys.readouterr().err.split("(choose from ", 1)[1].split(")", 1)[0]
    assert offered == ", ".join(f"'{kind}'" for kind in KINDS)


def test_kind_info_real_log(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--jsonl", "--kind", "info", "--tz", "UTC", str(REAL_CPU_LOG))
    assert code == 0
    records = jsonl(out)
    assert {r["kind"] for r in records} == {"info"}
    merged: dict[str, object] = {}
    for r in records:
        merged.update(r)
    assert merged["vllm_version"] == "0.32.0"
    assert merged["served_model_name"] == "tiny-llama"
    assert merged["port"] == 18000
    assert merged["kv_cache_tokens"] == 524288
    assert merged["server_listening"] is True
    assert records[0]["new_launch"] is True


def test_kind_log_has_no_message_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--jsonl", "--kind", "log", "--tz", "UTC", str(REAL_CPU_LOG))
    assert code == 0
    records = jsonl(out)
    assert records and {r["kind"] for r in records} == {"log"}
    assert "ulimit" not in out and "Triton" not in out and "LD_PRELOAD" not in out


def test_kind_all_in_file_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--jsonl", "--kind", "all", "--tz", "UTC", str(DATA / "017.log"))
    assert code == 0
    records = jsonl(out)
    assert [r["kind"] for r in records] == ["stats"] + ["access"] * 7
    assert [r["line"] for r in records] == sorted(r["line"] for r in records)  # type: ignore[type-var]
    assert "127.0.0.1" not in out


@pytest.mark.parametrize("kind", ["spec", "transfer", "info", "access", "log", "all"])
def test_other_kinds_default_to_json_lines_and_refuse_csv(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    mixed = tmp_path / "mixed.log"  # a record of every kind
    transfer = ("(APIServer pid=1) INFO 11-29 10:00:10 [metrics.py:108] KV Transfer metrics: "
                "Num successful transfers=4, Num failed transfers=0\n")
    mixed.write_bytes((DATA / "021.log").read_bytes() + (DATA / "019.log").read_bytes() + transfer.encode()
                      + REAL_CPU_LOG.read_bytes())
    code, out, err = run(capsys, "--kind", kind, "--year", "2025", str(mixed))
    assert code == 0, err
    assert jsonl(out)
    assert all(kind in ("all", r["kind"]) or (kind == "log" and r["kind"] == "unparsed") for r in jsonl(out))
    code, out, err = run(capsys, "--csv", "--kind", kind, str(DATA / "021.log"))
    assert code == 2 and out == ""
    assert_one_line_error(err, "--csv writes stats, iterations and requests records", "--jsonl")


@pytest.mark.parametrize("kind", ["iterations", "requests"])
def test_iterations_and_requests_default_to_json_lines_and_take_csv(
    capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    log = str(DATA / "latency" / "serve.log.gz")
    code, out, err = run(capsys, "--kind", kind, log)
    assert code == 0, err
    assert {r["kind"] for r in jsonl(out)} == {kind[:-1]}
    code, csv_out, err = run(capsys, "--kind", kind, "--csv", log)
    assert code == 0, err
    assert len(csv_out.splitlines()) == len(out.splitlines()) + 1  # the header
    code, out, err = run(capsys, "--kind", kind, str(DATA / "021.log"))
    assert code == 1 and out == ""
    assert_one_line_error(err, f"no {kind} records", "--enable-log")


# --- inputs ---------------------------------------------------------------------------------------


def test_glob_and_multiple_files_in_order(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for name in ("003", "039", "002"):
        shutil.copy(DATA / f"{name}.log", tmp_path / f"serve_{name}.log")
    code, out, _ = run(capsys, "--jsonl", "--tz", "UTC", str(tmp_path / "serve_*.log"))
    assert code == 0
    files = [Path(str(r["file"])).name for r in jsonl(out)]
    assert files == ["serve_002.log"] * 5 + ["serve_003.log"] + ["serve_039.log"] * 5  # sorted, like a shell
    code, out, _ = run(
        capsys, "--jsonl", "--tz", "UTC", str(tmp_path / "serve_039.log"), str(tmp_path / "serve_003.log"))
    assert [Path(str(r["file"])).name for r in jsonl(out)] == ["serve_039.log"] * 5 + ["serve_003.log"]


def test_file_name_with_glob_characters(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "serve[1].log"
    shutil.copy(DATA / "003.log", log)
    code, out, err = run(capsys, "--jsonl", str(log))
    assert code == 0, err
    assert len(jsonl(out)) == 1


def test_stdin() -> None:
    proc = logwatch("--jsonl", "--tz", "UTC", "-", stdin=(DATA / "039.log").read_bytes())
    assert proc.returncode == 0, proc.stderr
    records = jsonl(proc.stdout)
    assert len(records) == 5
    assert {r["file"] for r in records} == {"<stdin>"}
    assert [r["line"] for r in records] == [1, 2, 3, 4, 5]


def test_gzip_read_transparently(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    gz = tmp_path / "serve_20261129T192328Z.log.gz"
    gz.write_bytes(gzip.compress(REAL_CPU_LOG.read_bytes()))
    code, out, err = run(capsys, "--jsonl", "--tz", "UTC", str(gz))
    assert code == 0, err
    records = jsonl(out)
    assert len(records) == 78
    assert (records[0]["line"], records[0]["time"]) == (136, "2026-11-29T19:23:55+00:00")
    code, out, _ = run(capsys, "--tz", "UTC", str(gz))
    assert code == 0 and len(out.splitlines()) == 79


def test_invalid_utf8_inside_a_real_log(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = (DATA / "002.log").read_bytes().splitlines(keepends=True)
    damaged = [
        b"\xff\xfe garbage \xc3\x28\n", lines[0], b"\x80\xc0" + lines[1],
        lines[2].replace(b"(APIServer", b"\xe2\x82(APIServer"), b"\xed\xa0\x80\n", *lines[3:],
    ]
    log = tmp_path / "damaged.log"
    log.write_bytes(b"".join(damaged))
    for args in (["--jsonl"], ["--jsonl", "--kind", "all"], []):
        code, out, err = run(capsys, *args, "--tz", "UTC", str(log))
        assert code == 0, err
        n = len(jsonl(out)) if args else len(out.splitlines()) - 1
        assert n == 5, (args, out)
    # invalid bytes inside a value make that one record unreadable: counted, never fatal
    log.write_bytes(lines[0] + lines[1][:-1] + b" \xe2\x82\n" + lines[2])
    code, out, _ = run(capsys, "--jsonl", "--kind", "all", "--tz", "UTC", str(log))
    assert code == 0
    assert [r["kind"] for r in jsonl(out)] == ["stats", "unparsed", "stats"]


def test_ten_megabyte_line_then_stats_lines(tmp_path: Path) -> None:
    """A 10 MB line (no newline for 10 MB) is skipped; the stats lines after it are found."""
    log = tmp_path / "long.log"
    with log.open("wb") as fh:
        fh.write(b"x" * (10 << 20) + b"\n")
        fh.write((DATA / "002.log").read_bytes())
    proc = logwatch("--jsonl", "--tz", "UTC", str(log))
    assert proc.returncode == 0, proc.stderr
    assert [r["line"] for r in jsonl(proc.stdout)] == [2, 3, 4, 5, 6]
    proc = logwatch("--jsonl", "--kind", "all", "--tz", "UTC", str(log))
    assert [r["line"] for r in jsonl(proc.stdout)] == [2, 3, 4, 5, 6]


_RSS = (
    "import resource, sys; from vllm_logwatch.cli import main; code = main(sys.argv[1:]); "
    "sys.stdout.flush(); print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"
)


def _peak_rss_kib(*args: str) -> int:
    proc = subprocess.run([sys.executable, "-c", _RSS, "parse", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    code, rss = proc.stderr.split()[-2:]
    assert code == "0", proc.stderr
    return int(rss)


def test_memory_bounded_by_line_cap(tmp_path: Path) -> None:
    """Peak memory does not grow with a line's length: a 32 MB line costs no 32 MB."""
    small = tmp_path / "small.log"
    small.write_bytes((DATA / "002.log").read_bytes())
    big = tmp_path / "big.log"
    with big.open("wb") as fh:
        fh.write(b"y" * (32 << 20))  # no newline: one 32 MB line
        fh.write(b"\n" + (DATA / "002.log").read_bytes())
    for kind in ("stats", "all"):
        base = _peak_rss_kib("--jsonl", "--kind", kind, str(small))
        peak = _peak_rss_kib("--jsonl", "--kind", kind, str(big))
        assert peak - base < 24 << 10, (kind, base, peak)


# --- bad inputs: one line on stderr, the right exit code ----------------------------------------------


def test_missing_file() -> None:
    proc = logwatch("/nonexistent/serve.log")
    assert proc.returncode == 2 and proc.stdout == ""
    assert_one_line_error(proc.stderr, "/nonexistent/serve.log", "no such file")


def test_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, str(tmp_path))
    assert code == 2
    assert_one_line_error(err, "is a directory")


def test_glob_matching_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, str(tmp_path / "nothing_*.log"))
    assert code == 2
    assert_one_line_error(err, "no file matches")


def test_random_binary_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    blob = tmp_path / "random.bin"
    blob.write_bytes(b"\x00" + os.urandom(64 << 10))  # never the gzip magic
    code, out, err = run(capsys, str(blob))
    assert code == 1 and out == ""
    assert_one_line_error(err, "no stats lines", "--disable-log-stats")


def test_empty_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    for args in ([], ["--jsonl"], ["--jsonl", "--kind", "all"]):
        code, out, err = run(capsys, *args, str(empty))
        assert code == 1 and out == ""
        assert_one_line_error(err, "no stats lines in 1 file")


@pytest.mark.parametrize(("kind", "what"), [
    ("spec", "speculative-decoding"), ("transfer", "KV or EC transfer"), ("info", "start-up"),
    ("access", "HTTP access"), ("log", "warning or error"),
])
def test_no_record_of_the_asked_kind_is_exit_1_for_every_kind(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str, what: str
) -> None:
    """As for stats: exit 1 with a one-line hint when the inputs hold none of the records asked for."""
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    code, out, err = run(capsys, "--jsonl", "--kind", kind, str(empty))
    assert code == 1 and out == ""
    assert_one_line_error(err, f"no {kind} records in 1 file", what)
    code, out, err = run(capsys, "--kind", kind, str(DATA / "002.log"), str(empty))  # stats only
    assert code == 1 and out == ""
    assert_one_line_error(err, f"no {kind} records in 2 files")


def test_no_stats_hint_mentions_disable_log_stats(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "startup.log"
    shutil.copy(DATA / "049.log", log)  # start-up lines only
    code, _, err = run(capsys, str(log))
    assert code == 1
    assert_one_line_error(err, "--disable-log-stats")


def test_damaged_stats_lines_are_named_not_blamed_on_stats_logging(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Lines that start like stats lines but cannot be read: the hint says so, with the first one."""
    log = tmp_path / "damaged.log"
    head = "(APIServer pid=1) INFO 11-29 19:26:{:02d} [loggers.py:259] Engine 000: Avg prompt throughput: "
    log.write_text("Loading weights\n" + head.format(5) + "1.0 tokens/s, Avg generation throughput: x"
                   " tokens/s\n" + head.format(15) + "banana\n")
    for args in ([], ["--jsonl"]):
        code, out, err = run(capsys, *args, str(log))
        assert code == 1 and out == ""
        assert_one_line_error(err, "2 lines look like stats lines but could not be read", "line 2")
        assert "--disable-log-stats" not in err


def test_access_lines_without_stats(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_text('INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK\n' * 3)
    code, _, err = run(capsys, str(log))
    assert code == 1
    assert_one_line_error(err, "3 HTTP requests", "--disable-log-stats")


def test_stats_logging_disabled_by_vllm(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "dp.log"
    log.write_text(
        "(APIServer pid=1) INFO 11-02 12:00:00 [api_server.py:150] Defaulting api_server_count to "
        "data_parallel_size (2).\n"
        "(ApiServer_0 pid=2) WARNING 11-02 12:00:01 [async_llm.py:150] AsyncLLM created with "
        "api_server_count more than 1; disabling stats logging to avoid incomplete stats.\n"
        + '(ApiServer_0 pid=2) INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK\n' * 4
    )
    for args in ([], ["--jsonl"], ["--jsonl", "--kind", "all"]):
        code, _, err = run(capsys, *args, str(log))
        assert code == 1
        assert_one_line_error(err, "vLLM disabled stats logging")
    proc = logwatch(str(log))
    assert proc.returncode == 1
    assert_one_line_error(proc.stderr, "vLLM disabled stats logging")


def test_truncated_gzip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = gzip.compress(REAL_CPU_LOG.read_bytes())
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) // 2])
    for args in ([], ["--jsonl"], ["--jsonl", "--kind", "all"]):
        code, _, err = run(capsys, *args, str(cut))
        assert code == 2
        assert_one_line_error(err, "cut.log.gz", "gzip")


def test_rows_read_before_a_read_error_are_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """The writers hold rows to write them in batches: an error of the input still finds the rows read
    before it written, as each row was when it was read."""
    good = tmp_path / "good.log"
    good.write_bytes(REAL_CPU_LOG.read_bytes())
    expected_rows = run(capsys, str(good))[1].count("\n") - 1
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(REAL_CPU_LOG.read_bytes())[:100])
    for args, header in (([], 1), (["--jsonl"], 0)):
        code, out, _ = run(capsys, *args, str(good), str(cut))
        assert code == 2
        assert out.count("\n") == expected_rows + header > header


def test_corrupt_gzip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.log.gz"
    bad.write_bytes(b"\x1f\x8b" + b"this is not deflate data at all" * 10)
    for args in ([], ["--jsonl"], ["--jsonl", "--kind", "all"]):
        code, _, err = run(capsys, *args, str(bad))
        assert code == 2
        assert_one_line_error(err, "bad.log.gz", "gzip")


def test_bad_file_after_good_file_still_exit_2(tmp_path: Path) -> None:
    proc = logwatch("--jsonl", str(DATA / "003.log"), str(tmp_path / "missing.log"))
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, "missing.log")


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="running as root: chmod 000 does not stop root reading "
    "(test_permission_denied_simulated covers it)",
)
def test_permission_denied(tmp_path: Path) -> None:
    log = tmp_path / "secret.log"
    shutil.copy(DATA / "003.log", log)
    log.chmod(0)
    try:
        proc = logwatch(str(log))
    finally:
        log.chmod(0o644)
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, "permission denied")


def test_permission_denied_simulated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root reads any file: make the open itself fail as it would for another user."""
    import builtins

    from vllm_logwatch.offline.reading import inputs as sources

    log = tmp_path / "secret.log"
    shutil.copy(DATA / "003.log", log)
    real_open = builtins.open

    def deny(file: object, *args: object, **kwargs: object) -> object:
        if str(file) == str(log):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(sources, "open", deny, raising=False)
    for args in ([], ["--jsonl"], ["--jsonl", "--kind", "all"]):
        code, _, err = run(capsys, *args, str(log))
        assert code == 2
        assert_one_line_error(err, "permission denied")


def test_bad_zone(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--tz", "Not/AZone", str(DATA / "002.log"))
    assert code == 2
    assert_one_line_error(err, "Not/AZone")
    proc = logwatch("--tz", "Not/AZone", str(DATA / "002.log"))
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, "unknown time zone")


def test_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    log = tmp_path / "many.log"
    log.write_bytes((DATA / "002.log").read_bytes() * 20000)
    proc = subprocess.run(
        f"{shlex.quote(sys.executable)} -m vllm_logwatch parse --jsonl {shlex.quote(str(log))} | head -n 1",
        shell=True,
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert proc.stdout.count("\n") == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


# --- what `logwatch parse` loads --------------------------------------------------------------------


def test_parse_does_not_import_server_modules() -> None:
    code = (
        "import sys; from vllm_logwatch.cli import main; "
        f"main(['parse', '--jsonl', '--kind', 'all', {str(DATA / '021.log')!r}]); "
        f"main(['parse', {str(DATA / '002.log')!r}]); "
        "loaded = sorted(m for m in ('fastapi', 'uvicorn', 'watchdog', 'prometheus_client', 'starlette') "
        "if m in sys.modules); print('LOADED', loaded, file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "LOADED []" in proc.stderr, proc.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("args", [
    ["parse", "--csv", str(REAL_CPU_LOG)],
    ["parse", "--jsonl", "--kind", "all", str(REAL_CPU_LOG)],
    ["parse", "--openmetrics", str(REAL_CPU_LOG)],
    ["summary", str(REAL_CPU_LOG)],
], ids=["csv", "jsonl", "openmetrics", "summary"])
def test_full_disk_on_stdout_is_one_line_and_exit_2(args: list[str]) -> None:
    """Writes to a full disk fail loudly, once, naming the output (not the input being read)."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", *args], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr == f"logwatch {args[0]}: cannot write the output: No space left on device\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_plot_to_a_full_disk_is_an_error(tmp_path: Path) -> None:
    """matplotlib's own file writes lose this error: the image is rendered in memory and written by us."""
    pytest.importorskip("matplotlib")
    command = [sys.executable, "-m", "vllm_logwatch", "plot", str(REAL_CPU_LOG), "-o", "/dev/full"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr == "logwatch plot: /dev/full: cannot write (No space left on device)\n"


@pytest.mark.parametrize("command", ["parse", "summary"])
def test_closed_stdout_is_one_line_and_exit_2(command: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", command, str(REAL_CPU_LOG)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60, cwd=ROOT,
                          preexec_fn=lambda: os.close(1))
    assert proc.returncode == 2
    assert proc.stderr == f"logwatch {command}: standard output is closed: nowhere to write\n"


@pytest.mark.parametrize("command", ["parse", "summary"])
def test_closed_stdin_is_one_line_and_exit_2(command: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", command, "-"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          preexec_fn=lambda: os.close(0))
    assert proc.returncode == 2
    assert proc.stderr == f"logwatch {command}: -: standard input is closed\n"


@pytest.mark.parametrize("year", ["99999", "0", "abc"])
def test_year_out_of_range_is_a_usage_error(year: str) -> None:
    proc = logwatch("--year", year, str(REAL_CPU_LOG))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().endswith(f"argument --year: '{year}' is not a year such as 2026")


def test_a_misspelt_option_names_the_command_and_the_nearest_option() -> None:
    """`parse --cvs`: the subcommand's usage and "did you mean --csv?", not the top-level usage."""
    proc = logwatch(str(DATA / "003.log"), "--cvs")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("usage: logwatch parse "), proc.stderr
    assert proc.stderr.endswith(
        "logwatch parse: error: unrecognized arguments: --cvs (did you mean --csv?)\n")


def test_a_glob_in_a_folder_it_may_not_list_says_permission_denied(tmp_path: Path) -> None:
    """Not "no file matches": the folder holds files, logwatch may not list them (root without its
    power to read any folder, as another user)."""
    from support import drop_dac_capabilities

    locked = tmp_path / "locked"
    locked.mkdir()
    shutil.copy(DATA / "003.log", locked / "serve.log")
    locked.chmod(0o300)  # write and enter, no listing
    try:
        proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", "parse", str(locked / "*.log")],
                              capture_output=True, text=True, timeout=60, cwd=ROOT,
                              preexec_fn=drop_dac_capabilities)
    finally:
        locked.chmod(0o755)
    assert proc.returncode == 2 and proc.stdout == ""
    assert_one_line_error(proc.stderr, f"{locked}: permission denied")
    assert "no file matches" not in proc.stderr


def test_every_path_reads_the_same_stats_lines_of_a_custom_format(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A custom logging format (no vLLM header): request lines whose stop strings and output hold
    stats-shaped text are not stats lines, in `--csv` (the scanner) as in `--kind all` (the parser)."""
    fake = ("Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 99999.0 tokens/s, Running: 77 "
            "reqs, Waiting: 0 reqs, GPU KV cache usage: 99.0%, X: y")
    lines = []
    for i in range(6):
        t = f"2026-12-02 10:00:{i * 10:02d},123"
        lines += [f"{t} INFO vllm.v1.metrics.loggers: Engine 000: Avg prompt throughput: 10.0 tokens/s, "
                  "Avg generation throughput: 100.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache "
                  "usage: 1.0%, Prefix cache hit rate: 0.0%",
                  f"{t} INFO vllm.entrypoints.logger: Received request chatcmpl-{i}: params: "
                  f"SamplingParams(n=1, stop=['{fake}'], max_tokens=16), lora_request: None.",
                  f"{t} INFO vllm.entrypoints.logger: Generated response chatcmpl-{i}: output: '{fake}', "
                  "output_token_ids: None, finish_reason: stop"]
    log = tmp_path / "custom_20261202_100000.log"
    log.write_text("\n".join(lines) + "\n")
    code, out, _ = run(capsys, str(log), "--csv")
    assert code == 0 and len(out.splitlines()) == 1 + 6
    code, out, _ = run(capsys, str(log), "--jsonl", "--kind", "all")
    kinds = [json.loads(row)["kind"] for row in out.splitlines()]
    assert code == 0 and kinds.count("stats") == 6
    assert all(json.loads(row).get("running") in (None, 2) for row in out.splitlines())
