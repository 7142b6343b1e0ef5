"""PDV's goal, read per load point: PDV's tokens/s >= ``GOAL``x the better of Baseline's and PD's.

Any part whose rows are ``RateRow``s (``group``: the load point, ``round``,
``label``: the competitor, ``output_tok_s``) is read the same way: the suite's
load sweep and its mixed traffic.

PDV is at least ``GOAL``x the better of two engines exactly when it is at least
``GOAL``x each of them. So the goal is read as two paired ratios, PDV ÷ Baseline
and PDV ÷ PD in the same round, each with its median over the rounds and the
95 % interval a repeat run's median falls in (``metrics.rounds``). It is met when
both medians reach ``GOAL``. The rounds tell it met when both intervals lie above
``GOAL``, and missed when either lies wholly below.

The ratio to the better engine is *not* read as PDV ÷ max(Baseline, PD) per
round. The larger of two noisy rates is whichever had the luckier round, so it
sits above the better engine's own rate. For two engines equal on average, each
off by a standard deviation s from round to round, the maximum is about
s / √π high. At this machine's s of about 7 %, an engine exactly as fast as both
would read about 0.96 against it. That per-round maximum is still reported
(``PER_ROUND_MAX``) as a stricter reading beside the goal's.

Where the rounds do not tell, ``TO_TELL`` estimates how many would
(``metrics.rounds.rounds_to_tell``: the measured median and spread taken as
they stand), which says whether more rounds could settle it at all.

``python -m workloads.bench.pdv_goal OUT ROWS.csv ...`` writes the table
(``goal_rows``) from parts' rows already on disk (``3-load.csv``, ``4-lanes.csv``),
a load point in several files read as more rounds of it. The bench writes it
as ``pdv-goal.csv`` in its directory.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from metrics.rounds import IntervalKind, interval, rounds_to_tell
from workloads.bench.common import Goal, read_csv, write_csv
from workloads.bench.rows import RateRow, after_rounds

GOAL = 0.97
AGAINST = ("baseline", "pd")  # the engines PDV must not lose to, with the defaults
NAMES = {"baseline": "Baseline", "pd": "PD"}
REPEAT = "a repeat run's median, 95 %"
MET, TOLD = f"median >= {GOAL}", "the rounds tell"
PER_ROUND_MAX = "PDV ÷ max(Baseline, PD) in each round (stricter), median (min–max)"
TO_TELL = "rounds a verdict would take at this spread (estimate)"
MOST = 10_000  # rounds past which no verdict is estimated
FILE = "pdv-goal.csv"  # in the bench directory


def per_round(rows: Sequence[RateRow], group: str, label: str, against: tuple[str, ...]) -> list[float]:
    """``label``'s tokens/s ÷ the best of ``against``'s in the same round, for every round of ``group`` with all."""
    by = {(r.label, r.round): r.output_tok_s for r in rows if r.group == group}
    out = []
    for round_ in sorted({r for _, r in by}):
        others, mine = [by.get((a, round_)) for a in against], by.get((label, round_))
        if mine and all(others):  # a run that emitted nothing has no rate to divide
            out.append(mine / max(others))
    return out


def _spread(ratios: list[float]) -> str:
    return interval(ratios, IntervalKind.MIN_MAX).text(digits=3)


def _to_tell(ratios: list[list[float]]) -> str:
    """``rounds_to_tell`` the verdict: both ratios' for "met", the fewest of those below the goal for "missed"."""
    if any(len(r) < 2 for r in ratios):
        return "unknown: one round has no spread"
    below = [r for r in ratios if statistics.median(r) < GOAL]
    needs = [rounds_to_tell(r, GOAL, MOST) for r in (below or ratios)]
    told = [n for n in needs if n is not None]
    if below and told:
        return f"about {min(told)}"
    return f"about {max(told)}" if len(told) == len(needs) else f"more than {MOST}"


def goal_rows(rows: Sequence[RateRow]) -> list[dict[str, str]]:
    """One row per load point with PDV, Baseline and PD runs in a common round: the goal's table, as its CSV."""
    out = []
    for group in dict.fromkeys(r.group for r in rows):
        pairs = {a: per_round(rows, group, "pdv", (a,)) for a in AGAINST}
        common = per_round(rows, group, "pdv", AGAINST)  # the rounds every one of them ran in
        if not common:
            continue
        row: dict[str, str] = {"load": group}
        verdicts = []
        for against, ratios in pairs.items():
            repeat = interval(ratios, IntervalKind.REPEAT_RUN)
            row[f"PDV ÷ {NAMES[against]}, median (min–max)"] = _spread(ratios)
            row[f"PDV ÷ {NAMES[against]}, {REPEAT}"] = repeat.bounds(digits=3)
            verdicts.append(repeat)
        row[MET] = "met" if all(v.median >= GOAL for v in verdicts) else "missed"
        row[TOLD] = (
            "met" if all(v.lo >= GOAL for v in verdicts)
            else "missed" if any(v.hi < GOAL for v in verdicts) else f"not told apart from {GOAL}"
        )  # fmt: skip
        row[TO_TELL] = _to_tell(list(pairs.values()))
        row[PER_ROUND_MAX] = _spread(common)
        row["rounds"] = str(len(common))
        out.append(row)
    return out


def goals(rows: Sequence[RateRow], part: str) -> list[Goal]:
    """``goal_rows`` as the bench's goals of ``part``: one per load point."""
    return [
        Goal(part, f"PDV >= {GOAL}x Baseline and PD (tokens/s, {g['load']})",
             "; ".join(f"÷ {name} {g[f'PDV ÷ {name}, median (min–max)']}, a repeat run's median "
                       f"{g[f'PDV ÷ {name}, {REPEAT}']}" for name in NAMES.values())
             + f"; the rounds tell: {g[TOLD]}",
             g[MET] == "met")
        for g in goal_rows(rows)
    ]  # fmt: skip


def read_rows(path: Path) -> list[RateRow]:
    """A part's rows from its CSV, as the rates the goal reads (an empty rate: ``None``)."""
    return [
        RateRow(group=r["group"], round=int(r["round"]), label=r["label"],
                output_tok_s=float(r["output_tok_s"]) if r["output_tok_s"] else None)
        for r in read_csv(path)
    ]  # fmt: skip


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m workloads.bench.pdv_goal OUT.csv ROWS.csv [ROWS.csv ...]", file=sys.stderr)
        return 2
    rows: list[RateRow] = []
    for path in argv[1:]:  # a load point in several files: each file's rounds after the ones before
        rows = after_rounds(rows, read_rows(Path(path)))
    table = goal_rows(rows)
    if not table:
        print("no load point has PDV, Baseline and PD in a common round", file=sys.stderr)
        return 1
    write_csv(Path(argv[0]), table)
    for g in table:
        print(f"{g['load']}: {g[MET]} (the rounds tell: {g[TOLD]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
