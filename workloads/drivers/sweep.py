"""A sweep: every engine at every load point, on one trace, one run after another.

Runs go load point by load point, every engine at each, so a sweep cut short
still compares all engines at the loads it reached. Each finished run is
written at once by a ``RunWriter``, the one writer of run files (the CLI's and
the dashboard's runs alike); a crash or a cancel loses at most the run in
progress.

Runs of one sweep never overlap: they would share the machine's cores and each
would measure the other's load. (The dashboard's simultaneous mode runs one
sweep per engine on purpose, all appending through writers that share a lock.)
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.config import ENGINES, EngineConfig, SamplingParams
from metrics.export import check_appendable, write_run
from metrics.summary import SLO
from metrics.timeseries import DEFAULT_HZ
from workloads.drivers.arrivals import ArrivalPolicy, ClosedLoop
from workloads.drivers.live import LiveRun
from workloads.drivers.replay import EngineFactory, PairLike, default_engine_factory, replay
from workloads.drivers.run_result import RunResult, StopReason, load_label
from workloads.drivers.trace import DatasetSpec, Trace
from workloads.endpoint.engine import EndpointEngine
from workloads.endpoint.spec import EndpointSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepPlan:
    engines: tuple[str, ...]
    policies: tuple[ArrivalPolicy, ...]
    config: EngineConfig = field(default_factory=EngineConfig)
    params: SamplingParams = field(default_factory=SamplingParams)
    slo: SLO | None = None
    sample_hz: float = DEFAULT_HZ
    warmup: int = 1
    timeout_s: float | None = None  # per run
    endpoints: tuple[EndpointSpec, ...] = ()  # servers run after the engines, at each load point

    def __post_init__(self) -> None:
        if not (self.engines or self.endpoints) or not self.policies:
            raise ValueError("a sweep needs at least one engine or endpoint and one load point")
        labels = [e.label for e in self.endpoints]
        if len(set(labels)) < len(labels):
            raise ValueError(f"endpoint labels must differ, got {', '.join(labels)}")
        for engine in self.engines:
            if engine not in ENGINES:
                raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
        if not 2 <= self.sample_hz < math.inf:  # also refuses nan
            raise ValueError(f"sample rate must be a finite number >= 2 Hz, got {self.sample_hz:g}")
        if self.warmup < 0:
            raise ValueError(f"warm-up requests must be >= 0, got {self.warmup}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"run timeout must be > 0 s, got {self.timeout_s:g}")

    def runs(self) -> list[tuple[str, ArrivalPolicy]]:
        """(engine name or endpoint label, load) in run order."""
        names = (*self.engines, *(e.label for e in self.endpoints))
        return [(name, policy) for policy in self.policies for name in names]

    def describe(self) -> dict[str, Any]:
        return {
            "engine_config": asdict(self.config),
            "sampling": asdict(self.params),
            "slo": asdict(self.slo) if self.slo else None,
            "sample_hz": self.sample_hz,
            "warmup_requests": self.warmup,
            "timeout_s": self.timeout_s,
            **({"endpoints": [e.describe() for e in self.endpoints]} if self.endpoints else {}),
        }


@dataclass(frozen=True)
class SweepProgress:
    run_index: int  # 0-based index of the run in progress
    runs: int
    engine: str
    load: str  # e.g. c4, r2-c8
    finished: int  # requests of this run finished
    total: int  # requests per run

    @property
    def overall(self) -> tuple[int, int]:
        """(requests finished, requests planned) over the whole sweep."""
        return self.run_index * self.total + self.finished, self.runs * self.total


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
    *,
    meta: dict[str, Any] | None = None,
    cancel: threading.Event | None = None,
    progress: Callable[[SweepProgress], None] | None = None,
    on_result: Callable[[RunResult], None] | None = None,
    live: LiveRun | None = None,
    engine_factory: EngineFactory = default_engine_factory,
) -> list[RunResult]:
    """Run the plan; results in run order. Stops after the current run once ``cancel`` is set.

    Each run is written through ``out`` (a ``RunWriter``, or a directory to
    write to) as it ends; ``None`` writes nothing. ``meta`` (models,
    environment, invocation) goes into every run's run.json entry, together
    with the plan and the trace description.
    """
    cancel = cancel if cancel is not None else threading.Event()
    writer = out if isinstance(out, RunWriter) or out is None else RunWriter(out)
    if writer is not None:
        writer.check()  # refuse a bad directory before spending time on runs
    runs = plan.runs()
    results: list[RunResult] = []
    run_meta = {**plan.describe(), "trace": trace.describe(), **(meta or {})}
    factory = with_endpoints(engine_factory, plan.endpoints)
    for index, (engine, policy) in enumerate(runs):
        if cancel.is_set():
            break
        label = load_label(policy)

        def report(finished: int, total: int, index: int = index, engine: str = engine, label: str = label) -> None:
            if progress:
                progress(SweepProgress(index, len(runs), engine, label, finished, total))

        result = replay(
            pair,
            engine,
            plan.config,
            trace,
            policy,
            plan.params,
            slo=plan.slo,
            cancel=cancel,
            progress=report,
            live=live,
            sample_hz=plan.sample_hz,
            warmup=plan.warmup,
            timeout_s=plan.timeout_s,
            engine_factory=factory,
        )
        if result.stop_reason == StopReason.CANCELLED and not result.requests:
            break  # stopped before its first request: there is nothing to record
        if writer is not None:
            writer.write(result, run_meta)
        results.append(result)
        if on_result:
            on_result(result)
        if result.stop_reason == StopReason.ENGINE_DID_NOT_STOP:
            # its lane threads may still hold the device: the next run's numbers would not be its own
            log.error("sweep stopped after %s: %s", result.key.run_id, result.engine_error)
            break
    return results


def with_endpoints(factory: EngineFactory, endpoints: tuple[EndpointSpec, ...]) -> EngineFactory:
    """``factory`` for engine names, an ``EndpointEngine`` for an endpoint's label."""
    by_label = {e.label: e for e in endpoints}

    def make(name: str, pair: Any, config: EngineConfig) -> Any:
        return EndpointEngine(by_label[name], pair) if name in by_label else factory(name, pair, config)

    return make
