"""An engine factory that keeps the requests each run submits, so a run in progress can be charted.

``workloads.replay.LiveSnapshot`` carries a run's time series but not its
requests; TTFT/TPOT histograms and percentile tiles need the requests that
have finished so far. ``RunRecorder.factory`` is passed to ``ReplayJob`` as its
``engine_factory``: it builds the real engine and wraps it so every submitted
``Request`` is remembered. A ``Request`` is written only by engine threads and
is frozen once ``done`` is set, so readers look only at finished ones.
"""

from __future__ import annotations

import threading
from typing import Any

from engine.config import EngineConfig
from engine.request import Request
from workloads.replay import EngineLike, default_engine_factory


class RecordingEngine:
    """Delegates to an engine; remembers every request submitted (warm-up ones included)."""

    def __init__(self, inner: EngineLike) -> None:
        self._inner = inner
        self._requests: list[Request] = []
        self._lock = threading.Lock()

    @property
    def fatal_error(self) -> str | None:
        return getattr(self._inner, "fatal_error", None)

    def start(self) -> Any:
        return self._inner.start()

    def submit(self, request: Request) -> Request:
        with self._lock:
            self._requests.append(request)
        return self._inner.submit(request)

    def stats(self) -> Any:
        return self._inner.stats()

    def stop(self, timeout: float = 5.0) -> None:
        self._inner.stop(timeout)

    def finished(self, request_ids: frozenset[str]) -> list[Request]:
        """Finished requests whose id is in ``request_ids`` (the trace's: warm-up requests are not)."""
        with self._lock:
            requests = list(self._requests)
        return [r for r in requests if r.done.is_set() and r.request_id in request_ids]


class RunRecorder:
    """One ``RecordingEngine`` per run, in the order the job starts its runs."""

    def __init__(self) -> None:
        self._engines: list[RecordingEngine] = []
        self._lock = threading.Lock()

    def factory(self, name: str, pair: Any, config: EngineConfig) -> RecordingEngine:
        engine = RecordingEngine(default_engine_factory(name, pair, config))
        with self._lock:
            self._engines.append(engine)
        return engine

    def engine(self, run_index: int) -> RecordingEngine | None:
        with self._lock:
            return self._engines[run_index] if run_index < len(self._engines) else None
