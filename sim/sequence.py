"""What simulated lanes hand each other: a request's sequence, a drafted block, a unit of work with its time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sim.policies import Request, StepMode


@dataclass
class SimSequence:
    """A request inside a simulated engine: its prompt's progress and its KV reservation."""

    request: Request
    reserved_tokens: int
    prefilled: int = 0
    released: bool = False

    @property
    def prompt_len(self) -> int:
        return len(self.request.prompt_token_ids)

    @property
    def prefill_done(self) -> bool:
        return self.prefilled == self.prompt_len

    @property
    def remaining(self) -> int:
        return self.request.params.max_new_tokens - self.request.num_output_tokens

    @property
    def finished(self) -> bool:
        return self.request.status.finished


@dataclass
class SimJob:
    duration_s: float
    rows: int
    tokens: float
    on_finish: Callable[[], None]

    def finish(self) -> None:
        self.on_finish()


@dataclass
class SimBlock:
    """A drafted block: its rows, each row's draft length, and what drafting and verifying it cost."""

    seqs: list[SimSequence]
    lens: list[int]
    draft_s: float  # its draft forwards (max(lens) positions)
    verify_s: float  # its verifier forward, alone on the device
    tokens: float  # new tokens per row of the verifier forward: 1 + mean L
    mode: StepMode = StepMode.ATOMIC
