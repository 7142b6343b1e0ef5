"""The replay CLI: bad input refused with one message and exit code 2 before loading anything; its output and help."""

from __future__ import annotations

import json

import pytest

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
        (["--top-k", "-2"], "top_k"),
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
    table = format_table([s])
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


def test_summary_table_sets_each_run_against_ar_at_the_same_load():
    def run(engine, concurrency, tok_s):
        return RunSummary("r", engine, concurrency, None, 4, 4, 0, 1.0, tok_s, 1.0, *[10.0] * 6, None,
                          *[None] * 3, None, None, None)  # fmt: skip

    table = format_table(
        [run("ar", 1, 20.0), run("pdv", 1, 30.0), run("ar", 4, 50.0), run("pdv", 4, 40.0), run("pd", 2, 9.0)]
    )
    rows = {tuple(line.split()[:2]): line.split()[4] for line in table.splitlines()[2:7]}
    assert rows == {("ar", "C=1"): "1.00", ("pdv", "C=1"): "1.50", ("ar", "C=4"): "1.00", ("pdv", "C=4"): "0.80",
                    ("pd", "C=2"): "-"}  # fmt: skip
