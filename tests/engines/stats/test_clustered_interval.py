"""The clustered interval of repeated answers against statsmodels' cluster-robust OLS."""

import math

import numpy as np
import pytest

from engines.stats.intervals import clustered_mean_interval


@pytest.mark.parametrize(("items", "repeats", "seed"), [(40, 5, 1), (25, 3, 2), (12, 20, 3)])
def test_matches_statsmodels_cluster_robust_ols(items, repeats, seed):
    import statsmodels.api as sm

    rng = np.random.default_rng(seed)
    p = rng.uniform(0.2, 1.0, size=items)
    correct = (rng.uniform(size=(items, repeats)) < p[:, None]).astype(float)
    groups = np.repeat(np.arange(items), repeats)
    fit = sm.OLS(correct.ravel(), np.ones(items * repeats)).fit(
        cov_type="cluster", cov_kwds={"groups": groups}, use_t=True
    )
    low_ref, high_ref = fit.conf_int(alpha=0.05)[0]
    mean, se, low, high = clustered_mean_interval(cluster_means=correct.mean(axis=1).tolist())
    assert mean == pytest.approx(fit.params[0], abs=1e-12)
    assert se == pytest.approx(fit.bse[0], abs=1e-10)
    assert low == pytest.approx(max(0.0, low_ref), abs=1e-10)
    assert high == pytest.approx(min(1.0, high_ref), abs=1e-10)


def test_degenerate_inputs():
    assert clustered_mean_interval(cluster_means=[1.0, 1.0, 1.0]) == (1.0, 0.0, 1.0, 1.0)
    mean, se, low, high = clustered_mean_interval(cluster_means=[0.5])
    assert (mean, low, high) == (0.5, 0.0, 1.0) and math.isnan(se)
    assert clustered_mean_interval(cluster_means=[])[2:] == (0.0, 1.0)
