"""A launch's arguments from its start-up lines, read as data and never run: `non-default args: {...}`
(vLLM 0.9+, a dict repr), `args: Namespace(...)` (0.4.2-0.8.5) and the engine's `with config: ...`.

`read_args(text)` turns the repr into a plain dict with `ast.literal_eval` (a literal, never code), a
value at a time when the whole is not one literal (an enum repr among them): bounded in size, secrets
masked by `masking.masked` before anything else sees them (vLLM 0.33 masks `api_key`, `hf_token`;
older versions print them, and no version masks a nested key, a JSON config's or a URL's), every
value JSON-able.
`derive(args)` and `engine_config_facts(config)` give the launch facts the summary compares
(quantization, dtype, parallel sizes, ...), each a number or a short validated word.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from .masking import masked

MAX_ARGS_CHARS = 65536
"""A longer arguments repr is not read as a dict (its named facts still are, by pattern)."""
_MAX_KEYS = 300
_MAX_STR = 300
_MAX_DEPTH = 4
_MAX_ITEMS = 64
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}$")


def _plain(value: Any, depth: int = 0) -> Any:
    """A literal as JSON-able data, bounded: long strings cut, deep or long containers trimmed."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value if len(value) <= _MAX_STR else value[:_MAX_STR] + "..."
    if depth >= _MAX_DEPTH:
        return "..."
    if isinstance(value, dict):
        return {str(k)[:_MAX_STR]: _plain(v, depth + 1) for k, v in list(value.items())[:_MAX_ITEMS]}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else list(value)
        return [_plain(v, depth + 1) for v in items[:_MAX_ITEMS]]
    return repr(value)[:_MAX_STR]  # bytes, complex: shown, not interpreted


def _literal(node: ast.expr | str) -> tuple[bool, Any]:
    """(True, value) of a literal, or of its text; (False, None) when it is none, or one Python will not
    read (an integer of more than 4,300 digits): skipped like any value that is not a literal."""
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return False, None


def _pairs(text: str) -> list[tuple[str, Any]] | None:
    """(key, value) of a dict repr or a `Namespace(...)` repr; values that are not literals are skipped."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes: list[tuple[str, ast.expr]]
    if isinstance(tree, ast.Dict):
        nodes = [(key.value, value) for key, value in zip(tree.keys, tree.values, strict=True)
                 if isinstance(key, ast.Constant) and isinstance(key.value, str)]
    elif isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "Namespace":
        nodes = [(kw.arg, kw.value) for kw in tree.keywords if kw.arg is not None]
    else:
        return None
    pairs: list[tuple[str, Any]] = []
    for key, node in nodes:
        ok, value = _literal(node)
        if ok:
            pairs.append((key, value))
    return pairs


_SIMPLE = re.compile(
    r"'?(\w{1,64})'?(?::|=) ?('(?:[^'\\]|\\.){0,300}'|-?[\d.]+(?:e-?\d+)?|True|False|None)(?=[,})\]]|$)")


def _depths(text: str) -> list[int]:
    """The bracket depth at each character; -1 inside a quoted string (`{'a': {'b': 1}}`: `'a'` starts
    at 1, `'b'` at 2).

    >>> _depths("{'a': {'b': 1}}")[1], _depths("{'a': {'b': 1}}")[7], _depths("{'a': 1}")[2]
    (1, 2, -1)
    """
    out, depth, quote, escaped = [], 0, "", False
    for c in text:
        if quote:
            out.append(-1)
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
            continue
        out.append(depth)
        if c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
    return out


def read_args(text: str) -> dict[str, Any] | None:
    """The arguments of a `{...}` or `Namespace(...)` repr as a dict (secrets masked), else None.

    >>> read_args("{'model': 'Qwen/Qwen3-8B', 'max_num_seqs': 30, 'api_key': ['s3cret']}")
    {'model': 'Qwen/Qwen3-8B', 'max_num_seqs': 30, 'api_key': '***'}
    >>> read_args("Namespace(port=8000, dtype='auto', func=<function f at 0x7f>)")
    {'port': 8000, 'dtype': 'auto'}
    """
    if len(text) > MAX_ARGS_CHARS:
        return None
    pairs = _pairs(text)
    if pairs is None:  # not Python syntax (`<Enum.X: 1>` and the like): the simple key: value pairs
        if not text.lstrip().startswith(("{", "Namespace(")):
            return None
        pairs = []
        depth = _depths(text)
        for m in _SIMPLE.finditer(text):
            if depth[m.start()] != 1:  # a key of a nested dict or call is not an argument
                continue
            ok, value = _literal(m.group(2))
            if ok:
                pairs.append((m.group(1), value))
    clean = masked({key[:_MAX_STR]: value for key, value in pairs[:_MAX_KEYS]})
    return {key: _plain(value) for key, value in clean.items()}


def _word(value: Any) -> str | None:
    """A short identifier-like value (`fp8`, `bfloat16`, `FLASH_ATTN`), else None: nothing else of a
    log becomes a fact."""
    if isinstance(value, str):
        value = value.removeprefix("torch.")
        return value if _WORD.match(value) else None
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40 else None


def _spec_facts(spec: Any) -> dict[str, Any]:
    if isinstance(spec, str) and spec.startswith("{"):  # given as JSON on the command line
        spec = read_args(spec)
    if not isinstance(spec, dict):
        return {}
    facts: dict[str, Any] = {}
    method = _word(spec.get("method"))
    if method is None and spec.get("model") is not None:
        method = "draft_model"
    if method:
        facts["speculative_method"] = method
    tokens = _count(spec.get("num_speculative_tokens"))
    if tokens is not None:
        facts["num_speculative_tokens"] = tokens
    return facts


def derive(args: dict[str, Any]) -> dict[str, Any]:
    """The launch facts that `args` names (vLLM's argument names), validated.

    >>> derive({'quantization': 'fp8', 'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.92,
    ...         'speculative_config': {'method': 'eagle3', 'num_speculative_tokens': 3}})
    {'quantization': 'fp8', 'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.92, \
'speculative_method': 'eagle3', 'num_speculative_tokens': 3}
    """
    facts: dict[str, Any] = {}
    for key in ("quantization", "dtype", "kv_cache_dtype"):
        word = _word(args.get(key))
        if word is not None and word != "None":
            facts[key] = word
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len",
                "max_num_seqs", "max_num_batched_tokens"):
        count = _count(args.get(key))
        if count is not None:
            facts[key] = count
    if args.get("max_model_len") in (-1, "auto"):  # `--max-model-len auto`: fitted to the KV cache
        facts["max_model_len_auto"] = True
    utilization = args.get("gpu_memory_utilization")
    if isinstance(utilization, (int, float)) and not isinstance(utilization, bool) and 0 < utilization <= 1:
        facts["gpu_memory_utilization"] = float(utilization)
    backend = _word(args.get("attention_backend"))
    if backend is not None and backend != "None":
        facts["attention_backend"] = backend
    if isinstance(args.get("enable_prefix_caching"), bool):
        facts["enable_prefix_caching"] = args["enable_prefix_caching"]
    facts.update(_spec_facts(args.get("speculative_config")))
    draft = args.get("speculative_model")
    if "speculative_method" not in facts and isinstance(draft, str) and draft not in ("", "None"):  # 0.4-0.8
        facts["speculative_method"] = "draft_model"
    tokens = _count(args.get("num_speculative_tokens"))
    if tokens is not None and "num_speculative_tokens" not in facts:
        facts["num_speculative_tokens"] = tokens
    return facts


_CONFIG_WORD = re.compile(
    r"\b(dtype|quantization|kv_cache_dtype)=(?:torch\.)?([A-Za-z0-9_.:+-]{1,64})(?=[,)]|$)")
_CONFIG_COUNT = re.compile(r"\b(tensor_parallel_size|pipeline_parallel_size|data_parallel_size)=(\d{1,6})\b")
_CONFIG_SPEC = re.compile(r"\bspeculative_config=(SpeculativeConfig\([^)]{0,2000}\)|None)")


def engine_config_facts(config: str) -> dict[str, Any]:
    """The resolved values of an engine's `with config: ...` line (`dtype=torch.bfloat16`, ...).

    >>> engine_config_facts("model='m', speculative_config=None, dtype=torch.bfloat16, "
    ...                     "tensor_parallel_size=1, quantization=fp8, enable_prefix_caching=True")
    {'dtype': 'bfloat16', 'quantization': 'fp8', 'tensor_parallel_size': 1, 'enable_prefix_caching': True}
    """
    facts: dict[str, Any] = {}
    for m in _CONFIG_WORD.finditer(config):
        if m.group(2) != "None" and m.group(1) not in facts:
            facts[m.group(1)] = m.group(2)
    for m in _CONFIG_COUNT.finditer(config):
        facts.setdefault(m.group(1), int(m.group(2)))
    pm = re.search(r"\benable_prefix_caching=(True|False)\b", config)
    if pm:
        facts["enable_prefix_caching"] = pm.group(1) == "True"
    sm = _CONFIG_SPEC.search(config)
    if sm and sm.group(1) != "None":
        method = re.search(r"\bmethod='?([A-Za-z0-9_]{1,32})", sm.group(1))
        tokens = re.search(r"\bnum_spec(?:ulative)?_tokens=(\d{1,4})", sm.group(1))
        facts["speculative_method"] = method.group(1) if method else "draft_model"
        if tokens:
            facts["num_speculative_tokens"] = int(tokens.group(1))
    return facts


_PARALLEL = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")


def gpu_count(facts: dict[str, Any]) -> int | None:
    """The devices (GPUs) a launch runs on: tensor x pipeline x data parallel size, a size not given
    being vLLM's default 1; None when neither its arguments nor its engine config were logged.

    >>> gpu_count({"tensor_parallel_size": 2, "data_parallel_size": 4}), gpu_count({"args": {}})
    (8, 1)
    >>> gpu_count({}) is None
    True
    """
    if "args" not in facts and not any(key in facts for key in _PARALLEL):
        return None
    count = 1
    for key in _PARALLEL:
        size = _count(facts.get(key))
        count *= size if size else 1
    return count
