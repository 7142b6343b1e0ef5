"""Rounds: the run orders, paired ratios per round, and both kinds of interval, against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics.rounds import (
    IntervalKind,
    RatioInterval,
    interval,
    paired_ratios,
    ratio_intervals,
    repeat_half_width,
    repeat_rank,
    rotated,
    round_orders,
)


def test_each_round_starts_with_the_next_competitor_in_the_williams_order():
    orders = ["".join(o) for o in round_orders("ABCD", 5)]
    assert orders == ["ABDC", "BCAD", "CDBA", "DACB", "ABDC"]
    assert ["".join(o) for o in round_orders("ABC", 6)] == ["ABC", "BCA", "CAB", "CBA", "ACB", "BAC"]
    assert round_orders("AB", 3) == [list("AB"), list("BA"), list("AB")]
    assert rotated(["ar"], 3) == ["ar"]
    assert rotated([], 2) == []


@pytest.mark.parametrize("n", range(2, 10))
def test_over_a_period_each_competitor_runs_in_every_place_and_after_every_other_equally_often(n):
    from collections import Counter

    items = [f"c{i}" for i in range(n)]
    period = 2 * n if n % 2 else n
    orders = round_orders(items, period)
    assert all(sorted(o) == sorted(items) for o in orders)
    places = Counter((place, c) for o in orders for place, c in enumerate(o))
    assert set(places.values()) == {period // n} and len(places) == n * n
    follows = Counter(pair for o in orders for pair in zip(o, o[1:], strict=False))
    # every ordered pair of different competitors, each as often: what a run leaves behind falls on all alike
    assert len(follows) == n * (n - 1) and set(follows.values()) == {period // n}


def test_every_competitor_runs_first_once_in_as_many_rounds_as_competitors():
    orders = round_orders(["ar", "baseline", "pd", "pdv"], 4)
    assert sorted(o[0] for o in orders) == ["ar", "baseline", "pd", "pdv"]
    assert sorted(o[-1] for o in orders) == ["ar", "baseline", "pd", "pdv"]


def test_round_orders_refuse_zero_rounds():
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        round_orders("AB", 0)


def test_ratios_divide_by_the_reference_of_the_same_round():
    rounds = [
        {"ar": 20.0, "pdv": 30.0},  # 1.5
        {"ar": 10.0, "pdv": 12.0},  # 1.2: a slow round for both, the ratio stays near
        {"ar": 40.0, "pdv": 44.0},  # 1.1
    ]
    ratios = paired_ratios(rounds, "ar")
    assert ratios["pdv"] == pytest.approx([1.5, 1.2, 1.1])
    assert ratios["ar"] == [1.0, 1.0, 1.0]


def test_a_round_without_a_reference_figure_gives_no_ratio():
    rounds = [{"ar": 20.0, "pd": 10.0}, {"ar": None, "pd": 12.0}, {"ar": 0.0, "pd": 5.0}, {"pd": 1.0}, {"ar": 8.0}]
    assert paired_ratios(rounds, "ar") == {"ar": [1.0, 1.0], "pd": [0.5]}


def test_interval_is_the_median_with_the_exact_min_and_max():
    r = interval([1.5, 1.2, 1.1])
    assert (r.median, r.lo, r.hi, r.rounds) == (1.2, 1.1, 1.5, 3)
    even = interval([0.8, 1.0, 1.4, 0.9])
    assert (even.median, even.lo, even.hi) == (pytest.approx(0.95), 0.8, 1.4)
    assert interval([]) is None


def test_repeat_run_interval_is_a_95_percent_prediction_interval_around_the_median():
    # 5 rounds with log ratios -0.1, 0, 0.1, 0, 0: median 1.0, s = sqrt((0.01 + 0.01) / 4) = 0.070711;
    # t(0.975, 4) = 2.776; sqrt(pi / 5) = 0.792665; half width 2.776 * 0.070711 * 0.792665 = 0.155597 in log,
    # so exp(-0.155597) = 0.855905 to exp(0.155597) = 1.168354, wider than the min–max (0.904837–1.105171)
    ratios = [math.exp(-0.1), 1.0, math.exp(0.1), 1.0, 1.0]
    assert repeat_half_width(ratios) == pytest.approx(0.155597, abs=1e-5)
    r = interval(ratios, IntervalKind.REPEAT_RUN)
    assert (r.median, r.rounds) == (1.0, 5)
    assert (r.lo, r.hi) == pytest.approx((0.855905, 1.168354), abs=1e-5)
    assert interval(ratios) == RatioInterval(1.0, min(ratios), max(ratios), 5)  # the min–max stays the default


def test_repeat_run_interval_keeps_the_min_max_where_that_is_wider():
    # 10 rounds, one at 2.0: log ratios nine 0 and ln 2 = 0.693147, s = sqrt(0.1 * 0.480453 * 10 / 9) = 0.219192;
    # t(0.975, 9) = 2.262; half width 2.262 * 0.219192 * sqrt(pi / 10) = 0.277903: below, exp(-0.277903) =
    # 0.757370; above, the round at 2.0 (exp(0.277903) = 1.320 is narrower)
    r = interval([1.0] * 9 + [2.0], IntervalKind.REPEAT_RUN)
    assert (r.median, r.hi) == (1.0, 2.0)
    assert r.lo == pytest.approx(0.757370, abs=1e-5)


@pytest.mark.parametrize("n", [3, 5, 7, 8, 13, 19])
def test_the_rank_interval_holds_a_repeat_runs_median_as_often_as_counted(n):
    # by simulation, independent of the count: two runs of n i.i.d. rounds; how often does the second run's
    # median fall within the first run's k-th smallest to k-th largest? The docstring's exact 3/5, 5/6, 0.930
    # for k = 1 at 3, 5, 7 rounds; at least 95 % at repeat_rank(n) where any k reaches it, below 95 % one
    # rank further in
    rng = np.random.default_rng(n)
    trials = 20_000

    def held(k: int) -> float:
        first = np.sort(rng.random((trials, n)), axis=1)
        repeat = np.median(rng.random((trials, n)), axis=1)
        return float(np.mean((first[:, k - 1] <= repeat) & (repeat <= first[:, -k])))

    k = repeat_rank(n)
    assert k == {3: 1, 5: 1, 7: 1, 8: 1, 13: 2, 19: 4}[n]
    exact = {3: 3 / 5, 5: 5 / 6, 7: 0.930}
    if n in exact:
        assert held(1) == pytest.approx(exact[n], abs=0.01)
    if n >= 9:  # from 9 rounds on the min–max reaches 95 %; below, it is the widest there is and falls short
        assert held(k) >= 0.95 - 0.005  # three standard errors of 20,000 trials at 0.95 is 0.005
    if k + 1 <= (n + 1) // 2:
        assert held(k + 1) < 0.95


def test_repeat_run_interval_of_many_rounds_drops_the_outermost():
    # 19 rounds of log ratio ±0.1 around 0 with rounds at 0.8 and 1.25: the rank interval is the 4th smallest
    # to the 4th largest (repeat_rank(19) = 4), exp(∓0.1), so the outer rounds no longer set it; the prediction
    # interval is narrower still (s = 0.1149, half width 2.101 · 0.1149 · √(π / 19) = 0.0981)
    logs = [-0.1] * 8 + [0.0] * 3 + [0.1] * 6
    ratios = [math.exp(x) for x in logs] + [0.8, 1.25]
    assert repeat_half_width(ratios) == pytest.approx(0.0981, abs=1e-4)
    r = interval(ratios, IntervalKind.REPEAT_RUN)
    assert (r.median, r.rounds) == (1.0, 19)
    assert (r.lo, r.hi) == pytest.approx((math.exp(-0.1), math.exp(0.1)))
    assert interval(ratios[-12:], IntervalKind.REPEAT_RUN).lo == 0.8  # 12 rounds: still the min–max


def test_repeat_run_interval_of_one_round_or_equal_rounds_is_the_point():
    assert interval([1.2], IntervalKind.REPEAT_RUN) == RatioInterval(1.2, 1.2, 1.2, 1)
    assert interval([0.9, 0.9, 0.9], IntervalKind.REPEAT_RUN) == RatioInterval(0.9, 0.9, 0.9, 3)


def test_intervals_clear_only_when_they_do_not_touch():
    a, b = RatioInterval(1.3, 1.2, 1.4, 3), RatioInterval(1.0, 0.9, 1.2, 3)
    assert not a.clears_above(b) and a.overlaps(b)  # touching at 1.2 is not clearing
    c = RatioInterval(1.0, 0.9, 1.19, 3)
    assert a.clears_above(c) and not c.clears_above(a) and not a.overlaps(c)


def test_interval_text_names_a_single_round():
    assert RatioInterval(1.234, 1.1, 1.31, 3).text() == "1.23× (1.10–1.31)"
    assert RatioInterval(1.234, 1.1, 1.31, 3).text("AR") == "1.23× AR (1.10–1.31)"
    assert RatioInterval(0.9, 0.9, 0.9, 1).text() == "0.90× (1 round)"


def test_an_interval_must_hold_its_median():
    with pytest.raises(ValueError, match="not an interval"):
        RatioInterval(2.0, 1.0, 1.5, 3)


def test_ratio_intervals_of_every_label():
    rounds = [{"ar": 10.0, "b": 5.0}, {"ar": 10.0, "b": 15.0}, {"ar": 20.0, "b": 20.0}]
    out = ratio_intervals(rounds, "ar")
    assert (out["b"].median, out["b"].lo, out["b"].hi) == (1.0, 0.5, 1.5)
    assert (out["ar"].median, out["ar"].lo, out["ar"].hi) == (1.0, 1.0, 1.0)


def test_the_t_quantiles_are_students_at_every_tabulated_degree_of_freedom():
    from scipy import stats

    from metrics.rounds import _T975

    assert len(_T975) == 30
    for dof, t in enumerate(_T975, start=1):
        assert t == pytest.approx(stats.t.ppf(0.975, dof), abs=5e-4), dof
