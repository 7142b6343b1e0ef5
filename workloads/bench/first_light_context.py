"""What the first light's sections share: its settings, the time budget, the loaded pairs and the report so far."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine.models.pair import ModelPair
from engine.models.shapes import load_shaped_pair

# planning guesses (seconds on the H200 for the default settings; never reported as figures): a section, or one
# item of the sections that loop (a speed run, an acceptance source), starts only if this much time is left
GPU_ESTIMATES = {
    "device": 5, "lossless_float32": 60, "bfloat16_divergence": 15, "host_waits": 20, "speed": 12,
    "step_cost_profile": 45, "profile_interference": 25, "kernel_overlap": 30, "acceptance": 15,
}  # fmt: skip
TINY_ESTIMATES = dict.fromkeys(GPU_ESTIMATES, 1)


@dataclass(frozen=True)
class Settings:
    device: str
    out: Path
    budget_s: float  # the report is written before this many seconds from the start, whatever runs
    check_pair: str  # float32 losslessness, bfloat16 divergence and host waits
    check_prompts: int
    check_tokens: int
    speed_pair: str  # the speed matrix, the step-cost profile and the overlap trace
    speed_dtype: str
    speed_drafter: str
    speed_tokens: int
    concurrency: tuple[int, ...]
    min_requests: int  # per speed figure: a batch of one is repeated this often
    overlap_rows: int
    overlap_tokens: int
    acceptance_rows: int
    acceptance_sources: tuple[tuple[str, str], ...]  # (shaped pair, drafter)
    estimates: dict[str, float] = field(default_factory=lambda: dict(GPU_ESTIMATES))

    def __post_init__(self) -> None:
        if self.budget_s <= 0:
            raise ValueError(f"the time budget must be positive, got {self.budget_s}")
        if not self.concurrency or min(self.concurrency) < 1:
            raise ValueError(f"concurrency levels must be >= 1, got {self.concurrency}")


class Budget:
    """Seconds left of the run's budget, and whether the next piece of work fits with what comes after it."""

    def __init__(self, seconds: float, estimates: dict[str, float], start: float | None = None) -> None:
        self.start = time.perf_counter() if start is None else start
        self.seconds = seconds
        self.estimates = dict(estimates)

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.start)

    def fits(self, name: str, reserve: float = 0.0) -> bool:
        return self.left() - reserve >= self.estimates.get(name, 0.0)

    def took(self, name: str, seconds: float) -> None:
        """A piece of ``name`` took ``seconds``: later pieces are planned with the longest seen."""
        self.estimates[name] = max(self.estimates.get(name, 0.0), seconds)


@dataclass
class Context:
    settings: Settings
    budget: Budget
    order: tuple[str, ...]  # the sections, in the order they run
    report: dict = field(default_factory=dict)
    keep: dict = field(default_factory=dict)  # what one section hands a later one
    current: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    _pairs: dict[tuple[str, str], ModelPair] = field(default_factory=dict)

    @property
    def device(self) -> torch.device:
        return torch.device(self.settings.device)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def out(self) -> Path:
        return self.settings.out

    def pair(self, name: str, dtype: str) -> ModelPair:
        """The shaped pair ``name`` in ``dtype``, built once (seeded: the same weights every time)."""
        if (name, dtype) not in self._pairs:
            began = time.perf_counter()
            self._pairs[name, dtype] = load_shaped_pair(name, self.settings.device, dtype)
            self.progress(f"built {name} in {dtype} ({time.perf_counter() - began:.1f} s)")
        return self._pairs[name, dtype]

    def allows(self, item: str) -> bool:
        """Whether one more ``item`` of the running section fits, leaving the later sections their time."""
        later = self.order[self.order.index(self.current) + 1 :] if self.current in self.order else ()
        return self.budget.fits(item, sum(self.budget.estimates.get(s, 0.0) for s in later))

    def progress(self, message: str) -> None:
        elapsed = time.perf_counter() - self.budget.start
        print(f"[first-light {elapsed:6.1f}s] {message}", file=sys.stderr, flush=True)
