"""Packed forwards for the attention tests: token lists in, logits out, and the same rows run one by one."""

from __future__ import annotations

import torch

from engine.runner import ModelRunner


def forward_tokens(runner: ModelRunner, stores, token_lists: list[list[int]]) -> torch.Tensor:
    """One packed forward of ``token_lists`` (one list per store); the logits of every new token."""
    ids = torch.tensor([t for tokens in token_lists for t in tokens])
    return runner.forward(stores, ids, [len(t) for t in token_lists], torch.arange(ids.shape[0]))


def packed_and_alone(
    runner: ModelRunner, prompts: list[list[int]], news: list[list[int]], capacity: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits of ``news`` after ``prompts``, all rows in one packed forward, and each row in its own."""
    together = [runner.new_store(capacity) for _ in prompts]
    forward_tokens(runner, together, prompts)
    packed = forward_tokens(runner, together, news)
    alone = []
    for prompt, new in zip(prompts, news, strict=True):
        store = runner.new_store(capacity)
        forward_tokens(runner, [store], [prompt])
        alone.append(forward_tokens(runner, [store], [new]))
    return packed, torch.cat(alone)
