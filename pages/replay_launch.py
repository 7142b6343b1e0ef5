"""Comparisons and sweeps: a trace replayed on every chosen engine at every load point.

The worker samples the trace once, then runs it:

* sequential (the default): one ``ReplayJob`` over every engine and load point,
  one run after another on the identical trace, each engine alone on the
  device; the job writes each run to the launch's directory as it ends.
* simultaneous: one ``ReplayJob`` per engine, all at once, sharing the device.
  The jobs do not write (two writers appending to one directory would
  interleave); the worker writes each run, under the manager's write lock, as
  soon as it appears.

``view()`` says where every run stands; the ``Request`` records inside are
finished, hence no longer written to.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from engine.config import EngineConfig, SamplingParams
from metrics.export import write_run
from metrics.request_metrics import RequestMetrics, request_metrics
from metrics.run_key import RunKey
from metrics.summary import SLO, RunSummary, summarize
from metrics.timeseries import TimeseriesRow
from pages.launch import POLL_S, Launch, LaunchStatus, PairLoader
from pages.recording import RunRecorder
from workloads.arrivals import ArrivalPolicy
from workloads.environment import run_context
from workloads.job import JobSnapshot, ReplayJob
from workloads.replay import RunResult, load_label
from workloads.sweep import SweepPlan
from workloads.trace import DatasetSpec, load_trace

RUN_END_STATES = {
    None: "done",
    "cancelled": "cancelled",
    "timeout": "timed out",
    "engine error": "failed",
    "engine did not stop": "failed",
}


@dataclass(frozen=True)
class ReplaySpec:
    kind: str  # "live" | "sweep": the page that started it
    preset: str
    engines: tuple[str, ...]
    policies: tuple[ArrivalPolicy, ...]
    dataset: DatasetSpec
    num_requests: int
    config: EngineConfig
    params: SamplingParams
    slo: SLO | None = None
    simultaneous: bool = False  # one job per engine, all at once: they share the device
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        if not self.engines:
            raise ValueError("choose at least one engine")
        if not self.policies:
            raise ValueError("give at least one load point")
        if self.num_requests < 1:
            raise ValueError("the number of requests must be at least 1")

    def plan(self, engines: tuple[str, ...]) -> SweepPlan:
        return SweepPlan(engines, self.policies, self.config, self.params, self.slo)

    def run_order(self) -> list[tuple[str, ArrivalPolicy]]:
        """Every run of the launch, load point by load point, every engine at each."""
        return self.plan(self.engines).runs()


@dataclass(frozen=True)
class RunView:
    engine: str
    policy: ArrivalPolicy
    state: str  # "waiting" | "warmup" | "running" | "done" | "cancelled" | "timed out" | "failed" | "skipped"
    finished: int  # requests of this run finished
    total: int  # requests in the trace
    timeseries: tuple[TimeseriesRow, ...]
    requests: tuple[RequestMetrics, ...]  # finished requests so far (every submitted one once done)
    summary: RunSummary | None  # of the finished requests so far; the run's summary once done
    result: RunResult | None  # once the run has ended

    @property
    def load(self) -> str:
        return load_label(self.policy)


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


class _Stopped(Exception):
    """Stop was pressed while the trace was being sampled."""


@dataclass
class _Job:
    job: ReplayJob
    runs: list[tuple[str, ArrivalPolicy]]  # this job's runs, in its order
    recorder: RunRecorder
    written: set[str] = field(default_factory=set)  # run ids written by the worker (simultaneous)


class ReplayLaunch(Launch):
    def __init__(
        self, launch_id: str, spec: ReplaySpec, out_dir: Path, load_pair: PairLoader, write_lock: threading.Lock
    ) -> None:
        self.kind = spec.kind
        super().__init__(launch_id, load_pair)
        self.spec = spec
        self.out_dir = out_dir
        self._write_lock = write_lock
        self._jobs: list[_Job] = []
        self._trace_ids: frozenset[str] = frozenset()

    def cancel(self) -> None:
        super().cancel()
        with self._lock:
            jobs = list(self._jobs)
        for j in jobs:
            j.job.cancel()

    def _work(self) -> str | None:
        spec = self.spec
        pair = self._pair(spec.preset, spec.device)
        if self._cancel.is_set():
            return None
        source = spec.dataset.describe()
        self._progress(f"Sampling {spec.num_requests} requests ({source})", 0.0)

        def sampled(done: int, wanted: int) -> None:
            if self._cancel.is_set():
                raise _Stopped
            self._progress(f"Sampling requests ({source}): {done}/{wanted}", done / wanted)

        try:
            trace = load_trace(spec.dataset, pair, spec.num_requests, spec.seed, spec.params.max_new_tokens, sampled)
        except _Stopped:  # Stop pressed while the trace was being sampled: start no engine
            return None
        if self._cancel.is_set():
            return None
        meta = {
            "invocation": {
                "source": f"dashboard ({spec.kind} page)",
                "seed": spec.seed,
                "dataset": spec.dataset.describe(),
                "num_requests": spec.num_requests,
                "engines_simultaneous": spec.simultaneous,
            },
            **run_context(pair),
        }
        groups = [(e,) for e in spec.engines] if spec.simultaneous else [spec.engines]
        jobs = []
        for engines in groups:
            recorder = RunRecorder()
            plan = spec.plan(engines)
            out = None if spec.simultaneous else self.out_dir
            job = ReplayJob.start(pair, trace, plan, out, meta, engine_factory=recorder.factory)
            jobs.append(_Job(job, plan.runs(), recorder))
        with self._lock:
            self._jobs = jobs
            self._trace_ids = frozenset(item.request_id for item in trace.items)
            self._status = LaunchStatus("running", f"Running {len(spec.run_order())} run(s)", 1.0, None)
        if self._cancel.is_set():  # Stop pressed while the jobs were being created
            for j in jobs:
                j.job.cancel()
        run_meta = {"trace": trace.describe(), **meta}
        try:
            while True:
                ended = all(j.job.wait(0) for j in jobs)
                if spec.simultaneous:
                    self._write_new(jobs, run_meta)
                if ended:
                    break
                self._cancel.wait(POLL_S)
        except BaseException:  # e.g. a run file could not be written: no engine may outlive its launch
            for j in jobs:
                j.job.cancel()
            for j in jobs:
                j.job.wait()
            raise
        errors = [s.error for s in (j.job.snapshot() for j in jobs) if s.error]
        return "; ".join(errors) or None

    def _write_new(self, jobs: list[_Job], run_meta: dict) -> None:
        for j in jobs:
            for result in j.job.snapshot().results:
                if result.run_id in j.written:
                    continue
                plan = self.spec.plan((result.engine,))
                with self._write_lock:
                    write_run(self.out_dir, result.record({**plan.describe(), **run_meta}))
                j.written.add(result.run_id)

    def view(self) -> ReplayView:
        with self._lock:
            jobs = list(self._jobs)
            trace_ids = self._trace_ids
        snapshots = [j.job.snapshot() for j in jobs]
        runs = []
        for engine, policy in self.spec.run_order():
            place = next(
                ((k, j.runs.index((engine, policy))) for k, j in enumerate(jobs) if (engine, policy) in j.runs), None
            )
            if place is None:
                runs.append(RunView(engine, policy, "waiting", 0, self.spec.num_requests, (), (), None, None))
                continue
            k, index = place
            runs.append(_run_view(engine, policy, snapshots[k], index, jobs[k].recorder, trace_ids))
        return ReplayView(self.id, self.spec, self.status(), tuple(runs), self.out_dir)


def _run_view(
    engine: str,
    policy: ArrivalPolicy,
    snap: JobSnapshot,
    index: int,
    recorder: RunRecorder,
    trace_ids: frozenset[str],
) -> RunView:
    """Where run ``index`` of a job stands. A job runs its runs in order; ``results`` are the ended ones."""
    total = len(trace_ids)
    if index < len(snap.results):
        result = snap.results[index]
        state = RUN_END_STATES.get(result.stop_reason, "done")
        return RunView(
            engine,
            policy,
            state,
            len(result.requests),
            total,
            result.timeseries,
            result.metrics,
            result.summary,
            result,
        )
    if snap.state != "running" or index > len(snap.results):
        state = "waiting" if snap.state == "running" else "skipped"
        return RunView(engine, policy, state, 0, total, (), (), None, None)
    live = snap.live
    if live.phase == "done":  # the previous run's data, before this run resets it
        return RunView(engine, policy, "warmup", 0, total, (), (), None, None)
    recording = recorder.engine(index)
    finished = recording.finished(trace_ids) if recording is not None else []
    t0 = min((r.arrival_time for r in finished if r.arrival_time is not None), default=0.0)
    metrics = tuple(request_metrics(r, t0) for r in finished)
    elapsed = live.timeseries[-1].t_s if live.timeseries else 0.0
    summary = summarize(RunKey(f"live-{engine}", engine, policy.cap, policy.request_rate), metrics, elapsed)
    state = "running" if live.phase in ("running", "stopping") else "warmup"
    return RunView(engine, policy, state, live.finished, total, live.timeseries, metrics, summary, None)
