"""The benchmark suite: its arithmetic on hand-made numbers, and --quick end to end on the tiny pair."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from metrics.runs import list_run_dirs
from workloads.bench.common import read_csv
from workloads.bench.docs import STATUS_BEGIN, STATUS_END, TITLE, render
from workloads.bench.load import serial_served
from workloads.bench.parts import parse_parts
from workloads.bench.reference import HFTiming
from workloads.bench.rows import Row, ratio_summary
from workloads.bench.run import main

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, kw_only=True)
class TokRow(Row):
    tok: float


def test_ratios_are_taken_within_each_round_and_summarised_by_median_and_spread():
    rates = [(10.0, 12.0), (20.0, 30.0), (10.0, 13.0)]  # per round: ref's, x's
    rows = [TokRow(group="C=1", round=r, label=label, tok=tok)
            for r, pair in enumerate(rates) for label, tok in zip(("ref", "x"), pair, strict=True)]  # fmt: skip
    x = next(s for s in ratio_summary(rows, "tok", "ref", "p") if s.label == "x")
    assert x.ratio.median == pytest.approx(1.3)  # ratios 1.2, 1.5, 1.3: not 13/10 of the medians
    assert (x.ratio.lo, x.ratio.hi, x.median, x.rounds) == (pytest.approx(1.2), 1.5, 13.0, 3)
    assert x.ratio.text() == "1.30× (1.20–1.50)"  # the one text of a ratio with its interval
    assert x.record()["ratio_min"] == pytest.approx(1.2)  # the CSV's columns


def test_a_serial_server_under_a_closed_loop_queues_each_request_behind_the_previous_ones():
    # three requests of 1 s each, first token 0.25 s after each starts, 5 tokens each
    timings = [HFTiming(t, t + 0.25, t + 1.0, [1, 2, 3, 4, 5]) for t in (0.0, 10.0, 20.0)]
    one = serial_served(timings, 1)  # each arrives when the previous one ends: no wait
    assert one["output_tok_s"] == pytest.approx(5.0)
    assert one["ttft_p50_ms"] == pytest.approx(250.0) and one["tpot_p50_ms"] == pytest.approx(187.5)
    all_at_once = serial_served(timings, 3)  # all arrive at 0: they wait 0, 1 and 2 s
    assert all_at_once["ttft_p99_ms"] == pytest.approx(1250.0 + 0.98 * 1000.0)  # ttfts 250, 1250, 2250 ms
    assert all_at_once["ttft_p50_ms"] == pytest.approx(1250.0)


def test_parts_are_named_by_number_or_name_and_unknown_ones_refused():
    assert parse_parts("1,hardware,drafters") == ["1-overhead", "5-hardware", "7-drafters"]
    with pytest.raises(ValueError, match="unknown part 'x'"):
        parse_parts("x")


def test_quick_bench_on_tiny_writes_csvs_runs_and_a_generated_results_page(tmp_path):
    out = tmp_path / "bench"
    assert main(["--quick", "--preset", "tiny", "--device", "cpu", "--parts", "1,3", "--out", str(out)]) == 0
    summary = read_csv(out / "summary.csv")
    ar = next(s for s in summary if s["part"] == "1-overhead" and s["label"] == "ar")
    assert float(ar["ratio_median"]) > 0 and ar["reference"] == "transformers generate"
    overhead = read_csv(out / "1-overhead.csv")
    assert {r["same_output"] for r in overhead} == {"True"}  # the engine and transformers agree token for token
    load = read_csv(out / "3-load.csv")
    assert {r["group"] for r in load} == {"C=1", "C=4", "C=16"}
    assert {r["label"] for r in load} == {"ar", "baseline", "pd", "pdv", "transformers generate (serial)"}
    assert {r["same_output_as_ar"] for r in load} == {"True"}  # every engine and transformers, at every C
    goals = read_csv(out / "goals.csv")
    assert [g["part"] for g in goals] == ["1-overhead", *["3-load"] * 4]
    assert {g["met"] for g in goals} <= {"met", "missed"}
    # PDV's goal at every load point, read from the rounds' own rates: PDV over the better of Baseline and PD
    pdv_goals = {g["goal"]: g for g in goals if g["goal"].startswith("PDV")}
    rate = {(r["group"], r["label"]): float(r["output_tok_s"]) for r in load}  # --quick: one round
    for c in ("C=1", "C=4", "C=16"):
        goal = pdv_goals[f"PDV >= 0.97x Baseline and PD (tokens/s, {c})"]
        to_b, to_pd = (rate[c, "pdv"] / rate[c, other] for other in ("baseline", "pd"))
        assert goal["figure"].startswith(f"÷ Baseline {to_b:.3f}× (1 round)")
        assert f"; ÷ PD {to_pd:.3f}× (1 round)" in goal["figure"]
        assert goal["met"] == ("met" if min(to_b, to_pd) >= 0.97 else "missed")
    assert [g["load"] for g in read_csv(out / "pdv-goal.csv")] == ["C=1", "C=4", "C=16"]
    runs = {info.path.name: info for info in list_run_dirs(out)}
    assert set(runs["load-sweep"].engines) == {"ar", "baseline", "pd", "pdv"}  # the Runs page lists it
    assert (out / "figures" / "figures.html").exists()

    docs = tmp_path / "docs" / "results.md"
    docs.parent.mkdir()
    docs.write_text("# Results\n\nan older page, replaced whole\n")
    readme = tmp_path / "README.md"
    readme.write_text(f"# Product\n\n{STATUS_BEGIN}\nold table\n{STATUS_END}\n\nkept as written\n")
    render(out, docs, readme)
    text = docs.read_text()
    assert text.startswith(TITLE) and "an older page" not in text
    [row] = [line for line in text.splitlines() if line.startswith("| C=16 | pdv |")]
    pdv = next(s for s in summary if (s["group"], s["label"], s["metric"]) == ("C=16", "pdv", "output_tok_s"))
    assert float(row.split("|")[3]) == pytest.approx(float(pdv["median"]), rel=1e-3)  # the page shows the CSV's
    assert (tmp_path / "docs" / "data" / "bench" / "summary.csv").exists()
    goal_table = text.split("## PDV's goal per load point")[1].split("##")[0]
    [goal_16] = [line for line in goal_table.splitlines() if line.startswith("| C=16 |")]
    assert goal_16.split(" | ")[-1] == "1 |"  # the page shows pdv-goal.csv: --quick's one round at C = 16
    status = readme.read_text()
    assert "old table" not in status and status.endswith(f"{STATUS_END}\n\nkept as written\n")
    [best] = [line for line in status.splitlines() if line.startswith("| best engine at C = 16")]
    best_goal = next(g for g in goals if g["goal"].startswith("best engine"))
    assert best == f"| {best_goal['goal']} | {best_goal['figure']} | {best_goal['met']} |"
    [pdv_row] = [line for line in status.splitlines() if line.startswith("| PDV >= 0.97x")]
    met = sum(g["met"] == "met" for g in goals if g["goal"].startswith("PDV"))
    assert f"median met at {met} of 3 " in pdv_row  # C = 1, 4 and 16 folded into one row
    render(tmp_path / "docs" / "data" / "bench", docs, readme)  # again from the copy the page keeps: the same
    assert docs.read_text() == text and readme.read_text() == status
    (out / "pdv-goal.csv").unlink()  # a run without one: the copy of the earlier run's is not shown as its
    render(out, docs)
    assert "## PDV's goal per load point" not in docs.read_text()
    assert not (tmp_path / "docs" / "data" / "bench" / "pdv-goal.csv").exists()


def test_the_kv_read_counts_keys_and_values_of_every_layer_and_kv_head():
    from types import SimpleNamespace

    from workloads.bench.hardware import kv_bytes

    config = SimpleNamespace(num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576)
    # 32 rows x 128 tokens x 30 layers x (K and V) x 3 heads x 64 dims x 4 bytes
    assert kv_bytes(SimpleNamespace(config=config), 32, 128, 4) == 32 * 128 * 30 * 2 * 3 * 64 * 4


def test_rendering_docs_from_a_directory_that_is_no_bench_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="is not a bench directory: summary.csv, goals.csv"):
        render(tmp_path, tmp_path / "docs" / "results.md")


def test_a_readme_without_the_status_markers_is_one_error_and_neither_file_is_written(tmp_path):
    docs, readme = tmp_path / "docs" / "results.md", tmp_path / "README.md"
    readme.write_text("# Product\n")
    with pytest.raises(ValueError, match="no <!-- status:begin -->"):
        render(ROOT / "docs" / "data" / "bench", docs, readme)
    assert not docs.exists() and readme.read_text() == "# Product\n"
