"""The URL paths vLLM's API server serves: the only values of the `path` label of
`vllm_logwatch_http_requests_total` besides `{other}`.

The path of an access line is whatever the client sent: an unauthenticated caller can put any words
there (`/v1/my-customer-acme-corp-merger-plans`, answered 401). So a path keeps its name only when it
is one of vLLM's own routes; a route with a parameter (`/v1/responses/{response_id}`) is named by its
template; every other path is `{other}`, whatever the status. The query string never counts.

The list is vLLM's API server routes, grouped by where and since when vLLM serves them, as its
FastAPI routers register them (all in `vllm/entrypoints/openai/api_server.py` in older releases, in
the routers under `vllm/entrypoints/` in newer ones) and as vLLM prints them at start-up
(`Route: /v1/models, Methods: GET`; see the vLLM 0.32 log in `tests/data/real-vllm-cpu/`). A route
vLLM adds later is `{other}` until it is added here.

>>> path_label("/v1/chat/completions?stream=true")
'/v1/chat/completions'
>>> path_label("/v1/responses/resp_8f1c2a9b3d4e5f60")
'/v1/responses/{response_id}'
>>> path_label("/v1/my-customer-acme-corp-merger-plans")
'{other}'
"""

from __future__ import annotations

import re

OTHER = "{other}"
"""The label of every path that is not one of vLLM's routes."""

_ROUTES_BY_SOURCE: dict[str, tuple[str, ...]] = {
    # The OpenAI-compatible API: models, chat, completions, embeddings, responses, audio, realtime.
    "openai": (
        "/v1/models", "/v1/chat/completions", "/v1/completions", "/v1/embeddings",
        "/v1/responses", "/v1/responses/{response_id}", "/v1/responses/{response_id}/cancel",
        "/v1/audio/transcriptions", "/v1/audio/translations", "/v1/realtime",
    ),
    # vLLM's own endpoints: health and load, tokenizer, pooling models (pooling, classify, score,
    # rerank), SageMaker (ping, invocations), elastic expert parallelism, the Prometheus metrics.
    "vllm": (
        "/health", "/load", "/ping", "/version", "/metrics", "/tokenize", "/detokenize",
        "/get_tokenizer_info", "/pooling", "/classify", "/score", "/v1/score", "/rerank", "/v1/rerank",
        "/v2/rerank", "/invocations", "/scale_elastic_ep", "/is_scaling_elastic_ep",
    ),
    # The Anthropic Messages API (newer releases).
    "anthropic": ("/v1/messages", "/v1/messages/count_tokens"),
    # Printed at start-up by vLLM 0.32 (render and derender, batch chat, token-in/token-out generate,
    # KV event sources, generative scoring).
    "vllm-0.32": (
        "/v1/chat/completions/render", "/v1/chat/completions/derender", "/v1/chat/completions/batch",
        "/v1/completions/render", "/v1/completions/derender", "/v1/responses/render",
        "/v1/messages/render", "/v1/systemone", "/inference/v1/generate", "/inference/v1/abort_requests",
        "/kv_event_sources", "/generative_scoring",
    ),
    # FastAPI's generated documentation (off with --disable-fastapi-docs).
    "docs": ("/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"),
    # Only with VLLM_SERVER_DEV_MODE=1, VLLM_TORCH_PROFILER_DIR or VLLM_ALLOW_RUNTIME_LORA_UPDATING=1.
    "development": (
        "/server_info", "/reset_prefix_cache", "/reset_mm_cache", "/sleep", "/wake_up", "/is_sleeping",
        "/collective_rpc", "/pause", "/resume", "/is_paused", "/start_profile", "/stop_profile",
        "/v1/load_lora_adapter", "/v1/unload_lora_adapter",
    ),
}

VLLM_ROUTES: frozenset[str] = frozenset(path for paths in _ROUTES_BY_SOURCE.values() for path in paths)
"""Every route above; templates keep their `{parameter}`."""

_EXACT = frozenset(path for path in VLLM_ROUTES if "{" not in path)
_TEMPLATES = tuple(
    (re.compile("/".join("[^/]+" if part.startswith("{") else re.escape(part) for part in path.split("/"))),
     path)
    for path in sorted(VLLM_ROUTES) if "{" in path
)


def path_label(path: str) -> str:
    """The `path` label of an access line's path: the vLLM route it is, else `{other}`.

    >>> path_label("/health"), path_label("/health/"), path_label("/v1/responses/x/cancel")
    ('/health', '{other}', '/v1/responses/{response_id}/cancel')
    """
    path = path.split("?", 1)[0].split("#", 1)[0]
    if path in _EXACT:
        return path
    for pattern, template in _TEMPLATES:
        if pattern.fullmatch(path):
            return template
    return OTHER


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})


class HttpCounts:
    """Access lines by (method, path label, status), with bounded label values: the standard methods
    and `other`; vLLM's own routes (`path_label`), else `OTHER`."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, str], int] = {}

    def add(self, method: str, raw_path: str, status: int, count: int) -> None:
        """Count `count` lines."""
        method = method if method in _METHODS else "other"
        # A path is whatever the client sent (possibly a prompt): only vLLM's own routes are label
        # values, whatever the status; every other path is `{other}`.
        key = (method, path_label(raw_path), str(status))
        self.counts[key] = self.counts.get(key, 0) + count
