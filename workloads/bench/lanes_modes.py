"""Lanes at once against lanes taking turns, with the fair reference, at one closed-loop load point.

Every competitor is an engine with a lane mode: AR and Baseline taking turns
(one lane), Baseline's batch split over two one-core lanes at once
(``--colocated-lanes 2``: the parallelism any engine could use), and PD and
PDV both taking turns and at once. They run one after another on the same
held-out prompts, every round, in rotating order, so each round's ratios
compare engines on the same machine state. Printed: tokens/s × AR per round
(median and min–max), PDV ÷ max(Baseline, PD) per round in each mode, and
what PDV's step choice picked (atomic and pipelined groups); then one JSON
line with every run's figures.

    python -m workloads.bench.lanes_modes --concurrency 4 --num-requests 8 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from engine.config import EngineConfig, LaneCompute, SamplingParams
from workloads.bench.common import HELD_OUT, rotated
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.run_spec import RunHooks, RunSettings
from workloads.drivers.sweep import SweepPlan, run_sweep
from workloads.drivers.trace import DatasetSpec, load_trace


class Competitor(NamedTuple):
    label: str
    engine: str
    config: EngineConfig


class RunFigures(NamedTuple):
    label: str
    round: int
    tok_s: float
    tpot_p50_ms: float | None
    same_as_ar: bool
    picked: dict[str, int] | None  # PDV: groups run atomically and pipelined; None for other engines


def competitors(base: EngineConfig) -> tuple[Competitor, ...]:
    at_once = replace(base, lane_compute=LaneCompute.AT_ONCE)
    return (
        Competitor("ar", "ar", base),
        Competitor("baseline", "baseline", base),
        Competitor("baseline halves at-once", "baseline", replace(at_once, colocated_lanes=2)),
        Competitor("pd", "pd", base),
        Competitor("pd at-once", "pd", at_once),
        Competitor("pdv", "pdv", base),
        Competitor("pdv at-once", "pdv", at_once),
    )


def run_rounds(pair, trace, concurrency: int, rounds: int, params: SamplingParams) -> list[RunFigures]:
    """Every competitor once per round, in rotating order; each run's figures."""
    figures: list[RunFigures] = []
    built: list = []

    def keep(name, pair_, config):
        from engine.schedulers.registry import make_engine

        built.append(make_engine(name, pair_, config))
        return built[-1]

    for round_ in range(rounds):
        outputs: dict[str, list[list[int]]] = {}
        for comp in rotated(competitors(EngineConfig()), round_):
            plan = SweepPlan((comp.engine,), (ClosedLoop(concurrency),), RunSettings(config=comp.config, params=params))
            built.clear()
            (result,) = run_sweep(pair, trace, plan, None, hooks=RunHooks(engine_factory=keep))
            outputs[comp.label] = [list(r.output_token_ids) for r in result.requests]
            drafting = getattr(built[0], "drafting", None)
            picked = {str(mode): n for mode, n in drafting.picked.items()} if drafting is not None else None
            m = result.summary
            figures.append(RunFigures(comp.label, round_, m.output_tok_s or 0.0, m.tpot_p50_ms, False, picked))
        ar = outputs["ar"]
        figures[-len(outputs):] = [f._replace(same_as_ar=outputs[f.label] == ar) for f in figures[-len(outputs):]]
    return figures


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def report(figures: list[RunFigures]) -> list[str]:
    """The human table: × AR per competitor, PDV ÷ max(Baseline, PD) per mode, PDV's picks."""
    by = {(f.label, f.round): f for f in figures}
    rounds = sorted({f.round for f in figures})
    lines = ["| competitor | tok/s (median) | × AR, median (min–max) | TPOT p50 ms | outputs = AR's | PDV picks |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for label in dict.fromkeys(f.label for f in figures):
        runs = [by[(label, r)] for r in rounds]
        ratios = [by[(label, r)].tok_s / by[("ar", r)].tok_s for r in rounds]
        tpot = [f.tpot_p50_ms for f in runs if f.tpot_p50_ms is not None]
        picks = ""
        if runs[0].picked is not None:
            atomic, pipelined = (sum(f.picked[k] for f in runs) for k in ("atomic", "pipelined"))
            picks = f"{atomic} atomic / {pipelined} pipelined groups (warm-up included)"
        lines.append(
            f"| {label} | {statistics.median(f.tok_s for f in runs):.1f} | {spread(ratios)} | "
            f"{statistics.median(tpot):.0f} | {all(f.same_as_ar for f in runs)} | {picks} |"
            if tpot else f"| {label} | – | – | – | – | |"
        )
    for pdv, modes in (("pdv", ("baseline", "pd")), ("pdv at-once", ("baseline", "pd", "pd at-once"))):
        per_round = [by[(pdv, r)].tok_s / max(by[(m, r)].tok_s for m in modes) for r in rounds]
        lines.append(f"* {pdv} ÷ max({', '.join(modes)}), per round: "
                     f"{', '.join(f'{x:.3f}' for x in per_round)}; median (min–max) {spread(per_round)}")
    fair = [by[("baseline halves at-once", r)].tok_s / by[("baseline", r)].tok_s for r in rounds]
    lines.append(f"* baseline halves at-once ÷ baseline, per round: {spread(fair)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.bench.lanes_modes", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="smol")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--num-requests", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from engine.models.pair import load_model_pair
    from engine.profiling import prepare_profiles

    pair = load_model_pair(preset=args.preset, device="cpu")
    trace = load_trace(DatasetSpec(str(HELD_OUT)), pair, args.num_requests, 0, args.max_new_tokens)
    for comp in competitors(EngineConfig()):
        prepare_profiles(pair, comp.config, (comp.engine,))
    params = SamplingParams(max_new_tokens=args.max_new_tokens, seed=0)
    figures = run_rounds(pair, trace, args.concurrency, args.rounds, params)
    print(f"C = {args.concurrency}, {len(trace)} held-out prompts ({Path(HELD_OUT).name}), "
          f"{args.max_new_tokens} new tokens, {args.rounds} rounds")  # fmt: skip
    print("\n".join(report(figures)))
    print(json.dumps({"concurrency": args.concurrency, "runs": [f._asdict() for f in figures]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
