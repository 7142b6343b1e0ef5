"""What one simulated forward costs: the interface every cost model fits, and the grid the policies read.

A cost model answers, in seconds: a verifier forward over ``rows`` rows of
``tokens`` new tokens each, a draft forward (one position) over ``rows`` rows,
and a prefill chunk; how much a forward slows while another lane computes at
once; and whether lanes run on streams of one device (a GPU: every lane may
compute at once) or share a CPU's cores. ``assumptions`` states every figure it
rests on; the simulator prints them beside each projection and writes them to
run.json.

The engines' own policies (the ``cost`` controller, PDV's step choice) read
step costs from a ``CostProfile``; ``profile_grid`` builds one from any cost
model over the grid those policies ask about, at one nominal context, so the
policies see the same machine the simulated clock charges.
"""

from __future__ import annotations

from typing import Any, Protocol

from sim.policies import CostProfile, Interference

NOMINAL_CONTEXT = 512  # cached tokens per row where the policies' grid is evaluated: a ShareGPT prompt and answer


class CostModel(Protocol):
    @property
    def name(self) -> str:
        """A short label printed beside every projection (``roofline H200``, ``measured profile cpu``)."""
        ...

    @property
    def cuda(self) -> bool:
        """Lanes on streams of one GPU (all compute at once) rather than sharing a CPU's cores."""
        ...

    def verify_s(self, rows: int, tokens: float, context: float) -> float:
        """One verifier forward: ``rows`` rows of ``tokens`` new tokens each over ``context`` cached tokens per row."""
        ...

    def draft_s(self, rows: int, context: float) -> float:
        """One draft forward (one position) over ``rows`` rows."""
        ...

    def prefill_s(self, tokens: int, rows: int, context: float, with_draft: bool) -> float:
        """One prefill chunk of ``tokens`` prompt tokens over ``rows`` requests, both models when ``with_draft``."""
        ...

    def concurrent_slowdown(self, rows: int, tokens: float) -> float:
        """A forward's time while another lane computes at once / its time alone."""
        ...

    def budget_slowdown(self, rows: int, tokens: float) -> float:
        """A forward's time alone on one lane's share of the device / its time with all of it."""
        ...

    def profile(self, max_batch: int, max_tokens: int) -> CostProfile:
        """The step costs the engine's policies read, over their grid."""
        ...

    def assumptions(self) -> dict[str, Any]:
        """Every figure the model rests on, by name."""
        ...


def batch_grid(max_batch: int) -> tuple[int, ...]:
    """Powers of two up to ``max_batch``, and ``max_batch`` itself."""
    sizes = [1]
    while sizes[-1] * 2 < max_batch:
        sizes.append(sizes[-1] * 2)
    return tuple(sorted({*sizes, max_batch}))


def profile_grid(model: CostModel, max_batch: int, max_tokens: int, machine: dict[str, str]) -> CostProfile:
    """``model`` evaluated on the policies' grid (batch sizes x tokens per row) at ``NOMINAL_CONTEXT``."""
    batches = batch_grid(max_batch)
    tokens = tuple(range(1, max_tokens + 1))
    verify = tuple(tuple(model.verify_s(b, t, NOMINAL_CONTEXT) * 1000 for t in tokens) for b in batches)
    draft = tuple(model.draft_s(b, NOMINAL_CONTEXT) * 1000 for b in batches)
    concurrent = tuple(
        tuple(v * model.concurrent_slowdown(b, t) for v, t in zip(row, tokens, strict=True))
        for row, b in zip(verify, batches, strict=True)
    )
    interference = Interference(batches, tokens, 1, verify, verify, concurrent)
    return memoized(CostProfile(batches, tokens, verify, draft, machine, interference))


class MemoProfile(CostProfile):
    """A ``CostProfile`` that remembers each answer: the policies ask about the same few shapes every step, and a
    simulation runs many thousands of steps. The answers are the profile's own (pure functions of the grid)."""

    def verify_s(self, batch: int, tokens_per_row: float) -> float:
        memo = self.__dict__.setdefault("_verify", {})
        key = (batch, tokens_per_row)
        if key not in memo:
            memo[key] = CostProfile.verify_s(self, batch, tokens_per_row)
        return memo[key]

    def draft_s(self, batch: int) -> float:
        memo = self.__dict__.setdefault("_draft", {})
        if batch not in memo:
            memo[batch] = CostProfile.draft_s(self, batch)
        return memo[batch]


def memoized(profile: CostProfile) -> MemoProfile:
    return MemoProfile(profile.batch_sizes, profile.tokens, profile.verify_ms, profile.draft_ms, profile.machine,
                       profile.interference)  # fmt: skip
