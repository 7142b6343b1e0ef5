"""MT-Bench in rounds: each engine's two turns per round in a balanced order, each turn a comparison with a verdict."""

from __future__ import annotations

import csv
import json

from engine.config import EngineConfig, SamplingParams
from metrics.runs import load_run_dir
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.mt_bench import CATEGORIES_CSV, run_mt_bench
from workloads.drivers.rounds import LoadPointComparison
from workloads.drivers.run_spec import RunSettings
from workloads.drivers.sweep import SweepPlan
from workloads.drivers.trace import MT_BENCH, DatasetSpec, load_trace

N = 4
ROUNDS = 3


def test_mt_bench_runs_both_turns_in_rotating_rounds_with_a_verdict_per_turn(tiny_pair, tmp_path):
    trace = load_trace(DatasetSpec(MT_BENCH), tiny_pair, N, seed=0, max_new_tokens=5)
    settings = RunSettings(EngineConfig(), SamplingParams(max_new_tokens=5, seed=0), warmup=0)
    plan = SweepPlan(("ar", "baseline"), (ClosedLoop(2),), settings, rounds=ROUNDS)
    seen: list[LoadPointComparison] = []
    results = run_mt_bench(tiny_pair, trace, plan, tmp_path, on_comparison=seen.append)

    order = [(r.engine, r.round, r.requests[0].request_id[-2:]) for r in results]
    assert order == [
        ("ar", 1, "t1"), ("ar", 1, "t2"), ("baseline", 1, "t1"), ("baseline", 1, "t2"),
        ("baseline", 2, "t1"), ("baseline", 2, "t2"), ("ar", 2, "t1"), ("ar", 2, "t2"),
        ("ar", 3, "t1"), ("ar", 3, "t2"), ("baseline", 3, "t1"), ("baseline", 3, "t2"),
    ]  # fmt: skip
    finals = {p.part: p for p in seen if p.final}
    assert set(finals) == {"turn 1", "turn 2"}
    for part, point in finals.items():
        assert point.rounds_done == ROUNDS and point.load == f"C=2, {part}"
        assert f"over {ROUNDS} rounds" in point.verdict_line()  # a verdict, not "no verdict yet"

    summary = load_run_dir(tmp_path).frames.summary
    assert len(summary) == 4 and (summary["rounds"] == ROUNDS).all()  # an engine x turn row each
    baseline = summary[summary["engine"] == "baseline"]
    assert (baseline["tok_s_x_ar_lo"] <= baseline["tok_s_x_ar"]).all()
    assert (baseline["tok_s_x_ar"] <= baseline["tok_s_x_ar_hi"]).all()

    entries = json.loads((tmp_path / "run.json").read_text())["runs"]
    assert sorted((e["engine"], e["mt_bench_turn"]) for e in entries) == [
        ("ar", 1), ("ar", 2), ("baseline", 1), ("baseline", 2)
    ]  # fmt: skip
    by_turn = {e["mt_bench_turn"]: e["verdict"] for e in entries}
    assert by_turn == {1: finals["turn 1"].verdict_line(), 2: finals["turn 2"].verdict_line()}
    assert all(len(e["rounds"]) == ROUNDS for e in entries)
    rows = list(csv.DictReader(open(tmp_path / CATEGORIES_CSV)))
    assert {r["round"] for r in rows} == {"1", "2", "3"} and {r["turn"] for r in rows} == {"1", "2"}
