"""Part 4, lanes under mixed traffic: PDV against PD and Baseline under open-loop Poisson arrivals,
with long prompts arriving while earlier requests decode.

The trace interleaves held-out ShareGPT prompts with synthetic long prompts
(one in four), so prefill work lands in the middle of decoding – the case lanes
are meant for. The claim put to the test (from the work PD-Verify started
from): isolating verification cuts p95/p99 decode latency by 30–50% and adds
up to 11.5% throughput. Figures are ratios to Baseline in the same round; the
runs are written to ``<out>/lanes``.

``--lanes-compute`` (``elastic`` unless told otherwise; ``none`` for the
defaults alone) adds PD and PDV with their lanes in those modes as
competitors (``pd elastic``, ``pdv elastic``), on the same trace in the same
rounds: prefill chunks of long prompts are the work lanes at once can overlap
with decoding. The claims are read for PDV in every mode; PDV's 0.97 goal
for the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

from engine.config import EngineConfig, LaneCompute, SamplingParams, flag
from workloads.bench import pdv_goal
from workloads.bench.common import BenchContext, Goal, Listed, PartResult, comma_list, held_out, rotated
from workloads.bench.rows import RateRow, Summary, find, ratio_summary, same_output_note, spread
from workloads.datasets.synthetic import LengthSpec, synthetic_requests
from workloads.drivers.arrivals import OpenLoop
from workloads.drivers.run_spec import RunSettings
from workloads.drivers.sweep import RunWriter, SweepPlan, run_sweep
from workloads.drivers.trace import Trace, build_trace

NAME = "4-lanes"
ENGINES = ("baseline", "pd", "pdv")
LATENCY_CUT = 0.30  # the claim: p95/p99 decode latency 30-50% lower with verification isolated
THROUGHPUT_GAIN = 0.115  # ... and up to 11.5% more throughput
METRICS = ("tpot_p95_ms", "tpot_p99_ms", "ttft_p99_ms")
MODES = tuple(m for m in LaneCompute if m is not LaneCompute.TURNS)  # the defaults take turns


class Competitor(NamedTuple):
    label: str  # e.g. "pdv elastic"
    engine: str
    config: EngineConfig


@dataclass(frozen=True, kw_only=True)
class LanesRow(RateRow):
    run_id: str  # the run in ``<out>/lanes``
    tpot_p95_ms: float | None
    tpot_p99_ms: float | None
    ttft_p99_ms: float | None
    acceptance: float | None
    same_output_as_baseline: bool


@dataclass(frozen=True)
class LanesOptions:
    """Lane modes PD and PDV also run in, beside the defaults."""

    # elastic lanes run a long prompt's prefill beside decoding, the mode the claims are about (notebook.md)
    compute: tuple[LaneCompute, ...] = field(
        default=Listed((LaneCompute.ELASTIC,)),
        metadata=flag(
            "--lanes-compute",
            comma_list(LaneCompute, "lane modes"),
            f"comma list of lane modes PD and PDV also run in ({', '.join(MODES)}); none: the defaults only",
        ),
    )

    def __post_init__(self) -> None:
        if LaneCompute.TURNS in self.compute:
            raise ValueError("--lanes-compute: turns is the default every engine runs in; name the other modes")

    def quick(self) -> LanesOptions:
        return self


def competitors(compute: tuple[LaneCompute, ...]) -> tuple[Competitor, ...]:
    """Baseline, PD and PDV with the defaults, then PD and PDV in each of ``compute``'s lane modes."""
    base = EngineConfig()
    extra = [(f"{e} {m}", e, replace(base, lane_compute=m)) for m in compute for e in ("pd", "pdv")]
    return tuple(Competitor(*c) for c in [*((e, e, base) for e in ENGINES), *extra])


def mixed_trace(ctx: BenchContext) -> Trace:
    """Held-out prompts with a long synthetic prompt in every fourth place."""
    s, pair = ctx.settings, ctx.pair
    n_long = max(1, s.mixed_requests // 4)
    short = held_out(ctx, s.mixed_requests - n_long).items
    long_len = min(s.long_prompt_tokens, pair.max_context - s.max_new_tokens - 8)
    sampled = synthetic_requests(pair.tokenizer, n_long, LengthSpec(long_len), LengthSpec(s.max_new_tokens), 0)
    long = build_trace(sampled, lambda t: pair.encode_prompt(t, raw=True), s.max_new_tokens, "synthetic", 0).items
    items, li = [], iter(long)
    for i, item in enumerate(short):
        items.append(item)
        if i % 3 == 2 and (long_item := next(li, None)) is not None:
            items.append(long_item)
    items.extend(li)
    source = f"held-out ShareGPT + {len(long)} synthetic prompts of {long_len} tokens"
    return Trace(tuple(items), source, 0)


def claim_goals(summary: list[Summary], group: str, mode: LaneCompute | None) -> list[Goal]:
    """The seeds' two claims for PDV with the defaults (``mode`` None) or with its lanes in ``mode``."""
    label = "pdv" if mode is None else f"pdv {mode}"
    name = "PDV" if mode is None else f"PDV {mode}"
    p99, p95 = find(summary, group, label, "tpot_p99_ms"), find(summary, group, label, "tpot_p95_ms")
    ttft, tput = find(summary, group, label, "ttft_p99_ms"), find(summary, group, label, "output_tok_s")
    cut = 1 - p99.ratio.median if p99 and p99.ratio is not None else None
    gain = tput.ratio.median - 1 if tput and tput.ratio is not None else None
    return [
        Goal(NAME, f"{name} cuts TPOT p99 by >= 30% against Baseline (the claim: 30-50%)",
             f"{name} TPOT p99 = {spread(p99)} Baseline's, p95 = {spread(p95)}, TTFT p99 = {spread(ttft)}",
             cut is not None and cut >= LATENCY_CUT),
        Goal(NAME, f"{name} adds throughput against Baseline (the claim: up to 11.5%)",
             f"{name} tokens/s = {spread(tput)} Baseline's", gain is not None and gain > 0),
    ]  # fmt: skip


def run(ctx: BenchContext) -> PartResult:
    s = ctx.settings
    trace = mixed_trace(ctx)
    writer = RunWriter(ctx.out / "lanes")
    params = SamplingParams(max_new_tokens=s.max_new_tokens, seed=0)
    policy = OpenLoop(s.mixed_rate, 1.0, None, seed=0)
    modes = ctx.options(LanesOptions).compute
    comps = competitors(modes)
    rows: list[LanesRow] = []
    for round_ in range(s.rounds):
        outputs, results = {}, []
        for comp in rotated(comps, round_):
            plan = SweepPlan((comp.engine,), (policy,), RunSettings(config=comp.config, params=params))
            meta = {**ctx.meta, "bench": NAME, "bench_round": round_, "competitor": comp.label}
            (result,) = run_sweep(ctx.pair, trace, plan, writer, meta)
            outputs[comp.label] = [list(q.output_token_ids) for q in result.requests]
            results.append((comp.label, result))
        for label, result in results:
            m = result.summary
            rows.append(
                LanesRow(group=f"{s.mixed_rate:g} req/s", round=round_, label=label, run_id=result.key.run_id,
                         output_tok_s=m.output_tok_s, tpot_p95_ms=m.tpot_p95_ms, tpot_p99_ms=m.tpot_p99_ms,
                         ttft_p99_ms=m.ttft_p99_ms, acceptance=m.acceptance_rate,
                         same_output_as_baseline=outputs[label] == outputs["baseline"])
            )  # fmt: skip
    summary = ratio_summary(rows, "output_tok_s", "baseline", NAME)
    for metric in METRICS:
        summary += ratio_summary(rows, metric, "baseline", NAME, lower_is_better=True)
    goals = [g for mode in (None, *modes) for g in claim_goals(summary, rows[0].group, mode)]
    notes = [
        same_output_note(rows, "same_output_as_baseline", "baseline"),
        f"Trace: {len(trace)} requests ({trace.source}), Poisson arrivals at {s.mixed_rate:g} req/s.",
        "On a CPU the lanes take turns on the cores by default (--lane-compute turns, "
        "docs/architecture.md#cpu-and-gpu), so PDV's verify lane never runs beside its decode lane: what "
        "lanes change here is the order of prefill, draft and verify work, and PDV pipelines a group only "
        "where this machine's measured step costs say it pays.",
    ]
    if LaneCompute.ELASTIC in modes:
        notes.append(
            "Elastic lanes (--lane-compute elastic): a lane computing alone has every core, lanes with work at the "
            "same time one share each, so a long prompt's prefill can run beside decoding instead of between steps."
        )
    goals += pdv_goal.goals(rows, NAME)  # the mixed traffic is one more load point of PDV's goal
    return PartResult(NAME, "Lanes under mixed traffic: PDV, PD and Baseline", rows, summary, goals, notes)
