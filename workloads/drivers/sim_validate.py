"""The simulator checked against this machine: real runs, interleaved in rounds, and their simulations.

``validate`` runs the plan's engines on the real pair with ``run_sweep``
(rounds in a balanced order, each engine's figure its median over rounds),
then simulates each engine at each load point on the same trace with this
machine's measured step-cost profile and the acceptance the real engine's own
runs recorded (its verify steps, pooled over rounds), and compares: output
tokens/s, TPOT p50 and p99, TTFT p50, simulated / measured - 1, each within
``tolerance`` or not. The simulated runs go into the same run directory
(marked simulated), the comparison into ``validation.csv`` and ``validation.md``.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.config import EngineName
from engine.profiling.cost_profile import CostProfile
from metrics.export import write_run, write_summary
from sim.acceptance import Acceptance
from sim.measured_cost import MeasuredCost
from workloads.drivers.replay import PairLike
from workloads.drivers.run_result import RunResult
from workloads.drivers.run_spec import RunHooks
from workloads.drivers.simulate import SimSetup, sim_run_id, simulate
from workloads.drivers.sweep import SweepPlan, run_sweep
from workloads.drivers.trace import Trace

HELDOUT = Path(__file__).resolve().parents[1] / "datasets" / "data" / "sharegpt_heldout.json"
FIGURES = {"tok/s": "output_tok_s", "TPOT p50 ms": "tpot_p50_ms", "TPOT p99 ms": "tpot_p99_ms",
           "TTFT p50 ms": "ttft_p50_ms"}  # fmt: skip
VALIDATION_CSV = "validation.csv"
VALIDATION_MD = "validation.md"


@dataclass(frozen=True)
class ValidationRow:
    engine: str
    load: str
    figure: str
    measured: float | None  # median over the real rounds
    simulated: float | None
    tolerance: float

    @property
    def error(self) -> float | None:
        """simulated / measured - 1 (None where either is missing)."""
        if self.measured is None or self.simulated is None or self.measured == 0:
            return None
        return self.simulated / self.measured - 1

    @property
    def within(self) -> bool | None:
        return None if self.error is None else abs(self.error) <= self.tolerance


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def validate(
    pair: PairLike,
    trace: Trace,
    plan: SweepPlan,
    profile: CostProfile,
    vocab_size: int,
    max_context: int,
    out: str | Path,
    meta: dict[str, Any] | None = None,
    hooks: RunHooks | None = None,
    tolerance: float = 0.10,
    seed: int = 0,
) -> list[ValidationRow]:
    """See the module docstring; writes the real and the simulated runs and the comparison to ``out``."""
    real = run_sweep(pair, trace, plan, out, meta, hooks)
    cost = MeasuredCost(profile, "this machine's cached profile (engine.profiling)")
    settings = plan.settings
    rows: list[ValidationRow] = []
    for policy in plan.policies:
        for name in plan.engines:
            engine = EngineName.parse(name)
            runs = [r for r in real if r.engine == engine and r.policy == policy]
            if not runs:
                continue
            setup = SimSetup(cost, _acceptance(runs, engine), settings.config, settings.params, max_context,
                             vocab_size, seed)  # fmt: skip
            simulated = simulate(trace, engine, policy, setup, sim_run_id(engine, policy, runs[0].run_id))
            run_meta = {"simulated": setup.assumptions(), "trace": trace.describe(), **(meta or {})}
            write_run(out, simulated.record(run_meta))
            write_summary(out, [{**asdict(simulated.summary), "rounds": 1}], {})
            rows += _compare(runs, simulated, tolerance)
    write_validation(out, rows)
    return rows


def _acceptance(runs: list[RunResult], engine: EngineName) -> Acceptance | None:
    if not engine.speculative:
        return None
    steps = [step for r in runs for request in r.requests for step in request.steps]
    return Acceptance.from_steps(steps, f"the real {engine} runs' recorded steps ({len(runs)} rounds)")


def _compare(runs: list[RunResult], simulated: RunResult, tolerance: float) -> list[ValidationRow]:
    load = f"c{runs[0].concurrency}" if runs[0].request_rate is None else f"r{runs[0].request_rate:g}"
    return [
        ValidationRow(
            str(runs[0].engine),
            load,
            label,
            _median([getattr(r.summary, field) for r in runs]),
            getattr(simulated.summary, field),
            tolerance,
        )
        for label, field in FIGURES.items()
    ]


def format_validation(rows: list[ValidationRow]) -> str:
    """The predicted-vs-measured table as Markdown."""
    lines = [
        "| engine | load | figure | measured (median) | simulated | error | within |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        measured = "—" if row.measured is None else f"{row.measured:.1f}"
        simulated = "—" if row.simulated is None else f"{row.simulated:.1f}"
        error = "—" if row.error is None else f"{row.error:+.1%}"
        within = "—" if row.within is None else ("yes" if row.within else "no")
        lines.append(f"| {row.engine} | {row.load} | {row.figure} | {measured} | {simulated} | {error} | {within} |")
    return "\n".join(lines)


def write_validation(out: str | Path, rows: list[ValidationRow]) -> None:
    out = Path(out)
    with open(out / VALIDATION_CSV, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(("engine", "load", "figure", "measured", "simulated", "error", "tolerance", "within"))
        for r in rows:
            writer.writerow((r.engine, r.load, r.figure, r.measured, r.simulated, r.error, r.tolerance, r.within))
    (out / VALIDATION_MD).write_text(format_validation(rows) + "\n", encoding="utf-8")
