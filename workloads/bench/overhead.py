"""Part 1, engine overhead: ``ar`` (the verifier alone in PD-Verify's engine) against transformers' greedy
``generate`` of the same verifier, one request at a time. Goal: ``ar`` >= 0.95x.

Both produce the same tokens (checked per prompt), so the ratio is the cost of
the engine's machinery (scheduling, request records, streaming) net of its
kernels. Each round runs both on the same held-out prompts, in a balanced order.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import EngineConfig, SamplingParams
from workloads.bench.common import BenchContext, Goal, PartResult, first, held_out, rotated
from workloads.bench.reference import hf_generate
from workloads.bench.rows import RateRow, find, ratio_summary, spread
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.replay import replay
from workloads.drivers.run_spec import RunSettings, RunSpec

NAME = "1-overhead"
HF = "transformers generate"
GOAL = 0.95


@dataclass(frozen=True, kw_only=True)
class OverheadRow(RateRow):
    same_output: bool  # ar's and transformers' tokens equal on every prompt this round


def ar_run(ctx: BenchContext, trace, concurrency: int = 1):
    params = SamplingParams(max_new_tokens=ctx.settings.max_new_tokens, seed=0)
    settings = RunSettings(EngineConfig(), params)
    return replay(ctx.pair, trace, RunSpec("ar", ClosedLoop(concurrency), settings))


def run(ctx: BenchContext) -> PartResult:
    s = ctx.settings
    trace = held_out(ctx, s.prompts)
    hf_generate(ctx.pair, first(trace, 1), 4, None)  # warm-up: transformers' first call pays lazy set-up
    rows: list[OverheadRow] = []
    for round_ in range(s.rounds):
        rates, outputs = {}, {}
        for label in rotated(["ar", HF], round_):
            if label == "ar":
                result = ar_run(ctx, trace)
                tok_s, outs = result.summary.output_tok_s, [list(r.output_token_ids) for r in result.requests]
            else:
                tok_s, outs = hf_generate(ctx.pair, trace, s.max_new_tokens, None)
            rates[label], outputs[label] = tok_s, outs
        same = outputs["ar"] == outputs[HF]
        rows += [OverheadRow(group="C=1", round=round_, label=label, output_tok_s=tok_s, same_output=same)
                 for label, tok_s in rates.items()]  # fmt: skip
    summary = ratio_summary(rows, "output_tok_s", HF, NAME)
    ar = find(summary, "C=1", "ar", "output_tok_s")
    met = ar is not None and ar.ratio is not None and ar.ratio.median >= GOAL
    goal = Goal(NAME, f"ar >= {GOAL}x transformers generate (tokens/s, C = 1)", f"ar = {spread(ar)}", met)
    same = all(r.same_output for r in rows)
    notes = [f"Outputs of ar and transformers generate identical on every prompt: {same}."]
    return PartResult(NAME, "Engine overhead: ar against transformers generate, C = 1", rows, summary, [goal], notes)
