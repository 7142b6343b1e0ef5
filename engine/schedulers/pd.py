"""PD: prefill and decode disaggregated into two lanes.

Policy. The ``prefill`` lane admits requests and feeds their prompts through
both models in chunks of at most ``prefill_chunk_tokens`` tokens; a request
whose prompt is complete gets its first token from the verifier and is handed
to the ``decode`` lane. The ``decode`` lane runs speculative steps – draft and
verify together, atomically – over every running request. Each lane has its
own thread and (on CUDA) its own stream; a hand-off records an event on the
producer's stream that the consumer's stream waits on. When both lanes want
the device at once the arbiter favours decode (``engine.schedulers.plan.choose_lane``).

Composition: ``Prefill`` on one lane, ``AtomicDecode`` on the other, joined by a hand-off.
"""

from __future__ import annotations

from engine.config import EngineName
from engine.schedulers.atomic_decode import AtomicDecode
from engine.schedulers.base import Engine
from engine.schedulers.handoff import Handoff
from engine.schedulers.lanes import LaneSpec
from engine.schedulers.prefill import Prefill


class PDEngine(Engine):
    name = EngineName.PD

    def _compose(self) -> tuple[LaneSpec, ...]:
        decode_side = Handoff()
        prefill = Prefill(self, decode_side)
        return (
            # the arbiter weighs what is admitted (requests the batch has no room for are no lane's work yet)
            LaneSpec("prefill", (prefill,), prefill.depth, lambda: len(prefill.prefilling)),
            LaneSpec("decode", (AtomicDecode(self, decode_side),), decode_side.total, decode_side.total),
        )
