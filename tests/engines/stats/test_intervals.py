import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from engines.stats.intervals import newcombe_interval, paired_difference_interval, wilson_interval


def approx(value):
    return pytest.approx(value, abs=5e-6)


class TestWilsonInterval:
    # Checked by solving (p̂ - p)^2 = z^2 p (1 - p) / n for p with numpy.roots, z = 1.959964.
    @pytest.mark.parametrize(
        ("successes", "n", "low", "high"),
        [
            (81, 100, 0.72221, 0.87485),
            (170, 200, 0.79394, 0.89286),
            (0, 10, 0.0, 0.27753),
            (10, 10, 0.72247, 1.0),
        ],
    )
    def test_matches_hand_checked_values(self, successes, n, low, high):
        got_low, got_high = wilson_interval(successes=successes, n=n)
        assert got_low == pytest.approx(low, abs=5e-6)
        assert got_high == pytest.approx(high, abs=5e-6)

    def test_wider_at_higher_confidence(self):
        low95, high95 = wilson_interval(successes=81, n=100, confidence=0.95)
        low99, high99 = wilson_interval(successes=81, n=100, confidence=0.99)
        assert low99 < low95 and high99 > high95

    def test_no_data_is_the_whole_range(self):
        assert wilson_interval(successes=0, n=0) == (0.0, 1.0)

    def test_refuses_impossible_counts(self):
        with pytest.raises(ValueError):
            wilson_interval(successes=11, n=10)


class TestNewcombeInterval:
    # Newcombe (1998), Statistics in Medicine 17:873–890, Table II, method 10 (published to 4 decimals).
    @pytest.mark.parametrize(
        ("first", "second", "low", "high"),
        [
            ((56, 70), (48, 80), 0.0524, 0.3339),
            ((9, 10), (3, 10), 0.1705, 0.8090),
            ((6, 7), (2, 7), 0.0582, 0.8062),
            ((5, 56), (0, 29), -0.0381, 0.1926),
        ],
    )
    def test_published_examples(self, first, second, low, high):
        _, ci_low, ci_high = newcombe_interval(
            successes_1=first[0], n_1=first[1], successes_2=second[0], n_2=second[1]
        )
        assert (round(ci_low, 4), round(ci_high, 4)) == (low, high)

    # 100/1000 vs 150/1000, z = 1.959964, z² = 3.841459, 1 + z²/n = 1.003841:
    # Wilson 100/1000: centre (0.1 + 0.001921)/1.003841 = 0.101531, half 1.959964·sqrt(0.00009 + 9.6e-7)
    #   /1.003841 = 0.018621 → [0.082909, 0.120152];
    # Wilson 150/1000: centre 0.151921/1.003841 = 0.151339, half 1.959964·sqrt(0.0001275 + 9.6e-7)
    #   /1.003841 = 0.022129 → [0.129210, 0.173469];
    # d = −0.05, low = d − sqrt(0.017091² + 0.023469²) = −0.05 − 0.029032 = −0.079032,
    # high = d + sqrt(0.020152² + 0.020790²) = −0.05 + 0.028954 = −0.021046.
    def test_hand_checked(self):
        estimate, low, high = newcombe_interval(successes_1=100, n_1=1000, successes_2=150, n_2=1000)
        assert estimate == approx(-0.05)
        assert low == approx(-0.079032)
        assert high == approx(-0.021046)

    def test_from_scipy_wilson_intervals(self):
        # The same construction from scipy's own Wilson intervals (binomtest(...).proportion_ci).
        first = scipy_stats.binomtest(312, 1590).proportion_ci(method="wilson")
        second = scipy_stats.binomtest(250, 1590).proportion_ci(method="wilson")
        p_1, p_2 = 312 / 1590, 250 / 1590
        expected_low = p_1 - p_2 - math.hypot(p_1 - first.low, second.high - p_2)
        expected_high = p_1 - p_2 + math.hypot(first.high - p_1, p_2 - second.low)
        _, low, high = newcombe_interval(successes_1=312, n_1=1590, successes_2=250, n_2=1590)
        assert (low, high) == (pytest.approx(expected_low, rel=1e-9), pytest.approx(expected_high, rel=1e-9))

    def test_covers_at_about_the_nominal_rate(self):
        # 2000 pairs of arms, 200 answers each at the same rate 0.06 (about 12 follow-ups: small counts):
        # the interval holds the true difference 0 about 95 % of the time.
        rng = np.random.default_rng(1)
        draws = rng.binomial(200, 0.06, size=(2000, 2))
        covered = [
            low <= 0 <= high
            for first, second in draws
            for _, low, high in [newcombe_interval(successes_1=first, n_1=200, successes_2=second, n_2=200)]
        ]
        assert 0.93 <= np.mean(covered) <= 0.975

    def test_refuses_empty_arms(self):
        with pytest.raises(ValueError, match="n_1=0"):
            newcombe_interval(successes_1=0, n_1=0, successes_2=1, n_2=10)


class TestPairedDifferenceInterval:
    def test_is_scipys_one_sample_t_interval(self):
        rng = np.random.default_rng(3)
        differences = rng.choice([-1.0, 0.0, 0.0, 0.0, 1.0, 1.0], size=80)
        mean, low, high = paired_difference_interval(differences=differences.tolist(), confidence=0.9)
        expected = scipy_stats.ttest_1samp(differences, 0.0).confidence_interval(confidence_level=0.9)
        assert (mean, low, high) == pytest.approx(
            (differences.mean(), expected.low, expected.high), abs=1e-12
        )

    def test_hand_checked(self):
        # d = (1, 1, 0, 0): mean 0.5, s² = 1/3, se = √(1/12) = 0.288675, t(0.975, 3) = 3.182446.
        assert paired_difference_interval(differences=[1, 1, 0, 0]) == (
            0.5,
            approx(0.5 - 3.182446 * 0.288675),
            approx(0.5 + 3.182446 * 0.288675),
        )

    def test_not_clipped_and_degenerate_cases(self):
        assert paired_difference_interval(differences=[-1.0, -1.0, 0.0])[1] < -1.0
        assert paired_difference_interval(differences=[0.0, 0.0, 0.0]) == (0.0, 0.0, 0.0)
        assert paired_difference_interval(differences=[1.0]) == (1.0, -1.0, 1.0)
        mean, low, high = paired_difference_interval(differences=[])
        assert math.isnan(mean) and (low, high) == (-1.0, 1.0)
