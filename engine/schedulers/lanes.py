"""Lanes: worker threads that carry out the work an engine composes, taking turns on the device or running at once.

A lane is a thread running one or more works (``Work``: prefill, atomic
decode, draft, verify) in order, again and again until stop, with a
busy-time meter, a CUDA stream and optionally its own intra-op thread count.
A ``LaneSpec`` is what an engine composes: a lane's name, its works and what
it reports as its queue and backlog.

When lanes compete for the device, the ``LaneArbiter`` grants turns by
``engine.schedulers.plan.choose_lane`` (decode > verify > prefill, with
promotion, starvation and prefill-interleaving rules). ``slots`` is how many lanes may hold a turn
at once: every lane on a GPU (their streams overlap); on a CPU one (lanes
take turns with every core) or, with ``LaneCompute.AT_ONCE``, as many as the
cores, each lane's thread then running with its own share of the cores
(``engine.schedulers.plan.lane_budgets``). With ``LaneCompute.ELASTIC`` the
arbiter also counts the intra-op threads lanes hold and grants each turn its
own (``engine.schedulers.plan.elastic_threads``): every core to a lane with no
other lane computing or wanting a turn, a share while others do.

``torch.set_num_threads`` sets the calling thread's own intra-op count (and a
process-wide value a thread starts from); a thread's count is initialised
lazily on its first parallel region, which would overwrite a count set before
it (``engine.profiling.lane_threads``, measured with torch 2.13 here). So each
lane sets its budget first thing on its own thread through
``use_intra_op_threads``, taking turns too (every core), never relying on
what another thread left behind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple, Protocol

import torch

from engine.devices import LaneStream
from engine.profiling.lane_threads import release_openmp_pool, use_intra_op_threads
from engine.schedulers.plan import PRIORITY, STARVATION_S, ArbiterRules, choose_lane, elastic_threads

__all__ = ["PRIORITY", "STARVATION_S", "ArbiterRules", "Lane", "LaneArbiter", "LaneSpec", "Work", "choose_lane"]


class Work(Protocol):
    def run(self, lane: Lane) -> bool:
        """Do one unit of this work on ``lane`` (taking its turn for the device); False when there was none."""
        ...


class LaneSpec(NamedTuple):
    """One lane of an engine's composition."""

    name: str
    works: tuple[Work, ...]  # run in this order on every pass of the lane's loop
    depth: Callable[[], int]  # work queued for the lane, as monitors show it
    backlog: Callable[[], int]  # work queued for the lane, as the arbiter weighs it


class LaneArbiter:
    """Grants device turns to lanes by ``choose_lane``; at most ``slots`` at once.

    ``cores`` (elastic lanes only): the intra-op threads the lanes share; each turn is then granted with its
    own thread count (``elastic_threads``) and waits while none is free.
    """

    def __init__(
        self, slots: int, rules: ArbiterRules, backlog: Callable[[], dict[str, int]], cores: int | None = None
    ) -> None:
        if slots < 1:
            raise ValueError("slots must be >= 1")
        self.slots = slots
        self.rules = rules
        self.cores = cores
        self._busy: dict[str, int] = {}  # lane computing now -> its threads (elastic lanes)
        self._backlog = backlog
        self._cond = threading.Condition()
        self._waiting: dict[str, float] = {}  # lane -> perf_counter when it started waiting
        self._grants = 0  # turns granted so far
        self._last: dict[str, int] = {}  # lane -> the count of turns granted when it was granted its last
        self._active = 0

    def others_waiting(self) -> bool:
        """Whether any lane is waiting for a turn (read without the lock: a hint, at worst one turn stale)."""
        return bool(self._waiting)

    def _choose(self, backlog: dict[str, int]) -> str | None:
        # each waiting lane passed over by the turns granted to others since its own last turn (every turn so far
        # for a lane never granted one)
        passed = {lane: self._grants - self._last.get(lane, 0) for lane in self._waiting}
        return choose_lane(self._waiting, backlog, self.rules, time.perf_counter(), passed)

    def _threads(self, lane: str, backlog: dict[str, int]) -> int | None:
        """The threads ``lane`` would be granted now (elastic), None while none are free; 0 when not elastic."""
        if self.cores is None:
            return 0
        contenders = {other for other in self._waiting if other != lane}
        contenders |= {other for other, queued in backlog.items() if queued > 0 and other != lane}
        contenders -= self._busy.keys()
        return elastic_threads(self.cores, sum(self._busy.values()), len(self._busy), len(contenders))

    @contextmanager
    def turn(self, lane: str) -> Iterator[int]:
        """Hold one of the slots while the block runs; yields the turn's intra-op threads (0: not elastic)."""
        with self._cond:
            self._waiting[lane] = time.perf_counter()
            while True:
                if self._active < self.slots:
                    backlog = self._backlog()  # read once per look: both choices weigh the same queues
                    if self._choose(backlog) == lane and (threads := self._threads(lane, backlog)) is not None:
                        break
                self._cond.wait(timeout=0.05)
            del self._waiting[lane]
            self._grants += 1
            self._last[lane] = self._grants
            self._active += 1
            if threads:
                self._busy[lane] = threads
            self._cond.notify_all()
        try:
            yield threads
        finally:
            with self._cond:
                self._active -= 1
                self._busy.pop(lane, None)
                self._cond.notify_all()


class Lane:
    """A named worker thread (``<engine>-<lane>``, e.g. ``pd-prefill``) running ``spec``'s works until stop.

    ``guard`` wraps the loop (the engine's: a crash fails every live request); ``idle`` is called after a
    pass in which no work had anything to do. ``threads``: the lane's intra-op thread count, set first thing
    on its own thread (None: the process's), and again at a turn whose elastic grant differs. ``release_pool``
    (CPU lanes taking turns, or elastic): end the thread's OpenMP workers (``release_openmp_pool``) at the end
    of a turn another lane is waiting for, and on an idle pass, so that only the lanes computing hold workers; a
    lane running turn after turn alone keeps them. Mutates ``busy_s`` and ``threads`` as it works.
    """

    def __init__(
        self,
        spec: LaneSpec,
        engine: str,
        *,
        arbiter: LaneArbiter,
        stream: LaneStream,
        threads: int | None,
        guard: Callable[[Callable[[], None]], Callable[[], None]],
        idle: Callable[[], None],
        release_pool: bool = False,
    ) -> None:
        self.name = spec.name
        self.spec = spec
        self.stream = stream
        self.threads = threads
        self.busy_s = 0.0  # cumulative seconds spent working
        self.release_pool = release_pool
        self._arbiter = arbiter
        self._idle = idle
        self.thread = threading.Thread(target=self._main(guard(self._pass)), name=f"{engine}-{spec.name}", daemon=True)

    def _pass(self) -> None:
        worked = [work.run(self) for work in self.spec.works]  # every work, each pass: none starves another
        if not any(worked):
            if self.release_pool:
                release_openmp_pool()  # an idle lane keeps no workers beside the lane computing
            self._idle()

    def _main(self, loop: Callable[[], None]) -> Callable[[], None]:
        """``loop`` under ``torch.inference_mode`` for the thread's whole life (every tensor a lane makes, not
        only the model's forward, skips autograd's bookkeeping), with the lane's thread budget."""

        def run() -> None:
            if self.threads is not None:
                use_intra_op_threads(self.threads)
            with torch.inference_mode():
                loop()

        return run

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Hold the device: the arbiter's turn (with its thread count, elastic lanes), the busy meter running,
        this lane's stream current."""
        with self._arbiter.turn(self.name) as threads:
            if threads and threads != self.threads:
                use_intra_op_threads(threads)  # this lane's thread: the count holds for its later regions
                self.threads = threads
            start = time.perf_counter()
            try:
                with self.stream.activate():
                    yield
            finally:
                if self.release_pool and self._arbiter.others_waiting():
                    release_openmp_pool()  # inside the turn: the next lane's workers are then the only ones
                self.busy_s += time.perf_counter() - start
