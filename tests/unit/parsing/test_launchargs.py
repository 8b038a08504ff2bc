"""Launch arguments read as data (`parsing/launchargs.py`) and the start-up facts derived from them."""

from __future__ import annotations

import pytest

from vllm_logwatch.parsing.events import ServerInfo, event_to_dict
from vllm_logwatch.parsing.launchargs import MAX_ARGS_CHARS, derive, engine_config_facts, read_args
from vllm_logwatch.parsing.line import parse_line

HDR = "(APIServer pid=7) INFO 11-02 12:00:00 [api_utils.py:286] "
ARGS_033 = (
    "non-default args: {'model_tag': 'nvidia/Qwen3-30B-A3B-NVFP4', 'port': 8002, 'api_key': '***', "
    "'model': 'nvidia/Qwen3-30B-A3B-NVFP4', 'max_model_len': 32768, 'quantization': 'modelopt_fp4', "
    "'tensor_parallel_size': 2, 'pipeline_parallel_size': 1, 'data_parallel_size': 2, "
    "'gpu_memory_utilization': 0.92, 'kv_cache_dtype': 'fp8', 'max_num_seqs': 30, "
    "'enable_prefix_caching': True, 'attention_backend': 'FLASHINFER', "
    "'speculative_config': {'method': 'eagle3', 'model': 'x/eagle', 'num_speculative_tokens': 3}}"
)


def test_non_default_args_give_every_fact() -> None:
    e = parse_line(HDR + ARGS_033)
    assert isinstance(e, ServerInfo)
    assert (e.quantization, e.kv_cache_dtype, e.attention_backend) == ("modelopt_fp4", "fp8", "FLASHINFER")
    assert (e.tensor_parallel_size, e.pipeline_parallel_size, e.data_parallel_size) == (2, 1, 2)
    assert (e.max_model_len, e.max_num_seqs, e.gpu_memory_utilization) == (32768, 30, 0.92)
    assert (e.enable_prefix_caching, e.speculative_method, e.num_speculative_tokens) == (True, "eagle3", 3)
    assert e.args is not None and e.args["speculative_config"]["model"] == "x/eagle"
    # The arguments stay out of every dump (the exporter's facts, parse --jsonl): read by name only.
    assert "args" not in event_to_dict(e) and "args" not in e.facts("launch")


def test_namespace_of_old_vllm_with_non_literals() -> None:
    text = ("args: Namespace(host=None, port=8000, model='facebook/opt-125m', dtype='half', "
            "tensor_parallel_size=4, speculative_model='x/draft', num_speculative_tokens=5, "
            "middleware=[], func=<function serve at 0x7f00>, api_key='sk-123')")
    e = parse_line("INFO 01-13 11:35:20 api_server.py:212] " + text)
    assert isinstance(e, ServerInfo)
    assert e.args is not None
    assert e.args["api_key"] == "***" and "func" not in e.args
    assert (e.dtype, e.tensor_parallel_size, e.speculative_method, e.num_speculative_tokens) == (
        "half", 4, "draft_model", 5)


@pytest.mark.parametrize("text", [
    "{'a': __import__('os').system('echo hi')}",  # code is never run: a call is not a literal
    "{'a': " + "[" * 500 + "]" * 500 + "}",  # deeper than the parser goes
    "{'broken': ",
])
def test_hostile_args_are_data_or_nothing(text: str) -> None:
    out = read_args(text)
    assert out is None or "a" not in out or not callable(out["a"])


@pytest.mark.parametrize("args", [
    "{'port': 8000, 'seed': " + "9" * 4400 + "}",  # a literal Python itself refuses to read
    "Namespace(port=8000, func=<function f at 0x7f>, seed=" + "9" * 4400 + ")",  # not a literal at all
], ids=["literal", "not-a-literal"])
def test_a_number_over_pythons_digit_limit_is_a_skipped_value(args: str) -> None:
    out = read_args(args)
    assert out == {"port": 8000}  # the other arguments are still read
    e = parse_line(HDR + "non-default args: " + args)
    assert isinstance(e, ServerInfo) and e.port == 8000


def test_bounded() -> None:
    assert read_args("{'x': '" + "y" * MAX_ARGS_CHARS + "'}") is None
    out = read_args("{'x': '" + "y" * 5000 + "', 'l': [" + "1, " * 500 + "1]}")
    assert out is not None and len(out["x"]) < 400 and len(out["l"]) <= 64


def test_secrets_are_masked() -> None:
    out = read_args("{'hf_token': 'hf_abc', 'api_key': ['k1', 'k2'], 'max_num_batched_tokens': 8192, "
                    "'ssl_keyfile': '/etc/key.pem'}")
    assert out == {"hf_token": "***", "api_key": "***", "max_num_batched_tokens": 8192,
                   "ssl_keyfile": "/etc/key.pem"}


def test_only_short_words_become_facts() -> None:
    facts = derive({"dtype": "bfloat16'; DROP", "quantization": "x" * 100, "kv_cache_dtype": "fp8_e4m3",
                    "max_num_seqs": True, "gpu_memory_utilization": 7})
    assert facts == {"kv_cache_dtype": "fp8_e4m3"}


def test_engine_config_line() -> None:
    facts = engine_config_facts(
        "model='m', speculative_config=SpeculativeConfig(method='mtp', model='m', num_spec_tokens=2), "
        "dtype=torch.float16, tensor_parallel_size=8, pipeline_parallel_size=2, quantization=None, "
        "kv_cache_dtype=fp8, enable_prefix_caching=False")
    assert facts == {"dtype": "float16", "kv_cache_dtype": "fp8", "tensor_parallel_size": 8,
                     "pipeline_parallel_size": 2, "enable_prefix_caching": False,
                     "speculative_method": "mtp", "num_speculative_tokens": 2}


@pytest.mark.parametrize(("message", "backend"), [
    ("Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER'].",
     "FLASH_ATTN"),
    ("Using FLASHINFER backend.", "FLASHINFER"),
    ("Using Flash Attention backend on V1 engine.", "Flash_Attention"),
    ("Using XFormers backend.", "XFormers"),
])
def test_attention_backend(message: str, backend: str) -> None:
    e = parse_line("(EngineCore pid=3) INFO 11-02 12:00:40 [cuda.py:507] " + message)
    assert isinstance(e, ServerInfo) and e.attention_backend == backend


def test_not_python_syntax_keeps_the_top_level_arguments() -> None:
    text = ("{'model': 'm', 'compilation_config': {'mode': <CompilationMode.NONE: 0>, 'cache_dir': ''}, "
            "'max_num_seqs': 8, 'chat_template': 'a: 1, b: 2'}")
    assert read_args(text) == {"model": "m", "max_num_seqs": 8, "chat_template": "a: 1, b: 2"}
