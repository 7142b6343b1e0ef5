"""End to end on real engines: ``python -m workloads replay`` on the tiny preset writes every run file."""

from __future__ import annotations

import csv
import json

from metrics.runs import list_run_dirs, load_run_dir
from metrics.schema import (
    OUTPUT_FIELDS,
    REQUEST_COLUMNS,
    ROUND_COLUMNS,
    RUN_FILES,
    SUMMARY_COLUMNS,
    TIMESERIES_COLUMNS,
)
from presentation.palette import KIND_COLORS
from workloads.__main__ import main
from workloads.drivers.rounds import DEFAULT_ROUNDS

ENGINES = ("ar", "baseline", "pd", "pdv")
N = 20
ROUNDS = DEFAULT_ROUNDS  # the run gives no --rounds: every engine replays the trace this many times


def header(path) -> tuple[str, ...]:
    with open(path, newline="") as fh:
        return tuple(next(csv.reader(fh)))


def test_replay_on_tiny_writes_all_files_and_accounts_for_every_request(tmp_path, capsys):
    out = tmp_path / "run"
    code = main([
        "replay", "--engines", ",".join(ENGINES), "--concurrency", "4", "--num-requests", str(N),
        "--dataset", "synthetic", "--input-len", "24", "--output-len", "8", "--range-ratio", "0.5",
        "--preset", "tiny", "--device", "cpu", "--seed", "3", "--ttft-slo-ms", "5000", "--out", str(out),
        "--json",
    ])  # fmt: skip
    stdout = capsys.readouterr().out
    assert code == 0
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["out_dir"] == str(out) and len(result["run_ids"]) == len(ENGINES)
    table_rows = [line.split()[0] for line in stdout.splitlines()[2 : 2 + len(ENGINES)]]
    assert table_rows == list(ENGINES)

    assert sorted(p.name for p in out.iterdir()) == sorted(RUN_FILES)
    assert header(out / "requests.csv") == REQUEST_COLUMNS
    assert header(out / "timeseries.csv") == TIMESERIES_COLUMNS
    assert header(out / "summary.csv") == SUMMARY_COLUMNS
    assert header(out / "rounds.csv") == ROUND_COLUMNS
    first_output = json.loads((out / "outputs.jsonl").read_text().splitlines()[0])
    assert tuple(first_output) == OUTPUT_FIELDS

    run = load_run_dir(out)
    summary, requests, series = run.frames.summary, run.frames.requests, run.frames.timeseries
    assert list(summary["engine"]) == list(ENGINES)
    assert (summary["rounds"] == ROUNDS).all() and (summary["num_requests"] == ROUNDS * N).all()
    assert (summary["completed"] == ROUNDS * N).all() and (summary["failed"] == 0).all()
    per_round = requests.groupby(["engine", "round"]).size().to_dict()
    assert per_round == {(e, r): N for e in ENGINES for r in range(1, ROUNDS + 1)}
    assert set(requests["status"]) == {"ok"}
    assert (summary["goodput_req_s"] > 0).all()
    assert (requests["ttft_ms"] > 0).all() and (requests["output_tokens"] >= 1).all()
    # lanes an engine lacks are empty, not zero
    assert series.loc[series["engine"] != "pdv", "queue_verify"].isna().all()
    assert series.loc[series["engine"] == "baseline", "queue_decode"].isna().all()
    assert len(run.frames.outputs) == len(ENGINES) * ROUNDS * N

    meta = run.runs[0]
    assert meta["models"]["preset"] == "tiny" and meta["device"] == "cpu"
    assert meta["environment"]["packages"]["torch"]
    assert meta["invocation"]["seed"] == 3 and meta["trace"]["num_requests"] == N
    if meta["device_probe"]["source"] == "psutil":
        assert series["gpu_util"].isna().all() and series["gpu_mem_util"].isna().all()
    # one recorded kind per output token (Inspect's saved-run mode paints them); AR only ever decodes
    for row in run.frames.outputs.itertuples():
        assert len(row.token_kinds) == len(row.output_token_ids), row.request_id
        assert set(row.token_kinds) <= ({"first", "decode"} if row.engine == "ar" else set(KIND_COLORS))
    by_round = run.frames.outputs.sort_values(["run_id", "round", "request_id"])
    prompts = by_round.groupby("run_id")["prompt_token_ids"].apply(list)
    assert all(p == prompts.iloc[0] for p in prompts), "every engine must replay the identical trace every round"
    # greedy: every engine returns, round for round and request for request, the same tokens as the verifier alone
    outputs = run.frames.outputs.set_index(["engine", "round", "request_id"])["output_token_ids"]
    reference = outputs.loc["ar"].sort_index()
    for engine in ENGINES[1:]:
        assert outputs.loc[engine].sort_index().tolist() == reference.tolist(), engine
    assert [info.path for info in list_run_dirs(tmp_path)] == [out]


def test_a_suffix_run_file_says_what_its_tree_held_and_the_warm_up_taught_it_nothing(tmp_path):
    out = tmp_path / "run"
    code = main([
        "replay", "--engines", "baseline", "--drafter", "suffix", "--controller", "fixed", "--concurrency", "2",
        "--num-requests", "4", "--dataset", "synthetic", "--input-len", "16", "--output-len", "6", "--rounds", "2",
        "--preset", "tiny", "--device", "cpu", "--seed", "1", "--out", str(out),
    ])  # fmt: skip
    assert code == 0
    (run,) = json.loads((out / "run.json").read_text())["runs"]
    outputs = [json.loads(line) for line in (out / "outputs.jsonl").read_text().splitlines()]
    assert [r["round"] for r in run["rounds"]] == [1, 2]
    for entry in run["rounds"]:  # each round's engine starts with an empty tree
        ids = [o["output_token_ids"] for o in outputs if o["round"] == entry["round"]]
        # it learned the 4 measured outputs; the warm-up request (a measured prompt's first tokens) is not in it
        assert entry["suffix_tree"]["sequences"] == len(ids) == 4
        assert entry["suffix_tree"]["tokens"] == sum(map(len, ids))
