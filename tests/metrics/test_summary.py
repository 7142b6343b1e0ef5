"""Run summary: percentiles, throughput, acceptance and goodput on hand-made runs."""

from __future__ import annotations

import numpy as np
import pytest

from engine.request import StepRecord
from metrics.request_metrics import RequestMetrics
from metrics.run_key import RunKey
from metrics.summary import SLO, percentile, position_acceptance, summarize

KEY = RunKey("run-1", "pdv", 4, None)


def metric(
    rid: str,
    ttft: float | None,
    tpot: float | None,
    e2e: float | None = 100.0,
    out: int = 10,
    status: str = "ok",
    itl: tuple[float, ...] = (),
    drafted: int = 0,
    accepted: int = 0,
    steps: int = 0,
) -> RequestMetrics:
    return RequestMetrics(rid, status, None, 5, out, 0.0, 0.0, 0.0, ttft, tpot, e2e, 0.0, itl, drafted, accepted, steps)


def test_percentile_interpolates_linearly_between_ranks():
    values = [10.0, 20.0, 30.0, 40.0]
    # rank = q/100 * (n - 1): p50 -> 1.5 -> 25; p95 -> 2.85 -> 38.5; p99 -> 2.97 -> 39.7
    assert percentile(values, 50) == pytest.approx(25.0)
    assert percentile(values, 95) == pytest.approx(38.5)
    assert percentile(values, 99) == pytest.approx(39.7)
    assert percentile([], 50) is None


def test_throughput_and_percentiles_count_completed_requests_only():
    ms = [
        metric("a", 10.0, 1.0, e2e=20.0, out=10, itl=(1.0, 0.0)),
        metric("b", 30.0, 3.0, e2e=60.0, out=30, itl=(5.0,)),
        metric("c", 999.0, 99.0, e2e=999.0, out=50, status="cancelled", itl=(500.0,)),
        metric("d", None, None, e2e=None, out=0, status="rejected"),
    ]
    s = summarize(KEY, ms, duration_s=2.0)
    assert (s.num_requests, s.completed, s.failed) == (4, 2, 2)
    assert s.output_tok_s == pytest.approx(40 / 2.0)
    assert s.req_s == pytest.approx(1.0)
    assert s.ttft_p50_ms == pytest.approx(20.0)
    assert s.tpot_p99_ms == pytest.approx(np.percentile([1.0, 3.0], 99))
    assert s.e2e_p95_ms == pytest.approx(58.0)
    assert s.itl_p99_ms == pytest.approx(np.percentile([1.0, 0.0, 5.0], 99))
    assert (s.run_id, s.engine, s.concurrency, s.request_rate) == ("run-1", "pdv", 4, None)


def test_acceptance_rate_and_mean_acceptance_length_include_the_bonus_token():
    ms = [
        metric("a", 1.0, 1.0, drafted=8, accepted=6, steps=2),
        metric("b", 1.0, 1.0, drafted=4, accepted=0, steps=1),
    ]
    s = summarize(KEY, ms, duration_s=1.0)
    assert s.acceptance_rate == pytest.approx(6 / 12)
    assert s.mean_acceptance_length == pytest.approx(1 + 6 / 3)


def test_acceptance_is_undefined_without_speculation():
    s = summarize(KEY, [metric("a", 1.0, 1.0)], duration_s=1.0)
    assert s.acceptance_rate is None and s.mean_acceptance_length is None


def test_goodput_counts_requests_meeting_every_slo():
    ms = [
        metric("ok-both", ttft=100.0, tpot=20.0),
        metric("slow-first", ttft=300.0, tpot=20.0),
        metric("slow-tokens", ttft=100.0, tpot=60.0),
        metric("one-token", ttft=150.0, tpot=None, out=1),  # no TPOT: meets the TPOT SLO, as in vLLM
        metric("edge", ttft=200.0, tpot=50.0),  # equal to the SLO is within it
        metric("failed", ttft=10.0, tpot=1.0, status="failed"),
    ]
    slo = SLO(ttft_ms=200.0, tpot_ms=50.0)
    s = summarize(KEY, ms, duration_s=4.0, slo=slo)
    assert s.goodput_req_s == pytest.approx(3 / 4.0)
    only_ttft = summarize(KEY, ms, duration_s=4.0, slo=SLO(ttft_ms=200.0))
    assert only_ttft.goodput_req_s == pytest.approx(4 / 4.0)
    assert summarize(KEY, ms, duration_s=4.0).goodput_req_s is None


def test_slo_must_be_positive():
    with pytest.raises(ValueError, match="TTFT SLO"):
        SLO(ttft_ms=0)


def test_position_acceptance_conditions_on_the_position_being_drafted():
    steps = [
        [StepRecord(3, 3), StepRecord(3, 1)],
        [StepRecord(2, 0), StepRecord(0, 0)],
    ]
    pos = position_acceptance(steps)
    assert [(p.position, p.drafted, p.accepted) for p in pos] == [(1, 3, 2), (2, 3, 1), (3, 2, 1)]
    assert pos[0].rate == pytest.approx(2 / 3)
    assert position_acceptance([]) == ()


def test_acceptance_per_draft_step_follows_vllm():
    # vLLM: acceptance at position k = accepted at k / draft steps; a step that drafted nothing is no draft
    steps = [[StepRecord(4, 2), StepRecord(0, 0), StepRecord(1, 1)], [StepRecord(4, 4)]]
    pos = position_acceptance(steps)
    assert {p.drafts for p in pos} == {3}
    assert [p.per_draft for p in pos] == pytest.approx([3 / 3, 2 / 3, 1 / 3, 1 / 3])
    accepted = sum(s.accepted for run in steps for s in run)
    assert 1 + sum(p.per_draft for p in pos) == pytest.approx(1 + accepted / 3)  # vLLM's mean acceptance length


def test_zero_duration_gives_undefined_rates_not_infinities():
    s = summarize(KEY, [], duration_s=0.0)
    assert s.output_tok_s is None and s.req_s is None and s.ttft_p50_ms is None
