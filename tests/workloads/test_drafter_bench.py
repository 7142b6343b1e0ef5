"""The drafter benchmark runs end to end on the tiny pair, and every setup's output is AR's."""

from __future__ import annotations

import csv

from workloads.bench.drafters import SETUPS, main


def test_every_setup_runs_and_matches_ar_token_for_token(tmp_path, capsys):
    out = tmp_path / "bench"
    argv = ["--preset", "tiny", "--parts", "single", "--rounds", "1", "--prompts", "2", "--max-new-tokens", "8"]
    assert main([*argv, "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "runs.csv")))
    engines = [r for r in rows if not r["label"].startswith("transformers")]
    assert [r["label"] for r in engines] == [s.label for s in SETUPS]
    assert all(r["identical"] == "True" for r in engines)
    assert all(float(r["output_tok_s"]) > 0 for r in rows)
    assert {r["label"] for r in rows} >= {"transformers generate", "transformers generate lookup=3"}
    summary = (out / "summary.md").read_text()
    assert "| C=1 | ar |" in summary and "x AR (median)" in summary
    assert summary in capsys.readouterr().out
