"""MT-Bench replayed as two turns, each an ordinary run (questions: ``workloads.datasets.mt_bench``).

A question is replayed as two runs. Turn 1 sends each question's first turn.
Turn 2 sends the conversation so far – first question, *the engine's own
answer from turn 1*, second question – through the chat template, so each
engine continues from what it generated, as MT-Bench's judges see it. Both
turns are written as ordinary runs (``run.json`` carries ``mt_bench_turn``),
and ``categories.csv`` beside the run files holds one row per run, turn and
category: the per-category view a mixed run's summary cannot give.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.models.pair import encode_conversation
from metrics.request_metrics import RequestMetrics
from workloads.datasets.mt_bench import category_of, questions, request_id
from workloads.drivers.replay import PairLike
from workloads.drivers.run_result import RunResult
from workloads.drivers.run_spec import RunHooks
from workloads.drivers.sweep import RunWriter, SweepPlan, run_sweep
from workloads.drivers.trace import Trace, TraceItem

CATEGORIES_CSV = "categories.csv"
CATEGORY_COLUMNS = (
    "run_id", "engine", "concurrency", "turn", "category", "requests", "completed", "output_tokens",
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
) -> list[RunResult]:
    """``run_sweep`` for MT-Bench: each engine and load runs turn 1 on ``trace``, then its own turn 2."""
    hooks = hooks if hooks is not None else RunHooks()
    writer = None if out is None else RunWriter(out)
    results: list[RunResult] = []
    for run in plan.runs():
        # one round: turn 2 follows this run's own answers, so its rounds would not replay one trace
        one = replace(plan, policies=(run.policy,), rounds=1, **_only(plan, run.engine))
        turn_trace = trace
        for turn in (1, 2):
            if hooks.cancel.is_set():
                return results
            run_meta = {**(meta or {}), "mt_bench_turn": turn}
            done = run_sweep(pair, turn_trace, one, writer, run_meta, replace(hooks, on_result=None))
            if not done:
                return results
            results.append(done[0])
            if out is not None:
                append_categories(out, category_rows(done[0], turn))
            if hooks.on_result:
                hooks.on_result(done[0])
            if turn == 1:
                turn_trace = second_turns(pair, done[0])
    return results


def _only(plan: SweepPlan, name: str) -> dict[str, Any]:
    """The plan's fields that keep only the engine or endpoint called ``name``."""
    if name in plan.engines:
        return {"engines": (name,), "endpoints": ()}
    return {"engines": (), "endpoints": tuple(e for e in plan.endpoints if e.label == name)}
