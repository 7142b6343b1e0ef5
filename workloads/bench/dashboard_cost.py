"""Part 6, what watching costs: the same replay with and without the dashboard's live sampling.

The dashboard's Live run page redraws four cards every second (widgets'
``REFRESH_S``), and each card reads the run's ``LiveRun.snapshot()`` and turns
it into frames (time series, finished requests) before drawing. Here a thread
does exactly that reading – four snapshots and their frames per second – while
the replay runs; the Plotly drawing and the browser are not included (they run
in the Streamlit server and the browser, which the CLI does not start). Goal:
< 5% throughput difference.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pandas as pd

from engine.config import EngineConfig, SamplingParams
from metrics.frames import timeseries_frame
from workloads.bench.common import BenchContext, Goal, PartResult, first, held_out, rotated
from workloads.bench.rows import RateRow, find, ratio_summary, spread
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.live import LiveRun
from workloads.drivers.replay import replay
from workloads.drivers.run_spec import RunHooks, RunSettings, RunSpec

NAME = "6-dashboard"
ENGINE = "pdv"
CONCURRENCY = 4
REFRESH_S = 1.0  # the dashboard's refresh period (widgets/controls.py)
CARDS = 4  # live cards on the Live run page, each redrawn every period
GOAL = 0.05
WATCHED, ALONE = "with live sampling", "without"


@dataclass(frozen=True, kw_only=True)
class DashboardRow(RateRow):
    snapshots: int  # live snapshots the watcher read during the run


class Watcher:
    """Reads ``live`` as the dashboard's cards do, at once and then every ``REFRESH_S``, until stopped."""

    def __init__(self, live: LiveRun) -> None:
        self.live, self.reads = live, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="watcher", daemon=True)

    def _loop(self) -> None:
        while True:  # the page draws its cards when it opens, then every period: a read first, then the wait
            for _ in range(CARDS):
                snap = self.live.snapshot()
                timeseries_frame(snap.timeseries)
                pd.DataFrame([m.__dict__ for m in snap.metrics])
                self.reads += 1
            if self._stop.wait(REFRESH_S):
                return

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run(ctx: BenchContext) -> PartResult:
    s = ctx.settings
    trace = held_out(ctx, max(2 * CONCURRENCY, s.prompts))
    params = SamplingParams(max_new_tokens=s.max_new_tokens, seed=0)
    rows = []
    # unrecorded: the process's first run of an engine pays one-off costs the rounds should not compare
    settings = RunSettings(EngineConfig(), params)
    replay(ctx.pair, first(trace, 2), RunSpec(ENGINE, ClosedLoop(2), settings))
    for round_ in range(s.rounds):
        for label in rotated([ALONE, WATCHED], round_):
            live = LiveRun()
            spec = RunSpec(ENGINE, ClosedLoop(CONCURRENCY), settings)
            if label == WATCHED:
                with Watcher(live) as watcher:
                    result = replay(ctx.pair, trace, spec, RunHooks(live=live))
                reads = watcher.reads
            else:
                result, reads = replay(ctx.pair, trace, spec, RunHooks(live=live)), 0
            rows.append(DashboardRow(group=f"{ENGINE} C={CONCURRENCY}", round=round_, label=label,
                                     output_tok_s=result.summary.output_tok_s, snapshots=reads))  # fmt: skip
    group = rows[0].group
    summary = ratio_summary(rows, "output_tok_s", ALONE, NAME)
    watched = find(summary, group, WATCHED, "output_tok_s")
    diff = abs(1 - watched.ratio.median) if watched and watched.ratio is not None else None
    goals = [Goal(NAME, "live sampling changes throughput by < 5%", f"watched = {spread(watched)} unwatched",
                  diff is not None and diff < GOAL)]  # fmt: skip
    notes = [f"{sum(r.snapshots for r in rows)} snapshots read over the watched runs."]
    return PartResult(NAME, "Dashboard cost: one replay with and without live sampling", rows, summary, goals, notes)
