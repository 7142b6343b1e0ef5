"""A part's typed rows and their summary over rounds: what every part measures, and how it is read.

A part runs its competitors one after another on the same prompts, round after
round (the order rotates each round), so that a slow spell of this shared
machine hits them alike. It records one ``Row`` per round and competitor (a
subclass per part, with that part's figures). ``ratio_summary`` divides each
round's figure by the reference's figure *of the same round*; a ``Summary`` is
the median ratio over rounds with its min–max (``metrics.rounds``), and
``RatioInterval.text`` is the one way such a ratio is written. ``record()``
is a row as the CSV holds it, which is what the docs and figures are rendered
from.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from metrics.rounds import RatioInterval, ratio_intervals

R = TypeVar("R", bound="Row")


@dataclass(frozen=True, kw_only=True)
class Row:
    """One competitor's figures in one round of one load point."""

    group: str  # the load point, e.g. "C=16" or "1.5 req/s"
    round: int
    label: str  # the competitor

    def record(self) -> dict[str, Any]:
        """This row as a CSV row: one column per field, in the order the fields are declared."""
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class RateRow(Row):
    """A row with a throughput: every part PDV's goal is read from has at least this."""

    output_tok_s: float | None  # None: the run emitted nothing, so it has no rate


@dataclass(frozen=True, kw_only=True)
class Summary:
    """One (group, competitor, metric) over the rounds: the median figure and its ratio to the reference."""

    part: str
    group: str
    label: str
    metric: str
    reference: str  # the competitor the ratios are to; "" when the part reads no ratio
    median: float | None
    min: float | None
    max: float | None
    ratio: RatioInterval | None  # to the reference, median over rounds with min–max
    rounds: int
    better: str = "higher"  # or "lower", for latencies

    def record(self) -> dict[str, Any]:
        r = self.ratio
        return {
            "part": self.part, "group": self.group, "label": self.label, "metric": self.metric,
            "reference": self.reference, "median": self.median, "min": self.min, "max": self.max,
            "ratio_median": None if r is None else r.median, "ratio_min": None if r is None else r.lo,
            "ratio_max": None if r is None else r.hi, "rounds": self.rounds, "better": self.better,
        }  # fmt: skip


def ratio_summary(
    rows: Sequence[Row], metric: str, reference: str, part: str, lower_is_better: bool = False
) -> list[Summary]:
    """Per (group, label): the median of ``metric`` and of its ratio to ``reference`` in the same round and group."""
    by_round: dict[str, dict[int, dict[str, float | None]]] = {}
    table: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        value = getattr(r, metric)
        values = table.setdefault((r.group, r.label), [])
        if value is not None:
            values.append(value)
        by_round.setdefault(r.group, {}).setdefault(r.round, {})[r.label] = value
    intervals = {group: ratio_intervals(list(rounds.values()), reference) for group, rounds in by_round.items()}
    return [
        Summary(
            part=part, group=group, label=label, metric=metric, reference=reference,
            median=statistics.median(values) if values else None,
            min=min(values) if values else None, max=max(values) if values else None,
            ratio=intervals[group].get(label), rounds=len(values), better="lower" if lower_is_better else "higher",
        )  # fmt: skip
        for (group, label), values in table.items()
    ]


def find(summary: Sequence[Summary], group: str, label: str, metric: str) -> Summary | None:
    return next((s for s in summary if (s.group, s.label, s.metric) == (group, label, metric)), None)


def spread(s: Summary | None) -> str:
    """``1.23× (1.10–1.31)``: a summary row's median ratio with its min–max, or ``not measured``."""
    return "not measured" if s is None or s.ratio is None else s.ratio.text()


def same_output_note(rows: Sequence[Row], key: str, reference: str = "ar") -> str:
    """Whether every row's ``key`` says its outputs equalled ``reference``'s, naming the rows that did not."""
    different = sorted({f"{r.label} ({r.group}, round {r.round})" for r in rows if not getattr(r, key)})
    listed = f" Different: {', '.join(different)}." if different else ""
    return f"Every output equal to {reference}'s: {not different}.{listed}"


def after_rounds(before: Sequence[R], rows: Sequence[R]) -> list[R]:
    """``before`` then ``rows``, a load point both measured getting ``rows``' rounds after every round ``before``
    has of it, so the two calls' rounds stay apart."""
    groups = {r.group for r in rows}
    offset = 1 + max((r.round for r in before if r.group in groups), default=-1)
    return [*before, *(replace(r, round=r.round + offset) for r in rows)]
