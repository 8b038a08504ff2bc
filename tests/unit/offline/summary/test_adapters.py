"""`summary --by lora` (offline/summary/adapters.py): rows per LoRA adapter from the request lines of
tests/data/lora (real lines, adapters named) and tests/data/latency (whole-second stamps: untimed),
as docs/offline.md shows them."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from support import ROOT, TESTS

from vllm_logwatch.cli import main

LORA = TESTS / "data" / "lora" / "serve.cri.log"
LATENCY = TESTS / "data" / "latency"
DOCS = ROOT / "docs" / "offline.md"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["summary", "--by", "lora", *args, "--tz", "UTC"])
    out, err = capsys.readouterr()
    return code, out, err


def test_rows_per_adapter_with_the_request_rows_times(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(LORA), "--json")
    assert code == 0, err
    rows = {r["adapter"]: r for r in json.loads(out)["adapters"]}
    assert list(rows) == ["(base model)", "chat-lora", "sql-lora"]
    assert [(r["requests"], r["ended"], r["finish_reasons"], r["timed"], r["untimed"])
            for r in rows.values()] == [(1, 1, {"length": 1}, 1, 0), (1, 1, {"length": 1}, 1, 0),
                                        (2, 2, {"length": 2}, 2, 0)]
    # The times are parse --kind requests' own e2e_s, by the adapter its Received line names.
    assert main(["parse", "--kind", "requests", str(LORA), "--tz", "UTC"]) == 0
    requests = [json.loads(line) for line in capsys.readouterr()[0].splitlines()]
    by = {r["lora"]: [] for r in requests}
    for r in requests:
        by[r["lora"]].append(r["e2e_s"])
    assert rows["chat-lora"]["e2e_s_p50"] == rows["chat-lora"]["e2e_s_p90"] == round(by["chat-lora"][0], 3)
    assert rows["(base model)"]["e2e_s_p50"] == round(by[None][0], 3)
    low, high = sorted(by["sql-lora"])
    assert rows["sql-lora"]["e2e_s_p50"] == round((low + high) / 2, 3)
    assert rows["sql-lora"]["e2e_s_p90"] == round(low + 0.9 * (high - low), 3)


def test_whole_second_stamps_count_requests_untimed(capsys: pytest.CaptureFixture[str]) -> None:
    """The plain log (vLLM's 1 s stamps) and its CRI form (ns): the same counts and reasons (the
    run's answer key: 139 length, 6 stop of which 1 logged without its reason, 3 aborted), timed only
    in the CRI form."""
    code, plain, err = run(capsys, str(LATENCY / "serve.log.gz"), "--json")
    assert code == 0, err
    code, cri, err = run(capsys, str(LATENCY / "serve.cri.log.gz"), "--json")
    assert code == 0, err
    [p], [c] = json.loads(plain)["adapters"], json.loads(cri)["adapters"]
    assert p["finish_reasons"] == c["finish_reasons"] == {"abort": 3, "length": 139, "stop": 5, "unknown": 1}
    assert (p["timed"], p["untimed"], p["e2e_s_p50"]) == (0, 148, None)
    assert (c["timed"], c["untimed"]) == (148, 0) and 0.1 < c["e2e_s_p50"] < c["e2e_s_p90"] < 1
    code, text, _ = run(capsys, str(LATENCY / "serve.log.gz"))
    assert re.search(r"\(base model\) +148 +148 .* - +- +148\n", text), text


def test_no_request_lines_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(TESTS / "data" / "002.log"))
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and "no request lines" in err and "--enable-log-requests" in err


def test_docs_show_the_real_output(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    block = re.search(r"\$ logwatch summary --by lora tests/data/lora/serve.cri.log\n(.*?)```",
                      DOCS.read_text(encoding="utf-8"), re.S)
    assert block is not None
    assert main(["summary", "--by", "lora", str(LORA.relative_to(ROOT))]) == 0
    assert capsys.readouterr()[0].rstrip() == block.group(1).rstrip()


def test_lora_log_is_the_latency_runs_lines() -> None:
    """tests/data/lora holds real lines: but for the two Loaded lines and three lora_request fields,
    each is a line of the latency run's CRI log."""
    with gzip.open(LATENCY / "serve.cri.log.gz", "rt", encoding="utf-8") as f:
        real = set(f.read().split("\n"))
    changed = [line for line in LORA.read_text(encoding="utf-8").splitlines() if line not in real]
    assert len(changed) == 5
    assert sum("Loaded new LoRA adapter: name '" in line for line in changed) == 2
    assert sum("lora_request: LoRARequest(lora_name='" in line for line in changed) == 3
