"""The dashboard's names and colours: those of ``metrics.palette``, where the shareable report takes them too."""

from __future__ import annotations

from metrics.palette import (
    ENGINE_COLORS,
    ENGINE_LABELS,
    KIND_COLORS,
    KIND_LABELS,
    OTHER_COLOR,
    RUN_DASHES,
    RUN_SHADES,
    engine_color,
    engine_label,
    run_style,
    shade,
)

__all__ = [
    "ENGINE_COLORS", "ENGINE_LABELS", "KIND_COLORS", "KIND_LABELS", "OTHER_COLOR", "RUN_DASHES", "RUN_SHADES",
    "engine_color", "engine_label", "run_style", "shade",
]  # fmt: skip
