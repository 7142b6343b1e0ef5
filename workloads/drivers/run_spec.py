"""What a run is, and how its caller watches it: the typed values ``replay`` and ``run_sweep`` take.

* ``RunSettings`` – what every run of a comparison shares: engine config, sampling, SLO, sampling rate,
  warm-up, timeout. Identical settings are what make two runs comparable.
* ``RunSpec``     – one run: an engine (or an endpoint's label) under one load, with the settings.
  A comparison is engines x load points (x rounds) of ``RunSpec``s over one trace
  (``workloads.drivers.sweep.SweepPlan.runs``).
* ``RunHooks``    – how the caller steers and watches runs in progress (cancel, progress, finished
  results, the live view, the device probe, the engine factory); none of it changes what is measured.
* ``SweepProgress`` – where a sweep stands, as ``RunHooks.progress`` receives it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.config import EngineConfig, SamplingParams
from metrics.device_types import DeviceProbe
from metrics.summary import SLO
from metrics.timeseries import DEFAULT_HZ
from workloads.drivers.arrivals import ArrivalPolicy
from workloads.drivers.engines import EngineFactory, default_engine_factory
from workloads.drivers.live import LiveRun
from workloads.drivers.run_result import RunResult


@dataclass(frozen=True)
class RunSettings:
    config: EngineConfig = field(default_factory=EngineConfig)
    params: SamplingParams = field(default_factory=SamplingParams)
    slo: SLO | None = None
    sample_hz: float = DEFAULT_HZ  # time series rows per second
    warmup: int = 1  # short requests before the clock starts: lazy initialisation stays out of the run
    timeout_s: float | None = None  # of measured run, per run; None: until the trace is done

    def __post_init__(self) -> None:
        if not 2 <= self.sample_hz < math.inf:  # also refuses nan
            raise ValueError(f"sample rate must be a finite number >= 2 Hz, got {self.sample_hz:g}")
        if self.warmup < 0:
            raise ValueError(f"warm-up requests must be >= 0, got {self.warmup}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"run timeout must be > 0 s, got {self.timeout_s:g}")

    def describe(self) -> dict[str, Any]:
        """For run.json."""
        return {
            "engine_config": asdict(self.config),
            "sampling": asdict(self.params),
            "slo": asdict(self.slo) if self.slo else None,
            "sample_hz": self.sample_hz,
            "warmup_requests": self.warmup,
            "timeout_s": self.timeout_s,
        }


@dataclass(frozen=True)
class RunSpec:
    engine: str  # an engine name, or an endpoint's label
    policy: ArrivalPolicy
    settings: RunSettings = field(default_factory=RunSettings)
    run_id: str | None = None  # None: a new id from the engine, the load and the time


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


@dataclass(frozen=True)
class RunHooks:
    """Set ``cancel`` from any thread to stop: the run in progress ends cancelled and is kept, the rest skipped.

    ``progress`` and ``on_result`` are called from the driving thread; ``live``
    is mutated by it and read by anyone (``LiveRun.snapshot``).
    """

    cancel: threading.Event = field(default_factory=threading.Event)
    progress: Callable[[SweepProgress], None] | None = None
    on_result: Callable[[RunResult], None] | None = None  # each run as it ends
    live: LiveRun = field(default_factory=LiveRun)
    probe: DeviceProbe | None = None  # None: each run opens (and closes) the probe for its pair's device
    engine_factory: EngineFactory = default_engine_factory
