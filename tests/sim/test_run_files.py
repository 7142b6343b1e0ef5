"""Simulated runs write the replay's run files, every row marked simulated, readable by Runs and the report."""

from __future__ import annotations

import json

from metrics.runs import load_run_dir
from metrics.schema import RUN_FILES, SUMMARY_COLUMNS
from sim.acceptance import Acceptance
from sim.policies import EngineConfig, EngineName, SamplingParams
from tests.sim.support import ConstantCost
from workloads.__main__ import main
from workloads.drivers.arrivals import ClosedLoop, OpenLoop
from workloads.drivers.simulate import SimSetup, simulate_sweep
from workloads.drivers.trace import Trace, TraceItem
from workloads.report.html import run_labels


def _trace(n: int) -> Trace:
    return Trace(tuple(TraceItem(f"q{i}", f"prompt {i}", (1,) * (10 + i), 6 + i % 5) for i in range(n)), "test", 0)


def test_a_simulated_sweep_writes_every_run_file_marked_simulated(tmp_path):
    setup = SimSetup(ConstantCost(), Acceptance.parametric(0.5), EngineConfig(), SamplingParams(), 4096, 1000)
    engines = (EngineName.AR, EngineName.BASELINE, EngineName.PD, EngineName.PDV)
    points = simulate_sweep(_trace(12), engines, (ClosedLoop(4), OpenLoop(50.0)), setup, tmp_path)
    assert len(points) == 8 and all(p.result.summary.simulated == "constant" for p in points)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(RUN_FILES)
    run = load_run_dir(tmp_path)
    summary = run.frames.summary
    assert tuple(summary.columns) == SUMMARY_COLUMNS
    assert (summary["simulated"] == "constant").all() and (summary["completed"] == 12).all()
    assert len(run.frames.requests) == 8 * 12 and run.frames.requests["run_id"].str.startswith("sim-").all()
    assert len(run.frames.timeseries) > 0
    rounds = (tmp_path / "rounds.csv").read_text().splitlines()
    assert rounds[0].endswith(",simulated") and all(line.endswith(",constant") for line in rounds[1:])
    entries = json.loads((tmp_path / "run.json").read_text())["runs"]
    assert all(e["simulated"]["cost_model"]["cost model"] == "constant" for e in entries)
    assert all(e["device_probe"]["source"] == "simulated" for e in entries)
    first = json.loads((tmp_path / "outputs.jsonl").read_text().splitlines()[12])  # baseline's first request
    assert first["steps"] and first["token_kinds"][0] == "first"
    labels = run_labels([run])
    assert len(labels) == 8 and all(label.endswith("(simulated: constant)") for label in labels.values())


def test_the_simulate_command_prints_each_row_labelled_with_its_assumptions(tmp_path, capsys):
    out = tmp_path / "sim"
    code = main([
        "simulate", "--device", "h100", "--device-param", "overlap=0.8", "--pair", "qwen-7b-0.5b",
        "--trace", "synthetic", "--input-len", "64", "--output-len", "16", "--num-requests", "20",
        "--concurrency", "1,8", "--acceptance", "0.6", "--out", str(out), "--json",
    ])  # fmt: skip
    stdout = capsys.readouterr().out
    assert code == 0
    lines = stdout.splitlines()
    rows = [line for line in lines if line.strip().startswith(("baseline", "pd", "pdv"))]
    assert len(rows) == 6 and all("simulated: roofline H100 SXM" in row for row in rows)
    assert "SIMULATED, not measured" in lines[0]
    assert "overlap: 0.8" in stdout and "acceptance: parametric" in stdout
    result = json.loads(lines[-1])
    assert result["simulated"] is True and len(result["rows"]) == 6
    assert load_run_dir(out).frames.summary["simulated"].eq("roofline H100 SXM").all()


def test_bad_simulate_input_gets_one_clear_error(tmp_path, capsys):
    assert main(["simulate", "--device", "tpu9", "--acceptance", "0.5", "--out", str(tmp_path / "a")]) == 2
    assert "unknown device 'tpu9'" in capsys.readouterr().err
    assert main(["simulate", "--out", str(tmp_path / "b")]) == 2
    assert "--acceptance ALPHA" in capsys.readouterr().err
    assert main(["simulate", "--pair", "llama-70b-8b", "--device", "h100", "--acceptance", "0.5"]) == 2
    assert "split them over more devices" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


def test_the_simulate_command_prices_forwards_from_a_measured_profile_file(tmp_path, capsys):
    profile = {"batch_sizes": [1, 8], "tokens": [1, 5], "verify_ms": [[20.0, 25.0], [40.0, 90.0]],
               "draft_ms": [3.0, 6.0], "machine": {"device": "cpu", "threads": "2"}, "interference": None}  # fmt: skip
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    code = main([
        "simulate", "--profile", str(tmp_path / "profile.json"), "--trace", "synthetic", "--input-len", "32",
        "--output-len", "8", "--num-requests", "6", "--concurrency", "2", "--acceptance", "0.3",
        "--max-batch-size", "8", "--max-draft-len", "4", "--out", str(tmp_path / "sim"),
    ])  # fmt: skip
    stdout = capsys.readouterr().out
    assert code == 0
    rows = [line for line in stdout.splitlines() if line.strip().startswith(("baseline", "pd", "pdv"))]
    assert len(rows) == 3 and all("simulated: measured profile cpu" in row for row in rows)
    assert f"profile: {tmp_path / 'profile.json'}" in stdout
    beyond = ["simulate", "--profile", str(tmp_path / "profile.json"), "--acceptance", "0.3", "--max-batch-size", "16"]
    assert main([*beyond, "--out", str(tmp_path / "beyond")]) == 2
    assert "the profile covers batches up to 8" in capsys.readouterr().err
