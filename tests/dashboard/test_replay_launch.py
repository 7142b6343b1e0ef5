"""The dashboard's one worker: a launch runs its sweeps itself, sequential or simultaneous, and reports one state."""

from __future__ import annotations

import threading

from dashboard.replay_launch import ReplayLaunch
from dashboard.replay_spec import ReplaySpec
from dashboard.run_manager import RunManager
from engine.config import ControllerConfig, EngineConfig, SamplingParams
from metrics.runs import load_run_dir
from workloads.datasets.synthetic import LengthSpec
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.run_state import RunState
from workloads.drivers.trace import DatasetSpec


def _spec(simultaneous: bool) -> ReplaySpec:
    dataset = DatasetSpec("synthetic", LengthSpec(12), LengthSpec(8))
    config = EngineConfig(controller=ControllerConfig(kind="fixed"), drafter="model")
    return ReplaySpec("live", "tiny", ("ar", "pd"), (ClosedLoop(2),), dataset, 4, config,
                      SamplingParams(max_new_tokens=8), simultaneous=simultaneous, device="cpu")  # fmt: skip


def test_a_simultaneous_launch_runs_every_engine_to_its_end_and_writes_each_run(tmp_path):
    manager = RunManager(tmp_path / "runs")
    launch, started = manager.start(_spec(simultaneous=True))
    assert started and launch.wait(300)
    view = launch.view()
    assert view.status.state == RunState.DONE and view.status.error is None
    assert [(r.engine, r.state, r.finished, r.total) for r in view.runs] == [
        ("ar", RunState.DONE, 4, 4), ("pd", RunState.DONE, 4, 4)
    ]  # fmt: skip
    assert [r.summary.completed for r in view.runs] == [4, 4]
    assert sorted(load_run_dir(view.out_dir).frames.summary["engine"]) == ["ar", "pd"]


def test_sweeps_that_fail_alike_end_the_launch_failed_with_their_error_once(tmp_path):
    manager = RunManager(tmp_path / "runs")
    not_a_directory = tmp_path / "taken"
    not_a_directory.write_text("a file where the runs would go")
    launch = ReplayLaunch("failing", _spec(simultaneous=True), not_a_directory, manager.pair, threading.Lock())
    launch.start()
    assert launch.wait(300)
    view = launch.view()
    assert view.status.state == RunState.FAILED
    assert view.status.error.endswith(f"RunFilesError: {not_a_directory} exists and is not a directory")
    assert view.status.error.count("is not a directory") == 1  # both sweeps failed alike: said once
    assert [r.state for r in view.runs] == [RunState.SKIPPED, RunState.SKIPPED]  # no engine started
