"""Exact token counts from an engine's step lines (`--enable-logging-iteration-details`), pure.

What vLLM's own counters count (vLLM 0.32, `v1/metrics/stats.py`, `v1/metrics/loggers.py`):

* `vllm:generation_tokens_total` adds the new token ids of each request's output, step by step: one per
  decoding request (one plus its accepted draft tokens with speculative decoding), and one for the
  step that ends a request's prefill (its first token). A prefill chunk that does not end the prompt
  yields none.
* `vllm:prompt_tokens_by_source_total{source="local_compute"}` adds, when a request's first token
  comes out, its prompt less the tokens its first scheduling found cached (`PrefillStats`); a request
  preempted and scheduled again is not counted again.

What a step line counts (`v1/utils.py` `compute_iteration_details`): the tokens scheduled in the step,
split by request phase. A `context` request is a new one or one with no output yet (its prompt, or a
chunk of it, past its cached prefix); every other request is a `generation` request, and its
scheduled tokens are one (plus the draft tokens to verify), or, for a preempted request scheduled again
with the V1 model runner, its whole recomputation. So, per step:

* prompt tokens = the context tokens;
* generation tokens = the generation requests (one token each; not their scheduled tokens, which hold
  draft tokens and recomputations) + the context requests (the first token of each prefill), less one
  when the step before filled the step budget (`max_num_batched_tokens`): its last context request was
  cut there, this step goes on with it, and only one of the two steps yields its first token. The
  budget is known when the launch's arguments name it; without it a prompt cut into chunks counts one
  first token per chunk.

Accepted draft tokens (speculative decoding) are not on the step line: the exporter adds them from the
SpecDecoding lines (`EngineState.apply_spec`).
"""

from __future__ import annotations


class StepTokens:
    """One engine's token counts from its step lines, since its first one (`started`)."""

    __slots__ = ("_cut", "generation", "prompt", "steps")

    def __init__(self) -> None:
        self.prompt = 0
        self.generation = 0
        self.steps = 0
        self._cut = False  # the last step's last context request was cut by the step budget

    @property
    def started(self) -> bool:
        """A step line was counted: the counters are the steps' from here on."""
        return self.steps > 0

    def add(self, context_requests: int, context_tokens: int, generation_requests: int,
            generation_tokens: int, *, dummy: bool = False, budget: int | None = None) -> tuple[int, int]:
        """One step line; `budget`: vLLM's `max_num_batched_tokens` when known. Returns the (prompt,
        generation) tokens it adds.

        >>> s = StepTokens()
        >>> s.add(2, 960, 0, 0), s.add(0, 0, 2, 2)  # two prefills (a first token each), one decode step
        ((960, 2), (0, 2))
        >>> s.add(1, 2048, 0, 0, budget=2048), s.add(1, 400, 0, 0, budget=2048)  # one prompt in 2 chunks
        ((2048, 1), (400, 0))
        """
        if dummy or min(context_requests, context_tokens, generation_requests, generation_tokens) < 0:
            return 0, 0
        self.steps += 1
        continued = 1 if self._cut and context_requests else 0  # the cut request of the step before
        self._cut = (budget is not None and context_requests > 0
                     and context_tokens + generation_tokens >= budget)
        prompt, generation = context_tokens, generation_requests + context_requests - continued
        self.prompt += prompt
        self.generation += generation
        return prompt, generation

    def restart(self) -> None:
        """A new launch: its steps decide again (the counts so far stay in the counters)."""
        self.steps = 0
        self._cut = False
