"""How an engine fails requests without losing any: one row at a time where it can, every live one if a lane dies.

``RowFailures`` is a part of ``engine.schedulers.base.Engine``: its methods
read and end the engine's requests through the engine's own bookkeeping
(``_retire``, ``_end``, ``_live`` under ``_lock``), declared below.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable

from engine.devices import raise_if_device_failure
from engine.request import Request, RequestStatus
from engine.schedulers.isolation import RowState, restore, snapshot
from engine.sequence import Sequence

log = logging.getLogger("engine.schedulers.base")  # the engine's log, whichever part of it writes


class RowFailures:
    """Failing rows alone, and failing everything live when a lane crashes; mutates requests and the live set."""

    # the engine's state these methods use (set by Engine.__init__); _retire, _end and _notify are Engine's
    name: str
    fatal_error: str | None
    _live: dict[int, Request]
    _lock: threading.Lock
    _stop: threading.Event

    def _isolated(self, seqs: list[Sequence], run: Callable[[list[Sequence]], list[Sequence]]) -> list[Sequence]:
        """``run(seqs)`` (a prefill chunk or a step), failing only the rows that fail on their own.

        If ``run`` raises for a batch, every row that emitted nothing in it is put back as it was and
        run again alone (``engine.schedulers.isolation``); returns what ``run`` returns for each row.
        """
        before = snapshot(seqs)
        try:
            return run(seqs)
        except Exception as exc:
            return self._recover(before, exc, run)

    def _recover(
        self, before: list[RowState], exc: Exception, run: Callable[[list[Sequence]], list[Sequence]]
    ) -> list[Sequence]:
        """After ``exc`` in a batched call over the rows of ``before``: fail a lone row, re-run each row of a
        larger batch alone. Returns the rows still running (those that had moved on included).
        A failed device (``engine.devices.DeviceFailure``) is no row's failure: it propagates and stops the engine."""
        raise_if_device_failure(exc)
        if len(before) == 1:
            self._fail([before[0].seq], exc)
            return []
        log.warning(
            "%s engine: a batch of %d failed (%s: %s); running its rows one by one",
            self.name,
            len(before),
            type(exc).__name__,
            exc,
        )
        again, moved_on = restore(before)
        alive = self._retire(moved_on)
        for seq in again:
            try:
                alive += run([seq])
            except Exception as alone:
                self._fail([seq], alone)
        return alive

    def _fail(self, seqs: list[Sequence], exc: BaseException) -> None:
        """End ``seqs`` as failed with the error text; the engine keeps serving others (unless the device failed)."""
        raise_if_device_failure(exc)
        message = f"{type(exc).__name__}: {exc}"
        log.error("%s engine: failing %d request(s): %s", self.name, len(seqs), message)
        for seq in seqs:
            seq.request.fail(RequestStatus.FAILED, message)
        self._retire(seqs)

    def _guard(self, loop: Callable[[], None]) -> Callable[[], None]:
        """Run a lane loop until stop; an unexpected error fails every live request."""

        def run() -> None:
            try:
                while not self._stop.is_set():
                    loop()
            except BaseException as exc:  # a bug in a lane: make it visible, lose nothing
                self.fatal_error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                log.exception("%s engine lane crashed", self.name)
                with self._lock:
                    self._stop.set()
                    unfinished = list(self._live.values())
                for request in unfinished:
                    self._end(request, RequestStatus.FAILED, f"engine crashed: {self.fatal_error}")
                self._notify()

        return run
