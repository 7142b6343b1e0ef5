"""Engines by name: the one place that knows every scheduler."""

from __future__ import annotations

from dataclasses import replace

from engine.config import EngineConfig
from engine.models.pair import ModelPair
from engine.schedulers.base import Engine
from engine.schedulers.colocated import AREngine, BaselineEngine
from engine.schedulers.pd import PDEngine
from engine.schedulers.pdv import PDVEngine

ENGINE_CLASSES: dict[str, type[Engine]] = {"ar": AREngine, "baseline": BaselineEngine, "pd": PDEngine, "pdv": PDVEngine}


def make_engine(name: str, pair: ModelPair, config: EngineConfig | None = None) -> Engine:
    """A new (not started) engine of kind ``name``; ``config.engine`` is set to ``name``."""
    if name not in ENGINE_CLASSES:
        raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINE_CLASSES)}")
    config = config or EngineConfig(engine=name)
    if config.engine != name:
        config = replace(config, engine=name)
    return ENGINE_CLASSES[name](pair, config)
