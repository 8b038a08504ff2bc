"""A stepped, bounded load for a local vLLM that records every request it sent (for `logwatch compare`'s
real test logs, made by tools/make_compare_logs.py).

    python tools/compare_load.py PORT OUT_DIR [--steps 1:12,2:12,4:12,8:12,16:12]
                                 [--fixed PROMPT_TOKENS:OUTPUT_TOKENS] [--max-requests 3000]

Prompts are token ids, not text: the server then has no tokenizing to do, which on a 2-core machine
would leave the engine starved of requests (the engine's running count far below the client's).

The load runs in steps: `STREAMS:SECONDS` each, streams that loop over /v1/completions with
`ignore_eos` (every request generates exactly its `max_tokens`), not streamed: a streamed token is one
server-sent event for the client to read, and on a 2-core machine the client then limits the
concurrency it was meant to set. Two prompt shapes:

- default: one of 6 fixed prompts of 480 random token ids (60% sent exactly, the rest with a unique
  tail of 16 ids, so a prefix cache gets hits), `max_tokens` drawn from 128, 192, 256;
- `--fixed P:O`: every prompt is P random token ids (so vLLM sees exactly P prompt tokens and no two
  prompts share a prefix) and every `max_tokens` is O.

Writes OUT_DIR/client_requests.jsonl (one line per request: when it started and ended, seconds from
the load's start; the step's streams; the prompt tokens sent when known; max_tokens; the prompt and
completion tokens vLLM's `usage` reported; ok) and OUT_DIR/client_summary.json (the steps, totals).
Sends to 127.0.0.1 only and stops by itself (each step's deadline, the request budget, a per-request
timeout). Needs httpx.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"  # loopback only, whatever the arguments say
VOCAB = 2048  # the tiny models' vocabulary (tests/e2e/build_tiny_model.py); ids 0-2 are special tokens


def shared_prompts(count: int = 6, length: int = 480, seed: int = 0) -> list[list[int]]:
    rnd = random.Random(seed)
    return [[rnd.randrange(3, VOCAB) for _ in range(length)] for _ in range(count)]


def parse_steps(text: str) -> list[tuple[int, float]]:
    steps = []
    for part in text.split(","):
        streams, _, seconds = part.partition(":")
        steps.append((int(streams), float(seconds)))
    if not steps or any(not (1 <= s <= 64 and 0 < d <= 300) for s, d in steps):
        raise SystemExit("--steps: STREAMS:SECONDS,... with 1-64 streams and at most 300 s a step")
    return steps


async def _send(client: Any, url: str, body: dict[str, Any]) -> dict[str, Any] | None:
    resp = await client.post(url, json=body)
    resp.raise_for_status()
    usage: dict[str, Any] | None = resp.json().get("usage")
    return usage


async def run(port: int, steps: list[tuple[int, float]], fixed: tuple[int, int] | None,
              max_requests: int, model: str) -> tuple[list[dict[str, Any]], float]:
    import httpx

    url = f"http://{HOST}:{port}/v1/completions"
    texts = shared_prompts()
    budget = [max_requests]
    records: list[dict[str, Any]] = []
    t0 = time.monotonic()

    async def stream(wid: int, step: int, streams: int, deadline: float, client: httpx.AsyncClient) -> None:
        rnd = random.Random(step * 1000 + wid)
        while time.monotonic() < deadline and budget[0] > 0:
            budget[0] -= 1
            sent: int | None
            if fixed is not None:
                prompt: Any = [rnd.randrange(3, VOCAB) for _ in range(fixed[0])]
                sent, max_tokens = fixed[0], fixed[1]
            else:
                prompt = list(rnd.choice(texts))
                if rnd.random() >= 0.6:
                    prompt += [rnd.randrange(3, VOCAB) for _ in range(16)]
                sent, max_tokens = len(prompt), rnd.choice([128, 192, 256])
            body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 1.0,
                    "ignore_eos": True}
            start = time.monotonic() - t0
            record: dict[str, Any] = {"start_s": round(start, 3), "step_streams": streams,
                                      "prompt_tokens_sent": sent, "max_tokens": max_tokens}
            try:
                usage = await _send(client, url, body)
            except (httpx.HTTPError, ValueError) as exc:
                record.update(ok=False, error=type(exc).__name__)
            else:
                record.update(ok=True, prompt_tokens=(usage or {}).get("prompt_tokens"),
                              completion_tokens=(usage or {}).get("completion_tokens"))
            record["end_s"] = round(time.monotonic() - t0, 3)
            records.append(record)

    limits = httpx.Limits(max_connections=max(s for s, _ in steps) + 2)
    async with httpx.AsyncClient(timeout=httpx.Timeout(120.0), limits=limits, trust_env=False) as client:
        for number, (streams, seconds) in enumerate(steps):
            deadline = time.monotonic() + seconds
            await asyncio.gather(*(stream(w, number, streams, deadline, client) for w in range(streams)))
    return records, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("port", type=int)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--steps", default="1:12,2:12,4:12,8:12,16:12")
    ap.add_argument("--fixed", default=None, help="PROMPT_TOKENS:OUTPUT_TOKENS")
    ap.add_argument("--max-requests", type=int, default=3000)
    ap.add_argument("--model", default="tiny-llama")
    a = ap.parse_args()
    steps = parse_steps(a.steps)
    fixed = None
    if a.fixed:
        p, _, o = a.fixed.partition(":")
        fixed = (int(p), int(o))
    if not 0 < a.max_requests <= 10000:
        ap.error("keep the load bounded: --max-requests 1-10000")
    records, wall = asyncio.run(run(a.port, steps, fixed, a.max_requests, a.model))
    a.out_dir.mkdir(parents=True, exist_ok=True)
    records.sort(key=lambda r: r["start_s"])
    with open(a.out_dir / "client_requests.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    ok = [r for r in records if r["ok"]]
    summary = {
        "steps": [{"streams": s, "seconds": d} for s, d in steps],
        "fixed": None if fixed is None else {"prompt_tokens": fixed[0], "output_tokens": fixed[1]},
        "wall_s": round(wall, 1), "requests": len(records), "ok": len(ok),
        "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in ok),
        "completion_tokens": sum(r["completion_tokens"] or 0 for r in ok),
    }
    (a.out_dir / "client_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary), flush=True)
    return 0 if ok and len(ok) == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
