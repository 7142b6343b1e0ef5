"""The dashboard's engine process: a launch streams from it, and Stop, a closed tab or its death each end cleanly."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

import pytest

from dashboard import engine_host
from dashboard.run_manager import RunManager
from metrics.runs import load_run_dir
from tests.dashboard.test_replay_launch import _spec
from workloads.drivers.run_state import RunState

pytestmark = pytest.mark.engine_process
WAIT_S = 240  # a tiny launch, and a fresh process importing torch, on a busy 2-core machine


def _long_spec():
    spec = _spec(simultaneous=False)
    return replace(spec, num_requests=400, params=replace(spec.params, max_new_tokens=32))


def _until(predicate, timeout: float = WAIT_S, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not reached within {timeout:.0f} s")


@pytest.fixture
def manager(tmp_path):
    manager = RunManager(tmp_path / "runs", host="process")
    yield manager
    manager.close()


def _running_requests(launch) -> bool:
    view = launch.view()
    return any(r.state == RunState.RUNNING and r.finished > 0 for r in view.runs)


def test_a_launch_streams_from_the_engine_process_and_its_runs_are_written_there(manager):
    launch, started = manager.start(replace(_spec(simultaneous=False), rounds=2))
    assert started
    seen_running = _until(lambda: _running_requests(launch) or launch.view().status.state.ended)
    assert launch.wait(WAIT_S)
    view = launch.view()
    assert view.status.state == RunState.DONE, view.status
    assert seen_running is True  # a round in progress was shown before its run ended
    assert manager.engines.pid not in (None, os.getpid())  # the engines ran in a process of their own
    assert [(r.engine, r.finished) for r in view.runs] == [("ar", 4), ("pd", 4)]
    assert len(view.rounds) == 4 and all(r.summary.completed == 4 for r in view.rounds)
    assert view.runs[0].timeseries  # the sampler's rows crossed over
    assert sorted(load_run_dir(view.out_dir).frames.summary["engine"]) == ["ar", "pd"]


def test_stop_ends_the_launch_cancelled_and_the_next_start_reuses_the_process(manager):
    launch, _ = manager.start(_long_spec())
    _until(lambda: _running_requests(launch))
    pid = manager.engines.pid
    assert manager.stop()
    assert launch.wait(WAIT_S)
    assert launch.view().status.state == RunState.CANCELLED
    again, started = manager.start(_spec(simultaneous=False))
    assert started and again.wait(WAIT_S)
    assert again.view().status.state == RunState.DONE
    assert manager.engines.pid == pid  # the model pair stayed loaded in the same engine process


def test_a_killed_engine_process_fails_the_launch_with_its_signal_and_a_new_one_starts(manager):
    launch, _ = manager.start(_long_spec())
    _until(lambda: _running_requests(launch))
    pid = manager.engines.pid
    os.kill(pid, signal.SIGKILL)
    assert launch.wait(60)
    status = launch.view().status
    assert status.state == RunState.FAILED
    assert "the engine process was killed by signal 9 before the launch ended" in status.error
    assert not any(r.state.underway for r in launch.view().runs)
    again, started = manager.start(_spec(simultaneous=False))
    assert started and again.wait(WAIT_S)
    assert again.view().status.state == RunState.DONE
    assert manager.engines.pid not in (None, pid)


def test_a_launch_nobody_watches_any_more_is_stopped(manager, monkeypatch):
    monkeypatch.setattr(engine_host, "ABANDON_S", 1.0)
    connected = {"tab": True}
    manager.watch("tab", lambda: connected["tab"])
    launch, _ = manager.start(_long_spec())
    _until(lambda: _running_requests(launch))
    connected["tab"] = False  # the tab was closed
    assert launch.wait(WAIT_S)
    assert launch.view().status.state == RunState.CANCELLED
    assert "no browser tab showed this launch" in launch.stop_reason


def test_closing_the_manager_ends_the_engine_process(tmp_path):
    manager = RunManager(tmp_path / "runs", host="process")
    launch, _ = manager.start(_spec(simultaneous=False))
    _until(lambda: manager.engines.pid is not None)
    pid = manager.engines.pid
    manager.close()
    assert launch.wait(WAIT_S)
    _until(lambda: not _alive(pid), timeout=30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has ended: only its exit status is left
        return f.read().split()[2] != "Z"
