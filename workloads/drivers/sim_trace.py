"""Traces for model pairs this machine does not hold: prompt and output lengths without their tokenizer.

A simulated engine needs only lengths. For a pair given by its shapes alone
(``sim.model_shapes``) there is no tokenizer here, so a text's length in
tokens is estimated as its characters / ``CHARS_PER_TOKEN`` (about 4 for
English under the Llama 3 and Qwen 2.5 tokenizers), a stated approximation;
prompts are sampled from the dataset exactly as a replay samples them
(seeded shuffle, vLLM's length filter), without a chat template. A synthetic
trace draws its lengths as a replay's does. Where the dataset holds fewer
usable prompts than asked, the sampled ones repeat in order (ids made unique).
"""

from __future__ import annotations

import math

import numpy as np

from workloads.drivers.trace import DatasetSpec, Trace, TraceItem, load_trace

CHARS_PER_TOKEN = 4.0


class LengthTokenizer:
    """``encode`` gives as many placeholder ids as the text's estimated tokens."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [0] * max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


class LengthEncoder:
    """What ``load_trace`` needs of a pair, by estimated lengths (``workloads.drivers.trace.PromptEncoder``)."""

    def __init__(self, max_context: int) -> None:
        self.tokenizer = LengthTokenizer()
        self.max_context = max_context

    def encode_prompt(self, text: str, raw: bool = False) -> list[int]:
        return self.tokenizer.encode(text)


def length_trace(
    spec: DatasetSpec, num_requests: int, seed: int, max_new_tokens: int | None, max_context: int
) -> Trace:
    """``num_requests`` requests of ``spec`` by estimated lengths; see the module docstring."""
    if num_requests < 1:
        raise ValueError(f"num_requests must be >= 1, got {num_requests}")
    if spec.synthetic:
        rng = np.random.default_rng(seed)
        prompts = spec.input_len.sample(rng, num_requests)
        outputs = spec.output_len.sample(rng, num_requests)
        cap = max_new_tokens or max(outputs)
        items = tuple(
            TraceItem(f"synthetic-{i}", "", (0,) * p, max(1, min(o, cap)))
            for i, (p, o) in enumerate(zip(prompts, outputs, strict=True))
        )
        return Trace(items, spec.describe() + ", simulated lengths", seed)
    trace = load_trace(spec, LengthEncoder(max_context), num_requests, seed, max_new_tokens)
    items = list(trace.items)
    if not items:
        raise ValueError(f"{spec.describe()}: no prompt passes the length filter")
    base = len(items)
    for i in range(base, num_requests):
        item = items[i % base]
        items.append(
            TraceItem(f"{item.request_id}~{i // base}", item.prompt, item.prompt_token_ids, item.max_new_tokens)
        )
    source = f"{trace.source}, lengths estimated at {CHARS_PER_TOKEN:g} characters per token"
    return Trace(tuple(items), source + (f", {base} prompts repeated" if base < num_requests else ""), seed)
