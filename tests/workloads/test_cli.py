"""The replay CLI: bad input refused with one message and exit code 2 before loading anything; its output and help."""

from __future__ import annotations

import csv
import json
import math

import pytest

from metrics.round_summary import ComparisonRow
from metrics.rounds import RatioInterval, repeat_half_width
from metrics.summary import RunSummary
from workloads.__main__ import main
from workloads.replay_args import build_parser
from workloads.report.table import format_table

BASE = ["replay", "--preset", "tiny", "--device", "cpu", "--dataset", "synthetic"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engines", "ar,turbo"], "unknown engine 'turbo'"),
        (["--concurrency", "0"], "--concurrency: concurrency must be >= 1, got 0"),
        (["--concurrency", "2,x"], "'x' is not a whole number"),
        (["--rates", "2,-1"], "--rates: request rate must be > 0, got -1.0"),
        (["--concurrency", "2", "--rates", "3"], "not both"),
        (["--max-concurrency", "4"], "caps open-loop runs"),
        (["--burstiness", "0.5"], "applies to open-loop runs"),
        (["--dataset", "/no/such/file.json"], "/no/such/file.json does not exist"),
        (["--num-requests", "0"], "--num-requests must be >= 1"),
        (["--draft-len", "99"], "draft length"),
        (["--draft-confidence", "1.5"], "draft confidence must be in (0, 1)"),
        (["--target-decode-p95-ms", "-1"], "target decode p95 must be > 0 ms"),
        (["--top-k", "-2"], "--top-k must be >= 1"),
        (["--temperature", "-1"], "temperature"),
        (["--ttft-slo-ms", "-5"], "TTFT SLO"),
        (["--sample-hz", "1"], "sample rate must be a finite number >= 2 Hz"),
        (["--sample-hz", "nan"], "sample rate must be a finite number >= 2 Hz"),
        (["--temperature", "nan"], "temperature must be a finite number >= 0"),
        (["--preset", "nope"], "invalid choice: 'nope'"),
        (["--max-new-tokens", "abc"], "invalid int value"),
        (["--dtype", "float33"], "invalid choice: 'float33'"),
        (["--seed", "-1", "--rates", "2"], "seed must be >= 0"),
    ],
)
def test_bad_input_exits_2_with_one_clear_message(args, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert run_cli([*BASE, "--out", str(out), *args]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.out == ""
    assert not out.exists()


def run_cli(argv: list[str]) -> int:
    """Exit code of ``main``, whether it returns it or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def test_a_directory_with_foreign_run_files_is_refused(tmp_path, capsys):
    (tmp_path / "requests.csv").write_text("a,b\n1,2\n")
    assert run_cli([*BASE, "--out", str(tmp_path)]) == 2
    assert "requests.csv has other columns" in capsys.readouterr().err


def test_summary_table_shows_missing_values_as_dashes():
    s = RunSummary("r", "ar", None, 2.0, 10, 9, 1, 5.0, 100.0, 1.8, 10.0, 20.0, 30.0, None, None, None, None,
                   50.0, 60.0, 70.0, None, None, None)  # fmt: skip
    table = format_table([ComparisonRow(s, {}, 1)])
    row = table.splitlines()[2]
    assert row.startswith("ar") and "R=2" in row and "9/10" in row
    assert row.split()[-3:] == ["-", "-", "-"]


def test_an_output_path_that_cannot_be_a_directory_is_refused_before_loading(tmp_path, capsys):
    (tmp_path / "notes.md").write_text("a file")
    assert run_cli([*BASE, "--out", str(tmp_path / "notes.md" / "run")]) == 2
    assert "notes.md is not a directory" in capsys.readouterr().err


def test_a_run_that_stops_early_is_named_and_the_exit_code_says_so(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--engines", "ar,pd", "--concurrency", "1", "--num-requests", "40", "--output-len", "64"]
    code = run_cli([*BASE, *args, "--timeout-s", "0.05", "--warmup", "0", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 1
    assert "stopped early (timeout)" in captured.err and "of the trace's 40 requests completed" in captured.err
    assert (out / "summary.csv").exists()  # what the runs measured is still written


def test_a_run_file_that_cannot_be_written_is_one_message_and_exit_1(tmp_path, capsys, monkeypatch):
    from workloads.drivers import sweep

    def full_disk(out_dir, record):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sweep, "write_run", full_disk)
    args = ["--engines", "ar", "--concurrency", "1", "--num-requests", "2", "--output-len", "4", "--warmup", "0"]
    assert run_cli([*BASE, *args, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "could not write the run files" in err and "No space left on device" in err
    assert "Traceback" not in err


def test_settings_that_limit_each_other_are_noted(tmp_path, capsys):
    args = ["--engines", "ar", "--concurrency", "1,5", "--num-requests", "2", "--output-len", "64",
            "--max-new-tokens", "4", "--warmup", "0"]  # fmt: skip
    assert run_cli([*BASE, *args, "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "note: output length 64 is capped by max new tokens (4)" in err
    assert "note: concurrency 5 is above the 2 requests: at most 2 run at once" in err


def test_engine_names_are_taken_in_any_case_and_the_json_line_only_with_json(tmp_path, capsys):
    args = ["--concurrency", "1", "--num-requests", "2", "--output-len", "4", "--warmup", "0"]
    assert run_cli([*BASE, "--engines", "AR,Pdv", *args, "--out", str(tmp_path / "a")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines[2:4]] == ["ar", "pdv"]
    assert lines[-1].startswith("wrote 2 run(s)") and not any(line.startswith("{") for line in lines)

    assert run_cli([*BASE, "--engines", "ar", *args, "--out", str(tmp_path / "b"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["out_dir"] == str(tmp_path / "b") and [s["engine"] for s in result["summaries"]] == ["ar"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"not": "an array"', "not JSON"),
        ('[{"id": 1, "conversations": [{"from": "human"', "usable prompt"),
        ('[{"id": 1, "conversations": [{"from": "gpt", "value": "only a reply"}]}]', "usable prompt"),
    ],
    ids=["not_json", "cut_in_its_first_record", "no_human_turn"],
)
def test_a_dataset_file_that_cannot_be_used_is_refused_before_the_models_load(
    tmp_path, capsys, monkeypatch, content, message
):
    from engine.models import pair

    def never(*args, **kwargs):
        raise AssertionError("the models were loaded before the dataset was checked")

    monkeypatch.setattr(pair, "load_model_pair", never)
    dataset = tmp_path / "chats.json"
    dataset.write_text(content)
    argv = ["replay", "--preset", "tiny", "--device", "cpu", "--engines", "ar", "--dataset", str(dataset)]
    assert run_cli([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]  # the loader may draw a progress bar first
    assert len(errors) == 1 and message in errors[0] and str(dataset) in errors[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("argv", "defaults"),
    [
        (["replay"], ["--num-requests NUM_REQUESTS\n", "(default: 50)", "(default: 256)", "(default: 1.0)"]),
        (["generate"], ["(default: baseline)", "(default: 128)", "(default: cost)", "(default: the preset's)"]),
    ],
)
def test_help_shows_every_default(argv, defaults, capsys):
    from engine.__main__ import _parser

    parse = build_parser().parse_args if argv == ["replay"] else _parser().parse_args
    with pytest.raises(SystemExit):
        parse([*argv, "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines where the terminal ends
    for default in defaults:
        assert " ".join(default.split()) in text, default
    assert "(default: None)" not in text and "(default: False)" not in text


def test_summary_table_shows_each_ratio_to_ar_with_its_rounds_min_max():
    def run(engine, concurrency, tok_s, ratio):
        s = RunSummary("r", engine, concurrency, None, 4, 4, 0, 1.0, tok_s, 1.0, *[10.0] * 6, None,
                       *[None] * 3, None, None, None)  # fmt: skip
        return ComparisonRow(s, {"tok_s": ratio, "tpot_p50": ratio}, 3)

    table = format_table(
        [
            run("ar", 4, 50.0, RatioInterval(1.0, 1.0, 1.0, 3)),
            run("pdv", 4, 40.0, RatioInterval(0.8, 0.75, 0.93, 3)),
            run("pd", 2, 9.0, None),
            run("pd", 1, 9.0, RatioInterval(1.1, 1.1, 1.1, 1)),
        ]
    )
    rows = {tuple(line.split()[:2]): line.split()[5:7] for line in table.splitlines()[2:6]}
    assert rows == {("ar", "C=4"): ["1.00×", "(1.00–1.00)"], ("pdv", "C=4"): ["0.80×", "(0.75–0.93)"],
                    ("pd", "C=2"): ["-", "-"], ("pd", "C=1"): ["1.10×", "(1"]}  # fmt: skip
    assert "1.10× (1 round)" in table  # one round has no interval, and says so


def test_summary_table_names_the_mt_bench_turn_of_each_row():
    def run(engine):
        s = RunSummary("r", engine, 4, None, 4, 4, 0, 1.0, 10.0, 1.0, *[10.0] * 6, None,
                       *[None] * 3, None, None, None)  # fmt: skip
        return ComparisonRow(s, {}, 3)

    table = format_table([run("ar"), run("pd"), run("ar")], ["turn 1", "turn 1", "turn 2"])
    assert [line.split()[:3] for line in table.splitlines()[2:5]] == [
        ["ar", "C=4,", "turn"], ["pd", "C=4,", "turn"], ["ar", "C=4,", "turn"],
    ]  # fmt: skip
    assert [line.split()[3] for line in table.splitlines()[2:5]] == ["1", "1", "2"]
    assert format_table([run("ar")], [""]).splitlines()[2].split()[:3] == ["ar", "C=4", "3"]
    with pytest.raises(ValueError, match="1 parts for 2 rows"):
        format_table([run("ar"), run("pd")], ["turn 1"])


def test_rounds_rotate_and_the_summary_carries_each_ratio_with_its_interval_and_a_verdict(tmp_path, capsys):
    args = ["--engines", "ar,pdv", "--concurrency", "2", "--num-requests", "2", "--output-len", "6", "--warmup", "0"]
    out = tmp_path / "out"
    assert run_cli([*BASE, *args, "--rounds", "3", "--out", str(out), "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    verdict = next(line for line in lines if line.startswith("C=2: "))
    assert any(verdict.startswith(f"C=2: {head}") for head in ("PDV is fastest", "AR is fastest", "No engine is"))
    assert lines[-2].startswith("wrote 2 run(s), 3 rounds each,")
    assert json.loads(lines[-1])["verdicts"] == {"C=2": verdict.removeprefix("C=2: ")}
    rounds = list(csv.DictReader(open(out / "rounds.csv")))
    assert [(r["engine"], r["round"]) for r in rounds] == [
        ("ar", "1"), ("pdv", "1"), ("pdv", "2"), ("ar", "2"), ("ar", "3"), ("pdv", "3"),
    ]  # fmt: skip
    summary = {r["engine"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    assert set(summary) == {"ar", "pdv"} and {r["rounds"] for r in summary.values()} == {"3"}
    pdv = {k: float(v) for k, v in summary["pdv"].items() if k.startswith(("tok_s_x_ar", "tpot_p50_x_ar"))}
    assert pdv["tok_s_x_ar_lo"] <= pdv["tok_s_x_ar"] <= pdv["tok_s_x_ar_hi"]
    tok_s = {(r["engine"], r["round"]): float(r["output_tok_s"]) for r in rounds}
    per_round = sorted(tok_s["pdv", k] / tok_s["ar", k] for k in "123")
    assert pdv["tok_s_x_ar"] == pytest.approx(per_round[1], rel=1e-5)
    half = repeat_half_width(per_round)  # the interval a repeat run's median falls in, at least the min–max
    expected = (min(per_round[0], per_round[1] * math.exp(-half)), max(per_round[2], per_round[1] * math.exp(half)))
    assert (pdv["tok_s_x_ar_lo"], pdv["tok_s_x_ar_hi"]) == pytest.approx(expected, rel=1e-5)
    assert float(summary["ar"]["tok_s_x_ar"]) == 1.0
    requests = list(csv.DictReader(open(out / "requests.csv")))
    assert len(requests) == 12 and {r["run_id"] for r in requests} == {s["run_id"] for s in summary.values()}
    entries = json.loads((out / "run.json").read_text())["runs"]
    assert [len(e["rounds"]) for e in entries] == [3, 3] and entries[0]["verdict"] == verdict.removeprefix("C=2: ")
    assert all("others_share" in r["host_noise"] for e in entries for r in e["rounds"])
