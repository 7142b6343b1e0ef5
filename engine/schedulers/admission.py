"""What a request needs before an engine admits it: its parameters as the sampler applies them, a check
with one message, and its KV reservation."""

from __future__ import annotations

from dataclasses import replace

from engine.config import SamplingParams
from engine.models.pair import ModelPair
from engine.request import Request


def normalised(params: SamplingParams, vocab_size: int) -> SamplingParams:
    """``params`` as the sampler applies them: a top_k at or past the vocabulary keeps every token, so it is off
    (as vLLM treats it), and no huge k reaches a tensor."""
    if params.top_k is not None and params.top_k >= vocab_size:
        return replace(params, top_k=None)
    return params


def kv_reservation(request: Request) -> int:
    """KV tokens a request holds in each model's budget from admission to release."""
    return len(request.prompt_token_ids) + request.params.max_new_tokens + 1


def request_problem(request: Request, pair: ModelPair, budget_capacity: int) -> str | None:
    """Why ``request`` can never run on ``pair`` within ``budget_capacity`` KV tokens, or None if it can."""
    n = len(request.prompt_token_ids)
    if n == 0:
        return "empty prompt"
    vocab = pair.verifier.vocab_size
    if max(request.prompt_token_ids) >= vocab:
        return f"prompt has token ids outside the vocabulary (size {vocab})"
    if n + request.params.max_new_tokens > pair.max_context:
        return (
            f"prompt ({n} tokens) + up to {request.params.max_new_tokens} new tokens exceeds "
            f"the model context of {pair.max_context} tokens"
        )
    need = kv_reservation(request)
    if need > budget_capacity:
        return f"request needs {need} KV tokens, more than the whole budget ({budget_capacity}); raise max_cache_tokens"
    return None
