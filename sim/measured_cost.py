"""Step costs from a measured profile: this machine's (``python -m engine profile``) or one measured on a GPU.

The profile times verifier forwards over a grid of batch sizes and tokens per
row and one draft forward per batch size, interpolated between points. What
it does not time, and how this model fills it in:

* **context**: the profile's forwards run over a fixed cached prefix; the
  simulated cost does not grow with a row's context;
* **prefill**: a chunk of n prompt tokens costs the profile's single-row,
  single-token verifier forward plus n - 1 times the cost of one more token,
  that slope read from the grid's largest forward (tokens x rows); the draft's
  prefill likewise from its draft forwards;
* **two lanes at once**: the profile's measured interference when it has one,
  else no slowdown; on a CPU the lanes take turns (the engines' default), so it
  is read only with lanes at once.

A profile file whose ``machine.device`` names a CUDA device is a GPU's: its
lanes run at once, on streams.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.cost_model import memoized
from sim.policies import CostProfile, Interference


@dataclass(frozen=True)
class MeasuredCost:
    measured: CostProfile
    source: str  # where the profile came from (a file, this machine's cache)

    @property
    def name(self) -> str:
        return f"measured profile {self.measured.machine.get('device', '?')}"

    @property
    def cuda(self) -> bool:
        return str(self.measured.machine.get("device", "cpu")).startswith("cuda")

    def verify_s(self, rows: int, tokens: float, context: float) -> float:
        return self.measured.verify_s(rows, tokens)

    def draft_s(self, rows: int, context: float) -> float:
        return self.measured.draft_s(rows)

    def _verify_token_s(self) -> float:
        p = self.measured
        most = p.batch_sizes[-1] * p.tokens[-1]
        if most <= 1:
            return p.verify_s(1, 1)
        return max(0.0, (p.verify_s(p.batch_sizes[-1], p.tokens[-1]) - p.verify_s(1, 1)) / (most - 1))

    def _draft_token_s(self) -> float:
        p = self.measured
        if not p.draft_ms or p.batch_sizes[-1] <= 1:
            return p.draft_s(1)
        return max(0.0, (p.draft_s(p.batch_sizes[-1]) - p.draft_s(1)) / (p.batch_sizes[-1] - 1))

    def prefill_s(self, tokens: int, rows: int, context: float, with_draft: bool) -> float:
        verify = self.measured.verify_s(1, 1) + (tokens - 1) * self._verify_token_s()
        draft = self.measured.draft_s(1) + (tokens - 1) * self._draft_token_s() if with_draft else 0.0
        return verify + draft

    def concurrent_slowdown(self, rows: int, tokens: float) -> float:
        if self.measured.interference is None:
            return 1.0
        return self.measured.interference.concurrent_slowdown(rows, tokens)

    def budget_slowdown(self, rows: int, tokens: float) -> float:
        if self.measured.interference is None:
            return 1.0
        return self.measured.interference.budget_slowdown(rows, tokens)

    def profile(self, max_batch: int, max_tokens: int) -> CostProfile:
        return memoized(self.measured)

    def assumptions(self) -> dict[str, Any]:
        p = self.measured
        return {
            "cost model": self.name,
            "profile": self.source,
            "machine": dict(p.machine),
            "grid": f"batch {p.batch_sizes[0]}..{p.batch_sizes[-1]}, tokens per row {p.tokens[0]}..{p.tokens[-1]}",
            "context": "not modelled: a forward's cost is the profile's, whatever the rows' context",
            "prefill": f"verify(1,1) + {self._verify_token_s() * 1000:.3f} ms per further prompt token (+ draft)",
            "two lanes at once": "the profile's interference" if p.interference else "no slowdown (not measured)",
        }


def load_profile_file(path: str | Path) -> MeasuredCost:
    """A profile file in the profile cache's format (``engine.profiling.store``); one clear error otherwise."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        interference = data.get("interference")
        if interference is not None:
            tables = {k: tuple(map(tuple, interference[k])) for k in ("alone_ms", "lane_alone_ms", "concurrent_ms")}
            interference = Interference(
                tuple(interference["rows"]), tuple(interference["tokens"]), int(interference["lane_threads"]), **tables
            )
        profile = CostProfile(
            tuple(data["batch_sizes"]),
            tuple(data["tokens"]),
            tuple(map(tuple, data["verify_ms"])),
            tuple(data["draft_ms"]),
            dict(data["machine"]),
            interference,
        )
    except FileNotFoundError:
        raise ValueError(f"profile file {path} does not exist") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"profile file {path} is not a step-cost profile ({type(exc).__name__}: {exc})") from None
    return MeasuredCost(profile, str(path))
