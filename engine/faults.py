"""Fault injection for tests: make a model's forward pass raise, return NaN logits, stall or crash its lane.

The one hook is in ``ModelRunner.forward`` (``engine/runner.py``): after each
forward it hands the logits to ``after_forward``, which returns them untouched
unless a fault is armed. Arm faults with ``inject``::

    with faults.inject(Fault("verify", "nan")) as hits:
        ...  # the next verifier forward of a verify step returns NaN logits
    assert hits.count == 1

A fault names the *stage* whose forward it hits – ``prefill``
(``stages.prefill_chunk``), ``draft`` (``stages.draft_block``) or ``verify``
(``stages.verify_block``), found from the calling stage function – and
optionally the model (``verifier`` or ``draft``). Kinds:

* ``raise`` – the forward raises ``InjectedFault`` (a device error, say):
  the engine fails the requests of that batch and serves on.
* ``nan`` – the forward returns NaN logits; the runner's finiteness check
  turns them into an error, with the same outcome as ``raise``.
* ``stall`` – the forward sleeps ``seconds`` first (for stopping mid-stage).
* ``crash`` – raises ``InjectedCrash``, a ``BaseException`` no lane catches:
  it stands for a bug in a lane, which ends the engine (``fatal_error``).

Nothing is armed outside ``inject``; with nothing armed ``after_forward`` is
one attribute read.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import torch

Stage = Literal["prefill", "draft", "verify"]
Kind = Literal["raise", "nan", "stall", "crash"]
STAGE_FUNCTIONS: dict[str, Stage] = {"prefill_chunk": "prefill", "draft_block": "draft", "verify_block": "verify"}
_MAX_FRAMES = 8  # the stage function is within a few frames of the runner (decorators in between)


class InjectedFault(RuntimeError):
    """A forward pass failed (injected)."""


class InjectedCrash(BaseException):  # noqa: N818 – named after what it simulates
    """A lane crashed (injected): not an ``Exception``, so no lane's error handling catches it."""


@dataclass(frozen=True)
class Fault:
    stage: Stage
    kind: Kind
    model: Literal["verifier", "draft"] | None = None  # None: either model
    times: int | None = 1  # forwards it hits; None: every matching forward
    skip: int = 0  # matching forwards let through first
    seconds: float = 1.0  # a stall's length

    def __post_init__(self) -> None:
        if self.stage not in STAGE_FUNCTIONS.values():
            raise ValueError(f"unknown stage {self.stage!r}; choose from prefill, draft, verify")
        if self.kind not in ("raise", "nan", "stall", "crash"):
            raise ValueError(f"unknown fault kind {self.kind!r}; choose from raise, nan, stall, crash")


@dataclass
class Hits:
    """What the armed faults did: how many forwards they hit, and when the latest hit began."""

    count: int = 0
    entered: threading.Event = field(default_factory=threading.Event)  # set at the first hit, before it acts
    stages: list[str] = field(default_factory=list)


@dataclass
class _Armed:
    fault: Fault
    hits: Hits
    seen: int = 0


_lock = threading.Lock()
_armed: list[_Armed] = []


@contextmanager
def inject(*faults: Fault) -> Iterator[Hits]:
    """Arm ``faults`` for the duration of the block; yields the record of their hits."""
    hits = Hits()
    entries = [_Armed(f, hits) for f in faults]
    with _lock:
        _armed.extend(entries)
    try:
        yield hits
    finally:
        with _lock:
            for entry in entries:
                _armed.remove(entry)


def after_forward(model: str, logits: torch.Tensor) -> torch.Tensor:
    """The runner's hook: ``logits`` as they are, or as an armed fault changes them (or an exception)."""
    if not _armed:
        return logits
    stage = _calling_stage()
    with _lock:
        entry = next((e for e in _armed if _matches(e, stage, model)), None)
        if entry is None:
            return logits
        entry.seen += 1
        if entry.seen <= entry.fault.skip:
            return logits
        entry.hits.count += 1
        entry.hits.stages.append(f"{stage}/{model}")
    fault = entry.fault
    entry.hits.entered.set()
    if fault.kind == "raise":
        raise InjectedFault(f"injected fault in the {model} forward of {stage}")
    if fault.kind == "crash":
        raise InjectedCrash(f"injected lane crash in the {model} forward of {stage}")
    if fault.kind == "nan":
        return torch.full_like(logits, float("nan"))
    time.sleep(fault.seconds)
    return logits


def _matches(entry: _Armed, stage: str | None, model: str) -> bool:
    fault = entry.fault
    if fault.stage != stage or fault.model not in (None, model):
        return False
    used = entry.seen - fault.skip
    return fault.times is None or used < fault.times


def _calling_stage() -> Stage | None:
    frame = sys._getframe(2)
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        stage = STAGE_FUNCTIONS.get(frame.f_code.co_name)
        if stage is not None:
            return stage
        frame = frame.f_back
    return None
