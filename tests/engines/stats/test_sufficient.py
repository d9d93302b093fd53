import statistics

import pytest

from engines.stats.sufficient import CupedStats, MeanStats, RatioStats


def approx(value):
    return pytest.approx(value, abs=5e-6)


class TestMeanStats:
    def test_sufficient_statistics_match_the_values(self):
        values = [1, 2, 2, 3, 7]
        summary = MeanStats.of(values)
        assert (summary.n, summary.total, summary.total_squares) == (5, 15.0, 67.0)
        assert summary.mean == pytest.approx(statistics.mean(values))
        assert summary.variance == pytest.approx(statistics.variance(values))

    def test_constant_values_have_zero_variance(self):
        assert MeanStats.of([0.1] * 7).variance == 0.0

    def test_undefined_below_two_values(self):
        assert MeanStats(n=0, total=0.0, total_squares=0.0).mean is None
        assert MeanStats(n=1, total=3.0, total_squares=9.0).variance is None

    def test_impossible_sums_raise(self):
        with pytest.raises(ValueError):
            MeanStats(n=-1, total=0.0, total_squares=0.0)
        with pytest.raises(ValueError):
            MeanStats(n=2, total=1.0, total_squares=-1.0)

    def test_sum_of_squares_below_the_square_of_the_sum_raises(self):
        # Σx² ≥ (Σx)²/n for any values: 3 values summing to 6 have Σx² ≥ 12.
        with pytest.raises(ValueError, match=r"Σx² = 11 is below \(Σx\)²/n = 12 \(n=3\)"):
            MeanStats(n=3, total=6.0, total_squares=11.0)
        assert MeanStats(n=3, total=6.0, total_squares=12.0).variance == 0.0

    def test_no_units_with_sums_raises(self):
        with pytest.raises(ValueError, match="no units"):
            MeanStats(n=0, total=1.0, total_squares=1.0)

    def test_rounding_of_large_sums_is_not_impossible(self):
        values = [0.1 + 1e6] * 1000
        summary = MeanStats.of(values)
        assert summary.total_squares < summary.total**2 / summary.n  # summed in floating point
        assert summary.variance == 0.0


class TestRatioStats:
    def test_impossible_sums_raise(self):
        good = RatioStats.of([(1.0, 1.0), (3.0, 2.0), (2.0, 2.0)])
        assert good.ratio == pytest.approx(6 / 5)
        with pytest.raises(ValueError, match="Σy²"):
            RatioStats(n=3, sum_x=6.0, sum_y=5.0, sum_x2=14.0, sum_y2=8.0, sum_xy=13.0)
        # Centred Σxy beyond sqrt(centred Σx² · centred Σy²): a correlation above 1.
        with pytest.raises(ValueError, match="correlation beyond"):
            RatioStats(n=3, sum_x=6.0, sum_y=5.0, sum_x2=14.0, sum_y2=9.0, sum_xy=16.0)


class TestCupedStats:
    def test_impossible_sums_raise(self):
        CupedStats.of([(1.0, 0.0), (2.0, 1.0), (4.0, 1.0)])
        with pytest.raises(ValueError, match="Σpre²"):
            CupedStats(n=2, sum_x=3.0, sum_x2=5.0, sum_pre=2.0, sum_pre2=1.0, sum_x_pre=2.0)
        with pytest.raises(ValueError, match="correlation beyond"):
            CupedStats(n=2, sum_x=3.0, sum_x2=5.0, sum_pre=2.0, sum_pre2=4.0, sum_x_pre=9.0)
