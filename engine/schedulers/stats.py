"""What an engine publishes about itself: cumulative counters and an immutable snapshot for monitors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LaneName = Literal["loop", "prefill", "decode", "verify"]


@dataclass
class Counters:
    """Cumulative totals since the engine started; mutated under the engine's lock."""

    tokens: int = 0  # emitted, every request
    drafted: int = 0
    accepted: int = 0
    finished: int = 0  # requests ended, any status


@dataclass(frozen=True)
class LaneStats:
    name: LaneName
    queue_depth: int
    busy_s: float  # cumulative seconds busy


@dataclass(frozen=True)
class EngineStats:
    engine: str
    time: float  # perf_counter
    waiting: int  # submitted, not admitted
    running: int  # admitted, not finished
    lanes: tuple[LaneStats, ...]
    draft_len: int | None  # None for the AR engine
    tokens_emitted: int  # cumulative
    drafted: int  # cumulative
    accepted: int  # cumulative
    finished: int  # cumulative, any status
