"""Colocated engines: one lane does everything, with continuous batching.

Policy. Each pass of the single ``loop`` lane (1) admits waiting requests
while the batch limit and KV budget allow, (2) runs one prefill chunk (at
most ``prefill_chunk_tokens`` prompt tokens, both models) for the requests
still prefilling, then (3) runs one decode step for every running request:
for ``baseline`` a speculative step – L draft forwards, one verifier forward
over L+1 positions, accept – and for ``ar`` one plain verifier forward.
Prefill and decode therefore alternate on the device, as in vLLM's colocated
speculative decoding; a long prompt delays decoding by one chunk.

Composition: one lane carrying ``Prefill`` then ``AtomicDecode``, joined by a
hand-off. ``ar`` is the same composition with no drafter: the verifier alone,
the no-speculation reference.

With ``colocated_lanes = 2`` (lanes at once only) the running batch is split
in two: the ``loop`` lane steps one half and a ``decode`` lane the other, each
with its own share of the cores, every new sequence joining the smaller half.
That is the parallelism any engine could use, with no disaggregation: the
reference that tells how much of PD's and PDV's lanes at once is their design.
"""

from __future__ import annotations

from engine.config import EngineName
from engine.schedulers.atomic_decode import AtomicDecode
from engine.schedulers.base import Engine
from engine.schedulers.handoff import Handoff, SplitHandoff
from engine.schedulers.lanes import LaneSpec
from engine.schedulers.prefill import Prefill


class BaselineEngine(Engine):
    name = EngineName.BASELINE
    speculative = True

    def _compose(self) -> tuple[LaneSpec, ...]:
        if self.config.colocated_lanes == 2:
            halves = (Handoff(), Handoff())
            prefill = Prefill(self, SplitHandoff(halves))
            other = halves[1]
            return (
                LaneSpec("loop", (prefill, AtomicDecode(self, halves[0])), prefill.depth, prefill.depth),
                LaneSpec("decode", (AtomicDecode(self, other),), other.queued, other.queued),
            )
        running = Handoff()
        prefill = Prefill(self, running)
        # the loop's queue is what waits for prefill: the running batch is its work, not its queue
        return (LaneSpec("loop", (prefill, AtomicDecode(self, running)), prefill.depth, prefill.depth),)


class AREngine(BaselineEngine):
    name = EngineName.AR
    speculative = False
