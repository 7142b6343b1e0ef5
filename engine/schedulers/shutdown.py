"""Stopping the engines still running when the interpreter exits.

Lane threads are daemons, so that a process that never called ``stop`` can still exit. But a daemon
thread still inside torch when Python finalises is ended as it next takes the GIL, and that unwinds it
through C++ frames which do not allow it: the process aborts ("terminate called without an active
exception", SIGABRT, exit status 134). Ctrl-C in ``replay``, stopping Streamlit mid-run, or a test
session ending with an engine running all got there. ``atexit`` hooks run before finalisation, while
daemon threads still run: this one stops every running engine, so each lane leaves its loop between
steps and no thread is inside torch when the interpreter finalises. From then on no engine may start.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from typing import Protocol

log = logging.getLogger(__name__)

EXIT_STOP_TIMEOUT_S = 30.0  # a lane leaves at its next step boundary; a step of a large model on a busy CPU is slow


class Stoppable(Protocol):
    name: str

    @property
    def running(self) -> bool: ...

    def stop(self, timeout: float = 5.0) -> None: ...


_running: weakref.WeakSet[Stoppable] = weakref.WeakSet()  # started engines; one that is dropped leaves by itself
_exiting = threading.Event()


def track(engine: Stoppable) -> None:
    """Have ``engine`` stopped at interpreter exit; refused once the exit has begun (its lanes would be ended
    mid-step). Mutates the module's set of running engines."""
    if _exiting.is_set():
        raise RuntimeError(f"{engine.name}: the interpreter is exiting; no engine may start")
    _running.add(engine)


def running_engines() -> list[Stoppable]:
    """Every engine started in this process and not stopped yet."""
    return [engine for engine in list(_running) if engine.running]


def stop_running_engines() -> list[str]:
    """Stop every engine still running (cancelling its requests); returns the names of those that were."""
    _exiting.set()
    stopped = []
    for engine in running_engines():
        stopped.append(engine.name)
        try:
            engine.stop(timeout=EXIT_STOP_TIMEOUT_S)
        except RuntimeError:
            log.exception("%s engine: a lane did not stop before the interpreter exits", engine.name)
    return stopped


def _at_exit() -> None:
    stopped = stop_running_engines()
    if stopped:
        log.warning("stopped the engines still running at exit: %s", ", ".join(stopped))


atexit.register(_at_exit)
