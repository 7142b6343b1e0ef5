"""A sweep: every engine at every load point, on one trace, in rounds, one run after another.

Runs go load point by load point, every engine at each, so a sweep cut short
still compares all engines at the loads it reached. At each load point the
engines run ``rounds`` times, in a balanced order (a Williams design: over
a full cycle of rounds each engine runs in every place, and directly after
each other one, equally often), so a slow spell of a shared machine hits them
alike and each ratio to AR is taken within one round (``metrics.rounds``,
``workloads.drivers.rounds``). Each finished run is written at once by a
``RunWriter``, the one writer of run files (the CLI's and the dashboard's runs
alike); a crash or a cancel loses at most the run in progress.

Runs of one sweep never overlap: they would share the machine's cores and each
would measure the other's load. (The dashboard's simultaneous mode runs one
sweep per engine on purpose, all appending through writers that share a lock.)
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.config import ENGINES, EngineConfig
from metrics.export import check_appendable, write_run, write_summary
from metrics.rounds import round_orders
from workloads.drivers.arrivals import ArrivalPolicy, ClosedLoop
from workloads.drivers.engines import EngineFactory, ReplayEngine
from workloads.drivers.replay import PairLike, replay
from workloads.drivers.rounds import ComparisonFn, LoadPointComparison, LoadPointRounds, Precision
from workloads.drivers.run_result import RunResult, StopReason
from workloads.drivers.run_spec import RunHooks, RunSettings, RunSpec, SweepProgress
from workloads.drivers.trace import DatasetSpec, Trace
from workloads.endpoint.engine import EndpointEngine
from workloads.endpoint.spec import EndpointSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepPlan:
    """Every engine and endpoint at every load point, with one set of settings: a comparison's runs."""

    engines: tuple[str, ...]
    policies: tuple[ArrivalPolicy, ...]
    settings: RunSettings = field(default_factory=RunSettings)
    endpoints: tuple[EndpointSpec, ...] = ()  # servers run after the engines, at each load point
    rounds: int = 1  # each engine runs once per round, in a balanced order; with a precision, the most it runs
    precision: Precision | None = None  # rounds added until the intervals are narrow enough (``Precision``)

    def __post_init__(self) -> None:
        if not (self.engines or self.endpoints) or not self.policies:
            raise ValueError("a sweep needs at least one engine or endpoint and one load point")
        if self.rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {self.rounds}")
        if self.precision is not None and self.rounds < self.precision.min_rounds:
            raise ValueError(f"at most {self.rounds} rounds is fewer than the precision's {self.precision.min_rounds}")
        labels = [e.label for e in self.endpoints]
        if len(set(labels)) < len(labels):
            raise ValueError(f"endpoint labels must differ, got {', '.join(labels)}")
        for engine in self.engines:
            if engine not in ENGINES:
                raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")

    @property
    def names(self) -> tuple[str, ...]:
        """Every engine, then every endpoint: the first round's order."""
        return (*self.engines, *(e.label for e in self.endpoints))

    def runs(self) -> list[RunSpec]:
        """Every run (an engine at a load point, over its rounds): load point by load point, engines in order."""
        return [RunSpec(name, policy, self.settings) for policy in self.policies for name in self.names]

    def run_order(self) -> list[tuple[RunSpec, int]]:
        """Every replay with its 0-based round, in the order they run: load point by load point, round by
        round, the engines' order changing each round (ABC, BCA, CAB, CBA, ACB, BAC: ``metrics.rounds``)."""
        return [
            (RunSpec(name, policy, self.settings), round_)
            for policy in self.policies
            for round_, names in enumerate(round_orders(self.names, self.rounds))
            for name in names
        ]

    def describe(self) -> dict[str, Any]:
        return {
            **self.settings.describe(),
            "rounds": self.rounds,
            **({"precision": self.precision.describe()} if self.precision else {}),
            **({"endpoints": [e.describe() for e in self.endpoints]} if self.endpoints else {}),
        }


class RunNotWritten(Exception):
    """A finished run's files could not be written (disk full, permissions): the sweep ends there."""


class RunWriter:
    """The one writer of run files: appends finished runs to one run directory, one run at a time.

    Writers that share ``lock`` never write at the same time, so several sweeps
    can append to one directory without interleaving their rows, and whoever
    deletes run directories can hold the same lock.
    """

    def __init__(self, out_dir: str | Path, lock: threading.Lock | None = None) -> None:
        self.out_dir = Path(out_dir)
        self._lock = lock if lock is not None else threading.Lock()

    def check(self) -> None:
        """Raise ``metrics.export.RunFilesError`` if the directory cannot take these runs."""
        check_appendable(self.out_dir)

    def write(self, result: RunResult, meta: dict[str, Any]) -> None:
        """Append ``result`` to the five files, ``meta`` in its run.json entry; ``RunNotWritten`` on failure."""
        with self._lock:
            try:
                write_run(self.out_dir, result.record(meta))
            except OSError as exc:
                raise RunNotWritten(f"could not write the run files in {self.out_dir}: {exc}") from exc

    def write_summary(self, point: LoadPointComparison) -> None:
        """Append a load point's summary.csv rows; its verdict and noise warning go into its runs' run.json entries."""
        comparison = point.comparison
        notes = {
            "verdict": point.verdict_line(),
            "noise_warning": comparison.noise_warning,
            "rounds_planned": point.rounds_planned,
        }
        with self._lock:
            try:
                write_summary(self.out_dir, [row.row() for row in comparison.rows], notes)
            except OSError as exc:
                raise RunNotWritten(f"could not write the summary in {self.out_dir}: {exc}") from exc


def setting_limits(
    dataset: DatasetSpec, policies: tuple[ArrivalPolicy, ...], num_requests: int, max_new_tokens: int
) -> list[str]:
    """Where one setting of a sweep limits another, in words: what will run is less than what was asked."""
    notes = []
    longest = int(dataset.output_len.mean * (1 + dataset.output_len.range_ratio))
    if dataset.synthetic and longest > max_new_tokens:
        lengths = f"{dataset.output_len.mean}" if longest == dataset.output_len.mean else f"up to {longest}"
        notes.append(f"output length {lengths} is capped by max new tokens ({max_new_tokens})")
    crowded = [p.concurrency for p in policies if isinstance(p, ClosedLoop) and p.concurrency > num_requests]
    if crowded:
        levels = ", ".join(str(c) for c in crowded)
        notes.append(f"concurrency {levels} is above the {num_requests} requests: at most {num_requests} run at once")
    return notes


def run_sweep(
    pair: PairLike,
    trace: Trace,
    plan: SweepPlan,
    out: RunWriter | str | Path | None = None,
    meta: dict[str, Any] | None = None,
    hooks: RunHooks | None = None,
    on_comparison: ComparisonFn | None = None,
) -> list[RunResult]:
    """Run the plan; results (one per engine and round) in run order. Stops after the current run once
    ``hooks.cancel`` is set.

    At each load point the engines run ``plan.rounds`` rounds in a balanced order
    (``workloads.drivers.rounds``); after every run, and once more when the load
    point ends, ``on_comparison`` receives its comparison so far (× AR intervals,
    verdict, noise). Each run's round is written through ``out`` (a ``RunWriter``,
    or a directory to write to) as it ends, and a load point's summary rows when
    its rounds end; ``None`` writes nothing. ``meta`` (models,
    environment, invocation) goes into every run's run.json entry, together
    with the plan and the trace description. Every run reports through
    ``hooks`` (progress with its index in the sweep, each result as it ends,
    the one live view).
    """
    hooks = hooks if hooks is not None else RunHooks()
    writer = out if isinstance(out, RunWriter) or out is None else RunWriter(out)
    if writer is not None:
        writer.check()  # refuse a bad directory before spending time on runs
    results: list[RunResult] = []
    run_meta = {**plan.describe(), "trace": trace.describe(), **(meta or {})}
    rounds = RoundRunner(pair, plan, hooks, len(plan.run_order()))
    for policy in plan.policies:
        point = LoadPointRounds(plan.names, policy, plan.rounds, plan.settings.slo)
        stop, ended_by, started = False, "", time.monotonic()
        for round_, names in enumerate(round_orders(plan.names, plan.rounds)):
            for name in names:
                result = rounds.run(trace, point, name, round_)
                if result is None:
                    stop = True
                    break
                rounds.record(result, point, writer, run_meta, results, on_comparison)
                if rounds.must_stop(result):
                    stop = True
                    break
            if stop:
                break
            if plan.precision is not None and round_ + 1 < plan.rounds:
                ended_by = enough_rounds(plan.precision, point, round_ + 1, time.monotonic() - started)
                if ended_by:
                    break
        finish_point(point, writer, on_comparison, ended_by)
        if stop:
            break
    return results


class RoundRunner:
    """Runs one engine's replay in one round of a load point, numbering runs across a whole comparison.

    ``run_sweep`` and the MT-Bench driver (whose turn 2 follows each engine's
    own answers, so it cannot replay one trace for all) both go through it, so
    progress, cancelling, noise readings and writing work the same in each.
    """

    def __init__(self, pair: PairLike, plan: SweepPlan, hooks: RunHooks, runs: int) -> None:
        self.pair = pair
        self.plan = plan
        self.hooks = hooks
        self.runs = runs  # every replay the comparison plans: progress counts against it
        self.index = 0
        self._factory = with_endpoints(hooks.engine_factory, plan.endpoints)

    def run(self, trace: Trace, point: LoadPointRounds, name: str, round_: int) -> RunResult | None:
        """``name``'s replay of ``trace`` in round ``round_`` (0-based) of ``point``; ``None`` when cancelled
        before it sent anything (there is nothing to record). Mutates: ``point`` (the run and its noise)."""
        hooks = self.hooks
        if hooks.cancel.is_set():
            return None

        def report(p: SweepProgress, index: int = self.index) -> None:
            if hooks.progress:
                hooks.progress(replace(p, run_index=index, runs=self.runs))

        run = RunSpec(name, point.policy, self.plan.settings, point.run_ids[name])
        point.starting()
        result = replay(
            self.pair, trace, run, replace(hooks, progress=report, on_result=None, engine_factory=self._factory)
        )
        self.index += 1
        if result.stop_reason == StopReason.CANCELLED and not result.requests:
            return None
        return point.ended(result, round_)

    def record(
        self,
        result: RunResult,
        point: LoadPointRounds,
        writer: RunWriter | None,
        meta: dict[str, Any],
        results: list[RunResult],
        on_comparison: ComparisonFn | None,
    ) -> None:
        """Write ``result`` with ``meta``, append it to ``results`` and report it and the comparison so far."""
        if writer is not None:
            writer.write(result, meta)
        results.append(result)
        if self.hooks.on_result:
            self.hooks.on_result(result)
        if on_comparison:
            on_comparison(point.comparison(final=False))

    @staticmethod
    def must_stop(result: RunResult) -> bool:
        """Whether the comparison ends after ``result``: its lane threads may still hold the device, and the
        next run's numbers would not be its own."""
        if result.stop_reason != StopReason.ENGINE_DID_NOT_STOP:
            return False
        log.error("sweep stopped after %s: %s", result.key.run_id, result.engine_error)
        return True


def enough_rounds(precision: Precision, point: LoadPointRounds, done: int, elapsed_s: float) -> str:
    """Why ``point`` needs no further round after ``done`` rounds in ``elapsed_s``, in words; "" to go on."""
    if done < precision.min_rounds:
        return ""
    if precision.reached(point.comparison(final=False)):
        return f"every interval within ±{precision.within:.0%} after {done} rounds"
    if precision.budget_s is not None and elapsed_s * (done + 1) / done > precision.budget_s:
        return (f"another round would pass the {precision.budget_s:.0f} s budget; not every interval is within "
                f"±{precision.within:.0%}")  # fmt: skip
    return ""


def finish_point(
    point: LoadPointRounds, writer: RunWriter | None, on_comparison: ComparisonFn | None, ended_by: str = ""
) -> None:
    """A load point's rounds have ended (or stopped): write its summary rows and report its final comparison."""
    if not point.any_run:
        return
    final = point.comparison(final=True, ended_by=ended_by)
    if writer is not None:
        writer.write_summary(final)
    if on_comparison:
        on_comparison(final)


def with_endpoints(factory: EngineFactory, endpoints: tuple[EndpointSpec, ...]) -> EngineFactory:
    """``factory`` for engine names, an ``EndpointEngine`` for an endpoint's label."""
    by_label = {e.label: e for e in endpoints}

    def make(name: str, pair: Any, config: EngineConfig) -> ReplayEngine:
        return EndpointEngine(by_label[name], pair) if name in by_label else factory(name, pair, config)

    return make
