"""How many of a row's drafted tokens the verifier accepts: per-position acceptance, sampled.

``alpha[k]`` is the chance that draft position k + 1 is accepted given that
positions 1..k were (the conditional rate, the one the acceptance rule makes
independent of L); a row drafting L tokens accepts the first ``a`` where each
position in turn passes with its ``alpha``, so

    P(accepted >= k) = alpha_1 * ... * alpha_k,   E[tokens] = 1 + sum_k P(accepted >= k)

Positions past the last known one take the last known rate. Two sources:

* ``from_steps``: a real run's recorded verify steps (every replay keeps them
  in outputs.jsonl's ``steps``; ``from_run_dir`` reads them), counted exactly as
  trials (steps that drafted position k with 1..k-1 accepted) and acceptances;
* ``parametric``: one stated rate for every position.

Sampling is seeded (numpy's generator), so a simulation is deterministic for a seed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metrics.recorded_steps import read_steps
from sim.policies import StepRecord


@dataclass(frozen=True)
class Acceptance:
    alpha: tuple[float, ...]  # [k]: P(position k+1 accepted | positions 1..k accepted)
    source: str  # where the rates came from, printed beside every projection

    def __post_init__(self) -> None:
        if not self.alpha:
            raise ValueError("acceptance needs at least one position's rate")
        if not all(0.0 <= a <= 1.0 for a in self.alpha):
            raise ValueError(f"acceptance rates must be in 0..1, got {self.alpha}")

    @classmethod
    def parametric(cls, alpha: float) -> Acceptance:
        return cls((alpha,), f"parametric: every position accepted with probability {alpha:g}")

    @classmethod
    def from_steps(cls, steps: Iterable[StepRecord], source: str) -> Acceptance:
        """Conditional rates per position from verify steps; positions with no trial take the one before."""
        trials: list[int] = []
        accepts: list[int] = []
        for step in steps:
            tried = min(step.draft_len, step.accepted + 1)  # positions 1..accepted passed, the next one failed
            while len(trials) < step.draft_len:
                trials.append(0)
                accepts.append(0)
            for k in range(tried):
                trials[k] += 1
            for k in range(step.accepted):
                accepts[k] += 1
        if not trials or trials[0] == 0:
            raise ValueError(f"{source}: no drafted tokens to take acceptance from")
        alpha: list[float] = []
        for t, a in zip(trials, accepts, strict=True):
            alpha.append(a / t if t else alpha[-1])
        summary = ", ".join(f"{a:.2f}" for a in alpha[:8])
        return cls(tuple(alpha), f"{source}: per-position rates {summary} from {trials[0]} drafting steps")

    def rate(self, position: int) -> float:
        """``alpha`` of 1-based ``position``."""
        return self.alpha[min(position, len(self.alpha)) - 1]

    def sample(self, lens: list[int], rng: np.random.Generator) -> list[int]:
        """Accepted tokens of rows drafting ``lens`` tokens each."""
        longest = max(lens, default=0)
        if longest == 0:
            return [0] * len(lens)
        rates = np.array([self.rate(k + 1) for k in range(longest)])
        passed = rng.random((len(lens), longest)) < rates  # [rows, positions]
        passed &= np.arange(longest)[None, :] < np.array(lens)[:, None]
        return np.cumprod(passed, axis=1).sum(axis=1).tolist()

    def expected_tokens(self, draft_len: int) -> float:
        """E[tokens a row emits] drafting ``draft_len``: the accepted prefix and the correction or bonus token."""
        reach, total = 1.0, 1.0
        for k in range(draft_len):
            reach *= self.rate(k + 1)
            total += reach
        return total


def from_run_dir(path: str | Path, engine: str | None = None) -> Acceptance:
    """Acceptance from the verify steps a run directory's outputs.jsonl recorded (``engine``'s only, if named)."""
    path = Path(path)
    outputs = path / "outputs.jsonl" if path.is_dir() else path
    if not outputs.is_file():
        raise ValueError(f"{outputs} does not exist: name a run directory written by `python -m workloads replay`")
    steps: list[StepRecord] = []
    for n, line in enumerate(outputs.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if engine is None or row.get("engine") == engine:
                steps += read_steps(row.get("steps")) or ()
        except ValueError as exc:
            raise ValueError(f"{outputs}:{n}: {exc}") from None
    label = f"{outputs}" + (f" ({engine})" if engine else "")
    return Acceptance.from_steps(steps, label)
