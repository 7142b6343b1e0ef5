"""The prefill work: admission and prompt chunks, handing each sequence whose prompt is done to the next work."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.schedulers.handoff import Handoff, SplitHandoff
from engine.sequence import Sequence

if TYPE_CHECKING:
    from engine.schedulers.base import Engine
    from engine.schedulers.lanes import Lane


class Prefill:
    """Admits requests while the batch limit and KV budget allow (counting what ``out`` holds past prefill) and
    feeds their prompts through both models, at most ``prefill_chunk_tokens`` tokens per pass.

    Mutates: the engine's waiting requests (admission), the prefilling sequences (caches, first token) and
    ``out`` (sequences whose prompt is done, each with the event its stream recorded after the chunk).
    """

    def __init__(self, engine: Engine, out: Handoff | SplitHandoff) -> None:
        self.engine = engine
        self.out = out
        self.prefilling: list[Sequence] = []  # owned by the lane running this work

    def depth(self) -> int:
        """Requests waiting for admission or for the rest of their prompt."""
        return self.engine.waiting() + len(self.prefilling)

    def run(self, lane: Lane) -> bool:
        engine = self.engine
        self.prefilling += engine._admit(len(self.prefilling) + self.out.total())
        if not self.prefilling:
            return False
        batch = list(self.prefilling)
        with lane.turn():
            ready = engine._isolated(batch, engine._prefill)
            event = lane.stream.record()
        self.prefilling = engine._retire([s for s in self.prefilling if not s.prefill_done])
        for seq in ready:
            seq.handoff_event = event
        self.out.put(ready)
        engine._notify()
        return True
