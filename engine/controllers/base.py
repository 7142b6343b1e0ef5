"""The controller interface: what an engine tells its controller and what it gets back."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

from engine.config import ControllerConfig
from engine.draft_source import DraftSource
from engine.stages import DraftBlock

EMA_WEIGHT = 0.2  # ~5 steps of memory: reacts within a second at typical step rates


@dataclass(frozen=True)
class LoadSignals:
    verify_queue: int  # PDV: blocks queued for or in verification (at most micro_batches - 1); else 0
    decode_p95_ms: float  # p95 of recent decode-lane step latencies
    batch_size: int  # sequences in the step being scheduled


@dataclass(frozen=True, kw_only=True)
class StepObservation:
    batch_size: int
    draft_len: int
    drafted: int
    accepted: int
    draft_s: float  # wall time of the draft forwards of this step
    verify_s: float  # wall time of the verify forward of this step
    rejected: int = 0  # sequences whose drafted block ended at a rejected token
    draft_positions: int | None = None  # batched draft forwards run; None = draft_len (one more when gated)
    rows: tuple[RowOutcome, ...] = ()  # per row: where its proposal came from, what it drafted and kept

    @classmethod
    def of(cls, block: DraftBlock, kept: list[int], verify_s: float) -> StepObservation:
        """What one verified ``block`` tells the controller; ``kept[b]``: tokens row b had accepted."""
        return cls(
            batch_size=len(block.seqs),
            draft_len=max(block.lens, default=0),
            drafted=sum(block.lens),
            accepted=sum(kept),
            draft_s=block.draft_s,
            verify_s=verify_s,
            rejected=sum(a < n for a, n in zip(kept, block.lens, strict=True)),
            draft_positions=max(block.forwards, default=0),
            rows=tuple(map(RowOutcome, block.sources, block.lens, kept)),
        )

    @property
    def positions(self) -> int:
        return self.draft_len if self.draft_positions is None else self.draft_positions


class RowOption(NamedTuple):
    source: DraftSource | None  # where the row's proposal would come from; None: it can get none
    cap: int  # the most tokens it may be given: max_new_tokens left, a lookup's length


class RowOutcome(NamedTuple):
    source: DraftSource | None
    drafted: int
    accepted: int


@dataclass(frozen=True)
class LengthChange:
    time: float  # perf_counter
    old: int
    new: int
    reason: str


def expected_tokens(draft_len: int, alpha: float) -> float:
    """Expected tokens emitted by one verify step: (1 - a^(L+1)) / (1 - a)."""
    if alpha >= 1.0:
        return draft_len + 1.0
    return (1.0 - alpha ** (draft_len + 1)) / (1.0 - alpha)


CHANGE_LOG_SIZE = 1000


class DraftLengthController:
    """Base: holds L, the acceptance EMA and the change log. Thread-safe."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self._length = config.draft_len
        self._acceptance: float | None = None
        self._accepted_ema = self._trials_ema = 0.0  # per-token acceptance = their ratio
        self._lock = threading.Lock()
        # the latest changes of L with their reasons; bounded, as a server runs for days
        self.changes: deque[LengthChange] = deque(maxlen=CHANGE_LOG_SIZE)

    @property
    def length(self) -> int:
        return self._length

    @property
    def acceptance(self) -> float | None:
        """EMA of accepted / drafted, the acceptance rate the metrics report."""
        return self._acceptance

    @property
    def token_acceptance(self) -> float | None:
        """EMA estimate of the chance that a drafted token is accepted given the ones before it were."""
        if self._acceptance is None:
            return None
        return self._accepted_ema / self._trials_ema if self._trials_ema else 1.0

    def observe(self, obs: StepObservation) -> None:
        with self._lock:
            if obs.drafted:
                rate = obs.accepted / obs.drafted
                a = self._acceptance
                self._acceptance = rate if a is None else (1 - EMA_WEIGHT) * a + EMA_WEIGHT * rate
                keep = 0.0 if a is None else 1 - EMA_WEIGHT
                self._accepted_ema = keep * self._accepted_ema + obs.accepted
                self._trials_ema = keep * self._trials_ema + obs.accepted + obs.rejected
            self._observe(obs)

    def next_length(self, signals: LoadSignals) -> int:
        with self._lock:
            new, reason = self._decide(signals)
            if new != self._length:
                self._record(new, reason)
            return self._length

    def _record(self, new: int, reason: str) -> None:
        """Change L to ``new``, logging why. Called under ``_lock``."""
        self.changes.append(LengthChange(time.perf_counter(), self._length, new, reason))
        self._length = new

    def lengths(self, signals: LoadSignals, options: list[RowOption]) -> list[int]:
        """Each row's draft length for the next step: the controller's L, within what the row can take."""
        length = self.next_length(signals)
        return [min(length, o.cap) if o.source is not None else 0 for o in options]

    def _observe(self, obs: StepObservation) -> None:
        pass

    def _decide(self, signals: LoadSignals) -> tuple[int, str]:
        return self._length, ""
