"""How much two lanes at once slow each other, in the step-cost profile: the accessor on hand-made timings, the
profile file's round trip, an older file without it, and the per-lane thread budget the measurement relies on."""

from __future__ import annotations

import json
import threading
from dataclasses import replace

import pytest
import torch

from engine.profiling import CostProfile, ProfileMissing, ProfileShape, prepare_profile
from engine.profiling.concurrency import Lane, lane_runner, overlapping, prepare_forward, run_lanes
from engine.profiling.interference import Interference
from engine.profiling.lane_threads import lane_budget, use_intra_op_threads
from engine.profiling.store import profile_path, read_profile, write_profile

# one forward alone with every thread: 10 ms at 1 row, 40 ms at 8 rows (any tokens); one lane's budget alone
# doubles it; with the other lane at once it takes 1.5x (1 row) and 3x (8 rows) the time alone
INTERFERENCE = Interference(
    rows=(1, 8),
    tokens=(1, 5),
    lane_threads=1,
    alone_ms=((10.0, 10.0), (40.0, 40.0)),
    lane_alone_ms=((20.0, 20.0), (80.0, 80.0)),
    concurrent_ms=((15.0, 15.0), (120.0, 120.0)),
)


def hand_made(interference: Interference | None = INTERFERENCE) -> CostProfile:
    return CostProfile((1, 8), (1, 5), ((10.0, 12.0), (40.0, 44.0)), (), {"cpu": "hand-made"}, interference)


def test_concurrent_slowdown_is_time_with_another_lane_over_time_alone_interpolated_and_clamped():
    profile = hand_made()
    assert profile.concurrent_slowdown(1, 1) == pytest.approx(1.5)
    assert profile.concurrent_slowdown(8, 5) == pytest.approx(3.0)
    assert profile.concurrent_slowdown(4.5, 3) == pytest.approx(2.25)  # halfway between 1 and 8 rows
    assert profile.concurrent_slowdown(64, 17) == pytest.approx(3.0)  # beyond the grid: its edge
    assert INTERFERENCE.budget_slowdown(4, 1) == pytest.approx(2.0)
    assert "slowdown" in profile.table() and "1 intra-op thread(s) each" in profile.table()


def test_a_profile_without_the_interference_figure_names_the_profile_command():
    with pytest.raises(ProfileMissing, match="python -m engine profile"):
        hand_made(None).concurrent_slowdown(1, 1)
    assert hand_made(None).verify_s(1, 1) == pytest.approx(0.010)  # its forward times still read


@pytest.mark.parametrize(
    "change, message",
    [
        ({"concurrent_ms": ((15.0, 15.0),)}, "concurrent_ms must be 2 x 2"),
        ({"alone_ms": ((10.0, 0.0), (40.0, 40.0))}, "not positive"),
        ({"lane_threads": 0}, "lane_threads"),
    ],
)
def test_an_inconsistent_interference_table_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        replace(INTERFERENCE, **change)


def test_the_profile_file_round_trips_the_interference_table(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.setenv("PDV_PROFILE_DIR", str(tmp_path))
    shape = ProfileShape(8, 5, False)
    path = write_profile(tiny_pair, shape, hand_made())
    assert read_profile(tiny_pair, shape) == hand_made()
    assert json.loads(path.read_text())["interference"]["concurrent_ms"] == [[15.0, 15.0], [120.0, 120.0]]


def _small_config():
    from engine.config import ControllerConfig, EngineConfig

    controller = ControllerConfig(kind="cost", draft_len=2, min_len=1, max_len=4)
    return EngineConfig(drafter="ngram", max_batch_size=8, controller=controller)


def test_a_profile_file_from_before_loads_and_the_profiling_step_adds_only_the_interference(
    tiny_pair, tmp_path, monkeypatch
):
    monkeypatch.setenv("PDV_PROFILE_DIR", str(tmp_path))
    shape = ProfileShape(8, 5, False)
    path = write_profile(tiny_pair, shape, hand_made(None))
    old = json.loads(path.read_text())
    del old["interference"]  # written before the figure existed
    path.write_text(json.dumps(old))
    assert read_profile(tiny_pair, shape) == hand_made(None)

    def refuse(*args, **kwargs):
        raise AssertionError("the cached forward times were measured again")

    monkeypatch.setattr("engine.profiling.prepare.measure", refuse)
    monkeypatch.setattr("engine.profiling.prepare.measure_interference", lambda pair, shape, progress: INTERFERENCE)
    assert prepare_profile(tiny_pair, _small_config(), engine="baseline") == hand_made()
    assert read_profile(tiny_pair, shape) == hand_made()  # written back: the next start reads it whole


def test_the_profiling_step_measures_the_interference_of_two_real_lanes(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.setenv("PDV_PROFILE_DIR", str(tmp_path))
    threads = torch.get_num_threads()
    measured = prepare_profile(tiny_pair, _small_config(), engine="baseline").interference
    assert measured.rows == (1, 8) and measured.tokens == (1, 5)
    assert measured.lane_threads == lane_budget(threads, 2)
    assert all(v > 0 for table in (measured.concurrent_ms, measured.lane_alone_ms) for row in table for v in row)
    assert torch.get_num_threads() == threads  # the lanes' budgets did not leak into the caller
    assert profile_path(tiny_pair, ProfileShape(8, 5, False)).is_file()


def test_a_lane_thread_keeps_its_own_intra_op_budget_when_another_thread_sets_another():
    set_by_lane, set_by_main = threading.Event(), threading.Event()
    seen: dict[str, int] = {}
    main_threads = torch.get_num_threads()

    def lane(name: str, keep: bool) -> None:
        if keep:
            use_intra_op_threads(1)
        else:
            torch.set_num_threads(1)  # before this thread's first parallel region: not yet its own
        set_by_lane.set()
        set_by_main.wait()
        seen[name] = torch.get_num_threads()

    for name, keep in (("use_intra_op_threads", True), ("set_num_threads alone", False)):
        set_by_lane.clear(), set_by_main.clear()
        worker = threading.Thread(target=lane, args=(name, keep))
        worker.start()
        set_by_lane.wait()
        torch.set_num_threads(max(2, main_threads))  # another thread sets the process-wide count in between
        set_by_main.set()
        worker.join()
    torch.set_num_threads(main_threads)
    assert seen == {"use_intra_op_threads": 1, "set_num_threads alone": max(2, main_threads)}


def test_lane_budgets_split_the_threads_evenly_and_never_below_one():
    assert [lane_budget(2, 2), lane_budget(8, 2), lane_budget(8, 3), lane_budget(1, 2)] == [1, 4, 2, 1]
    with pytest.raises(ValueError):
        lane_budget(2, 0)
    with pytest.raises(ValueError):
        use_intra_op_threads(0)


def test_only_forwards_that_ran_while_every_lane_ran_are_kept():
    fast = [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0)]
    slow = [(0.0, 1.5), (1.5, 3.5)]  # its last forward ended first: the other lane's fourth ran alone
    kept = overlapping([fast, slow])
    assert [lane.durations for lane in kept] == [[1.0, 1.0, 1.0], [1.5, 2.0]]
    assert kept[0].rate == pytest.approx(1.0) and kept[1].median_s == pytest.approx(1.75)


def test_two_lanes_on_their_own_runners_each_complete_forwards(tiny_pair):
    verifier = tiny_pair.verifier
    other = lane_runner(verifier, "second lane")
    assert other.pool is not verifier.pool and other.model is verifier.model
    lanes = [Lane(verifier, prepare_forward(verifier, 2, 3), 1), Lane(other, prepare_forward(other, 2, 3, seed=1), 1)]
    times = run_lanes(lanes, seconds=0.05, min_forwards=2)
    assert [len(t.durations) >= 1 for t in times] == [True, True]
    assert all(lane.forward.stores[0].length == 128 for lane in lanes)  # each forward's tokens were taken back
