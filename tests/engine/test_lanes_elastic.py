"""Elastic lanes on a CPU: a lane computing alone has every core, lanes with work at the same time split them,
and the lanes never hold more intra-op threads than there are cores."""

import threading
import time

import pytest
import torch

from engine.config import LaneCompute
from engine.schedulers.lanes import ArbiterRules, LaneArbiter
from engine.schedulers.plan import elastic_threads, lane_budgets
from tests.support.lane_threads import threads_seen_by_each_lane

# --------------------------------------------------------------- the plan function


@pytest.mark.parametrize(
    ("cores", "busy", "computing", "contenders", "threads"),
    [
        (2, 0, 0, 0, 2),  # alone: every core
        (2, 0, 0, 1, 1),  # another lane wants a turn: half
        (2, 0, 0, 2, 1),  # more lanes than cores: one core each, never zero
        (2, 1, 1, 0, 1),  # one lane computes on one core: the other core
        (2, 2, 1, 0, None),  # one lane holds every core: wait
        (2, 2, 2, 1, None),
        (4, 0, 0, 1, 2),
        (4, 2, 1, 0, 2),
        (4, 3, 1, 0, 1),  # a share would be 2, one core is free
        (8, 0, 0, 2, 2),  # three lanes on eight cores: 8 // 3
        (1, 0, 0, 3, 1),
    ],
)
def test_elastic_threads_give_every_core_alone_and_a_share_among_others(cores, busy, computing, contenders, threads):
    assert elastic_threads(cores, busy, computing, contenders) == threads


@pytest.mark.parametrize("cores", [1, 2, 3, 4, 8, 16])
def test_elastic_grants_never_exceed_the_cores(cores):
    """Lanes granted one after another, each while the others compute, never hold more threads than cores."""
    for lanes in range(1, 5):
        busy = 0
        for i in range(lanes):
            granted = elastic_threads(cores, busy, i, lanes - i - 1)
            if granted is None:
                break
            assert granted >= 1
            busy += granted
        assert busy <= cores


def test_elastic_threads_reject_impossible_states():
    with pytest.raises(ValueError, match="cores must be >= 1"):
        elastic_threads(0, 0, 0, 0)
    with pytest.raises(ValueError):
        elastic_threads(2, -1, 0, 0)


def test_elastic_budgets_let_as_many_lanes_as_cores_run_each_starting_with_every_core():
    three = lane_budgets(("prefill", "decode", "verify"), cores=2, cuda=False, compute=LaneCompute.ELASTIC)
    assert three.slots == 2 and three.elastic
    assert three.threads == {"prefill": 2, "decode": 2, "verify": 2}
    one_core = lane_budgets(("prefill", "decode"), cores=1, cuda=False, compute=LaneCompute.ELASTIC)
    assert one_core.slots == 1 and not one_core.elastic  # nothing to split: taking turns
    cuda = lane_budgets(("prefill", "decode"), cores=2, cuda=True, compute=LaneCompute.ELASTIC)
    assert cuda.slots == 2 and not cuda.elastic and set(cuda.threads.values()) == {None}


# --------------------------------------------------------------- the arbiter


def test_the_arbiter_grants_every_core_to_a_lane_alone_and_shares_when_another_has_work():
    backlog = {"decode": 4, "prefill": 0}
    arbiter = LaneArbiter(slots=2, rules=ArbiterRules(2), backlog=lambda: dict(backlog), cores=2)
    with arbiter.turn("decode") as threads:
        assert threads == 2
    backlog["prefill"] = 1  # admitted prompts waiting for their chunk: the decode lane shares
    with arbiter.turn("decode") as decode_threads:
        with arbiter.turn("prefill") as prefill_threads:
            assert (decode_threads, prefill_threads) == (1, 1)
    not_elastic = LaneArbiter(slots=1, rules=ArbiterRules(2), backlog=dict)
    with not_elastic.turn("decode") as threads:
        assert threads == 0


def test_a_lane_waits_while_another_holds_every_core_then_gets_its_share():
    backlog = {"decode": 0, "prefill": 0}
    arbiter = LaneArbiter(slots=2, rules=ArbiterRules(2), backlog=lambda: dict(backlog), cores=2)
    granted: dict[str, tuple[float, int]] = {}
    holding = threading.Event()
    release = threading.Event()

    def prefill():
        with arbiter.turn("prefill") as threads:
            granted["prefill"] = (time.perf_counter(), threads)
            holding.set()
            release.wait(10)

    def decode():
        holding.wait(10)
        with arbiter.turn("decode") as threads:
            granted["decode"] = (time.perf_counter(), threads)

    workers = [threading.Thread(target=prefill), threading.Thread(target=decode)]
    for w in workers:
        w.start()
    holding.wait(10)
    time.sleep(0.2)
    assert "decode" not in granted  # every core is the prefill's: the decode lane waits
    released = time.perf_counter()
    release.set()
    for w in workers:
        w.join(10)
    assert granted["prefill"][1] == 2
    assert granted["decode"][0] >= released and granted["decode"][1] == 2  # alone again: every core


# --------------------------------------------------------------- an engine


@pytest.mark.parametrize("engine", ["pd", "pdv"])
def test_elastic_lanes_compute_with_one_or_every_core_and_stay_lossless(tiny_pair, engine):
    """PDV pipelined (every lane works) and PD with elastic lanes: each stage runs with 1 or 2 threads, and the
    outputs are the engine's outputs taking turns."""
    main_threads = torch.get_num_threads()
    seen, slots, outputs = threads_seen_by_each_lane(tiny_pair, LaneCompute.ELASTIC, engine)
    assert torch.get_num_threads() == main_threads
    assert slots == 2 and seen and all(counts <= {1, 2} for counts in seen.values()), seen
    assert outputs == threads_seen_by_each_lane(tiny_pair, LaneCompute.TURNS, engine)[2]
