"""Engines by name: the one place that knows every scheduler."""

from __future__ import annotations

from engine.config import EngineConfig, EngineName
from engine.models.pair import ModelPair
from engine.profiling.cost_profile import CostProfile
from engine.schedulers.base import Engine
from engine.schedulers.colocated import AREngine, BaselineEngine
from engine.schedulers.pd import PDEngine
from engine.schedulers.pdv import PDVEngine

ENGINE_CLASSES: dict[EngineName, type[Engine]] = {
    EngineName.AR: AREngine,
    EngineName.BASELINE: BaselineEngine,
    EngineName.PD: PDEngine,
    EngineName.PDV: PDVEngine,
}


def speculates(name: EngineName | str) -> bool:
    """Whether the engine ``name`` drafts; AR does not, so it needs no draft-length controller's profile."""
    return ENGINE_CLASSES[EngineName.parse(name)].speculative


def make_engine(
    name: EngineName | str, pair: ModelPair, config: EngineConfig | None = None, profile: CostProfile | None = None
) -> Engine:
    """A new (not started) engine of kind ``name`` (any case) running with ``config``.

    ``profile`` is handed to the engine's ``cost`` controller (see ``Engine.__init__``: without it the cached
    profile is read, never measured).
    """
    name = EngineName.parse(name)  # a ValueError naming the choices
    config = config or EngineConfig()
    return ENGINE_CLASSES[name](pair, config, profile)
