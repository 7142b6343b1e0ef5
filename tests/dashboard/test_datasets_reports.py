"""The dashboard's dataset uploads (every shape ``--dataset`` reads), HTML reports and bench directories.

Driven headless through ``streamlit.testing.v1.AppTest`` on the tiny preset,
with the helpers of ``test_dashboard_apptest``.
"""

from __future__ import annotations

import json

import pytest

from metrics.runs import list_run_dirs, load_run_dir
from tests.dashboard.test_apptest import ended, open_app, rerun_until, wait_for_no_threads, write_cli_run
from workloads.bench.common import GOALS_CSV, Goal, write_csv

PROMPTS = {
    "sea": "Tell me about the sea and the creatures that live in it.",
    "rain": "Why does rain fall from clouds, and what are clouds made of?",
    "moon": "Describe the phases of the moon in a few short sentences.",
}
CSV = ("id,prompt,response\n" + "".join(f'{k},"{v}",fine\n' for k, v in PROMPTS.items())).encode()
JSONL = "".join(json.dumps({"id": k, "prompt": v}) + "\n" for k, v in PROMPTS.items()).encode()


@pytest.mark.parametrize(("name", "data"), [("prompts.csv", CSV), ("prompts.jsonl", JSONL)])
def test_an_upload_with_a_prompt_column_is_accepted_and_runs_on_tiny(runs_dir, name, data):
    at = open_app()
    for engine in ("baseline", "pd", "pdv"):
        at.toggle(key=f"live.engine.{engine}").set_value(False)
    at.number_input(key="live.num_requests").set_value(3)
    at.number_input(key="live.max_new_tokens").set_value(4)
    at.radio(key="live.dataset").set_value("upload").run()
    at.file_uploader(key="live.upload").upload(name, data, "text/plain").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(f"{name}: 3 usable records" in c.value for c in at.caption)

    at.button(key="live.start").click().run()
    rerun_until(at, ended("live"))
    assert not at.error, [e.value for e in at.error]
    (info,) = list_run_dirs(runs_dir)
    run = load_run_dir(info.path)
    assert sorted(run.frames.requests["request_id"]) == sorted(PROMPTS)  # the file's own ids, every row
    assert (run.frames.summary["completed"] == 3).all()
    assert wait_for_no_threads() == []


def test_an_upload_of_another_shape_shows_the_loaders_one_error(runs_dir):
    at = open_app()
    at.switch_page("pages/sweep_run.py").run()
    at.radio(key="sweep.dataset").set_value("upload").run()
    rows = b"title,body\nSea,Tell me about the sea.\n"
    at.file_uploader(key="sweep.upload").upload("notes.csv", rows, "text/csv").run()
    assert not at.exception, at.exception
    assert len(at.error) == 1
    message = at.error[0].value
    assert "notes.csv" in message and "unrecognised dataset shape" in message and "['title', 'body']" in message
    assert at.button(key="sweep.start").disabled


def test_the_runs_page_builds_a_report_of_the_open_runs_for_download(runs_dir, capsys):
    write_cli_run(runs_dir / "first", "ar,baseline", "1")
    capsys.readouterr()
    at = open_app()
    at.switch_page("pages/saved_runs.py").run()
    assert not [d for d in at.get("download_button") if "report" in d.proto.label]  # built on request only
    at.button(key="runs.report.build").click().run()
    assert not at.exception and not at.error, at.exception or [e.value for e in at.error]
    (report,) = [d for d in at.get("download_button") if d.proto.label == "Download report (HTML)"]
    page = at.session_state["runs.report"][1].decode()
    assert page.startswith("<!DOCTYPE html>") and "<h2>Summary</h2>" in page and "Baseline · C=1" in page
    assert "<script src=" not in page  # Plotly inlined: the file opens without a network
    at.multiselect(key="runs.open").set_value([]).run()
    assert not [d for d in at.get("download_button") if "report" in d.proto.label]


def test_a_bench_directory_opens_its_runs_below_its_goals(runs_dir, capsys):
    bench = runs_dir / "bench-quick"
    write_cli_run(bench / "load-sweep", "ar,pd", "1")
    write_cli_run(bench / "lanes", "pdv", "1")
    capsys.readouterr()
    goals = [
        Goal("1-overhead", "ar >= 0.95x transformers generate", "ar = 0.99x (0.98-1.01)", True),
        Goal("4-lanes", "PDV cuts TPOT p99 by >= 30%", "PDV TPOT p99 = 1.53x Baseline's", False),
    ]
    write_csv(bench / GOALS_CSV, [g.row() for g in goals])  # the bench's own writer
    (bench / "bench.json").write_text(json.dumps({"parts_planned": ["1-overhead", "4-lanes"]}))

    at = open_app()
    at.switch_page("pages/saved_runs.py").run()
    assert not at.exception, at.exception
    listing = at.dataframe[0].value
    rows = sorted(zip(listing["directory"], listing["runs"], listing["kind"], strict=True))
    assert rows == [
        ("bench-quick", 3, "bench"),
        ("bench-quick/lanes", 1, "runs"),
        ("bench-quick/load-sweep", 2, "runs"),
    ]

    at.multiselect(key="runs.open").set_value(["bench-quick"]).run()
    assert not at.exception and not at.error, at.exception or [e.value for e in at.error]
    assert [s.value for s in at.subheader][0] == "Benchmark goals – bench-quick"
    shown = at.dataframe[1].value  # the goals, above the runs
    assert list(zip(shown["part"], shown["figure"], shown["met"], strict=True)) == [
        ("1-overhead", "ar = 0.99x (0.98-1.01)", "met"),
        ("4-lanes", "PDV TPOT p99 = 1.53x Baseline's", "missed"),
    ]
    summary = at.dataframe[3].value  # every column, below the key ones
    assert sorted(summary["Engine"]) == ["AR", "PD", "PDV"]  # both run directories below the bench
    expanders = sorted(e.label for e in at.expander if " – " in e.label)  # each run directory's files
    assert expanders == ["bench-quick/lanes – 1 run(s)", "bench-quick/load-sweep – 2 run(s)"]
