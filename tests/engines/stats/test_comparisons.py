import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats as scipy_stats

from engines.reasons import Term, reason
from engines.stats.comparisons import (
    FAIL,
    INSUFFICIENT_DATA,
    MARGINAL,
    PASS,
    ComparisonCode,
    ComparisonResult,
    analysis_combine,
    error_rate_compare,
    latency_compare,
    mean_compare,
    probes_compare,
    rate_compare,
)
from engines.stats.hypothesis import welch_t
from engines.stats.sufficient import MeanStats, Proportion

REPO_ROOT = Path(__file__).resolve().parents[3]


def result_make(metric: str, verdict: str) -> ComparisonResult:
    return ComparisonResult(
        metric=metric,
        verdict=verdict,
        reasons=(reason("test.reason", metric=metric),),
        candidate_estimate=None,
        baseline_estimate=None,
        difference=None,
        difference_kind="absolute",
        p_value=None,
        candidate_n=0,
        baseline_n=0,
        threshold=0.0,
        alpha=0.05,
        min_n=1,
        test="none",
    )


def test_module_is_pure():
    code = "import sys, engines.stats.comparisons; assert 'django' not in sys.modules, 'django imported'"
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)


class TestErrorRateCompare:
    def test_hand_checked_z_test(self):
        # pooled p = 50 / 2000 = 0.025; se = sqrt(0.025 * 0.975 * (1/1000 + 1/1000)) = 0.0069821;
        # z = (0.030 − 0.020) / 0.0069821 = 1.43223; one-sided p = 1 − Φ(1.43223) = 0.07604.
        result = error_rate_compare(
            candidate=Proportion(successes=30, n=1000),
            baseline=Proportion(successes=20, n=1000),
            max_increase=0.005,
            min_n=100,
        )
        assert result.metric == "error_rate"
        assert result.candidate_estimate == pytest.approx(0.03)
        assert result.baseline_estimate == pytest.approx(0.02)
        assert result.difference == pytest.approx(0.01)
        assert result.difference_kind == "absolute"
        assert result.p_value == pytest.approx(0.07604, abs=5e-6)
        assert (result.candidate_n, result.baseline_n, result.threshold) == (1000, 1000, 0.005)
        # 0.01 > 0.005 but p > 0.05: over the limit, not significant.
        assert result.verdict == MARGINAL
        summary, test, outcome = result.reasons
        assert (summary.code, test.code, outcome.code) == (
            ComparisonCode.RATE_SUMMARY,
            ComparisonCode.Z_TEST,
            ComparisonCode.MARGINAL_NOT_SIGNIFICANT,
        )
        assert (summary.params["c_k"], summary.params["c_n"]) == (30, 1000)
        assert summary.params["difference"] == pytest.approx(1.0)
        assert test.params["z"] == pytest.approx(1.4322, abs=5e-5)
        assert test.params["se"] == pytest.approx(0.006982, abs=5e-7)
        assert outcome.params["op"] == ">="

    def test_fails_when_over_the_limit_and_significant(self):
        # Ten times the traffic: se = sqrt(0.025 * 0.975 * 2 / 10000) = 0.0022079, z = 4.52911.
        result = error_rate_compare(
            candidate=Proportion(successes=300, n=10_000),
            baseline=Proportion(successes=200, n=10_000),
            max_increase=0.005,
            min_n=100,
        )
        assert result.verdict == FAIL
        assert result.p_value == pytest.approx(scipy_stats.norm.sf(4.52911), rel=1e-4)
        assert result.p_value < 1e-5

    def test_marginal_when_significant_but_within_the_limit(self):
        result = error_rate_compare(
            candidate=Proportion(successes=300, n=10_000),
            baseline=Proportion(successes=200, n=10_000),
            max_increase=0.02,
            min_n=100,
        )
        assert result.verdict == MARGINAL
        assert result.reasons[-1].code == ComparisonCode.MARGINAL_WITHIN

    @pytest.mark.parametrize(("candidate_errors", "expected_p"), [(20, 0.5), (10, None)])
    def test_passes_when_equal_or_better(self, candidate_errors, expected_p):
        result = error_rate_compare(
            candidate=Proportion(successes=candidate_errors, n=1000),
            baseline=Proportion(successes=20, n=1000),
            max_increase=0.005,
            min_n=100,
        )
        assert result.verdict == PASS
        if expected_p is not None:
            assert result.p_value == pytest.approx(expected_p)
        else:
            assert result.p_value > 0.95

    def test_no_errors_anywhere_passes_with_p_one(self):
        result = error_rate_compare(
            candidate=Proportion(successes=0, n=500),
            baseline=Proportion(successes=0, n=500),
            max_increase=0.0,
            min_n=100,
        )
        assert result.verdict == PASS
        assert result.p_value == 1.0
        assert result.difference == 0.0
        assert result.reasons[1] == reason(ComparisonCode.RATE_NO_VARIANCE, pooled=0.0)

    @pytest.mark.parametrize(("candidate_n", "baseline_n", "short"), [(99, 1000, 1), (1000, 0, 1), (0, 0, 2)])
    def test_too_few_is_insufficient_data(self, candidate_n, baseline_n, short):
        result = error_rate_compare(
            candidate=Proportion(successes=0, n=candidate_n),
            baseline=Proportion(successes=0, n=baseline_n),
            max_increase=0.005,
            min_n=100,
        )
        assert result.verdict == INSUFFICIENT_DATA
        assert result.p_value is None
        assert len(result.reasons) == short
        assert {(r.code, r.params["min_n"]) for r in result.reasons} == {
            (ComparisonCode.TOO_FEW_OBSERVATIONS, 100)
        }

    def test_insufficient_even_when_the_candidate_looks_great(self):
        result = error_rate_compare(
            candidate=Proportion(successes=0, n=10),
            baseline=Proportion(successes=500, n=10_000),
            max_increase=0.005,
            min_n=100,
        )
        assert result.verdict == INSUFFICIENT_DATA
        assert result.candidate_estimate == 0.0
        assert result.difference == pytest.approx(-0.05)

    @pytest.mark.parametrize(("successes", "n"), [(11, 10), (-1, 10), (0, -1)])
    def test_impossible_counts_raise(self, successes, n):
        with pytest.raises(ValueError):
            Proportion(successes=successes, n=n)

    @pytest.mark.parametrize(
        "settings",
        [
            {"max_increase": 0.01, "min_n": 10, "alpha": 0.0},
            {"max_increase": 0.01, "min_n": 10, "alpha": 1.0},
            {"max_increase": 0.01, "min_n": 0},
            {"max_increase": -0.01, "min_n": 10},
        ],
    )
    def test_invalid_settings_raise(self, settings):
        with pytest.raises(ValueError):
            error_rate_compare(
                candidate=Proportion(successes=1, n=100), baseline=Proportion(successes=1, n=100), **settings
            )


class TestRateCompare:
    def test_generic_rate_carries_its_metric_name(self):
        result = rate_compare(
            metric="fallback_rate",
            candidate=Proportion(successes=30, n=1000),
            baseline=Proportion(successes=20, n=1000),
            max_increase=0.005,
            min_n=100,
        )
        assert result.metric == "fallback_rate"
        assert result.p_value == pytest.approx(0.07604, abs=5e-6)
        assert result.verdict == MARGINAL

    def test_matches_error_rate_compare(self):
        arms = dict(candidate=Proportion(successes=41, n=800), baseline=Proportion(successes=25, n=900))
        generic = rate_compare(metric="error_rate", max_increase=0.01, min_n=50, alpha=0.1, **arms)
        assert error_rate_compare(max_increase=0.01, min_n=50, alpha=0.1, **arms) == generic


class TestLatencyCompare:
    def test_hand_ranked_tiny_example(self):
        # Candidate 3, 5, 7 vs baseline 1, 2, 4: pairs where the candidate is larger: 3 → 2, 5 → 3, 7 → 3,
        # so U = 8 of a maximum 9. Under H0 each of the C(6, 3) = 20 rankings is equally likely and only
        # two reach U >= 8 (U = 9: {4,5,6} and U = 8: {3,5,6} as the candidate's ranks): p = 2 / 20 = 0.1.
        result = latency_compare(candidate=[3.0, 5.0, 7.0], baseline=[1.0, 2.0, 4.0], max_ratio=1.2, min_n=3)
        assert result.p_value == pytest.approx(0.1)
        assert reason(ComparisonCode.U_TEST, u=8.0) in result.reasons
        assert (result.candidate_estimate, result.baseline_estimate) == (5.0, 2.0)
        assert result.difference == pytest.approx(2.5)
        assert result.difference_kind == "ratio"
        assert (result.candidate_n, result.baseline_n, result.threshold) == (3, 3, 1.2)
        # 2.5 > 1.2 but p = 0.1: over the limit, not significant.
        assert result.verdict == MARGINAL

    def test_fails_when_much_slower_and_significant(self):
        baseline = [float(100 + i % 50) for i in range(200)]
        candidate = [value * 1.5 for value in baseline]
        result = latency_compare(candidate=candidate, baseline=baseline, max_ratio=1.2, min_n=100)
        assert result.difference == pytest.approx(1.5)
        assert result.p_value < 1e-10
        assert result.verdict == FAIL

    def test_marginal_when_significantly_but_slightly_slower(self):
        baseline = [float(100 + i % 50) for i in range(4000)]
        candidate = [value + 3 for value in baseline]
        result = latency_compare(candidate=candidate, baseline=baseline, max_ratio=1.2, min_n=100)
        assert result.difference == pytest.approx((124.5 + 3) / 124.5)
        assert result.p_value < 0.05
        assert result.verdict == MARGINAL

    def test_passes_when_not_slower(self):
        baseline = [float(100 + i % 50) for i in range(200)]
        candidate = [value * 0.9 for value in baseline]
        result = latency_compare(candidate=candidate, baseline=baseline, max_ratio=1.2, min_n=100)
        assert result.verdict == PASS
        assert result.p_value > 0.5

    def test_all_equal_latencies_pass_with_p_one(self):
        result = latency_compare(candidate=[0.25] * 50, baseline=[0.25] * 50, max_ratio=1.1, min_n=10)
        assert result.verdict == PASS
        assert result.p_value == pytest.approx(1.0)
        assert result.difference == 1.0

    @pytest.mark.parametrize(
        ("candidate", "baseline"), [([], []), ([1.0] * 10, [1.0] * 9), ([1.0], [1.0] * 10)]
    )
    def test_too_few_samples_is_insufficient_data(self, candidate, baseline):
        result = latency_compare(candidate=candidate, baseline=baseline, max_ratio=1.2, min_n=10)
        assert result.verdict == INSUFFICIENT_DATA
        assert result.p_value is None and result.difference is None
        assert {(r.code, r.params["min_n"]) for r in result.reasons} == {(ComparisonCode.TOO_FEW_SAMPLES, 10)}

    def test_zero_baseline_median_is_insufficient_data(self):
        result = latency_compare(candidate=[1.0] * 10, baseline=[0.0] * 10, max_ratio=1.2, min_n=5)
        assert result.verdict == INSUFFICIENT_DATA
        assert result.reasons == (reason(ComparisonCode.LATENCY_UNDEFINED, median=0.0),)

    def test_non_finite_latency_raises(self):
        with pytest.raises(ValueError):
            latency_compare(candidate=[1.0, math.nan], baseline=[1.0, 2.0], max_ratio=1.2, min_n=1)

    def test_non_positive_max_ratio_raises(self):
        with pytest.raises(ValueError):
            latency_compare(candidate=[1.0], baseline=[1.0], max_ratio=0.0, min_n=1)


class TestMeanCompare:
    CANDIDATE = MeanStats.of([3, 4, 5, 6, 7, 8])  # mean 5.5, variance 3.5
    BASELINE = MeanStats.of([2, 3, 3, 4])  # mean 3, variance 2/3

    def test_hand_checked_welch(self):
        # v1/n1 = 3.5/6 = 0.583333, v2/n2 = (2/3)/4 = 0.166667, sum 0.75, se = 0.866025;
        # t = 2.5 / 0.866025 = 2.886751;
        # df = 0.75² / (0.583333²/5 + 0.166667²/3) = 0.5625 / (0.0680556 + 0.0092593) = 7.275449.
        t, df = welch_t(first=self.CANDIDATE, second=self.BASELINE)
        assert t == pytest.approx(2.886751, abs=5e-6)
        assert df == pytest.approx(7.275449, abs=5e-6)

    def test_matches_scipy_ttest_ind_from_stats(self):
        expected = scipy_stats.ttest_ind_from_stats(
            5.5, math.sqrt(3.5), 6, 3.0, math.sqrt(2 / 3), 4, equal_var=False, alternative="greater"
        )
        result = mean_compare(
            candidate=self.CANDIDATE, baseline=self.BASELINE, max_increase_ratio=0.1, min_n=3
        )
        assert result.p_value == pytest.approx(expected.pvalue, rel=1e-9)
        assert result.p_value == pytest.approx(0.01123, abs=5e-6)
        assert result.difference == pytest.approx(2.5 / 3)
        assert result.difference_kind == "relative"
        assert (result.candidate_estimate, result.baseline_estimate) == (5.5, 3.0)
        assert result.verdict == FAIL
        test = result.reasons[1]
        assert test.code == ComparisonCode.T_TEST
        assert (test.params["t"], test.params["df"]) == (
            pytest.approx(2.8868, abs=5e-5),
            pytest.approx(7.28, abs=5e-3),
        )

    def test_marginal_when_over_the_limit_but_not_significant(self):
        result = mean_compare(
            candidate=self.CANDIDATE, baseline=self.BASELINE, max_increase_ratio=0.1, min_n=3, alpha=0.01
        )
        assert result.verdict == MARGINAL

    def test_marginal_when_significant_but_within_the_limit(self):
        result = mean_compare(
            candidate=self.CANDIDATE, baseline=self.BASELINE, max_increase_ratio=1.0, min_n=3
        )
        assert result.verdict == MARGINAL

    def test_passes_when_not_higher(self):
        result = mean_compare(
            candidate=self.BASELINE, baseline=self.CANDIDATE, max_increase_ratio=0.1, min_n=3
        )
        assert result.verdict == PASS
        assert result.difference < 0
        assert result.p_value > 0.95

    def test_constant_equal_arms_pass_with_p_one(self):
        constant = MeanStats.of([1] * 50)
        result = mean_compare(candidate=constant, baseline=constant, max_increase_ratio=0.1, min_n=10)
        assert result.verdict == PASS
        assert result.p_value == 1.0
        assert reason(ComparisonCode.MEAN_NO_VARIANCE, p=1.0) in result.reasons

    def test_constant_higher_candidate_fails_with_p_zero(self):
        result = mean_compare(
            candidate=MeanStats.of([3] * 50),
            baseline=MeanStats.of([2] * 50),
            max_increase_ratio=0.1,
            min_n=10,
        )
        assert result.p_value == 0.0
        assert result.verdict == FAIL

    def test_one_constant_arm_still_runs_welch(self):
        result = mean_compare(
            candidate=self.CANDIDATE, baseline=MeanStats.of([3, 3, 3, 3]), max_increase_ratio=0.1, min_n=3
        )
        expected = scipy_stats.ttest_ind_from_stats(
            5.5, math.sqrt(3.5), 6, 3.0, 0.0, 4, equal_var=False, alternative="greater"
        )
        assert result.p_value == pytest.approx(expected.pvalue, rel=1e-9)

    @pytest.mark.parametrize(
        ("candidate", "baseline", "min_n"),
        [
            (MeanStats.of([1, 2]), MeanStats.of([1, 2, 3]), 3),
            (MeanStats.of([]), MeanStats.of([]), 3),
            (MeanStats.of([5]), MeanStats.of([4]), 1),  # a variance needs two values whatever min_n says
        ],
    )
    def test_too_few_is_insufficient_data(self, candidate, baseline, min_n):
        result = mean_compare(candidate=candidate, baseline=baseline, max_increase_ratio=0.1, min_n=min_n)
        assert result.verdict == INSUFFICIENT_DATA
        assert result.p_value is None and result.difference is None

    def test_zero_baseline_mean_is_insufficient_data(self):
        result = mean_compare(
            candidate=MeanStats.of([1, 2, 3]),
            baseline=MeanStats.of([0, 0, 0]),
            max_increase_ratio=0.1,
            min_n=2,
        )
        assert result.verdict == INSUFFICIENT_DATA
        assert result.reasons == (reason(ComparisonCode.MEAN_UNDEFINED, mean=0.0),)


class TestProbesCompare:
    def test_hand_checked_fail(self):
        # Discordant pairs 2 vs 10: p = 2 * (C(12,0) + C(12,1) + C(12,2)) / 2**12 = 158 / 4096 = 0.0385742.
        result = probes_compare(
            only_candidate_correct=2,
            only_baseline_correct=10,
            both_correct=80,
            neither_correct=8,
            min_pairs=50,
        )
        assert result.p_value == pytest.approx(0.0385742, abs=5e-7)
        assert result.verdict == FAIL
        assert (result.candidate_estimate, result.baseline_estimate) == (
            pytest.approx(0.82),
            pytest.approx(0.9),
        )
        assert result.difference == pytest.approx(-0.08)
        assert (result.candidate_n, result.baseline_n, result.threshold, result.min_n) == (100, 100, 0.0, 50)

    def test_candidate_ahead_passes_even_when_significant(self):
        result = probes_compare(
            only_candidate_correct=10,
            only_baseline_correct=2,
            both_correct=80,
            neither_correct=8,
            min_pairs=50,
        )
        assert result.p_value == pytest.approx(0.0385742, abs=5e-7)
        assert result.verdict == PASS

    def test_baseline_ahead_but_not_significant_passes(self):
        # p = 2 * (1 + 12 + 66 + 220 + 495) / 4096 = 1588 / 4096 = 0.387695.
        result = probes_compare(
            only_candidate_correct=4,
            only_baseline_correct=8,
            both_correct=80,
            neither_correct=8,
            min_pairs=50,
        )
        assert result.p_value == pytest.approx(0.387695, abs=5e-7)
        assert result.verdict == PASS
        assert result.reasons[-1].code == ComparisonCode.PROBES_PASS_WORSE

    def test_stricter_alpha_turns_a_fail_into_a_pass(self):
        result = probes_compare(
            only_candidate_correct=2,
            only_baseline_correct=10,
            both_correct=80,
            neither_correct=8,
            min_pairs=50,
            alpha=0.01,
        )
        assert result.verdict == PASS

    def test_no_discordant_pairs_passes(self):
        result = probes_compare(
            only_candidate_correct=0,
            only_baseline_correct=0,
            both_correct=60,
            neither_correct=40,
            min_pairs=50,
        )
        assert result.p_value == 1.0
        assert result.verdict == PASS

    @pytest.mark.parametrize("counts", [(0, 0, 0, 0), (0, 20, 20, 9)])
    def test_too_few_pairs_is_insufficient_data(self, counts):
        result = probes_compare(
            only_candidate_correct=counts[0],
            only_baseline_correct=counts[1],
            both_correct=counts[2],
            neither_correct=counts[3],
            min_pairs=50,
        )
        assert result.verdict == INSUFFICIENT_DATA
        assert result.p_value is None
        assert result.reasons == (reason(ComparisonCode.PROBES_TOO_FEW, pairs=sum(counts), min_pairs=50),)

    def test_negative_counts_raise(self):
        with pytest.raises(ValueError):
            probes_compare(
                only_candidate_correct=-1,
                only_baseline_correct=0,
                both_correct=5,
                neither_correct=0,
                min_pairs=1,
            )


class TestAnalysisCombine:
    @pytest.mark.parametrize(
        ("verdicts", "expected"),
        [
            ([PASS, PASS], PASS),
            ([PASS, MARGINAL], MARGINAL),
            ([MARGINAL, INSUFFICIENT_DATA, PASS], INSUFFICIENT_DATA),
            ([INSUFFICIENT_DATA, FAIL, MARGINAL], FAIL),
            ([PASS, INSUFFICIENT_DATA], INSUFFICIENT_DATA),
            ([FAIL], FAIL),
        ],
    )
    def test_precedence(self, verdicts, expected):
        results = [result_make(f"m{index}", verdict) for index, verdict in enumerate(verdicts)]
        verdict, reasons = analysis_combine(results)
        assert verdict == expected
        assert (reasons[0].code, reasons[0].params["verdict"]) == (ComparisonCode.OVERALL, Term(expected))
        assert len(reasons) == 1 + len(verdicts)

    def test_reasons_name_each_metric(self):
        verdict, reasons = analysis_combine([result_make("latency", PASS), result_make("error_rate", FAIL)])
        assert verdict == FAIL
        tally = [
            reason(ComparisonCode.TALLY, count=1, verdict=Term(PASS)),
            reason(ComparisonCode.TALLY, count=1, verdict=Term(FAIL)),
        ]
        assert reasons == (
            reason(ComparisonCode.OVERALL, verdict=Term(FAIL), tally=tally, n=2),
            reason(
                ComparisonCode.METRIC,
                metric=Term("latency"),
                verdict=Term(PASS),
                why=reason("test.reason", metric="latency"),
            ),
            reason(
                ComparisonCode.METRIC,
                metric=Term("error_rate"),
                verdict=Term(FAIL),
                why=reason("test.reason", metric="error_rate"),
            ),
        )

    def test_no_results_is_insufficient_data(self):
        verdict, reasons = analysis_combine([])
        assert verdict == INSUFFICIENT_DATA
        assert reasons == (reason(ComparisonCode.NO_METRICS),)

    def test_unknown_verdict_raises(self):
        with pytest.raises(ValueError):
            analysis_combine([result_make("x", "maybe")])

    def test_real_results_combine_and_serialise(self):
        results = [
            error_rate_compare(
                candidate=Proportion(successes=30, n=1000),
                baseline=Proportion(successes=20, n=1000),
                max_increase=0.005,
                min_n=100,
            ),
            latency_compare(candidate=[1.0, 2.0], baseline=[1.0, 2.0], max_ratio=1.2, min_n=100),
        ]
        verdict, reasons = analysis_combine(results)
        assert verdict == INSUFFICIENT_DATA
        assert [(t.params["count"], t.params["verdict"]) for t in reasons[0].params["tally"]] == [
            (1, Term(MARGINAL)),
            (1, Term(INSUFFICIENT_DATA)),
        ]
        data = json.loads(json.dumps([result.to_dict() for result in results]))
        assert data[0]["verdict"] == MARGINAL
        assert data[0]["reasons"] == [item.to_json() for item in results[0].reasons]
        assert data[0]["reasons"][2]["params"]["op"] == ">="
        assert data[1]["p_value"] is None
