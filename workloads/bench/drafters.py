"""Part 7, drafters (``python -m workloads bench --parts drafters``): does speculation pay, and with which
drafter, L and controller?

Every configuration runs the same held-out prompts (``workloads/datasets/data``: prompts
the draft was never trained or tuned on), greedily, through the replay harness,
interleaved round by round so that a slow spell of this shared machine hits
them all alike; each configuration's tokens/s is divided by AR's *in the same
round*, and the table gives the median ratio with its min–max over rounds.
Each run's outputs are compared with AR's, token for token.

Its cases (``--drafters-cases``):

* ``single``: C = 1, plus transformers' own ``generate`` of the verifier, plain
  and with prompt lookup (``prompt_lookup_num_tokens``), one prompt at a time.
* ``load``: closed loops at ``--drafters-loads``.
* ``mtbench``: C = 1 on MT-Bench's first turns, per category.

It shares the suite's machinery (``workloads.bench.common``: the held-out
prompts, the CSV writer; ``metrics.rounds``: the ratio arithmetic;
``workloads.bench.reference``: transformers' ``generate``; ``--rounds``). Writes
``runs.csv`` (one row per run), ``summary-<case>.csv`` and ``summary.md`` to
``<out>/drafters``; the tables of its runs so far are in ``docs/notebook.md``
("Drafters: does speculation pay?"), with their CSVs in ``docs/data/drafter-bench``.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field, replace

from tqdm import tqdm

from engine.config import ControllerConfig, EngineConfig, SamplingParams, flag
from engine.profiling import prepare_profiles
from metrics.rounds import ratio_intervals
from workloads.bench.common import HELD_OUT, BenchContext, Listed, PartResult, comma_list, one_of, write_csv
from workloads.bench.reference import hf_generate
from workloads.bench.rows import RateRow, ratio_summary, same_output_note
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


@dataclass(frozen=True, kw_only=True)
class DrafterRow(RateRow):
    case: str  # single, load or mtbench; the suite's rows name it in the group too
    concurrency: int
    acceptance: float | None  # None for AR and transformers, which report none
    tokens_per_step: float | None
    identical: bool  # outputs equal to AR's in the same case, group and round


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
LABELS = tuple(s.label for s in SETUPS)
CASES = ("single", "load", "mtbench")
NAME = "7-drafters"
DIRECTORY = "drafters"  # under the bench directory: its runs and the summaries per case


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


def summarise(rows: list[DrafterRow]) -> list[dict]:
    """The case's table: median ratio to AR (same round, same group) with min–max, per group and setup
    (``metrics.rounds``' arithmetic, ``RatioInterval``'s text)."""
    by_round: dict[str, dict[int, dict[str, float | None]]] = {}
    table: dict[tuple[str, str], list[DrafterRow]] = {}
    for r in rows:
        table.setdefault((r.group, r.label), []).append(r)
        by_round.setdefault(r.group, {}).setdefault(r.round, {})[r.label] = r.output_tok_s
    intervals = {g: ratio_intervals(list(rounds.values()), "ar") for g, rounds in by_round.items()}
    out = []
    for (g, label), rs in table.items():
        ratio = intervals[g].get(label)
        out.append(
            {
                "group": g,
                "setup": label,
                "tok/s (median)": round(statistics.median(r.output_tok_s for r in rs), 1),
                "x AR (median)": round(ratio.median, 3) if ratio else None,
                "x AR (min-max)": ratio.bounds() if ratio else "",
                "acceptance": _median([r.acceptance for r in rs]),
                "tokens/step": _median([r.tokens_per_step for r in rs]),
                "same output as AR": all(r.identical for r in rs),
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


@dataclass(frozen=True)
class DrafterOptions:
    """What the drafter part compares: its cases, their prompts and loads, and the setups of each."""

    cases: tuple[str, ...] = field(
        default=Listed(CASES),
        metadata=flag("--drafters-cases", comma_list(one_of(CASES), "cases"), "comma list of cases"),
    )
    # 16 prompts: enough that one prompt's luck with lookup does not decide a ratio
    prompts: int = field(default=16, metadata=flag("--drafters-prompts", int, "held-out prompts at C = 1"))
    loads: tuple[int, ...] = field(
        default=Listed((1, 4, 16, 32)),
        metadata=flag("--drafters-loads", comma_list(int, "loads"), "load case's C values"),
    )
    load_setups: tuple[str, ...] = field(
        default=Listed(("ar", "ngram L4", "model+ngram L4", "ngram cost", "model+ngram cost")),
        metadata=flag("--drafters-load-setups", comma_list(one_of(LABELS), "setups"), "setups of the load case"),
    )
    mtbench_setups: tuple[str, ...] = field(
        default=Listed(("ar", "model L4", "ngram L4", "model+ngram cost")),
        metadata=flag("--drafters-mtbench-setups", comma_list(one_of(LABELS), "setups"), "setups of mtbench"),
    )
    mtbench_per_category: int = field(
        default=2, metadata=flag("--drafters-mtbench-per-category", int, "first turns per MT-Bench category")
    )
    # 128: long enough for lookup to find the prompt's text again, as a chat answer does
    max_new_tokens: int = field(default=128, metadata=flag("--drafters-max-new-tokens", int, "cap on each output"))

    def __post_init__(self) -> None:
        if not self.loads:
            raise ValueError("loads needs at least one concurrency")
        if min(self.prompts, self.mtbench_per_category, self.max_new_tokens, *self.loads) < 1:
            raise ValueError("prompts, mtbench_per_category, max_new_tokens and loads must be positive")
        needs_ar = {"load": self.load_setups, "mtbench": self.mtbench_setups}
        if any("ar" not in setups for case, setups in needs_ar.items() if case in self.cases):
            raise ValueError("load_setups and mtbench_setups need ar: every ratio is to AR's run in the same round")

    def quick(self) -> DrafterOptions:
        return replace(
            self,
            prompts=min(self.prompts, 2),
            loads=self.loads[:2],
            mtbench_per_category=1,
            max_new_tokens=min(self.max_new_tokens, 8),
        )


def run(ctx: BenchContext) -> PartResult:
    """Every case's setups, round after round, into ``<out>/drafters``: ``runs.csv``, ``summary-<case>.csv``,
    ``summary.md``; the suite's rows and summary are the same runs with ``<case> <group>`` as the group."""
    o, pair = ctx.options(DrafterOptions), ctx.pair
    out = ctx.out / DIRECTORY
    out.mkdir(parents=True, exist_ok=True)
    # capped at max_new_tokens as transformers' generate is: a request runs to its trace item's length
    held_out = load_trace(DatasetSpec(str(HELD_OUT)), pair, max(o.prompts, 2 * max(o.loads)), 0, o.max_new_tokens)
    single = Trace(held_out.items[: o.prompts], held_out.source, 0)
    by_label = {s.label: s for s in SETUPS}
    plan: list[tuple] = []  # (case, group, setup or ("hf", lookup), trace, concurrency)
    if "single" in o.cases:
        plan += [("single", "C=1", s, single, 1) for s in SETUPS]
        plan += [("single", "C=1", ("hf", k), single, 1) for k in (None, *HF_LOOKUPS)]
    if "load" in o.cases:
        for c in o.loads:
            trace = Trace(held_out.items[: max(o.prompts, 2 * c)], held_out.source, 0)
            plan += [("load", f"C={c}", by_label[label], trace, c) for label in o.load_setups]
    if "mtbench" in o.cases:
        for category, trace in mt_bench_trace(pair, o.mtbench_per_category, o.max_new_tokens).items():
            plan += [("mtbench", category, by_label[label], trace, 1) for label in o.mtbench_setups]
    for setup in {p[2] for p in plan if isinstance(p[2], Setup)}:  # the cost controller reads measured step costs
        prepare_profiles(pair, setup.config(), [setup.engine])
    rows: list[DrafterRow] = []
    reference: dict[str, list[list[int]]] = {}
    bar = tqdm(total=ctx.settings.rounds * len(plan), unit="run", file=sys.stderr)
    for round_ in range(ctx.settings.rounds):
        for case, group, setup, trace, c in plan:
            bar.set_description(f"round {round_ + 1} {case} {group} {getattr(setup, 'label', setup)}", refresh=False)
            if isinstance(setup, tuple):
                label = "transformers generate" + (f" lookup={setup[1]}" if setup[1] else "")
                tok_s, outs = hf_generate(pair, trace, o.max_new_tokens, setup[1])
                acceptance = per_step = None
            else:
                result = run_setup(pair, setup, trace, c, o.max_new_tokens)
                label, tok_s, outs = setup.label, result.summary.output_tok_s, outputs_of(result.requests)
                acceptance, per_step = result.summary.acceptance_rate, result.summary.mean_acceptance_length
            key = f"{case}/{group}/{round_}"
            if label == "ar":
                reference[key] = outs
            rows.append(
                DrafterRow(case=case, group=group, round=round_, label=label, concurrency=c, output_tok_s=tok_s,
                           acceptance=acceptance, tokens_per_step=per_step, identical=outs == reference.get(key))
            )  # fmt: skip
            bar.update()
    bar.close()
    write_csv(out / "runs.csv", [r.record() for r in rows])
    sections = []
    for case in o.cases:
        case_rows = [r for r in rows if r.case == case]
        if case_rows:
            table = summarise(case_rows)
            write_csv(out / f"summary-{case}.csv", table)
            sections.append(f"## {case}\n\n" + markdown(table))
    (out / "summary.md").write_text("\n\n".join(sections) + "\n")
    suite_rows = [replace(r, group=f"{r.case} {r.group}") for r in rows]
    notes = [same_output_note(suite_rows, "identical"), f"Tables per case: {out / 'summary.md'}."]
    summary = ratio_summary(suite_rows, "output_tok_s", "ar", NAME)
    return PartResult(NAME, "Drafters: which drafter, draft length and controller pay, against ar", suite_rows,
                      summary, [], notes)  # fmt: skip
