import pytest

from evalhub.gate.stats import mcnemar_exact, wilson_interval


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


class TestMcNemarExact:
    def test_hand_checked(self):
        # 2 * (C(12,0) + C(12,1) + C(12,2)) / 2**12 = 2 * 79 / 4096
        assert mcnemar_exact(only_first=10, only_second=2) == pytest.approx(158 / 4096)
        assert mcnemar_exact(only_first=2, only_second=10) == pytest.approx(158 / 4096)

    def test_balanced_and_empty_are_one(self):
        assert mcnemar_exact(only_first=7, only_second=7) == 1.0
        assert mcnemar_exact(only_first=0, only_second=0) == 1.0

    def test_matches_scipy_binomial_test(self):
        from scipy.stats import binomtest

        for b, c in [(30, 12), (5, 0), (120, 95)]:
            expected = binomtest(b, b + c, 0.5).pvalue
            assert mcnemar_exact(only_first=b, only_second=c) == pytest.approx(expected, rel=1e-9)
