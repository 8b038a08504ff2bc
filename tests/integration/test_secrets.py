"""No secret of a launch's arguments reaches any output: two real vLLM launches (tests/data/compare/)
whose start-up lines are rewritten to hold every form of secret vLLM can print (a top-level
`api_key`, `HF_TOKEN`, `api-key`, `apikey`, nested keys, a URL's credentials in the model and the
served name, secrets inside JSON-string configs, an `args: Namespace(...)` of older vLLM), then
`compare` (text, markdown, JSON, the PNG's texts), `summary` (text, JSON), `parse` (CSV, JSON lines,
OpenMetrics) and a real `logwatch watch` (`/metrics`, the status API, the page).
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import TESTS, poll_until, run_watch

DATA = TESTS / "data" / "compare"
SECRET = re.compile(r"SEKRIT\d\d")
URL = "https://alice:SEKRIT01@hub.example/tiny-llama"
ARGS = re.compile(r"non-default args: \{.*\}$", re.M)
DICT_ARGS = (
    "non-default args: {'model_tag': '" + URL + "', 'host': '127.0.0.1', 'port': 33407, "
    "'model': '" + URL + "', "
    "'dtype': 'bfloat16', 'max_model_len': 1024, 'enforce_eager': True, 'max_num_seqs': 16, "
    "'served_model_name': ['https://bob:SEKRIT02@hub.example/served'], "
    "'api_key': ['SEKRIT03'], 'HF_TOKEN': 'SEKRIT04', 'api-key': 'SEKRIT05', 'apikey': 'SEKRIT06', "
    "'kv_transfer_config': '{\"kv_connector\": \"NixlConnector\", \"kv_connector_extra_config\": "
    "{\"api_key\": \"SEKRIT07\", \"Auth-Token\": \"SEKRIT08\"}}', "
    "'hf_overrides': '{\"rope_scaling\": {\"type\": \"yarn\"}, \"access_token\": \"SEKRIT09\"}', "
    "'speculative_config': {'method': 'eagle', 'model': 'https://carol:SEKRIT10@hub.example/draft', "
    "'num_speculative_tokens': 2, 'extra': {'Password': 'SEKRIT11'}}, "
    "'download_dir': 's3://KEYID:SEKRIT12@bucket/models', "
    "'tokenizer': 'https://hub.example/tok?token=SEKRIT13&rev=1', 'enable_prefix_caching': True}"
)
NAMESPACE_ARGS = (
    "args: Namespace(host='127.0.0.1', port=42855, model='" + URL + "', dtype='bfloat16', "
    "max_model_len=1024, "
    "max_num_seqs=8, api_key='SEKRIT14', HF_TOKEN='SEKRIT15', hf_token='SEKRIT16', "
    "kv_transfer_config='{\"kv_connector_extra_config\": {\"credentials\": {\"secret\": \"SEKRIT17\"}}}', "
    "hf_overrides={'nested': {'private_key': 'SEKRIT18', 'apiKey': 'SEKRIT19'}}, "
    "lora_modules=[{'name': 'a', 'path': 'https://dave:SEKRIT20@hub.example/lora'}], "
    "func=<function serve at 0x7f00>, enable_prefix_caching=True)"
)


def hostile(source: Path, args: str, dest: Path) -> Path:
    text = source.read_text()
    text = ARGS.sub(lambda m: args, text, count=1)
    text = text.replace("<workdir>/tiny-llama", URL)
    text = text.replace("served_model_name=tiny-llama", "served_model_name=https://eve:SEKRIT21@hub.example/s")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("secrets")
    a = hostile(next((DATA / "mns16-prefix").glob("serve_*.log")), DICT_ARGS, folder / "a/serve_a.log")
    b = hostile(next((DATA / "mns8-prefix").glob("serve_*.log")), NAMESPACE_ARGS, folder / "b/serve_b.log")
    assert len(SECRET.findall(a.read_text() + b.read_text())) >= 21
    return [a, b]


def logwatch(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", *args], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert not SECRET.search(proc.stderr), proc.stderr
    return proc.stdout


def no_secret(text: str, what: str) -> None:
    found = SECRET.findall(text)
    assert not found, f"{what} shows {sorted(set(found))}"


@pytest.mark.parametrize("fmt", ["", "--markdown", "--json"])
def test_compare_shows_no_secret(logs: list[Path], fmt: str) -> None:
    out = logwatch("compare", *map(str, logs), *([fmt] if fmt else []), "--tz", "UTC")
    no_secret(out, f"compare {fmt}")
    assert "https://***@hub.example" in out  # the values are there, masked
    if fmt == "--json":
        doc = json.loads(out)
        args = {la["file"].rsplit("/", 1)[-1]: la["args"] for la in doc["launches"]}
        assert args["serve_a.log"]["api_key"] == args["serve_b.log"]["api_key"] == "***"
        assert args["serve_a.log"]["speculative_config"]["extra"] == {"Password": "***"}


def test_compare_png_legend_shows_no_secret(logs: list[Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.text import Text

    from vllm_logwatch.commands.compare import run_compare
    from vllm_logwatch.offline.compare.differences import build_compare_figure

    image = tmp_path / "cmp.png"
    cmp = run_compare([str(p) for p in logs], output=str(image), tz="UTC", out=io.StringIO())
    assert image.stat().st_size > 0
    fig = build_compare_figure(cmp)
    texts = [t.get_text() for t in fig.findobj(Text)]
    legend = " ".join(texts)
    named = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert [n.split(":")[0] for n in named] == ["a", "b"]  # each file in a folder of its own: by folder
    no_secret(legend, "the PNG's texts")


@pytest.mark.parametrize("args", [["summary"], ["summary", "--json"], ["summary", "--by", "launch", "--json"],
                                  ["parse", "--csv"], ["parse", "--jsonl", "--kind", "all"],
                                  ["parse", "--openmetrics"]])
def test_summary_and_parse_show_no_secret(logs: list[Path], args: list[str]) -> None:
    out = logwatch(*args, *map(str, logs), "--tz", "UTC")
    no_secret(out, " ".join(args))
    if args[-1] in ("--openmetrics", "all"):
        assert "***@hub.example" in out  # the model name label / fact, masked


def test_watch_serves_no_secret(logs: list[Path], tmp_path: Path) -> None:
    with run_watch(logs[0], "--from-start", log_dir=tmp_path) as watch:
        poll_until(lambda: "***@hub.example" in watch.get("/metrics").text, 20, "the model_name label")
        metrics = watch.get("/metrics").text
        status = watch.get("/api/v1/status").text
        page = watch.get("/").text
        for text, what in ((metrics, "/metrics"), (status, "/api/v1/status"), (page, "the page")):
            no_secret(text, what)
        assert 'model_name="https://***@hub.example/s"' in metrics
        no_secret(watch.stderr(), "stderr")
