"""``validate-sim`` on the tiny pair: real runs and their simulations side by side, the table written."""

from __future__ import annotations

import csv

from metrics.runs import load_run_dir
from workloads.__main__ import main


def test_validate_sim_writes_predicted_against_measured_for_each_engine_and_figure(tmp_path, capsys):
    out = tmp_path / "v"
    code = main([
        "validate-sim", "--preset", "tiny", "--device", "cpu", "--engines", "baseline,pd,pdv", "--concurrency", "2",
        "--num-requests", "4", "--rounds", "1", "--warmup", "0", "--max-new-tokens", "6", "--out", str(out),
    ])  # fmt: skip
    stdout = capsys.readouterr().out
    assert code == 0
    with open(out / "validation.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["engine"], r["figure"]) for r in rows} == {
        (e, f) for e in ("baseline", "pd", "pdv") for f in ("tok/s", "TPOT p50 ms", "TPOT p99 ms", "TTFT p50 ms")
    }
    assert all(float(r["measured"]) > 0 and float(r["simulated"]) > 0 for r in rows if r["figure"] == "tok/s")
    assert "| baseline | c2 | tok/s |" in (out / "validation.md").read_text()
    assert "SIMULATED" in stdout and "within ±10%" in stdout
    summary = load_run_dir(out).frames.summary
    simulated = summary[summary["simulated"].notna()]
    assert len(simulated) == 3 and len(summary) == 6  # three real runs and their three simulations
    assert simulated["run_id"].str.startswith("sim-").all()
