"""Recognising engine lane threads by name: ``engine.schedulers.lanes.Lane`` names them ``<engine>-<lane>``."""

from __future__ import annotations

from engine.config import ENGINES

LANES = ("loop", "prefill", "decode", "verify")  # every lane an engine composes (colocated, PD, PDV)


def is_lane_thread(name: str) -> bool:
    """True for an engine lane thread's name (``ar-loop``, ``pd-prefill``, ``pdv-verify``, ...)."""
    engine, _, lane = name.partition("-")
    return engine in ENGINES and lane in LANES
