"""A bounded load for a local vLLM: N streaming /v1/completions workers until a deadline.

    python load.py PORT [--conc 8] [--duration 20] [--max-requests 400] [--model tiny-llama] [--no-stream]
                   [--max-tokens 64,96,128]

Sends to 127.0.0.1 only, stops by itself (deadline, request budget, per-request timeout), and prints
one JSON line: requests, failures, and the prompt and completion tokens vLLM reported in each stream's
`usage`. Prompts are ~1400-character excerpts of Python's standard library; 60% repeat an excerpt
exactly and the rest add a unique tail, so the prefix cache gets both whole and partial hits.
`ignore_eos` makes every request generate exactly its `max_tokens` (64, 96 or 128; `--max-tokens`
gives other choices: longer requests keep more of them in the engine when each costs the front end
a fixed share of a loaded CPU).

Needs httpx (the test's own environment has it). Importing this module does nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import random
import sys
import sysconfig
import time
from typing import Any

HOST = "127.0.0.1"  # loopback only, whatever the arguments say


def prompts(count: int = 6, seed: int = 0) -> list[str]:
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    chosen = random.Random(seed).sample(files, count)
    texts = []
    for path in chosen:
        with open(path, encoding="utf-8", errors="replace") as fh:
            texts.append(fh.read()[:1400])
    return texts


async def _one(client: Any, url: str, body: dict[str, Any]) -> dict[str, Any] | None:
    if not body["stream"]:
        resp = await client.post(url, json=body)
        resp.raise_for_status()
        return resp.json().get("usage")  # type: ignore[no-any-return]
    usage = None
    async with client.stream("POST", url, json=body) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
    return usage


async def run(
    port: int, conc: int, duration: float, max_requests: int, model: str, stream: bool = True,
    max_tokens: tuple[int, ...] = (64, 96, 128),
) -> dict[str, Any]:
    import httpx

    url = f"http://{HOST}:{port}/v1/completions"
    texts = prompts()
    budget = [max_requests]
    totals = {"requests": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0}
    errors: list[str] = []
    deadline = time.monotonic() + duration

    async def worker(wid: int, client: httpx.AsyncClient) -> None:
        rnd = random.Random(wid)
        while time.monotonic() < deadline and budget[0] > 0:
            budget[0] -= 1
            text = rnd.choice(texts)
            if rnd.random() >= 0.6:
                text += f"\n# worker {wid} request {rnd.randrange(10**9)}\n"
            body = {"model": model, "prompt": text, "max_tokens": rnd.choice(max_tokens),
                    "temperature": 1.0, "ignore_eos": True, "stream": stream}
            if stream:
                body["stream_options"] = {"include_usage": True}
            totals["requests"] += 1
            try:
                usage = await _one(client, url, body)
            except (httpx.HTTPError, ValueError) as exc:
                totals["failed"] += 1
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
                continue
            if usage:
                totals["prompt_tokens"] += usage.get("prompt_tokens", 0)
                totals["completion_tokens"] += usage.get("completion_tokens", 0)

    t0 = time.monotonic()
    limits = httpx.Limits(max_connections=conc + 2)
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0), limits=limits, trust_env=False) as client:
        await asyncio.gather(*(worker(i, client) for i in range(conc)))
    return {**totals, "wall_s": round(time.monotonic() - t0, 1), "errors": errors[:5]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("port", type=int)
    ap.add_argument("--conc", type=int, default=8)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--max-requests", type=int, default=400)
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True,
                    help="stream the completions (server-sent events), as chat front ends do (default)")
    ap.add_argument("--max-tokens", default="64,96,128", metavar="N,N,...",
                    help="the choices of each request's max_tokens (default 64,96,128)")
    a = ap.parse_args()
    try:
        max_tokens = tuple(int(n) for n in a.max_tokens.split(","))
    except ValueError:
        ap.error(f"--max-tokens: whole numbers separated by commas, not {a.max_tokens!r}")
    if not (1 <= a.conc <= 64 and 0 < a.duration <= 600 and 0 < a.max_requests <= 10000
            and all(1 <= n <= 512 for n in max_tokens)):
        ap.error("keep the load bounded: --conc 1-64, --duration <= 600, --max-requests <= 10000, "
                 "--max-tokens 1-512")
    result = asyncio.run(run(a.port, a.conc, a.duration, a.max_requests, a.model, a.stream, max_tokens))
    print(json.dumps(result), flush=True)
    return 0 if result["requests"] and not result["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
