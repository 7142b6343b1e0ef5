"""Lanes at once on a CPU: each lane computes with its own intra-op thread budget, and the arbiter lets that many
lanes hold a turn together; taking turns, one lane at a time uses every core."""

import threading

import pytest
import torch

from engine.config import LaneCompute
from engine.schedulers.lanes import ArbiterRules, LaneArbiter
from tests.support.lane_threads import threads_seen_by_each_lane


@pytest.mark.parametrize(("compute", "threads", "slots"), [(LaneCompute.AT_ONCE, 1, 2), (LaneCompute.TURNS, 2, 1)])
def test_each_lane_computes_with_its_own_thread_budget(tiny_pair, compute, threads, slots):
    main_threads = torch.get_num_threads()
    seen, arbiter_slots, _ = threads_seen_by_each_lane(tiny_pair, compute)
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
