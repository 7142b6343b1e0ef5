"""``python -m workloads.bench.drafters``: does speculation pay, and with which drafter, L and controller?

Every configuration runs the same held-out prompts (``workloads/datasets/data``: prompts
the draft was never trained or tuned on), greedily, through the replay harness,
interleaved round by round so that a slow spell of this shared machine hits
them all alike; each configuration's tokens/s is divided by AR's *in the same
round*, and the table gives the median ratio with its min–max over rounds.
Each run's outputs are compared with AR's, token for token.

* ``single``: C = 1, plus transformers' own ``generate`` of the verifier, plain
  and with prompt lookup (``prompt_lookup_num_tokens``), one prompt at a time.
* ``load``: closed loops at ``--loads``.
* ``mtbench``: C = 1 on MT-Bench's first turns, per category.

It shares the suite's machinery (``workloads.bench.common``: the held-out
prompts, the CSV writer; ``metrics.rounds``: the ratio arithmetic;
``workloads.bench.reference``: transformers' ``generate``). Writes
``runs.csv`` (one row per run), ``summary-<part>.csv`` and ``summary.md`` to
``--out`` and prints the table; ``docs/results.md`` renders its tables from
the summary CSVs through the suite's one renderer (``workloads.bench.docs``,
``<!-- csv: … -->`` blocks).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from engine.config import ControllerConfig, EngineConfig, SamplingParams
from metrics.rounds import ratio_intervals
from workloads.bench.common import HELD_OUT, write_csv
from workloads.bench.reference import hf_generate
from workloads.datasets.mt_bench import questions as mt_bench_questions
from workloads.datasets.sharegpt import SampledRequest
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.replay import replay
from workloads.drivers.run_spec import RunSettings, RunSpec
from workloads.drivers.trace import DatasetSpec, Trace, build_trace, load_trace


@dataclass(frozen=True)
class Setup:
    label: str
    engine: str
    drafter: str = "model"
    controller: str = "fixed"
    draft_len: int = 4

    def config(self) -> EngineConfig:
        max_len = max(8, self.draft_len)
        controller = ControllerConfig(self.controller, draft_len=self.draft_len, max_len=max_len)
        return EngineConfig(drafter=self.drafter, controller=controller)


AR = Setup("ar", "ar")
SETUPS = (
    AR,
    Setup("model L4", "baseline", "model", "fixed", 4),
    Setup("ngram L4", "baseline", "ngram", "fixed", 4),
    Setup("ngram L8", "baseline", "ngram", "fixed", 8),
    Setup("model+ngram L4", "baseline", "model+ngram", "fixed", 4),
    Setup("ngram cost", "baseline", "ngram", "cost"),
    Setup("model+ngram cost", "baseline", "model+ngram", "cost"),
)
HF_LOOKUPS = (3, 10)  # prompt_lookup_num_tokens tried for transformers' generate


def run_setup(pair, setup: Setup, trace: Trace, concurrency: int, max_new: int):
    params = SamplingParams(max_new_tokens=max_new, seed=0)
    return replay(pair, trace, RunSpec(setup.engine, ClosedLoop(concurrency), RunSettings(setup.config(), params)))


def mt_bench_trace(pair, per_category: int, max_new: int) -> dict[str, Trace]:
    by_category: dict[str, list[SampledRequest]] = {}
    for q in mt_bench_questions():  # interleaved by category, each category in the file's order
        group = by_category.setdefault(q["category"], [])
        if len(group) < per_category:
            group.append(SampledRequest(f"mt{q['question_id']}", q["turns"][0], max_new))
    return {c: build_trace(s, pair.encode_prompt, max_new, "mt-bench", 0) for c, s in by_category.items()}


def outputs_of(requests) -> list[list[int]]:
    return [list(r.output_token_ids) for r in requests]


def summarise(rows: list[dict], group: str) -> list[dict]:
    """Median ratio to AR (same round, same group) with min and max, per label (``metrics.rounds``' arithmetic)."""
    by_round: dict[str, dict[int, dict[str, float | None]]] = {}
    table: dict[tuple, list[dict]] = {}
    for r in rows:
        table.setdefault((r[group], r["label"]), []).append(r)
        by_round.setdefault(r[group], {}).setdefault(r["round"], {})[r["label"]] = r["output_tok_s"]
    intervals = {g: ratio_intervals(list(rounds.values()), "ar") for g, rounds in by_round.items()}
    out = []
    for (g, label), rs in table.items():
        ratio = intervals[g].get(label)
        out.append(
            {
                group: g,
                "setup": label,
                "tok/s (median)": round(statistics.median(r["output_tok_s"] for r in rs), 1),
                "x AR (median)": round(ratio.median, 3) if ratio else None,
                "x AR (min-max)": f"{ratio.lo:.2f}-{ratio.hi:.2f}" if ratio else "",
                "acceptance": _median([r["acceptance"] for r in rs]),
                "tokens/step": _median([r["tokens_per_step"] for r in rs]),
                "same output as AR": all(r["identical"] for r in rs),
            }
        )
    return out


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def markdown(table: list[dict]) -> str:
    head = list(table[0])
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join("" if v is None else str(v) for v in row.values()) + " |" for row in table]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.bench.drafters", description=__doc__)
    parser.add_argument("--parts", default="single,load,mtbench", help="comma list of single, load, mtbench")
    parser.add_argument("--preset", default="smol")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=16, help="held-out prompts at C = 1")
    parser.add_argument("--loads", default="1,4,16,32", help="closed-loop concurrencies of the load part")
    parser.add_argument("--load-setups", default="ar,ngram L4,model+ngram L4,ngram cost,model+ngram cost")
    parser.add_argument("--mtbench-setups", default="ar,model L4,ngram L4,model+ngram cost")
    parser.add_argument("--mtbench-per-category", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--out", default="runs/drafter-bench")
    args = parser.parse_args(argv)
    from engine.models.pair import load_model_pair
    from engine.profiling import prepare_default_profiles

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pair = load_model_pair(args.preset)
    prepare_default_profiles(pair)  # the step costs the cost controller reads: once per machine, first
    parts = args.parts.split(",")
    loads = [int(c) for c in args.loads.split(",")]
    held_out = load_trace(DatasetSpec(str(HELD_OUT)), pair, max(args.prompts, 2 * max(loads)), seed=0)
    single = Trace(held_out.items[: args.prompts], held_out.source, 0)
    by_label = {s.label: s for s in SETUPS}
    plan: list[tuple] = []  # (part, group, setup or ("hf", lookup), trace, concurrency)
    if "single" in parts:
        plan += [("single", "C=1", s, single, 1) for s in SETUPS]
        plan += [("single", "C=1", ("hf", k), single, 1) for k in (None, *HF_LOOKUPS)]
    if "load" in parts:
        for c in loads:
            trace = Trace(held_out.items[: max(args.prompts, 2 * c)], held_out.source, 0)
            plan += [("load", f"C={c}", by_label[label], trace, c) for label in args.load_setups.split(",")]
    if "mtbench" in parts:
        for category, trace in mt_bench_trace(pair, args.mtbench_per_category, args.max_new_tokens).items():
            plan += [("mtbench", category, by_label[label], trace, 1) for label in args.mtbench_setups.split(",")]
    rows: list[dict] = []
    reference: dict[str, list[list[int]]] = {}
    bar = tqdm(total=args.rounds * len(plan), unit="run", file=sys.stderr)
    for round_ in range(args.rounds):
        for part, group, setup, trace, c in plan:
            bar.set_description(f"round {round_ + 1} {part} {group} {getattr(setup, 'label', setup)}", refresh=False)
            if isinstance(setup, tuple):
                label = "transformers generate" + (f" lookup={setup[1]}" if setup[1] else "")
                tok_s, outs = hf_generate(pair, trace, args.max_new_tokens, setup[1])
                acceptance = per_step = None
            else:
                result = run_setup(pair, setup, trace, c, args.max_new_tokens)
                label, tok_s, outs = setup.label, result.summary.output_tok_s, outputs_of(result.requests)
                acceptance, per_step = result.summary.acceptance_rate, result.summary.mean_acceptance_length
            key = f"{part}/{group}/{round_}"
            if label == "ar":
                reference[key] = outs
            row = {"part": part, "group": group, "round": round_, "label": label, "concurrency": c}
            row |= {"output_tok_s": tok_s, "acceptance": acceptance, "tokens_per_step": per_step}
            rows.append(row | {"identical": outs == reference.get(key)})
            bar.update()
    bar.close()
    write_csv(out / "runs.csv", rows)
    sections = []
    for part in parts:
        part_rows = [r for r in rows if r["part"] == part]
        if part_rows:
            table = summarise(part_rows, "group")
            write_csv(out / f"summary-{part}.csv", table)  # docs/results.md renders its tables from these
            sections.append(f"## {part}\n\n" + markdown(table))
    text = "\n\n".join(sections) + "\n"
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
