"""``goodput``: the L that maximises expected emitted tokens per second, from costs measured online.

E[tokens | L, a] / cost(L), with E = (1 - a^(L+1)) / (1 - a) (Leviathan et al.)
and cost(L) = L * t_draft + t_verify(L + 1) measured online for the current
batch size (SmartSpec / TurboSpec). Here a is the probability that a drafted
token is accepted given that the ones before it were, estimated as
accepted / (accepted + rejections). accepted / drafted would understate it:
the tokens drafted after a rejection never get a chance (at a = 0.45 and
L = 4, accepted / drafted is about 0.2).
"""

from __future__ import annotations

from collections import deque

from engine.config import ControllerConfig
from engine.controllers.base import DraftLengthController, LoadSignals, StepObservation, expected_tokens


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
