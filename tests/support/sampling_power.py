"""The power of a pooled chi-square goodness-of-fit test against every alternative a stated distance away, and
the sample size that gives a wanted power.

The test (``tests.support.sampling_reference.chisquare_pvalue``) pools the bins
whose expected count under the null ``p`` is below 5 and rejects when the
statistic passes chi2's ``1 - alpha`` quantile with ``df = bins - 1``. Samples
following ``a`` give, in the usual approximation, a noncentral chi-square with
``lambda = n * sum_bins (a - p)^2 / p``. By Cauchy-Schwarz,
``(sum |a - p|)^2 <= sum (a - p)^2 / p * sum p``, so every ``a`` whose total-
variation distance from ``p`` over the test's bins is at least ``delta`` has
``lambda >= 4 n delta^2``; the power is increasing in lambda, so

    power >= P(ncx2(df, 4 n delta^2) > chi2.isf(alpha, df))

for all of them at once (with equality for two bins, where the bound is tight).
Pooling can only hide a difference inside the pooled bin, so ``delta`` is the
distance the test sees: over the tokens the null expects at least 5 times,
and the rest taken together.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import chi2, ncx2

from tests.support.sampling_reference import pooled


def pooled_df(null: np.ndarray, trials: int) -> int:
    """Degrees of freedom of the pooled test of ``trials`` samples against ``null``."""
    bins = pooled(null, trials)
    return int((np.bincount(bins, null) > 0).sum()) - 1


def power_at_distance(null: np.ndarray, trials: int, delta: float, alpha: float) -> float:
    """The least power of the pooled chi-square test at level ``alpha`` over every alternative at total-variation
    distance ``delta`` (or more) from ``null``, with ``trials`` samples (the bound in the module docstring)."""
    df = pooled_df(null, trials)
    return float(ncx2.sf(chi2.isf(alpha, df), df, 4 * trials * delta**2))


def trials_for_power(
    null: np.ndarray, delta: float, alpha: float, target: float = 0.9, step: int = 100, most: int = 20_000
) -> int:
    """The fewest trials, in multiples of ``step``, whose ``power_at_distance`` reaches ``target`` (pooling makes
    the power not quite monotone in the trials, hence a scan). Raises if ``most`` trials do not reach it."""
    for trials in range(step, most + 1, step):
        if power_at_distance(null, trials, delta, alpha) >= target:
            return trials
    raise ValueError(f"{most} trials do not reach power {target} at distance {delta}, alpha {alpha}")
