"""Rounds of a comparison: the order competitors run in, ratios within a round, and their interval.

A comparison on a shared machine is a measurement: anything else running
during one competitor's turn would decide the ranking if each ran once. So a
comparison runs in *rounds* – every competitor once per round over the same
trace – in the orders of a Williams design (ABDC, BCAD, CDBA, DACB for four):
over every n rounds for n competitors (2n for an odd n) each competitor runs
in every place equally often, so none always runs first or last, *and*
directly after every other one equally often. A plain rotation (ABCD, BCDA,
…) has the first property only: B would always follow A, so whatever a run
leaves behind for the next one (a freed cache, threads winding down, a busy
spell that outlasts it) would fall on the same competitor every round.

A competitor's figure is divided by the reference's figure *of the same round*
(a *paired ratio*): a slow spell that hits a whole round cancels out. The
ratios of n rounds are summarised as their median with an interval
(``RatioInterval``), of one of two kinds (``IntervalKind``):

* **min–max** of the rounds: a distribution-free interval for the median of
  *this run's* ratio distribution. It misses only when every round falls on
  one side, so it holds with probability 1 - 2^(1-n) (75 % for 3 rounds, 94 %
  for 5). It does not say where a *repeat run* lands: even with rounds that
  are independent and identically distributed across runs, the min–max of 5
  rounds holds the median of another run's 5 rounds only with probability 5/6
  (3 of 5 for 3 rounds, 0.93 for 7; exact, by counting the splits of 2n
  exchangeable rounds). The benchmark suite reports this one.
* **repeat run** (what every comparison shows: Live run, Sweep, ``replay``,
  MT-Bench): a distribution-free interval for a repeat run's median joined
  with a 95 % prediction interval for it. The distribution-free part is the
  k-th smallest to the k-th largest round for the largest k that holds the
  median of a repeat run of as many rounds at least 95 % of the time
  (``repeat_rank``, counted exactly as above). Up to 12 rounds no k > 1 does,
  so it is the min–max; from 13 rounds on it drops the outermost rounds, and
  so narrows as the rounds grow, as the min–max does not. The prediction
  interval is median · exp(± t(0.975, n-1) · s · √(π / n)), with s the
  standard deviation of the rounds' log ratios: the median of n rounds has a
  variance of about π s² / (2n), the difference of two runs' medians twice
  that, and Student's t accounts for s being estimated from n rounds. It
  assumes roughly normal round-to-round noise; the rank interval it is joined
  with keeps a distribution-free guarantee.
  The question a reader asks of "1.04× AR" is whether running again gives the
  same answer; this interval is the one that answers it.

The benchmark suite (``workloads.bench``) and every replay comparison (the
CLI, Live run, Sweep) use these functions; nothing else computes a × AR interval.
"""

from __future__ import annotations

import enum
import functools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def rotated(items: Sequence[T], round_: int) -> list[T]:
    """``items`` in the order of round ``round_`` (0-based) of a Williams design (module docstring).

    Round k of n items runs 0, 1, n-1, 2, n-2, … each shifted by k (mod n); with an odd n the rounds n..2n-1
    are the first n reversed. Two items alternate, one item stays alone.
    """
    n = len(items)
    if n == 0:
        return []
    base = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]
    k = round_ % (2 * n if n % 2 else n)
    order = [items[(b + k) % n] for b in base]
    return order[::-1] if k >= n else order


def round_orders(items: Sequence[T], rounds: int) -> list[list[T]]:
    """The run order of each of ``rounds`` rounds: ABDC, BCAD, CDBA, DACB, ABDC, … for four items."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    return [rotated(items, r) for r in range(rounds)]


def paired_ratios(rounds: Sequence[Mapping[str, float | None]], reference: str) -> dict[str, list[float]]:
    """Per label, its figure over ``reference``'s figure of the same round, for every round that has both.

    ``rounds[k]`` maps each label to its figure in round k (``None``: not measured, e.g. no request
    completed). A round whose reference figure is missing or not positive gives no ratio to anyone, and
    a figure that is not positive (0 tokens/s: every request failed) gives none to its label: a ratio of 0
    has no place on the log scale its interval is drawn on, so that label's interval covers fewer rounds
    (``RatioInterval.rounds``), and none at all when no round of it is positive.
    The reference itself gets 1.0 for every round it has a figure in.
    """
    out: dict[str, list[float]] = {}
    for figures in rounds:
        ref = figures.get(reference)
        for label, value in figures.items():
            out.setdefault(label, [])
            if value is not None and value > 0 and ref is not None and ref > 0:
                out[label].append(value / ref)
    return out


@dataclass(frozen=True)
class RatioInterval:
    """The median of a ratio over rounds with an interval around it (``IntervalKind``, module docstring)."""

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

    def text(self, of: str = "", digits: int = 2) -> str:
        """``1.23× AR (1.10–1.31)`` with ``of="AR"``; a single round has no interval: ``1.23× (1 round)``.

        The one text of a ratio with its interval: verdicts, the bench's goals, notes, tables and printout.
        """
        head = f"{self.median:.{digits}f}×" + (f" {of}" if of else "")
        if self.rounds == 1:
            return f"{head} (1 round)"
        return f"{head} ({self.bounds(digits)})"

    def bounds(self, digits: int = 2) -> str:
        """The interval alone: ``1.10–1.31``."""
        return f"{self.lo:.{digits}f}–{self.hi:.{digits}f}"


class IntervalKind(enum.Enum):
    MIN_MAX = "min–max of the rounds"
    REPEAT_RUN = "95 % prediction interval for a repeat run's median"


# Student's t, 0.975 quantile, for 1..30 degrees of freedom; past 30 the value at 30 (slightly wide).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def repeat_half_width(ratios: Sequence[float]) -> float:
    """Half the width, in log ratio, of the 95 % prediction interval for a repeat run's median: t · s · √(π / n).

    s is the standard deviation of the rounds' log ratios: a ratio's noise is multiplicative (a round 10 %
    slow is 0.9×, not 0.1 less), and on the log scale the interval can never reach 0.
    """
    n = len(ratios)
    if n < 2:
        return 0.0
    return _half_width(n, statistics.stdev(math.log(r) for r in ratios))


def _half_width(n: int, s: float) -> float:
    """t(0.975, n-1) · s · √(π / n): the repeat run's half width of n rounds whose log ratios spread by s."""
    return _T975[min(n - 1, len(_T975)) - 1] * s * math.sqrt(math.pi / n)


def rounds_to_tell(ratios: Sequence[float], bound: float, most: int = 10_000) -> int | None:
    """About how many rounds would put ``bound`` outside the prediction interval of a repeat run's median.

    An estimate, not a measurement: the smallest n whose half width t(0.975, n-1) · s · √(π / n) is below
    |ln(median / bound)|, with the median and s of ``ratios`` as if they stayed; ``None`` without a spread
    to scale (fewer than 2 rounds) or past ``most`` rounds (a median at the bound is never told from it).
    """
    if len(ratios) < 2:
        return None
    gap, s = abs(math.log(statistics.median(ratios) / bound)), statistics.stdev(math.log(r) for r in ratios)
    if s == 0:
        return len(ratios) if gap > 0 else None
    for n in range(2, most + 1):
        if _half_width(n, s) < gap:
            return n
    return None


REPEAT_COVERAGE = 0.95  # of a repeat run's median, by the rank interval (``repeat_rank``)


def _below_kth(n: int, k: int) -> float:
    """Of 2n exchangeable rounds split into two runs of n: P(a repeat run's median < this run's k-th smallest).

    The repeat's median lies below when at least ⌈n/2⌉ of its rounds do; for an even n that is the lower of
    its two middle rounds, so the probability is an upper bound there. j of the repeat's rounds fall before
    this run's k-th smallest in C(j+k-1, j) · C(2n-j-k, n-j) of the C(2n, n) equally likely splits.
    """
    ways = sum(math.comb(j + k - 1, j) * math.comb(2 * n - j - k, n - j) for j in range(-(-n // 2), n + 1))
    return ways / math.comb(2 * n, n)


@functools.cache
def repeat_rank(n: int) -> int:
    """The largest k whose k-th smallest to k-th largest of n rounds holds a repeat run's median with
    probability at least ``REPEAT_COVERAGE``; 1 (the min–max) where no k does (up to 12 rounds)."""
    k = 1
    while k < (n + 1) // 2 and 1 - 2 * _below_kth(n, k + 1) >= REPEAT_COVERAGE:
        k += 1
    return k


def interval(ratios: Sequence[float], kind: IntervalKind = IntervalKind.MIN_MAX) -> RatioInterval | None:
    """Median of ``ratios`` (one per round) with the interval ``kind``; ``None`` without any."""
    if not ratios:
        return None
    ordered = sorted(ratios)
    median, lo, hi = statistics.median(ordered), ordered[0], ordered[-1]
    if kind is IntervalKind.REPEAT_RUN:
        k, half = repeat_rank(len(ordered)), repeat_half_width(ordered)
        lo = min(ordered[k - 1], median * math.exp(-half))
        hi = max(ordered[-k], median * math.exp(half))
    return RatioInterval(median, lo, hi, len(ratios))


REFERENCE_INTERVAL = RatioInterval(1.0, 1.0, 1.0, 1)  # the reference over itself, in every round


def ratio_intervals(
    rounds: Sequence[Mapping[str, float | None]], reference: str, kind: IntervalKind = IntervalKind.MIN_MAX
) -> dict[str, RatioInterval | None]:
    """``interval`` of every label's ``paired_ratios``."""
    return {label: interval(r, kind) for label, r in paired_ratios(rounds, reference).items()}
