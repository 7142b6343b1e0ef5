"""PDV's goal, read per load point: PDV's tokens/s >= ``GOAL``x the better of Baseline's and PD's in the same round.

Any part whose rows carry ``group`` (the load point), ``round``, ``label`` (the
competitor) and ``output_tok_s`` is read the same way: the lane-modes part and
the suite's load sweep. Each load point gets its per-round ratios, their median
and the 95 % interval a repeat run's median falls in (``metrics.rounds``); the
goal counts as met when the median reaches ``GOAL``, and "the rounds tell"
says whether that interval lies wholly above or below it.
"""

from __future__ import annotations

from typing import Any

from metrics.rounds import IntervalKind, interval
from workloads.bench.common import Goal

GOAL = 0.97
AGAINST = ("baseline", "pd")  # the engines PDV must not lose to, with the defaults
REPEAT = "a repeat run's median, 95 %"


def per_round(rows: list[dict[str, Any]], group: str, label: str, against: tuple[str, ...]) -> list[float]:
    """``label``'s tokens/s ÷ the best of ``against``'s in the same round, for every round of ``group`` with all."""
    by = {(r["label"], r["round"]): r["output_tok_s"] for r in rows if r["group"] == group}
    out = []
    for round_ in sorted({r for _, r in by}):
        others, mine = [by.get((a, round_)) for a in against], by.get((label, round_))
        if mine and all(others):  # a run that emitted nothing has no rate to divide
            out.append(mine / max(others))
    return out


def goal_rows(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per load point with PDV, Baseline and PD runs in a common round: the goal's table."""
    out = []
    for group in dict.fromkeys(r["group"] for r in rows):
        ratios = per_round(rows, group, "pdv", AGAINST)
        if not ratios:
            continue
        repeat = interval(ratios, IntervalKind.REPEAT_RUN)
        told = "met" if repeat.lo >= GOAL else "missed" if repeat.hi < GOAL else f"not told apart from {GOAL}"
        out.append(
            {"load": group, "PDV ÷ max(Baseline, PD), per round": ", ".join(f"{x:.3f}" for x in ratios),
             "median (min–max)": f"{repeat.median:.3f} ({min(ratios):.3f}–{max(ratios):.3f})",
             REPEAT: f"{repeat.lo:.3f}–{repeat.hi:.3f}",
             f"median >= {GOAL}": "met" if repeat.median >= GOAL else "missed", "the rounds tell": told}
        )  # fmt: skip
    return out


def goals(rows: list[dict[str, Any]], part: str) -> list[Goal]:
    """``goal_rows`` as the bench's goals of ``part``: one per load point."""
    return [
        Goal(part, f"PDV >= {GOAL}x max(Baseline, PD) (tokens/s, {g['load']})",
             f"{g['median (min–max)']}; a repeat run's median {g[REPEAT]}; the rounds tell: {g['the rounds tell']}",
             g[f"median >= {GOAL}"] == "met")
        for g in goal_rows(rows)
    ]  # fmt: skip
