"""Recognising the threads the product starts in the background, by name.

Engine lanes are ``<engine>-<lane>`` (``engine.schedulers.lanes.Lane``); dashboard launches ``pdv-<kind>-launch``;
their jobs and samplers ``replay-job`` and ``metrics-sampler``. The engine host's own threads
(``engine-host-*``: the thread host's worker, the frame reader) live as long as the run manager, waiting for the
next launch; they are not a launch's and the run manager's ``close`` ends them.
"""

from __future__ import annotations

import threading
import time

from engine.config import ENGINES

LANES = ("loop", "prefill", "decode", "verify")  # every lane an engine composes (colocated, PD, PDV)
WORKERS = ("replay-job", "metrics-sampler")  # the dashboard's job and sampler threads


def is_lane_thread(name: str) -> bool:
    """True for an engine lane thread's name (``ar-loop``, ``pd-prefill``, ``pdv-verify``, ...)."""
    engine, _, lane = name.partition("-")
    return engine in ENGINES and lane in LANES


def is_background_thread(name: str) -> bool:
    """True for a lane, a dashboard launch or one of its workers: what a test must stop before it ends."""
    return name.startswith("pdv-") or is_lane_thread(name) or name in WORKERS


def background_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.is_alive() and is_background_thread(t.name)]


def wait_for_no_background_threads(timeout: float) -> list[threading.Thread]:
    """Those still alive after ``timeout`` seconds (a stopped engine's lanes end at their next step boundary)."""
    deadline = time.monotonic() + timeout
    while background_threads() and time.monotonic() < deadline:
        time.sleep(0.1)
    return background_threads()
