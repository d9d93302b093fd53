"""The quantile ratio with its percentile-bootstrap interval, against scipy's bootstrap called on its
own and against counts made by hand."""

import math

import numpy as np
import pytest
from scipy import stats

from engines.stats.comparisons import (
    FAIL,
    INSUFFICIENT_DATA,
    MARGINAL,
    PASS,
    RatioStatistic,
    quantile_ratio_compare,
)

P95 = RatioStatistic(name="p95", quantile=0.95)
SPEED = RatioStatistic(name="median", quantile=0.5, higher_is_worse=False)


def _arms(*, scale: float, n: int = 400, seed: int = 3):
    rng = np.random.default_rng(seed)
    return list(rng.lognormal(6, 0.4, n) * scale), list(rng.lognormal(6, 0.4, n))


def test_the_interval_and_p_are_scipys_bootstrap_of_the_same_seed():
    candidate, baseline = _arms(scale=1.1)
    result = quantile_ratio_compare(
        candidate=candidate, baseline=baseline, statistic=P95, bar=2.0, min_n=50, metric="latency_p95"
    )

    def ratio(c, b, axis=-1):
        return np.quantile(c, 0.95, axis=axis) / np.quantile(b, 0.95, axis=axis)

    reference = stats.bootstrap(
        (np.array(candidate), np.array(baseline)),
        ratio,
        n_resamples=1000,
        method="percentile",
        vectorized=True,
        batch=100,
        random_state=np.random.default_rng(0),
    )
    assert result.ci_low == pytest.approx(reference.confidence_interval.low, abs=1e-12)
    assert result.ci_high == pytest.approx(reference.confidence_interval.high, abs=1e-12)
    not_worse = int(np.count_nonzero(reference.bootstrap_distribution <= 1))
    assert result.p_value == pytest.approx((not_worse + 1) / 1001, abs=1e-15)
    assert result.difference == pytest.approx(np.quantile(candidate, 0.95) / np.quantile(baseline, 0.95))
    assert result.confidence == 0.95 and result.ci_low < result.difference < result.ci_high


def test_a_candidate_three_times_slower_at_p95_fails_and_a_like_one_passes():
    slow = quantile_ratio_compare(
        candidate=_arms(scale=3.0)[0],
        baseline=_arms(scale=3.0)[1],
        statistic=P95,
        bar=2.0,
        min_n=50,
        metric="m",
    )
    assert slow.verdict == FAIL and slow.exceeds and slow.p_value < 0.01
    like = quantile_ratio_compare(
        candidate=_arms(scale=1.0, seed=4)[0],
        baseline=_arms(scale=1.0)[1],
        statistic=P95,
        bar=2.0,
        min_n=50,
        metric="m",
    )
    assert like.verdict == PASS and not like.exceeds and like.ci_low < 1 < like.ci_high


def test_slower_but_within_the_bar_is_marginal_not_a_rollback():
    result = quantile_ratio_compare(
        candidate=_arms(scale=1.5)[0],
        baseline=_arms(scale=1.5)[1],
        statistic=P95,
        bar=2.0,
        min_n=50,
        metric="m",
    )
    assert result.verdict == MARGINAL and not result.exceeds and result.p_value < 0.05


def test_a_speed_is_worse_when_lower():
    # Tokens per second: the candidate at half the baseline's speed, floor 0.67.
    candidate, baseline = _arms(scale=0.5)
    result = quantile_ratio_compare(
        candidate=candidate,
        baseline=baseline,
        statistic=SPEED,
        bar=0.67,
        min_n=50,
        metric="tokens_per_second",
    )
    assert result.verdict == FAIL and result.difference == pytest.approx(
        float(np.median(candidate) / np.median(baseline))
    )
    faster = quantile_ratio_compare(
        candidate=baseline,
        baseline=candidate,
        statistic=SPEED,
        bar=0.67,
        min_n=50,
        metric="tokens_per_second",
    )
    assert faster.verdict == PASS and faster.p_value == pytest.approx(1.0, abs=0.01)


def test_too_few_samples_or_a_zero_baseline_is_insufficient_never_pass():
    few = quantile_ratio_compare(
        candidate=[1.0] * 5, baseline=[1.0] * 500, statistic=P95, bar=2, min_n=10, metric="m"
    )
    assert few.verdict == INSUFFICIENT_DATA and few.p_value is None
    assert few.reasons[0].params["arm"].code == "candidate" and few.reasons[0].params["count"] == 5
    zero = quantile_ratio_compare(
        candidate=[1.0] * 20, baseline=[0.0] * 20, statistic=P95, bar=2, min_n=10, metric="m"
    )
    assert zero.verdict == INSUFFICIENT_DATA and zero.reasons[0].code == "comparisons.quantile_undefined"


def test_the_same_samples_always_give_the_same_verdict():
    candidate, baseline = _arms(scale=1.9)
    first, again = (
        quantile_ratio_compare(
            candidate=candidate, baseline=baseline, statistic=P95, bar=2.0, min_n=50, metric="m"
        )
        for _ in range(2)
    )
    assert first == again


@pytest.mark.parametrize(
    ("candidate", "bar", "statistic"),
    [([1.0, math.inf], 2.0, P95), ([1.0], 0.0, P95), ([1.0], 2.0, RatioStatistic(name="x", quantile=1.0))],
)
def test_impossible_input_is_a_bug_not_a_verdict(candidate, bar, statistic):
    with pytest.raises(ValueError):
        quantile_ratio_compare(
            candidate=candidate, baseline=[1.0, 2.0], statistic=statistic, bar=bar, min_n=1, metric="m"
        )


def test_a_rates_interval_is_statsmodels_newcombe():
    from statsmodels.stats.proportion import confint_proportions_2indep

    from engines.stats.comparisons import error_rate_compare
    from engines.stats.sufficient import Proportion

    result = error_rate_compare(
        candidate=Proportion(successes=37, n=400),
        baseline=Proportion(successes=21, n=410),
        max_increase=0.02,
        min_n=50,
    )
    low, high = confint_proportions_2indep(37, 400, 21, 410, method="newcomb", compare="diff")
    assert (result.ci_low, result.ci_high) == (pytest.approx(low, abs=1e-13), pytest.approx(high, abs=1e-13))
