"""A launch: what one press of a Start button runs in the background.

A launch owns one worker thread. The worker loads the model pair through the
run manager (cached per preset and device; the loader's progress callback only
stores a message and a fraction, which the page shows) and then does the
launch's work (``dashboard.replay_launch`` runs the sweeps itself,
``dashboard.inspect_launch`` one request). Nothing here calls Streamlit: pages
read ``status()`` and the subclasses' ``view()``, which return immutable values.
A launch's state is a ``RunState``, the one state enum of a run's life.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from engine.models.pair import ModelPair
from engine.progress import ProgressFn
from workloads.drivers.run_state import RunState

log = logging.getLogger(__name__)

PairLoader = Callable[[str, str, ProgressFn], ModelPair]  # (preset, device, progress) -> pair
POLL_S = 0.2  # how often the Inspect worker re-checks cancel while its request runs: Stop feels immediate


@dataclass(frozen=True)
class LaunchStatus:
    state: RunState  # LOADING (the model pair, the trace) -> RUNNING -> DONE, CANCELLED or FAILED
    message: str  # what the worker is doing (model loading steps, trace sampling)
    fraction: float  # progress of what `message` names (model loading, trace sampling), 0..1
    error: str | None

    @property
    def active(self) -> bool:
        return self.state.underway


class Launch:
    """A background worker with a status; subclasses implement ``_work``."""

    kind = ""

    def __init__(self, launch_id: str, load_pair: PairLoader) -> None:
        self.id = launch_id
        self.started = time.time()
        self._load_pair = load_pair
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._status = LaunchStatus(RunState.LOADING, "Starting", 0.0, None)
        self._thread = threading.Thread(target=self._main, name=f"pdv-{self.kind}-launch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """Ask the launch to stop; safe to call any number of times."""
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def active(self) -> bool:
        return self.status().active

    def status(self) -> LaunchStatus:
        with self._lock:
            return self._status

    def _progress(self, message: str, fraction: float) -> None:
        with self._lock:
            self._status = LaunchStatus(self._status.state, message, fraction, None)

    def _main(self) -> None:
        try:
            error = self._work()
        except Exception as exc:  # shown on the page; what was measured before stays
            log.exception("%s launch %s failed", self.kind, self.id)
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        state = RunState.FAILED if error else RunState.CANCELLED if self._cancel.is_set() else RunState.DONE
        with self._lock:
            self._status = LaunchStatus(state, self._status.message, self._status.fraction, error)

    def _work(self) -> str | None:
        """Do the launch's work on the worker thread; return an error message, or None."""
        raise NotImplementedError

    def _running(self, message: str) -> None:
        """The model pair is loaded and the work proper starts."""
        with self._lock:
            self._status = LaunchStatus(RunState.RUNNING, message, 1.0, None)

    def _pair(self, preset: str, device: str) -> ModelPair:
        self._progress(f"Loading the {preset} model pair", 0.0)
        return self._load_pair(preset, device, self._progress)
