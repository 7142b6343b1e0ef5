"""The figures Inspect shows under one request's text, for a new prompt and for a saved run's request alike.

A new prompt's come from its finished ``Request``; a saved request's from the
steps its outputs.jsonl recorded and the timings of its requests.csv row. The
step figures are derived from the steps only (never from another count), so a
request whose steps were not recorded shows "—" for them rather than a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from dashboard.tables import fmt
from engine.request import Request, StepRecord
from metrics.request_metrics import request_metrics


@dataclass(frozen=True)
class RequestFigures:
    """One request's tiles; None where the figure was not recorded (or is undefined, as TPOT of one token)."""

    output_tokens: int
    steps: tuple[StepRecord, ...] | None  # every verify step; None: not recorded
    ttft_ms: float | None
    tpot_ms: float | None

    @classmethod
    def of_request(cls, request: Request) -> RequestFigures:
        m = request_metrics(request, request.arrival_time or 0.0)
        return cls(m.output_tokens, tuple(request.steps), m.ttft_ms, m.tpot_ms)

    @classmethod
    def recorded(
        cls, output_tokens: int, steps: Sequence[StepRecord] | None, ttft_ms: float | None, tpot_ms: float | None
    ) -> RequestFigures:
        """A saved request's figures; NaN timings (an empty CSV cell) count as not recorded."""
        return cls(output_tokens, None if steps is None else tuple(steps), _number(ttft_ms), _number(tpot_ms))

    def tiles(self) -> tuple[tuple[str, str], ...]:
        """(label, text) per tile, in the order the page shows them; "—" for a figure not known."""
        steps = self.steps
        verify_steps = None if steps is None else len(steps)
        drafted = None if steps is None else sum(s.draft_len for s in steps)
        accepted = None if steps is None else sum(s.accepted for s in steps)
        return (
            ("output tokens", fmt(self.output_tokens)),
            ("verify steps", fmt(verify_steps)),
            ("acceptance", fmt(accepted / drafted if drafted else None, digits=2)),
            ("tokens / step", fmt(1 + accepted / verify_steps if verify_steps else None, digits=2)),
            ("TTFT (ms)", fmt(self.ttft_ms)),
            ("TPOT (ms)", fmt(self.tpot_ms, digits=1)),
        )


def _number(value: float | None) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
