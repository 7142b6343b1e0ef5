"""``fixed`` and ``feedback`` controllers.

* ``fixed``    – L never changes.
* ``feedback`` – acceptance-aware feedback. Inputs: acceptance rate (EMA of
  accepted / drafted; the correction or bonus token does not count), the verify
  lane's queue depth and the decode lane's p95 step latency. Shrink L by one
  when the verify queue or the decode p95 is above its target, or when
  acceptance is low; grow it by one when both are within target and acceptance
  is high. Bounds [min_len, max_len]; under sustained overload with low
  acceptance it switches speculation off (L = 0) and probes back with L = 1.
"""

from __future__ import annotations

from engine.controllers.base import DraftLengthController, LoadSignals

ACCEPT_HIGH = 0.7  # above this, another drafted token is likely to pay for itself
ACCEPT_LOW = 0.35  # below this, most drafted tokens are wasted work


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
