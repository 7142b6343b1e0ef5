"""PDV: prefill, decode (draft) and verify in three lanes.

Policy. The ``prefill`` lane works as in PD. Running requests are split into
``micro_batches`` groups. The ``decode`` lane drafts a block for one group
and queues it for the ``verify`` lane, then drafts the next group while that
block is being verified; the ``verify`` lane verifies and accepts a block and
returns its surviving requests to the ready queue. So the draft of one group
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

Hybrid mode: with fewer than ``hybrid_threshold`` running requests there is
nothing to pipeline against, so the decode lane drafts and verifies
atomically, exactly as PD does.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque

from engine.config import EngineName
from engine.devices import keep_for_current_stream
from engine.schedulers.isolation import RowState, snapshot
from engine.schedulers.pd import PDEngine
from engine.sequence import Sequence
from engine.stages import DraftBlock

log = logging.getLogger(__name__)


class PDVEngine(PDEngine):
    name = EngineName.PDV
    lane_names = ("prefill", "decode", "verify")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._qlock = threading.Lock()
        self._ready: deque[Sequence] = deque()  # sequences waiting to be drafted
        self._verify_queue: deque[DraftBlock] = deque()
        # each queued block's rows as they were before it was drafted (id(block) -> rows), for a failed verify
        self._drafted_from: dict[int, list[RowState]] = {}
        self._in_flight = 0  # sequences the decode lane took: being drafted, in queued or verifying blocks
        self._groups_out = 0  # groups counted in _in_flight
        self._verifying = 0  # blocks the verify lane has taken and not yet finished (0 or 1)
        self._hybrid_mode: bool | None = None  # the mode of the decode lane's last group

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

    def _lane_loops(self):
        return {"prefill": self._prefill_loop, "decode": self._decode_loop, "verify": self._verify_loop}

    def _queue_depths(self) -> dict[str, int]:
        return {
            "prefill": len(self._waiting) + self._inbox.qsize() + len(self._prefilling),
            "decode": len(self._ready),
            "verify": len(self._verify_queue),
        }

    def _backlog(self) -> dict[str, int]:
        with self._qlock:
            return {
                "prefill": len(self._prefilling),
                "decode": len(self._ready),
                "verify": sum(len(b.seqs) for b in self._verify_queue),
            }

    def _decode_side(self) -> int:
        with self._qlock:
            return len(self._ready) + self._in_flight

    def _hand_to_decode(self, seqs: list[Sequence]) -> None:
        with self._qlock:
            self._ready.extend(seqs)

    def _take_group(self) -> tuple[list[Sequence], bool]:
        """Pop the next group to draft and whether to run it atomically (hybrid mode).

        The group counts as in flight from here until its survivors are back in
        the ready queue, so the prefill lane's batch limit always sees it.
        """
        with self._qlock:
            if self._groups_out >= self.config.micro_batches:
                return [], False
            total = len(self._ready) + self._in_flight
            threshold = self.config.hybrid_threshold
            hybrid = threshold is not None and total < threshold
            size = len(self._ready) if hybrid else math.ceil(total / self.config.micro_batches)
            group = [self._ready.popleft() for _ in range(min(size, len(self._ready)))]
            if group:
                self._in_flight += len(group)
                self._groups_out += 1
        return group, hybrid

    def _verify_ahead(self) -> int:
        """Blocks ahead of the one about to be drafted in the verify lane: queued or being verified."""
        with self._qlock:
            return len(self._verify_queue) + self._verifying

    def _return_group(self, taken: int, alive: list[Sequence]) -> None:
        """A group of ``taken`` sequences is done with; ``alive`` go back to the ready queue."""
        with self._qlock:
            self._in_flight -= taken
            self._groups_out -= 1
            self._ready.extend(alive)

    # ----------------------------------------------------------------- decode
    def _decode_loop(self) -> None:
        stream = self.streams["decode"]
        group, hybrid = self._take_group()
        if not group:
            self._idle()
            return
        for event in {id(s.handoff_event): s.handoff_event for s in group}.values():
            stream.wait(event)
        if hybrid != self._hybrid_mode:
            # a hybrid step times draft + verify, a pipelined one the draft alone: the p95 the
            # controller reads must not mix the two
            self._decode_latencies.clear()
            self._hybrid_mode = hybrid
        with self.arbiter.turn("decode"), self.lanes["decode"].busy(), stream.activate():
            ahead = self._verify_ahead()  # read once the turn is ours: waiting for it may have let a block finish
            before = snapshot(group)
            try:
                if hybrid:
                    alive = self._step(group, ahead)
                else:
                    block = self._draft(group, ahead)
                    self._decode_latencies.append(block.draft_s)
                    block.ready_event = stream.record()
            except Exception as exc:
                hybrid, alive = True, self._recover(before, exc, self._step)  # each row again, atomically
        if hybrid:
            event = stream.record()
            for seq in alive:
                seq.handoff_event = event
            self._return_group(len(group), alive)
            return
        with self._qlock:
            self._verify_queue.append(block)
            self._drafted_from[id(block)] = before
        self._notify()

    # ----------------------------------------------------------------- verify
    def _verify_loop(self) -> None:
        with self._qlock:
            block = self._verify_queue.popleft() if self._verify_queue else None
            self._verifying += block is not None
            before = self._drafted_from.pop(id(block), None) if block is not None else None
        if block is None:
            self._idle()
            return
        stream = self.streams["verify"]
        stream.wait(block.ready_event)
        alive: list[Sequence] = []
        with self.arbiter.turn("verify"), self.lanes["verify"].busy(), stream.activate():
            try:
                alive = self._verify(block)
            except Exception as exc:
                # back to before the block was drafted, then each row drafted and verified alone
                alive = self._recover(before, exc, self._step)
            keep_for_current_stream(*block.tensors())  # allocated on the decode lane's stream
            event = stream.record()
        for seq in alive:
            seq.handoff_event = event
        with self._qlock:
            self._verifying -= 1
        self._return_group(len(block.seqs), alive)
        self._notify()
