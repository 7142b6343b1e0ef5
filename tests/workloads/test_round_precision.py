"""Rounds added until the intervals are narrow enough, within a budget; a round cut short never enters a ratio."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.config import SamplingParams
from metrics.rounds import RatioInterval
from tests.workloads.test_replay_fake import FakePair, factory, trace
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.rounds import LoadPointComparison, Precision
from workloads.drivers.run_spec import RunHooks, RunSettings
from workloads.drivers.sweep import SweepPlan, run_sweep

SETTINGS = RunSettings(params=SamplingParams(max_new_tokens=6), warmup=0)


def _sweep(precision: Precision | None, rounds: int, requests: int = 4, special=None):
    seen: list[LoadPointComparison] = []
    plan = SweepPlan(("ar", "baseline"), (ClosedLoop(2),), SETTINGS, (), rounds, precision)
    results = run_sweep(FakePair(), trace(requests, special), plan, None, None, RunHooks(engine_factory=factory()),
                        seen.append)  # fmt: skip
    return results, seen[-1]


class _AlwaysPrecise(Precision):
    def reached(self, point: LoadPointComparison) -> bool:
        return True


def test_a_precision_that_is_reached_ends_the_rounds_at_its_minimum_and_says_why():
    results, final = _sweep(_AlwaysPrecise(within=0.1, min_rounds=5), rounds=12)
    assert final.final and final.rounds_done == 5 and len(results) == 10
    assert final.ended_by == "every interval within ±10% after 5 rounds"


def _point(*ratios: RatioInterval) -> LoadPointComparison:
    rows = [SimpleNamespace(summary=SimpleNamespace(engine="ar"), ratios={"tok_s": RatioInterval(1, 1, 1, 5)})]
    rows += [SimpleNamespace(summary=SimpleNamespace(engine=f"e{i}"), ratios={"tok_s": r})
             for i, r in enumerate(ratios)]  # fmt: skip
    return SimpleNamespace(comparison=SimpleNamespace(rows=rows))  # type: ignore[return-value]


def test_precision_is_reached_only_when_every_engine_is_within_the_half_width_over_enough_rounds():
    precision = Precision(within=0.1, min_rounds=5)
    assert precision.reached(_point(RatioInterval(1.2, 1.09, 1.31, 5), RatioInterval(0.8, 0.73, 0.87, 6)))
    assert not precision.reached(_point(RatioInterval(1.2, 1.09, 1.31, 5), RatioInterval(0.8, 0.70, 0.87, 6)))
    assert not precision.reached(_point(RatioInterval(1.0, 0.99, 1.01, 4)))  # too few rounds
    assert not precision.reached(_point(None))  # an engine without a ratio yet


def test_a_precision_never_reached_runs_every_planned_round():
    results, final = _sweep(Precision(within=1e-9, min_rounds=3), rounds=4)
    assert final.rounds_done == 4 and len(results) == 8 and final.ended_by == ""


def test_a_spent_budget_ends_the_rounds_before_one_that_would_pass_it():
    results, final = _sweep(Precision(within=1e-9, min_rounds=3, budget_s=1e-6), rounds=12)
    assert final.rounds_done == 3 and len(results) == 6
    assert final.ended_by.startswith("another round would pass the 0 s budget")


def test_a_precision_is_refused_with_fewer_rounds_than_it_starts_with_or_nonsense():
    with pytest.raises(ValueError, match="fewer than the precision's 5"):
        SweepPlan(("ar",), (ClosedLoop(1),), SETTINGS, (), 4, Precision())
    with pytest.raises(ValueError, match="between 0 and 1"):
        Precision(within=0)
    with pytest.raises(ValueError, match="at least 3 rounds"):
        Precision(min_rounds=2)


def test_rounds_with_failed_requests_never_enter_a_ratio_and_the_verdict_says_so():
    _, final = _sweep(None, rounds=3, special={1: "fail"})
    rows = {row.summary.engine: row for row in final.comparison.rows}
    assert rows["baseline"].ratios["tok_s"] is None  # no round went to the end with every request answered
    assert final.verdict_line() == "No verdict yet: no ratio yet for ar, baseline."
