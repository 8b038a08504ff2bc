"""Verdicts on one run: did the server run what the benchmark asked? Each comes with its numbers.

In the order they are checked (a run can get several; `ok` only when it gets none):

* `another model`: the log's lines in the window are of a launch serving another model only.
* `absent`: no stats line in the window (the server was down, or the window is not in these logs:
  a clock offset?).
* `idle`: stats lines, but nothing ran and nothing was generated.
* `capped by max-num-seqs`: the run asked for more concurrent requests than the launch's
  `--max-num-seqs`; the server can never run more.
* `KV-throttled`: the KV cache reached KV_FULL_PCT and requests waited while fewer than max-num-seqs
  ran (the scheduler held them back for want of KV blocks: with few, large blocks the cache is full
  before it reads 100%), or requests were preempted.
* `queueing`: requests waited in at least SATURATED_SHARE of the samples: the run measured a
  saturated server (its latencies include the queue).
* `time between tokens differs`: the server's time between tokens from the log (`summary`'s:
  measures.py; the why says what it rests on) and the client's mean ITL (else its mean TPOT) differ
  by more than TBT_DIFF_SHARE of the client's: one of them did not measure what it says (a client
  that reads chunks late, a front end that holds the first token back, a window with other traffic).
* `client-bound`: fewer running than could run (median below CLIENT_BOUND_RATIO of the asked
  concurrency, or of max-num-seqs when that is lower) while requests waited in under
  CLIENT_BOUND_WAITING of the samples: the client, not the server, set the pace. It can come with
  `capped by max-num-seqs` (the cap is a fact of the launch; the client did not even reach it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..summary.tbt import TBT_HOW
from .measures import Measures
from .results import Run
from .windows import Window

KV_FULL_PCT = 80.0
SATURATED_SHARE = 0.5
CLIENT_BOUND_RATIO = 0.75
CLIENT_BOUND_WAITING = 0.1
TBT_DIFF_SHARE = 0.15


@dataclass(frozen=True)
class Verdict:
    kind: str
    """`ok`, `another model`, `absent`, `idle`, `capped by max-num-seqs`, `KV-throttled`, `queueing`,
    `time between tokens differs`, `client-bound`."""
    why: str
    """The numbers behind it, one line."""


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def client_tbt(run: Run) -> tuple[str, float] | None:
    """The client's time between tokens: its mean ITL, else its mean TPOT (name, ms)."""
    if run.itl_ms is not None:
        return "ITL", run.itl_ms
    if run.tpot_ms is not None:
        return "TPOT", run.tpot_ms
    return None


def judge(window: Window, m: Measures) -> list[Verdict]:
    """The verdicts on `window`'s run, from its measures `m`."""
    run = window.run
    if not window.lines:
        if window.other_models:
            names = ", ".join(f"{name} ({n} lines)" for name, n in sorted(window.other_models.items()))
            return [Verdict("another model", f"the benchmark's model is {run.model}; the log's in the "
                                             f"window: {names}")]
        return [Verdict("absent", "no stats line of the server in the window "
                                  f"({run.start:%m-%d %H:%M:%S} to {run.end:%H:%M:%S})")]
    if not m.running_max and not m.server_gen_tok_s:
        return [Verdict("idle", f"{m.lines} stats lines in the window, Running 0 and no tokens generated")]
    out: list[Verdict] = []
    asked = run.concurrency
    shown = (f"Running median {_num(m.running_median)} (p10 {_num(m.running_p10)}, p90 "
             f"{_num(m.running_p90)})")
    if asked is not None and m.max_num_seqs is not None and asked > m.max_num_seqs:
        out.append(Verdict("capped by max-num-seqs", f"asked {asked} concurrent, --max-num-seqs "
                                                     f"{m.max_num_seqs}; {shown}"))
    waiting = m.waiting_share or 0.0
    held = m.waiting_below_cap or 0.0
    if (m.kv_peak_pct is not None and m.kv_peak_pct >= KV_FULL_PCT and held > 0) or m.preemptions:
        pre = f", {m.preemptions} preemptions" if m.preemptions else ""
        cap = f"--max-num-seqs {m.max_num_seqs}" if m.max_num_seqs is not None else "the cap"
        out.append(Verdict("KV-throttled", f"KV cache peak {_num(m.kv_peak_pct)}%, requests waiting with "
                                           f"fewer running than {cap} in {held:.0%} of the samples{pre}; "
                                           f"{shown}"))
    if waiting >= SATURATED_SHARE:
        out.append(Verdict("queueing", f"requests waiting in {waiting:.0%} of the samples (up to "
                                       f"{_num(m.waiting_max)}); the run measured a saturated server"))
    client = client_tbt(run)
    if client is not None and client[1] > 0 and m.server_tbt_ms is not None \
            and abs(m.server_tbt_ms - client[1]) > TBT_DIFF_SHARE * client[1]:
        how = TBT_HOW[m.server_tbt_from or "stats lines"]
        out.append(Verdict("time between tokens differs",
                           f"the log's {m.server_tbt_ms:.2f} ms ({how}) against the client's mean "
                           f"{client[0]} {client[1]:.2f} ms ({m.server_tbt_ms / client[1] - 1:+.0%})"))
    can = asked if asked is None or m.max_num_seqs is None else min(asked, m.max_num_seqs)
    if can is not None and m.running_median is not None and m.running_median < CLIENT_BOUND_RATIO * can \
            and waiting < CLIENT_BOUND_WAITING:
        out.append(Verdict("client-bound", f"{shown} where {can} could run, requests waiting in "
                                           f"{waiting:.0%} of the samples"))
    return out or [Verdict("ok", f"{shown}" + (f" for {asked} asked" if asked is not None else ""))]
