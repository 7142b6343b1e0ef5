"""The run files: exact columns, empty cells where a value does not apply, appending, reading back."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, replace

import pandas as pd
import pytest

from metrics.export import RunFilesError, write_run, write_summary
from metrics.frames import cdf, live_frames, run_labels
from metrics.host_noise import HostNoise
from metrics.request_metrics import RequestMetrics
from metrics.run_key import RunKey
from metrics.run_record import RequestOutput, RunRecord
from metrics.runs import list_run_dirs, load_run_dir
from metrics.schema import (
    OUTPUT_FIELDS,
    REQUEST_COLUMNS,
    ROUND_COLUMNS,
    RUN_FILES,
    SUMMARY_COLUMNS,
    TIMESERIES_COLUMNS,
)
from metrics.summary import summarize
from metrics.timeseries import TimeseriesRow


def request(rid: str, out: int, tpot: float | None, status: str = "ok", error: str | None = None) -> RequestMetrics:
    return RequestMetrics(
        rid, status, error, 7, out, 0.5, 0.6, 0.9, 100.0, tpot, 400.0, 1.5, (1.0,) * max(0, out - 1), 0, 0, 0
    )


def ts_row(t: float) -> TimeseriesRow:
    return TimeseriesRow(
        t_s=t,
        window_s=0.25,
        tokens_per_s=40.0,
        running=2,
        waiting=1,
        queue_prefill=None,
        queue_decode=None,
        queue_verify=None,
        draft_len=None,
        acceptance_rate=None,
        busy_prefill=None,
        busy_decode=None,
        busy_verify=None,
        busy_loop=0.9,
        gpu_util=None,
        gpu_mem_util=None,
        sm_occupancy=None,
        dram_bw_util=None,
        cpu_util=50.0,
        rss_mb=512.0,
    )


def ar_record(run_id: str = "run-ar") -> RunRecord:
    key = RunKey(run_id, "ar", 2, None)
    reqs = (
        request("NA", 1, None),  # one token: no TPOT; an id pandas would read as missing by default
        request("007", 3, 12.5),  # looks like a number, must stay text
        request("r3", 0, None, status="rejected", error="prompt, too long\nfor the model"),
    )
    return RunRecord(
        key=key,
        requests=reqs,
        timeseries=(ts_row(0.25), ts_row(0.5)),
        summary=summarize(key, reqs, duration_s=2.0),
        outputs=(RequestOutput(run_id, "ar", "NA", "hi", (1, 2), (3,), "x"),),
        meta={"seed": 3},
    )


def write_one(out, record: RunRecord) -> None:
    """A run of one round: the round, then its summary row (ratios empty: no AR round beside it)."""
    write_run(out, record)
    write_summary(out, [asdict(record.summary)], {"verdict": "no verdict"})


def read_raw(path):
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def test_csv_files_have_the_exact_columns_and_empty_cells_where_not_applicable(tmp_path):
    write_one(tmp_path, ar_record())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(RUN_FILES)
    requests = read_raw(tmp_path / "requests.csv")
    assert tuple(requests[0]) == REQUEST_COLUMNS
    one_token = dict(zip(REQUEST_COLUMNS, requests[1], strict=True))
    assert one_token["tpot_ms"] == "" and one_token["request_rate"] == "" and one_token["error"] == ""
    assert one_token["ttft_ms"] == "100.0" and one_token["concurrency"] == "2"
    series = read_raw(tmp_path / "timeseries.csv")
    assert tuple(series[0]) == TIMESERIES_COLUMNS
    cells = dict(zip(TIMESERIES_COLUMNS, series[1], strict=True))
    not_applicable = ("queue_prefill", "queue_decode", "queue_verify", "draft_len", "acceptance_rate")
    for column in (*not_applicable, "gpu_util", "gpu_mem_util"):
        assert cells[column] == "", column
    assert cells["cpu_util"] == "50.0" and cells["running"] == "2"
    summary = read_raw(tmp_path / "summary.csv")
    assert tuple(summary[0]) == SUMMARY_COLUMNS
    row = dict(zip(SUMMARY_COLUMNS, summary[1], strict=True))
    assert row["acceptance_rate"] == "" and row["goodput_req_s"] == ""
    assert (row["completed"], row["failed"]) == ("2", "1")
    output = json.loads((tmp_path / "outputs.jsonl").read_text().splitlines()[0])
    assert tuple(output) == OUTPUT_FIELDS and output["output_token_ids"] == [3]
    run_json = json.loads((tmp_path / "run.json").read_text())
    assert run_json["runs"][0]["run_id"] == "run-ar" and run_json["runs"][0]["seed"] == 3
    assert run_json["runs"][0]["verdict"] == "no verdict" and row["rounds"] == "" and row["tok_s_x_ar"] == ""
    rounds = read_raw(tmp_path / "rounds.csv")
    assert tuple(rounds[0]) == ROUND_COLUMNS
    assert dict(zip(ROUND_COLUMNS, rounds[1], strict=True))["round"] == "1"


def test_rounds_of_one_run_share_its_entry_and_add_up_in_it(tmp_path):
    first = ar_record("run-ar")
    write_run(
        tmp_path,
        replace(
            first,
            round_meta={
                "duration_s": 2.0,
                "status_counts": {"ok": 2, "failed": 1},
                "stop_reason": None,
                "position_acceptance": [{"position": 1, "drafted": 4, "accepted": 2, "drafts": 4}],
            },
        ),
    )
    write_run(tmp_path, replace(first, round=2, noise=HostNoise(2.0, 0.3, 0.0, 1.2), round_meta={
        "duration_s": 3.0, "status_counts": {"ok": 3, "failed": 0}, "stop_reason": "timeout",
        "position_acceptance": [{"position": 1, "drafted": 2, "accepted": 2, "drafts": 2},
                                {"position": 2, "drafted": 1, "accepted": 0, "drafts": 2}]}))  # fmt: skip
    (entry,) = json.loads((tmp_path / "run.json").read_text())["runs"]
    assert [r["round"] for r in entry["rounds"]] == [1, 2]
    assert entry["rounds"][1]["host_noise"]["others_share"] == 0.3
    assert (entry["duration_s"], entry["status_counts"], entry["stop_reason"]) == (
        5.0,
        {"ok": 5, "failed": 1},
        "timeout",
    )
    assert entry["position_acceptance"] == [
        {"position": 1, "drafted": 6, "accepted": 4, "drafts": 6},
        {"position": 2, "drafted": 1, "accepted": 0, "drafts": 2},
    ]
    loaded = load_run_dir(tmp_path)
    assert list(loaded.frames.requests["round"]) == [1, 1, 1, 2, 2, 2]
    rounds = pd.read_csv(tmp_path / "rounds.csv")
    assert list(rounds["round"]) == [1, 2] and list(rounds["others_cpu_share"].fillna(-1)) == [-1, 0.3]


def test_a_second_run_is_appended_and_reads_back_like_the_live_frames(tmp_path):
    first, second = ar_record("run-1"), ar_record("run-2")
    write_one(tmp_path, first)
    write_one(tmp_path, second)
    loaded = load_run_dir(tmp_path)
    live = live_frames([first, second])
    assert [r["run_id"] for r in loaded.runs] == ["run-1", "run-2"]
    assert list(loaded.frames.summary["run_id"]) == ["run-1", "run-2"]
    for name in ("requests", "timeseries", "summary"):
        pd.testing.assert_frame_equal(getattr(loaded.frames, name), getattr(live, name), check_exact=False)
    reqs = loaded.frames.requests
    assert list(reqs["request_id"][:2]) == ["NA", "007"]
    assert reqs["error"].iloc[2] == "prompt, too long\nfor the model"
    assert pd.isna(reqs["tpot_ms"].iloc[0]) and pd.isna(reqs["error"].iloc[0])
    assert loaded.frames.outputs["output_token_ids"].iloc[0] == [3]


def test_open_loop_rates_round_trip_including_infinity(tmp_path):
    key = RunKey("run-inf", "pd", None, float("inf"))
    reqs = (request("a", 2, 5.0),)
    write_one(tmp_path, RunRecord(key, reqs, (), summarize(key, reqs, 1.0), ()))
    loaded = load_run_dir(tmp_path)
    assert loaded.frames.summary["request_rate"].iloc[0] == float("inf")
    assert pd.isna(loaded.frames.summary["concurrency"].iloc[0])
    assert loaded.runs[0]["request_rate"] == "inf"  # JSON has no infinity
    assert run_labels(loaded.frames.summary) == {"run-inf": "pd · R=inf/s"}


def test_two_runs_of_one_engine_at_one_load_get_labels_that_tell_them_apart():
    summary = pd.DataFrame(
        {"run_id": ["r1", "r2", "r3"], "engine": ["pd", "pd", "ar"], "concurrency": [4, 4, 4],
         "request_rate": [math.nan] * 3}
    )  # fmt: skip
    assert run_labels(summary) == {"r1": "pd · C=4 · r1", "r2": "pd · C=4 · r2", "r3": "ar · C=4"}


def test_a_directory_with_other_columns_is_refused_before_anything_is_appended(tmp_path):
    (tmp_path / "summary.csv").write_text("run_id,something_else\nx,1\n")
    with pytest.raises(RunFilesError, match="summary.csv"):
        write_run(tmp_path, ar_record())
    assert not (tmp_path / "requests.csv").exists()


def test_run_directories_are_listed_newest_first_and_foreign_json_is_skipped(tmp_path):
    write_one(tmp_path / "a", ar_record("run-a"))
    write_one(tmp_path / "nested" / "b", ar_record("run-b"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "run.json").write_text('{"not": "ours"}')
    found = list_run_dirs(tmp_path)
    assert [info.run_ids for info in found] == [("run-b",), ("run-a",)]
    assert found[0].engines == ("ar",)
    assert list_run_dirs(tmp_path / "missing") == []


def test_chart_helpers_shape_frames_per_run(tmp_path):
    frames = live_frames([ar_record("run-1")])
    c = cdf(frames.requests, "ttft_ms")
    assert list(c["fraction"]) == [0.5, 1.0]  # only completed requests: the rejected one is left out


def test_a_run_that_fails_to_be_written_leaves_the_directory_as_it_was(tmp_path, monkeypatch):
    from metrics import export

    first = RunKey("run-1", "pd", 1, None)
    reqs = (request("a", 2, 5.0),)
    write_one(tmp_path, RunRecord(first, reqs, (), summarize(first, reqs, 1.0), ()))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def full_disk(path, data):
        raise OSError("No space left on device")

    monkeypatch.setattr(export, "_write_json_atomically", full_disk)
    second = RunKey("run-2", "ar", 1, None)
    with pytest.raises(OSError, match="No space"):
        write_run(tmp_path, RunRecord(second, reqs, (), summarize(second, reqs, 1.0), ()))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert list(load_run_dir(tmp_path).frames.summary["run_id"]) == ["run-1"]


def test_each_tokens_kind_round_trips_through_outputs_jsonl_and_an_older_file_reads_as_unrecorded(tmp_path):
    kinds = ("first", "accepted", "accepted", "correction")
    output = RequestOutput("run-ar", "pd", "r1", "hi", (1,), (5, 6, 7, 8), "x", 1, kinds)
    record = replace(ar_record(), outputs=(output,))
    write_one(tmp_path / "new", record)
    assert load_run_dir(tmp_path / "new").frames.outputs["token_kinds"].iloc[0] == list(kinds)
    assert live_frames([record]).outputs["token_kinds"].iloc[0] == list(kinds)

    write_one(tmp_path / "old", record)  # as written before the per-token record: the field is absent
    path = tmp_path / "old" / "outputs.jsonl"
    line = json.loads(path.read_text())
    del line["token_kinds"]
    path.write_text(json.dumps(line) + "\n")
    assert pd.isna(load_run_dir(tmp_path / "old").frames.outputs["token_kinds"].iloc[0])
