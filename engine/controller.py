"""Draft-length controllers, shared by every speculative engine.

* ``fixed``    – L never changes.
* ``feedback`` – acceptance-aware feedback. Inputs: acceptance rate (EMA of
  accepted / drafted; the correction or bonus token does not count), the verify
  lane's queue depth and the decode lane's p95 step latency. Shrink L by one
  when the verify queue or the decode p95 is above its target, or when
  acceptance is low; grow it by one when both are within target and acceptance
  is high. Bounds [min_len, max_len]; under sustained overload with low
  acceptance it switches speculation off (L = 0) and probes back with L = 1.
* ``goodput``  – choose the L that maximises expected emitted tokens per second,
  E[tokens | L, a] / cost(L), with E = (1 - a^(L+1)) / (1 - a) (Leviathan et
  al.) and cost(L) = L * t_draft + t_verify(L + 1) measured online for the
  current batch size (SmartSpec / TurboSpec). Here a is the probability that
  a drafted token is accepted given that the ones before it were, estimated as
  accepted / (accepted + rejections). accepted / drafted would understate it:
  the tokens drafted after a rejection never get a chance (at a = 0.45 and
  L = 4, accepted / drafted is about 0.2).

Every change of L is kept with its reason in the controller's ``changes`` list.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

from engine.config import ControllerConfig

ACCEPT_HIGH = 0.7  # above this, another drafted token is likely to pay for itself
ACCEPT_LOW = 0.35  # below this, most drafted tokens are wasted work
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

    @property
    def positions(self) -> int:
        return self.draft_len if self.draft_positions is None else self.draft_positions


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


class DraftLengthController:
    """Base: holds L, the acceptance EMA and the change log. Thread-safe."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self._length = config.draft_len
        self._acceptance: float | None = None
        self._accepted_ema = self._trials_ema = 0.0  # per-token acceptance = their ratio
        self._lock = threading.Lock()
        self.changes: list[LengthChange] = []

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
                self.changes.append(LengthChange(time.perf_counter(), self._length, new, reason))
                self._length = new
            return self._length

    def _observe(self, obs: StepObservation) -> None:
        pass

    def _decide(self, signals: LoadSignals) -> tuple[int, str]:
        return self._length, ""


class FixedController(DraftLengthController):
    pass


class FeedbackController(DraftLengthController):
    def _decide(self, signals: LoadSignals) -> tuple[int, str]:
        cfg, length, a = self.config, self._length, self._acceptance
        overloaded = []
        if signals.verify_queue > cfg.target_verify_queue:
            overloaded.append(f"verify queue {signals.verify_queue} > {cfg.target_verify_queue}")
        if cfg.target_decode_p95_ms is not None and signals.decode_p95_ms > cfg.target_decode_p95_ms:
            overloaded.append(f"decode p95 {signals.decode_p95_ms:.0f} ms > {cfg.target_decode_p95_ms:.0f} ms")
        if length == 0:  # nothing is drafted, so the acceptance reading is stale: only the load decides
            if overloaded:
                return 0, "; ".join(overloaded)
            return max(1, cfg.min_len), "load back within target: probing speculation again"
        low = a is not None and a < ACCEPT_LOW
        floor = 0 if cfg.allow_zero else cfg.min_len
        if overloaded or low:
            reasons = overloaded + ([f"acceptance {a:.2f} < {ACCEPT_LOW}"] if low else [])
            target = length - 1 if length > cfg.min_len or (overloaded and low) else length
            return max(floor, target), "; ".join(reasons)
        if a is not None and a > ACCEPT_HIGH and length < cfg.max_len:
            return length + 1, f"acceptance {a:.2f} > {ACCEPT_HIGH} with load within target"
        return length, ""


class GoodputController(DraftLengthController):
    """Maximises E[tokens | L, a] / cost(L) with step costs measured online per batch size."""

    WINDOW = 32  # recent steps per batch size used to fit the cost model
    PROBE_EVERY = 16  # with speculation off, re-measure acceptance this often (steps)

    def __init__(self, config: ControllerConfig) -> None:
        super().__init__(config)
        self._samples: dict[int, deque[StepObservation]] = {}
        self._steps_off = 0

    def _observe(self, obs: StepObservation) -> None:
        self._samples.setdefault(obs.batch_size, deque(maxlen=self.WINDOW)).append(obs)

    def costs(self, batch_size: int) -> tuple[float, float, float] | None:
        """(seconds per draft position, verify intercept, verify seconds per token) or None."""
        if not self._samples:
            return None
        nearest = min(self._samples, key=lambda b: abs(b - batch_size))
        obs = list(self._samples[nearest])
        with_draft = [o for o in obs if o.positions > 0]
        if with_draft:
            per_pos = sum(o.draft_s / o.positions for o in with_draft) / len(with_draft)
        elif any(o.drafted for o in obs):
            per_pos = 0.0  # proposals that ran no draft forward (prompt lookup) cost nothing per position
        else:
            return None
        xs = [o.draft_len + 1 for o in obs]
        ys = [o.verify_s for o in obs]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        var = sum((x - mean_x) ** 2 for x in xs)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0
        slope = max(slope, 0.0)
        return per_pos, max(mean_y - slope * mean_x, 0.0), slope

    def _decide(self, signals: LoadSignals) -> tuple[int, str]:
        cfg, a = self.config, self.token_acceptance
        if self._length == 0:
            self._steps_off += 1
            if self._steps_off >= self.PROBE_EVERY:
                self._steps_off = 0
                return max(1, cfg.min_len), "goodput: probing acceptance after running without speculation"
        costs = self.costs(signals.batch_size)
        if a is None or costs is None:
            return self._length, ""
        per_pos, intercept, slope = costs
        low = 0 if cfg.allow_zero else cfg.min_len
        best, best_rate = self._length, -1.0
        for length in range(low, cfg.max_len + 1):
            if 0 < length < cfg.min_len:
                continue
            cost = length * per_pos + intercept + slope * (length + 1)
            rate = expected_tokens(length, a) / cost if cost > 0 else 0.0
            if rate > best_rate:
                best, best_rate = length, rate
        if best == self._length:
            return best, ""
        return best, f"goodput: L={best} maximises {best_rate:.1f} tok/s per row at per-token acceptance {a:.2f}"


def make_controller(config: ControllerConfig) -> DraftLengthController:
    kinds = {"fixed": FixedController, "feedback": FeedbackController, "goodput": GoodputController}
    return kinds[config.kind](config)
