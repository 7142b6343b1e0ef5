"""Lanes at once against lanes taking turns, with the fair reference, at one closed-loop load point.

Every competitor is an engine with a lane mode: AR and Baseline taking turns
(one lane), Baseline's batch split over two one-core lanes at once
(``--colocated-lanes 2``: the parallelism any engine could use), and PD and
PDV both taking turns and at once. They run one after another on the same
held-out prompts, every round (``--rounds``), in a balanced order, so each
round's ratios compare engines on the same machine state. Recorded per run:
tokens/s, TPOT p50, whether the outputs equal AR's, the share of the
machine's CPU other processes and the hypervisor took meanwhile
(``metrics.host_noise``), and for PDV the groups
its step choice ran atomically and pipelined in the measured run (the
replay's warm-up left out: ``RunResult.step_modes``).

``python -m workloads bench --parts lane-modes --lane-modes-concurrency 4``
appends its rows to ``--lane-modes-csv`` (``<out>/lane-modes/lane-modes.csv``
by default) and rewrites ``summary.csv`` beside it from every row there, one
table row per load point and competitor, so calls at several concurrencies
make one table; docs/results.md renders that summary (``workloads.bench.docs``).
``goals.csv`` beside it reads PDV's goal at every load point from the same
rows: PDV >= 0.97x the better of Baseline and PD, read as PDV ÷ each of them
in the same rounds (``workloads.bench.pdv_goal``), with the interval a repeat
run's median falls in (``metrics.rounds``), which says whether the rounds tell
the medians from 0.97.
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from tqdm import tqdm

from engine.config import DRAFTERS, EngineConfig, LaneCompute, SamplingParams, flag
from metrics.host_noise import host_noise, read_host
from workloads.bench import pdv_goal
from workloads.bench.common import (
    BenchContext,
    Listed,
    PartResult,
    after_rounds,
    comma_list,
    find,
    held_out,
    one_of,
    ratio_summary,
    read_csv,
    rotated,
    same_output_note,
    spread,
    write_csv,
)
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.run_spec import RunSettings
from workloads.drivers.sweep import SweepPlan, run_sweep
from workloads.drivers.trace import Trace

NAME = "11-lane-modes"
DIRECTORY = "lane-modes"
TITLE = "Lanes at once against taking turns, with the fair reference"
SUMMARY = "summary.csv"
GOALS = "goals.csv"  # PDV's goal per load point, from every row of the CSV
# PDV (in each mode) against the better of the engines it must not lose to in that mode
PDV_AGAINST = {
    "pdv": pdv_goal.AGAINST,
    "pdv at-once": ("baseline", "pd", "pd at-once"),
    "pdv elastic": ("baseline", "pd", "pd elastic"),
    "pdv prefill-after off": ("baseline", "pd prefill-after off"),
}
# the arbiter's prefill interleaving (--prefill-after-turns 1, the default): each engine with it against itself
# without
WITH_AGAINST_WITHOUT = {"pd": "pd prefill-after off", "pdv": "pdv prefill-after off"}
ELASTIC_AGAINST_TURNS = {"pd elastic": "pd", "pdv elastic": "pdv"}  # elastic lanes against taking turns
LABELS = (
    "ar", "baseline", "baseline halves at-once", "pd", "pd at-once", "pdv", "pdv at-once",
    "pd prefill-after off", "pdv prefill-after off", "pd elastic", "pdv elastic",
)  # fmt: skip
DEFAULT_LABELS = LABELS[:7]  # the lane modes and the fair reference; the arbiter's variants and elastic when named


@dataclass(frozen=True)
class LaneModesOptions:
    """The load point and its trace (the rounds are the bench's ``--rounds``)."""

    concurrency: int = field(default=4, metadata=flag("--lane-modes-concurrency", int, "closed-loop C"))
    requests: int = field(default=8, metadata=flag("--lane-modes-requests", int, "held-out prompts per run"))
    max_new_tokens: int = field(default=32, metadata=flag("--lane-modes-max-new-tokens", int, "per request"))
    csv: Path | None = field(
        default=None, metadata=flag("--lane-modes-csv", Path, "CSV to append to; off: <out>/lane-modes/lane-modes.csv")
    )
    labels: tuple[str, ...] = field(
        default=Listed(DEFAULT_LABELS),
        metadata=flag("--lane-modes-competitors", comma_list(one_of(LABELS), "competitors"), "comma list"),
    )
    drafter: str = field(
        default=EngineConfig.drafter,
        metadata=flag("--lane-modes-drafter", str, "every speculative competitor's drafter", choices=DRAFTERS),
    )

    def __post_init__(self) -> None:
        for name in ("concurrency", "requests", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"--lane-modes-{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if "ar" not in self.labels:
            raise ValueError("--lane-modes-competitors needs ar: every ratio is to AR's run in the same round")

    def quick(self) -> LaneModesOptions:
        # two requests at C = 2 with short outputs: seven engines run end to end in seconds on the tiny pair
        return replace(
            self, concurrency=min(self.concurrency, 2), requests=min(self.requests, 2),
            max_new_tokens=min(self.max_new_tokens, 8),
        )  # fmt: skip


class Competitor(NamedTuple):
    label: str
    engine: str
    config: EngineConfig


def competitors(base: EngineConfig, labels: tuple[str, ...] = DEFAULT_LABELS) -> tuple[Competitor, ...]:
    """The competitors named by ``labels``, in the catalogue's order."""
    at_once = replace(base, lane_compute=LaneCompute.AT_ONCE)
    no_interleave = replace(base, prefill_after_turns=None)
    elastic = replace(base, lane_compute=LaneCompute.ELASTIC)
    catalogue = (
        Competitor("ar", "ar", base),
        Competitor("baseline", "baseline", base),
        Competitor("baseline halves at-once", "baseline", replace(at_once, colocated_lanes=2)),
        Competitor("pd", "pd", base),
        Competitor("pd at-once", "pd", at_once),
        Competitor("pdv", "pdv", base),
        Competitor("pdv at-once", "pdv", at_once),
        Competitor("pd prefill-after off", "pd", no_interleave),
        Competitor("pdv prefill-after off", "pdv", no_interleave),
        Competitor("pd elastic", "pd", elastic),
        Competitor("pdv elastic", "pdv", elastic),
    )
    return tuple(c for c in catalogue if c.label in labels)


def group_name(options: LaneModesOptions) -> str:
    """A load point's name in the table: its C, and its drafter where that is not the default."""
    default = options.drafter == EngineConfig.drafter
    return f"C={options.concurrency}" + ("" if default else f", {options.drafter}")


def measure(ctx: BenchContext, options: LaneModesOptions, trace: Trace) -> list[dict[str, Any]]:
    """Every competitor once per round, in a balanced order: one row per round and competitor."""
    params = SamplingParams(max_new_tokens=options.max_new_tokens, seed=0)
    group = group_name(options)
    load_start = os.getloadavg()[0]
    rows = []
    comps = competitors(EngineConfig(drafter=options.drafter), options.labels)
    bar = tqdm(total=ctx.settings.rounds * len(comps), unit="run", file=sys.stderr)
    for round_ in range(ctx.settings.rounds):
        outputs: dict[str, list[list[int]]] = {}
        for comp in rotated(comps, round_):
            bar.set_description(f"{group} round {round_ + 1} {comp.label}", refresh=False)
            settings = RunSettings(config=comp.config, params=params)
            plan = SweepPlan((comp.engine,), (ClosedLoop(options.concurrency),), settings)
            before = read_host()
            (result,) = run_sweep(ctx.pair, trace, plan, None)
            noise = host_noise(before, read_host())  # what else the machine did meanwhile: a round's outliers
            outputs[comp.label] = [list(r.output_token_ids) for r in result.requests]
            m, modes = result.summary, result.step_modes
            rows.append(
                {"group": group, "round": round_, "label": comp.label, "engine": comp.engine,
                 "lane_compute": str(comp.config.lane_compute), "colocated_lanes": comp.config.colocated_lanes,
                 "output_tok_s": m.output_tok_s, "tpot_p50_ms": m.tpot_p50_ms,
                 "atomic_groups": None if modes is None else modes.atomic,
                 "pipelined_groups": None if modes is None else modes.pipelined,
                 "requests": len(trace), "max_new_tokens": options.max_new_tokens,
                 "others_cpu_share": noise.others_share, "steal_share": noise.steal_share}
            )  # fmt: skip
            bar.update()
        for row in rows[-len(outputs) :]:
            row["same_output_as_ar"] = outputs[row["label"]] == outputs["ar"]
    bar.close()
    load_end = os.getloadavg()[0]
    return [{**r, "load_1min_start": load_start, "load_1min_end": load_end} for r in rows]


def _parsed(row: dict[str, Any]) -> dict[str, Any]:
    """A row as read back from the CSV (every value a string), with its numbers and flags typed again."""

    def number(value: Any, kind: type) -> Any:
        return None if value in (None, "") else kind(value)

    return {
        **row, "round": int(row["round"]), "output_tok_s": number(row["output_tok_s"], float),
        "tpot_p50_ms": number(row["tpot_p50_ms"], float), "atomic_groups": number(row["atomic_groups"], int),
        "pipelined_groups": number(row["pipelined_groups"], int),
        "same_output_as_ar": str(row["same_output_as_ar"]) == "True",
    }  # fmt: skip


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``ratio_summary`` of tokens/s and TPOT p50, each competitor against AR in the same round."""
    return ratio_summary(rows, "output_tok_s", "ar", NAME) + ratio_summary(
        rows, "tpot_p50_ms", "ar", NAME, lower_is_better=True
    )


def table(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The docs table: one row per load point and competitor."""
    summary = summarise(rows)
    groups = list(dict.fromkeys(r["group"] for r in rows))
    tok_s = [s for s in summary if s["metric"] == "output_tok_s"]
    out = []  # the catalogue's order within a load point, whatever order the rounds ran in
    for s in sorted(tok_s, key=lambda s: (groups.index(s["group"]), LABELS.index(s["label"]))):
        own = [r for r in rows if (r["group"], r["label"]) == (s["group"], s["label"])]
        tpot = find(summary, s["group"], s["label"], "tpot_p50_ms")
        groups = [r for r in own if r["atomic_groups"] is not None]
        picks = f"{sum(r['atomic_groups'] for r in groups)} / {sum(r['pipelined_groups'] for r in groups)}"
        out.append(
            {"C": s["group"].removeprefix("C="), "competitor": s["label"],
             "tok/s (median)": "–" if s["median"] is None else f"{s['median']:.1f}",
             "× AR, median (min–max)": spread(s),
             "TPOT p50 ms": "–" if tpot is None or tpot["median"] is None else f"{tpot['median']:.0f}",
             "outputs = AR's": str(all(r["same_output_as_ar"] for r in own)),
             "PDV's groups: atomic / pipelined": picks if groups else "", "rounds": str(s["rounds"])}
        )  # fmt: skip
    return out


def notes(rows: list[dict[str, Any]]) -> list[str]:
    """PDV ÷ the better of the engines it competes with in each mode, and the fair reference ÷ Baseline, per round."""
    lines = []
    for group in dict.fromkeys(r["group"] for r in rows):
        pairs = {f"{pdv} ÷ max({', '.join(against)})": (pdv, against) for pdv, against in PDV_AGAINST.items()}
        pairs["baseline halves at-once ÷ baseline"] = ("baseline halves at-once", ("baseline",))
        for against_one in (WITH_AGAINST_WITHOUT, ELASTIC_AGAINST_TURNS):
            pairs |= {f"{label} ÷ {other}": (label, (other,)) for label, other in against_one.items()}
        pairs |= {f"pdv ÷ {other}": ("pdv", (other,)) for other in PDV_AGAINST["pdv"]}
        for name, (label, against) in pairs.items():
            if per_round := pdv_goal.per_round(rows, group, label, against):
                listed = ", ".join(f"{x:.3f}" for x in per_round)
                lines.append(
                    f"{group}: {name}, per round: {listed}; median {statistics.median(per_round):.3f} "
                    f"({min(per_round):.3f}–{max(per_round):.3f})."
                )
    return lines + [
        "PDV's groups are summed over the rounds and count the measured runs only (each replay's warm-up left out).",
        same_output_note(rows, "same_output_as_ar"),
    ]


def record(csv_path: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Append ``rows`` to ``csv_path``; rewrite the summary table beside it from every row there. Every row.

    A load point measured again by a later call gets round numbers after the ones already there, so its
    rounds stay apart.
    """
    every = after_rounds([_parsed(r) for r in read_csv(csv_path)], rows)
    write_csv(csv_path, every)
    write_csv(csv_path.parent / SUMMARY, table(every))
    write_csv(csv_path.parent / GOALS, pdv_goal.goal_rows(every))
    return every


def run(ctx: BenchContext) -> PartResult:
    from engine.profiling import prepare_profiles

    options = ctx.options(LaneModesOptions)
    trace = held_out(ctx, options.requests, options.max_new_tokens)
    for comp in competitors(EngineConfig(), options.labels):  # at once reads the profile's interference figures too
        prepare_profiles(ctx.pair, comp.config, (comp.engine,))
    rows = measure(ctx, options, trace)
    record(options.csv or ctx.out / DIRECTORY / "lane-modes.csv", rows)
    return PartResult(NAME, TITLE, rows, summarise(rows), pdv_goal.goals(rows, NAME), notes(rows))
