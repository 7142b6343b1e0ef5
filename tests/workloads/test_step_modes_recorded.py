"""PDV's step-choice counts in the run files: the groups of the measured run only, never the warm-up's."""

from __future__ import annotations

import json
from dataclasses import replace

from engine.config import EngineConfig, SamplingParams, StepChoice
from engine.schedulers.registry import make_engine
from engine.schedulers.stats import StepModes
from tests.support.pdv_modes import Modes, count_modes
from workloads.__main__ import main
from workloads.datasets.synthetic import LengthSpec
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.replay import replay
from workloads.drivers.run_spec import RunHooks, RunSettings, RunSpec
from workloads.drivers.trace import DatasetSpec, load_trace

# two groups of two at C = 4 pipeline (count choice, threshold 3); fewer than 3 running run atomically
MIXED = EngineConfig(micro_batches=2, hybrid_threshold=3, step_choice=StepChoice.COUNT)


def test_a_pdv_run_counts_the_groups_of_its_measured_part_and_not_its_warm_up(tiny_pair):
    trace = load_trace(DatasetSpec("synthetic", LengthSpec(12, 0.0), LengthSpec(10, 0.0)), tiny_pair, 8, 0, 10)
    counted: dict[str, Modes] = {}

    def counting_engine(name, pair, config):
        eng = make_engine(name, pair, config)
        counted["run"] = count_modes(eng)  # every group from the engine's start: warm-up and run
        submit = eng.submit

        def submit_noting_the_warm_up(request):
            if not request.request_id.startswith("warmup-") and "warm-up" not in counted:
                counted["warm-up"] = replace(counted["run"])  # the warm-up's requests have all ended by now
            return submit(request)

        eng.submit = submit_noting_the_warm_up
        return eng

    settings = RunSettings(config=MIXED, params=SamplingParams(max_new_tokens=10, seed=0), warmup=4)
    result = replay(tiny_pair, trace, RunSpec("pdv", ClosedLoop(4), settings), RunHooks(engine_factory=counting_engine))

    every, warm = counted["run"], counted["warm-up"]
    assert warm.hybrid_steps + warm.pipelined_blocks > 0  # the warm-up did run groups, which must not count
    assert result.step_modes == StepModes(
        every.hybrid_steps - warm.hybrid_steps, every.pipelined_blocks - warm.pipelined_blocks
    )
    # groups ran in the measured part too (pipelined while 3 or more run; whether a short tail of fewer runs
    # atomically depends on when requests end, so the atomic count is checked only through the equality above)
    assert result.step_modes.pipelined > 0
    assert result.record().round_meta["step_modes"] == result.step_modes._asdict()


def test_run_json_holds_pdvs_step_modes_per_round_and_their_sum_and_none_for_other_engines(tmp_path):
    out = tmp_path / "run"
    code = main([
        "replay", "--engines", "baseline,pdv", "--concurrency", "4", "--num-requests", "6", "--dataset", "synthetic",
        "--input-len", "12", "--output-len", "8", "--rounds", "2", "--micro-batches", "2", "--hybrid-threshold",
        "3", "--step-choice", "count", "--preset", "tiny", "--device", "cpu", "--seed", "1", "--out", str(out),
    ])  # fmt: skip
    assert code == 0
    runs = {run["engine"]: run for run in json.loads((out / "run.json").read_text())["runs"]}
    assert runs["baseline"]["step_modes"] is None
    assert all(entry["step_modes"] is None for entry in runs["baseline"]["rounds"])
    rounds = [entry["step_modes"] for entry in runs["pdv"]["rounds"]]
    assert len(rounds) == 2 and sum(r["pipelined"] for r in rounds) > 0  # not vacuous: groups were counted
    assert runs["pdv"]["step_modes"] == {k: rounds[0][k] + rounds[1][k] for k in ("atomic", "pipelined")}
