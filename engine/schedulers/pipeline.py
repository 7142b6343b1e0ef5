"""PDV's two decode works: ``Draft`` (the decode lane) and ``Verify`` (the verify lane), joined by a ``VerifyQueue``.

``Draft`` takes the group ``plan_group`` chooses from the ready pool. An
atomic group is drafted, verified and accepted there and then, as PD's decode
lane does; a pipelined group is drafted into a block for the verify lane,
and the next group drafts while that block is verified. ``Verify`` verifies
and accepts a block and returns the group's survivors to the ready pool.
A group counts as in flight from when it is taken until its survivors are
back, so admission always sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.devices import keep_for_current_stream
from engine.schedulers.handoff import Handoff, VerifyQueue
from engine.schedulers.isolation import snapshot
from engine.schedulers.plan import GroupPlan, GroupRules, GroupState, ModeCosts, StepMode, plan_group
from engine.sequence import Sequence

if TYPE_CHECKING:
    from engine.schedulers.base import Engine
    from engine.schedulers.lanes import Lane


class Draft:
    """Mutates: the ready pool (groups out and back), ``blocks`` (pipelined blocks), the group's sequences, and
    the engine's decode latencies (cleared when the mode changes: a p95 must not mix atomic steps, which time
    draft + verify, with pipelined drafts, which time the draft alone), and ``picked`` (groups run per mode:
    what the step choice chose at this load, for the run's report)."""

    def __init__(
        self,
        engine: Engine,
        ready: Handoff,
        blocks: VerifyQueue,
        rules: GroupRules,
        costs: Callable[[int], ModeCosts | None],
    ) -> None:
        self.engine = engine
        self.ready = ready
        self.blocks = blocks
        self.rules = rules
        self.costs = costs  # running sequences -> the step costs at that load (None where none are needed)
        self.mode: StepMode | None = None  # the mode of the last group
        self.picked: dict[StepMode, int] = dict.fromkeys(StepMode, 0)  # groups run per mode, as planned

    def _plan(self, state: GroupState) -> GroupPlan | None:
        needs_costs = self.rules.hybrid_threshold is not None
        costs = self.costs(state.ready + state.in_flight) if needs_costs and state.ready else None
        return plan_group(state, self.rules, costs)

    def run(self, lane: Lane) -> bool:
        engine = self.engine
        group, plan = self.ready.take_group(self._plan)
        if plan is None:
            return False
        for event in {id(s.handoff_event): s.handoff_event for s in group}.values():
            lane.stream.wait(event)
        atomic = plan.mode is StepMode.ATOMIC
        self.picked[plan.mode] += 1
        if plan.mode is not self.mode:
            engine._decode_latencies.clear()
            self.mode = plan.mode
        with lane.turn():
            ahead = self.blocks.ahead()  # read once the turn is ours: waiting for it may have let a block finish
            before = snapshot(group)
            try:
                if atomic:
                    alive = engine._step(group, ahead)
                else:
                    block = engine._draft(group, ahead)
                    engine._decode_latencies.append(block.draft_s)
                    block.ready_event = lane.stream.record()
            except Exception as exc:
                atomic, alive = True, engine._recover(before, exc, engine._step)  # each row again, atomically
        if atomic:
            event = lane.stream.record()
            for seq in alive:
                seq.handoff_event = event
            self.ready.settle_group(len(group), alive)
            return True
        self.blocks.put(block, before)
        engine._notify()
        return True


class Verify:
    """Mutates: ``blocks``, the block's sequences (accepted tokens) and the ready pool (the survivors)."""

    def __init__(self, engine: Engine, blocks: VerifyQueue, ready: Handoff) -> None:
        self.engine = engine
        self.blocks = blocks
        self.ready = ready

    def run(self, lane: Lane) -> bool:
        engine = self.engine
        taken = self.blocks.take()
        if taken is None:
            return False
        block, before = taken
        lane.stream.wait(block.ready_event)
        alive: list[Sequence] = []
        with lane.turn():
            try:
                alive = engine._verify(block)
            except Exception as exc:
                # back to before the block was drafted, then each row drafted and verified alone
                alive = engine._recover(before, exc, engine._step)
            keep_for_current_stream(*block.tensors())  # allocated on the decode lane's stream
            event = lane.stream.record()
        for seq in alive:
            seq.handoff_event = event
        self.blocks.done()
        self.ready.settle_group(len(block.seqs), alive)
        engine._notify()
        return True
