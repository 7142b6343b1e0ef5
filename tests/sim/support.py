"""A cost model of constant forward times, so a simulated timeline can be computed by hand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.cost_model import profile_grid
from sim.policies import CostProfile


@dataclass(frozen=True)
class ConstantCost:
    verify: float = 0.010  # seconds per verifier forward, whatever its shape
    draft: float = 0.001  # seconds per draft position
    prefill: float = 0.005  # seconds per prefill chunk
    gpu: bool = True
    slowdown: float = 1.0

    @property
    def name(self) -> str:
        return "constant"

    @property
    def cuda(self) -> bool:
        return self.gpu

    def verify_s(self, rows: int, tokens: float, context: float) -> float:
        return self.verify

    def draft_s(self, rows: int, context: float) -> float:
        return self.draft

    def prefill_s(self, tokens: int, rows: int, context: float, with_draft: bool) -> float:
        return self.prefill

    def concurrent_slowdown(self, rows: int, tokens: float) -> float:
        return self.slowdown

    def budget_slowdown(self, rows: int, tokens: float) -> float:
        return 1.0

    def profile(self, max_batch: int, max_tokens: int) -> CostProfile:
        return profile_grid(self, max_batch, max_tokens, {"device": "cuda (constant)"})

    def assumptions(self) -> dict[str, Any]:
        return {"cost model": "constant", "verify_s": self.verify, "draft_s": self.draft, "prefill_s": self.prefill}
