"""Where every run of a comparison or sweep stands: the immutable view the Live run and Sweep pages draw.

A run's figures come from the workloads harness only: an ended run's from its
``RunResult``, a run in progress from its job's ``LiveSnapshot`` (time series,
finished requests, their metrics and the run's summary so far, all timed from
the replay's own start). Nothing here computes a metric.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from dashboard.launch import LaunchStatus
from dashboard.replay_spec import ReplaySpec
from metrics.request_metrics import RequestMetrics
from metrics.summary import RunSummary
from metrics.timeseries import TimeseriesRow
from workloads.drivers.arrivals import ArrivalPolicy
from workloads.drivers.job import JobSnapshot, JobState
from workloads.drivers.live import RunPhase
from workloads.drivers.run_result import RunResult, StopReason, load_label


class RunState(enum.StrEnum):
    WAITING = "waiting"  # its turn has not come
    WARMUP = "warmup"  # the engine is starting or warming up
    RUNNING = "running"
    DONE = "done"  # it went to the end of its trace
    CANCELLED = "cancelled"  # Stop ended it: what finished is recorded
    TIMED_OUT = "timed out"
    FAILED = "failed"  # its engine crashed or did not stop
    SKIPPED = "skipped"  # the launch ended before its turn

    @property
    def underway(self) -> bool:
        return self in (RunState.WARMUP, RunState.RUNNING)


RUN_END_STATES = {
    None: RunState.DONE,
    StopReason.CANCELLED: RunState.CANCELLED,
    StopReason.TIMEOUT: RunState.TIMED_OUT,
    StopReason.ENGINE_ERROR: RunState.FAILED,
    StopReason.ENGINE_DID_NOT_STOP: RunState.FAILED,
}


@dataclass(frozen=True)
class RunView:
    engine: str
    policy: ArrivalPolicy
    state: RunState
    finished: int  # requests of this run finished
    total: int  # requests in the trace
    timeseries: tuple[TimeseriesRow, ...]
    requests: tuple[RequestMetrics, ...]  # finished requests so far (every submitted one once done)
    summary: RunSummary | None  # of the finished requests so far; the run's summary once done
    result: RunResult | None  # once the run has ended

    @property
    def load(self) -> str:
        return load_label(self.policy)

    @classmethod
    def empty(cls, engine: str, policy: ArrivalPolicy, state: RunState, total: int) -> RunView:
        """A run with nothing measured yet (or any more)."""
        return cls(engine, policy, state, 0, total, (), (), None, None)


@dataclass(frozen=True)
class ReplayView:
    launch_id: str
    spec: ReplaySpec
    status: LaunchStatus
    runs: tuple[RunView, ...]  # in ``spec.run_order()``
    out_dir: Path

    @property
    def results(self) -> tuple[RunResult, ...]:
        return tuple(r.result for r in self.runs if r.result is not None)


def run_view(engine: str, policy: ArrivalPolicy, snap: JobSnapshot, index: int, total: int) -> RunView:
    """Where run ``index`` of a job stands. A job runs its runs in order; ``results`` are the ended ones."""
    if index < len(snap.results):
        result = snap.results[index]
        return RunView(
            engine,
            policy,
            RUN_END_STATES[result.stop_reason],
            len(result.requests),
            total,
            result.timeseries,
            result.metrics,
            result.summary,
            result,
        )
    if snap.state != JobState.RUNNING or index > len(snap.results):
        state = RunState.WAITING if snap.state == JobState.RUNNING else RunState.SKIPPED
        return RunView.empty(engine, policy, state, total)
    live = snap.live
    if live.phase == RunPhase.DONE:  # the previous run's data, before this run resets it
        return RunView.empty(engine, policy, RunState.WARMUP, total)
    state = RunState.RUNNING if live.phase in (RunPhase.RUNNING, RunPhase.STOPPING) else RunState.WARMUP
    return RunView(engine, policy, state, live.finished, total, live.timeseries, live.metrics, live.summary, None)
