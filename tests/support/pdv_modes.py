"""Counting PDV's two decode modes from outside the engine, which keeps no counters that only tests read."""

from __future__ import annotations

from dataclasses import dataclass

from engine.schedulers.pdv import PDVEngine


@dataclass
class Modes:
    hybrid_steps: int = 0  # decode steps drafted and verified atomically (hybrid mode)
    pipelined_blocks: int = 0  # blocks drafted for the verify lane
    _in_step: bool = False  # a hybrid step's own draft is not a pipelined block


def count_modes(eng: PDVEngine) -> Modes:
    """Wrap ``eng``'s step and draft (instance attributes, before it starts) to count each mode as it begins.

    Only the decode lane drafts or steps, so the counts need no lock. Mutates: ``eng._step`` and ``eng._draft``.
    """
    modes = Modes()
    step, draft = eng._step, eng._draft

    def counted_step(*args, **kwargs):
        modes.hybrid_steps += 1  # counted before it drafts, as a controller sees the step
        modes._in_step = True
        try:
            return step(*args, **kwargs)
        finally:
            modes._in_step = False

    def counted_draft(*args, **kwargs):
        if not modes._in_step:
            modes.pipelined_blocks += 1
        return draft(*args, **kwargs)

    eng._step, eng._draft = counted_step, counted_draft
    return modes
