"""The one-line answer of a comparison: which engine is fastest, and whether the figures support it.

The verdict reads only the tokens/s × AR intervals of ``metrics.rounds``
(the median of the per-round ratios with the interval a repeat run's median
falls in). AR's own noise is already inside them: each round's ratio divides by
AR's figure of that round, so a slow AR round widens every other engine's
interval. Against AR, each other engine is

* **faster** – its whole interval is above 1 (AR over itself is exactly 1 in every round);
* **the same** – its whole interval lies within ±``SAME_MARGIN`` of 1 (an equivalence
  statement: a repeat run would not tell it from AR by more than the margin);
* **within noise** – its interval contains 1 but reaches past the margin: the rounds do not
  tell it from AR, nor show that it is the same;
* **slower** – its whole interval is below 1.

The *fastest* engine is named only when its interval clears every other's
(AR's included); otherwise the line says no engine is clearly fastest. Because the
intervals predict a repeat run, a verdict names only what running the same
comparison again would, with 95 % odds per engine, not contradict. Fewer
than ``MIN_ROUNDS`` rounds give no verdict at all: the min–max of two rounds
holds the median only half the time. Nothing here knows about engines beyond
their labels; ``label`` turns them into the names a reader sees.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from metrics.rounds import REFERENCE_INTERVAL, RatioInterval

MIN_ROUNDS = 3  # the min–max of 3 rounds holds the median with probability 0.75; of 2, only 0.5
# ±10 %: the width the default Live run is sized to reach on a quiet machine; a narrower interval is "the same"
SAME_MARGIN = 0.10


class Standing(enum.StrEnum):
    FASTER = "faster"
    SAME = "the same"
    WITHIN_NOISE = "within noise"
    SLOWER = "slower"


def standing(ratio: RatioInterval, margin: float = SAME_MARGIN) -> Standing:
    """Where an engine's tok/s × AR interval stands against AR's exact 1 (``margin``: of "the same")."""
    if ratio.lo > 1.0:
        return Standing.FASTER
    if ratio.hi < 1.0:
        return Standing.SLOWER
    if ratio.rounds > 1 and ratio.lo >= 1.0 - margin and ratio.hi <= 1.0 + margin:
        return Standing.SAME
    return Standing.WITHIN_NOISE


@dataclass(frozen=True)
class Verdict:
    rounds: int  # the fewest rounds any engine has a ratio for
    fastest: str | None  # named only when its interval clears every other's
    standings: tuple[tuple[str, Standing, RatioInterval], ...]  # every engine but the reference, fastest first
    problem: str | None  # why there is no verdict (too few rounds, no reference)
    reference: str = "ar"

    def line(self, label: Callable[[str], str] = str) -> str:
        """The verdict in one line, e.g. ``PDV is fastest: 1.26× AR (1.12–1.40) over 5 rounds; …``."""
        if self.problem is not None:
            return f"No verdict yet: {self.problem}."
        ref = label(self.reference)
        parts = []
        for name, where, ratio in self.standings:
            if name == self.fastest:
                continue
            if where == Standing.WITHIN_NOISE:
                parts.append(f"{label(name)} within noise of {ref}: {ratio.text(ref)}")
            elif where == Standing.SAME:
                margin = f"±{round(SAME_MARGIN * 100)} %"
                parts.append(f"{label(name)} the same as {ref} within {margin}: {ratio.text(ref)}")
            else:
                parts.append(f"{label(name)} {where} than {ref}: {ratio.text(ref)}")
        if self.fastest == self.reference:
            head = f"{ref} is fastest over {self.rounds} rounds"
        elif self.fastest is not None:
            ratio = next(r for n, _, r in self.standings if n == self.fastest)
            head = f"{label(self.fastest)} is fastest: {ratio.text(ref)} over {self.rounds} rounds"
        else:
            head = f"No engine is clearly fastest over {self.rounds} rounds"
        return head + ("; " + "; ".join(parts) if parts else "") + "."


def verdict(
    tok_s_x_ar: Mapping[str, RatioInterval | None], reference: str = "ar", min_rounds: int = MIN_ROUNDS
) -> Verdict:
    """The verdict of engines' tokens/s × ``reference`` intervals (one per engine, the reference's included)."""
    if reference not in tok_s_x_ar:
        return Verdict(0, None, (), f"the comparison has no {reference.upper()} run to compare with", reference)
    measured = {name: r for name, r in tok_s_x_ar.items() if r is not None and name != reference}
    missing = [name for name, r in tok_s_x_ar.items() if r is None]
    if missing:
        return Verdict(0, None, (), f"no ratio yet for {', '.join(missing)}", reference)
    if not measured:
        return Verdict(0, None, (), "no engine to compare with", reference)
    rounds = min(r.rounds for r in measured.values())
    if rounds < min_rounds:
        done = f"{rounds} round{'s' if rounds != 1 else ''}"
        return Verdict(rounds, None, (), f"{done} measured, a verdict needs at least {min_rounds}", reference)
    ranked = sorted(measured.items(), key=lambda item: item[1].median, reverse=True)
    standings = tuple((name, standing(r), r) for name, r in ranked)
    everyone = {**measured, reference: REFERENCE_INTERVAL}
    top = max(everyone, key=lambda name: everyone[name].median)
    clears = all(everyone[top].clears_above(r) for name, r in everyone.items() if name != top)
    return Verdict(rounds, top if clears else None, standings, None, reference)
