import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from engines.stats.effects import (
    CONTROL_ZERO,
    DENOMINATOR_ZERO,
    NO_RELATIVE,
    TOO_FEW_UNITS,
    ZERO_VARIANCE,
    Effect,
    cuped_adjust,
    cuped_effect,
    cuped_theta,
    mean_effect,
    proportion_effect,
    ratio_cuped_effect,
    ratio_effect,
    sequential_half_width,
    sequential_interval,
)
from engines.stats.sufficient import CupedStats, MeanStats, Proportion, RatioCupedStats, RatioStats

NUMBERS = (
    "control_value",
    "treatment_value",
    "estimate",
    "ci_low",
    "ci_high",
    "relative",
    "relative_ci_low",
    "relative_ci_high",
    "p_value",
)


def approx(value):
    return pytest.approx(value, abs=5e-6)


RELATIVE = ("relative", "relative_ci_low", "relative_ci_high")


def assert_degenerate(effect: Effect, error: str) -> None:
    assert effect.error == error
    assert all(getattr(effect, name) is None for name in NUMBERS)


def assert_lift_undefined(effect: Effect) -> None:
    """A zero control value: the absolute numbers stand, only the lift is missing, and it says why."""
    assert effect.error is None and effect.relative_error == CONTROL_ZERO
    assert all(getattr(effect, name) is None for name in RELATIVE)
    assert all(getattr(effect, name) is not None for name in NUMBERS if name not in RELATIVE)


CONTROL = [3.1, 2.9, 4.0, 3.6, 2.5, 3.3]
TREATMENT = [3.8, 4.1, 3.5, 4.6, 4.0, 3.9, 4.4]


class TestMeanEffect:
    # Means 3.233333 and 4.042857, s² 0.286667 (n=6) and 0.122857 (n=7): s²/n = 0.047778 and 0.017551,
    # SE = sqrt(0.065329) = 0.255595, t = 0.809524 / 0.255595 = 3.15345,
    # df = 0.065329² / (0.047778²/5 + 0.017551²/6) = 8.78219, t_0.975(8.78) = 2.28021, half-width 0.58280.
    # Lift 4.042857/3.233333 − 1 = 0.250368; delta-method SE sqrt(0.017551/3.2333² + 4.0429²·0.047778/3.2333⁴)
    # = 0.093455, times 2.28021 = 0.21309.
    def test_hand_checked(self):
        effect = mean_effect(control=MeanStats.of(CONTROL), treatment=MeanStats.of(TREATMENT))
        assert effect.error is None and effect.method == "welch_t"
        assert (effect.n_control, effect.n_treatment) == (6, 7)
        assert effect.control_value == approx(3.233333)
        assert effect.treatment_value == approx(4.042857)
        assert effect.estimate == approx(0.809524)
        assert effect.ci_low == approx(0.226602)
        assert effect.ci_high == approx(1.392446)
        assert effect.p_value == approx(0.012032)
        assert effect.relative == approx(0.250368)
        assert effect.relative_ci_low == approx(0.037274)
        assert effect.relative_ci_high == approx(0.463462)

    def test_matches_scipy_welch(self):
        effect = mean_effect(control=MeanStats.of(CONTROL), treatment=MeanStats.of(TREATMENT), confidence=0.9)
        result = scipy_stats.ttest_ind(TREATMENT, CONTROL, equal_var=False)
        interval = result.confidence_interval(0.9)
        assert effect.p_value == pytest.approx(result.pvalue, rel=1e-9)
        assert effect.ci_low == pytest.approx(interval.low, rel=1e-9)
        assert effect.ci_high == pytest.approx(interval.high, rel=1e-9)

    def test_arms_swapped_mirror(self):
        forward = mean_effect(control=MeanStats.of(CONTROL), treatment=MeanStats.of(TREATMENT))
        backward = mean_effect(control=MeanStats.of(TREATMENT), treatment=MeanStats.of(CONTROL))
        assert backward.estimate == pytest.approx(-forward.estimate)
        assert backward.ci_low == pytest.approx(-forward.ci_high)
        assert backward.p_value == pytest.approx(forward.p_value)

    def test_one_constant_arm_is_fine(self):
        effect = mean_effect(control=MeanStats.of([2.0, 2.0, 2.0]), treatment=MeanStats.of([1.0, 2.0, 3.0]))
        assert effect.error is None
        assert effect.estimate == approx(0.0)
        assert effect.p_value == approx(1.0)

    def test_too_few_units(self):
        effect = mean_effect(control=MeanStats.of([1.0]), treatment=MeanStats.of(TREATMENT))
        assert_degenerate(effect, TOO_FEW_UNITS)
        assert (effect.n_control, effect.n_treatment) == (1, 7)

    def test_zero_variance(self):
        effect = mean_effect(control=MeanStats.of([2.0] * 5), treatment=MeanStats.of([3.0] * 5))
        assert_degenerate(effect, ZERO_VARIANCE)

    def test_control_mean_zero_keeps_the_difference(self):
        # Control mean 0, s² 2 (s²/n = 1); treatment mean 1.5, s² 0.5 (s²/n = 0.25): SE sqrt(1.25) = 1.118034,
        # t = 1.5/1.118034 = 1.341641, df = 1.25²/(1²/1 + 0.25²/1) = 1.470588, t_0.975(1.47) = 6.188115,
        # half-width 6.918523, p = 0.349886 (scipy.stats.ttest_ind(equal_var=False) gives the same).
        effect = mean_effect(control=MeanStats.of([-1.0, 1.0]), treatment=MeanStats.of([1.0, 2.0]))
        assert_lift_undefined(effect)
        assert effect.control_value == approx(0.0)
        assert effect.estimate == approx(1.5)
        assert effect.ci_low == approx(1.5 - 6.918523)
        assert effect.ci_high == approx(1.5 + 6.918523)
        assert effect.p_value == approx(0.349886)

    @pytest.mark.parametrize("confidence", [0.0, 1.0, 95])
    def test_refuses_bad_confidence(self, confidence):
        with pytest.raises(ValueError):
            mean_effect(
                control=MeanStats.of(CONTROL), treatment=MeanStats.of(TREATMENT), confidence=confidence
            )


class TestProportionEffect:
    # 100/1000 vs 130/1000: difference 0.03; unpooled SE sqrt(0.1·0.9/1000 + 0.13·0.87/1000) = 0.0142513,
    # CI 0.03 ± 1.959964·0.0142513 = [0.002068, 0.057932]. Pooled 0.115: SE sqrt(0.115·0.885·0.002)
    # = 0.0142671, z = 2.10274, p = 0.035488. Lift 0.3; SE sqrt(0.0001131/0.01 + 0.0169·0.00009/0.0001)
    # = 0.163843, CI 0.3 ± 0.321126.
    def test_hand_checked(self):
        effect = proportion_effect(control=Proportion(100, 1000), treatment=Proportion(130, 1000))
        assert effect.error is None and effect.method == "two_proportion_z"
        assert effect.control_value == approx(0.1)
        assert effect.treatment_value == approx(0.13)
        assert effect.estimate == approx(0.03)
        assert effect.ci_low == approx(0.002068)
        assert effect.ci_high == approx(0.057932)
        assert effect.p_value == approx(0.035488)
        assert effect.relative == approx(0.3)
        assert effect.relative_ci_low == approx(-0.019179)
        assert effect.relative_ci_high == approx(0.619179)

    def test_equal_rates(self):
        effect = proportion_effect(control=Proportion(50, 500), treatment=Proportion(50, 500))
        assert effect.estimate == approx(0.0)
        assert effect.p_value == approx(1.0)
        assert effect.ci_low == pytest.approx(-effect.ci_high)

    def test_too_few_units(self):
        assert_degenerate(
            proportion_effect(control=Proportion(0, 0), treatment=Proportion(3, 10)), TOO_FEW_UNITS
        )

    @pytest.mark.parametrize(("control", "treatment"), [(0, 0), (100, 100)])
    def test_zero_variance(self, control, treatment):
        effect = proportion_effect(control=Proportion(control, 100), treatment=Proportion(treatment, 100))
        assert_degenerate(effect, ZERO_VARIANCE)

    def test_control_rate_zero_keeps_the_difference(self):
        # 0/100 vs 4/100: unpooled SE sqrt(0 + 0.04·0.96/100) = 0.0195959, CI 0.04 ± 1.959964·0.0195959
        # = [0.001593, 0.078407]. Pooled 0.02: SE sqrt(0.02·0.98·0.02) = 0.0197990, z = 2.020305,
        # p = 0.043352. The lift 0.04/0 − 1 is undefined.
        effect = proportion_effect(control=Proportion(0, 100), treatment=Proportion(4, 100))
        assert_lift_undefined(effect)
        assert effect.estimate == approx(0.04)
        assert effect.ci_low == approx(0.001593)
        assert effect.ci_high == approx(0.078407)
        assert effect.p_value == approx(0.043352)


# Per user: (review hours, contracts reviewed).
RATIO_CONTROL = [(2.0, 1), (5.0, 3), (1.5, 1), (6.0, 2), (3.0, 2)]
RATIO_TREATMENT = [(1.0, 1), (4.0, 3), (2.5, 2), (3.5, 3), (2.0, 2), (1.5, 1)]


def ratio_variance_from_units(units):
    """The delta-method variance as the sample variance of the linearised units (x − R·y)/ȳ over n."""
    x = np.array([pair[0] for pair in units])
    y = np.array([pair[1] for pair in units], dtype=float)
    ratio = x.sum() / y.sum()
    return float(np.var((x - ratio * y) / y.mean(), ddof=1) / len(units))


class TestRatioStats:
    # Control: R = 17.5/9 = 1.944444, ȳ = 1.8; residuals x − R·y = 0.055556, −0.833333, −0.444444,
    # 2.111111, −0.888889 (sum 0); Σ squares 6.141975 → s² 1.535494, /ȳ² = /3.24 → 0.473918, /n → 0.094784.
    def test_ratio_and_variance_match_raw_units(self):
        stats = RatioStats.of(RATIO_CONTROL)
        assert stats.ratio == approx(1.944444)
        assert stats.ratio_variance == pytest.approx(ratio_variance_from_units(RATIO_CONTROL), rel=1e-9)
        assert stats.ratio_variance == approx(0.094784)

    def test_units_on_one_line_have_zero_variance(self):
        assert RatioStats.of([(0.3, 0.1), (0.6, 0.2), (0.9, 0.3)]).ratio_variance == 0.0

    def test_undefined(self):
        assert RatioStats.of([(1.0, 2.0)]).ratio_variance is None
        assert RatioStats.of([(1.0, 0.0), (2.0, 0.0)]).ratio is None

    def test_refuses_impossible_sums(self):
        with pytest.raises(ValueError):
            RatioStats(n=2, sum_x=1.0, sum_y=1.0, sum_x2=-1.0, sum_y2=1.0, sum_xy=1.0)


class TestRatioEffect:
    # Control 17.5/9 = 1.944444 (Var 0.094784), treatment 14.5/12 = 1.208333 (Var 0.003877, from the units'
    # residuals (x − R·y)/ȳ as above). Difference −0.736111 ± 1.959964·sqrt(0.098661) = ± 0.615631;
    # z = −2.34352, p = 0.019102. Lift 1.208333/1.944444 − 1 = −0.378571.
    def test_hand_checked(self):
        effect = ratio_effect(control=RatioStats.of(RATIO_CONTROL), treatment=RatioStats.of(RATIO_TREATMENT))
        assert effect.error is None and effect.method == "ratio_delta"
        assert effect.control_value == approx(1.944444)
        assert effect.treatment_value == approx(1.208333)
        assert effect.estimate == approx(-0.736111)
        assert effect.ci_low == approx(-1.351742)
        assert effect.ci_high == approx(-0.120480)
        assert effect.p_value == approx(0.019102)
        assert effect.relative == approx(-0.378571)
        assert effect.relative_ci_low == approx(-0.581374)
        assert effect.relative_ci_high == approx(-0.175769)

    def test_standard_error_from_raw_units(self):
        effect = ratio_effect(control=RatioStats.of(RATIO_CONTROL), treatment=RatioStats.of(RATIO_TREATMENT))
        se = math.sqrt(ratio_variance_from_units(RATIO_CONTROL) + ratio_variance_from_units(RATIO_TREATMENT))
        assert (effect.ci_high - effect.ci_low) / 2 == pytest.approx(1.959964 * se, rel=1e-6)
        assert effect.p_value == pytest.approx(2 * scipy_stats.norm.sf(abs(effect.estimate) / se), rel=1e-9)

    def test_too_few_units(self):
        effect = ratio_effect(control=RatioStats.of([(1.0, 1.0)]), treatment=RatioStats.of(RATIO_TREATMENT))
        assert_degenerate(effect, TOO_FEW_UNITS)

    def test_denominator_zero(self):
        effect = ratio_effect(
            control=RatioStats.of([(1.0, 0.0), (2.0, 0.0)]), treatment=RatioStats.of(RATIO_TREATMENT)
        )
        assert_degenerate(effect, DENOMINATOR_ZERO)

    def test_zero_variance(self):
        effect = ratio_effect(
            control=RatioStats.of([(2.0, 1.0), (4.0, 2.0)]), treatment=RatioStats.of([(3.0, 1.0), (6.0, 2.0)])
        )
        assert_degenerate(effect, ZERO_VARIANCE)

    def test_control_ratio_zero_keeps_the_difference(self):
        # Control 0/3 = 0 with zero variance (every x is 0); treatment 1.208333 with Var 0.003877 as above:
        # difference 1.208333 ± 1.959964·sqrt(0.003877) = ± 0.122042, z = 19.4055, p ≈ 7e-84.
        effect = ratio_effect(
            control=RatioStats.of([(0.0, 1.0), (0.0, 2.0)]), treatment=RatioStats.of(RATIO_TREATMENT)
        )
        assert_lift_undefined(effect)
        assert effect.estimate == approx(1.208333)
        half = 1.959964 * math.sqrt(ratio_variance_from_units(RATIO_TREATMENT))
        assert (effect.ci_high - effect.ci_low) / 2 == pytest.approx(half, rel=1e-6)
        assert half == approx(0.122042)
        assert effect.p_value < 1e-80


# (pre-period value, metric) per user; the metric tracks the pre-period closely.
PRE_CONTROL = [10, 12, 8, 15, 11, 9, 14, 13]
X_CONTROL = [11, 13, 9, 17, 12, 9, 15, 15]
PRE_TREATMENT = [9, 13, 11, 14, 10, 12, 16, 8]
X_TREATMENT = [11, 15, 13, 16, 12, 14, 19, 10]
CUPED_CONTROL = CupedStats.of(zip(X_CONTROL, PRE_CONTROL, strict=True))
CUPED_TREATMENT = CupedStats.of(zip(X_TREATMENT, PRE_TREATMENT, strict=True))


class TestCupedAdjust:
    # Control: Σ(x − x̄)(pre − p̄) = 49.5, Σ(pre − p̄)² = 42, Σ(x − x̄)² = 59.875, so cov(x, pre) = 7.071429,
    # var(pre) = 6.0, θ = 49.5/42 = 1.178571; ρ² = 49.5²/(42·59.875) = 0.974351 and the adjusted variance
    # is s_x²(1 − ρ²) = 8.553571 · 0.025649 = 0.219388.
    def test_theta_and_variance_against_numpy(self):
        adjusted = cuped_adjust(stats=CUPED_CONTROL)
        cov = np.cov(X_CONTROL, PRE_CONTROL)
        assert adjusted.theta == pytest.approx(cov[0, 1] / cov[1, 1], rel=1e-9)
        assert adjusted.theta == approx(1.178571)
        assert adjusted.mean == approx(12.625)
        assert adjusted.unadjusted_variance == approx(8.553571)
        assert adjusted.variance == approx(0.219388)
        assert adjusted.variance_reduction == pytest.approx(np.corrcoef(X_CONTROL, PRE_CONTROL)[0, 1] ** 2)

    def test_given_theta_and_pre_mean(self):
        # Mean 12.625 − 1·(11.5 − 12) = 13.125; variance (59.875 − 2·49.5 + 42)/7 = 2.875/7 = 0.410714.
        adjusted = cuped_adjust(stats=CUPED_CONTROL, theta=1.0, pre_mean=12.0)
        assert adjusted.mean == approx(13.125)
        assert adjusted.variance == approx(0.410714)

    def test_constant_pre_changes_nothing(self):
        adjusted = cuped_adjust(stats=CupedStats.of([(1.0, 5.0), (2.0, 5.0), (4.0, 5.0)]))
        assert adjusted.theta == 0.0
        assert adjusted.variance == pytest.approx(adjusted.unadjusted_variance)
        assert adjusted.variance_reduction == 0.0

    def test_too_few_units(self):
        adjusted = cuped_adjust(stats=CupedStats.of([(1.0, 2.0)]))
        assert adjusted.error == TOO_FEW_UNITS and adjusted.mean is None and adjusted.theta is None


class TestCupedEffect:
    # Pooled θ = (S_xp,c + S_xp,t)/(S_pp,c + S_pp,t) = (49.5 + 54.25)/(42 + 49.875) = 1.129252, the
    # slope of pre in the ANCOVA x ~ 1 + arm + pre; the effect equals the ANCOVA arm coefficient 0.983844.
    def test_theta_is_pooled_within_arms(self):
        cov_c, cov_t = np.cov(X_CONTROL, PRE_CONTROL), np.cov(X_TREATMENT, PRE_TREATMENT)
        # Equal n, so the (n − 1) weights cancel.
        pooled = (cov_c[0, 1] + cov_t[0, 1]) / (cov_c[1, 1] + cov_t[1, 1])
        assert cuped_theta(control=CUPED_CONTROL, treatment=CUPED_TREATMENT) == pytest.approx(
            pooled, rel=1e-9
        )
        assert pooled == approx(1.129252)

    def test_hand_checked(self):
        result = cuped_effect(control=CUPED_CONTROL, treatment=CUPED_TREATMENT)
        effect = result.effect
        assert effect.error is None and effect.method == "cuped_welch_t"
        assert result.theta == approx(1.129252)
        assert effect.control_value == approx(12.695578)
        assert effect.treatment_value == approx(13.679422)
        assert effect.estimate == approx(0.983844)
        assert effect.ci_low == approx(0.547914)
        assert effect.ci_high == approx(1.419773)
        assert effect.p_value == approx(0.000395)
        assert effect.relative == approx(0.077495)
        assert result.variance_reduction == approx(0.981444)

    def test_matches_ancova_and_welch_on_adjusted_units(self):
        result = cuped_effect(control=CUPED_CONTROL, treatment=CUPED_TREATMENT)
        design = np.column_stack([np.ones(16), [0] * 8 + [1] * 8, PRE_CONTROL + PRE_TREATMENT])
        coefficients = np.linalg.lstsq(design, np.array(X_CONTROL + X_TREATMENT, dtype=float), rcond=None)[0]
        assert result.effect.estimate == pytest.approx(coefficients[1], rel=1e-9)
        assert result.theta == pytest.approx(coefficients[2], rel=1e-9)
        grand = np.mean(PRE_CONTROL + PRE_TREATMENT)
        adjusted_c = np.array(X_CONTROL) - result.theta * (np.array(PRE_CONTROL) - grand)
        adjusted_t = np.array(X_TREATMENT) - result.theta * (np.array(PRE_TREATMENT) - grand)
        welch = scipy_stats.ttest_ind(adjusted_t, adjusted_c, equal_var=False)
        assert result.effect.p_value == pytest.approx(welch.pvalue, rel=1e-9)
        assert result.effect.control_value == pytest.approx(adjusted_c.mean())

    def test_narrower_than_unadjusted(self):
        result = cuped_effect(control=CUPED_CONTROL, treatment=CUPED_TREATMENT)
        plain = mean_effect(control=MeanStats.of(X_CONTROL), treatment=MeanStats.of(X_TREATMENT))
        assert plain.p_value == approx(0.453793)  # not significant without the covariate
        assert result.effect.ci_high - result.effect.ci_low < (plain.ci_high - plain.ci_low) / 5
        assert result.variance_reduction > 0.9

    def test_theta_zero_is_the_plain_welch_test(self):
        result = cuped_effect(control=CUPED_CONTROL, treatment=CUPED_TREATMENT, theta=0.0)
        plain = mean_effect(control=MeanStats.of(X_CONTROL), treatment=MeanStats.of(X_TREATMENT))
        assert result.effect.estimate == pytest.approx(plain.estimate)
        assert result.effect.p_value == pytest.approx(plain.p_value)
        assert result.variance_reduction == approx(0.0)

    def test_too_few_units(self):
        result = cuped_effect(control=CupedStats.of([(1.0, 1.0)]), treatment=CUPED_TREATMENT)
        assert_degenerate(result.effect, TOO_FEW_UNITS)
        assert result.theta is None and result.variance_reduction is None

    def test_zero_variance(self):
        constant = CupedStats.of([(3.0, 1.0), (3.0, 2.0), (3.0, 3.0)])
        assert_degenerate(cuped_effect(control=constant, treatment=constant).effect, ZERO_VARIANCE)


SEQ_CONTROL = MeanStats(n=200, total=200.0, total_squares=399.0)
SEQ_TREATMENT = MeanStats(n=200, total=300.0, total_squares=649.0)


def scaled(stats: MeanStats, factor: int) -> MeanStats:
    """The same mean and (nearly) the same variance on `factor` times the units."""
    return MeanStats(
        n=stats.n * factor, total=stats.total * factor, total_squares=stats.total_squares * factor
    )


class TestSequentialInterval:
    # τ = 0.1, α = 0.05: half-width sqrt(V(V + τ²)/τ² · log((V + τ²)/(V·α²))) = sqrt(0.02 · log 800)
    # = sqrt(0.02 · 6.684612) = 0.365639; log Λ = ½·log(0.01/0.02) + τ²·0.25/(2·0.01·0.02) = 5.903426,
    # always-valid p = e^−5.903426 = 0.002730.
    def test_hand_checked(self):
        effect = sequential_interval(control=SEQ_CONTROL, treatment=SEQ_TREATMENT, tau=0.1)
        assert effect.error is None and effect.method == "normal_mixture_sequential"
        assert effect.estimate == approx(0.5)
        assert effect.ci_low == approx(0.5 - 0.365639)
        assert effect.ci_high == approx(0.5 + 0.365639)
        assert effect.p_value == approx(0.002730)
        assert effect.relative is None and effect.relative_error == NO_RELATIVE

    def test_is_howard_boundary_over_information(self):
        # Howard et al. (2021) two-sided normal mixture: |S| < sqrt((v + ρ)·log((v + ρ)/(ρ·α²))), with
        # v = I = 1/V, ρ = 1/τ², S = Δ̂·I; the half-width on Δ is the boundary over I.
        information, rho, alpha = 100.0, 1 / 0.01, 0.05
        boundary = math.sqrt((information + rho) * math.log((information + rho) / (rho * alpha**2)))
        effect = sequential_interval(control=SEQ_CONTROL, treatment=SEQ_TREATMENT, tau=0.1)
        assert (effect.ci_high - effect.ci_low) / 2 == pytest.approx(boundary / information)

    @pytest.mark.parametrize("factor", [1, 4, 16, 64])
    def test_wider_than_fixed_horizon(self, factor):
        control, treatment = scaled(SEQ_CONTROL, factor), scaled(SEQ_TREATMENT, factor)
        sequential = sequential_interval(control=control, treatment=treatment, tau=0.1)
        fixed = mean_effect(control=control, treatment=treatment)
        assert sequential.ci_low < fixed.ci_low and sequential.ci_high > fixed.ci_high

    def test_shrinks_with_n(self):
        widths = []
        for factor in (1, 4, 16, 64, 256):
            effect = sequential_interval(
                control=scaled(SEQ_CONTROL, factor), treatment=scaled(SEQ_TREATMENT, factor), tau=0.1
            )
            widths.append(effect.ci_high - effect.ci_low)
        assert widths == sorted(widths, reverse=True)
        assert widths[-1] < widths[0] / 10

    @pytest.mark.parametrize("shift", [-1e-6, 1e-6])
    def test_p_value_agrees_with_the_interval(self, shift):
        # Λ ≥ 1/α exactly when 0 is outside the interval: put the estimate just inside / outside.
        half = math.sqrt(0.02 * math.log(800))
        mean = 1.0 + half + shift
        treatment = MeanStats(n=200, total=200 * mean, total_squares=199.0 + 200 * mean**2)
        effect = sequential_interval(control=SEQ_CONTROL, treatment=treatment, tau=0.1)
        assert (effect.ci_low > 0) == (effect.p_value < 0.05) == (shift > 0)

    def test_too_few_units(self):
        effect = sequential_interval(control=MeanStats.of([1.0]), treatment=SEQ_TREATMENT, tau=0.1)
        assert_degenerate(effect, TOO_FEW_UNITS)

    def test_zero_variance(self):
        effect = sequential_interval(
            control=MeanStats.of([1.0, 1.0]), treatment=MeanStats.of([2.0, 2.0]), tau=0.1
        )
        assert_degenerate(effect, ZERO_VARIANCE)

    @pytest.mark.parametrize("tau", [0.0, -1.0, math.inf])
    def test_refuses_bad_tau(self, tau):
        with pytest.raises(ValueError):
            sequential_interval(control=SEQ_CONTROL, treatment=SEQ_TREATMENT, tau=tau)


class TestSequentialHalfWidth:
    def test_hand_checked(self):
        # As above: V = 0.01, τ = 0.1, α = 0.05 → sqrt(0.02 · log 800) = 0.365639. At α = 0.1, τ = 0.2:
        # sqrt(0.01·0.05/0.04 · log(0.05/(0.01·0.01))) = sqrt(0.0125 · log 500) = 0.278717.
        assert sequential_half_width(variance=0.01, tau=0.1) == approx(0.365639)
        assert sequential_half_width(variance=0.01, tau=0.2, confidence=0.9) == approx(0.278717)

    def test_grows_with_variance(self):
        widths = [sequential_half_width(variance=v, tau=0.2) for v in (1e-6, 1e-4, 1e-2, 1.0, 100.0)]
        assert widths == sorted(widths)

    @pytest.mark.parametrize(("variance", "tau"), [(0.0, 0.1), (-1.0, 0.1), (math.nan, 0.1), (0.01, 0.0)])
    def test_refuses_bad_input(self, variance, tau):
        with pytest.raises(ValueError):
            sequential_half_width(variance=variance, tau=tau)


class TestEffect:
    def test_to_dict(self):
        effect = mean_effect(control=MeanStats.of([1.0]), treatment=MeanStats.of([2.0, 3.0]))
        data = effect.to_dict()
        assert data["error"] == TOO_FEW_UNITS and data["method"] == "welch_t" and data["estimate"] is None
        assert data["relative_error"] is None

    def test_to_dict_without_lift(self):
        effect = proportion_effect(control=Proportion(0, 100), treatment=Proportion(4, 100))
        data = effect.to_dict()
        assert data["error"] is None and data["relative_error"] == CONTROL_ZERO
        assert data["estimate"] == approx(0.04) and data["relative"] is None


def _ratio_cuped_units(rng, n, *, effect=1.0, no_pre_share=0.3):
    """Users with a speed u: x = hours over y contracts, px over py contracts before exposure."""
    u = rng.lognormal(0, 0.5, n)
    y = rng.integers(1, 4, n).astype(float)
    py = rng.integers(0, 4, n).astype(float) * (rng.random(n) >= no_pre_share)
    x = rng.gamma(2 * y, u * effect)
    px = np.where(py > 0, rng.gamma(np.maximum(2 * py, 1e-9), u), 0.0)
    return x, y, px, py


class TestRatioCuped:
    def _brute_force(self, arms):
        """Per-unit linearisations in numpy, the adjusted ratios and their variances of the mean."""
        lin = []
        for x, y, px, py in arms:
            r, rp = x.sum() / y.sum(), px.sum() / py.sum()
            lin.append(((x - r * y) / y.mean(), (px - rp * py) / py.mean(), r, rp))
        n1 = [len(z) - 1 for z, *_ in lin]
        theta = sum(np.cov(z, w)[0, 1] * k for (z, w, *_), k in zip(lin, n1, strict=True)) / sum(
            np.var(w, ddof=1) * k for (z, w, *_), k in zip(lin, n1, strict=True)
        )
        pooled = sum(px.sum() for _, _, px, _ in arms) / sum(py.sum() for *_, py in arms)
        out = []
        for z, w, r, rp in lin:
            out.append((r - theta * (rp - pooled), np.var(z - theta * w, ddof=1) / len(z)))
        return theta, out

    def test_matches_the_per_unit_linearisation(self):
        rng = np.random.default_rng(3)
        arms = [_ratio_cuped_units(rng, 400), _ratio_cuped_units(rng, 350, effect=0.9)]
        control, treatment = (RatioCupedStats.of(zip(*arm, strict=True)) for arm in arms)
        result = ratio_cuped_effect(control=control, treatment=treatment, confidence=0.9)
        theta, ((mean_c, var_c), (mean_t, var_t)) = self._brute_force(arms)
        effect = result.effect
        assert result.theta == pytest.approx(theta, rel=1e-9)
        assert effect.method == "cuped_ratio_delta" and effect.error is None
        assert effect.control_value == pytest.approx(mean_c, rel=1e-9)
        assert effect.estimate == pytest.approx(mean_t - mean_c, rel=1e-9)
        half = scipy_stats.norm.ppf(0.95) * math.sqrt(var_c + var_t)
        assert effect.ci_high - effect.estimate == pytest.approx(half, rel=1e-9)
        plain = ratio_effect(control=control.post, treatment=treatment.post)
        unadjusted = ((plain.ci_high - plain.estimate) / scipy_stats.norm.ppf(0.975)) ** 2
        assert result.variance_reduction == pytest.approx(1 - (var_c + var_t) / unadjusted, rel=1e-9)
        # A user's speed shows in both periods (with gamma noise, and 30 % without pre-period data).
        assert 0.05 < result.variance_reduction < 0.5
        assert control.pre_units == int((arms[0][3] > 0).sum())

    def test_without_pre_period_data_it_is_the_delta_method(self):
        rng = np.random.default_rng(4)
        arms = [_ratio_cuped_units(rng, 200, no_pre_share=1.0) for _ in range(2)]
        control, treatment = (RatioCupedStats.of(zip(*arm, strict=True)) for arm in arms)
        result = ratio_cuped_effect(control=control, treatment=treatment)
        plain = ratio_effect(control=control.post, treatment=treatment.post)
        assert result.theta == 0.0 and result.variance_reduction == 0.0 and control.pre_units == 0
        for field in ("estimate", "ci_low", "ci_high", "p_value", "relative"):
            assert getattr(result.effect, field) == pytest.approx(getattr(plain, field), rel=1e-12)

    def test_degenerate_input_is_an_error_not_an_exception(self):
        one = RatioCupedStats.of([(1.0, 1.0, 0.0, 0.0)])
        assert ratio_cuped_effect(control=one, treatment=one).effect.error == TOO_FEW_UNITS
        zero_y = RatioCupedStats.of([(0.0, 0.0, 1.0, 1.0), (0.0, 0.0, 2.0, 1.0)])
        assert ratio_cuped_effect(control=zero_y, treatment=zero_y).effect.error == DENOMINATOR_ZERO

    def test_impossible_sums_raise(self):
        good = RatioCupedStats.of([(1.0, 1.0, 2.0, 1.0), (3.0, 2.0, 0.0, 0.0)])
        with pytest.raises(ValueError, match="Σpx²"):
            RatioCupedStats(**{**vars(good), "sum_px2": 1.0})
        with pytest.raises(ValueError, match="pre units"):
            RatioCupedStats(**{**vars(good), "pre_units": 3})
