"""PDV: prefill, decode (draft) and verify in three lanes.

Policy. The ``prefill`` lane works as in PD. Running requests are split into
``micro_batches`` groups. The ``decode`` lane drafts a block for one group
and queues it for the ``verify`` lane, then drafts the next group while that
block is being verified; the ``verify`` lane verifies and accepts a block and
returns its surviving requests to the ready pool. So the draft of one group
overlaps the verification of another. Each lane has its own thread, queue and
(on CUDA) stream; blocks and requests cross lanes with an event recorded by
the producer and waited on by the consumer's stream.

Priorities when lanes compete for the device: decode > verify > prefill, and
verify is promoted above decode when the sequences in queued verify blocks
exceed the sequences ready to draft by more than ``verify_promote_margin``.

At most ``micro_batches`` groups are out at once (being drafted, queued for
verification or being verified). Requests that become ready while that many
are out wait and join the next group, so arrivals merge into the groups
instead of each starting a block of its own.

Atomic or pipelined, per group (``engine.schedulers.plan.plan_group``): with
fewer than ``hybrid_threshold`` running requests there is nothing to pipeline
against, so the decode lane drafts and verifies atomically, exactly as PD
does. At or above it, with ``StepChoice.COST``, the group is pipelined only
where the measured step costs say the groups advance sooner that way than in
one atomic step (drafting must cost about what verifying does, and the lanes
must overlap); with ``StepChoice.COUNT`` it always is.

Composition: ``Prefill``, ``Draft`` and ``Verify`` (``engine.schedulers.pipeline``)
on three lanes; a ready pool and a verify queue between them.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from engine.config import EngineName
from engine.schedulers.base import Engine
from engine.schedulers.handoff import Handoff, VerifyQueue
from engine.schedulers.lanes import LaneSpec
from engine.schedulers.pipeline import Draft, Verify
from engine.schedulers.plan import GroupRules, ModeCosts, StepMode, mode_costs
from engine.schedulers.prefill import Prefill
from engine.schedulers.stats import EngineStats, StepModes

log = logging.getLogger(__name__)


class PDVEngine(Engine):
    name = EngineName.PDV

    def _compose(self) -> tuple[LaneSpec, ...]:
        config = self.config
        self.ready = Handoff()  # sequences past prefill waiting to be drafted, and the groups out
        self.verify_queue = VerifyQueue()
        rules = GroupRules(config.micro_batches, config.hybrid_threshold, config.step_choice)
        prefill = Prefill(self, self.ready)
        self.drafting = Draft(self, self.ready, self.verify_queue, rules, self._mode_costs)
        verify = Verify(self, self.verify_queue, self.ready)
        return (
            LaneSpec("prefill", (prefill,), prefill.depth, lambda: len(prefill.prefilling)),
            LaneSpec("decode", (self.drafting,), self.ready.queued, self.ready.queued),
            LaneSpec("verify", (verify,), self.verify_queue.depth, self.verify_queue.sequences),
        )

    def stats(self) -> EngineStats:
        """The engine's snapshot with the groups its step choice ran atomically and pipelined so far."""
        picked = self.drafting.picked  # fixed keys, only the decode lane writes: reading it needs no lock
        modes = StepModes(picked[StepMode.ATOMIC], picked[StepMode.PIPELINED])
        return replace(super().stats(), step_modes=modes)

    def _mode_costs(self, rows: int) -> ModeCosts | None:
        """The step costs at ``rows`` running sequences, from the profile (None without one: no cost choice)."""
        if self.profile is None:
            return None
        groups = self.config.micro_batches
        draft_len = self.controller.length
        overlap = self.arbiter.slots > 1
        model = self.drafter.model is not None
        if not overlap:
            return mode_costs(self.profile, rows, groups, draft_len, model, overlap=False, slowdown=1.0)
        interference = self.profile.interference
        if interference is None:  # an older profile: concurrent_slowdown raises ProfileMissing, naming the fix
            self.profile.concurrent_slowdown(rows, draft_len + 1)
        slowdown = interference.concurrent_slowdown(-(-rows // groups), draft_len + 1)
        # elastic lanes: a lane computing alone has every core
        alone = 1.0 if self.budgets.elastic else interference.budget_slowdown(rows, draft_len + 1)
        return mode_costs(self.profile, rows, groups, draft_len, model, True, slowdown, alone)

    def start(self):
        ctrl = self.config.controller
        if ctrl.kind == "feedback" and ctrl.target_verify_queue >= self.config.micro_batches - 1:
            log.warning(
                "pdv: the feedback controller's verify-queue target (%d) can never be exceeded with %d "
                "micro-batches (at most %d blocks are ahead); only its acceptance and decode p95 inputs act",
                ctrl.target_verify_queue,
                self.config.micro_batches,
                self.config.micro_batches - 1,
            )
        return super().start()

