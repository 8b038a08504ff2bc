"""`logwatch compare` on small inputs: one launch, a launch without start-up lines, launches of two
vLLM versions, a restart inside one file, and bad options: clear output or a one-line error."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from support import TESTS

from vllm_logwatch.cli import main

REAL = TESTS / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
EXCERPT = TESTS / "data" / "002.log"
# Two start-up lines as vLLM 0.13 printed them (quoted in vllm-project/vllm#31683).
V013 = (
    "(APIServer pid=116718) INFO 01-04 14:48:03 [api_server.py:1277] vLLM API server version "
    "0.13.0rc2.dev185+g00a8d7628\n"
    "(APIServer pid=116718) INFO 01-04 14:48:03 [utils.py:253] non-default args: {'model_tag': "
    "'amd/Mixtral-8x7B-Instruct-v0.1-FP8-KV', 'port': 8002, 'model': "
    "'amd/Mixtral-8x7B-Instruct-v0.1-FP8-KV', 'max_model_len': 8192, 'tensor_parallel_size': 2}\n"
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["compare", *args, "--tz", "UTC"])
    out, err = capsys.readouterr()
    return code, out, err


def compare_json(capsys: pytest.CaptureFixture[str], *files: Path) -> dict:  # type: ignore[type-arg]
    code, out, err = run(capsys, *map(str, files), "--json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_single_launch(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(REAL))
    assert code == 0
    assert "(one launch: nothing to compare it with)" in out and "Throughput by concurrency" in out
    doc = compare_json(capsys, REAL)
    assert len(doc["launches"]) == 1 and doc["differing_args"] == {}
    rows = doc["launches"][0]["by_concurrency"]
    assert all(r["running_min"] <= (r["running_max"] or r["running_min"]) for r in rows)
    # Only the intervals a count was held for are in rows: fewer than the busy ones.
    assert 0 < sum(r["intervals"] for r in rows) < doc["launches"][0]["busy_intervals"]
    assert all(r["tbt_ms"] == pytest.approx(1000 / r["per_request_tps"]) for r in rows)


def test_no_steady_decode_table(capsys: pytest.CaptureFixture[str]) -> None:
    """No 'steady decode' table or key: its rule (prompt <= 2% of generation) held on no real launch but
    under a closed-loop client, where its rows were the slow ones (tests/unit/offline/summary)."""
    logs = sorted((TESTS / "data" / "compare").glob("*/serve_*.log"))[:2]
    code, out, _ = run(capsys, *map(str, logs))
    assert code == 0 and "steady" not in out.lower()
    assert all("steady_decode" not in launch for launch in compare_json(capsys, *logs)["launches"])


def test_launch_without_start_up_lines(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bare = tmp_path / "bare.log"
    bare.write_text("".join(line for line in REAL.read_text().splitlines(keepends=True)
                            if "Avg prompt throughput" in line))
    doc = compare_json(capsys, REAL, bare)
    assert doc["args_unknown"] == ["bare.log"] and doc["differing_args"] == {}
    bare_launch = doc["launches"][1]
    assert bare_launch["args"] is None and bare_launch["facts"] == {} and bare_launch["matrix"] is None
    code, out, _ = run(capsys, str(REAL), str(bare))
    assert code == 0
    assert "Arguments unknown (no `non-default args:` or `args:` line in the log): bare.log" in out
    assert "Start-up lines not in the log: arguments and facts unknown." in out


def test_two_vllm_versions(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    old = tmp_path / "old.log"
    old.write_text(V013 + EXCERPT.read_text())
    doc = compare_json(capsys, old, REAL)
    assert doc["differing_facts"]["vllm_version"] == ["0.13.0rc2.dev185+g00a8d7628", "0.32.0"]
    assert doc["differing_args"]["max_model_len"] == [8192, 1024]
    assert doc["differing_args"]["max_num_seqs"] == ["(default)", 16]
    assert "port" not in doc["differing_args"] and "model_tag" not in doc["differing_args"]
    code, out, _ = run(capsys, str(old), str(REAL), "--markdown")
    assert code == 0 and "| vLLM | 0.13.0rc2.dev185+g00a8d7628 | 0.32.0 |" in out


def test_restart_inside_one_file_is_a_launch(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    both = tmp_path / "serve.log"
    both.write_text(REAL.read_text() + REAL.read_text().replace("'max_num_seqs': 16", "'max_num_seqs': 4"))
    doc = compare_json(capsys, both)
    assert [la["launch"] for la in doc["launches"]] == ["serve.log", "serve.log #2"]
    assert doc["differing_args"] == {"max_num_seqs": [16, 4]}
    assert doc["launches"][1]["label"] == "serve.log #2: max_num_seqs=4"


@pytest.mark.parametrize(("option", "message"), [
    ("-", "standard output carries the tables"),
    ("cmp.gif", "the image is .png, .svg or .pdf"),
])
def test_bad_image_names(capsys: pytest.CaptureFixture[str], option: str, message: str) -> None:
    code, out, err = run(capsys, str(REAL), "-o", option)
    assert code == 2 and out == "" and message in err and len(err.splitlines()) == 1


def test_no_stats_lines(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text(V013)
    code, out, err = run(capsys, str(empty))
    assert code == 1 and out == "" and "no stats lines" in err and len(err.splitlines()) == 1


def test_preemptions_are_summed_per_row(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    lines = []
    for i, (running, preempted) in enumerate([(2, 3), (2, 4), (5, 0), (5, 7)]):
        lines.append(f"(APIServer pid=1) INFO 12-01 10:00:{10 * i:02d} [loggers.py:335] Engine 000: Avg "
                     f"prompt throughput: 1.0 tokens/s, Avg generation throughput: 10.0 tokens/s, Running: "
                     f"{running} reqs, Waiting: 1 reqs, Preemptions: {preempted}, GPU KV cache usage: 9.0%\n")
    log.write_text("".join(lines))
    rows = compare_json(capsys, log)["launches"][0]["by_concurrency"]
    assert [(r["running"], r["preemptions"]) for r in rows] == [("2", 7), ("5", 7)]
    rows = compare_json(capsys, REAL)["launches"][0]["by_concurrency"]
    assert {r["preemptions"] for r in rows} == {None}  # vLLM 0.32 on CPU never prints the field


def test_a_namespace_lists_defaults_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The documented limit: vLLM < 0.9 prints every argument, so its defaults differ from `(default)`."""
    old = tmp_path / "old.log"
    old.write_text("INFO 01-13 11:35:20 api_server.py:212] args: Namespace(host=None, port=8000, "
                   "model='facebook/opt-125m', dtype='auto', max_num_seqs=16)\n" + EXCERPT.read_text())
    differing = compare_json(capsys, old, REAL)["differing_args"]
    assert differing["dtype"] == ["auto", "bfloat16"]
    assert "max_num_seqs" not in differing  # 16 in both
    new = tmp_path / "new.log"
    new.write_text(REAL.read_text().replace("'dtype': 'bfloat16', ", ""))
    assert compare_json(capsys, old, new)["differing_args"]["dtype"] == ["auto", "(default)"]


def test_the_same_arguments_twice(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    again = tmp_path / "again.log"
    again.write_text(REAL.read_text().replace("'port': 18000", "'port': 18001"))  # the port is not compared
    code, out, _ = run(capsys, str(REAL), str(again))
    assert code == 0
    assert "(none: the launches that logged their arguments give the same ones; host, port, model_tag" in out
    assert compare_json(capsys, REAL, again)["differing_args"] == {}


LATENCY = TESTS / "data" / "latency" / "serve.log.gz"


def test_engine_step_time_by_running_streams(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A launch whose file has iteration lines gets summary/steps.py's tables (the same numbers as
    `summary --json`'s steps); a launch without them gets none; a file of two launches gets none and
    says why."""
    code, out, err = run(capsys, str(LATENCY), str(REAL), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert main(["summary", str(LATENCY), "--json", "--tz", "UTC"]) == 0
    steps = json.loads(capsys.readouterr()[0])["steps"]
    by_file = {la["file"]: la for la in doc["launches"]}
    assert by_file[str(LATENCY)]["steps"] == steps
    assert [r["running"] for r in steps[0]["decode"]][:1] == [1] and steps[0]["decode"][0]["steps"] > 1000
    assert by_file[str(REAL)]["steps"] == []
    code, text, _ = run(capsys, str(LATENCY), str(REAL))
    decode = steps[0]["decode"]
    assert "Engine step time by running streams, engine 0" in text and "Time between tokens by" not in text
    assert f"{decode[0]['running']}        {decode[0]['steps']:,}" in text
    assert f"{decode[0]['p50_ms']:g}" in text and f"{decode[0]['p90_ms']:g}" in text
    # Two launches in one file: its steps belong to both, so neither gets them.
    two = tmp_path / "two.log"
    with gzip.open(LATENCY, "rt", encoding="utf-8") as f:
        lines = f.read()
    two.write_text(lines + lines, encoding="utf-8")
    code, text, err = run(capsys, str(two))
    assert code == 0, err
    assert "Engine step time by running streams" not in text
    assert text.count("the file's iteration lines hold other launches too") == 2


COMPARE = TESTS / "data" / "compare"


def test_launches_of_files_named_alike_are_told_apart_in_the_text(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    """One folder per experiment, each holding a `serve.log`: the text names them by their folders too
    (it gave both columns `serve.log`), as the picture does."""
    for folder, run_ in (("exp-a", "mns16-prefix"), ("exp-b", "mns8-prefix")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "serve.log").write_bytes(next((COMPARE / run_).glob("serve_*.log")).read_bytes())
    files = [tmp_path / "exp-a" / "serve.log", tmp_path / "exp-b" / "serve.log"]
    code, out, _ = run(capsys, *map(str, files))
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("argument"))
    assert header.split() == ["argument", "exp-a/serve.log", "exp-b/serve.log"]
    assert "exp-a/serve.log: max_num_seqs=16" in out
    doc = compare_json(capsys, *files)
    assert [la["label"] for la in doc["launches"]] == ["exp-a/serve.log: max_num_seqs=16",
                                                        "exp-b/serve.log: max_num_seqs=8"]
    assert [(r["launch"], r["previous"]) for r in doc["against_previous"]][:1] == [
        ("exp-b/serve.log", "exp-a/serve.log")]


def test_a_launch_is_set_against_the_previous_launch_of_its_script_and_model_only(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The bundled runs are all `serve_<time>.log`: small-llama's launch was set against tiny-llama's
    before it and called 60% slower."""
    doc = compare_json(capsys, *sorted(COMPARE.glob("*/serve_*.log")))
    models = {la["label"].split(":")[0]: la["model_name"] for la in doc["launches"]}
    pairs = {(r["launch"], r["previous"]) for r in doc["against_previous"]}
    assert pairs and all(models[a] == models[b] for a, b in pairs)


@pytest.mark.integration
def test_the_time_between_tokens_is_the_summary_s_and_says_where_it_came_from(
        capsys: pytest.CaptureFixture[str]) -> None:
    """tests/data/tbt/steps (iteration lines): the rows and the matrix cells give summary's time between
    tokens, from the iteration lines' cadence, and the text says so (the matrix cells gave the Running
    count's figure: 6.9 ms at 2 running where row 2 gave 7.45; no text named the source)."""
    steps = TESTS / "data" / "tbt" / "steps" / "serve.log.gz"
    (launch,) = compare_json(capsys, steps)["launches"]
    assert main(["summary", str(steps), "--json", "--tz", "UTC"]) == 0
    (group,) = json.loads(capsys.readouterr()[0])["groups"]
    assert [(r["running"], r["tbt_ms"], r["tbt_from"]) for r in launch["by_concurrency"]] == [
        (r["running"], r["tbt_ms"], r["tbt_from"]) for r in group["concurrency"]]
    assert launch["matrix"]["cells"] == group["matrix"]["cells"]
    cell = next(c for c in launch["matrix"]["cells"] if (c["context"], c["running"]) == ("512", "2"))
    assert (cell["tbt_ms"], cell["tbt_from"]) == (7.45, "iteration lines")
    code, text, err = run(capsys, str(steps), "--markdown")
    assert code == 0, err
    assert "\nTBT ms from the iteration lines: " in text and "; 134/s, 7.45 ms, step 5.31 ms" in text
