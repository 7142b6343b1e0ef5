"""Part 8, suffix drafting (``python -m workloads bench --parts suffix``): does it pay, after a warm-up of
other requests?

Drafters compared, each through the Baseline engine with the ``cost``
controller, against AR (the verifier alone): ``ngram`` (prompt lookup),
``model+ngram`` and ``suffix``, at closed-loop concurrencies ``--suffix-loads``, on
three prompt sets (``--suffix-sets``):

* ``sharegpt``: the held-out ShareGPT prompts (``workloads/datasets/data``);
* ``mt-bench``: MT-Bench's first turns outside the coding category;
* ``coding``: MT-Bench's coding category (its 10 first turns).

No leakage: the suffix engines' global tree starts from a *warm-up set* – the
outputs the AR engine generated greedily for ``--warmup`` prompts of the
bundled ShareGPT package, none of them a measured prompt – written to
``warmup.json`` in ``<out>/suffix`` and handed to the engine as ``suffix_warmup``;
during a run it learns only from the run's requests that completed before.
Every run builds a fresh engine (a fresh tree), warms its first forwards with
one warm-up prompt rather than a measured one, and records what its tree held
at the end.

Runs are interleaved round by round in a balanced order; each drafter's
tokens/s is divided by AR's in the same round, set and load, and the table
gives the median ratio, its min–max over rounds and the interval a repeat
run's median falls in (``metrics.rounds``' arithmetic, the one every verdict
uses), the same ratio over the arrival phase alone and the drain's median
length (``metrics.phases``: a closed loop's tail of a shrinking batch), and
whether every output equalled AR's token for token. ``--suffix-sets`` and ``--suffix-rounds`` (the
round numbers a call runs; ``none``: the warm-up set alone) split a benchmark
into calls short enough for a shared machine; each call appends to
``<out>/suffix/runs.csv`` and rewrites ``summary.csv`` there (what
``docs/results.md`` renders) from all rows so far; the suite's rows and summary
are those same rows.
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine.config import ControllerConfig, EngineConfig, EngineName, SamplingParams, flag
from engine.profiling import prepare_profiles
from engine.request import Request
from metrics.phases import phases
from metrics.rounds import IntervalKind, interval
from workloads.bench.common import (
    HELD_OUT,
    BenchContext,
    Listed,
    PartResult,
    comma_list,
    one_of,
    ratio_summary,
    same_output_note,
    write_csv,
)
from workloads.datasets.mt_bench import MT_BENCH_QUESTIONS as MT_BENCH
from workloads.datasets.sharegpt import SampledRequest
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.replay import replay
from workloads.drivers.run_spec import RunHooks, RunSettings, RunSpec
from workloads.drivers.trace import DatasetSpec, Trace, build_trace, load_trace

SETUPS = ("ar", "ngram", "model+ngram", "suffix")
COLD = "suffix (empty tree)"  # suffix drafting without the warm-up set: the tree learns from the run alone
SETS = ("sharegpt", "mt-bench", "coding")
CODING = "coding"  # MT-Bench's category of programming questions
NAME = "8-suffix"
TITLE = "Suffix drafting after a warm-up of other requests, against ar"
DIRECTORY = "suffix"  # under the bench directory: warmup.json, runs.csv, summary.csv


@dataclass(frozen=True)
class SuffixOptions:
    """Which sets, loads, rounds and drafters one call of the suffix part measures."""

    sets: tuple[str, ...] = field(
        default=Listed(SETS),
        metadata=flag("--suffix-sets", comma_list(one_of(SETS), "sets"), "comma list of prompt sets"),
    )
    loads: tuple[int, ...] = field(
        default=Listed((1, 4, 16)), metadata=flag("--suffix-loads", comma_list(int, "loads"), "C")
    )
    # round numbers, not a count: calls of one benchmark each run some rounds and append them to runs.csv
    round_numbers: tuple[int, ...] = field(
        default=Listed((0,)),
        metadata=flag("--suffix-rounds", comma_list(int, "rounds"), "round numbers this call runs (none: warm-up)"),
    )
    prompts: int = field(default=8, metadata=flag("--suffix-prompts", int, "prompts per run at C = 1 (2 x C above)"))
    warmup: int = field(default=256, metadata=flag("--suffix-warmup", int, "warm-up requests the tree starts from"))
    max_new_tokens: int = field(default=96, metadata=flag("--suffix-max-new-tokens", int, "cap on each output"))
    setups: tuple[str, ...] = field(
        default=Listed(SETUPS),
        metadata=flag("--suffix-setups", comma_list(one_of((*SETUPS, COLD)), "setups"), f"drafters, or {COLD!r}"),
    )

    def __post_init__(self) -> None:
        if not self.loads:
            raise ValueError("loads needs at least one concurrency")
        if min(self.prompts, self.warmup, self.max_new_tokens, *self.loads) < 1:
            raise ValueError("prompts, warmup, max_new_tokens and loads must be positive")
        if min(self.round_numbers, default=0) < 0:
            raise ValueError("round_numbers must not be negative")
        if "ar" not in self.setups:
            raise ValueError("setups need ar: every ratio is to AR's run in the same round")

    def quick(self) -> SuffixOptions:
        return replace(
            self,
            loads=tuple(c for c in self.loads if c <= 4) or (1,),
            round_numbers=self.round_numbers[:1],
            prompts=min(self.prompts, 2),
            warmup=min(self.warmup, 4),
            max_new_tokens=min(self.max_new_tokens, 8),
        )


def engine_config(setup: str, warmup: Path) -> EngineConfig:
    if setup == "ar":
        return EngineConfig()
    drafter = "suffix" if setup == COLD else setup
    config = EngineConfig(drafter=drafter, controller=ControllerConfig(kind="cost"))
    return replace(config, suffix_warmup=str(warmup)) if setup == "suffix" else config


def mt_bench(pair, coding: bool, max_new: int) -> Trace:
    """MT-Bench's first turns: the coding category alone, or every other category."""
    sampled = []
    for line in MT_BENCH.read_text().splitlines():
        q = json.loads(line)
        if (q["category"] == CODING) == coding:
            sampled.append(SampledRequest(f"mt{q['question_id']}", q["turns"][0], max_new))
    return build_trace(sampled, pair.encode_prompt, max_new, "mt-bench " + ("coding" if coding else "non-coding"), 0)


def prompt_set(pair, name: str, n: int, max_new: int) -> Trace:
    if name == "sharegpt":
        return load_trace(DatasetSpec(str(HELD_OUT)), pair, n, 0, max_new)
    trace = mt_bench(pair, name == CODING, max_new)
    return Trace(trace.items[:n], trace.source, 0)


def warmup_file(pair, out: Path, n: int, max_new: int, measured: list[Trace]) -> Path:
    """Generate (once) the warm-up outputs: AR, greedy, ``n`` bundled ShareGPT prompts none of which is measured."""
    path = out / "warmup.json"
    if path.exists():
        return path
    taken = {item.prompt for trace in measured for item in trace.items}
    trace = load_trace(DatasetSpec(), pair, n + len(taken), 1, max_new)
    items = tuple(item for item in trace.items if item.prompt not in taken)[:n]
    settings = RunSettings(EngineConfig(), greedy(max_new))
    result = replay(pair, Trace(items, trace.source, 1), RunSpec("ar", ClosedLoop(16), settings))
    sequences = [list(r.output_token_ids) for r in result.requests if r.status == "ok"]
    source = f"AR greedy outputs of {len(sequences)} bundled ShareGPT prompts (seed 1), {max_new} new tokens at most"
    path.write_text(json.dumps({"source": source, "sequences": sequences}))
    return path


def greedy(max_new: int) -> SamplingParams:
    return SamplingParams(max_new_tokens=max_new, seed=0)


def measure(pair, setup: str, warmup: Path, warm_prompt: list[int], trace: Trace, c: int, max_new: int) -> dict:
    """One measured run on a fresh engine; its tokens/s, outputs and the tree it ended with."""
    from engine.schedulers.registry import make_engine

    engines = []

    def factory(name, pair_, config):
        engine = make_engine(name, pair_, config)
        # the first forwards pay for lazy initialisation: a warm-up prompt pays it, not a measured one
        engine.generate([Request("warm", list(warm_prompt), SamplingParams(max_new_tokens=8))], timeout=300)
        engines.append(engine)
        return engine

    config = engine_config(setup, warmup)
    engine = EngineName.AR if setup == "ar" else EngineName.BASELINE
    spec = RunSpec(engine, ClosedLoop(c), RunSettings(config, greedy(max_new), warmup=0))
    result = replay(pair, trace, spec, RunHooks(engine_factory=factory))
    tree = engines[0].stats().suffix_tree
    phase = phases(result.requests)
    return {
        "output_tok_s": result.summary.output_tok_s,
        "arrival_tok_s": phase.arrival_tok_s if phase else None,
        "drain_s": phase.drain_s if phase else None,
        "acceptance": result.summary.acceptance_rate,
        "outputs": [list(r.output_token_ids) for r in result.requests],
        "tree_tokens": tree.tokens if tree else None,
        "tree_sequences": tree.sequences if tree else None,
        "tree_nodes": tree.nodes if tree else None,
    }


def _ratios(rows: list[dict], ar: list[dict], column: str) -> list[float]:
    """Each of ``rows``' ``column`` over AR's in the same round, set and load (rows without it skipped)."""
    base = {(r["set"], r["concurrency"], r["round"]): r.get(column) for r in ar}
    return [
        float(r[column]) / float(b)
        for r in rows
        if r.get(column) not in (None, "")
        and (b := base.get((r["set"], r["concurrency"], r["round"]))) not in (None, "")
    ]


def _median(rows: list[dict], column: str) -> float | str:
    values = [float(r[column]) for r in rows if r.get(column) not in (None, "")]
    return round(statistics.median(values), 3) if values else ""


def summarise(rows: list[dict]) -> list[dict]:
    """Per (set, load, setup): median tokens/s and ratio to AR in the same round, with min–max and repeat-run;
    the same ratio over the arrival phase alone (``metrics.phases``) and the drain's median length."""
    ar = [r for r in rows if r["setup"] == "ar"]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["set"], int(r["concurrency"]), r["setup"]), []).append(r)
    table = []
    for (name, c, setup), rs in sorted(groups.items(), key=lambda kv: (SETS.index(kv[0][0]), kv[0][1], kv[0][2])):
        ratios = _ratios(rs, ar, "output_tok_s")
        arriving = _ratios(rs, ar, "arrival_tok_s")
        trees = [int(r["tree_tokens"]) for r in rs if r["tree_tokens"] not in (None, "")]
        nodes = [int(r["tree_nodes"]) for r in rs if r["tree_nodes"] not in (None, "")]
        repeat = interval(ratios, IntervalKind.REPEAT_RUN)
        table.append(
            {
                "set": name,
                "C": c,
                "drafter": setup,
                "rounds": len(rs),
                "tok/s (median)": round(statistics.median(float(r["output_tok_s"]) for r in rs), 1),
                "x AR (median)": round(statistics.median(ratios), 3) if ratios else "",
                "x AR (min-max)": f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "",
                "x AR (repeat run)": f"{repeat.lo:.2f}-{repeat.hi:.2f}" if repeat and repeat.rounds > 1 else "",
                "x AR while arriving (median)": round(statistics.median(arriving), 3) if arriving else "",
                "x AR while arriving (min-max)": f"{min(arriving):.2f}-{max(arriving):.2f}" if arriving else "",
                "drain s (median)": _median(rs, "drain_s"),
                "acceptance": _median(rs, "acceptance"),
                "same output as AR": all(r["identical"] in (True, "True") for r in rs),
                "tree tokens at end": max(trees) if trees else "",
                "tree nodes at end": max(nodes) if nodes else "",
            }
        )
    return table


def run(ctx: BenchContext) -> PartResult:
    """The rounds ``--suffix-rounds`` names, appended to ``<out>/suffix/runs.csv``; the warm-up set first, once."""
    o, pair = ctx.options(SuffixOptions), ctx.pair
    out = ctx.out / DIRECTORY
    out.mkdir(parents=True, exist_ok=True)
    biggest = max(o.prompts, 2 * max(o.loads))
    traces = {name: prompt_set(pair, name, biggest, o.max_new_tokens) for name in SETS}
    warmup = warmup_file(pair, out, o.warmup, o.max_new_tokens, list(traces.values()))
    warm_prompt = load_trace(DatasetSpec(), pair, 1, 2, 8).items[0].prompt_token_ids
    for setup in o.setups:
        prepare_profiles(pair, engine_config(setup, warmup), ["baseline"])
    csv_path = out / "runs.csv"
    rows = list(csv.DictReader(csv_path.open())) if csv_path.exists() else []
    for round_ in o.round_numbers:
        for name in o.sets:
            for c in o.loads:
                trace = Trace(traces[name].items[: max(o.prompts, 2 * c)], traces[name].source, 0)
                order = o.setups[round_ % len(o.setups) :] + o.setups[: round_ % len(o.setups)]
                results = {s: measure(pair, s, warmup, warm_prompt, trace, c, o.max_new_tokens) for s in order}
                for setup in o.setups:
                    r = results[setup]
                    row = {"round": round_, "set": name, "concurrency": c, "setup": setup, "prompts": len(trace.items)}
                    row |= {k: v for k, v in r.items() if k != "outputs"}
                    rows.append(row | {"identical": r["outputs"] == results["ar"]["outputs"]})
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    notes = [f"Warm-up set: {json.loads(warmup.read_text())['source']} ({warmup})."]
    if not rows:
        return PartResult(NAME, TITLE, [], [], [], notes)
    write_csv(csv_path, rows)
    write_csv(out / "summary.csv", summarise(rows))
    suite_rows = [
        {"group": f"{r['set']} C={r['concurrency']}", "round": int(r["round"]), "label": r["setup"],
         "output_tok_s": float(r["output_tok_s"]), "identical": r["identical"] in (True, "True")}
        for r in rows
    ]  # fmt: skip
    notes.insert(0, same_output_note(suite_rows, "identical"))
    notes.append(f"Table: {out / 'summary.csv'}.")
    return PartResult(NAME, TITLE, suite_rows, ratio_summary(suite_rows, "output_tok_s", "ar", NAME), [], notes)
