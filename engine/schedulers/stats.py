"""What an engine publishes about itself: cumulative counters and an immutable snapshot for monitors.

Accounting: every submitted request ends in exactly one of ok, failed,
cancelled or rejected, so at any moment submitted == ended + unfinished, and
once the engine is idle or stopped, submitted == ok + failed + cancelled +
rejected. ``EngineStats.accounting_problem`` says when that does not hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from engine.suffix_tree import TreeSize

LaneName = Literal["loop", "prefill", "decode", "verify"]


@dataclass(frozen=True)
class Outcomes:
    """Requests ended, by final status (cumulative)."""

    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    rejected: int = 0

    @property
    def total(self) -> int:
        return self.ok + self.failed + self.cancelled + self.rejected

    def plus(self, status: str) -> Outcomes:
        return replace(self, **{str(status): getattr(self, str(status)) + 1})


@dataclass
class Counters:
    """Cumulative totals since the engine started; mutated under the engine's lock."""

    tokens: int = 0  # emitted, every request
    drafted: int = 0
    accepted: int = 0
    submitted: int = 0  # every call to submit, rejected ones included
    outcomes: Outcomes = Outcomes()

    @property
    def finished(self) -> int:
        return self.outcomes.total

    def add(self, tokens: int, drafted: int, accepted: int) -> None:
        self.tokens += tokens
        self.drafted += drafted
        self.accepted += accepted

    def end(self, status: str, submitted: bool = False) -> None:
        """Count one request ended with ``status`` (ok, failed, cancelled or rejected); ``submitted``: a
        refusal at submission, counted as submitted at the same moment, so a snapshot never sees it half-counted."""
        self.submitted += submitted
        self.outcomes = self.outcomes.plus(status)


class StepModes(NamedTuple):
    """The groups PDV's step choice ran each way, cumulative (``engine.schedulers.plan.StepMode``)."""

    atomic: int  # drafted, verified and accepted on the decode lane, as PD does
    pipelined: int  # drafted on the decode lane, verified on the verify lane

    def since(self, earlier: StepModes) -> StepModes:
        """The groups run after the snapshot ``earlier`` was taken (e.g. a run's measured part, past its warm-up)."""
        return StepModes(self.atomic - earlier.atomic, self.pipelined - earlier.pipelined)


@dataclass(frozen=True)
class LaneStats:
    name: LaneName
    queue_depth: int
    busy_s: float  # cumulative seconds busy


@dataclass(frozen=True)
class EngineStats:
    """One snapshot of an engine, or of a server driven as one (``workloads.endpoint.engine``)."""

    engine: str
    time: float  # perf_counter
    waiting: int | None  # submitted, not admitted; None: a server whose /metrics did not answer
    running: int | None  # admitted, not finished; None as for ``waiting``
    lanes: tuple[LaneStats, ...]  # () for a server: its lanes are not visible
    draft_len: int | None  # None for the AR engine
    counters: Counters  # a copy: cumulative tokens, drafts and request outcomes
    unfinished: int  # submitted and not ended (waiting or running)
    kv_cache_usage: float | None = None  # 0..1; only a server's /metrics reports it
    drafts: int | None = None  # steps that drafted, cumulative; only a server's /metrics counts them
    suffix_tree: TreeSize | None = None  # what the suffix drafters' global tree holds; None without one
    step_modes: StepModes | None = None  # PDV's groups by step mode, cumulative; None for the other engines

    @property
    def tokens_emitted(self) -> int:
        return self.counters.tokens

    @property
    def drafted(self) -> int:
        return self.counters.drafted

    @property
    def accepted(self) -> int:
        return self.counters.accepted

    @property
    def finished(self) -> int:
        """Requests ended, any status."""
        return self.counters.finished

    @property
    def submitted(self) -> int:
        return self.counters.submitted

    @property
    def outcomes(self) -> Outcomes:
        return self.counters.outcomes

    def accounting_problem(self) -> str | None:
        """Why submitted != ended + unfinished, or None when every request is accounted for."""
        if self.submitted == self.outcomes.total + self.unfinished:
            return None
        o = self.outcomes
        return (
            f"{self.engine} engine accounting does not balance: {self.submitted} submitted, but {o.ok} ok + "
            f"{o.failed} failed + {o.cancelled} cancelled + {o.rejected} rejected + {self.unfinished} unfinished"
        )


def p95_ms(latencies: Iterable[float]) -> float:
    """The 95th percentile of ``latencies`` (seconds) in milliseconds; 0 for none."""
    lat = sorted(latencies)
    return lat[int(0.95 * (len(lat) - 1))] * 1000 if lat else 0.0
