"""What a request needs before an engine admits it: a check with one message, and its KV reservation."""

from __future__ import annotations

from engine.models.pair import ModelPair
from engine.request import Request


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
            f"prompt ({n} tokens) + max_new_tokens ({request.params.max_new_tokens}) exceeds "
            f"the model context of {pair.max_context} tokens"
        )
    need = kv_reservation(request)
    if need > budget_capacity:
        return f"request needs {need} KV tokens, more than the whole budget ({budget_capacity}); raise max_cache_tokens"
    return None
