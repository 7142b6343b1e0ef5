"""The simulated engines' compositions, lane for lane as the real ones compose theirs.

* AR and Baseline (``engine.schedulers.colocated``): one ``loop`` lane carrying
  prefill, then the atomic decode step; AR drafts nothing.
* PD (``engine.schedulers.pd``): a ``prefill`` lane and a ``decode`` lane
  carrying the atomic step.
* PDV (``engine.schedulers.pdv``): ``prefill``, ``decode`` (groups by
  ``plan_group``, drafted there, verified there when atomic) and ``verify``;
  the step costs its choice reads are ``mode_costs`` over the engine's profile.

Each lane reports the depth and backlog the real lane reports, which is what
the arbiter's ``choose_lane`` weighs.
"""

from __future__ import annotations

from dataclasses import replace

from sim.engine import LaneSpec, SimEngine
from sim.policies import (
    EngineName,
    EngineStats,
    GroupRules,
    Handoff,
    ModeCosts,
    StepMode,
    StepModes,
    VerifyQueue,
    mode_costs,
)
from sim.works import SimAtomicDecode, SimDraft, SimPrefill, SimVerify


class SimBaseline(SimEngine):
    name = EngineName.BASELINE

    def _compose(self) -> tuple[LaneSpec, ...]:
        running = Handoff()
        prefill = SimPrefill(self, running)
        return (LaneSpec("loop", (prefill, SimAtomicDecode(self, running)), prefill.depth, prefill.depth),)


class SimAR(SimBaseline):
    name = EngineName.AR
    speculative = False


class SimPD(SimEngine):
    name = EngineName.PD

    def _compose(self) -> tuple[LaneSpec, ...]:
        decode_side = Handoff()
        prefill = SimPrefill(self, decode_side)
        return (
            LaneSpec("prefill", (prefill,), prefill.depth, lambda: len(prefill.prefilling)),
            LaneSpec("decode", (SimAtomicDecode(self, decode_side),), decode_side.total, decode_side.total),
        )


class SimPDV(SimEngine):
    name = EngineName.PDV

    def _compose(self) -> tuple[LaneSpec, ...]:
        config = self.config
        self.ready = Handoff()
        self.verify_queue = VerifyQueue()
        rules = GroupRules(config.micro_batches, config.hybrid_threshold, config.step_choice)
        prefill = SimPrefill(self, self.ready)
        self.drafting = SimDraft(self, self.ready, self.verify_queue, rules, self._mode_costs)
        verify = SimVerify(self, self.verify_queue, self.ready)
        return (
            LaneSpec("prefill", (prefill,), prefill.depth, lambda: len(prefill.prefilling)),
            LaneSpec("decode", (self.drafting,), self.ready.queued, self.ready.queued),
            LaneSpec("verify", (verify,), self.verify_queue.depth, self.verify_queue.sequences),
        )

    def stats(self) -> EngineStats:
        """The snapshot with the groups the step choice ran atomically and pipelined so far."""
        picked = self.drafting.picked
        modes = StepModes(picked[StepMode.ATOMIC], picked[StepMode.PIPELINED])
        return replace(super().stats(), step_modes=modes)

    def _mode_costs(self, rows: int) -> ModeCosts:
        """``PDVEngine._mode_costs`` on the simulated device: the profile's costs, the cost model's overlap."""
        groups = self.config.micro_batches
        draft_len = self.controller.length
        overlap = self.arbiter.slots > 1
        if not overlap:
            return mode_costs(self.profile, rows, groups, draft_len, True, overlap=False, slowdown=1.0)
        tokens = draft_len + 1
        slowdown = self.cost.concurrent_slowdown(-(-rows // groups), tokens)
        alone = 1.0 if self.budgets.elastic else self.cost.budget_slowdown(rows, tokens)
        return mode_costs(self.profile, rows, groups, draft_len, True, True, slowdown, alone)


SIM_ENGINES: dict[EngineName, type[SimEngine]] = {
    EngineName.AR: SimAR,
    EngineName.BASELINE: SimBaseline,
    EngineName.PD: SimPD,
    EngineName.PDV: SimPDV,
}
