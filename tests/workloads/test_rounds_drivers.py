"""A comparison's rounds on real engines and a real server: rotation, intervals, and nothing learned across rounds."""

from __future__ import annotations

from engine.config import EngineConfig, SamplingParams
from metrics.runs import load_run_dir
from tests.support.serve import MODEL, served, uvicorn_thread
from workloads.datasets.synthetic import LengthSpec
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.engines import default_engine_factory
from workloads.drivers.rounds import LoadPointComparison
from workloads.drivers.run_spec import RunHooks, RunSettings
from workloads.drivers.sweep import SweepPlan, run_sweep
from workloads.drivers.trace import DatasetSpec, load_trace
from workloads.endpoint.spec import EndpointSpec

N = 3
TOKENS = 5
ROUNDS = 3


def synthetic_trace(pair):
    return load_trace(DatasetSpec("synthetic", LengthSpec(16, 0.0), LengthSpec(TOKENS, 0.0)), pair, N, 0, TOKENS)


def settings(warmup: int = 0) -> RunSettings:
    return RunSettings(EngineConfig(), SamplingParams(max_new_tokens=TOKENS, stop_token_ids=()), warmup=warmup)


def test_endpoint_rows_run_in_the_rotating_rounds_with_intervals_against_ar(tiny_pair, tmp_path):
    seen: list[LoadPointComparison] = []
    with uvicorn_thread(served(tiny_pair, "baseline").app) as url:
        plan = SweepPlan(("ar",), (ClosedLoop(2),), settings(), (EndpointSpec(f"{url}/v1", MODEL, "served"),), ROUNDS)
        results = run_sweep(tiny_pair, synthetic_trace(tiny_pair), plan, tmp_path, on_comparison=seen.append)

    assert [(r.engine, r.round) for r in results] == [
        ("ar", 1), ("served", 1), ("served", 2), ("ar", 2), ("ar", 3), ("served", 3)
    ]  # fmt: skip
    run = load_run_dir(tmp_path)
    summary = run.frames.summary.set_index("engine")
    row = summary.loc["served"]
    assert row["rounds"] == ROUNDS and row["completed"] == ROUNDS * N
    assert row["tok_s_x_ar_lo"] <= row["tok_s_x_ar"] <= row["tok_s_x_ar_hi"]
    assert summary.loc["ar", "tok_s_x_ar"] == 1.0
    requests = run.frames.requests
    assert requests.groupby(["engine", "round"]).size().to_dict() == {
        (e, r): N for e in ("ar", "served") for r in range(1, ROUNDS + 1)
    }
    final = seen[-1]
    assert final.final and final.rounds_done == ROUNDS
    assert "served" in final.verdict_line()
    assert all(entry.get("verdict") == final.verdict_line() for entry in run.runs)


def test_each_round_builds_a_fresh_engine_so_no_round_drafts_from_an_earlier_rounds_answers(tiny_pair):
    built: list[str] = []

    def factory(name, pair, config):
        built.append(name)
        return default_engine_factory(name, pair, config)

    plan = SweepPlan(("baseline",), (ClosedLoop(1),), settings(warmup=1), rounds=ROUNDS)
    results = run_sweep(tiny_pair, synthetic_trace(tiny_pair), plan, None, hooks=RunHooks(engine_factory=factory))

    assert built == ["baseline"] * ROUNDS
    # the suffix drafter's tree at each round's end holds that round's N answers and nothing else: not the
    # warm-up's (a measured prompt) and not an earlier round's answers to the same prompts
    assert [r.suffix_tree.sequences for r in results] == [N] * ROUNDS
