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

``engine.schedulers.base.Engine`` and ``workloads.endpoint.engine.EndpointEngine`` both implement it
as they are (structurally: the engine does not know this protocol exists).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from engine.config import EngineConfig
from engine.request import Request
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


def default_engine_factory(name: str, pair: Any, config: EngineConfig) -> ReplayEngine:
    from engine.schedulers.registry import make_engine

    return make_engine(name, pair, config)
