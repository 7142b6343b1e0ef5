"""The Live run's default comparison: what one press of Start runs when nothing in the sidebar was changed.

The dashboard's settings (``dashboard.settings``) start from these values and
the bench's page-against-CLI part (``workloads.bench.page_vs_cli``) replays the
same spec headless, so both read them here. The sizes are chosen so that a warm
run on a quiet 2-core CPU ends in about two minutes with every engine's tok/s × AR
interval within about ±10 % (docs/results.md, "The default Live run").
"""

from __future__ import annotations

from dataclasses import dataclass

from metrics.verdict import SAME_MARGIN
from workloads.drivers.rounds import DEFAULT_ROUNDS, Precision


@dataclass(frozen=True)
class DefaultRun:
    concurrency: int = 2
    num_requests: int = 2  # one batch at concurrency 2 per engine and round
    max_new_tokens: int = 16
    rounds: int = 12  # the most; past 12 the repeat-run interval drops its outer rounds, and the budget ends it first
    precise: bool = True  # rounds added past DEFAULT_ROUNDS until every interval is within ±SAME_MARGIN
    budget_s: float = 90.0  # no round that would end later than this after the first began

    def precision(self, rounds: int | None = None) -> Precision | None:
        """The rounds' precision for ``rounds`` rounds at most (the default's): none at DEFAULT_ROUNDS or fewer."""
        most = self.rounds if rounds is None else rounds
        return Precision(SAME_MARGIN, DEFAULT_ROUNDS, self.budget_s) if self.precise and most > DEFAULT_ROUNDS else None


DEFAULT_RUN = DefaultRun()
