"""A handful of short requests run to the end on an engine a test has built (and perhaps wrapped) to watch its lanes."""

from __future__ import annotations

from engine.config import SamplingParams
from engine.request import Request


def run_short_requests(eng, count: int = 4, max_new_tokens: int = 8) -> list[Request]:
    """Generate ``count`` requests of three-token prompts on ``eng``, enough to fill PDV's two groups, then stop it;
    check that every one ended ok. Returns them. Mutates: ``eng`` is stopped, even on failure."""
    requests = [Request(f"t{i}", [1, 2, 3 + i], SamplingParams(max_new_tokens=max_new_tokens)) for i in range(count)]
    try:
        eng.generate(requests, timeout=60)
    finally:
        eng.stop()
    assert all(r.status == "ok" for r in requests), [r.error for r in requests if r.status != "ok"]
    return requests
