"""Engine-side state of a running request: its KV stores and not-yet-fed tokens."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.kv import KVStore
from engine.request import Request
from engine.sampling import SamplingRow


@dataclass(eq=False)
class Sequence:
    """A request inside an engine.

    Invariant between steps: the verifier cache holds the prompt and every
    emitted token except the last one, ``pending``; the draft cache holds a
    prefix of that and ``draft_pending`` lists the tokens it still lacks
    (one or two after a step, more after steps with speculation off).
    """

    request: Request
    stop_token_ids: frozenset[int]
    reserved_tokens: int  # KV budget held from admission to release
    generator: torch.Generator | None  # None for greedy requests
    verifier_kv: KVStore | None = None
    draft_kv: KVStore | None = None
    prefilled: int = 0  # prompt tokens already in the caches
    pending: int | None = None  # last emitted token, not yet in the verifier cache
    draft_pending: list[int] = field(default_factory=list)
    handoff_event: object | None = None  # CUDA event of the last lane that wrote this sequence's caches
    released: bool = False  # caches and KV budget handed back (engine ``_retire``)
    sampling: SamplingRow | None = None  # the request's sampling parameters on the device (SamplingRows.of)

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

    def release(self) -> None:
        """Return the KV stores' blocks to their pools (mutates: both stores, ``released``)."""
        for store in (self.verifier_kv, self.draft_kv):
            if store is not None:
                store.free()
        self.verifier_kv = None
        self.draft_kv = None
        self.released = True
