import statistics

import pytest

from engines.stats.sufficient import MeanStats


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
