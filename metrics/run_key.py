"""The identity of one run: which engine, under which load, with which id.

A *run* is one engine replaying one trace under one load point – a closed-loop
concurrency C or an open-loop request rate R (optionally capped at C in flight).
Every row of every output file carries these fields, so one file can hold many
runs and the dashboard can group by them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunKey:
    run_id: str
    engine: str
    concurrency: int | None  # closed-loop C, or the open-loop cap; None = open loop without a cap
    request_rate: float | None  # open-loop requests/s (inf = all at once); None = closed loop

    def __post_init__(self) -> None:
        if not self.run_id:
            raise ValueError("run_id must be a non-empty string")
        if self.concurrency is None and self.request_rate is None:
            raise ValueError("a run needs a concurrency, a request rate, or both")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.request_rate is not None and not self.request_rate > 0:
            raise ValueError(f"request rate must be > 0, got {self.request_rate}")

    @property
    def load_label(self) -> str:
        """Short human label of the load point, e.g. ``C=4`` or ``R=2/s (C<=8)``."""
        if self.request_rate is None:
            return f"C={self.concurrency}"
        rate = "inf" if self.request_rate == float("inf") else f"{self.request_rate:g}"
        cap = "" if self.concurrency is None else f" (C<={self.concurrency})"
        return f"R={rate}/s{cap}"
