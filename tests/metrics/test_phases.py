"""A closed-loop run's arrival phase and drain, on requests with hand-set times."""

from __future__ import annotations

import pytest

from engine.request import Request
from metrics.phases import phases


def request(arrived: float, token_times: list[float]) -> Request:
    r = Request(f"r{arrived}", [1, 2])
    r.arrival_time = arrived
    r.output_token_ids = list(range(len(token_times)))
    r.token_times = list(token_times)
    r.finish_time = token_times[-1]
    return r


def test_lockstep_requests_drain_in_one_step_and_count_only_tokens_before_the_last_arrival():
    # two waves of two: the second arrives at 3.0, when the first ends; both of it end together at 6.0
    wave = [request(0.0, [1.0, 2.0, 3.0 - 1e-9]), request(0.0, [1.0, 2.0, 3.0 - 1e-9])]
    second = [request(3.0, [4.0, 5.0, 6.0]), request(3.0, [4.0, 5.0, 6.0])]
    p = phases(wave + second)
    assert p.arrival_s == pytest.approx(3.0)
    assert p.arrival_tokens == 6
    assert p.arrival_tok_s == pytest.approx(2.0)
    assert p.drain_s == pytest.approx(0.0)


def test_requests_that_end_one_by_one_after_the_last_arrival_drain_from_the_first_end_to_the_last():
    p = phases([request(0.0, [1.0, 2.0]), request(2.5, [3.0, 4.0]), request(2.5, [3.0, 3.5, 7.0])])
    assert p.arrival_tokens == 2  # the first request's; the others' come after 2.5
    assert p.drain_s == pytest.approx(7.0 - 4.0)


def test_a_run_whose_requests_all_arrived_before_any_token_has_no_arrival_rate():
    p = phases([request(1.0, [2.0]), request(1.0, [3.0])])
    assert p.arrival_tok_s is None and p.drain_s == pytest.approx(1.0)
    apart = phases([request(1.0, [2.0]), request(1.001, [3.0])])  # a closed loop's first C, submitted in turn
    assert apart.arrival_tok_s is None


def test_nothing_to_measure_without_arrivals_or_ends():
    assert phases([]) is None
    unarrived = Request("x", [1])
    assert phases([unarrived]) is None
    ended_early = request(5.0, [4.0])  # an end stamped before the last arrival: no drain to measure
    assert phases([ended_early]) is None
