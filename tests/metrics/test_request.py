"""Per-request metric definitions on hand-computed examples."""

from __future__ import annotations

import pytest

from engine.request import Request, RequestStatus, StepRecord
from metrics.request_metrics import itl_ms, request_metrics, tpot_ms


def finished_request(token_times: list[float], status: RequestStatus = RequestStatus.OK) -> Request:
    """A request with times set by hand: arrived at 10.0, admitted at 10.5."""
    r = Request("r1", [1, 2, 3])
    r.arrival_time = 10.0
    r.admitted_time = 10.5
    r.output_token_ids = list(range(len(token_times)))
    r.token_times = list(token_times)
    r.first_token_time = token_times[0] if token_times else None
    r.finish_time = token_times[-1] if token_times else 10.0
    r.status = status
    r.steps = [StepRecord(4, 3), StepRecord(4, 0)]
    return r


def test_ttft_tpot_e2e_queue_follow_their_definitions():
    # first token 1 s after arrival, then 4 more tokens, the last at 13.0
    m = request_metrics(finished_request([11.0, 11.5, 11.5, 11.5, 13.0]), t0=9.0)
    assert m.ttft_ms == pytest.approx(1000.0)
    assert m.e2e_ms == pytest.approx(3000.0)
    assert m.tpot_ms == pytest.approx((3000.0 - 1000.0) / (5 - 1))  # 500 ms
    assert m.queue_ms == pytest.approx(500.0)
    assert m.arrival_s == pytest.approx(1.0)
    assert m.first_token_s == pytest.approx(2.0)
    assert m.finish_s == pytest.approx(4.0)
    assert (m.prompt_tokens, m.output_tokens) == (3, 5)


def test_tokens_of_one_verify_step_give_zero_gaps_reported_as_they_are():
    m = request_metrics(finished_request([11.0, 11.5, 11.5, 11.5, 13.0]), t0=9.0)
    assert m.itl_ms == pytest.approx((500.0, 0.0, 0.0, 1500.0))


def test_tpot_is_undefined_below_two_tokens():
    m = request_metrics(finished_request([11.0]), t0=10.0)
    assert m.tpot_ms is None
    assert m.itl_ms == ()
    assert m.ttft_ms == pytest.approx(1000.0)
    assert tpot_ms([]) is None and itl_ms([]) == ()


def test_speculation_counters_come_from_the_steps():
    m = request_metrics(finished_request([11.0, 12.0]), t0=10.0)
    assert (m.drafted_tokens, m.accepted_tokens, m.verify_steps) == (8, 3, 2)


def test_rejected_request_has_no_latencies_but_keeps_its_error():
    r = Request("bad", [1])
    r.arrival_time = 5.0
    r.fail(RequestStatus.REJECTED, "prompt too long")
    m = request_metrics(r, t0=5.0)
    assert m.status == "rejected" and m.error == "prompt too long"
    assert m.ttft_ms is None and m.tpot_ms is None and m.queue_ms is None
    assert not m.completed
