import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from engines.stats.hypothesis import (
    NO_UNITS,
    benjamini_hochberg,
    clustered_srm_check,
    holm_adjust,
    mcnemar_exact,
    srm_check,
)


def approx(value):
    return pytest.approx(value, abs=5e-6)


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

    @pytest.mark.parametrize(("b", "c"), [(0, 1), (3, 40), (17, 20), (450, 551), (700, 1300), (2300, 2700)])
    def test_equals_the_binomial_coefficient_sum(self, b, c):
        # The former implementation, in exact integers: 2 · Σ_{k ≤ min(b, c)} C(n, k) / 2^n.
        n = b + c
        exact = min(1.0, 2 * sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n)
        assert mcnemar_exact(only_first=b, only_second=c) == pytest.approx(exact, rel=1e-12)

    def test_linear_time_at_a_hundred_thousand_pairs(self):
        import time

        mcnemar_exact(only_first=1, only_second=2)  # scipy's import
        started = time.perf_counter()
        p_value = mcnemar_exact(only_first=49_684, only_second=50_316)
        assert time.perf_counter() - started < 0.1
        # Normal approximation with continuity correction: |b − c| − 1 = 631 over sqrt(n) = 316.2.
        assert p_value == pytest.approx(2 * scipy_stats.norm.sf(631 / math.sqrt(100_000)), rel=1e-2)


class TestSrmCheck:
    def test_balanced_split(self):
        # 50²/5000 + 50²/5000 = 1.0 on 1 df: p = 2·(1 − Φ(1)) = 0.317311.
        result = srm_check(counts=[5050, 4950], expected_shares=[0.5, 0.5])
        assert result.chi_square == approx(1.0)
        assert result.df == 1
        assert result.p_value == approx(0.317311)
        assert not result.mismatch

    def test_canary_split_within_chance(self):
        # Expected 9999 and 101: 1/9999 + 1/101 = 0.010001, p = 0.920340.
        result = srm_check(counts=[10000, 100], expected_shares=[0.99, 0.01])
        assert result.expected_counts == pytest.approx((9999.0, 101.0))
        assert result.chi_square == approx(0.010001)
        assert result.p_value == approx(0.920340)
        assert not result.mismatch

    def test_canary_split_mismatch(self):
        # Expected 9900 and 100: 100²/9900 + 100²/100 = 101.010101, p ≈ 9.2e-24.
        result = srm_check(counts=[9800, 200], expected_shares=[99, 1])
        assert result.chi_square == approx(101.010101)
        assert result.p_value == pytest.approx(scipy_stats.chisquare([9800, 200], [9900, 100]).pvalue)
        assert result.mismatch

    def test_three_arms_against_scipy(self):
        result = srm_check(counts=[330, 350, 320], expected_shares=[1 / 3] * 3, alpha=0.05)
        expected = scipy_stats.chisquare([330, 350, 320])
        assert result.df == 2
        assert result.chi_square == pytest.approx(expected.statistic)
        assert result.p_value == pytest.approx(expected.pvalue)

    def test_exact_binomial_when_an_expected_count_is_under_5(self):
        # 95 / 5 at a 1 % split expects one candidate unit: chi-square would say p = 5.8e-5 (a false
        # alarm at 0.001). Exact: Σ over k with P(k) <= P(5) of C(100, k)·0.01^k·0.99^(100−k) = 0.0034323.
        result = srm_check(counts=[95, 5], expected_shares=[0.99, 0.01])
        assert result.method == "exact_binomial" and result.chi_square is None
        assert result.p_value == pytest.approx(0.0034323216)
        assert not result.mismatch
        assert srm_check(counts=[99, 1], expected_shares=[0.99, 0.01]).p_value == pytest.approx(1.0)
        assert srm_check(counts=[10000, 100], expected_shares=[0.99, 0.01]).method == "chi_square"

    def test_no_units(self):
        result = srm_check(counts=[0, 0], expected_shares=[0.5, 0.5])
        assert result.error == NO_UNITS
        assert result.p_value is None and not result.mismatch

    @pytest.mark.parametrize(
        ("counts", "shares"),
        [
            ([1, 2], [1.0]),
            ([5], [1.0]),
            ([-1, 3], [0.5, 0.5]),
            ([1, 3], [1.0, 0.0]),
            ([1, 3], [0.5, math.nan]),
        ],
    )
    def test_refuses_bad_input(self, counts, shares):
        with pytest.raises(ValueError):
            srm_check(counts=counts, expected_shares=shares)


class TestClusteredSrmCheck:
    def test_one_event_per_unit_is_pearsons_chi_square(self):
        plain = srm_check(counts=[5050, 4950], expected_shares=[0.5, 0.5])
        clustered = clustered_srm_check(counts=[5050, 4950], sum_squares=10000, expected_share=0.5)
        assert clustered.chi_square == approx(plain.chi_square) and clustered.p_value == approx(plain.p_value)

    def test_hand_checked(self):
        # 300 baseline and 340 candidate answers at a 50 % split, Σa² = 1600: z = (340 − 320)/sqrt(0.25·1600)
        # = 1, p = 0.317311 (the plain chi-square on 640 answers: 2.5, p = 0.113846).
        result = clustered_srm_check(counts=[300, 340], sum_squares=1600, expected_share=0.5)
        assert result.chi_square == approx(1.0) and result.p_value == approx(0.317311)
        assert result.method == "clustered_z" and not result.mismatch

    def test_an_a_a_split_of_clustered_answers_alarms_at_alpha_where_the_plain_check_does_not(self):
        """Users on a 10 % split asking 1–12 questions each: the plain chi-square on answers treats them as
        independent and alarms far more often than alpha; the clustered check holds alpha."""
        rng = np.random.default_rng(0)
        alpha, runs, users = 0.01, 2000, 400
        plain = clustered = 0
        for _ in range(runs):
            answers = rng.integers(1, 13, size=users)
            on_candidate = rng.random(users) < 0.1
            counts = [int(answers[~on_candidate].sum()), int(answers[on_candidate].sum())]
            plain += srm_check(counts=counts, expected_shares=[0.9, 0.1], alpha=alpha).mismatch
            clustered += clustered_srm_check(
                counts=counts, sum_squares=float((answers**2).sum()), expected_share=0.1, alpha=alpha
            ).mismatch
        band = 3 * math.sqrt(alpha * (1 - alpha) / runs)
        assert clustered / runs <= alpha + band
        assert plain / runs > 10 * alpha

    def test_no_events_and_bad_input(self):
        assert clustered_srm_check(counts=[0, 0], sum_squares=0, expected_share=0.5).error == NO_UNITS
        for bad in ({"counts": [1, -1]}, {"sum_squares": 1.0}, {"expected_share": 1.0}):
            with pytest.raises(ValueError):
                clustered_srm_check(**{"counts": [2, 2], "sum_squares": 8.0, "expected_share": 0.5, **bad})


# Both arms n = 200 with sample variance 1 (Σx² = 199 + 200·mean²): V = 1/200 + 1/200 = 0.01;
# control mean 1, treatment mean 1.5.


class TestHolmAdjust:
    def test_hand_checked(self):
        # Sorted 0.005, 0.01, 0.03, 0.04 → 4·0.005, 3·0.01, 2·0.03, max(1·0.04, 0.06)
        # = 0.02, 0.03, 0.06, 0.06.
        assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])

    def test_caps_at_one(self):
        assert holm_adjust([0.5, 0.2, 0.9]) == pytest.approx([1.0, 0.6, 1.0])

    def test_ties_and_edges(self):
        assert holm_adjust([0.02, 0.02]) == pytest.approx([0.04, 0.04])
        assert holm_adjust([0.03]) == [0.03]
        assert holm_adjust([]) == []

    @pytest.mark.parametrize("p_values", [[0.1, 1.2], [-0.01], [math.nan]])
    def test_refuses_invalid(self, p_values):
        with pytest.raises(ValueError):
            holm_adjust(p_values)


class TestBenjaminiHochberg:
    def test_hand_checked(self):
        # Sorted 0.005, 0.01, 0.03, 0.04 → 4·p/rank = 0.02, 0.02, 0.04, 0.04, then running min from the top.
        assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])

    def test_step_up_keeps_order(self):
        # 5·p/rank = 0.05, 0.05, 0.05, 0.0625, 0.05 → running min from the top: 0.05 everywhere.
        assert benjamini_hochberg([0.01, 0.02, 0.03, 0.05, 0.05]) == pytest.approx([0.05] * 5)

    def test_never_above_holm(self):
        p_values = [0.001, 0.2, 0.03, 0.04, 0.5, 0.012]
        assert all(
            bh <= holm for bh, holm in zip(benjamini_hochberg(p_values), holm_adjust(p_values), strict=True)
        )

    def test_edges(self):
        assert benjamini_hochberg([]) == []
        assert benjamini_hochberg([1.0, 1.0]) == [1.0, 1.0]

    def test_refuses_invalid(self):
        with pytest.raises(ValueError):
            benjamini_hochberg([0.5, 2.0])
