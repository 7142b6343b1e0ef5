"""The lane-rates bench part in its quick mode on the tiny pair: rows for both settings, ratios per round, the
docs table written beside the CSV, rounds kept apart across calls, and one clear error for a bad shape."""

from __future__ import annotations

import argparse

import pytest

from workloads.bench.common import BenchContext, BenchSettings, read_csv
from workloads.bench.lane_rates import NAME, SUMMARY, LaneRatesOptions, main, record, run, shape_list


def test_the_quick_part_measures_both_settings_at_each_shape_and_writes_the_docs_table(tiny_pair, tmp_path):
    ctx = BenchContext(tiny_pair, BenchSettings.quick_settings(), tmp_path)
    result = run(ctx, LaneRatesOptions(shapes=shape_list("1x1,4x3")))
    assert result.name == NAME
    assert {(r["group"], r["label"]) for r in result.rows} == {
        (shape, label) for shape in ("1 x 1", "4 x 3") for label in ("1 lane x 2 threads", "2 lanes x 1 thread (sum)")
    }
    two_lanes = [r for r in result.rows if r["label"].startswith("2 lanes")]
    assert all(r["forwards_per_s"] > 0 and len(r["lane_rates"].split("/")) == 2 for r in two_lanes)
    ratios = [s for s in result.summary if s["ratio_median"] is not None and s["label"].startswith("2 lanes")]
    assert len(ratios) == 2 and all(s["rounds"] == 1 for s in ratios)
    table = read_csv(tmp_path / "lane-rates" / SUMMARY)
    assert [row["rows × tokens per forward"] for row in table] == ["1 × 1", "4 × 3"]
    assert all(float(row["two lanes ÷ one lane"]) > 0 for row in table)
    assert "overlapped 1" in result.notes[0]


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


def test_the_command_names_the_flag_of_a_bad_value(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--preset", "tiny", "--lane-rates-csv", str(tmp_path / "x.csv"), "--lane-rates-rounds", "0"])
    assert "--lane-rates-rounds must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
