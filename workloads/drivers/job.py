"""A sweep running in a background thread, for callers that must not block (the dashboard).

``ReplayJob.start`` returns at once; ``snapshot()`` is cheap and thread-safe
and tells the caller what to draw: the sweep's progress, the run in progress
(``workloads.drivers.live.LiveSnapshot``: its time series, finished requests, metrics
and summary so far), and the results finished so far. ``cancel()`` stops
the run in progress (its unfinished requests end cancelled, and it is still
recorded) and skips the rest.
"""

from __future__ import annotations

import enum
import logging
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workloads.drivers.live import LiveRun, LiveSnapshot
from workloads.drivers.replay import EngineFactory, PairLike, default_engine_factory
from workloads.drivers.run_result import RunResult
from workloads.drivers.sweep import RunWriter, SweepPlan, SweepProgress, run_sweep
from workloads.drivers.trace import Trace

log = logging.getLogger(__name__)


class JobState(enum.StrEnum):
    RUNNING = "running"
    DONE = "done"  # every run of the plan ended
    CANCELLED = "cancelled"  # ``cancel()`` ended it: the run in progress is recorded, the rest skipped
    FAILED = "failed"  # an exception ended it (``JobSnapshot.error``)


@dataclass(frozen=True)
class JobSnapshot:
    state: JobState
    progress: SweepProgress | None  # None before the first request finished
    live: LiveSnapshot  # the run in progress (or the last one)
    results: tuple[RunResult, ...]  # finished runs, in order
    error: str | None  # why the job failed


class ReplayJob:
    def __init__(
        self,
        pair: PairLike,
        trace: Trace,
        plan: SweepPlan,
        out: RunWriter | str | Path | None = None,
        meta: dict[str, Any] | None = None,
        engine_factory: EngineFactory = default_engine_factory,
    ) -> None:
        """``out`` writes each run as it ends (see ``run_sweep``); ``None`` writes nothing."""
        self._args = (pair, trace, plan, out, meta)
        self._engine_factory = engine_factory
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._live = LiveRun()
        self._progress: SweepProgress | None = None
        self._results: list[RunResult] = []
        self._state = JobState.RUNNING
        self._error: str | None = None
        self._thread = threading.Thread(target=self._run, name="replay-job", daemon=True)

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> ReplayJob:
        """Create a job (same arguments as the constructor) and start its thread."""
        job = cls(*args, **kwargs)
        job._thread.start()
        return job

    def _set_progress(self, progress: SweepProgress) -> None:
        with self._lock:
            self._progress = progress

    def _add_result(self, result: RunResult) -> None:
        with self._lock:
            self._results.append(result)

    def _run(self) -> None:
        pair, trace, plan, out, meta = self._args
        try:
            run_sweep(
                pair,
                trace,
                plan,
                out,
                meta=meta,
                cancel=self._cancel,
                progress=self._set_progress,
                on_result=self._add_result,
                live=self._live,
                engine_factory=self._engine_factory,
            )
            state, error = (JobState.CANCELLED if self._cancel.is_set() else JobState.DONE), None
        except Exception as exc:  # shown to the user by whoever polls the job
            log.exception("replay job failed")
            state, error = JobState.FAILED, "".join(traceback.format_exception_only(type(exc), exc)).strip()
        with self._lock:
            self._state, self._error = state, error

    def cancel(self) -> None:
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the job has ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def snapshot(self) -> JobSnapshot:
        live = self._live.snapshot()
        with self._lock:
            return JobSnapshot(self._state, self._progress, live, tuple(self._results), self._error)
