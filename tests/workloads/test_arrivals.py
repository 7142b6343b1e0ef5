"""Arrival policies against an injected clock: rates, burstiness, concurrency caps, cancel."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from workloads.drivers.arrivals import ClosedLoop, OpenLoop, dispatch


class FakeHandle:
    def __init__(self, finish_at: float) -> None:
        self.finish_at = finish_at
        self.done = threading.Event()


class FakeClock:
    """Time moves only when the dispatcher waits; handles finish when their time comes."""

    def __init__(self) -> None:
        self.t = 0.0
        self.handles: list[FakeHandle] = []

    def now(self) -> float:
        return self.t

    def wait(self, timeout: float) -> None:
        self.t += timeout
        for h in self.handles:
            if h.finish_at <= self.t + 1e-12:
                h.done.set()
        self.handles = [h for h in self.handles if not h.done.is_set()]


class Recorder:
    """A fake engine: each request takes ``service_s``; records send times and peak concurrency."""

    def __init__(self, clock: FakeClock, service_s: float) -> None:
        self.clock = clock
        self.service_s = service_s
        self.sent: list[float] = []
        self.peak = 0

    def submit(self, item: int) -> FakeHandle:
        t = self.clock.now()
        self.sent.append(t)
        handle = FakeHandle(t + self.service_s)
        self.clock.handles.append(handle)
        in_flight = sum(not h.done.is_set() for h in self.clock.handles)
        self.peak = max(self.peak, in_flight)
        return handle


def run(policy, n: int, service_s: float = 0.0, cancel: threading.Event | None = None) -> Recorder:
    clock = FakeClock()
    recorder = Recorder(clock, service_s)
    dispatch(list(range(n)), policy, recorder.submit, clock, cancel or threading.Event())
    return recorder


@pytest.mark.parametrize("burstiness", [1.0, 0.25, 4.0])
def test_open_loop_matches_the_mean_rate_and_the_burstiness_cv(burstiness):
    rec = run(OpenLoop(request_rate=10.0, burstiness=burstiness, seed=7), n=4000)
    gaps = np.diff([0.0, *rec.sent])
    assert rec.sent[0] > 0.0  # the first request waits its gap too, as in vLLM
    assert 1.0 / gaps.mean() == pytest.approx(10.0, rel=0.06)
    # Gamma(shape=B) gaps: coefficient of variation 1/sqrt(B)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0 / math.sqrt(burstiness), rel=0.08)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_open_loop_offers_exactly_the_rate_it_names_for_every_seed(seed):
    # the last of n arrivals lands at n / R whatever the draw, so a short sweep point is not offered faster or
    # slower than its label says; only the spacing is random
    offsets = OpenLoop(2.0, 1.0, seed=seed).offsets(8)
    assert offsets[-1] == pytest.approx(4.0)
    assert list(offsets) == sorted(offsets) and offsets[0] > 0


def test_infinite_burstiness_spaces_arrivals_evenly():
    assert OpenLoop(4.0, float("inf")).offsets(4) == pytest.approx((0.25, 0.5, 0.75, 1.0))


def test_open_loop_schedule_is_seeded():
    a = OpenLoop(5.0, 1.0, seed=1).offsets(50)
    assert a == OpenLoop(5.0, 1.0, seed=1).offsets(50)
    assert a != OpenLoop(5.0, 1.0, seed=2).offsets(50)


def test_infinite_rate_sends_everything_at_once():
    rec = run(OpenLoop(float("inf")), n=20, service_s=1.0)
    assert rec.sent == [0.0] * 20


def test_closed_loop_keeps_exactly_c_in_flight():
    rec = run(ClosedLoop(4), n=20, service_s=1.0)
    assert rec.peak == 4
    assert rec.sent[:4] == [0.0] * 4
    # each wave starts when the previous one finishes
    assert rec.sent[4:8] == pytest.approx([1.0] * 4, abs=0.11)
    assert rec.sent[-1] == pytest.approx(4.0, abs=0.5)


def test_max_concurrency_caps_an_open_loop_without_shifting_later_arrivals():
    capped = run(OpenLoop(float("inf"), max_concurrency=3), n=9, service_s=2.0)
    assert capped.peak == 3
    assert capped.sent[3] == pytest.approx(2.0, abs=0.11)
    free = run(OpenLoop(2.0, 1.0, max_concurrency=1000, seed=3), n=50, service_s=0.01)
    assert free.sent == pytest.approx(list(OpenLoop(2.0, 1.0, seed=3).offsets(50)))


def test_cancel_stops_sending():
    cancel = threading.Event()
    clock = FakeClock()
    rec = Recorder(clock, service_s=1.0)

    def submit(item: int) -> FakeHandle:
        if item == 5:
            cancel.set()
        return rec.submit(item)

    sent = dispatch(list(range(100)), ClosedLoop(2), submit, clock, cancel)
    assert len(sent) == 6


@pytest.mark.parametrize(
    "make", [lambda: ClosedLoop(0), lambda: OpenLoop(0.0), lambda: OpenLoop(1.0, burstiness=0.0),
             lambda: OpenLoop(1.0, max_concurrency=0)],
)  # fmt: skip
def test_invalid_policies_are_refused(make):
    with pytest.raises(ValueError):
        make()
