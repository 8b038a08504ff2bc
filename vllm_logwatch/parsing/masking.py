"""Secrets out of everything read from a launch's start-up lines, before anything else sees them.

`masked(value)` is the one masking function: `parsing/launchargs.py` applies it to the arguments and
`parsing/startup.py` to every start-up fact (the model name among them), so no summary, comparison,
plot, export, metric label or status answer ever holds the raw value. It

* replaces the value of every key that names a secret (`secret_key`: matched by its normalised
  words, case and separators aside: `api_key`, `API-KEY`, `apikey`, `HF_TOKEN`, `password`,
  `auth`, `credentials`, `private_key`, `aws_access_key_id`, ...) with `***`, at any depth;
* goes into dicts and lists, and into a string that is a JSON object or list (`--kv-transfer-config
  '{"kv_connector_extra_config": {"api_key": "x"}}'`, `--hf-overrides`), which it writes back as JSON;
* in every other string, masks `key=value` / `"key": value` pairs whose key names a secret and the
  user information of a URL (`https://alice:PW@hub.example/m` -> `https://***@hub.example/m`);
* escapes control characters (`shown.printable`): a value is shown on one line and never drives a
  terminal.

Keys like `max_num_batched_tokens` or `tokenizer` are not secrets: a key is one when its last word
is `token`, `key`, `secret`, ... or when any word is `password`, `secret`, `auth`, ... (see below).
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from ..shown import printable

MASK = "***"
_LAST_WORDS = frozenset({
    "token", "key", "secret", "password", "passwd", "pwd", "passphrase", "credential", "credentials",
    "auth", "authorization", "cookie", "signature", "apikey", "accesskey", "privatekey", "secretkey",
    "hftoken", "authtoken", "accesstoken", "bearer",
})
"""A key whose last word is one of these names a secret (`hf_token`, `openai_api_key`)."""
_ANY_WORDS = frozenset({
    "secret", "secrets", "password", "passwd", "passphrase", "credential", "credentials", "auth",
    "authorization", "apikey", "accesskey", "privatekey", "secretkey", "hftoken", "authtoken",
})
"""A key holding one of these words anywhere names a secret (`password_file`, `auth_headers`)."""
_PAIRS = (("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("hf", "token"),
          ("auth", "token"), ("access", "token"), ("client", "secret"))
"""Two words that together name a secret anywhere in a key (`aws_access_key_id`)."""
_ALWAYS = frozenset({"watermark_config"})
"""Whole keys masked for what they hold (a watermark's key material)."""
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/\s?#'\"<>@]{0,256}(?:@[^/\s?#'\"<>@]{0,256})*@")
_KEY = re.compile(r"""(?<![\w.-])(["']?)([A-Za-z_][\w.-]{0,63})\1\s{0,8}[:=]\s{0,8}""")
_VALUE = re.compile(r"""("(?:[^"\\]|\\.){0,1024}")|('(?:[^'\\]|\\.){0,1024}')|[^\s,;&'"}\])]{1,1024}""")
_MAX_DEPTH = 8
_MAX_JSON = 65536


def secret_key(key: str) -> bool:
    """Does this argument or field name name a secret? Case and separators do not matter.

    >>> [secret_key(k) for k in ("api_key", "API-KEY", "apikey", "HF_TOKEN", "hfToken", "db_password",
    ...                          "aws_access_key_id", "Authorization", "kv_connector_extra_config")]
    [True, True, True, True, True, True, True, True, False]
    >>> [secret_key(k) for k in ("max_num_batched_tokens", "tokenizer", "num_speculative_tokens",
    ...                          "enable_auto_tool_choice", "author", "model")]
    [False, False, False, False, False, False]
    """
    if key in _ALWAYS:
        return True
    words = [w for w in _SPLIT.split(_CAMEL.sub("_", key).lower()) if w]
    if not words:
        return False
    if words[-1] in _LAST_WORDS or any(w in _ANY_WORDS for w in words):
        return True
    return any(pair in _PAIRS for pair in itertools.pairwise(words))


def _key_values(text: str) -> str:
    """`text` with the value after every `key=` / `key:` / `"key": ` whose key names a secret masked
    (`?token=x&rev=1` -> `?token=***&rev=1`, `{'api_key': 'x'}` -> `{'api_key': '***'}`)."""
    parts: list[str] = []
    done = 0
    for m in _KEY.finditer(text):
        if m.start() < done or not secret_key(m.group(2)):
            continue
        value = _VALUE.match(text, m.end())
        if value is None:
            continue
        quote = "\"" if value.group(1) else "'" if value.group(2) else ""
        parts += [text[done:m.end()], quote, MASK, quote]
        done = value.end()
    return "".join(parts) + text[done:] if parts else text


def _text(text: str, depth: int) -> str:
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and len(stripped) <= _MAX_JSON and depth < _MAX_DEPTH:
        try:
            data = json.loads(stripped)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, (dict, list)):
            return printable(json.dumps(masked(data, depth + 1), ensure_ascii=False))
    text = _key_values(text)
    return printable(_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text) if "://" in text else text)


def masked(value: Any, depth: int = 0) -> Any:
    """`value` with its secrets masked and its strings printable (see the module's docstring).

    >>> masked({"model": "https://alice:PW@hub.example/m", "HF_TOKEN": "hf_x", "n": 3,
    ...         "kv": '{"extra": {"api-key": "x"}}', "nested": [{"Password": "p"}], "empty_token": ""})
    {'model': 'https://***@hub.example/m', 'HF_TOKEN': '***', 'n': 3, 'kv': '{"extra": {"api-key": "***"}}', \
'nested': [{'Password': '***'}], 'empty_token': ''}
    """
    if isinstance(value, str):
        return _text(value, depth)
    if depth >= _MAX_DEPTH:
        return value if value is None or isinstance(value, (bool, int, float)) else "..."
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            name = printable(key) if isinstance(key, str) else key
            if isinstance(key, str) and secret_key(key) and item not in (None, "", [], {}):
                out[name] = MASK
            else:
                out[name] = masked(item, depth + 1)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value)(masked(item, depth + 1) for item in value)
    return value
