"""The launches the page's process holds while the engine process runs them (``dashboard.engine_host``).

``RemoteReplayLaunch`` (Live run, Sweep) and ``RemoteInspectLaunch`` (Inspect)
are a ``ReplayLaunch`` and an ``InspectLaunch`` whose worker thread, instead of
running engines, sends the spec to the engine process and applies every frame
it publishes to the same fields their ``view()`` reads (``_follow``): the pages
cannot tell them apart, except that the engines' figures are their own.
Meanwhile ``_follow`` kills the engine process when a Stop has not taken effect
within ``STOP_GRACE_S`` and stops a launch no browser tab has shown for
``ABANDON_S``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dashboard import engine_host
from dashboard.engine_host import EngineHost
from dashboard.inspect_launch import InspectLaunch, InspectSpec
from dashboard.launch import LaunchStatus
from dashboard.live_mirror import MirroredLiveRun
from dashboard.replay_launch import ReplayLaunch, _Sweep
from dashboard.replay_spec import ReplaySpec
from workloads.drivers.run_state import RunState

log = logging.getLogger(__name__)


class RemoteReplayLaunch(ReplayLaunch):
    """A comparison run by the engine process; the same ``view()`` as a ``ReplayLaunch``."""

    def __init__(
        self,
        launch_id: str,
        spec: ReplaySpec,
        out_dir: Path,
        host: EngineHost,
        watched: Callable[[], bool | None] = lambda: None,
    ) -> None:
        super().__init__(launch_id, spec, out_dir, _no_pair, threading.Lock(), MirroredLiveRun)
        _remote(self, host, watched)

    def cancel(self) -> None:
        _cancel(self, super().cancel)

    def _work(self) -> str | None:
        return _follow(self, self._host.submit(self.id, self.spec, self.out_dir))

    def _apply(self, frame: tuple[Any, ...]) -> None:
        kind = frame[0]
        with self._lock:
            if kind == "status":
                _status(self, frame[1])
            elif kind == "sweeps":
                plans, planned = frame[1], frame[2]
                self._sweeps = [_Sweep(plan, plan.run_order(), MirroredLiveRun()) for plan in plans]
                self._planned = planned
            elif kind == "live":
                live = self._sweeps[frame[1]].live
                assert isinstance(live, MirroredLiveRun)
                live.apply(frame[2])
            elif kind == "result":
                self._sweeps[frame[1]].results.append(frame[2])
            elif kind == "comparison":
                self._sweeps[frame[1]].comparisons[frame[2]] = frame[3]
            elif kind == "ended":
                self._sweeps[frame[1]].ended = True

    def _lost(self, exit_text: str, stopping: bool) -> str:
        with self._lock:
            for sweep in self._sweeps:
                sweep.ended = True
        if self._stop_reason:
            return self._stop_reason
        what = "while stopping" if stopping else "before the launch ended"
        return (f"the engine process {exit_text} {what}; the rounds that finished are saved in "
                f"{self.out_dir.name} and shown here")  # fmt: skip

    @property
    def stop_reason(self) -> str | None:
        """Why the page's process stopped the launch itself (a closed tab), if it did."""
        return self._stop_reason


class RemoteInspectLaunch(InspectLaunch):
    """One request through one engine, run by the engine process; the same ``view()`` as an ``InspectLaunch``."""

    def __init__(self, launch_id: str, spec: InspectSpec, host: EngineHost,
                 watched: Callable[[], bool | None] = lambda: None) -> None:  # fmt: skip
        super().__init__(launch_id, spec, _no_pair)
        _remote(self, host, watched)

    def cancel(self) -> None:
        _cancel(self, super().cancel)

    def _work(self) -> str | None:
        return _follow(self, self._host.submit(self.id, self.spec, None))

    def _apply(self, frame: tuple[Any, ...]) -> None:
        with self._lock:
            if frame[0] == "status":
                _status(self, frame[1])
            elif frame[0] == "inspected":
                self._request, self._pieces = frame[1], frame[2]

    def _lost(self, exit_text: str, stopping: bool) -> str:
        if self._stop_reason:
            return self._stop_reason
        return f"the engine process {exit_text} {'while stopping' if stopping else 'before the request ended'}"


_Remote = RemoteReplayLaunch | RemoteInspectLaunch


def _remote(launch: _Remote, host: EngineHost, watched: Callable[[], bool | None]) -> None:
    """The fields every remote launch has beside its local kind's."""
    launch._host = host
    launch._watched = watched  # True/False: some/no browser session shows the page; None: not known (no server)
    launch._stop_reason = None  # why the page's process stopped it (a closed tab, a Stop not taken), if it did
    launch._final = None  # the engine process's last status of the launch


def _cancel(launch: _Remote, cancel_here: Callable[[], None]) -> None:
    """Cancel ``launch`` here and, the first time, in the engine process."""
    first = not launch._cancel.is_set()
    cancel_here()
    if first:
        launch._host.cancel(launch.id)


def _status(launch: _Remote, status: LaunchStatus) -> None:
    """The engine process's status of ``launch`` (under its lock): shown while underway, its end kept apart."""
    if status.state.underway:
        launch._status = status
    else:  # the final state is ``Launch._main``'s to set, from what ``_work`` returns
        launch._final = status


def _follow(launch: _Remote, inbox: queue.Queue) -> str | None:
    """Apply the engine process's frames to ``launch`` until it ends; the launch's error, or None.

    Meanwhile: kill the engine process if a Stop has not taken effect after ``STOP_GRACE_S``, and stop the
    launch if no browser session has shown the dashboard for ``ABANDON_S``.
    """
    stop_asked: float | None = None
    unwatched_since: float | None = None
    grace, abandon = engine_host.STOP_GRACE_S, engine_host.ABANDON_S  # read at the start: tests change them
    while True:
        try:
            frame = inbox.get(timeout=0.5)
        except queue.Empty:
            frame = None
        now = time.monotonic()
        if frame is not None:
            if frame[0] == "done":
                return _end_error(launch)
            if frame[0] == "lost":
                return launch._lost(frame[1], stop_asked is not None)
            launch._apply(frame)
            continue
        if launch._cancel.is_set():
            stop_asked = stop_asked if stop_asked is not None else now
            if now - stop_asked > grace:
                log.warning("launch %s: the engine process did not stop in %.0f s; killing it", launch.id, grace)
                launch._stop_reason = f"the engine process did not stop within {grace:.0f} s and was killed"
                launch._host.kill()
        watched = launch._watched()
        unwatched_since = None if watched is not False else unwatched_since or now
        if unwatched_since is not None and now - unwatched_since > abandon and not launch._cancel.is_set():
            launch._stop_reason = (f"no browser tab showed this launch for {abandon:.0f} s (it was closed), "
                                   "so it was stopped")  # fmt: skip
            launch.cancel()


def _end_error(launch: _Remote) -> str | None:
    with launch._lock:
        final = launch._final
    if final is not None and final.state == RunState.CANCELLED:
        launch._cancel.set()  # stopped in the engine process (a failing sweep): the launch ends cancelled
    if launch._stop_reason:
        launch._cancel.set()
        return None
    return final.error if final is not None else None


def _no_pair(preset: str, device: str, progress: Any) -> Any:
    raise AssertionError("a remote launch loads its model pair in the engine process")
