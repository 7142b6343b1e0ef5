"""PD: prefill and decode disaggregated into two lanes.

Policy. The ``prefill`` lane admits requests and feeds their prompts through
both models in chunks of at most ``prefill_chunk_tokens`` tokens; a request
whose prompt is complete gets its first token from the verifier and is handed
to the ``decode`` lane. The ``decode`` lane runs speculative steps – draft and
verify together, atomically – over every running request. Each lane has its
own thread and (on CUDA) its own stream; a hand-off records an event on the
producer's stream that the consumer's stream waits on. When both lanes want
the device at once the arbiter favours decode (see ``engine.schedulers.lanes``).
"""

from __future__ import annotations

import queue
import threading

from engine.config import EngineName
from engine.devices import LaneStream
from engine.schedulers.base import Engine
from engine.schedulers.lanes import LaneArbiter
from engine.sequence import Sequence


class PDEngine(Engine):
    name = EngineName.PD
    lane_names: tuple[str, ...] = ("prefill", "decode")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        auto = len(self.lane_names) if self.pair.device.type == "cuda" else 1
        slots = auto if self.config.concurrent_lanes is None else self.config.concurrent_lanes
        self.arbiter = LaneArbiter(slots, self.config.verify_promote_margin, self._backlog)
        self.streams = {name: LaneStream(self.pair.device, lane=name) for name in self.lane_names}
        self._prefilling: list[Sequence] = []  # owned by the prefill lane
        self._handoff: queue.SimpleQueue[Sequence] = queue.SimpleQueue()  # prefill -> decode
        self._running: list[Sequence] = []  # owned by the decode lane
        # held while the decode lane moves hand-offs into _running, so the prefill lane's count of the
        # decode side never misses sequences in between (which would let it admit past the batch limit)
        self._side_lock = threading.Lock()

    def _lane_loops(self):
        return {"prefill": self._prefill_loop, "decode": self._decode_loop}

    def _queue_depths(self) -> dict[str, int]:
        return {
            "prefill": len(self._waiting) + self._inbox.qsize() + len(self._prefilling),
            "decode": self._handoff.qsize() + len(self._running),
        }

    def _backlog(self) -> dict[str, int]:
        return self._queue_depths()

    def _decode_side(self) -> int:
        """Sequences past prefill (read by the prefill lane for the batch limit)."""
        with self._side_lock:
            return self._handoff.qsize() + len(self._running)

    # ---------------------------------------------------------------- prefill
    def _prefill_loop(self) -> None:
        self._prefilling += self._admit(len(self._prefilling) + self._decode_side())
        if not self._prefilling:
            self._idle()
            return
        batch = list(self._prefilling)
        stream = self.streams["prefill"]
        with self.arbiter.turn("prefill"), self.lanes["prefill"].busy(), stream.activate():
            ready = self._isolated(batch, self._prefill)
            event = stream.record()
        self._prefilling = self._retire([s for s in self._prefilling if not s.prefill_done])
        for seq in ready:
            seq.handoff_event = event
        self._hand_to_decode(ready)
        self._notify()

    def _hand_to_decode(self, seqs: list[Sequence]) -> None:
        for seq in seqs:
            self._handoff.put(seq)

    def _take_handoffs(self, stream: LaneStream) -> list[Sequence]:
        taken = []
        while True:
            try:
                seq = self._handoff.get_nowait()
            except queue.Empty:
                return taken
            stream.wait(seq.handoff_event)
            taken.append(seq)

    # ----------------------------------------------------------------- decode
    def _decode_loop(self) -> None:
        stream = self.streams["decode"]
        with self._side_lock:
            self._running += self._take_handoffs(stream)
        if not self._running:
            self._idle()
            return
        batch = self._running
        with self.arbiter.turn("decode"), self.lanes["decode"].busy(), stream.activate():
            self._running = self._isolated(batch, self._step)
