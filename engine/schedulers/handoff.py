"""The explicit queues between lanes: sequences handed on after a stage, and draft blocks waiting for verification.

A ``Handoff`` carries sequences from a producing lane (prefill, or PDV's
verify lane returning survivors) to a consuming one (``SplitHandoff``: to
the least loaded of several), and counts what the
consumer holds, so admission sees every sequence past prefill at any moment
(``total``): a sequence moves from queued to held under one lock, never
missing from both. A ``VerifyQueue`` carries PDV's draft blocks from the
decode lane to the verify lane, each with its rows as they were before it was
drafted (to undo a failed verification row by row).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from engine.schedulers.isolation import RowState
from engine.schedulers.plan import GroupPlan, GroupState
from engine.sequence import Sequence
from engine.stages import DraftBlock


class Handoff:
    """Sequences waiting for the consuming lane, and how many it holds. Every method is safe from any lane."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: deque[Sequence] = deque()
        self._held = 0  # taken by the consumer and not yet finished or handed back
        self._groups = 0  # groups among the held (PDV's pipelined groups)

    def put(self, seqs: list[Sequence]) -> None:
        with self._lock:
            self._queued.extend(seqs)

    def take_all(self) -> list[Sequence]:
        """Every queued sequence, now held by the caller until it ``finish``es them."""
        with self._lock:
            taken = list(self._queued)
            self._queued.clear()
            self._held += len(taken)
        return taken

    def finish(self, count: int) -> None:
        """``count`` held sequences ended (their caches are released): admission may fill their places."""
        with self._lock:
            self._held -= count

    def take_group(self, plan: Callable[[GroupState], GroupPlan | None]) -> tuple[list[Sequence], GroupPlan | None]:
        """The group ``plan`` chooses from this queue's state, held as one group until ``settle_group``."""
        with self._lock:
            chosen = plan(GroupState(len(self._queued), self._held, self._groups))
            if chosen is None or chosen.size == 0:
                return [], None
            group = [self._queued.popleft() for _ in range(chosen.size)]
            self._held += len(group)
            self._groups += 1
        return group, chosen

    def settle_group(self, taken: int, back: list[Sequence]) -> None:
        """A group of ``taken`` sequences is done with; ``back`` (its survivors) queue again."""
        with self._lock:
            self._held -= taken
            self._groups -= 1
            self._queued.extend(back)

    def total(self) -> int:
        """Sequences queued or held: every sequence past prefill on the consumer's side."""
        with self._lock:
            return len(self._queued) + self._held

    def queued(self) -> int:
        """Sequences waiting for the consumer (a monitor's read, without the lock)."""
        return len(self._queued)


class SplitHandoff:
    """Sequences handed on to one of several consumers' ``Handoff``s: each to the one holding the fewest, so
    the consumers' batches stay even as requests end. ``total`` counts them all, as admission needs."""

    def __init__(self, parts: tuple[Handoff, ...]) -> None:
        self.parts = parts

    def put(self, seqs: list[Sequence]) -> None:
        for seq in seqs:
            min(self.parts, key=Handoff.total).put([seq])

    def total(self) -> int:
        return sum(part.total() for part in self.parts)


class VerifyQueue:
    """Draft blocks queued for the verify lane, and the one it is verifying. Safe from any lane."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks: deque[tuple[DraftBlock, list[RowState]]] = deque()
        self._verifying = 0  # blocks taken and not yet done (0 or 1: one verify lane)

    def put(self, block: DraftBlock, before: list[RowState]) -> None:
        with self._lock:
            self._blocks.append((block, before))

    def take(self) -> tuple[DraftBlock, list[RowState]] | None:
        """The oldest block and its rows' state before it was drafted, now being verified until ``done``."""
        with self._lock:
            if not self._blocks:
                return None
            self._verifying += 1
            return self._blocks.popleft()

    def done(self) -> None:
        with self._lock:
            self._verifying -= 1

    def ahead(self) -> int:
        """Blocks ahead of the next one drafted: queued or being verified."""
        with self._lock:
            return len(self._blocks) + self._verifying

    def depth(self) -> int:
        """Blocks queued (a monitor's read, without the lock)."""
        return len(self._blocks)

    def sequences(self) -> int:
        """Sequences in the queued blocks: the verify lane's backlog the arbiter weighs."""
        with self._lock:
            return sum(len(block.seqs) for block, _ in self._blocks)
