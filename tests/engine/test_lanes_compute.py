"""Lanes at once on a CPU: each lane computes with its own intra-op thread budget, and the arbiter lets that many
lanes hold a turn together; taking turns, one lane at a time uses every core."""

import threading

import pytest
import torch

from engine.config import ControllerConfig, EngineConfig, LaneCompute
from engine.schedulers.lanes import ArbiterRules, LaneArbiter
from engine.schedulers.registry import make_engine
from tests.support.short_requests import run_short_requests


def threads_seen_by_each_lane(pair, compute: LaneCompute) -> tuple[dict[str, set[int]], int]:
    """Run PDV (pipelined, so every lane works) and record ``torch.get_num_threads()`` on each lane's thread
    as its stages run. Returns {thread name: counts seen} and the arbiter's slots."""
    config = EngineConfig(
        drafter="model",
        controller=ControllerConfig(kind="fixed"),
        hybrid_threshold=None,
        lane_compute=compute,
        intra_op_threads=2,
    )
    eng = make_engine("pdv", pair, config)
    seen: dict[str, set[int]] = {}

    def recorded(stage):
        def run(*args, **kwargs):
            seen.setdefault(threading.current_thread().name, set()).add(torch.get_num_threads())
            return stage(*args, **kwargs)

        return run

    eng._prefill, eng._draft, eng._verify = recorded(eng._prefill), recorded(eng._draft), recorded(eng._verify)
    run_short_requests(eng)
    return seen, eng.arbiter.slots


@pytest.mark.parametrize(("compute", "threads", "slots"), [(LaneCompute.AT_ONCE, 1, 2), (LaneCompute.TURNS, 2, 1)])
def test_each_lane_computes_with_its_own_thread_budget(tiny_pair, compute, threads, slots):
    main_threads = torch.get_num_threads()
    seen, arbiter_slots = threads_seen_by_each_lane(tiny_pair, compute)
    assert set(seen) == {"pdv-prefill", "pdv-decode", "pdv-verify"}
    assert all(counts == {threads} for counts in seen.values()), seen
    assert arbiter_slots == slots
    assert torch.get_num_threads() == main_threads  # the caller's own count is its own


def test_the_arbiter_lets_as_many_lanes_as_slots_hold_a_turn_together():
    arbiter = LaneArbiter(slots=2, rules=ArbiterRules(2), backlog=dict)
    inside = threading.Barrier(2, timeout=10)  # passes only when both lanes are inside their turns at once
    passed = []

    def lane(name):
        with arbiter.turn(name):
            inside.wait()
            passed.append(name)

    workers = [threading.Thread(target=lane, args=(n,)) for n in ("decode", "verify")]
    for w in workers:
        w.start()
    for w in workers:
        w.join(10)
    assert sorted(passed) == ["decode", "verify"]
