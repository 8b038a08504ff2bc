"""A vLLM log with request logging and iteration details on, for the benches: the real line shapes of
tests/data/latency (vLLM 0.32 `--enable-logging-iteration-details --enable-log-requests
--enable-log-outputs`), with the prompt on each `Received request` line as vLLM printed it before 0.11
(about 4 KB of prompt: the bytes of such a log are mostly those lines), and a uvicorn access line and
a stats line now and then.

Per request (`--steps-per-request` engine steps, 8 by default): its `Received request` (prompt and
sampling parameters), `Added request`, its steps' iteration lines, 4 streamed pieces of output, the
stream's complete line (the whole output, ~600 bytes) and its access line; a stats line every 200
requests. `generate(path, size, seed)` writes about `size` bytes; `expected(path)` counts what a reader
must find.
"""

from __future__ import annotations

import random
from pathlib import Path

HDR = "(APIServer pid=26467) INFO {stamp} "
HEAD_LOG = (Path(__file__).resolve().parents[1] / "tests" / "data" / "real-vllm-cpu"
            / "serve_20261129T192328Z.log")
RECEIVED = (HDR + "[logger.py:39] Received request chatcmpl-{rid}: prompt: '{prompt}', params: "
            "SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, "
            "temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], "
            "bad_words=[], include_stop_str_in_output=False, ignore_eos=False, max_tokens=64, min_tokens=0, "
            "logprobs=None, prompt_logprobs=None, skip_special_tokens=True, "
            "spaces_between_special_tokens=True, structured_outputs=None, extra_args=None), "
            "lora_request: None.\n")
ADDED = HDR + "[async_llm.py:578] Added request chatcmpl-{rid}-8bcc5583.\n"
STEP = (HDR + "[loggers.py:199] Engine 000: Iteration({it}): {ctx} context requests, {ctok} context tokens, "
        "{gen} generation requests, {gen} generation tokens, iteration elapsed time: {ms:.2f} ms, "
        "CPU KV cache usage: {kv:.1f}%\n")
DELTA = (HDR + "[request_logger.py:108] Generated response chatcmpl-{rid} (streaming delta): "
         "output: '{text}', finish_reason: {reason}\n")
COMPLETE = (HDR + "[request_logger.py:108] Generated response chatcmpl-{rid} (streaming complete): output: "
            "'{text}', finish_reason: streaming_complete\n")
ACCESS = 'INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
STATS = ("(APIServer pid=26467) INFO {stamp} [loggers.py:335] Engine 000: Avg prompt throughput: {p:.1f} "
         "tokens/s, Avg generation throughput: {g:.1f} tokens/s, Running: {r} reqs, Waiting: 0 reqs, "
         "CPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 0.0%\n")
WORDS = ("engine", "token", "stream", "latency", "batch", "prefill", "decode", "cache", "block", "queue",
         "request", "server", "model", "tensor", "kernel", "schedule", "version", "took", "ERROR")


def _head() -> str:
    out = []
    with open(HEAD_LOG, encoding="utf-8") as fh:
        for line in fh:
            if "Avg prompt throughput" in line:
                break
            out.append(line)
    return "".join(out)


def generate(path: Path, size: int, seed: int, steps_per_request: int = 8) -> None:
    rng = random.Random(seed)
    prompts = [" ".join(rng.choice(WORDS) for _ in range(620))[:4000] for _ in range(16)]
    outputs = [" ".join(rng.choice(WORDS) for _ in range(90))[:600] for _ in range(16)]
    written, secs, it, n = 0, 9 * 3600, 0, 0
    with open(path, "w", encoding="utf-8") as out:
        head = _head()
        out.write(head)
        written += len(head)
        while written < size:
            stamp = f"12-02 {secs // 3600 % 24:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
            rid = f"{seed:x}{n:08x}"
            lines = [RECEIVED.format(stamp=stamp, rid=rid, prompt=prompts[n % 16]),
                     ADDED.format(stamp=stamp, rid=rid)]
            for s in range(steps_per_request):
                lines.append(STEP.format(stamp=stamp, it=it, ctx=int(s == 0), ctok=480 if s == 0 else 0,
                                         gen=rng.randint(1, 8), ms=rng.uniform(2, 12), kv=rng.uniform(0, 5)))
                it += 1
            for piece in range(4):
                text = outputs[n % 16][piece * 20:piece * 20 + 20]
                reason = "length" if piece == 3 else "None"
                lines.append(DELTA.format(stamp=stamp, rid=rid, text=text, reason=reason))
            lines.append(COMPLETE.format(stamp=stamp, rid=rid, text=outputs[n % 16]))
            lines.append(ACCESS.format(port=rng.randint(32768, 60999)))
            if n % 200 == 0:
                lines.append(STATS.format(stamp=stamp, p=rng.uniform(0, 2000), g=rng.uniform(0, 900),
                                          r=rng.randint(1, 8), kv=rng.uniform(0, 5)))
            text = "".join(lines)
            out.write(text)
            written += len(text)
            n += 1
            if n % 20 == 0:
                secs += 1


def expected(data: bytes) -> dict[str, int]:
    """What a reader must count in a generated log."""
    return {"requests": data.count(b"(streaming complete)"), "steps": data.count(b"] Engine 000: Iteration("),
            "received": data.count(b"Received request ")}
