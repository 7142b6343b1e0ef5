"""Lane priority, the arbiter, and CUDA stream/event ordering (with a fake CUDA backend)."""

import threading

import torch

from engine.devices import LaneStream, keep_for_current_stream
from engine.schedulers.lanes import STARVATION_S, ArbiterRules, LaneArbiter, choose_lane
from tests.support.fake_cuda import fake_cuda  # noqa: F401 - a fixture
from tests.support.serve import wait_until


def just_now(*lanes: str) -> dict[str, float]:
    return dict.fromkeys(lanes, 0.0)


def test_decode_outranks_verify_outranks_prefill():
    backlog = {"decode": 3, "verify": 2, "prefill": 5}
    assert choose_lane(just_now("decode", "verify", "prefill"), backlog, ArbiterRules(2)) == "decode"
    assert choose_lane(just_now("verify", "prefill"), backlog, ArbiterRules(2)) == "verify"
    assert choose_lane(just_now("prefill"), backlog, ArbiterRules(2)) == "prefill"
    assert choose_lane({}, backlog, ArbiterRules(2)) is None


def test_verify_is_promoted_only_when_its_backlog_exceeds_decode_by_more_than_the_margin():
    waiting = just_now("decode", "verify")
    assert choose_lane(waiting, {"decode": 1, "verify": 3}, ArbiterRules(2)) == "decode"  # 3 > 1 + 2 is false
    assert choose_lane(waiting, {"decode": 1, "verify": 4}, ArbiterRules(2)) == "verify"
    assert choose_lane(waiting, {"decode": 0, "verify": 1}, ArbiterRules(0)) == "verify"


def test_a_lane_waiting_too_long_runs_next_whatever_its_priority():
    waiting = {"decode": 10.0, "prefill": 10.0 - STARVATION_S - 0.1}
    assert choose_lane(waiting, {"decode": 4}, ArbiterRules(2), now=10.0) == "prefill"
    assert choose_lane(waiting, {"decode": 4}, ArbiterRules(2), now=10.0 - 0.2) == "decode"  # not starved yet


def test_a_prefill_passed_over_for_the_rules_turns_runs_next_and_waits_by_priority_before_that():
    waiting = just_now("decode", "verify", "prefill")
    backlog = {"decode": 3, "verify": 0, "prefill": 1}
    rules = ArbiterRules(2, prefill_after=2)
    assert choose_lane(waiting, backlog, rules, passed={"decode": 0, "verify": 0, "prefill": 1}) == "decode"
    assert choose_lane(waiting, backlog, rules, passed={"decode": 0, "verify": 0, "prefill": 2}) == "prefill"
    assert choose_lane(waiting, backlog, rules) == "decode"  # nothing passed over yet
    off = ArbiterRules(2, prefill_after=None)  # only the time-based starvation rule
    assert choose_lane(waiting, backlog, off, passed={"prefill": 50}) == "decode"
    assert choose_lane(just_now("decode", "verify"), backlog, rules, passed={"verify": 9}) == "decode"


def grant_order(
    rules: ArbiterRules,
    holder: str = "prefill",
    waiters: tuple[str, ...] = ("prefill", "verify", "decode"),
    earlier: tuple[str, ...] = (),
) -> list[str]:
    """The order one slot goes to ``waiters`` that all wait while ``holder`` holds it, after ``earlier`` turns."""
    arbiter = LaneArbiter(slots=1, rules=rules, backlog=lambda: {"decode": 1, "verify": 0, "prefill": 1})
    for lane in earlier:
        with arbiter.turn(lane):
            pass
    order: list[str] = []
    release = threading.Event()

    def hold():
        with arbiter.turn(holder):
            order.append(f"{holder}-first")
            release.wait(30)

    def worker(name):
        with arbiter.turn(name):
            order.append(name)

    first = threading.Thread(target=hold)
    first.start()
    assert wait_until(lambda: order == [f"{holder}-first"], timeout=30)
    threads = [threading.Thread(target=worker, args=(n,)) for n in waiters]
    for t in threads:
        t.start()
    assert wait_until(lambda: len(arbiter._waiting) == len(waiters), timeout=30)  # all wait for the slot
    release.set()
    for t in [first, *threads]:
        t.join(30)
    return order


def test_arbiter_grants_the_single_slot_by_priority():
    assert grant_order(ArbiterRules(2)) == ["prefill-first", "decode", "verify", "prefill"]


def test_arbiter_counts_the_turns_a_waiting_prefill_is_passed_over():
    # decode's turn passes prefill over once: with prefill_after=1 it goes before verify
    assert grant_order(ArbiterRules(2, prefill_after=1)) == ["prefill-first", "decode", "prefill", "verify"]
    assert grant_order(ArbiterRules(2, prefill_after=2)) == ["prefill-first", "decode", "verify", "prefill"]


def test_arbiter_counts_a_prefills_passes_from_its_last_turn_not_from_when_it_began_waiting():
    # prefill, then decode, then verify holding the slot while decode and prefill wait: two turns went to other
    # lanes since prefill's last (decode's and verify's), so with prefill_after=1 it goes before decode; without
    # the rule decode's priority wins
    waiters, earlier = ("decode", "prefill"), ("prefill", "decode")
    with_rule = grant_order(ArbiterRules(2, prefill_after=1), "verify", waiters, earlier)
    assert with_rule == ["verify-first", "prefill", "decode"]
    assert grant_order(ArbiterRules(2, prefill_after=None), "verify", waiters, earlier) == [
        "verify-first", "decode", "prefill"
    ]


def test_handoff_orders_consumer_stream_after_producer_event(fake_cuda):  # noqa: F811
    producer = LaneStream(torch.device("cpu"), lane="prefill")
    consumer = LaneStream(torch.device("cpu"), lane="decode")
    with producer.activate():
        made = torch.ones(3) * 2  # two kernels on the producer's stream
        event = producer.record()
    assert consumer.stream.clock.get(producer.stream.name, 0) == 0
    consumer.wait(event)
    assert consumer.stream.clock[producer.stream.name] == producer.stream.clock[producer.stream.name] == 2
    with consumer.activate():
        made.sum()
    assert fake_cuda.findings == []


def test_cpu_lane_stream_is_a_no_op():
    lane = LaneStream(torch.device("cpu"))
    with lane.activate():
        assert lane.record() is None
    lane.wait(None)
    assert lane.stream is None


def test_a_tensor_dropped_by_a_lane_is_kept_for_that_lanes_stream(fake_cuda):  # noqa: F811
    producer = LaneStream(torch.device("cpu"), lane="decode")
    consumer = LaneStream(torch.device("cpu"), lane="verify")
    with producer.activate():
        handed = torch.ones(2)
        keep_for_current_stream(handed)
    with consumer.activate():
        keep_for_current_stream(handed, None)  # None: nothing
    recorded = {m.allocated_on: m.recorded for m in fake_cuda.storages.values() if m.allocated_on}
    assert recorded == {"s1": {"s1", "s2"}}


def test_pdv_marks_its_draft_blocks_after_verification_and_returns_every_kv_block(tiny_pair, monkeypatch):
    from engine.config import ControllerConfig, EngineConfig, SamplingParams
    from engine.request import Request
    from engine.schedulers import pipeline
    from engine.schedulers.registry import make_engine

    kept = []

    def recording(*tensors):
        kept.append(tensors)

    monkeypatch.setattr(pipeline, "keep_for_current_stream", recording)
    free = (tiny_pair.verifier.pool.free_blocks, tiny_pair.draft.pool.free_blocks)
    from tests.support.pdv_modes import count_modes

    eng = make_engine(
        "pdv",
        tiny_pair,
        EngineConfig(drafter="model", controller=ControllerConfig(kind="fixed"), hybrid_threshold=None),
    )
    modes = count_modes(eng)
    eng.start()
    reqs = [eng.submit(Request(f"k{i}", [1, 2, 3 + i], SamplingParams(max_new_tokens=9))) for i in range(3)]
    assert all(r.done.wait(60) for r in reqs)
    eng.stop()
    blocks = [t for t in kept if len(t) == 5]  # DraftBlock.tensors(): tokens, probs and the sampling rows
    assert len(blocks) == modes.pipelined_blocks > 0
    # every request's verifier and draft store went back to its pool (fenced on CUDA: tests/engine/test_devices.py)
    assert (tiny_pair.verifier.pool.free_blocks, tiny_pair.draft.pool.free_blocks) == free


def test_decode_and_verify_streams_outrank_the_prefill_stream(fake_cuda):  # noqa: F811
    lanes = ("prefill", "decode", "verify")
    streams = {lane: LaneStream(torch.device("cpu"), lane=lane) for lane in lanes}
    assert streams["decode"].stream.priority == streams["verify"].stream.priority < streams["prefill"].stream.priority
