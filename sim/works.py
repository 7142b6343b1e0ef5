"""The simulated works – prefill, atomic decode, PDV's draft and verify – as the real lanes carry them.

Each mirrors its namesake in ``engine.schedulers`` (``prefill``,
``atomic_decode``, ``pipeline``): ``take`` does what the real work does
before it asks for its turn (admission; taking the running batch, a group by
``plan_group`` through the real ``Handoff``, or a block from the real
``VerifyQueue``), ``start`` prices the forwards with the engine's cost model,
and the job's ``finish`` applies the outcome at the end of that time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.policies import GroupPlan, GroupRules, GroupState, Handoff, ModeCosts, StepMode, VerifyQueue, plan_group
from sim.sequence import SimBlock, SimJob, SimSequence

if TYPE_CHECKING:
    from collections.abc import Callable

    from sim.engine import SimEngine


class SimPrefill:
    def __init__(self, engine: SimEngine, out: Handoff) -> None:
        self.engine = engine
        self.out = out
        self.prefilling: list[SimSequence] = []

    def depth(self) -> int:
        return self.engine.waiting() + len(self.prefilling)

    def take(self) -> bool:
        self.prefilling += self.engine.admit(len(self.prefilling) + self.out.total())
        return bool(self.prefilling)

    def start(self) -> SimJob | None:
        engine = self.engine
        chosen = engine.prefill_chunk([s for s in self.prefilling if not s.finished])
        if not chosen:
            return None
        tokens = sum(n for _, n in chosen)
        context = sum(s.prefilled for s, _ in chosen) / len(chosen)
        cost = engine.cost.prefill_s(tokens, len(chosen), context, engine.drafts_with_model)

        def finish() -> None:
            ready = engine.finish_prefill(chosen)
            self.prefilling = engine.retire([s for s in self.prefilling if not s.prefill_done])
            self.out.put(ready)
            engine.notify()

        return SimJob(cost, len(chosen), tokens / len(chosen), finish)


class SimAtomicDecode:
    def __init__(self, engine: SimEngine, inbox: Handoff) -> None:
        self.engine = engine
        self.inbox = inbox
        self.running: list[SimSequence] = []

    def take(self) -> bool:
        self.running += self.inbox.take_all()
        return bool(self.running)

    def start(self) -> SimJob | None:
        engine = self.engine
        batch = list(self.running)
        block = engine.draft(batch)

        def finish() -> None:
            alive = engine.verify(block, record_latency=True)
            self.inbox.finish(len(batch) - len(alive))
            self.running = alive
            engine.notify()

        duration = block.draft_s + block.verify_s
        return SimJob(duration, len(batch), block.tokens, finish)


class SimDraft:
    """PDV's decode lane: a group by ``plan_group``, drafted and verified atomically or drafted for the verify lane."""

    def __init__(
        self,
        engine: SimEngine,
        ready: Handoff,
        blocks: VerifyQueue,
        rules: GroupRules,
        costs: Callable[[int], ModeCosts | None],
    ) -> None:
        self.engine = engine
        self.ready = ready
        self.blocks = blocks
        self.rules = rules
        self.costs = costs
        self.mode: StepMode | None = None
        self.picked: dict[StepMode, int] = dict.fromkeys(StepMode, 0)
        self._taken: tuple[list[SimSequence], GroupPlan] | None = None

    def _plan(self, state: GroupState) -> GroupPlan | None:
        needs_costs = self.rules.hybrid_threshold is not None
        costs = self.costs(state.ready + state.in_flight) if needs_costs and state.ready else None
        return plan_group(state, self.rules, costs)

    def take(self) -> bool:
        group, plan = self.ready.take_group(self._plan)
        self._taken = None if plan is None else (group, plan)
        return plan is not None

    def start(self) -> SimJob | None:
        assert self._taken is not None
        group, plan = self._taken
        engine = self.engine
        self.picked[plan.mode] += 1
        if plan.mode is not self.mode:
            engine.decode_latencies.clear()
            self.mode = plan.mode
        block = engine.draft(group, self.blocks.ahead())
        block.mode = plan.mode
        if plan.mode is StepMode.ATOMIC:

            def finish_atomic() -> None:
                alive = engine.verify(block, record_latency=True)
                self.ready.settle_group(len(group), alive)
                engine.notify()

            duration = block.draft_s + block.verify_s
            return SimJob(duration, len(group), block.tokens, finish_atomic)

        def finish_draft() -> None:
            engine.decode_latencies.append(block.draft_s)
            self.blocks.put(block, [])
            engine.notify()

        return SimJob(block.draft_s, len(group), 1, finish_draft)


class SimVerify:
    def __init__(self, engine: SimEngine, blocks: VerifyQueue, ready: Handoff) -> None:
        self.engine = engine
        self.blocks = blocks
        self.ready = ready
        self._block: SimBlock | None = None

    def take(self) -> bool:
        taken = self.blocks.take()
        self._block = None if taken is None else taken[0]
        return taken is not None

    def start(self) -> SimJob | None:
        assert self._block is not None
        block, engine = self._block, self.engine

        def finish() -> None:
            alive = engine.verify(block, record_latency=False)
            self.blocks.done()
            self.ready.settle_group(len(block.seqs), alive)
            engine.notify()

        return SimJob(block.verify_s, len(block.seqs), block.tokens, finish)
