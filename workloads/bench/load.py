"""Part 3, load sweep: ``ar``, ``baseline``, ``pd`` and ``pdv`` in closed loops of C concurrent requests,
against transformers' ``generate`` served request by request – what a user without a serving engine
would run. Goals: the best engine at C = 16 makes >= 6x the reference's output tokens/s, and at every load
point PDV makes >= 0.97x the better of Baseline's and PD's tokens/s, read against each in the same rounds
(``workloads.bench.pdv_goal``).

Engine runs are ordinary runs written to ``<out>/load-sweep`` (the dashboard's
Runs page lists and opens it). The reference serves one request at a time, so
each round times one pass of ``generate`` over the prompts, one after another
(time to first token from a streamer); a closed loop of C clients in front of
such a server is then exact arithmetic on those measured times: requests are
served back to back in arrival order, request j arrives at 0 if j < C and
otherwise when request j - C finishes, and its TTFT is its wait plus its own
time to first token.

``--load-loads`` and ``--load-engines`` (``LoadOptions``) restrict a call to some
load points and engines, so one load point can be re-measured in a call of its
own; ar always runs, as the engine every output is checked against.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.config import SamplingParams, flag
from workloads.bench import pdv_goal
from workloads.bench.common import BenchContext, Goal, Listed, PartResult, comma_list, first, held_out, one_of, rotated
from workloads.bench.reference import HFTiming, hf_generate, hf_timeline
from workloads.bench.rows import RateRow, find, ratio_summary, same_output_note, spread
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.run_spec import RunSettings
from workloads.drivers.sweep import RunWriter, SweepPlan, run_sweep

NAME = "3-load"
ENGINES = ("ar", "baseline", "pd", "pdv")
HF = "transformers generate (serial)"
GOAL = 6.0
GOAL_AT = 16


@dataclass(frozen=True, kw_only=True)
class LoadRow(RateRow):
    concurrency: int
    run_id: str | None  # the engine's run in ``<out>/load-sweep``; None for the reference, which has no run
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None
    acceptance: float | None  # None for AR and the reference, which draft nothing
    same_output_as_ar: bool


@dataclass(frozen=True)
class LoadOptions:
    """Which load points and engines one call of the load sweep measures (the reference always runs)."""

    loads: tuple[int, ...] | None = field(
        default=None,
        metadata=flag("--load-loads", comma_list(int, "loads"), "comma list of C values; off: the suite's loads"),
    )
    engines: tuple[str, ...] = field(
        default=Listed(ENGINES),
        metadata=flag("--load-engines", comma_list(one_of(ENGINES), "engines"), "comma list of engines (with ar)"),
    )

    def __post_init__(self) -> None:
        if self.loads is not None and (not self.loads or min(self.loads) < 1):
            raise ValueError("--load-loads needs concurrencies of at least 1")
        if "ar" not in self.engines:
            raise ValueError("--load-engines needs ar: every output is checked against ar's")

    def quick(self) -> LoadOptions:
        return self  # --quick sizes the sweep through the settings' loads; given loads stay as given


def requests_at(ctx: BenchContext, c: int) -> int:
    return max(c, 4)


def serial_served(timings: list[HFTiming], concurrency: int) -> dict[str, float | None]:
    """Throughput and latency percentiles of a FIFO one-at-a-time server under a closed loop (see above)."""
    finish, clock, ttft, tpot, tokens = [], 0.0, [], [], 0
    for j, t in enumerate(timings):
        arrival = 0.0 if j < concurrency else finish[j - concurrency]
        start = clock
        clock += t.end - t.start
        finish.append(clock)
        tokens += len(t.output)
        if t.first_token is not None:
            ttft.append((start - arrival + t.first_token - t.start) * 1000)
            if len(t.output) > 1:
                tpot.append((t.end - t.first_token) / (len(t.output) - 1) * 1000)
    return {"output_tok_s": tokens / clock, **_percentiles("ttft", ttft), **_percentiles("tpot", tpot)}


def _percentiles(name: str, values: list[float]) -> dict[str, float | None]:
    return {
        f"{name}_{q}_ms": float(np.percentile(values, int(q[1:]), method="linear")) if values else None
        for q in ("p50", "p99")
    }


def run(ctx: BenchContext) -> PartResult:
    s, pair, o = ctx.settings, ctx.pair, ctx.options(LoadOptions)
    loads, engines = o.loads or s.loads, tuple(e for e in ENGINES if e in o.engines)
    max_new = s.load_max_new_tokens
    pool = held_out(ctx, max(requests_at(ctx, c) for c in loads), max_new)
    hf_generate(pair, first(pool, 1), 4, None)  # warm-up
    writer = RunWriter(ctx.out / "load-sweep")
    params = SamplingParams(max_new_tokens=max_new, seed=0)
    rows: list[LoadRow] = []
    for round_ in range(s.rounds):
        timings = hf_timeline(pair, pool, max_new)
        for c in loads:
            trace = first(pool, requests_at(ctx, c))
            plan = SweepPlan(tuple(rotated(engines, round_)), (ClosedLoop(c),), RunSettings(params=params))
            results = run_sweep(pair, trace, plan, writer, {**ctx.meta, "bench": NAME, "bench_round": round_})
            outputs = {r.key.engine: [list(q.output_token_ids) for q in r.requests] for r in results}
            for result in results:
                m = result.summary
                rows.append(
                    LoadRow(
                        group=f"C={c}", round=round_, label=result.key.engine, concurrency=c,
                        run_id=result.key.run_id, output_tok_s=m.output_tok_s,
                        ttft_p50_ms=m.ttft_p50_ms, ttft_p99_ms=m.ttft_p99_ms,
                        tpot_p50_ms=m.tpot_p50_ms, tpot_p99_ms=m.tpot_p99_ms, acceptance=m.acceptance_rate,
                        # greedy: every engine's tokens are AR's, at any C (the batch is not the verifier's concern)
                        same_output_as_ar=outputs[result.key.engine] == outputs["ar"],
                    )
                )  # fmt: skip
            served = serial_served(timings[: len(trace)], c)
            same = [t.output for t in timings[: len(trace)]] == outputs["ar"]
            rows.append(LoadRow(group=f"C={c}", round=round_, label=HF, concurrency=c, run_id=None, acceptance=None,
                                same_output_as_ar=same, **served))  # fmt: skip
    summary = ratio_summary(rows, "output_tok_s", HF, NAME)
    for metric in ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms"):
        summary += ratio_summary(rows, metric, HF, NAME, lower_is_better=True)
    goals, notes = [], []
    if GOAL_AT in loads:
        at = [find(summary, f"C={GOAL_AT}", e, "output_tok_s") for e in engines]
        best = max((a for a in at if a and a.ratio is not None), key=lambda a: a.ratio.median)
        figure = f"best engine at C = {GOAL_AT}: {best.label}, {spread(best)} the reference"
        goals.append(
            Goal(
                NAME,
                f"best engine at C = {GOAL_AT} >= {GOAL}x the reference (tokens/s)",
                figure,
                best.ratio.median >= GOAL,
            )
        )
    goals += pdv_goal.goals(rows, NAME)  # none where PDV, Baseline or PD did not run
    notes.append(same_output_note(rows, "same_output_as_ar"))
    for c in loads:
        top = max(engines, key=lambda e: find(summary, f"C={c}", e, "output_tok_s").median)
        notes.append(f"C = {c}: fastest {top}, {spread(find(summary, f'C={c}', top, 'output_tok_s'))} the reference.")
    return PartResult(
        NAME,
        "Load sweep: engines against transformers generate served one request at a time",
        rows,
        summary,
        goals,
        notes,
    )
