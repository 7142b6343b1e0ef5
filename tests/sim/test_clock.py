"""The virtual clock runs events in time order and wakes a waiting dispatch when a request finishes."""

from __future__ import annotations

import pytest

from sim.clock import EventLoop, SimulationStalled, VirtualClock


def test_events_run_in_time_order_and_ties_in_the_order_they_were_scheduled():
    loop, seen = EventLoop(), []
    loop.at(2.0, lambda: seen.append(("b", loop.now)))
    loop.at(1.0, lambda: seen.append(("a", loop.now)))
    loop.at(2.0, lambda: seen.append(("c", loop.now)))
    loop.run_until(5.0)
    assert seen == [("a", 1.0), ("b", 2.0), ("c", 2.0)] and loop.now == 5.0


def test_run_until_leaves_later_events_queued():
    loop, seen = EventLoop(), []
    loop.at(1.0, lambda: seen.append(1))
    loop.at(3.0, lambda: seen.append(3))
    loop.run_until(2.0)
    assert seen == [1] and loop.now == 2.0 and loop.next_time() == 3.0


def test_an_event_is_never_scheduled_in_the_past():
    loop, seen = EventLoop(), []
    loop.run_until(4.0)
    loop.at(1.0, lambda: seen.append(loop.now))
    loop.run_until(10.0)
    assert seen == [4.0]


def test_a_wait_ends_at_the_finish_that_wakes_it():
    loop = EventLoop()
    clock = VirtualClock(loop)
    loop.at(0.03, clock.wake)
    loop.at(0.05, lambda: None)
    clock.wait(0.1)
    assert clock.now() == pytest.approx(0.03)
    clock.wait(0.1)
    assert clock.now() == pytest.approx(0.13)


def test_waiting_on_requests_with_nothing_left_to_run_is_a_stall_not_a_hang():
    clock = VirtualClock(EventLoop(), pending=lambda: True)
    with pytest.raises(SimulationStalled):
        clock.wait(0.1)
