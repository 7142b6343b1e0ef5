"""What a replay drives: one protocol that an in-process engine and an OpenAI-compatible endpoint both fit.

``ReplayEngine`` is everything ``workloads.drivers.replay`` asks of what it
drives, so the driver never looks at which kind it has:

* ``start`` / ``submit`` / ``stop`` – the engine interface (``engine.schedulers.base.Engine``);
* ``stats`` – one ``EngineStats`` snapshot, the type the time series reads;
* ``fatal_error`` – why the engine can serve no more (a crashed lane), or ``None``;
* ``output_text`` – the text as the source produced it (a server's stream), or
  ``None`` when the output token ids are the text (an engine);
* ``accounting_problems`` – where the engine's own request counts do not add up
  (a server keeps its counts behind its ``/metrics``: none);
* ``describe`` – what run.json records about the source (an endpoint's address), or ``None``.

An in-process engine fits through ``InProcessEngine``; ``workloads.endpoint.engine.EndpointEngine``
fits as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from engine.config import EngineConfig
from engine.request import Request
from engine.schedulers.base import Engine
from engine.schedulers.stats import EngineStats


class ReplayEngine(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def fatal_error(self) -> str | None: ...
    def start(self) -> Any: ...
    def submit(self, request: Request) -> Request: ...
    def stats(self) -> EngineStats: ...
    def stop(self, timeout: float = 5.0) -> None: ...
    def output_text(self, request: Request) -> str | None: ...
    def accounting_problems(self) -> list[str]: ...
    def describe(self) -> dict[str, Any] | None: ...


EngineFactory = Callable[[str, Any, EngineConfig], ReplayEngine]  # (engine name or endpoint label, pair, config)


class InProcessEngine:
    """An engine of this process as a ``ReplayEngine``: its output is its token ids, and it keeps its own counts."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.name = engine.name

    @property
    def fatal_error(self) -> str | None:
        return self.engine.fatal_error

    def start(self) -> InProcessEngine:
        self.engine.start()
        return self

    def submit(self, request: Request) -> Request:
        return self.engine.submit(request)

    def stats(self) -> EngineStats:
        return self.engine.stats()

    def stop(self, timeout: float = 5.0) -> None:
        self.engine.stop(timeout)

    def output_text(self, request: Request) -> str | None:
        return None

    def accounting_problems(self) -> list[str]:
        """The engine's own counts once it has stopped: every submitted request ended exactly once."""
        stats = self.engine.stats()
        problems = [p for p in (stats.accounting_problem(),) if p]
        if stats.unfinished:
            problems.append(f"{stats.unfinished} request(s) still unfinished after the engine stopped")
        return problems

    def describe(self) -> dict[str, Any] | None:
        return None


def default_engine_factory(name: str, pair: Any, config: EngineConfig) -> ReplayEngine:
    from engine.schedulers.registry import make_engine

    return InProcessEngine(make_engine(name, pair, config))
