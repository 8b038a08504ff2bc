"""The needle table (`parsing/needles.py`) against every sample line of each kind: a line of a kind the
offline scanners look for holds that kind's needle, so the bulk scan never skips one (and the live
path's `needles.LIVE_NEEDLES` is built from the same table)."""

from __future__ import annotations

from typing import Any

import pytest
from test_parse_line import INFO_CASES, PREFIX_SPEC_CASES, STATS_CASES, TRANSFER_CASES

from vllm_logwatch.parsing import needles
from vllm_logwatch.parsing.framing import hit_lines
from vllm_logwatch.parsing.needles import LIVE_NEEDLES as NEEDLES
from vllm_logwatch.parsing.needles import WANTS

KIND_NEEDLES = {
    "stats": needles.STATS_NEEDLES + needles.VARIANT_NEEDLES,
    "prefix": needles.PREFIX_NEEDLES,
    "spec": needles.SPEC_NEEDLES,
    "transfer": needles.TRANSFER_NEEDLES,
}
CASES = [c for c in STATS_CASES + PREFIX_SPEC_CASES + TRANSFER_CASES if c.values[1] in KIND_NEEDLES]


@pytest.mark.parametrize(("line", "kind", "fields"), CASES)
def test_every_sample_line_of_a_kind_holds_its_needle(line: str, kind: str, fields: Any) -> None:
    assert any(needle in line.encode() for needle in KIND_NEEDLES[kind])


@pytest.mark.parametrize(("line", "kind", "fields"), [c for c in INFO_CASES if c.values[2].get("new_launch")])
def test_every_new_launch_line_holds_a_launch_needle(line: str, kind: str, fields: Any) -> None:
    assert any(needle in line.encode() for needle in needles.LAUNCH_NEEDLES)


def test_the_live_needles_hold_every_kind() -> None:
    """The live prefilter covers each kind's lines: a needle of every offline kind is one of, or holds,
    a live needle (`Avg prompt t` covers throughput and tput)."""
    for kind, wanted in KIND_NEEDLES.items():
        for needle in wanted:
            assert any(live in needle for live in NEEDLES), (kind, needle)



def test_the_no_stats_hint_needles_find_what_they_explain() -> None:
    """A log without stats lines says why through these lines: 'disabling stats logging' (more than
    one API server) and access lines; each such sample holds one of the needles."""
    disabled = [c.values[0] for c in INFO_CASES if c.values[2].get("stats_logging_disabled")]
    assert disabled and all(any(n in line.encode() for n in needles.NO_STATS_NEEDLES) for line in disabled)


def test_a_needle_in_a_prompt_is_no_hit_but_for_a_reader_of_request_lines() -> None:
    """With request logging on, prompts and outputs hold any word a start-up needle is (" took ",
    " version "): such a line went to the full parser in every offline command (plot of a 200 MB log with
    request logging: 2.1 s, 1.0 s without them). It is a hit only for a reader that looks for request
    lines; a start-up line with the same words still is."""
    header = b"(APIServer pid=7) INFO 12-02 09:00:00 [logger.py:39] "
    data = (header + b"Received request chatcmpl-1: prompt: 'it took a new version ', params: x\n"
            + header + b"Generated response chatcmpl-1: output: 'API server version 9', finish_reason: stop\n"
            + b"(APIServer pid=7) INFO 12-02 09:00:00 [api_server.py:1] vLLM API server version 0.32.0\n"
            + b"(EngineCore pid=8) INFO 12-02 09:00:01 [gpu_worker.py:1] Model loading took 1.2 GiB\n")
    launches = WANTS["launches"].needles
    starts, _ = hit_lines(data, 0, len(data), launches)
    assert [data[s:data.index(b"\n", s)].split(b"] ")[1][:14] for s in starts] == [
        b"vLLM API serve", b"Model loading "]
    with_requests, _ = hit_lines(data, 0, len(data), launches + WANTS["requests"].needles)
    assert len(with_requests) == 4
