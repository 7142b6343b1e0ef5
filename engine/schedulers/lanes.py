"""Lanes: worker threads that take turns on the device.

A lane is a thread with a queue and a busy-time meter. When lanes compete for
the device, the ``LaneArbiter`` grants turns by priority: decode > verify >
prefill, except that verify is promoted above decode when its backlog exceeds
the decode backlog by more than a margin (so verification cannot starve and
leave every sequence waiting on a verdict). A lane that has waited longer than
``STARVATION_S`` runs next whatever its priority: a decode lane always has
work, and strict priority would otherwise starve prefill (new requests would
wait for the whole running batch to finish). ``choose_lane`` is that rule as a
pure function.

``slots`` is how many lanes may hold a turn at once. On a GPU every lane can
(their streams overlap); on a 2-core CPU the lanes share the cores, and
``slots`` decides whether they run side by side or strictly one at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

PRIORITY = ("decode", "verify", "prefill")
STARVATION_S = 0.5  # about two decode steps of the default pair on a 2-core CPU


def choose_lane(
    waiting: dict[str, float], backlog: dict[str, int], promote_margin: int, now: float = 0.0
) -> str | None:
    """Which waiting lane runs next.

    ``waiting`` maps each waiting lane to when it started waiting;
    ``backlog`` is the work queued per lane (sequences ready to draft for
    decode, sequences in queued verify blocks, requests waiting for prefill).
    """
    starved = [lane for lane, since in waiting.items() if now - since > STARVATION_S]
    if starved:
        return min(starved, key=lambda lane: waiting[lane])
    order = list(PRIORITY)
    if backlog.get("verify", 0) > backlog.get("decode", 0) + promote_margin:
        order = ["verify", "decode", "prefill"]
    for lane in order:
        if lane in waiting:
            return lane
    return next(iter(sorted(waiting)), None)


class LaneArbiter:
    """Grants device turns to lanes by ``choose_lane``; at most ``slots`` at once."""

    def __init__(self, slots: int, promote_margin: int, backlog: Callable[[], dict[str, int]]) -> None:
        if slots < 1:
            raise ValueError("slots must be >= 1")
        self.slots = slots
        self.promote_margin = promote_margin
        self._backlog = backlog
        self._cond = threading.Condition()
        self._waiting: dict[str, float] = {}  # lane -> perf_counter when it started waiting
        self._active = 0

    @contextmanager
    def turn(self, lane: str) -> Iterator[None]:
        with self._cond:
            self._waiting[lane] = time.perf_counter()
            while not (
                self._active < self.slots
                and choose_lane(self._waiting, self._backlog(), self.promote_margin, time.perf_counter()) == lane
            ):
                self._cond.wait(timeout=0.05)
            del self._waiting[lane]
            self._active += 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()


def _in_inference_mode(target: Callable[[], None]) -> Callable[[], None]:
    """``target`` run under ``torch.inference_mode`` for the thread's whole life: every tensor a lane makes
    (sampling rows, draft blocks, indices), not only the model's forward, skips autograd's bookkeeping."""

    def run() -> None:
        with torch.inference_mode():
            target()

    return run


class Lane:
    """A named worker thread with a busy-time meter; the thread is named ``<engine>-<lane>`` (``pd-prefill``)."""

    def __init__(self, name: str, target: Callable[[], None], engine: str) -> None:
        self.name = name
        self.busy_s = 0.0  # cumulative seconds spent working
        self.thread = threading.Thread(target=_in_inference_mode(target), name=f"{engine}-{name}", daemon=True)

    @contextmanager
    def busy(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.busy_s += time.perf_counter() - start
