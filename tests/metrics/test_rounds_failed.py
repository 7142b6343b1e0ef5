"""Rounds with nothing to divide: a competitor whose requests all failed (0 tokens/s) in some or every round."""

from __future__ import annotations

import pytest

from metrics.rounds import IntervalKind, paired_ratios, ratio_intervals
from metrics.verdict import verdict


def test_a_round_with_zero_throughput_gives_its_label_no_ratio():
    rounds = [{"ar": 20.0, "llama": 0.0}, {"ar": 10.0, "llama": 5.0}, {"ar": 10.0, "llama": -1.0}]
    assert paired_ratios(rounds, "ar") == {"ar": [1.0, 1.0, 1.0], "llama": [0.5]}


@pytest.mark.parametrize("kind", list(IntervalKind))
def test_a_label_that_never_answered_has_no_interval_and_raises_nothing(kind):
    # every request of every round failed: 0 tokens/s each round (a math domain error on the log scale before)
    rounds = [{"ar": 20.0, "endpoint": 0.0}, {"ar": 21.0, "endpoint": 0.0}, {"ar": 19.0, "endpoint": 0.0}]
    intervals = ratio_intervals(rounds, "ar", kind)
    assert intervals["endpoint"] is None and intervals["ar"].rounds == 3


def test_the_verdict_covers_only_the_rounds_with_a_ratio():
    good = [{"ar": 10.0, "pdv": 13.0}, {"ar": 10.0, "pdv": 12.5}, {"ar": 10.0, "pdv": 13.5}]
    failed = {"ar": 10.0, "pdv": 0.0}
    with_failed = ratio_intervals([*good, failed], "ar", IntervalKind.REPEAT_RUN)
    assert with_failed["pdv"].rounds == 3  # the failed round is left out, not read as a ratio of 0
    assert "over 3 rounds" in verdict(with_failed).line()
    short = ratio_intervals([*good[:2], failed], "ar", IntervalKind.REPEAT_RUN)
    assert verdict(short).line() == "No verdict yet: 2 rounds measured, a verdict needs at least 3."
