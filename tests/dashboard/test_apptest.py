"""The dashboard driven headless through ``streamlit.testing.v1.AppTest``, on the tiny preset.

Each test gets its own runs directory (``PDV_RUNS_DIR``), hence its own run
manager. Runs are short (a few requests of a few tokens); the page is rerun
with ``at.run()`` until the launch has ended, within a bounded time.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.settings import session_defaults
from engine.models.pair import load_model_pair
from metrics.runs import list_run_dirs, load_run_dir
from tests.support import ROOT as ROOT_DIR
from tests.support.launches import stop_left_launch
from tests.support.serve import MODEL, served, uvicorn_thread
from tests.support.threads import wait_for_no_background_threads
from widgets.manager import run_manager_for

ROOT = ROOT_DIR
APP = str(ROOT / "app.py")
PAGES = {
    "pages/live_run.py": "Live run",
    "pages/sweep_run.py": "Sweep",
    "pages/saved_runs.py": "Runs",
    "pages/inspect_request.py": "Inspect one request",
}
ENGINES = ("ar", "baseline", "pd", "pdv")
LABELS = ["AR", "Baseline", "PD", "PDV"]
RUN_TIMEOUT_S = 240  # a busy shared 2-core machine runs the tiny launches several times slower



def open_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for page in ("live", "sweep", "inspect"):  # the tiny pair's random text gives prompt lookup little to find
        at.session_state[f"{page}.drafter"] = "model"
    for page in ("live", "sweep"):  # a fixed L: the tiny draft is too weak for the cost controller to draft at all
        at.session_state[f"{page}.controller"] = "fixed"
        at.session_state[f"{page}.rounds"] = 1  # one round each, except where a test is about rounds
    at.run()
    assert not at.exception, at.exception
    return at


def rerun_until(at: AppTest, done: Callable[[AppTest], bool], timeout: float = RUN_TIMEOUT_S) -> AppTest:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at.run()
        assert not at.exception, at.exception
        if done(at):
            return at
        time.sleep(0.25)
    raise AssertionError(f"the page did not reach the expected state within {timeout}s")


def ended(kind: str) -> Callable[[AppTest], bool]:
    def check(at: AppTest) -> bool:
        rendered = at.session_state[f"{kind}.rendered"] if f"{kind}.rendered" in at.session_state else None
        return rendered is not None and not rendered[1]

    return check


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly figures on the page by element key (the part of the id after the hash)."""
    return {c.proto.id.split("-", 2)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def finished_requests(at: AppTest) -> list[int]:
    """Requests finished per engine panel, from the progress bars' text ("3/8 requests · running")."""
    return [int(p.proto.text.split("/")[0]) for p in at.get("progress") if " requests · " in p.proto.text]


def values(array) -> list:
    """A plotly JSON array: a list, or a typed array ``{"dtype", "bdata"}``."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


@pytest.fixture(autouse=True)
def no_launch_outlives_its_test(runs_dir):
    """Stop whatever launch a test left running, so that one failure cannot leak threads into the next tests."""
    yield
    stop_left_launch(run_manager_for(runs_dir))


def wait_for_no_threads(timeout: float = 60.0) -> list[str]:
    """Names of the launch workers, jobs, engine lanes and samplers still alive after ``timeout`` seconds (lanes
    end at their next step boundary, which a busy two-core machine delays)."""
    return [t.name for t in wait_for_no_background_threads(timeout)]


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_renders_without_exception(runs_dir, page):
    at = open_app()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    assert [h.value for h in at.header] == [PAGES[page]]
    assert not at.error


def test_live_and_sweep_pages_compare_every_engine_with_ar_by_default_on_the_configured_preset(runs_dir):
    at = open_app()
    on = {t.key.split(".")[-1]: t.value for t in at.toggle if t.key.startswith("live.engine.")}
    assert on == {"ar": True, "baseline": True, "pd": True, "pdv": True}
    at.switch_page("pages/sweep_run.py").run()
    on = {t.key.split(".")[-1]: t.value for t in at.toggle if t.key.startswith("sweep.engine.")}
    assert on == {"ar": True, "baseline": True, "pd": True, "pdv": True}
    at.switch_page("pages/live_run.py").run()
    assert at.selectbox(key="live.preset").value == "tiny"  # PDV_DEFAULT_PRESET
    assert at.checkbox(key="live.simultaneous").value is False
    assert not at.button(key="live.start").disabled


def test_live_run_on_tiny_fills_every_chart_and_appears_on_the_runs_page(runs_dir):
    at = open_app()
    # the Live run: 5 rounds, then more (up to 12) until every interval is within ±10 %; a sweep: 3 rounds
    defaults = session_defaults()
    assert (defaults["live.rounds"], defaults["live.precise"], defaults["sweep.rounds"]) == (12, True, 3)
    assert defaults["sweep.precise"] is False
    at.number_input(key="live.rounds").set_value(3)
    at.number_input(key="live.num_requests").set_value(4)
    at.number_input(key="live.concurrency").set_value(4)
    at.number_input(key="live.max_new_tokens").set_value(8)
    at.button(key="live.start").click().run()
    assert not at.exception, at.exception
    rerun_until(at, ended("live"))

    assert not at.error, [e.value for e in at.error]
    assert "Finished" in at.success[0].value and "4 run(s), 3 rounds each" in at.success[0].value
    assert not [c.value for c in at.caption if "so far" in c.value]  # the run has ended: nothing is "so far"
    assert [p.proto.text for p in at.get("progress")] == ["4/4 requests · done · round 3 of 3"] * 4
    panels = [m.value for m in at.markdown if m.value.startswith("<h4")]
    assert [p.split("● ")[1].split("<")[0] for p in panels] == LABELS
    figs = charts(at)
    expected = {"throughput", "device", "ttft", "tpot", "draft_len", "acceptance", "positions"}
    assert {k.removeprefix("live.chart.") for k in figs} >= expected | {f"queue.{e}" for e in ENGINES}
    assert [t["name"] for t in figs["live.chart.throughput"]["data"]] == LABELS
    for name in ("ttft", "tpot"):  # a few requests each: every request a point beside its engine's box
        traces = figs[f"live.chart.{name}"]["data"]
        assert [t["type"] for t in traces] == ["box"] * 4 and [t["boxpoints"] for t in traces] == ["all"] * 4
        assert [t["name"] for t in traces] == LABELS, name
        assert [len(values(t["x"])) for t in traces] == [12] * 4  # 4 requests x 3 rounds, pooled
    assert [t["name"] for t in figs["live.chart.draft_len"]["data"]] == LABELS[1:]  # AR drafts nothing
    assert [t["name"] for t in figs["live.chart.acceptance"]["data"]] == LABELS[1:]
    # acceptance by draft position: a line per speculating engine, its rounds pooled as run.json pools them
    assert [t["name"] for t in figs["live.chart.positions"]["data"]] == LABELS[1:]
    tiles = [m for m in at.metric if m.label == "tok/s"]
    tok_s = [float(m.value.replace(",", "")) for m in tiles]
    assert len(tok_s) == 4 and all(v > 0 for v in tok_s)
    assert not [c.value for c in at.caption if c.value.startswith("Suffix tree")]  # the draft model keeps no tree

    # every engine against AR over the rounds, on its tile, in the summary table and in summary.csv
    (info,) = list_run_dirs(runs_dir)
    run = load_run_dir(info.path)
    summary_csv = run.frames.summary.set_index("engine")
    assert list(summary_csv.index) == list(ENGINES)
    assert (summary_csv["completed"] == 12).all() and (summary_csv["rounds"] == 3).all()
    deltas = [m.proto.delta for m in tiles]
    for engine, delta in zip(ENGINES, deltas, strict=True):
        row = summary_csv.loc[engine]
        assert row["tok_s_x_ar_lo"] <= row["tok_s_x_ar"] <= row["tok_s_x_ar_hi"]
        assert delta == f"{row['tok_s_x_ar']:.2f}× AR ({row['tok_s_x_ar_lo']:.2f}–{row['tok_s_x_ar_hi']:.2f})"
    assert deltas[0] == "1.00× AR (1.00–1.00)"
    summary = at.table[0].value
    assert list(summary.columns) == LABELS
    assert summary.loc["tok/s × AR"].tolist() == [d.replace("× AR", "×") for d in deltas]
    assert summary.loc["TPOT p50 × AR", "AR"] == "1.00× (1.00–1.00)"
    assert "—" not in summary.loc["TPOT p99 × AR"].tolist()
    assert summary.loc["Rounds"].tolist() == ["3"] * 4

    # one verdict line on top, the one run.json keeps: a winner only when its interval clears the others'
    verdicts = [e.value for e in [*at.success, *at.info] if e.value.startswith("**C=4, 3 rounds.**")]
    assert len(verdicts) == 1
    line = verdicts[0].removeprefix("**C=4, 3 rounds.** ")
    assert line == run.runs[0]["verdict"]
    ratios = {e: (summary_csv.loc[e, "tok_s_x_ar_lo"], summary_csv.loc[e, "tok_s_x_ar_hi"]) for e in ENGINES}
    winners = [e for e in ENGINES if all(ratios[e][0] > ratios[o][1] for o in ENGINES if o != e)]
    if winners:
        assert line.startswith(f"{LABELS[ENGINES.index(winners[0])]} is fastest")
    else:
        assert line.startswith("No engine is clearly fastest over 3 rounds")
    assert wait_for_no_threads() == []

    at.switch_page("pages/saved_runs.py").run()
    assert not at.exception, at.exception
    listing = at.dataframe[0].value
    assert list(listing["directory"]) == [info.path.name] and list(listing["runs"]) == [4]
    assert at.multiselect(key="runs.open").value == [info.path.name]
    downloads = [d.proto.label for d in at.get("download_button")]
    assert downloads == ["requests.csv", "timeseries.csv", "summary.csv", "rounds.csv", "outputs.jsonl", "run.json"]
    bars = charts(at)["runs.chart.tput"]["data"][0]
    assert len(bars["y"]) == 4


def test_a_run_in_progress_updates_survives_page_switches_and_other_tabs_and_stops(runs_dir):
    at = open_app()
    at.number_input(key="live.num_requests").set_value(2000)  # far more than the test will wait for
    at.number_input(key="live.max_new_tokens").set_value(64)
    at.button(key="live.start").click().run()
    launch_id = at.session_state["live.rendered"][0]
    # the throughput chart plots the sampler's rows, taken every few tenths of a second: wait for the first
    rerun_until(at, lambda a: finished_requests(a)[0] >= 2 and charts(a)["live.chart.throughput"]["data"])

    # while the first engine runs, its finished requests are already on the charts and tiles
    assert at.session_state["live.rendered"] == (launch_id, True)
    figs = charts(at)
    assert [t["name"] for t in figs["live.chart.ttft"]["data"]] == ["AR"]
    assert [t["name"] for t in figs["live.chart.throughput"]["data"]] == ["AR"]
    ttft_p50 = at.table[0].value.loc["TTFT p50 (ms)"].tolist()
    assert ttft_p50[0] != "—" and ttft_p50[1:] == ["—", "—", "—"]

    at.switch_page("pages/saved_runs.py").run()
    at.switch_page("pages/live_run.py").run()
    assert at.session_state["live.rendered"] == (launch_id, True)  # same launch, still running
    other_tab = open_app()
    assert other_tab.session_state["live.rendered"] == (launch_id, True)
    other_tab.button(key="live.start").click().run()  # a second Start must not start a second launch
    assert any("already using the device" in w.value for w in other_tab.warning)
    at.button(key="live.start").click().run()
    assert any("already using the device" in w.value for w in at.warning)
    assert at.session_state["live.rendered"] == (launch_id, True)

    at.button(key="live.stop").click().run()
    other_tab.button(key="live.stop").click().run()  # pressing Stop twice is harmless
    assert not at.exception and not other_tab.exception
    rerun_until(at, ended("live"), timeout=60)
    assert any(w.value.startswith("Stopped") for w in at.warning)
    states = [p.proto.text.split(" · ")[1] for p in at.get("progress")]
    assert states == ["cancelled", "skipped", "skipped", "skipped"]
    assert wait_for_no_threads() == []

    (info,) = list_run_dirs(runs_dir)  # the cancelled run is still recorded
    assert info.path.name == launch_id
    run = load_run_dir(info.path)
    assert list(run.frames.summary["engine"]) == ["ar"]
    assert run.runs[0]["stop_reason"] == "cancelled"
    assert int(run.frames.summary["num_requests"][0]) < 2000


def test_a_bad_upload_shows_one_error_and_a_good_one_is_accepted(runs_dir):
    at = open_app()
    at.radio(key="live.dataset").set_value("upload").run()
    assert at.button(key="live.start").disabled  # nothing uploaded yet
    at.file_uploader(key="live.upload").upload("broken.json", b'{"not": "an array"', "application/json").run()
    assert not at.exception, at.exception
    assert len(at.error) == 1 and "broken.json" in at.error[0].value
    assert at.button(key="live.start").disabled

    good = [{"id": "a", "conversations": [{"from": "human", "value": "Tell me about the sea."}]}] * 2
    at.file_uploader(key="live.upload").set_value(("good.json", json.dumps(good).encode(), "application/json")).run()
    assert not at.exception and not at.error
    assert any("2 usable records" in c.value for c in at.caption)
    assert not at.button(key="live.start").disabled


def test_an_accepted_upload_is_still_used_after_a_visit_to_another_page(runs_dir):
    at = open_app()
    at.radio(key="live.dataset").set_value("upload").run()
    good = [{"id": "a", "conversations": [{"from": "human", "value": "Tell me about the sea."}]}] * 3
    at.file_uploader(key="live.upload").upload("good.json", json.dumps(good).encode(), "application/json").run()
    assert not at.button(key="live.start").disabled

    at.switch_page("pages/saved_runs.py").run()
    at.switch_page("pages/live_run.py").run()
    assert not at.exception and not at.error
    assert any("good.json: 3 usable records" in c.value and "uploaded earlier" in c.value for c in at.caption)
    assert not at.button(key="live.start").disabled
    at.number_input(key="live.num_requests").set_value(5).run()
    assert [w.value for w in at.sidebar.warning] == ["good.json has 3 usable records: a run takes at most 3 requests."]


def test_the_sidebar_notes_settings_that_limit_each_other(runs_dir):
    at = open_app()
    at.switch_page("pages/sweep_run.py").run()
    assert not [w for w in at.sidebar.warning]
    at.radio(key="sweep.dataset").set_value("synthetic").run()
    at.number_input(key="sweep.synthetic_output_len").set_value(64)
    at.number_input(key="sweep.max_new_tokens").set_value(32)
    at.number_input(key="sweep.num_requests").set_value(3)
    at.text_input(key="sweep.concurrencies").set_value("1, 4").run()
    notes = [w.value for w in at.sidebar.warning]
    assert notes == [
        "Output length 64 is capped by max new tokens (32).",
        "Concurrency 4 is above the 3 requests: at most 3 run at once.",
    ]


def test_a_failing_run_shows_its_error_on_the_page(runs_dir):
    at = open_app()
    # every prompt is shorter than the ShareGPT filter's 4 tokens: the trace comes out empty
    short = [{"id": str(i), "conversations": [{"from": "human", "value": "hi"}]} for i in range(3)]
    at.radio(key="live.dataset").set_value("upload").run()
    at.file_uploader(key="live.upload").upload("short.json", json.dumps(short).encode(), "application/json").run()
    at.button(key="live.start").click().run()
    rerun_until(at, ended("live"))
    assert len(at.error) == 1 and "no prompt passes the length filter" in at.error[0].value
    assert wait_for_no_threads() == []


def test_a_sweep_on_tiny_charts_every_engine_at_every_load_and_its_speed_up_over_ar(runs_dir):
    at = open_app()
    at.switch_page("pages/sweep_run.py").run()
    at.toggle(key="sweep.engine.pd").set_value(False)
    at.text_input(key="sweep.concurrencies").set_value("1, 2")
    at.number_input(key="sweep.num_requests").set_value(3)
    at.number_input(key="sweep.max_new_tokens").set_value(6)
    at.button(key="sweep.start").click().run()
    rerun_until(at, ended("sweep"))
    assert not at.error, [e.value for e in at.error]
    assert "6 of 6 run(s)" in at.success[0].value
    results = at.dataframe[-1].value
    assert sorted(zip(results["Engine"], results["Concurrency"], strict=True)) == [
        ("AR", 1), ("AR", 2), ("Baseline", 1), ("Baseline", 2), ("PDV", 1), ("PDV", 2),
    ]  # fmt: skip
    assert "request_rate" not in results and "Request rate (req/s)" not in results  # a closed loop has none
    runs = list(zip(results["Engine"], results["Concurrency"], strict=True))
    tok_s = dict(zip(runs, results["Output tok/s"], strict=True))
    # one round each: the interval is that round's ratio, and the median is the ratio of the two figures
    texts = dict(zip(runs, results["tok/s × AR"], strict=True))
    ratios = {run: float(text.split("×")[0]) for run, text in texts.items()}
    assert all(text == f"{ratios[run]:.2f}× ({ratios[run]:.2f}–{ratios[run]:.2f})" for run, text in texts.items())
    assert ratios == pytest.approx({(e, c): v / tok_s[("AR", c)] for (e, c), v in tok_s.items()}, abs=0.006)
    tput = charts(at)["sweep.chart.0"]["data"]
    assert [t["name"] for t in tput] == ["AR", "Baseline", "PDV"]
    assert [values(t["x"]) for t in tput] == [[1, 2]] * 3
    speedup = charts(at)["sweep.chart.speedup"]
    assert [t["name"] for t in speedup["data"]] == ["Baseline", "PDV"]  # AR is the line at 1.0
    assert [shape["y0"] for shape in speedup["layout"]["shapes"]] == [1.0]
    for trace in speedup["data"]:
        drawn = dict(zip(values(trace["x"]), values(trace["y"]), strict=True))
        assert drawn == pytest.approx({c: ratios[(trace["name"], c)] for c in (1, 2)}, abs=0.006)
    assert speedup["layout"]["xaxis"]["tickvals"] == [1, 2]  # whole concurrencies only


def test_a_sweep_run_cut_short_by_stop_is_marked_in_the_table_and_left_off_the_charts(runs_dir):
    at = open_app()
    at.switch_page("pages/sweep_run.py").run()
    for engine in ("ar", "pd", "pdv"):
        at.toggle(key=f"sweep.engine.{engine}").set_value(False)
    at.text_input(key="sweep.concurrencies").set_value("1, 2")
    at.number_input(key="sweep.num_requests").set_value(400)  # far more than the test waits for
    at.number_input(key="sweep.max_new_tokens").set_value(16)
    at.button(key="sweep.start").click().run()

    def sweep_finished(a: AppTest) -> int:
        texts = [p.proto.text for p in a.get("progress") if " requests over " in p.proto.text]
        return int(texts[0].split("/")[0]) if texts else 0

    rerun_until(at, lambda a: sweep_finished(a) >= 3)
    at.button(key="sweep.stop").click().run()
    rerun_until(at, ended("sweep"))
    results = at.dataframe[-1].value
    assert list(results["Stopped early"]) == ["cancelled"]
    assert any("Not on the charts: 1 run(s)" in c.value for c in at.caption)
    assert charts(at)["sweep.chart.0"]["data"] == []


def test_inspect_paints_each_token_by_kind_and_charts_the_steps(runs_dir):
    at = open_app()
    at.switch_page("pages/inspect_request.py").run()
    at.number_input(key="inspect.max_new_tokens").set_value(12)
    at.button(key="inspect.start").click().run()
    rerun_until(at, ended("inspect"))
    assert not at.error, [e.value for e in at.error]
    html = [h.proto.body for h in at.get("html")]
    assert any("accepted draft token" in h and "correction" in h and "bonus" in h for h in html)  # the legend
    tokens = next(h for h in html if "white-space:pre-wrap" in h)
    assert tokens.count("<span") >= 1
    outputs = {m.label: m.value for m in at.metric}
    assert 1 <= int(outputs["output tokens"]) <= 12
    steps = charts(at)["inspect.chart.steps"]["data"]
    assert [t["name"] for t in steps] == ["drafted", "accepted"]
    # the page's first drafter is the draft model, which drafts at every step: its proposals are tallied
    assert any(c.value == "Proposals per source" for c in at.caption)
    assert list(at.dataframe[-1].value["source"]) == ["model"]
    assert wait_for_no_threads() == []


def test_simultaneous_runs_say_they_share_the_device_and_are_all_written(runs_dir):
    at = open_app()
    at.checkbox(key="live.simultaneous").check().run()
    assert any("share the device" in i.value for i in at.info)
    at.number_input(key="live.num_requests").set_value(3)
    at.number_input(key="live.max_new_tokens").set_value(6)
    at.button(key="live.start").click().run()
    rerun_until(at, ended("live"))
    assert not at.error, [e.value for e in at.error]
    assert [p.proto.text for p in at.get("progress")] == ["3/3 requests · done"] * len(ENGINES)
    (info,) = list_run_dirs(runs_dir)
    run = load_run_dir(info.path)
    assert sorted(run.frames.summary["engine"]) == sorted(ENGINES)  # one writer at a time: nothing lost
    assert len(run.frames.requests) == 3 * len(ENGINES)
    assert all(r["invocation"]["engines_simultaneous"] for r in run.runs)
    assert wait_for_no_threads() == []


def test_a_run_file_that_cannot_be_written_ends_the_launch_and_every_engine(runs_dir, monkeypatch):
    from engine.schedulers.lanes import Lane
    from workloads.drivers import sweep

    def full_disk(out_dir, record):  # the one writer of run files, shared with the CLI
        raise OSError("No space left on device")

    lane_pass = Lane._pass

    def slowed(self):  # PD's and PDV's lanes (threads "pd-…", "pdv-…") pause before every pass
        if self.thread.name.startswith(("pd-", "pdv-")):
            time.sleep(0.3)
        lane_pass(self)

    monkeypatch.setattr(sweep, "write_run", full_disk)
    monkeypatch.setattr(Lane, "_pass", slowed)  # so that PD and PDV are still going when AR's run fails to be written
    at = open_app()
    at.checkbox(key="live.simultaneous").check().run()
    at.number_input(key="live.num_requests").set_value(3)
    at.number_input(key="live.max_new_tokens").set_value(24)
    at.button(key="live.start").click().run()
    rerun_until(at, ended("live"))
    assert any("No space left on device" in e.value for e in at.error)
    # the engines were cancelled with the launch, not left running: none outlives the launch's own thread
    launch = run_manager_for(runs_dir).latest("live")
    assert launch is not None and launch.wait(timeout=60)
    assert wait_for_no_threads(timeout=0.0) == []


def test_model_loading_progress_is_shown_while_the_pair_loads(runs_dir, monkeypatch):
    from dashboard import run_manager
    from engine.models.pair import load_model_pair

    release = threading.Event()

    def slow_load(preset, device="auto", progress=None):
        progress("Converting SmolLM2 (one-time)", 0.4)
        assert release.wait(30), "the test never released the loader"
        return load_model_pair("tiny", device="cpu")

    monkeypatch.setattr(run_manager, "load_model_pair", slow_load)
    at = open_app()
    at.number_input(key="live.num_requests").set_value(2)
    at.number_input(key="live.max_new_tokens").set_value(4)
    at.button(key="live.start").click().run()
    def converting(a: AppTest) -> bool:  # the engine worker's status reaches the page within its publish period
        return any(p.proto.text == "Converting SmolLM2 (one-time)" for p in a.get("progress"))

    loading = [p.proto for p in rerun_until(at, converting).get("progress")]
    assert (loading[0].value, loading[0].text) == (40, "Converting SmolLM2 (one-time)")
    assert [s.state for s in at.status] == ["running"]  # no ✓ while the work goes on
    release.set()
    rerun_until(at, ended("live"))
    assert "Finished" in at.success[0].value


def test_stop_while_prompts_are_sampled_ends_the_sampling_and_starts_no_engine(runs_dir, monkeypatch):
    from workloads.datasets import sharegpt

    release = threading.Event()
    calls = itertools.count()
    real_token_len = sharegpt.token_len

    def slow_token_len(tokenizer, text):  # the third reply to be measured waits for the test
        if next(calls) == 2:
            assert release.wait(30), "the test never released the sampler"
        return real_token_len(tokenizer, text)

    monkeypatch.setattr(sharegpt, "token_len", slow_token_len)
    at = open_app()
    at.number_input(key="live.num_requests").set_value(50)
    at.button(key="live.start").click().run()
    sampling = lambda a: [p.proto for p in a.get("progress") if "Sampling requests" in p.proto.text]  # noqa: E731
    (bar,) = sampling(rerun_until(at, lambda a: bool(sampling(a))))
    assert bar.text.endswith("/50") and 0 < bar.value < 100

    at.button(key="live.stop").click().run()
    release.set()
    rerun_until(at, ended("live"), timeout=60)
    assert any(w.value.startswith("Stopped") for w in at.warning)
    assert next(calls) == 3  # no reply was measured after the one that waited: sampling did not go on to 50
    assert wait_for_no_threads() == []
    assert list_run_dirs(runs_dir) == []


def write_cli_run(out: Path, engines: str, concurrency: str, *extra: str, code: int = 0) -> None:
    from workloads.__main__ import main

    assert main([
        "replay", "--engines", engines, "--concurrency", concurrency, "--num-requests", "3",
        "--dataset", "synthetic", "--input-len", "12", "--output-len", "4", "--preset", "tiny",
        "--device", "cpu", "--drafter", "model", "--controller", "fixed", "--out", str(out), *extra,
    ]) == code  # fmt: skip


def test_runs_page_lists_cli_runs_compares_them_and_deletes_after_confirmation(runs_dir, capsys):
    write_cli_run(runs_dir / "first", "baseline,pdv", "2")
    write_cli_run(runs_dir / "nested" / "second", "pd", "1,2")
    capsys.readouterr()
    at = open_app()
    at.switch_page("pages/saved_runs.py").run()
    assert not at.exception, at.exception
    listing = at.dataframe[0].value
    assert sorted(zip(listing["directory"], listing["runs"], strict=True)) == [("first", 2), ("nested/second", 2)]

    at.multiselect(key="runs.open").set_value(["first", "nested/second"]).run()
    assert not at.exception, at.exception
    key, summary = at.dataframe[1].value, at.dataframe[2].value  # the key columns, then every column
    assert sorted(key["Run"]) == ["first · baseline · C=2", "first · pdv · C=2", "nested/second · pd · C=1",
                                  "nested/second · pd · C=2"]  # fmt: skip
    assert sorted(summary["Engine"]) == ["Baseline", "PD", "PD", "PDV"]
    assert set(summary["tok/s × AR"]) == {"—"}  # no AR run in either directory to compare with
    tput = charts(at)["runs.chart.tput"]["data"][0]
    assert sorted(tput["y"]) == ["first · baseline · C=2", "first · pdv · C=2", "nested/second · pd · C=1",
                                 "nested/second · pd · C=2"]  # fmt: skip
    by_position = charts(at)["runs.chart.positions"]
    assert by_position["layout"]["title"]["text"] == "Acceptance by draft position"
    entries = [r for d in ("first", "nested/second") for r in load_run_dir(runs_dir / d).runs]
    per_draft = sorted(p["accepted"] / p["drafts"] for r in entries for p in r["position_acceptance"])
    drawn = sorted(y for trace in by_position["data"] for y in values(trace["y"]))
    assert per_draft and drawn == pytest.approx(per_draft)  # vLLM's acceptance at each position, from run.json
    assert len(at.get("download_button")) == 2 * 6  # each directory's six files
    at.switch_page("pages/sweep_run.py").run()
    at.switch_page("pages/saved_runs.py").run()
    assert at.multiselect(key="runs.open").value == ["first", "nested/second"]  # the choice outlives the visit

    at.button(key="runs.delete.first").click().run()
    assert any("cannot be undone" in w.value for w in at.warning)
    at.button(key="runs.delete_no.first").click().run()  # cancelled: nothing deleted
    assert (runs_dir / "first" / "run.json").is_file()
    at.button(key="runs.delete.first").click().run()
    at.button(key="runs.delete_yes.first").click().run()
    assert not at.exception, at.exception
    assert not (runs_dir / "first").exists() and (runs_dir / "nested" / "second" / "run.json").is_file()
    assert list(at.dataframe[0].value["directory"]) == ["nested/second"]
    assert at.multiselect(key="runs.open").value == ["nested/second"]


def test_runs_page_marks_runs_cut_short_and_a_directory_of_mixed_setups(runs_dir, capsys):
    mixed = runs_dir / "mixed"
    write_cli_run(mixed, "ar", "1")
    write_cli_run(mixed, "pd", "1", "--input-len", "8", "--num-requests", "60", "--output-len", "64",
                  "--timeout-s", "0.05", "--warmup", "0", code=1)  # fmt: skip
    capsys.readouterr()
    at = open_app()
    at.switch_page("pages/saved_runs.py").run()
    assert not at.exception, at.exception
    assert list(at.dataframe[1].value["Stopped early"]) == ["—", "timeout"]  # beside the key columns
    summary = at.dataframe[2].value
    assert dict(zip(summary["Engine"], summary["Stopped early"], strict=True)) == {"AR": "—", "PD": "timeout"}
    ar_tok_s, pd_tok_s = summary["Output tok/s"]
    # same directory and load, from two invocations: AR's rounds give AR its interval; PD's rounds paired
    # with no AR round, so PD is set against AR's pooled figure, without an interval
    assert list(summary["tok/s × AR"]) == ["1.00× (1.00–1.00)", f"{pd_tok_s / ar_tok_s:.2f}×"]
    tput = charts(at)["runs.chart.tput"]["data"][0]
    assert sorted(tput["y"]) == ["ar · C=1", "pd · C=1 (stopped early: timeout)"]
    (warning,) = [w.value for w in at.warning if "differ in models, device or dataset" in w.value]
    assert "prompt 12" in warning and "prompt 8" in warning


def test_open_loop_and_an_adaptive_controller_reach_the_engine_as_chosen(runs_dir):
    at = open_app()
    at.selectbox(key="live.drafter").set_value("suffix")
    at.selectbox(key="live.controller").set_value("goodput").run()
    at.slider(key="live.bounds").set_value((2, 6))
    at.slider(key="live.draft_len").set_value(3)
    at.radio(key="live.load_mode").set_value("open").run()
    at.number_input(key="live.request_rate").set_value(50.0)
    at.number_input(key="live.burstiness").set_value(0.5)
    at.number_input(key="live.num_requests").set_value(3)
    at.number_input(key="live.max_new_tokens").set_value(4)
    for engine in ("ar", "baseline", "pd"):
        at.toggle(key=f"live.engine.{engine}").set_value(False)
    at.button(key="live.start").click().run()
    rerun_until(at, ended("live"))
    assert not at.error, [e.value for e in at.error]
    (info,) = list_run_dirs(runs_dir)
    run = load_run_dir(info.path)
    assert list(run.frames.summary["engine"]) == ["pdv"] and list(run.frames.summary["request_rate"]) == [50.0]
    assert run.runs[0]["arrival"] == {"kind": "open", "request_rate": 50.0, "burstiness": 0.5,
                                      "max_concurrency": None, "seed": 0}  # fmt: skip
    controller = run.runs[0]["engine_config"]["controller"]
    assert (controller["kind"], controller["min_len"], controller["max_len"], controller["draft_len"]) == (
        "goodput", 2, 6, 3,
    )  # fmt: skip
    assert run.runs[0]["engine_config"]["drafter"] == "suffix"
    # the suffix drafter's global tree: its panel says what the tree held at the end, as run.json records it
    tree = run.runs[0]["suffix_tree"]
    assert tree["sequences"] >= 3  # every request taught it (and the warm-up's, if any)
    lines = [c.value for c in at.caption if c.value.startswith("Suffix tree: ")]
    held = f"{tree['tokens']:,} tokens in {tree['sequences']:,} outputs ({tree['nodes']:,} nodes)"
    assert lines == [f"Suffix tree: {held}"]


def test_an_unreadable_run_directory_shows_one_error_and_breaks_nothing(runs_dir, capsys):
    write_cli_run(runs_dir / "broken", "pd", "1")
    capsys.readouterr()
    (runs_dir / "broken" / "summary.csv").write_text("not,the,columns\n1,2,3\n")
    at = open_app()
    at.switch_page("pages/saved_runs.py").run()
    assert not at.exception, at.exception
    assert len(at.error) == 1 and "broken cannot be read" in at.error[0].value


def test_an_engine_that_crashes_shows_its_error_in_its_panel_and_the_others_still_run(runs_dir, monkeypatch):
    from engine.schedulers import registry

    make_engine = registry.make_engine

    def crashing_pd(name, pair, config):
        engine = make_engine(name, pair, config)
        if name == "pd":

            class Boom:
                def run(self, lane) -> bool:
                    raise RuntimeError("boom")

            # the decode lane crashes on its first pass
            engine.composition = tuple(
                spec._replace(works=(Boom(),)) if spec.name == "decode" else spec for spec in engine.composition
            )
        return engine

    monkeypatch.setattr(registry, "make_engine", crashing_pd)
    at = open_app()
    for engine in ("ar", "pdv"):
        at.toggle(key=f"live.engine.{engine}").set_value(False)
    at.number_input(key="live.num_requests").set_value(3)
    at.number_input(key="live.max_new_tokens").set_value(4)
    at.button(key="live.start").click().run()
    rerun_until(at, ended("live"))
    assert [e.value for e in at.error] == ["The PD engine crashed: RuntimeError: boom"]
    assert "1 of them ended with an engine error" in at.success[0].value
    states = [p.proto.text for p in at.get("progress")]
    assert states[0] == "3/3 requests · done" and states[1].endswith("· failed")
    assert wait_for_no_threads() == []


@pytest.fixture(scope="module")
def endpoint_url():
    """PD-Verify's own server on a free loopback port, over a tiny pair of its own, with an API key."""
    with uvicorn_thread(served(load_model_pair("tiny", device="cpu"), "baseline", api_key="sk-secret").app) as url:
        yield f"{url}/v1"


def add_endpoint(at: AppTest, url: str, model: str = MODEL, label: str = "served", page: str = "live") -> AppTest:
    at.toggle(key=f"{page}.endpoint").set_value(True).run()
    at.text_input(key=f"{page}.endpoint_url").input(url)
    at.text_input(key=f"{page}.endpoint_model").input(model)
    at.text_input(key=f"{page}.endpoint_label").input(label)
    at.text_input(key=f"{page}.endpoint_api_key").input("sk-secret")
    return at.run()


@pytest.mark.parametrize("engines", [(), ("baseline",)], ids=["alone", "after_an_engine"])
def test_a_live_run_with_an_endpoint_runs_it_after_the_engines_and_records_it(runs_dir, endpoint_url, engines):
    at = open_app()
    for engine in ENGINES:
        at.toggle(key=f"live.engine.{engine}").set_value(engine in engines)
    at.number_input(key="live.num_requests").set_value(3)
    at.number_input(key="live.max_new_tokens").set_value(6)
    add_endpoint(at, endpoint_url)
    assert not at.error, [e.value for e in at.error]
    at.button(key="live.start").click().run()
    rerun_until(at, ended("live"))

    assert not at.error, [e.value for e in at.error]
    names = [*engines, "served"]
    panels = [m.value for m in at.markdown if m.value.startswith("<h4")]
    assert [p.split("● ")[1].split("<")[0] for p in panels] == ["Baseline", "served"][-len(names) :]
    assert "#B279A2" in panels[-1]  # the endpoint's colour, not an engine's
    assert [p.proto.text for p in at.get("progress")] == ["3/3 requests · done"] * len(names)
    figs = charts(at)
    assert [t["name"] for t in figs["live.chart.ttft"]["data"]][-1] == "served"

    (info,) = list_run_dirs(runs_dir)
    run = load_run_dir(info.path)
    assert list(run.frames.summary["engine"]) == names
    assert (run.frames.summary["completed"] == 3).all()
    assert run.runs[-1]["endpoint"]["url"] == endpoint_url
    assert not any("sk-secret" in f.read_text() for f in info.path.iterdir())

    at.switch_page("pages/saved_runs.py").run()
    assert not at.exception, at.exception
    assert list(at.dataframe[0].value["runs"]) == [len(names)]
    assert len(charts(at)["runs.chart.tput"]["data"][0]["y"]) == len(names)


def test_a_sweep_runs_the_endpoint_at_every_load_point(runs_dir, endpoint_url):
    at = open_app()
    at.switch_page("pages/sweep_run.py").run()
    for engine in ENGINES:
        at.toggle(key=f"sweep.engine.{engine}").set_value(engine == "baseline")
    at.number_input(key="sweep.num_requests").set_value(2)
    at.number_input(key="sweep.max_new_tokens").set_value(4)
    at.text_input(key="sweep.concurrencies").input("1,2")
    add_endpoint(at, endpoint_url, page="sweep")
    at.button(key="sweep.start").click().run()
    rerun_until(at, ended("sweep"))

    assert not at.error, [e.value for e in at.error]
    (info,) = list_run_dirs(runs_dir)
    summary = load_run_dir(info.path).frames.summary
    assert list(summary["engine"]) == ["baseline", "served"] * 2 and list(summary["concurrency"]) == [1, 1, 2, 2]


@pytest.mark.parametrize(
    ("url", "model", "label", "message"),
    [
        ("", MODEL, "served", "give the endpoint's URL"),
        ("http://127.0.0.1:8000/v1", "", "served", "give the model name"),
        ("http://127.0.0.1:8000/v1", MODEL, "pdv", "is an engine's name"),
        ("127.0.0.1:8000", MODEL, "served", "endpoint URL must be http(s)://"),
    ],
)
def test_invalid_endpoint_settings_show_one_message_and_start_nothing(runs_dir, url, model, label, message):
    at = add_endpoint(open_app(), url, model, label)
    assert len(at.error) == 1 and message in at.error[0].value, [e.value for e in at.error]
    assert "sk-secret" not in at.error[0].value and at.button(key="live.start").disabled
