"""Comparisons and sweeps: a trace replayed on every chosen engine at every load point.

The worker samples the trace once, then runs it:

* sequential (the default): one ``ReplayJob`` over every engine and load point,
  one run after another on the identical trace, each engine alone on the device,
  then the endpoint (an OpenAI-compatible server) at the same load point;
* simultaneous: one ``ReplayJob`` per engine and per endpoint, all at once,
  the engines sharing the device.

Either way every job writes each run to the launch's directory as it ends,
through ``workloads.drivers.sweep.RunWriter`` – the writer the CLI uses – with the run
manager's write lock, so simultaneous jobs append one run at a time. A job that
fails (a run file that cannot be written) ends the launch: the other jobs are
cancelled, so no engine outlives its launch.

``view()`` says where every run stands (``dashboard.replay_view``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dashboard.launch import POLL_S, Launch, PairLoader
from dashboard.replay_spec import ReplaySpec
from dashboard.replay_view import ReplayView, RunState, RunView, run_view
from engine.profiling import prepare_profiles
from workloads.drivers.arrivals import ArrivalPolicy
from workloads.drivers.environment import run_context
from workloads.drivers.job import JobState, ReplayJob
from workloads.drivers.sweep import RunWriter
from workloads.drivers.trace import load_trace


class _Stopped(Exception):
    """Stop was pressed while the trace was being sampled."""


@dataclass(frozen=True)
class _Job:
    job: ReplayJob
    runs: list[tuple[str, ArrivalPolicy]]  # this job's runs, in its order


class ReplayLaunch(Launch):
    def __init__(
        self, launch_id: str, spec: ReplaySpec, out_dir: Path, load_pair: PairLoader, write_lock: threading.Lock
    ) -> None:
        self.kind = spec.kind
        super().__init__(launch_id, load_pair)
        self.spec = spec
        self.out_dir = out_dir
        self._writer = RunWriter(out_dir, write_lock)
        self._jobs: list[_Job] = []
        self._planned = spec.num_requests  # requests in the trace, once it is sampled

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
        # the cost controller's step costs: measured once per machine, with its own message, before any engine
        prepare_profiles(pair, spec.config, spec.engines, self._progress)
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
        jobs = []
        for engines, endpoints in spec.job_groups():
            plan = spec.plan(engines, endpoints)
            jobs.append(_Job(ReplayJob.start(pair, trace, plan, self._writer, meta), plan.runs()))
        with self._lock:
            self._jobs = jobs
            self._planned = len(trace.items)
        self._running(f"Running {len(spec.run_order())} run(s)")
        if self._cancel.is_set():  # Stop pressed while the jobs were being created
            self.cancel()
        while not all(j.job.wait(0) for j in jobs):  # Stop reaches the jobs directly, through cancel()
            if any(j.job.snapshot().state == JobState.FAILED for j in jobs):
                self.cancel()  # a job that failed ends the launch, and so every other engine
            time.sleep(POLL_S)
        errors = [s.error for s in (j.job.snapshot() for j in jobs) if s.error]
        return "; ".join(dict.fromkeys(errors)) or None  # simultaneous jobs may fail alike (the same directory)

    def view(self) -> ReplayView:
        with self._lock:
            jobs = list(self._jobs)
            total = self._planned
        snapshots = [j.job.snapshot() for j in jobs]
        runs = []
        for engine, policy in self.spec.run_order():
            place = next(
                ((k, j.runs.index((engine, policy))) for k, j in enumerate(jobs) if (engine, policy) in j.runs), None
            )
            if place is None:
                runs.append(RunView.empty(engine, policy, RunState.WAITING, total))
                continue
            k, index = place
            runs.append(run_view(engine, policy, snapshots[k], index, total))
        return ReplayView(self.id, self.spec, self.status(), tuple(runs), self.out_dir)
