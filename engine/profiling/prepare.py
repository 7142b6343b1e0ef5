"""The profiling step: which engine configs need a profile, and reading or measuring it before they start."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from engine.config import ENGINES, EngineConfig, EngineName, StepChoice
from engine.models.pair import ModelPair
from engine.profiling.cost_profile import CostProfile, ProfileMissing, ProfileShape
from engine.profiling.measure import measure, measure_interference
from engine.profiling.store import read_profile, write_profile
from engine.progress import ProgressFn, no_progress

GRID_SHARE = 0.8  # of a whole profile's progress bar: the forward grid; the rest is two lanes at once


def needs_profile(config: EngineConfig, engine: EngineName | str) -> bool:
    """True when ``engine`` drafts (AR never does) with ``config``'s ``cost`` controller, which reads a profile,
    or is PDV choosing between atomic and pipelined steps from the same step costs."""
    name = EngineName.parse(engine)
    if config.controller.kind == "cost" and name.speculative:
        return True
    return name is EngineName.PDV and config.step_choice is StepChoice.COST and config.hybrid_threshold is not None


def profile_shape(config: EngineConfig) -> ProfileShape:
    with_draft = "model" in config.drafter.split("+")  # model, model+ngram, suffix+model: draft forwards too
    return ProfileShape(config.max_batch_size, config.controller.max_len + 1, with_draft)


def cached_profile(pair: ModelPair, config: EngineConfig) -> CostProfile:
    """The cached profile ``config`` needs; ``ProfileMissing`` (saying how to measure it) when there is none."""
    profile = read_profile(pair, profile_shape(config))
    if profile is None:
        preset = pair.source.get("preset") or "this"
        raise ProfileMissing(
            f"the cost controller and pdv's cost-based step choice need this machine's step costs for the "
            f"{preset} model pair, which are not measured yet: run `python -m engine profile --preset {preset}` "
            "with the same --max-batch-size, --max-draft-len and --drafter (or engine.profiling.prepare_profile) "
            "first, or choose another --controller (pdv: --step-choice count)"
        )
    return profile


def prepare_profile(
    pair: ModelPair, config: EngineConfig, progress: ProgressFn = no_progress, *, engine: EngineName | str
) -> CostProfile | None:
    """The profile ``engine`` needs with ``config`` (None if it needs none): read from the cache, or measured once
    and cached.

    The forward grid (``measure``) and how two lanes at once slow each other (``measure_interference``) are
    measured apart: a cached profile from before the second existed gets it added, its forward times kept.
    """
    if not needs_profile(config, engine):
        return None
    shape = profile_shape(config)
    profile = read_profile(pair, shape)
    if profile is not None and profile.interference is not None:
        return profile
    lanes_progress = progress
    if profile is None:
        profile = measure(pair, shape, _share(progress, 0.0, GRID_SHARE))
        lanes_progress = _share(progress, GRID_SHARE, 1.0)
    profile = replace(profile, interference=measure_interference(pair, shape, lanes_progress))
    write_profile(pair, shape, profile)
    return profile


def _share(progress: ProgressFn, start: float, end: float) -> ProgressFn:
    """``progress`` for one part of a longer measurement: its fractions mapped into [start, end]."""
    return lambda message, fraction: progress(message, start + (end - start) * fraction)


def prepare_profiles(
    pair: ModelPair, config: EngineConfig, engines: Iterable[str], progress: ProgressFn = no_progress
) -> None:
    """Read or measure every profile ``config`` needs on ``engines`` (names that are not engines, such as
    an endpoint's label, need none), each grid once."""
    for name in dict.fromkeys(e for e in engines if e in ENGINES):
        prepare_profile(pair, config, progress, engine=name)


def prepare_default_profiles(pair: ModelPair, progress: ProgressFn = no_progress) -> None:
    """Read or measure the default grid without and with draft forwards: between them they serve every config
    within the default --max-batch-size and --max-draft-len, whatever its drafter (for suites of many configs)."""
    for drafter in ("ngram", "model"):
        prepare_profile(pair, EngineConfig(drafter=drafter), progress, engine="baseline")
