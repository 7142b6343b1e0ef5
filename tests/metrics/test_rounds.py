"""Rounds: rotation, paired ratios per round, and the min–max interval, against hand-computed cases."""

from __future__ import annotations

import pytest

from metrics.rounds import RatioInterval, interval, paired_ratios, ratio_intervals, rotated, round_orders


def test_each_round_starts_with_the_next_competitor():
    assert round_orders("ABCD", 5) == [list("ABCD"), list("BCDA"), list("CDAB"), list("DABC"), list("ABCD")]
    assert rotated(["ar"], 3) == ["ar"]
    assert rotated([], 2) == []


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
