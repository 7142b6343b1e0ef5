"""A closed-loop run's two phases: while requests still arrive, and the drain after the last arrival.

A closed loop of N requests at concurrency C keeps C requests in flight until
the trace runs out; after the last arrival the batch can only shrink. How long
that drain lasts depends on the engine as much as on the load: requests of
equal length decoded one token per step all end on the same step, while a
speculative engine's rows run ahead of each other by what each accepts, so
its last requests end one by one over many steps of a shrinking batch. A
run's tokens per second over its whole duration counts the drain; over the
arrival phase it measures the load the run was set to hold. With N = 2C the
drain can be a tenth of the run, so a comparison at a fixed load reports both.

Times are the requests' own ``time.perf_counter()`` stamps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from engine.request import Request


class Phases(NamedTuple):
    arrival_s: float  # from the first arrival to the last
    arrival_tokens: int  # output tokens handed back before the last arrival
    drain_s: float  # from the first request to end after the last arrival to the last one to end

    @property
    def arrival_tok_s(self) -> float | None:
        """Output tokens per second while requests still arrived; None where no token came before the last
        arrival (a run whose requests all arrived at once, or within its first step)."""
        return self.arrival_tokens / self.arrival_s if self.arrival_tokens > 0 else None


def phases(requests: Sequence[Request]) -> Phases | None:
    """The arrival phase and the drain of one run's requests; None without an arrival and an end to measure."""
    arrivals = [r.arrival_time for r in requests if r.arrival_time is not None]
    if not arrivals:
        return None
    first, last = min(arrivals), max(arrivals)
    ends = [r.finish_time for r in requests if r.finish_time is not None and r.finish_time > last]
    if not ends:
        return None
    tokens = sum(t < last for r in requests for t in r.token_times)
    return Phases(last - first, tokens, max(ends) - min(ends))
