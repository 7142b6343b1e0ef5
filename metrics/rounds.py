"""Rounds of a comparison: the order competitors run in, ratios within a round, and their interval.

A comparison on a shared machine is a measurement: anything else running
during one competitor's turn would decide the ranking if each ran once. So a
comparison runs in *rounds* – every competitor once per round over the same
trace – and the order rotates each round (ABCD, BCDA, CDAB, …), so no
competitor always runs first or last.

A competitor's figure is divided by the reference's figure *of the same round*
(a *paired ratio*): a slow spell that hits a whole round cancels out. The
ratios of n rounds are summarised as their median with the exact min–max
(``RatioInterval``). For few rounds a bootstrap has too little to resample;
the min–max of n independent rounds is instead a distribution-free interval
for the median of the ratio's distribution: it misses only when every round
falls on one side, so it holds with probability 1 - 2^(1-n) (75 % for 3
rounds, 94 % for 5, 98 % for 7).

The benchmark suite (``workloads.bench``) and every replay comparison (the
CLI, Live run, Sweep) use these functions; nothing else computes a × AR interval.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def rotated(items: Sequence[T], round_: int) -> list[T]:
    """``items`` starting at a different one each round (0-based), so no competitor always runs first."""
    if not items:
        return []
    k = round_ % len(items)
    return [*items[k:], *items[:k]]


def round_orders(items: Sequence[T], rounds: int) -> list[list[T]]:
    """The run order of each of ``rounds`` rounds: ABCD, BCDA, CDAB, …"""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    return [rotated(items, r) for r in range(rounds)]


def paired_ratios(rounds: Sequence[Mapping[str, float | None]], reference: str) -> dict[str, list[float]]:
    """Per label, its figure over ``reference``'s figure of the same round, for every round that has both.

    ``rounds[k]`` maps each label to its figure in round k (``None``: not measured, e.g. no request
    completed). A round whose reference figure is missing or not positive gives no ratio to anyone.
    The reference itself gets 1.0 for every round it has a figure in.
    """
    out: dict[str, list[float]] = {}
    for figures in rounds:
        ref = figures.get(reference)
        for label, value in figures.items():
            out.setdefault(label, [])
            if value is not None and ref is not None and ref > 0:
                out[label].append(value / ref)
    return out


@dataclass(frozen=True)
class RatioInterval:
    """The median of a ratio over rounds with the exact min–max of its rounds (see the module docstring)."""

    median: float
    lo: float
    hi: float
    rounds: int  # rounds with a ratio

    def __post_init__(self) -> None:
        if self.rounds < 1 or not self.lo <= self.median <= self.hi:
            raise ValueError(f"not an interval: {self.lo} <= {self.median} <= {self.hi} over {self.rounds} rounds")

    def clears_above(self, other: RatioInterval) -> bool:
        """Every round of this one is above every round of ``other``: the intervals do not touch."""
        return self.lo > other.hi

    def overlaps(self, other: RatioInterval) -> bool:
        return not (self.clears_above(other) or other.clears_above(self))

    def text(self, of: str = "") -> str:
        """``1.23× AR (1.10–1.31)`` with ``of="AR"``; a single round has no interval: ``1.23× (1 round)``."""
        head = f"{self.median:.2f}×" + (f" {of}" if of else "")
        if self.rounds == 1:
            return f"{head} (1 round)"
        return f"{head} ({self.lo:.2f}–{self.hi:.2f})"


def interval(ratios: Sequence[float]) -> RatioInterval | None:
    """Median and min–max of ``ratios`` (one per round); ``None`` without any."""
    if not ratios:
        return None
    return RatioInterval(statistics.median(ratios), min(ratios), max(ratios), len(ratios))


REFERENCE_INTERVAL = RatioInterval(1.0, 1.0, 1.0, 1)  # the reference over itself, in every round


def ratio_intervals(rounds: Sequence[Mapping[str, float | None]], reference: str) -> dict[str, RatioInterval | None]:
    """``interval`` of every label's ``paired_ratios``."""
    return {label: interval(r) for label, r in paired_ratios(rounds, reference).items()}
