"""The lane-modes part of ``python -m workloads bench``: seven competitors, lanes at once against taking turns."""

from __future__ import annotations

from engine.config import EngineConfig
from workloads.bench.common import read_csv
from workloads.bench.lane_modes import NAME, SUMMARY, LaneModesOptions, competitors, group_name, record
from workloads.bench.parts import PARTS, SUITE, parse_parts
from workloads.bench.run import main, part_options

QUICK = ["--quick", "--preset", "tiny", "--device", "cpu"]


def test_the_part_is_listed_by_name_and_number_and_runs_only_when_named():
    assert parse_parts("lane-modes") == parse_parts("11") == [NAME]
    assert PARTS[NAME].options is LaneModesOptions and NAME not in SUITE


def test_its_flags_are_read_into_its_options():
    argv = ["--parts", "lane-modes", "--lane-modes-concurrency", "16", "--lane-modes-requests", "12",
            "--lane-modes-max-new-tokens", "24"]  # fmt: skip
    assert part_options(LaneModesOptions, argv) == LaneModesOptions(concurrency=16, requests=12, max_new_tokens=24)
    model = part_options(LaneModesOptions, [*argv, "--lane-modes-drafter", "model"])
    assert model.drafter == "model" and LaneModesOptions().drafter == EngineConfig().drafter


def test_a_load_point_with_another_drafter_than_the_default_is_its_own_group():
    assert group_name(LaneModesOptions(concurrency=4)) == "C=4"
    assert group_name(LaneModesOptions(concurrency=4, drafter="model")) == "C=4, model"


def test_the_quick_part_runs_every_competitor_with_outputs_equal_to_ars_and_writes_its_table(tmp_path):
    out = tmp_path / "b"
    assert main([*QUICK, "--out", str(out), "--parts", "lane-modes"]) == 0
    labels = [c.label for c in competitors(EngineConfig())]
    rows = read_csv(out / "lane-modes" / "lane-modes.csv")
    assert sorted(r["label"] for r in rows) == sorted(labels)  # one round in --quick
    assert all(float(r["output_tok_s"]) > 0 and r["same_output_as_ar"] == "True" for r in rows)
    assert all(0 <= float(r[k]) <= 1 for r in rows for k in ("others_cpu_share", "steal_share"))  # the machine
    # PDV's groups are counted for PDV's runs only, and its runs did run groups
    assert all((r["atomic_groups"] == "") == (r["engine"] != "pdv") for r in rows)
    assert all(int(r["atomic_groups"]) + int(r["pipelined_groups"]) > 0 for r in rows if r["engine"] == "pdv")
    table = read_csv(out / "lane-modes" / SUMMARY)
    assert [t["competitor"] for t in table] == labels and {t["C"] for t in table} == {"2"}
    assert {t["outputs = AR's"] for t in table} == {"True"}
    summary = [s for s in read_csv(out / "summary.csv") if s["part"] == NAME and s["metric"] == "output_tok_s"]
    assert {s["label"] for s in summary} == set(labels) and all(float(s["ratio_median"]) > 0 for s in summary)
    notes = [n["note"] for n in read_csv(out / "notes.csv") if n["part"] == NAME]
    assert any(n.startswith("C=2: pdv ÷ max(baseline, pd), per round:") for n in notes)
    assert "Every output equal to ar's: True." in notes


def row(group: str, round_: int, label: str, tok_s: float) -> dict:
    return {"group": group, "round": round_, "label": label, "engine": label, "output_tok_s": tok_s,
            "tpot_p50_ms": 10.0, "atomic_groups": None, "pipelined_groups": None,
            "same_output_as_ar": True}  # fmt: skip


def test_a_load_point_measured_again_gets_rounds_after_its_earlier_ones(tmp_path):
    csv = tmp_path / "lane-modes.csv"
    record(csv, [row("C=4", 0, "ar", 10.0), row("C=4", 0, "baseline", 12.0)])
    record(csv, [row("C=16", 0, "ar", 20.0), row("C=16", 0, "baseline", 18.0)])
    every = record(csv, [row("C=4", 0, "ar", 10.0), row("C=4", 0, "baseline", 8.0)])
    ar_rounds = sorted((r["group"], r["round"]) for r in every if r["label"] == "ar")
    assert ar_rounds == [("C=16", 0), ("C=4", 0), ("C=4", 1)]
    table = {(t["C"], t["competitor"]): t for t in read_csv(tmp_path / SUMMARY)}
    assert table[("4", "baseline")]["rounds"] == "2" and table[("16", "baseline")]["rounds"] == "1"
    assert table[("4", "baseline")]["× AR, median (min–max)"] == "1.00x (0.80-1.20)"


def test_named_competitors_run_alone_and_the_arbiters_variants_take_only_the_prefill_interleaving_away():
    import pytest

    from workloads.bench.lane_modes import notes

    picked = competitors(EngineConfig(), ("ar", "pd", "pd prefill-after off"))
    assert [c.label for c in picked] == ["ar", "pd", "pd prefill-after off"]
    with_it, without = picked[1].config, picked[2].config
    assert with_it.prefill_after_turns == 1  # the default: the colocated loop's order
    assert without.prefill_after_turns is None and without == EngineConfig(prefill_after_turns=None)
    argv = ["--parts", "lane-modes", "--lane-modes-competitors", "ar,pdv,pdv prefill-after off"]
    assert part_options(LaneModesOptions, argv).labels == ("ar", "pdv", "pdv prefill-after off")
    with pytest.raises(ValueError, match="needs ar"):
        LaneModesOptions(labels=("pd", "pd prefill-after off"))
    rows = [row("C=4", r, label, tok_s) for r in (0, 1) for label, tok_s in
            (("ar", 10.0), ("pd", 9.9 + r), ("pd prefill-after off", 9.0), ("baseline", 10.0))]  # fmt: skip
    assert "C=4: pd ÷ pd prefill-after off, per round: 1.100, 1.211; median 1.156 (1.100–1.211)." in notes(rows)


def test_elastic_competitors_change_only_the_lane_mode_and_read_against_taking_turns():
    from engine.config import LaneCompute
    from workloads.bench.lane_modes import notes

    picked = competitors(EngineConfig(), ("ar", "pd", "pd elastic", "pdv elastic"))
    assert [(c.label, c.engine) for c in picked] == [("ar", "ar"), ("pd", "pd"), ("pd elastic", "pd"),
                                                     ("pdv elastic", "pdv")]  # fmt: skip
    assert picked[2].config == EngineConfig(lane_compute=LaneCompute.ELASTIC) == picked[3].config
    rows = [row("C=4", r, label, tok_s) for r in (0, 1) for label, tok_s in
            (("ar", 10.0), ("pd", 10.0), ("pd elastic", 11.0 + r), ("baseline", 10.0))]  # fmt: skip
    assert "C=4: pd elastic ÷ pd, per round: 1.100, 1.200; median 1.150 (1.100–1.200)." in notes(rows)


def test_the_lane_modes_part_writes_pdvs_goal_per_load_point_beside_its_summary(tmp_path):
    from workloads.bench.lane_modes import GOALS

    pdv = {"C=1": 10.0, "C=32": 9.0}
    rows = [row(group, r, label, tok_s) for group in pdv for r in (0, 1)
            for label, tok_s in (("ar", 10.0), ("baseline", 10.0), ("pd", 10.0), ("pdv", pdv[group]))]  # fmt: skip
    record(tmp_path / "lane-modes.csv", rows)
    goals = read_csv(tmp_path / GOALS)
    assert [(g["load"], g["median >= 0.97"]) for g in goals] == [("C=1", "met"), ("C=32", "missed")]
