"""The fake CUDA backend finds what real CUDA would get wrong: per-thread streams, unordered accesses, early frees.

Each hazard is shown both ways: the code with its wait (or ``record_stream``)
passes, the same code without it is reported.
"""

import threading

import torch

from engine.devices import LaneStream, keep_for_current_stream
from engine.transfers import STAGING_BYTES, staging_buffer, upload
from tests.support.fake_cuda import FakeCuda, Hazard, fake_cuda  # noqa: F401 - fake_cuda is a fixture
from tests.support.serve import wait_until

CPU = torch.device("cpu")


def test_each_thread_has_its_own_current_stream(fake_cuda):  # noqa: F811
    lanes = {name: LaneStream(CPU, lane=name) for name in ("prefill", "decode")}
    seen, both_inside, leave = {}, threading.Barrier(2), threading.Event()

    def lane(name):
        with lanes[name].activate():
            both_inside.wait(30)  # each thread is inside its own stream while the other is inside its own
            seen[name] = fake_cuda.current_stream()
            leave.wait(30)

    threads = [threading.Thread(target=lane, args=(n,)) for n in lanes]
    for t in threads:
        t.start()
    assert wait_until(lambda: len(seen) == 2, timeout=30)
    leave.set()
    for t in threads:
        t.join(30)
    assert seen == {name: lanes[name].stream for name in lanes}
    assert fake_cuda.current_stream() is fake_cuda.default  # this thread never entered one


def _hand_over(cuda: FakeCuda, wait: bool) -> None:
    """The producer writes a tensor on its stream, the consumer reads it on its own, with or without the wait."""
    producer, consumer = LaneStream(CPU, lane="decode"), LaneStream(CPU, lane="verify")
    with producer.activate():
        made = torch.arange(4) * 2
        event = producer.record()
    if wait:
        consumer.wait(event)
    with consumer.activate():
        made.sum()
        keep_for_current_stream(made)


def test_a_read_after_the_producers_event_is_ordered(fake_cuda):  # noqa: F811
    _hand_over(fake_cuda, wait=True)
    assert fake_cuda.findings == []


def test_a_read_without_waiting_for_the_producer_is_reported(fake_cuda):  # noqa: F811
    _hand_over(fake_cuda, wait=False)
    assert [f.hazard for f in fake_cuda.findings] == [Hazard.UNORDERED]
    assert fake_cuda.findings[0].other == "s1"  # the producer's stream


def _use_elsewhere_and_drop(cuda: FakeCuda, record: bool) -> None:
    producer, consumer = LaneStream(CPU, lane="decode"), LaneStream(CPU, lane="verify")
    with producer.activate():
        made = torch.ones(8) + 1
        consumer.wait(producer.record())
    with consumer.activate():
        made.mul_(3)
        if record:
            keep_for_current_stream(made)
    del made  # the allocator may hand it to the producer's next allocation at once


def test_memory_another_stream_used_must_be_recorded_for_it_before_it_is_freed(fake_cuda):  # noqa: F811
    _use_elsewhere_and_drop(fake_cuda, record=True)
    assert fake_cuda.findings == []
    _use_elsewhere_and_drop(fake_cuda, record=False)
    assert [(f.hazard, f.other) for f in fake_cuda.findings] == [(Hazard.FREED_IN_USE, "s4")]


def test_a_blocking_read_back_makes_the_work_before_it_done(fake_cuda):  # noqa: F811
    producer, consumer = LaneStream(CPU, lane="decode"), LaneStream(CPU, lane="verify")
    with producer.activate():
        made = torch.arange(3) + 1
        made.to("cpu", copy=True).tolist()  # the host waited for the producer's stream
    with consumer.activate():
        made.sum()
    assert fake_cuda.findings == []


def test_a_lanes_uploads_reuse_one_pinned_buffer(fake_cuda):  # noqa: F811
    lane = LaneStream(CPU, lane="decode")
    with lane.activate():
        for step in range(50):
            assert upload([step, step + 1, step + 2], CPU).tolist() == [step, step + 1, step + 2]
            assert upload([0.5] * 3, CPU, torch.float32).tolist() == [0.5] * 3
    assert fake_cuda.pinned == 1
    assert fake_cuda.findings == []


def test_the_staging_ring_waits_for_a_copy_still_reading_a_region_before_rewriting_it(fake_cuda):  # noqa: F811
    lane = LaneStream(CPU, lane="decode")
    values = list(range(STAGING_BYTES // 8 // 4))  # a quarter of the ring per upload
    with lane.activate():
        for _ in range(4):
            upload(values, CPU)
        assert fake_cuda.host_waits == 0  # the ring is not full yet
        upload(values, CPU)  # wraps onto the first copy, which no host wait has seen finish
        assert fake_cuda.host_waits == 1
        upload(values, CPU).to("cpu", copy=True).tolist()  # the step's read-back: every copy before it is done
        before = fake_cuda.host_waits
        for _ in range(4):
            upload(values, CPU)
        assert fake_cuda.host_waits == before  # regions whose copies are done are reused without a wait
    assert len(staging_buffer(fake_cuda, CPU).in_flight) <= 4
