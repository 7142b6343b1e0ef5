"""What a caller that drives an engine asks of it beyond submit: a batch waited for, its text, its final counts.

``Driven`` is a part of ``engine.schedulers.base.Engine``; with the engine's
``start``, ``submit``, ``stats``, ``stop``, ``name`` and ``fatal_error`` it is
the whole replay protocol (``workloads.drivers.engines.ReplayEngine``), which
the engine fits structurally: it does not import the driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from engine.request import Request
from engine.schedulers.stats import EngineStats


class Driven:
    """Reads the engine only through its ``start``, ``submit`` and ``stats``; mutates nothing of its own."""

    start: Callable[[], Any]
    submit: Callable[[Request], Request]
    stats: Callable[[], EngineStats]

    def output_text(self, request: Request) -> str | None:
        """None: an engine's output token ids are its text (a server's stream carries text of its own)."""
        return None

    def accounting_problems(self) -> list[str]:
        """Where this engine's own counts do not add up once it has stopped: every submitted request ended once."""
        stats = self.stats()
        problems = [p for p in (stats.accounting_problem(),) if p]
        if stats.unfinished:
            problems.append(f"{stats.unfinished} request(s) still unfinished after the engine stopped")
        return problems

    def describe(self) -> dict[str, str] | None:
        """What a run's record says about where its outputs came from beyond the engine's name: nothing here."""
        return None

    def generate(self, requests: list[Request], timeout: float | None = None) -> list[Request]:
        """Submit ``requests`` and wait for all of them (starts the engine if needed)."""
        self.start()
        for request in requests:
            self.submit(request)
        deadline = None if timeout is None else time.monotonic() + timeout
        for request in requests:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not request.done.wait(left):
                raise TimeoutError(f"request {request.request_id} did not finish within {timeout}s")
        return requests
