"""Proposals per draft source: how often each source drafted for a request, and how much of it was kept.

Derived from the request's ``StepRecord``s (each names the ``DraftSource`` of
its proposal), never counted twice. A source is shown by kind – the draft
model, prompt lookup, suffix drafting over the request itself or over the
global tree – with the match lengths of lookups and suffix matches summed up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.request import StepRecord


@dataclass(frozen=True)
class SourceTally:
    source: str  # engine.draft_source.SourceKind value
    steps: int  # verify steps whose proposal came from this source
    drafted: int  # tokens it proposed
    accepted: int  # of them, tokens the verifier kept

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    def row(self) -> dict[str, str | int | float]:
        """The tally as one table row with human headers (the Inspect page)."""
        return {
            "source": self.source,
            "steps": self.steps,
            "tokens proposed": self.drafted,
            "accepted": self.accepted,
            "acceptance": round(self.acceptance, 2),
        }


def source_tallies(steps: Iterable[StepRecord]) -> tuple[SourceTally, ...]:
    """One tally per source kind that drafted in ``steps``, in order of first appearance."""
    totals: dict[str, list[int]] = {}
    for step in steps:
        if step.source is None or step.draft_len == 0:
            continue
        tally = totals.setdefault(str(step.source.kind), [0, 0, 0])
        tally[0] += 1
        tally[1] += step.draft_len
        tally[2] += step.accepted
    return tuple(SourceTally(kind, *counts) for kind, counts in totals.items())
