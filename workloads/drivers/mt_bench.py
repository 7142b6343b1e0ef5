"""MT-Bench replayed as two turns, each an ordinary run (questions: ``workloads.datasets.mt_bench``).

A question is replayed as two runs. Turn 1 sends each question's first turn.
Turn 2 sends the conversation so far – first question, *the engine's own
answer from turn 1*, second question – through the chat template, so each
engine continues from what it generated, as MT-Bench's judges see it. Both
turns are written as ordinary runs (``run.json`` carries ``mt_bench_turn``),
and ``categories.csv`` beside the run files holds one row per run, round, turn
and category: the per-category view a mixed run's summary cannot give.

Like every comparison, it runs in rounds (``workloads.drivers.rounds``): in
each round the engines take their turn in a balanced order, each running its
turn 1 and then its turn 2, and each turn is a comparison of its own with its
× AR intervals and verdict. Every run builds a fresh engine, so no round's
suffix tree holds an earlier round's answers to the same questions.
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path
from typing import Any

from engine.models.pair import encode_conversation
from metrics.request_metrics import RequestMetrics
from metrics.rounds import round_orders
from workloads.datasets.mt_bench import category_of, questions, request_id
from workloads.drivers.replay import PairLike
from workloads.drivers.rounds import ComparisonFn, LoadPointRounds
from workloads.drivers.run_result import RunResult
from workloads.drivers.run_spec import RunHooks
from workloads.drivers.sweep import RoundRunner, RunWriter, SweepPlan, finish_point
from workloads.drivers.trace import Trace, TraceItem

CATEGORIES_CSV = "categories.csv"
CATEGORY_COLUMNS = (
    "run_id", "engine", "concurrency", "round", "turn", "category", "requests", "completed", "output_tokens",
    "ttft_p50_ms", "tpot_p50_ms", "acceptance_rate", "mean_acceptance_length",
)  # fmt: skip


def second_turns(pair: PairLike, first: RunResult) -> Trace:
    """Turn 2 after ``first``: each question's conversation with the engine's own first answer."""
    by_id = {request_id(q, 1): q for q in questions()}
    items = []
    for request in first.requests:
        q = by_id[request.request_id]
        answer = pair.tokenizer.decode(list(request.output_token_ids), skip_special_tokens=True)
        conversation = [
            {"role": "user", "content": q["turns"][0]},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": q["turns"][1]},
        ]
        if pair.tokenizer.chat_template:
            ids = tuple(encode_conversation(pair.tokenizer, conversation))
        else:  # as ``encode_prompt`` without a template: the turns as plain text
            ids = tuple(pair.tokenizer("\n".join(m["content"] for m in conversation)).input_ids)
        items.append(TraceItem(request_id(q, 2), q["turns"][1], ids, request.params.max_new_tokens))
    return Trace(tuple(items), "mt-bench (bundled, second turns after each engine's own answers)", 0)


def category_rows(result: RunResult, turn: int) -> list[dict[str, Any]]:
    """One row per category of ``result``'s requests (see ``CATEGORY_COLUMNS``)."""
    groups: dict[str, list[RequestMetrics]] = {}
    for m in result.metrics:
        groups.setdefault(category_of(m.request_id), []).append(m)
    rows = []
    for category, ms in groups.items():
        ok = [m for m in ms if m.status == "ok"]
        drafted = sum(m.drafted_tokens for m in ms)
        steps = sum(m.verify_steps for m in ms)
        rows.append(
            {
                "run_id": result.key.run_id,
                "engine": result.key.engine,
                "concurrency": result.key.concurrency,
                "round": result.round,
                "turn": turn,
                "category": category,
                "requests": len(ms),
                "completed": len(ok),
                "output_tokens": sum(m.output_tokens for m in ok),
                "ttft_p50_ms": _median([m.ttft_ms for m in ok]),
                "tpot_p50_ms": _median([m.tpot_ms for m in ok]),
                "acceptance_rate": sum(m.accepted_tokens for m in ms) / drafted if drafted else None,
                "mean_acceptance_length": 1 + sum(m.accepted_tokens for m in ms) / steps if steps else None,
            }
        )
    return rows


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def append_categories(out_dir: str | Path, rows: list[dict[str, Any]]) -> None:
    path = Path(out_dir) / CATEGORIES_CSV
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CATEGORY_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)


def run_mt_bench(
    pair: PairLike,
    trace: Trace,
    plan: SweepPlan,
    out: str | Path | None = None,
    meta: dict[str, Any] | None = None,
    hooks: RunHooks | None = None,
    on_comparison: ComparisonFn | None = None,
) -> list[RunResult]:
    """``run_sweep`` for MT-Bench: in each round, each engine runs turn 1 on ``trace``, then its own turn 2.

    The engines take turns in a balanced order round by round, as in ``run_sweep``;
    each turn is its own comparison at the load point ("turn 1", "turn 2"), with
    its × AR intervals and verdict, since a second turn's longer prompts make
    a different workload. Results come in run order.
    """
    hooks = hooks if hooks is not None else RunHooks()
    writer = None if out is None else RunWriter(out)
    if writer is not None:
        writer.check()
    results: list[RunResult] = []
    run_meta = {**plan.describe(), "trace": trace.describe(), **(meta or {})}
    rounds = RoundRunner(pair, plan, hooks, 2 * len(plan.run_order()))
    for policy in plan.policies:
        turns = {t: LoadPointRounds(plan.names, policy, plan.rounds, plan.settings.slo, f"turn {t}") for t in (1, 2)}
        stop = False
        for round_, names in enumerate(round_orders(plan.names, plan.rounds)):
            for name in names:
                turn_trace = trace
                for turn, point in turns.items():
                    result = rounds.run(turn_trace, point, name, round_)
                    if result is None:
                        stop = True
                        break
                    rounds.record(result, point, writer, {**run_meta, "mt_bench_turn": turn}, results, on_comparison)
                    if out is not None:
                        append_categories(out, category_rows(result, turn))
                    if rounds.must_stop(result):
                        stop = True
                        break
                    if turn == 1:
                        turn_trace = second_turns(pair, result)
                if stop:
                    break
            if stop:
                break
        for point in turns.values():
            finish_point(point, writer, on_comparison)
        if stop:
            break
    return results
