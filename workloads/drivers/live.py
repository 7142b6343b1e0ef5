"""A replay in progress as other threads see it: the one source of the live view.

``workloads.drivers.replay.replay`` owns a ``LiveRun`` and tells it what happens: the
run's state, its key, clock origin ``t0`` and SLO once warm-up is over, the
time series sampler, each request as it finishes, and at the end the result.
Any thread may call ``snapshot()``, which returns an immutable ``RunSnapshot``:
the time series so far, the requests finished so far, their ``RequestMetrics``
and the run's ``RunSummary`` over them. Both are computed with the run's own
key, ``t0`` and SLO, as the final ``RunResult`` is, so what a chart shows while
a run goes on is what its run files say about the same requests.

A finished request never changes (a ``Request`` is frozen once ``done`` is
set), so its metrics are computed once, by the first snapshot that sees it;
the summary is recomputed only when another request has finished. A run that
nobody watches (the CLI) computes nothing here until it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from engine.request import Request
from metrics.request_metrics import RequestMetrics, request_metrics
from metrics.run_key import RunKey
from metrics.summary import SLO, RunSummary, summarize
from metrics.timeseries import TimeseriesRow, TimeseriesSampler
from workloads.drivers.arrivals import ArrivalPolicy, ClosedLoop
from workloads.drivers.run_result import RunResult, load_label
from workloads.drivers.run_state import RunState


@dataclass(frozen=True)
class RunSnapshot:
    """Where one run stands, immutable: the one value between a run's engine stats and the figures drawn of it.

    A run in progress carries what finished so far; an ended one its
    ``RunResult`` (and the same figures, from it); one that has not started,
    or never will, nothing.
    """

    engine: str  # engine name or endpoint label
    policy: ArrivalPolicy
    state: RunState
    finished: int  # requests of the trace finished so far
    total: int  # requests in the trace
    timeseries: tuple[TimeseriesRow, ...]
    requests: tuple[Request, ...]  # the finished requests: in finishing order, in submission order once done
    metrics: tuple[RequestMetrics, ...]  # of ``requests``, one each, timed from the run's t0
    summary: RunSummary | None  # over ``metrics`` (the run's summary once done); None before the clock starts
    result: RunResult | None  # once the run has ended

    @property
    def load(self) -> str:
        return load_label(self.policy)

    @classmethod
    def empty(cls, engine: str, policy: ArrivalPolicy, state: RunState, total: int) -> RunSnapshot:
        """A run with nothing measured yet (or any more)."""
        return cls(engine, policy, state, 0, total, (), (), (), None, None)

    @classmethod
    def ended(cls, result: RunResult, total: int) -> RunSnapshot:
        state = RunState.ended_by(result.stop_reason)
        return cls(result.engine, result.policy, state, len(result.requests), total, result.timeseries,
                   result.requests, result.metrics, result.summary, result)  # fmt: skip


@dataclass(frozen=True)
class _Clock:
    key: RunKey
    t0: float  # perf_counter seconds: the run's time origin
    slo: SLO | None


class LiveRun:
    """The state of the replay in progress.

    Only ``replay`` calls the methods that change it (``begin``, ``set_state``,
    ``start_clock``, ``add_finished``, ``end``), from its own thread; every
    other thread only calls ``snapshot``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._run = 0  # counts ``begin`` calls: a summary computed for an earlier run is not stored
        self._engine, self._policy = "", ClosedLoop(1)  # of the run begun last
        self._state = RunState.WAITING
        self._total = 0
        self._result: RunResult | None = None
        self._sampler: TimeseriesSampler | None = None
        self._clock: _Clock | None = None
        self._finished: list[Request] = []
        self._metrics: tuple[RequestMetrics, ...] = ()  # of the first len(_metrics) finished requests
        self._summary: RunSummary | None = None  # over ``_metrics``

    def begin(self, engine: str, policy: ArrivalPolicy, total: int) -> None:
        """Forget the previous run; ``engine``'s run of ``total`` trace requests under ``policy`` is starting."""
        with self._lock:
            self._run += 1
            self._engine, self._policy, self._state, self._total = engine, policy, RunState.STARTING, total
            self._sampler, self._clock, self._result = None, None, None
            self._finished, self._metrics, self._summary = [], (), None

    def set_state(self, state: RunState) -> None:
        with self._lock:
            self._state = state

    def start_clock(self, key: RunKey, t0: float, slo: SLO | None, sampler: TimeseriesSampler) -> None:
        """The measured run starts at ``t0``: state RUNNING, rows from ``sampler``."""
        with self._lock:
            self._state, self._sampler, self._clock = RunState.RUNNING, sampler, _Clock(key, t0, slo)

    def add_finished(self, requests: Sequence[Request]) -> None:
        """Requests of the trace that have finished (``done`` set) since the last call."""
        with self._lock:
            self._finished.extend(requests)

    def end(self, result: RunResult) -> None:
        """The run is over: it ended as ``result`` says, and the snapshot carries the result."""
        with self._lock:
            self._state, self._result = RunState.ended_by(result.stop_reason), result
            self._finished, self._metrics, self._summary = list(result.requests), result.metrics, result.summary

    def snapshot(self) -> RunSnapshot:
        with self._lock:
            run, state, total, sampler, clock = self._run, self._state, self._total, self._sampler, self._clock
            engine, policy, result = self._engine, self._policy, self._result
            finished, metrics, summary = tuple(self._finished), self._metrics, self._summary
        if clock is not None and (summary is None or len(metrics) < len(finished)):
            # outside the lock: the replay thread must not wait for a reader's arithmetic
            metrics += tuple(request_metrics(r, clock.t0) for r in finished[len(metrics) :])
            summary = summarize(clock.key, metrics, _measured_s(metrics), clock.slo)
            with self._lock:
                if self._run == run and (self._summary is None or len(self._metrics) < len(metrics)):
                    self._metrics, self._summary = metrics, summary
        rows = sampler.rows if sampler is not None else ()
        return RunSnapshot(engine, policy, state, len(finished), total, rows, finished, metrics, summary, result)


def _measured_s(metrics: Sequence[RequestMetrics]) -> float:
    """From the run's start to the last finish so far: the final summary's duration, for the requests so far."""
    return max((m.finish_s for m in metrics if m.finish_s is not None), default=0.0)
