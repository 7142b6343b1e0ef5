"""The power helper the engine-level sampling checks size themselves with, against cases known in closed form."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from tests.support.sampling_power import pooled_df, power_at_distance, trials_for_power


def two_sided_z_power(trials: int, delta: float, alpha: float) -> float:
    """A fair coin tested with a two-sided z-test on the heads count, when heads have probability 0.5 + delta:
    the statistic is N(2 delta sqrt(n), 1), so power = Phi(2 delta sqrt(n) - z) + Phi(-2 delta sqrt(n) - z)."""
    shift, z = 2 * delta * math.sqrt(trials), norm.isf(alpha / 2)
    return norm.cdf(shift - z) + norm.cdf(-shift - z)


@pytest.mark.parametrize(("trials", "delta", "alpha"), [(100, 0.1, 0.05), (400, 0.05, 1e-3), (2000, 0.03, 1e-4)])
def test_the_power_of_two_bins_is_the_z_tests(trials, delta, alpha):
    # two bins: chi-square with 1 df is the squared z statistic, and the bound is attained by (0.5 + d, 0.5 - d)
    fair = np.array([0.5, 0.5])
    assert power_at_distance(fair, trials, delta, alpha) == pytest.approx(two_sided_z_power(trials, delta, alpha))


def test_the_power_at_100_coin_flips_is_the_textbook_figure():
    # lambda = 4 * 100 * 0.1^2 = 4: power = Phi(2 - 1.96) + Phi(-2 - 1.96) = 0.516
    assert power_at_distance(np.array([0.5, 0.5]), 100, 0.1, 0.05) == pytest.approx(0.5160, abs=1e-4)


def test_the_trials_for_power_are_the_fewest_that_reach_it():
    # z-test: n = ((z_{alpha/2} + z_{power}) / (2 delta))^2 = ((1.960 + 1.282) / 0.2)^2 = 262.7
    fair = np.array([0.5, 0.5])
    assert trials_for_power(fair, 0.1, 0.05, target=0.9, step=1) == 263
    many = np.full(200, 1 / 200)
    trials = trials_for_power(many, 0.1, 1e-3, target=0.9)
    assert power_at_distance(many, trials, 0.1, 1e-3) >= 0.9 > power_at_distance(many, trials - 100, 0.1, 1e-3)


def test_bins_expected_fewer_than_5_times_are_pooled_into_one():
    null = np.array([0.5, 0.3, 0.1, 0.05, 0.03, 0.02])
    assert pooled_df(null, 100) == 4  # 50, 30, 10, 5 and the pooled 3 + 2
    assert pooled_df(null, 20) == 2  # 10, 6 and the pooled 2 + 1 + 0.6 + 0.4


def test_a_power_out_of_reach_is_refused():
    with pytest.raises(ValueError, match="do not reach power"):
        trials_for_power(np.array([0.5, 0.5]), 0.001, 1e-4, most=1000)
