"""A machine's step costs: verifier and draft forward times by batch size and tokens per row.

Between measured points times are interpolated linearly; beyond the grid the
nearest edge is used. Pure values: nothing here imports torch.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import NamedTuple


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

    def verify_s(self, batch: int, tokens_per_row: float) -> float:
        rows = [_interpolate(self.tokens, row, tokens_per_row) for row in self.verify_ms]
        return _interpolate(self.batch_sizes, rows, batch) / 1000

    def draft_s(self, batch: int) -> float:
        """One draft position for ``batch`` rows (0 without a draft model)."""
        return _interpolate(self.batch_sizes, self.draft_ms, batch) / 1000 if self.draft_ms else 0.0

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
        return "\n".join(lines)


def _interpolate(xs: tuple[int, ...], ys, x: float) -> float:
    i = bisect_left(xs, x)
    if i == 0:
        return ys[0]
    if i == len(xs):
        return ys[-1]
    x0, x1 = xs[i - 1], xs[i]
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)
