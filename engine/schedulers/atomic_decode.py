"""The atomic decode work: draft, verify and accept over every running sequence in one step (AR, Baseline, PD)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.schedulers.handoff import Handoff
from engine.sequence import Sequence

if TYPE_CHECKING:
    from engine.schedulers.base import Engine
    from engine.schedulers.lanes import Lane


class AtomicDecode:
    """Takes every sequence ``inbox`` hands on into the running batch and runs one step over the batch per pass.

    A step is speculative (L draft positions, one verifier forward, accept) or, for an engine that does not
    speculate, one plain verifier forward. Mutates: the running sequences and ``inbox``'s held count (sequences
    that ended leave it, so admission may fill their places).
    """

    def __init__(self, engine: Engine, inbox: Handoff) -> None:
        self.engine = engine
        self.inbox = inbox
        self.running: list[Sequence] = []  # owned by the lane running this work

    def run(self, lane: Lane) -> bool:
        taken = self.inbox.take_all()
        for seq in taken:
            lane.stream.wait(seq.handoff_event)
        self.running += taken
        if not self.running:
            return False
        before = len(self.running)
        with lane.turn():
            self.running = self.engine._isolated(self.running, self.engine._step)
        self.inbox.finish(before - len(self.running))
        return True
