"""A request's verify steps as outputs.jsonl keeps them: one compact ``[draft_len, accepted, source]`` per step.

``source`` is the step's ``DraftSource`` value as text (``str(source)``: ``model``,
``lookup3``, ``suffix-request2``, ``suffix-global6``) or null when the step drafted
nothing, so a saved request gives back the same ``StepRecord``s its engine kept and
Inspect draws its steps and proposals per source from them as from a new prompt's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from engine.draft_source import DraftSource
from engine.request import StepRecord

StepEntry = list[int | str | None]  # [draft_len, accepted, source or None], as JSON holds it


def step_entries(steps: Iterable[StepRecord]) -> list[StepEntry]:
    """The outputs.jsonl ``steps`` value of a request's steps."""
    return [[s.draft_len, s.accepted, None if s.source is None else str(s.source)] for s in steps]


def read_steps(value: Any) -> tuple[StepRecord, ...] | None:
    """An outputs.jsonl ``steps`` cell as read back: the steps, or None where none were recorded (null, or the
    field missing in an older file, which reads as NaN). Raises ``ValueError`` for an entry that is not a step."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    steps = []
    for entry in value:
        if not isinstance(entry, list | tuple) or len(entry) != 3:
            raise ValueError(f"{entry!r} is not a [draft_len, accepted, source] step")
        drafted, accepted, source = entry
        if not isinstance(drafted, int) or not isinstance(accepted, int) or not 0 <= accepted <= drafted:
            raise ValueError(f"{entry!r} does not hold 0 <= accepted <= draft length")
        steps.append(StepRecord(drafted, accepted, None if source is None else DraftSource.parse(str(source))))
    return tuple(steps)
