"""The verifier alone as the reference: transformers' own greedy ``generate``, and a check of an engine against it."""

from __future__ import annotations

import torch

from engine.models.pair import ModelPair


def hf_greedy(model: torch.nn.Module, prompt_ids: list[int], max_new_tokens: int, stop: bool = False) -> list[int]:
    """The verifier alone, through transformers' own ``generate``.

    ``stop=False`` ignores end-of-sequence tokens (compare with ``stop_token_ids=()``).
    """
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=model.generation_config.eos_token_id if stop else None,
        pad_token_id=0,
    )
    previous = model.config._attn_implementation
    model.set_attn_implementation("sdpa")
    try:
        with torch.inference_mode():
            ids = torch.tensor([prompt_ids])
            out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
    finally:
        model.set_attn_implementation(previous)
    return out[0, len(prompt_ids) :].tolist()


def greedy_run_matches_verifier(
    pair: ModelPair,
    engine: str,
    prompts: list[str],
    max_new_tokens: int,
    config=None,
    stop: bool = False,
    timeout: float = 120,
    profile=None,
) -> list:
    """Run ``prompts`` greedily through ``engine`` and check each output against the verifier's own ``generate``.

    ``stop=False`` runs without stop tokens on both sides; ``profile`` goes to the engine's ``cost`` controller
    (without one it reads the cached one). Returns the finished requests.
    """
    from engine.config import EngineConfig, SamplingParams
    from engine.request import Request
    from engine.schedulers.registry import make_engine

    params = SamplingParams(max_new_tokens=max_new_tokens, **({} if stop else {"stop_token_ids": ()}))
    requests = [Request(f"g{i}", pair.encode_prompt(p), params) for i, p in enumerate(prompts)]
    eng = make_engine(engine, pair, config or EngineConfig(drafter="model"), profile)
    generate_matches_verifier(pair, eng, requests, stop=stop, timeout=timeout)
    return requests


def generate_matches_verifier(pair: ModelPair, eng, requests: list, stop: bool = False, timeout: float = 120) -> None:
    """Generate ``requests`` on ``eng`` (an engine built by the test, perhaps wrapped), stop it, and check that each
    ended ok with the verifier's own greedy output for its prompt and max_new_tokens.

    ``stop=False`` is for requests made with ``stop_token_ids=()``. Mutates: ``eng`` is stopped, even on failure.
    """
    try:
        eng.generate(requests, timeout=timeout)
    finally:
        eng.stop()
    for r in requests:
        assert r.status == "ok", r.error
        expected = hf_greedy(pair.verifier.model, r.prompt_token_ids, r.params.max_new_tokens, stop=stop)
        assert r.output_token_ids == expected, r.request_id


def drafting_pays(pair: ModelPair, config=None):
    """The cached step-cost profile ``config`` reads, with a verify forward costing the same at any tokens per row
    and draft forwards free.

    Under it the ``cost`` controller drafts wherever a row has a proposal or a draft model (more tokens for the
    same time), so a test that needs speculation to happen does not depend on how busy the machine was when the
    profile was timed.
    """
    from dataclasses import replace

    from engine.config import EngineConfig
    from engine.profiling.prepare import cached_profile

    measured = cached_profile(pair, config or EngineConfig(drafter="model"))
    flat = tuple((row[0],) * len(row) for row in measured.verify_ms)
    return replace(measured, verify_ms=flat, draft_ms=(0.0,) * len(measured.draft_ms))
