"""The dashboard when used roughly: double Starts, tabs closed mid-run, huge uploads, broken run directories."""

from __future__ import annotations

import json
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import uploads
from dashboard.replay_spec import ReplaySpec
from dashboard.run_manager import RunManager
from engine.config import ControllerConfig, EngineConfig, SamplingParams
from metrics.runs import list_run_dirs, load_run_dir
from tests.support import ROOT as ROOT_DIR
from tests.support.launches import stop_left_launch
from tests.support.threads import background_threads, wait_for_no_background_threads
from widgets.manager import run_manager_for
from workloads.datasets.synthetic import LengthSpec
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.trace import DatasetSpec

ROOT = ROOT_DIR
APP = str(ROOT / "app.py")



def _threads() -> list[str]:
    return [t.name for t in background_threads()]


def _no_threads_left(timeout: float = 60.0) -> list[str]:
    return [t.name for t in wait_for_no_background_threads(timeout)]


@pytest.fixture
def manager(tmp_path) -> Iterator[RunManager]:
    """A run manager whose launch is stopped after the test even when the test fails."""
    manager = RunManager(tmp_path / "runs")
    yield manager
    stop_left_launch(manager)


@pytest.fixture
def app_runs_dir(runs_dir) -> Iterator[Path]:
    """``runs_dir``, whose app's launch is stopped after the test even when the test fails."""
    yield runs_dir
    stop_left_launch(run_manager_for(runs_dir))


def _finished(at: AppTest) -> int:
    """Requests the first engine's panel says are finished ("3/8 requests · running")."""
    bars = [p.proto.text for p in at.get("progress") if " requests · " in p.proto.text]
    return int(bars[0].split("/")[0]) if bars else 0


def _spec(num_requests: int) -> ReplaySpec:
    dataset = DatasetSpec("synthetic", LengthSpec(12), LengthSpec(64))
    config = EngineConfig(controller=ControllerConfig(kind="fixed"), drafter="model")
    params = SamplingParams(max_new_tokens=64)
    return ReplaySpec(
        "live", "tiny", ("ar", "pd"), (ClosedLoop(2),), dataset, num_requests, config, params, device="cpu"
    )


def test_starts_racing_from_many_threads_make_one_launch_and_stop_leaves_no_thread(manager):
    barrier, results = threading.Barrier(8), []

    def click() -> None:
        barrier.wait()
        results.append(manager.start(_spec(400)))

    clicks = [threading.Thread(target=click) for _ in range(8)]
    for t in clicks:
        t.start()
    for t in clicks:
        t.join()
    launches = {id(launch) for launch, _ in results}
    assert len(launches) == 1 and sum(started for _, started in results) == 1
    launch = results[0][0]
    lanes = {"ar-loop", "pd-prefill", "pd-decode"}
    deadline = time.monotonic() + 120
    while not lanes & set(_threads()) and time.monotonic() < deadline:
        time.sleep(0.05)
    running = [t for t in _threads() if t in lanes]
    assert running == ["ar-loop"]  # the first engine (AR), once: one launch, one engine
    while launch.view().runs[0].finished < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert manager.stop() and launch.wait(60)
    assert manager.stop() is False  # a second Stop is harmless
    assert _no_threads_left() == []
    (info,) = list_run_dirs(manager.runs_root)  # the stopped run is kept
    assert load_run_dir(info.path).runs[0]["stop_reason"] == "cancelled"


def test_a_tab_closed_mid_run_leaves_the_launch_to_the_next_tab_which_can_stop_it(app_runs_dir):
    runs_dir = app_runs_dir
    first = AppTest.from_file(APP, default_timeout=60)
    first.session_state["live.drafter"] = "model"
    first.session_state["live.controller"] = "fixed"
    first.session_state["live.dataset"] = "synthetic"
    first.run()
    first.number_input(key="live.num_requests").set_value(2000)
    first.button(key="live.start").click().run()
    launch_id = first.session_state["live.rendered"][0]
    del first  # the tab is closed (or reloaded): its session is gone, the launch is not

    reloaded = AppTest.from_file(APP, default_timeout=60).run()
    assert not reloaded.exception, reloaded.exception
    assert reloaded.session_state["live.rendered"] == (launch_id, True)
    deadline = time.monotonic() + 120
    while _finished(reloaded) < 2 and time.monotonic() < deadline:  # some requests done: there is a run to keep
        time.sleep(0.25)
        reloaded.run()
    reloaded.button(key="live.start").click().run()  # a Start from the new tab starts nothing new
    assert any("already using the device" in w.value for w in reloaded.warning)
    reloaded.button(key="live.stop").click().run()
    deadline = time.monotonic() + 60
    while reloaded.session_state["live.rendered"][1] and time.monotonic() < deadline:
        time.sleep(0.25)
        reloaded.run()
    assert _no_threads_left() == []
    (info,) = list_run_dirs(runs_dir)
    assert info.path.name == launch_id and load_run_dir(info.path).runs[0]["stop_reason"] == "cancelled"


def test_an_upload_over_the_size_limit_is_refused_with_a_message(runs_dir, tmp_path, monkeypatch):
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == uploads.MAX_UPLOAD_MB  # the browser and the server agree

    check = uploads.save_and_check(b"[" + b" " * 3 * 2**20 + b"]", "big.json", tmp_path, max_mb=2)
    assert check.path is None and check.error == "big.json is 3.0 MB, over the 2 MB upload limit"
    assert list(tmp_path.iterdir()) == []  # nothing stored

    monkeypatch.setattr(uploads, "MAX_UPLOAD_MB", 0.001)  # about 1 KB, for the page
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.radio(key="live.dataset").set_value("upload").run()
    good = [{"id": "a", "conversations": [{"from": "human", "value": "Tell me about the sea." * 20}]}] * 10
    at.file_uploader(key="live.upload").upload("big.json", json.dumps(good).encode(), "application/json").run()
    assert not at.exception, at.exception
    assert len(at.error) == 1 and "over the 0.001 MB upload limit" in at.error[0].value
    assert at.button(key="live.start").disabled


BROKEN = {
    "not-json": {"run.json": "{ this is not json"},
    "not-ours": {"run.json": json.dumps({"hello": "world"})},
    "runs-not-objects": {"run.json": json.dumps({"format": 1, "runs": ["x", 3]})},
    "bad-rows": {"run.json": json.dumps({"format": 1, "runs": [{"run_id": "r", "engine": "pd"}]}),
                 "requests.csv": "\x00\x01garbage", "outputs.jsonl": "{not json\n"},
}  # fmt: skip


def test_corrupted_and_hand_edited_run_directories_are_listed_as_such_and_break_nothing(runs_dir):
    from metrics.export import RUN_JSON_FORMAT

    for name, files in BROKEN.items():
        (runs_dir / name).mkdir(parents=True)
        for file, text in files.items():
            (runs_dir / name / file).write_text(text.replace('"format": 1', f'"format": {RUN_JSON_FORMAT}'))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/saved_runs.py").run()
    assert not at.exception, at.exception
    ours = set(BROKEN) - {"not-ours"}  # valid JSON of another tool is no run directory at all
    listing = at.dataframe[0].value
    assert set(listing["directory"]) == ours and (listing["runs"] == 0).sum() == 3
    at.multiselect(key="runs.open").set_value(sorted(ours)).run()
    assert not at.exception, at.exception
    assert {e.value.split(" ")[0] for e in at.error} == ours
    assert all("cannot be read" in e.value for e in at.error)


def test_a_run_directory_outside_the_runs_root_cannot_be_reached(tmp_path):
    manager = RunManager(tmp_path / "runs")
    (tmp_path / "runs" / "mine").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "run.json").write_text("{}")
    (tmp_path / "runs" / "link").symlink_to(tmp_path / "outside")
    for escape in ("../outside", "mine/../../outside", "link", "."):
        with pytest.raises(ValueError, match="not inside the runs directory"):
            manager.delete_run_dir(tmp_path / "runs" / escape)
    assert (tmp_path / "outside" / "run.json").exists()
    assert manager.inside_root(tmp_path / "runs" / "mine") == (tmp_path / "runs" / "mine").resolve()
