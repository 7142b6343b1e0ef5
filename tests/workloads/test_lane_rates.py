"""The lane-rates bench part in its quick mode on the tiny pair: rows for both settings, ratios per round, the
docs table written beside the CSV, rounds kept apart across calls, and one clear error for a bad shape."""

from __future__ import annotations

import argparse

import pytest

from workloads.bench.common import read_csv
from workloads.bench.lane_rates import NAME, SUMMARY, record, shape_list
from workloads.bench.run import main

QUICK = ["--quick", "--preset", "tiny", "--device", "cpu"]


def test_the_quick_part_measures_both_settings_at_each_shape_and_writes_the_docs_table(tmp_path):
    out = tmp_path / "b"
    assert main([*QUICK, "--out", str(out), "--parts", "lane-rates", "--lane-rates-shapes", "1x1,4x3"]) == 0
    rows = read_csv(out / "lane-rates" / "lane-rates.csv")
    one, two = "1 lane x 2 threads", "2 lanes x 1 thread (sum)"
    assert {(r["group"], r["label"]) for r in rows} == {(s, label) for s in ("1 x 1", "4 x 3") for label in (one, two)}
    assert all(float(r["forwards_per_s"]) > 0 for r in rows)
    assert all(len(r["lane_rates"].split("/")) == 2 for r in rows if r["label"] == two)  # each lane's own rate
    summary = [s for s in read_csv(out / "summary.csv") if s["part"] == NAME and s["label"] == two]
    assert len(summary) == 2 and all(float(s["ratio_median"]) > 0 and s["rounds"] == "1" for s in summary)
    table = read_csv(out / "lane-rates" / SUMMARY)
    assert [row["rows × tokens per forward"] for row in table] == ["1 × 1", "4 × 3"]
    assert all(float(row["two lanes ÷ one lane"]) > 0 for row in table)
    assert any("more in some rounds" in n["note"] for n in read_csv(out / "notes.csv") if n["part"] == NAME)


def test_a_shape_measured_again_gets_rounds_after_its_earlier_ones(tmp_path):
    def rows(one: float, two: float) -> list[dict]:
        common = {"group": "8 x 1", "round": 0, "rows": 8, "tokens": 1}
        return [
            {**common, "label": "1 lane x 2 threads", "forwards_per_s": one},
            {**common, "label": "2 lanes x 1 thread (sum)", "forwards_per_s": two},
        ]

    path = tmp_path / "lane-rates.csv"
    record(path, rows(10.0, 12.0))
    summary = record(path, rows(10.0, 15.0))
    ratio = next(s for s in summary if s["label"].startswith("2 lanes"))
    assert sorted(int(r["round"]) for r in read_csv(path)) == [0, 0, 1, 1]
    assert (ratio["ratio_min"], ratio["ratio_max"], ratio["rounds"]) == (pytest.approx(1.2), pytest.approx(1.5), 2)


@pytest.mark.parametrize("text", ["8y5", "0x1", "8x", ""])
def test_a_bad_shape_is_one_clear_error(text):
    with pytest.raises(argparse.ArgumentTypeError):
        shape_list(text)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--lane-rates-shapes", "8y5"], "'8y5' is not ROWSxTOKENS"),
        (["--lane-rates-seconds", "0"], "--lane-rates-seconds"),
    ],
)
def test_a_bad_option_is_one_error_naming_its_flag_before_any_model_loads(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        main([*QUICK, "--out", str(tmp_path / "b"), "--parts", "lane-rates", *flags])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err and not (tmp_path / "b").exists()
