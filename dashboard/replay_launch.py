"""Comparisons and sweeps: a trace replayed on every chosen engine at every load point.

The launch's worker samples the trace once, then runs the sweeps itself
(``workloads.drivers.sweep.run_sweep``):

* sequential (the default): one sweep over every engine and load point, one
  run after another on the identical trace, each engine alone on the device,
  then the endpoint (an OpenAI-compatible server) at the same load point;
* simultaneous: one sweep per engine and per endpoint, all at once on a thread
  each, the engines sharing the device.

Either way every sweep writes each run to the launch's directory as it ends,
through ``workloads.drivers.sweep.RunWriter`` – the writer the CLI uses – with
the run manager's write lock, so simultaneous sweeps append one run at a time.
All sweeps share the launch's cancel event: Stop reaches every engine at once,
and a sweep that fails (a run file that cannot be written) sets it too, so no
engine outlives its launch.

``view()`` says where every run stands: one ``RunSnapshot`` per run, pulled
from the sweeps' live runs and finished results, never pushed.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.launch import Launch, LaunchStatus, PairLoader
from dashboard.replay_spec import ReplaySpec
from engine.profiling import prepare_profiles
from workloads.drivers.environment import run_context
from workloads.drivers.live import LiveRun, RunSnapshot
from workloads.drivers.replay import PairLike
from workloads.drivers.rounds import LoadPointComparison
from workloads.drivers.run_result import RunResult
from workloads.drivers.run_spec import RunHooks, RunSpec
from workloads.drivers.run_state import RunState
from workloads.drivers.sweep import RunWriter, SweepPlan, run_sweep
from workloads.drivers.trace import Trace, load_trace

log = logging.getLogger(__name__)


class _Stopped(Exception):
    """Stop was pressed while the trace was being sampled."""


@dataclass(frozen=True)
class ReplayView:
    launch_id: str
    spec: ReplaySpec
    status: LaunchStatus
    runs: tuple[RunSnapshot, ...]  # in ``spec.run_order()``: each run's round in progress, or its latest round
    out_dir: Path
    rounds: tuple[RunResult, ...] = ()  # every ended round of every run, in the order they ran
    comparisons: tuple[LoadPointComparison, ...] = ()  # per load point reached: × AR intervals and verdict so far

    @property
    def results(self) -> tuple[RunResult, ...]:
        """The runs' latest ended rounds (one per run)."""
        return tuple(r.result for r in self.runs if r.result is not None)


@dataclass
class _Sweep:
    """One sweep of the launch; ``results`` and ``ended`` are guarded by the launch's lock."""

    plan: SweepPlan
    order: list[tuple[RunSpec, int]]  # every round of every run, in the order they run
    live: LiveRun = field(default_factory=LiveRun)
    results: list[RunResult] = field(default_factory=list)
    comparisons: dict[int, LoadPointComparison] = field(default_factory=dict)  # by load point index
    ended: bool = False


@dataclass(frozen=True)
class SweepState:
    """One sweep as ``ReplayLaunch.sweep_states`` reads it, under the launch's lock."""

    plan: SweepPlan
    live: LiveRun
    results: tuple[RunResult, ...]
    comparisons: dict[int, LoadPointComparison]
    ended: bool


class ReplayLaunch(Launch):
    def __init__(
        self,
        launch_id: str,
        spec: ReplaySpec,
        out_dir: Path,
        load_pair: PairLoader,
        write_lock: threading.Lock,
        live_factory: Callable[[], LiveRun] = LiveRun,
    ) -> None:
        self.kind = spec.kind
        super().__init__(launch_id, load_pair)
        self.spec = spec
        self.out_dir = out_dir
        self._writer = RunWriter(out_dir, write_lock)
        self._sweeps: list[_Sweep] = []
        self._planned = spec.num_requests  # requests in the trace, once it is sampled
        self._live_factory = live_factory  # the engine process's records what happens, for the page's process

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
        plans = [spec.plan(e, p) for e, p in spec.job_groups()]
        sweeps = [_Sweep(plan, plan.run_order(), self._live_factory()) for plan in plans]
        with self._lock:
            self._sweeps, self._planned = sweeps, len(trace.items)
        rounds = f", {spec.rounds} rounds each" if spec.rounds > 1 else ""
        self._running(f"Running {len(spec.run_order())} run(s){rounds}")
        if len(sweeps) == 1:
            errors = [self._sweep(sweeps[0], pair, trace, meta)]
        else:
            with ThreadPoolExecutor(len(sweeps), thread_name_prefix=f"pdv-{self.kind}-sweep") as pool:
                errors = list(pool.map(lambda s: self._sweep(s, pair, trace, meta), sweeps))
        # simultaneous sweeps may fail alike (the same directory): each message once
        return "; ".join(dict.fromkeys(e for e in errors if e)) or None

    def _sweep(self, sweep: _Sweep, pair: PairLike, trace: Trace, meta: dict) -> str | None:
        """Run one sweep on this thread; its error message, or None. A failure stops the launch's other sweeps."""

        def finished(result: RunResult) -> None:
            with self._lock:
                sweep.results.append(result)

        def compared(point: LoadPointComparison) -> None:
            with self._lock:
                sweep.comparisons[sweep.plan.policies.index(point.policy)] = point

        try:
            hooks = RunHooks(self._cancel, None, finished, sweep.live)
            run_sweep(pair, trace, sweep.plan, self._writer, meta, hooks, compared)
            return None
        except Exception as exc:  # shown on the page; what was measured before stays
            log.exception("%s launch %s: a sweep failed", self.kind, self.id)
            self.cancel()  # a sweep that failed ends the launch, and so every other engine
            return "".join(traceback.format_exception_only(type(exc), exc)).strip()
        finally:
            with self._lock:
                sweep.ended = True

    def sweep_states(self) -> tuple[int, list[SweepState]]:
        """The requests planned and, per sweep, what it holds so far: what the engine process publishes."""
        with self._lock:
            return self._planned, [SweepState(s.plan, s.live, tuple(s.results), dict(s.comparisons), s.ended)
                                   for s in self._sweeps]  # fmt: skip

    def view(self) -> ReplayView:
        with self._lock:
            sweeps = [(s, tuple(s.results), s.ended) for s in self._sweeps]
            points = [dict(s.comparisons) for s in self._sweeps]
            total = self._planned
        runs = []
        for run in self.spec.run_order():
            place = next(((s, r, e) for s, r, e in sweeps if any(spec == run for spec, _ in s.order)), None)
            if place is None:
                runs.append(RunSnapshot.empty(run.engine, run.policy, RunState.WAITING, total))
                continue
            sweep, results, ended = place
            indices = [i for i, (spec, _) in enumerate(sweep.order) if spec == run]
            runs.append(_where(run, indices, results, ended, sweep.live, total))
        # simultaneous sweeps hold one engine each: their rounds pair with no AR, so only one sweep compares
        comparisons = tuple(c for _, c in sorted(points[0].items())) if len(points) == 1 else ()
        ended_rounds = tuple(r for _, results, _ in sweeps for r in results)
        return ReplayView(self.id, self.spec, self.status(), tuple(runs), self.out_dir, ended_rounds, comparisons)


def _where(
    run: RunSpec, indices: list[int], results: tuple[RunResult, ...], ended: bool, live: LiveRun, total: int
) -> RunSnapshot:
    """Where a run stands: its round in progress, else its latest ended round. ``indices`` are its rounds'
    places in its sweep's order; a sweep runs them in order, and ``results`` are the ended ones."""
    if len(results) in indices and not ended:
        snapshot = live.snapshot()
        if not snapshot.state.ended:
            return snapshot
        # the previous run's data, before this round resets it: show this run's last round meanwhile
    latest = [i for i in indices if i < len(results)]
    if latest:
        return RunSnapshot.ended(results[latest[-1]], total)
    state = RunState.SKIPPED if ended else RunState.STARTING if len(results) in indices else RunState.WAITING
    return RunSnapshot.empty(run.engine, run.policy, state, total)
