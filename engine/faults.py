"""Fault injection: a model-runner wrapper that makes chosen forwards raise, return NaN or +inf logits, stall or crash.

Nothing here is on an engine's path unless it is handed a wrapped pair. Tests
(and anyone checking failure behaviour by hand) wrap a pair's two runners, give
the wrapped pair to the engine, server or replay, and arm faults for a block::

    injector = FaultInjector(pair)
    eng = make_engine("pd", injector.pair, config)
    with injector.inject(Fault("verify", "nan")) as hits:
        ...  # the next verifier forward of a verify step returns NaN logits
    assert hits.count == 1

A fault names the *stage* whose forward it hits – ``prefill``
(``stages.prefill_chunk``), ``draft`` (``stages.draft_block``) or ``verify``
(``stages.verify_block``), as the stage names itself to ``ModelRunner.forward``
– and optionally the model (``verifier`` or ``draft``). It acts inside the
model's own forward, where a device error or bad arithmetic would, so the
runner's bookkeeping and its finiteness check run as they would for a real
fault. Kinds:

* ``raise`` – the forward raises ``InjectedFault`` (a device error, say):
  the engine fails the requests of that batch and serves on.
* ``nan`` / ``inf`` – the forward returns NaN / +inf logits; the runner's
  finiteness check turns them into an error, with the same outcome as ``raise``.
* ``stall`` – the forward sleeps ``seconds`` first (for stopping mid-stage).
* ``crash`` – raises ``InjectedCrash``, a ``BaseException`` no lane catches:
  it stands for a bug in a lane, which ends the engine (``fatal_error``).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal

import torch

from engine.kv import KVStore
from engine.models.pair import ModelPair
from engine.runner import ModelRunner, Stage


class FaultKind(StrEnum):
    RAISE = "raise"
    NAN = "nan"
    INF = "inf"
    STALL = "stall"
    CRASH = "crash"


class InjectedFault(RuntimeError):
    """A forward pass failed (injected)."""


class InjectedCrash(BaseException):  # noqa: N818 – named after what it simulates
    """A lane crashed (injected): not an ``Exception``, so no lane's error handling catches it."""


@dataclass(frozen=True)
class Fault:
    """What to break: ``stage`` and ``kind`` accept the enums' values as strings ("verify", "nan")."""

    stage: Stage
    kind: FaultKind
    model: Literal["verifier", "draft"] | None = None  # None: either model
    times: int | None = 1  # forwards it hits; None: every matching forward
    skip: int = 0  # matching forwards let through first
    seconds: float = 1.0  # a stall's length

    def __post_init__(self) -> None:
        if self.stage not in set(Stage):
            raise ValueError(f"unknown stage {self.stage!r}; choose from {', '.join(Stage)}")
        if self.kind not in set(FaultKind):
            raise ValueError(f"unknown fault kind {self.kind!r}; choose from {', '.join(FaultKind)}")
        if self.model not in (None, "verifier", "draft"):
            raise ValueError(f"unknown model {self.model!r}; choose from verifier, draft (or None for either)")
        object.__setattr__(self, "stage", Stage(self.stage))
        object.__setattr__(self, "kind", FaultKind(self.kind))


@dataclass
class Hits:
    """What the armed faults did: how many forwards they hit, and when the first hit began."""

    count: int = 0
    entered: threading.Event = field(default_factory=threading.Event)  # set at the first hit, before it acts
    stages: list[str] = field(default_factory=list)  # "<stage>/<model>" of each hit, in order


@dataclass
class _Armed:
    fault: Fault
    hits: Hits
    seen: int = 0  # matching forwards so far, skipped ones included

    def matches(self, stage: Stage | None, model: str) -> bool:
        fault = self.fault
        if fault.stage != stage or fault.model not in (None, model):
            return False
        return fault.times is None or self.seen - fault.skip < fault.times


class FaultInjector:
    """A pair whose runners consult this injector's armed faults before each forward.

    ``pair`` is the wrapped copy to hand to engines; the original pair and its
    runners are untouched (the wrappers share their models and settings).
    """

    def __init__(self, pair: ModelPair) -> None:
        self._lock = threading.Lock()
        self._armed: list[_Armed] = []
        self.pair = replace(pair, verifier=FaultyRunner(pair.verifier, self), draft=FaultyRunner(pair.draft, self))

    @contextmanager
    def inject(self, *faults: Fault) -> Iterator[Hits]:
        """Arm ``faults`` for the duration of the block; yields the record of their hits."""
        hits = Hits()
        entries = [_Armed(f, hits) for f in faults]
        with self._lock:
            self._armed.extend(entries)
        try:
            yield hits
        finally:
            with self._lock:
                for entry in entries:
                    self._armed.remove(entry)

    def take(self, stage: Stage | None, model: str) -> Fault | None:
        """The fault that hits this forward, if one does. Mutates: the matching fault's counts and its ``Hits``."""
        with self._lock:
            entry = next((e for e in self._armed if e.matches(stage, model)), None)
            if entry is None:
                return None
            entry.seen += 1
            if entry.seen <= entry.fault.skip:
                return None
            entry.hits.count += 1
            entry.hits.stages.append(f"{stage}/{model}")
        entry.hits.entered.set()
        return entry.fault


class FaultyRunner(ModelRunner):
    """A ``ModelRunner`` sharing ``runner``'s model and settings whose forwards an injector may break."""

    def __init__(self, runner: ModelRunner, injector: FaultInjector) -> None:
        # no ModelRunner.__init__: the wrapped runner already set the model up; share its state as it is
        self.__dict__.update(runner.__dict__)
        self._injector = injector

    def forward(
        self,
        stores: list[KVStore],
        input_ids: torch.Tensor,
        num_tokens: list[int],
        keep: torch.Tensor,
        stage: Stage | None = None,
    ) -> torch.Tensor:
        fault = self._injector.take(stage, self.name)
        if fault is None:
            return super().forward(stores, input_ids, num_tokens, keep, stage)
        # this forward alone runs a model that fails the chosen way; other threads keep the real one
        broken = copy.copy(self)
        broken.model = _BrokenModel(self.model, fault, f"the {self.name} forward of {stage}")
        return ModelRunner.forward(broken, stores, input_ids, num_tokens, keep, stage)


class _BrokenModel:
    """Calls like the wrapped model, failing the way ``fault`` says."""

    def __init__(self, model: torch.nn.Module, fault: Fault, where: str) -> None:
        self._model = model
        self._fault = fault
        self._where = where

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kind = self._fault.kind
        if kind == FaultKind.RAISE:
            raise InjectedFault(f"injected fault in {self._where}")
        if kind == FaultKind.CRASH:
            raise InjectedCrash(f"injected lane crash in {self._where}")
        if kind == FaultKind.STALL:
            time.sleep(self._fault.seconds)
        output = self._model(*args, **kwargs)
        if kind in (FaultKind.NAN, FaultKind.INF):
            output.logits = torch.full_like(output.logits, float("nan") if kind == FaultKind.NAN else float("inf"))
        return output

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)
