"""The first light's engine runs: a batch of requests through one engine, and what it measured.

``closed_batch`` submits C requests at once to a started engine and waits
for all of them; a batch of one is repeated so that every figure comes from
at least ``MIN_REQUESTS`` requests. Every request runs to ``max_new_tokens``
(no stop token), so every engine serves the same tokens. Times are taken by
the engine (``Request``'s timeline) and derived by ``metrics.request_metrics``;
the allocator's peak is read after the batch, the engine's lanes already
started, so model loading is not in it.
"""

from __future__ import annotations

import time

from engine.config import ControllerConfig, EngineConfig, SamplingParams, StepChoice
from engine.devices import allocator_memory, fresh_memory
from engine.models.pair import ModelPair
from engine.request import Request
from engine.schedulers.registry import make_engine
from metrics.request_metrics import request_metrics
from metrics.summary import percentile

MIN_REQUESTS = 4  # per figure: a batch of one is repeated this often
DRAFT_LEN = 4  # fixed, so each engine drafts the same and no step-cost profile is needed to start one
TIMEOUT_S = 180.0  # one batch; a stuck engine fails its run instead of holding the whole check

SENTENCES = (
    "the quick brown fox jumps over the lazy dog. ",
    "speculative decoding drafts tokens and verifies them in one step. ",
    "a lighthouse keeper counts the ships that pass at night. ",
    "one two three four five six seven eight nine ten. ",
)


def repetitive_prompts(count: int, repeats: int = 2) -> list[str]:
    """``count`` prompts that repeat a sentence: what lookup drafting copies from."""
    return [f"request {i}: " + SENTENCES[i % len(SENTENCES)] * repeats for i in range(count)]


def engine_config(drafter: str, max_batch: int) -> EngineConfig:
    """The config every engine runs with here: a fixed draft length, PDV pipelined by count, ``max_batch`` rows."""
    return EngineConfig(
        drafter=drafter,
        controller=ControllerConfig(kind="fixed", draft_len=DRAFT_LEN),
        step_choice=StepChoice.COUNT,
        max_batch_size=max_batch,
    )


def make_requests(pair: ModelPair, prompts: list[str], max_new: int, tag: str) -> list[Request]:
    params = SamplingParams(max_new_tokens=max_new, stop_token_ids=())
    return [Request(f"{tag}{i}", pair.encode_prompt(p, raw=True), params) for i, p in enumerate(prompts)]


def outputs(pair: ModelPair, engine: str, config: EngineConfig, prompts: list[str], max_new: int) -> list[Request]:
    """Every prompt through ``engine`` at once; the finished requests (a failed one raises)."""
    requests = make_requests(pair, prompts, max_new, "o")
    eng = make_engine(engine, pair, config)
    try:
        eng.generate(requests, timeout=TIMEOUT_S)
    finally:
        eng.stop()
    failed = [f"{r.request_id}: {r.error}" for r in requests if r.status != "ok"]
    if failed:
        raise RuntimeError(f"{engine}: {len(failed)} requests failed, first {failed[0]}")
    return requests


def closed_batch(
    pair: ModelPair,
    engine: str,
    config: EngineConfig,
    concurrency: int,
    max_new: int,
    min_requests: int = MIN_REQUESTS,
    warm: bool = True,
) -> dict:
    """``concurrency`` requests at once through ``engine`` (repeated up to ``min_requests``); the figures.

    ``warm``: one untimed batch first, so first-call costs (kernel selection, graph captures) stay out.
    """
    prompts = repetitive_prompts(concurrency)
    eng = make_engine(engine, pair, config).start()
    try:
        if warm:
            eng.generate(make_requests(pair, prompts, max_new, "w"), timeout=TIMEOUT_S)
        fresh_memory(pair.device)
        served: list[Request] = []
        elapsed = 0.0
        while len(served) < max(concurrency, min_requests):
            batch = make_requests(pair, prompts, max_new, f"b{len(served)}-")
            start = time.perf_counter()
            eng.generate(batch, timeout=TIMEOUT_S)
            elapsed += time.perf_counter() - start
            served += batch
        memory = allocator_memory(pair.device)
    finally:
        eng.stop()
    return batch_figures(served, elapsed, memory)


def batch_figures(requests: list[Request], elapsed: float, memory) -> dict:
    measured = [request_metrics(r, r.arrival_time or 0.0) for r in requests]
    ok = [m for m in measured if m.completed]
    tokens = sum(m.output_tokens for m in ok)

    def pick(name: str) -> list[float]:
        return [v for m in ok if (v := getattr(m, name)) is not None]

    drafted, accepted = sum(m.drafted_tokens for m in ok), sum(m.accepted_tokens for m in ok)
    return {
        "requests": len(requests),
        "failed": len(requests) - len(ok),
        "output_tokens": tokens,
        "elapsed_s": round(elapsed, 4),
        "tok_per_s": round(tokens / elapsed, 2) if elapsed > 0 else None,
        "ttft_ms_p50": _round(percentile(pick("ttft_ms"), 50)),
        "ttft_ms_p99": _round(percentile(pick("ttft_ms"), 99)),
        "tpot_ms_p50": _round(percentile(pick("tpot_ms"), 50)),
        "tpot_ms_p99": _round(percentile(pick("tpot_ms"), 99)),
        "acceptance": round(accepted / drafted, 4) if drafted else None,
        "tokens_per_verify_step": round(tokens / max(1, sum(m.verify_steps for m in ok)), 3),
        "peak_allocated_mb": None if memory is None else round(memory.peak_allocated_mb, 1),
        "peak_reserved_mb": None if memory is None else round(memory.peak_reserved_mb, 1),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
