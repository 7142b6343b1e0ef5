"""Colocated engines: one loop does everything, with continuous batching.

Policy. Each iteration of the single ``loop`` lane (1) admits waiting
requests while the batch limit and KV budget allow, (2) runs one prefill
chunk (at most ``prefill_chunk_tokens`` prompt tokens, both models) for the
requests still prefilling, then (3) runs one decode step for every running
request: for ``baseline`` a speculative step – L draft forwards, one verifier
forward over L+1 positions, accept – and for ``ar`` one plain verifier
forward. Prefill and decode therefore alternate on the device, as in vLLM's
colocated speculative decoding; a long prompt delays decoding by one chunk.

``ar`` is the no-speculation reference: the verifier alone, no draft model.
"""

from __future__ import annotations

from engine.config import EngineName
from engine.schedulers.base import Engine
from engine.sequence import Sequence


class BaselineEngine(Engine):
    name = EngineName.BASELINE
    speculative = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._prefilling: list[Sequence] = []
        self._running: list[Sequence] = []

    def _lane_loops(self):
        return {"loop": self._loop}

    def _queue_depths(self) -> dict[str, int]:
        return {"loop": len(self._waiting) + self._inbox.qsize() + len(self._prefilling)}

    def _loop(self) -> None:
        lane = self.lanes["loop"]
        self._prefilling += self._admit(len(self._prefilling) + len(self._running))
        if not self._prefilling and not self._running:
            self._idle()
            return
        with lane.busy():
            if self._prefilling:
                ready = self._isolated(list(self._prefilling), self._prefill)
                self._prefilling = self._retire([s for s in self._prefilling if not s.prefill_done])
                self._running += ready
            if self._running:
                self._running = self._isolated(self._running, self._step)


class AREngine(BaselineEngine):
    name = EngineName.AR
    speculative = False
