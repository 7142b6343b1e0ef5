"""Transformers' own greedy ``generate`` of the verifier: the reference every benchmark part is measured against.

One prompt after another, each timed (start, first token, end), plain, with
prompt lookup (``prompt_lookup_num_tokens``) or with an assistant model. The
model pair's attention is switched to ``sdpa`` for the duration: the engines'
packed attention needs the engines' runner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from workloads.drivers.trace import Trace


@dataclass(frozen=True)
class HFTiming:
    """One prompt through transformers' ``generate``: perf_counter seconds and its output."""

    start: float
    first_token: float | None  # None when nothing was generated
    end: float
    output: list[int]


class _FirstToken:
    """A ``generate`` streamer that stamps the first generated token (the first ``put`` is the prompt)."""

    def __init__(self) -> None:
        self.puts, self.at = 0, None

    def put(self, value) -> None:
        self.puts += 1
        if self.puts == 2 and self.at is None:
            self.at = time.perf_counter()

    def end(self) -> None:
        pass


def hf_timeline(pair, trace: Trace, max_new: int, lookup: int | None = None, assistant=None) -> list[HFTiming]:
    """Transformers' greedy ``generate`` of the verifier, one prompt after another, each timed.

    ``lookup`` sets ``prompt_lookup_num_tokens``; ``assistant`` a draft model for assisted generation.
    """
    import torch

    model, timings = pair.verifier.model, []
    models = [model] + ([assistant] if assistant is not None else [])
    previous = [m.config._attn_implementation for m in models]
    for m in models:  # the engine's packed attention needs the engine's runner
        m.set_attn_implementation("sdpa")
    try:
        for item in trace.items:
            ids = torch.tensor([item.prompt_token_ids])
            extra = {"prompt_lookup_num_tokens": lookup} if lookup else {}
            if assistant is not None:
                extra["assistant_model"] = assistant
            else:  # a streamer is not supported with an assistant model
                extra["streamer"] = _FirstToken()
            start = time.perf_counter()
            with torch.inference_mode():
                out = model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=min(max_new, item.max_new_tokens),
                    do_sample=False,
                    eos_token_id=list(pair.eos_token_ids),
                    pad_token_id=pair.eos_token_ids[0],
                    **extra,
                )
            end = time.perf_counter()
            first = extra["streamer"].at if "streamer" in extra else None
            timings.append(HFTiming(start, first, end, out[0, len(item.prompt_token_ids) :].tolist()))
    finally:
        for m, attn in zip(models, previous, strict=True):
            m.set_attn_implementation(attn)
    return timings


def hf_generate(pair, trace: Trace, max_new: int, lookup: int | None, assistant=None) -> tuple[float, list[list[int]]]:
    """Output tokens/s of transformers' greedy ``generate``, one prompt at a time, and the outputs."""
    timings = hf_timeline(pair, trace, max_new, lookup, assistant)
    tokens = sum(len(t.output) for t in timings)
    return tokens / sum(t.end - t.start for t in timings), [t.output for t in timings]
