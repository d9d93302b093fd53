"""Confidence intervals and the quantiles behind them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist


def z_for(confidence: float) -> float:
    """The two-sided normal quantile: z such that P(|Z| ≤ z) = confidence."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(*, successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when there is no data."""
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} outside [0, n={n}]")
    z = z_for(confidence)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe_interval(
    *, successes_1: int, n_1: int, successes_2: int, n_2: int, confidence: float = 0.95
) -> tuple[float, float, float]:
    """p₁ − p₂ and its Newcombe hybrid score interval (method 10) from the two Wilson intervals."""
    if n_1 <= 0 or n_2 <= 0:
        raise ValueError(f"both samples need trials, got n_1={n_1}, n_2={n_2}")
    p_1, p_2 = successes_1 / n_1, successes_2 / n_2
    low_1, high_1 = wilson_interval(successes=successes_1, n=n_1, confidence=confidence)
    low_2, high_2 = wilson_interval(successes=successes_2, n=n_2, confidence=confidence)
    difference = p_1 - p_2
    return (
        difference,
        difference - math.hypot(p_1 - low_1, high_2 - p_2),
        difference + math.hypot(high_1 - p_1, p_2 - low_2),
    )


def welch_df(*, first_part: float, n_first: int, second_part: float, n_second: int) -> float:
    """Welch–Satterthwaite degrees of freedom from two samples' variances of the mean (s²/n)."""
    return (first_part + second_part) ** 2 / (first_part**2 / (n_first - 1) + second_part**2 / (n_second - 1))


def clustered_mean_interval(
    *, cluster_means: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float, float]:
    """The mean of equally sized clusters' means, its cluster-robust standard error and a t interval
    with G - 1 degrees of freedom (G clusters): (mean, se, low, high), the bounds clipped to [0, 1].

    Repeated answers to one item are not independent, the items are: the standard error is the
    standard deviation of the per-item means over √G (ddof 1). With equal cluster sizes this is
    exactly the Liang–Zeger cluster-robust standard error of OLS `correct ~ 1` with the usual
    small-sample factor G/(G-1)·(N-1)/(N-K) (statsmodels `cov_type="cluster"`, Cameron & Miller
    2015, §II.C); the t(G-1) reference distribution is what statsmodels uses for clustered errors
    with `use_t=True` (the test checks both against it).
    Every item equally right in every repeat gives se 0 and a zero-width interval; fewer than two
    clusters, the interval (0, 1)."""
    g = len(cluster_means)
    if g == 0:
        return (math.nan, math.nan, 0.0, 1.0)
    mean = math.fsum(cluster_means) / g
    if g < 2:
        return (mean, math.nan, 0.0, 1.0)
    from scipy import stats as scipy_stats

    variance = math.fsum((m - mean) ** 2 for m in cluster_means) / (g - 1)
    se = math.sqrt(variance / g)
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, g - 1)) * se
    return (mean, se, max(0.0, mean - half), min(1.0, mean + half))


def paired_difference_interval(
    *, differences: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """The mean of paired differences (one per unit, e.g. an item's clean minus noisy correctness) and
    its t interval with n - 1 degrees of freedom, not clipped: (mean, low, high). It is the one-sample
    t interval of `scipy.stats.ttest_1samp(differences, 0).confidence_interval()`; for 0/±1
    differences, the Wald interval of two paired proportions with the n - 1 variance. Every difference
    equal gives a zero-width interval; fewer than two units, (mean, -1, 1)."""
    n = len(differences)
    if n == 0:
        return (math.nan, -1.0, 1.0)
    mean = math.fsum(differences) / n
    if n < 2:
        return (mean, -1.0, 1.0)
    from scipy import stats as scipy_stats

    variance = math.fsum((d - mean) ** 2 for d in differences) / (n - 1)
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * math.sqrt(variance / n)
    return (mean, mean - half, mean + half)
