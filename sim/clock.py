"""The virtual clock: a queue of events in time order, and a ``Clock`` the arrival policies wait on.

Nothing sleeps. ``EventLoop.run_until`` pops events in time order (ties in the
order they were scheduled), setting ``now`` to each one's time before running
it; ``VirtualClock`` fits ``workloads.drivers.arrivals.Clock``, so the replay's
own ``dispatch`` sends a trace into a simulated engine: its ``wait`` runs the
simulation forward until the timeout or until a request finishes.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class EventLoop:
    """Mutates: ``now`` and its queue of events."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self.events = 0  # run so far

    def at(self, when: float, action: Callable[[], None]) -> None:
        """Run ``action`` at ``when`` (not before ``now``)."""
        heapq.heappush(self._queue, (max(when, self.now), next(self._order), action))

    def soon(self, action: Callable[[], None]) -> None:
        """Run ``action`` at ``now``, after what is already scheduled for ``now``."""
        self.at(self.now, action)

    @property
    def idle(self) -> bool:
        return not self._queue

    def next_time(self) -> float | None:
        return self._queue[0][0] if self._queue else None

    def run_until(self, end: float, stop: Callable[[], bool] = lambda: False) -> None:
        """Run every event up to ``end``, or until ``stop()`` after an event; ``now`` is then ``end`` or the
        stopping event's time."""
        while self._queue and self._queue[0][0] <= end:
            when, _, action = heapq.heappop(self._queue)
            self.now = when
            action()
            self.events += 1
            if stop():
                return
        self.now = max(self.now, end)


class SimulationStalled(RuntimeError):
    """Requests wait on a simulated engine that has nothing left to run: a bug in a simulated composition."""


class VirtualClock:
    """``workloads.drivers.arrivals.Clock`` on an ``EventLoop``: a wait runs the simulation, woken by a finish."""

    def __init__(self, loop: EventLoop, pending: Callable[[], bool] = lambda: False) -> None:
        self.loop = loop
        self._pending = pending  # whether requests are in flight: waiting on them with nothing to run is a stall
        self._woken = False

    def now(self) -> float:
        return self.loop.now

    def wake(self) -> None:
        self._woken = True

    def wait(self, timeout: float) -> None:
        if self.loop.idle and self._pending():
            raise SimulationStalled(f"requests are in flight at t = {self.loop.now:.3f} s but nothing is left to run")
        self._woken = False
        self.loop.run_until(self.loop.now + max(0.0, timeout), lambda: self._woken)
        self._woken = False

    def run_until_woken(self) -> bool:
        """Run until a finish wakes the clock; False when nothing is left to run (no event will ever wake it)."""
        self._woken = False
        while not self._woken:
            when = self.loop.next_time()
            if when is None:
                return False
            self.loop.run_until(when, lambda: self._woken)
        self._woken = False
        return True
