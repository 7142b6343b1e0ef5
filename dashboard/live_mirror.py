"""A replay's live view carried from the engine process to the page's process.

In the engine process the sweep's replay drives a ``RecordingLiveRun``: a
``LiveRun`` that also notes each call as a ``LiveEvent``. The publisher drains
the events (and the time series rows sampled since the last drain) a few
times a second and sends them; in the page's process a ``MirroredLiveRun``
applies them, so its ``snapshot()`` – the one thing the pages read – is the
engine process's, computed in the page's process from the same requests, key,
``t0`` and SLO. Times are ``time.perf_counter()`` seconds, which on Linux is
the system-wide monotonic clock: the same in both processes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.request import Request
from metrics.run_key import RunKey
from metrics.summary import SLO
from metrics.timeseries import TimeseriesRow, TimeseriesSampler
from workloads.drivers.arrivals import ArrivalPolicy
from workloads.drivers.live import LiveRun
from workloads.drivers.run_result import RunResult
from workloads.drivers.run_state import RunState


@dataclass(frozen=True)
class LiveEvent:
    """One call on the engine process's ``LiveRun``: ``kind`` names the method, ``args`` its arguments."""

    kind: str  # "begin" | "state" | "clock" | "rows" | "finished" | "end"
    args: tuple[Any, ...]


class RecordingLiveRun(LiveRun):
    """A ``LiveRun`` that records every change as a ``LiveEvent``, for ``drain`` to hand on."""

    def __init__(self) -> None:
        super().__init__()
        self._events: list[LiveEvent] = []
        self._events_lock = threading.Lock()
        self._recorded_sampler: TimeseriesSampler | None = None
        self._rows_sent = 0

    def _note(self, kind: str, *args: Any) -> None:
        with self._events_lock:
            self._events.append(LiveEvent(kind, args))

    def begin(self, engine: str, policy: ArrivalPolicy, total: int) -> None:
        super().begin(engine, policy, total)
        with self._events_lock:
            self._recorded_sampler, self._rows_sent = None, 0
            self._events.append(LiveEvent("begin", (engine, policy, total)))

    def set_state(self, state: RunState) -> None:
        super().set_state(state)
        self._note("state", state)

    def start_clock(self, key: RunKey, t0: float, slo: SLO | None, sampler: TimeseriesSampler) -> None:
        super().start_clock(key, t0, slo, sampler)
        with self._events_lock:
            self._recorded_sampler, self._rows_sent = sampler, 0
            self._events.append(LiveEvent("clock", (key, t0, slo)))

    def add_finished(self, requests: Sequence[Request]) -> None:
        super().add_finished(requests)
        self._note("finished", tuple(requests))

    def end(self, result: RunResult) -> None:
        self._flush_rows()  # the rows sampled before the end come first
        super().end(result)
        self._note("end", result)

    def _flush_rows(self) -> None:
        with self._events_lock:
            sampler = self._recorded_sampler
            if sampler is None:
                return
            rows = sampler.rows
            if len(rows) > self._rows_sent:
                self._events.append(LiveEvent("rows", (rows[self._rows_sent :],)))
                self._rows_sent = len(rows)

    def drain(self) -> list[LiveEvent]:
        """Every event since the last drain, in order, the rows sampled meanwhile included."""
        self._flush_rows()
        with self._events_lock:
            events, self._events = self._events, []
        return events


class _Rows:
    """What ``LiveRun.snapshot`` reads of a sampler (``rows``), filled from the engine process's rows."""

    def __init__(self) -> None:
        self._rows: tuple[TimeseriesRow, ...] = ()

    def extend(self, rows: Sequence[TimeseriesRow]) -> None:
        self._rows = self._rows + tuple(rows)

    @property
    def rows(self) -> tuple[TimeseriesRow, ...]:
        return self._rows


class MirroredLiveRun(LiveRun):
    """The page process's copy of the engine process's ``LiveRun``; only ``apply`` changes it."""

    def __init__(self) -> None:
        super().__init__()
        self._rows = _Rows()

    def apply(self, events: Sequence[LiveEvent]) -> None:
        for event in events:
            if event.kind == "begin":
                self.begin(*event.args)
                self._rows = _Rows()
            elif event.kind == "state":
                self.set_state(*event.args)
            elif event.kind == "clock":
                key, t0, slo = event.args
                self._rows = _Rows()
                self.start_clock(key, t0, slo, self._rows)  # type: ignore[arg-type]  # has the rows it reads
            elif event.kind == "rows":
                self._rows.extend(event.args[0])
            elif event.kind == "finished":
                self.add_finished(event.args[0])
            elif event.kind == "end":
                self.end(event.args[0])
            else:
                raise ValueError(f"unknown live event {event.kind!r}")
