"""Simulated lanes: each carries its works in order, one turn of the device per unit of work, on the virtual clock.

A ``SimLane`` mirrors ``engine.schedulers.lanes.Lane``: a pass runs every
work in order; a work with something to do asks the ``SimArbiter`` for a turn
and, once granted, ``start``s its unit of work, which says how long it takes;
its ``finish`` runs when that time has passed. A pass in which no work had
anything to do leaves the lane idle until something is handed to it
(``poke``). The arbiter grants turns with the engine's own ``choose_lane`` on
the backlogs the engine reports, at most ``slots`` at once; a forward that
starts while another lane computes runs ``concurrent_slowdown`` times longer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sim.clock import EventLoop
from sim.policies import ArbiterRules, choose_lane


class Job(Protocol):
    duration_s: float  # on the device, alone
    rows: int
    tokens: float  # new tokens per row of its largest forward

    def finish(self) -> None:
        """Apply the work's outcome (tokens, hand-offs) at the clock's now."""
        ...


class SimWork(Protocol):
    def take(self) -> bool:
        """Take a unit of work as the real work does before it asks for its turn (admission, a batch, a group,
        a block); False when there is none."""
        ...

    def start(self) -> Job | None:
        """Take the unit of work once the turn is granted; None if it vanished meanwhile."""
        ...


class SimArbiter:
    """Mutates: which lanes wait and compute, the turns granted."""

    def __init__(
        self,
        loop: EventLoop,
        slots: int,
        rules: ArbiterRules,
        backlog: Callable[[], dict[str, int]],
        slowdown: Callable[[int, float], float],
    ) -> None:
        self.loop = loop
        self.slots = slots
        self.rules = rules
        self._backlog = backlog
        self._slowdown = slowdown
        self._waiting: dict[str, float] = {}
        self._lanes: dict[str, SimLane] = {}
        self._grants = 0
        self._last: dict[str, int] = {}
        self.computing: set[str] = set()

    def request(self, lane: SimLane) -> None:
        self._lanes[lane.name] = lane
        self._waiting[lane.name] = self.loop.now
        self._grant()

    def release(self, lane: SimLane) -> None:
        self.computing.discard(lane.name)
        self._grant()

    def duration(self, job: Job) -> float:
        """``job``'s time given the lanes computing beside it as it starts."""
        if len(self.computing) > 1:
            return job.duration_s * self._slowdown(job.rows, job.tokens)
        return job.duration_s

    def _grant(self) -> None:
        while len(self.computing) < self.slots and self._waiting:
            passed = {lane: self._grants - self._last.get(lane, 0) for lane in self._waiting}
            chosen = choose_lane(self._waiting, self._backlog(), self.rules, self.loop.now, passed)
            if chosen is None:
                return
            del self._waiting[chosen]
            self._grants += 1
            self._last[chosen] = self._grants
            self.computing.add(chosen)
            self._lanes[chosen].granted()


class SimLane:
    """Mutates: its place in the pass, ``busy_s``, and (through its works) the engine's state."""

    def __init__(self, name: str, works: tuple[SimWork, ...], loop: EventLoop, arbiter: SimArbiter) -> None:
        self.name = name
        self.works = works
        self.loop = loop
        self.arbiter = arbiter
        self.busy_s = 0.0
        self._index = 0  # the next work of the pass
        self._worked = False  # whether any work of this pass had something to do
        self._state = "idle"  # idle | waiting | computing
        self.stopped = False

    def poke(self) -> None:
        """Something was handed to this lane: an idle lane starts a pass."""
        if self._state == "idle" and not self.stopped:
            self._state = "passing"
            self.loop.soon(self._advance)

    def _advance(self) -> None:
        """Run the pass on to the next work with something to do; idle after a pass in which none had."""
        while not self.stopped:
            if self._index == len(self.works):
                self._index = 0
                if not self._worked:
                    self._state = "idle"
                    return
                self._worked = False
            work = self.works[self._index]
            if work.take():
                self._state = "waiting"
                self.arbiter.request(self)
                return
            self._index += 1
        self._state = "idle"

    def granted(self) -> None:
        self._state = "computing"
        job = self.works[self._index].start()
        if job is None:
            self._done()
            return
        duration = self.arbiter.duration(job)
        self.busy_s += duration

        def finish() -> None:
            job.finish()
            self._worked = True
            self._done()

        self.loop.at(self.loop.now + duration, finish)

    def _done(self) -> None:
        self.arbiter.release(self)
        self._index += 1
        self._state = "passing"
        self._advance()
