"""A machine's step costs: verifier and draft forward times by batch size and tokens per row.

Between measured points times are interpolated linearly; beyond the grid the
nearest edge is used. Pure values: nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from engine.profiling.grid import interpolate, interpolate2
from engine.profiling.interference import Interference


class ProfileMissing(ValueError):
    """A step cost an engine needs was not measured on this machine yet (``python -m engine profile`` does it)."""


class ProfileShape(NamedTuple):
    """The grid a profile covers, and so which cached profile an engine config reads."""

    max_batch: int  # the config's --max-batch-size
    max_tokens: int  # tokens per row in one verifier forward at most: --max-draft-len + 1
    with_draft: bool  # a draft model proposes (model, model+ngram drafters), so its forwards are timed too


@dataclass(frozen=True)
class CostProfile:
    batch_sizes: tuple[int, ...]
    tokens: tuple[int, ...]
    verify_ms: tuple[tuple[float, ...], ...]  # [batch size][tokens per row]: one verifier forward
    draft_ms: tuple[float, ...]  # [batch size]: one draft forward of one token per row; () without a draft
    machine: dict[str, str]  # what the times were measured on
    # how two lanes at once slow each other's verifier forwards; None in a profile file measured before it existed
    interference: Interference | None = None

    def verify_s(self, batch: int, tokens_per_row: float) -> float:
        return interpolate2(self.batch_sizes, self.tokens, self.verify_ms, batch, tokens_per_row) / 1000

    def concurrent_slowdown(self, rows: int, tokens: float) -> float:
        """A verifier forward's time while a second lane runs at once / its time alone with every thread.

        A pipelined step's forward costs ``verify_s(rows, tokens) * concurrent_slowdown(rows, tokens)``; below 2,
        two lanes at once beat taking turns (``interference.Interference``). ``ProfileMissing`` when this
        profile was measured before the figure existed.
        """
        if self.interference is None:
            raise ProfileMissing(
                "this machine's step-cost profile has no measure of how two lanes at once slow each other "
                "(it was measured by an older version): re-run `python -m engine profile` with the same flags"
            )
        return self.interference.concurrent_slowdown(rows, tokens)

    def draft_s(self, batch: int) -> float:
        """One draft position for ``batch`` rows (0 without a draft model)."""
        return interpolate(self.batch_sizes, self.draft_ms, batch) / 1000 if self.draft_ms else 0.0

    def table(self) -> str:
        """The profile as a text table (milliseconds)."""
        head = (
            "batch  " + "  ".join(f"verify t={t:<3d}" for t in self.tokens) + ("  draft/pos" if self.draft_ms else "")
        )
        lines = [head]
        for i, b in enumerate(self.batch_sizes):
            cells = "  ".join(f"{v:12.1f}" for v in self.verify_ms[i])
            draft = f"  {self.draft_ms[i]:9.1f}" if self.draft_ms else ""
            lines.append(f"{b:5d}  {cells}{draft}")
        if self.interference is not None:
            lines += ["", self.interference.table()]
        return "\n".join(lines)

