"""A/A calibration of gate layer 3: 1000 simulated experiments with no true difference.

With 1000 runs a rate of 0.05 has a binomial standard error of sqrt(0.05·0.95/1000) = 0.0069, so the
band [0.03, 0.07] is about ±3 standard errors. The seed is fixed: the figures are reproducible
(`python bench/ab_false_positives.py --runs 1000 --seed 0` prints the same ones)."""

import numpy as np
import pytest

from gate.judges.aa_simulation import RATES, _simulate, aa_false_positive_rates


@pytest.fixture(scope="module")
def rates():
    return aa_false_positive_rates(runs=1000, seed=0)


def test_settings_are_reported(rates):
    assert {key: rates[key] for key in ("runs", "seed", "users_per_arm", "looks", "alpha", "tau")} == {
        "runs": 1000,
        "seed": 0,
        "users_per_arm": 300,
        "looks": 10,
        "alpha": 0.05,
        "tau": 0.2,
    }
    assert set(RATES) <= set(rates)


def test_one_sided_single_look_passes_at_alpha(rates):
    # direction "decrease", min_effect 0: the one-sided 95 % lower bound of the improvement clears 0.
    assert 0.03 <= rates["fixed_single_look"] <= 0.07


def test_two_sided_single_look_rejects_at_alpha(rates):
    assert 0.03 <= rates["two_sided_single_look"] <= 0.07


def test_peeking_inflates_the_fixed_horizon_test(rates):
    # Ten looks, any pass counted: far above alpha (about 0.19 here).
    assert rates["fixed_peeking"] > 0.07


def test_sequential_test_survives_peeking(rates):
    assert rates["sequential_peeking"] <= 0.05
    assert rates["sequential_single_look"] <= rates["sequential_peeking"]


def test_simulated_metric_is_as_documented():
    # Hours per contract average 2 (Gamma shape 2, scale u with E[u] = 1); users review 1–3 contracts.
    cumulative = _simulate(rng=np.random.default_rng(5), runs=50, users=300)
    total_hours, total_contracts = cumulative[0, :, :, -1], cumulative[1, :, :, -1]
    assert np.mean(total_hours / total_contracts) == pytest.approx(2.0, rel=0.03)
    assert np.mean(total_contracts / 300) == pytest.approx(2.0, rel=0.02)
    assert np.all(np.diff(cumulative[1], axis=-1) >= 1) and np.all(np.diff(cumulative[1], axis=-1) <= 3)


@pytest.mark.parametrize(
    "settings", [{"runs": 0}, {"runs": 10, "looks": 0}, {"runs": 10, "users_per_arm": 15, "looks": 10}]
)
def test_refuses_impossible_settings(settings):
    with pytest.raises(ValueError):
        aa_false_positive_rates(seed=0, **settings)
