"""The one owner of everything the dashboard runs on the device.

A Streamlit script reruns on every click, in every browser tab, so nothing that
must outlive a rerun can live in a page: the process keeps a single
``RunManager`` per runs directory (``widgets.manager.run_manager``). It owns:

* the model pairs loaded so far, keyed by (preset, device), each loaded once;
* the launch using the device (a comparison, a sweep, or an inspection) – at
  most one at a time: a Start while one is active, from any tab, gets the
  active launch back instead of a second one;
* the last launch of each kind, so a page still shows a finished launch after
  a rerun or a page switch;
* the write lock: runs are appended (``workloads.drivers.sweep.RunWriter``) and run
  directories deleted one at a time.

Every launch (Live run, Sweep, Inspect) runs in the engine process
(``dashboard.engine_host``): the manager owns it, starts it on the first Start
and ends it in ``close()``. Launches
never call Streamlit; pages read their immutable views. ``stop()`` is idempotent.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from dashboard.engine_host import EngineHost
from dashboard.inspect_launch import InspectSpec
from dashboard.launch import Launch
from dashboard.remote_launch import RemoteInspectLaunch, RemoteReplayLaunch
from dashboard.replay_launch import ReplayLaunch
from dashboard.replay_spec import ReplaySpec
from dashboard.tables import SeriesFrames
from engine.models.pair import ModelPair, load_model_pair
from engine.progress import ProgressFn
from metrics.schema import RUN_JSON


class RunManager:
    def __init__(self, runs_root: Path, host: str | None = None) -> None:
        self.runs_root = runs_root
        self.engines = EngineHost(self.pair, host)  # the engine process (``PDV_ENGINE_HOST`` when ``host`` is None)
        self._watchers: dict[str, Callable[[], bool]] = {}  # browser session id -> "is it still connected?"
        self._lock = threading.Lock()  # guards the launch fields and the pair locks
        self._write_lock = threading.Lock()  # one writer at a time in any run directory
        self._pairs: dict[tuple[str, str], ModelPair] = {}
        self._pair_locks: dict[tuple[str, str], threading.Lock] = {}
        self._active: Launch | None = None
        self._latest: dict[str, Launch] = {}
        self.series_frames = SeriesFrames()  # time series as DataFrames, built once per new row

    # ----------------------------------------------------------------- models
    def pair(self, preset: str, device: str, progress: ProgressFn) -> ModelPair:
        """The loaded pair for (preset, device), loading it once; called from launch threads."""
        key = (preset, device)
        with self._lock:
            lock = self._pair_locks.setdefault(key, threading.Lock())
        if not lock.acquire(blocking=False):
            progress(f"Waiting for another load of the {preset} pair", 0.0)
            lock.acquire()
        try:
            with self._lock:
                pair = self._pairs.get(key)
            if pair is None:
                pair = load_model_pair(preset, device=device, progress=progress)
                with self._lock:
                    self._pairs[key] = pair
            progress(f"{preset} pair loaded on {pair.device}", 1.0)
            return pair
        finally:
            lock.release()

    # --------------------------------------------------------------- launches
    def start(self, spec: ReplaySpec | InspectSpec) -> tuple[Launch, bool]:
        """Start a launch for ``spec``; ``(launch, True)``, or ``(the active launch, False)`` if one runs."""
        with self._lock:
            if self._active is not None and self._active.active:
                return self._active, False
            launch_id = self._new_id(spec.kind)
            if isinstance(spec, InspectSpec):
                launch: Launch = RemoteInspectLaunch(launch_id, spec, self.engines, self.watched)
            else:
                out = self.inside_root(self.runs_root / launch_id)
                launch = RemoteReplayLaunch(launch_id, spec, out, self.engines, self.watched)
            self._active = launch
            self._latest[spec.kind] = launch
            launch.start()
            return launch, True

    def stop(self) -> bool:
        """Cancel the active launch; False when nothing was running."""
        with self._lock:
            launch = self._active
        if launch is None or not launch.active:
            return False
        launch.cancel()
        return True

    def watch(self, session_id: str, connected: Callable[[], bool]) -> None:
        """A browser session shows the dashboard; ``connected()`` says whether it still does."""
        with self._lock:
            self._watchers[session_id] = connected

    def watched(self) -> bool | None:
        """Whether any browser session still shows the dashboard; None when no session ever said (no server)."""
        with self._lock:
            watchers = list(self._watchers.items())
        if not watchers:
            return None
        gone = [sid for sid, connected in watchers if not connected()]
        with self._lock:
            for sid in gone[:-1] if len(gone) == len(watchers) else gone:  # keep one, to remember "nobody"
                self._watchers.pop(sid, None)
        return len(gone) < len(watchers)

    def close(self) -> None:
        """Stop the active launch and end the engine process (the server is shutting down)."""
        self.stop()
        self.engines.close()

    def active(self) -> Launch | None:
        with self._lock:
            launch = self._active
        return launch if launch is not None and launch.active else None

    def latest(self, kind: str) -> Launch | None:
        with self._lock:
            return self._latest.get(kind)

    def _new_id(self, kind: str) -> str:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        launch_id, n = f"{stamp}-{kind}", 1
        while (self.runs_root / launch_id).exists() or any(x.id == launch_id for x in self._latest.values()):
            n += 1
            launch_id = f"{stamp}-{kind}-{n}"
        return launch_id

    # ---------------------------------------------------------- run directories
    def inside_root(self, path: Path) -> Path:
        """``path`` resolved (``..`` and symlinks followed), if strictly below the runs root; else ValueError."""
        path, root = Path(path).resolve(), self.runs_root.resolve()
        if root not in path.parents:
            raise ValueError(f"{path} is not inside the runs directory {root}")
        return path

    def delete_run_dir(self, path: Path) -> None:
        """Delete a run directory below the runs root; refuses anything else and one being written."""
        path = self.inside_root(path)
        if not (path / RUN_JSON).is_file():
            raise ValueError(f"{path} is not a run directory (no {RUN_JSON})")
        active = self.active()
        if isinstance(active, ReplayLaunch) and active.out_dir.resolve() == path:
            raise ValueError("this directory belongs to the run in progress; stop it first")
        with self._write_lock:
            shutil.rmtree(path)
