"""OpenMP worker pools on a CPU: a thread's workers end when it releases them, and an engine keeps only the
computing lane's pool alive (engine.profiling.lane_threads.release_openmp_pool)."""

import os
import threading

import pytest
import torch

from engine.config import ControllerConfig, EngineConfig, LaneCompute
from engine.devices import LaneStream
from engine.profiling.lane_threads import release_openmp_pool, use_intra_op_threads
from engine.schedulers import base, lanes
from engine.schedulers.lanes import ArbiterRules, Lane, LaneArbiter, LaneSpec
from engine.schedulers.registry import make_engine
from tests.support.short_requests import run_short_requests


def os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_release_ends_the_calling_threads_openmp_workers_and_the_next_region_starts_them_again():
    assert torch.get_num_threads() >= 2, "needs two cores: one OpenMP worker beside the calling thread"
    counts = {}

    def work():
        use_intra_op_threads(2)
        x = torch.randn(1 << 21)
        counts["before"] = os_threads()
        x.exp()  # a parallel region: this thread's pool gets its worker
        counts["computing"] = os_threads()
        counts["released"] = release_openmp_pool()
        counts["after"] = os_threads()
        x.exp()
        counts["again"] = os_threads()
        release_openmp_pool()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert counts["released"] is True
    assert counts["computing"] == counts["before"] + 1
    assert counts["after"] == counts["before"]
    assert counts["again"] == counts["before"] + 1


@pytest.mark.parametrize(
    ("engine", "compute", "per_turn"),
    [("pd", LaneCompute.TURNS, True), ("pdv", LaneCompute.TURNS, True), ("pdv", LaneCompute.AT_ONCE, False),
     ("pdv", LaneCompute.ELASTIC, True), ("baseline", LaneCompute.TURNS, False)],
)  # fmt: skip
def test_lanes_taking_turns_on_a_cpu_release_their_workers(
    tiny_pair, monkeypatch, engine, compute, per_turn
):
    calls = {"start": [], "lanes": []}
    monkeypatch.setattr(base, "release_openmp_pool", lambda: calls["start"].append(threading.current_thread().name))
    monkeypatch.setattr(lanes, "release_openmp_pool", lambda: calls["lanes"].append(threading.current_thread().name))
    config = EngineConfig(  # PDV pipelined: every lane takes turns
        drafter="ngram", controller=ControllerConfig(kind="fixed"), lane_compute=compute, hybrid_threshold=None
    )
    eng = make_engine(engine, tiny_pair, config)
    run_short_requests(eng)
    assert calls["start"] == [threading.current_thread().name]  # the starting thread's pool, once
    assert all(lane.release_pool is per_turn for lane in eng.lanes.values())
    if per_turn:
        assert {f"{engine}-{name}" for name in eng.lanes} <= set(calls["lanes"])
    else:
        assert calls["lanes"] == []


def test_a_lane_releases_its_workers_at_the_end_of_a_turn_only_when_another_lane_waits(monkeypatch):
    released = []
    monkeypatch.setattr(lanes, "release_openmp_pool", lambda: released.append(threading.current_thread().name))
    arbiter = LaneArbiter(slots=1, rules=ArbiterRules(2), backlog=dict)

    def lane(name):
        spec = LaneSpec(name, (), lambda: 0, lambda: 0)
        return Lane(spec, "e", arbiter=arbiter, stream=LaneStream(torch.device("cpu")), threads=None,
                    guard=lambda loop: loop, idle=lambda: None, release_pool=True)  # fmt: skip

    decode, verify = lane("decode"), lane("verify")
    with decode.turn():
        pass  # alone: the next turn is likely its own, so it keeps its workers
    assert released == []

    holding, waited = threading.Event(), []

    def verify_turn():
        holding.wait(10)
        with verify.turn():
            waited.append(threading.current_thread().name)

    other = threading.Thread(target=verify_turn, name="verify-thread")
    other.start()
    with decode.turn():
        holding.set()
        while not arbiter.others_waiting():
            threading.Event().wait(0.001)
    other.join(10)
    assert released == [threading.current_thread().name]  # decode's thread, before verify's turn began
    assert waited == ["verify-thread"]
