"""The replay CLI refuses bad input with one message and exit code 2, before loading anything."""

from __future__ import annotations

import pytest

from metrics.summary import RunSummary
from workloads.__main__ import main
from workloads.report import format_table

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
    from workloads import sweep

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
