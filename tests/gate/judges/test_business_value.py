import json
import math
from dataclasses import asdict

import pytest
from scipy import stats as scipy_stats

from engines.reasons import Term, reason
from engines.stats.effects import ratio_effect, sequential_half_width, sequential_interval
from engines.stats.sufficient import MeanStats, RatioCupedStats, RatioStats
from gate.judges.business_value import BusinessValueCode as Code
from gate.judges.business_value import FixedHorizon, business_value_judge, fixed_horizon_units
from gate.judges.verdict import ERROR, FAIL, INSUFFICIENT, PASS
from tests.wordings import english


def approx(value):
    return pytest.approx(value, abs=5e-6)


# Review hours per contract, each outcome its own unit. Control: n = 200, mean 2.0, s² = (999 − 400²/200)/199
# = 1.0; treatment: n = 200, mean 1.7, s² = (777 − 340²/200)/199 = 1.0. V = 1/200 + 1/200 = 0.01, SE 0.1,
# Welch df = 0.01²/(2·0.005²/199) = 398, t_0.95(398) = 1.648691: the 90 % interval of treatment − control is
# −0.3 ± 0.164869, so the improvement (decrease is better) is 0.3, [0.135131, 0.464869].
CONTROL = MeanStats(n=200, total=400.0, total_squares=999.0)
TREATMENT = MeanStats(n=200, total=340.0, total_squares=777.0)

# Per user (review hours, contracts), as in test_ab_stats: control 17.5/9 = 1.944444 (Var 0.094784),
# treatment 14.5/12 = 1.208333 (Var 0.003877).
RATIO_CONTROL = RatioStats.of([(2.0, 1), (5.0, 3), (1.5, 1), (6.0, 2), (3.0, 2)])
RATIO_TREATMENT = RatioStats.of([(1.0, 1), (4.0, 3), (2.5, 2), (3.5, 3), (2.0, 2), (1.5, 1)])


def judge(**settings):
    settings.setdefault("baseline", CONTROL)
    settings.setdefault("candidate", TREATMENT)
    settings.setdefault("direction", "decrease")
    return business_value_judge(**settings)


class TestFixedHorizon:
    def test_pass_hand_checked(self):
        result = judge(min_effect=0.1)
        assert result.verdict == PASS and result.method == "welch_t" and not result.sequential
        assert asdict(result.improvement) == {
            "estimate": approx(0.3),
            "ci_low": approx(0.135131),
            "ci_high": approx(0.464869),
            "confidence": approx(0.9),
            "one_sided_level": approx(0.95),
            "units_needed": None,
        }
        assert english(result.reasons) == [
            "improvement (decrease is better) 0.3, 90 % interval [0.1351, 0.4649]: lower bound 0.1351 >= the "
            "minimum effect 0.1 (one-sided test at alpha 0.05)"
        ]
        assert asdict(result.baseline) == {"units": 200, "value": approx(2.0)}
        assert asdict(result.candidate) == {"units": 200, "value": approx(1.7)}
        assert result.srm is None

    def test_raw_effect_and_lift(self):
        # Lift 1.7/2 − 1 = −0.15, delta-method SE sqrt(0.005/2² + 1.7²·0.005/2⁴) = sqrt(0.002153125)
        # = 0.046402, times 1.648691: ± 0.076503. The p-value is Welch's two-sided p for t = −3 on 398 df.
        effect = judge(min_effect=0.1).effect
        assert effect.estimate == approx(-0.3)
        assert (effect.ci_low, effect.ci_high) == (approx(-0.464869), approx(-0.135131))
        assert effect.relative == approx(-0.15)
        assert (effect.relative_ci_low, effect.relative_ci_high) == (
            approx(-0.226502),
            approx(-0.073498),
        )
        assert effect.p_value == pytest.approx(2 * scipy_stats.t.sf(3, 398), rel=1e-9)

    def test_lower_bound_equal_to_the_minimum_effect_passes(self):
        bound = judge(min_effect=0.1).improvement.ci_low
        assert judge(min_effect=bound).verdict == PASS

    def test_not_shown_yet_is_insufficient_data_with_units_needed(self):
        # Lower bound 0.135131 < 0.2 although the estimate 0.3 clears it: with z_0.95 = 1.644854 the units
        # per arm for the bound to reach 0.2 are 200·(1.644854·0.1/(0.3 − 0.2))² = 200·2.705544 = 541.1 → 542.
        result = judge(min_effect=0.2)
        assert result.verdict == INSUFFICIENT
        assert result.improvement.units_needed == {"baseline": 542, "candidate": 542}
        assert english(result.reasons) == [
            "improvement (decrease is better) 0.3, 90 % interval [0.1351, 0.4649]: lower bound 0.1351 is "
            "below the minimum effect 0.2",
            "not shown yet: the estimate clears the minimum effect 0.2 but the bound does not; about 542 "
            "baseline and 542 candidate units would show it if the effect held at its estimate",
        ]

    def test_wrong_direction_fails_without_a_sample_size(self):
        # "increase is better": the improvement is −0.3, [−0.464869, −0.135131].
        result = judge(direction="increase")
        assert result.verdict == FAIL
        assert result.improvement.estimate == approx(-0.3)
        assert result.improvement.ci_low == approx(-0.464869)
        assert result.improvement.units_needed is None
        assert english(result.reasons) == [
            "improvement (increase is better) -0.3, 90 % interval [-0.4649, -0.1351]: lower bound -0.4649 is "
            "not above 0 (no improvement shown)"
        ]

    def test_alpha_sets_the_one_sided_level(self):
        # alpha 0.01: the 98 % interval, t_0.99(398) = 2.336; lower bound 0.3 − 0.2336 = 0.0664 > 0.
        result = judge(alpha=0.01)
        assert result.verdict == PASS
        assert result.improvement.confidence == approx(0.98)
        assert result.improvement.ci_low == pytest.approx(0.3 - 0.1 * scipy_stats.t.ppf(0.99, 398))

    def test_ratio_metric_hand_checked(self):
        # Difference −0.736111, SE sqrt(0.094784 + 0.003877) = 0.314103, z_0.95 = 1.644854: improvement
        # 0.736111 ± 0.516656 = [0.219455, 1.252767], above 0.2. Lift −0.378571 with the delta-method SE
        # 0.103473 (from the 95 % interval in test_ab_stats) ± 1.644854·0.103473 = ± 0.170198.
        result = judge(baseline=RATIO_CONTROL, candidate=RATIO_TREATMENT, min_effect=0.2, min_units=2)
        assert result.verdict == PASS and result.method == "ratio_delta"
        assert result.improvement.estimate == approx(0.736111)
        assert result.improvement.ci_low == approx(0.219457)
        assert result.improvement.ci_high == approx(1.252765)
        assert result.effect.relative == approx(-0.378571)
        assert result.effect.relative_ci_low == approx(-0.548769)
        assert asdict(result.baseline) == {"units": 5, "value": approx(1.944444)}
        assert asdict(result.candidate) == {"units": 6, "value": approx(1.208333)}


class TestSequential:
    def test_hand_checked(self):
        # V = 0.01, τ = 0.2, confidence 1 − 2·0.05 = 0.9 (α' = 0.1): half-width
        # sqrt(0.01·0.05/0.04 · log(0.05/(0.01·0.1²))) = sqrt(0.0125 · log 500) = 0.278717, so the
        # improvement interval is 0.3 ± 0.278717 = [0.021283, 0.578717]: above 0, but wider than the fixed
        # [0.1351, 0.4649].
        result = judge(sequential_tau=0.2)
        assert result.verdict == PASS and result.sequential
        assert result.method == "normal_mixture_sequential"
        assert result.improvement.ci_low == approx(0.021283)
        assert result.improvement.ci_high == approx(0.578717)
        assert "90 % always-valid interval [0.02128, 0.5787]" in english(result.reasons)[0]
        # The reported effect stays the fixed-horizon one, with its lift.
        assert result.effect.method == "welch_t" and result.effect.relative == approx(-0.15)

    def test_not_shown_yet_where_the_fixed_horizon_passes(self):
        assert judge(min_effect=0.1).verdict == PASS
        result = judge(min_effect=0.1, sequential_tau=0.2)
        assert result.verdict == INSUFFICIENT
        # Units needed: the n at which the mixture half-width shrinks to 0.3 − 0.1 = 0.2, V falling as 1/n.
        needed = result.improvement.units_needed["baseline"]
        assert needed == 383
        assert sequential_half_width(variance=0.01 * 200 / needed, tau=0.2, confidence=0.9) <= 0.2
        assert sequential_half_width(variance=0.01 * 200 / (needed - 1), tau=0.2, confidence=0.9) > 0.2

    def test_ratio_is_linearised_by_the_delta_method(self):
        # The pseudo-units have the ratio as their mean and n·Var(R̂) as their sample variance, so
        # sequential_interval sees V = Var(R̂_c) + Var(R̂_t) = 0.098661.
        for stats in (RATIO_CONTROL, RATIO_TREATMENT):
            units = stats.linearised()
            assert units.n == stats.n and units.mean == pytest.approx(stats.ratio, rel=1e-12)
            assert units.variance / units.n == pytest.approx(stats.ratio_variance, rel=1e-9)
        result = judge(
            baseline=RATIO_CONTROL, candidate=RATIO_TREATMENT, min_units=2, sequential_tau=0.5, min_effect=0.2
        )
        half = sequential_half_width(variance=0.0986613, tau=0.5, confidence=0.9)
        assert result.improvement.estimate == approx(0.736111)
        assert (result.improvement.ci_high - result.improvement.ci_low) / 2 == pytest.approx(half, rel=1e-5)
        direct = sequential_interval(
            control=RATIO_CONTROL.linearised(),
            treatment=RATIO_TREATMENT.linearised(),
            tau=0.5,
            confidence=0.9,
        )
        assert result.improvement.ci_low == pytest.approx(-direct.ci_high)
        # [−0.162421, 1.634643] holds 0.2 while the estimate clears it: not shown yet, with a larger
        # sample per arm suggested.
        assert result.verdict == INSUFFICIENT
        assert result.improvement.units_needed["baseline"] > RATIO_CONTROL.n

    def test_linearising_refuses_undefined_ratios(self):
        with pytest.raises(ValueError):
            RatioStats.of([(1.0, 1.0)]).linearised()


class TestSampleRatioMismatch:
    def test_mismatch_is_an_error_whatever_the_effect(self):
        # 5400 vs 4600 against 50/50: chi² = 2·400²/5000 = 64 on 1 df, p = 2·(1 − Φ(8)) = 1.24e-15.
        result = judge(min_effect=0.1, assigned_units=(5400, 4600), expected_candidate_share=0.5)
        assert result.verdict == ERROR
        assert result.improvement is None
        assert result.srm.chi_square == approx(64.0)
        assert result.srm.p_value == pytest.approx(2 * scipy_stats.norm.sf(8), rel=1e-6)
        assert result.srm.mismatch is True
        assert english(result.reasons) == [
            "sample ratio mismatch: 5400 baseline and 4600 candidate units assigned against an expected "
            "candidate share 0.5 (chi-square 64.00, p = 1.24e-15 < 0.001): the assignment or logging is "
            "broken, the effect is not trusted"
        ]

    def test_within_chance_is_reported_and_does_not_decide(self):
        # 5050 vs 4950: chi² = 1, p = 0.317311.
        result = judge(min_effect=0.1, assigned_units=(5050, 4950), expected_candidate_share=0.5)
        assert result.verdict == PASS
        assert result.srm.p_value == approx(0.317311) and result.srm.mismatch is False
        assert result.srm.counts == (5050, 4950)

    def test_canary_split(self):
        # 90/10 split, 9000/1000 exactly as expected: chi² 0.
        result = judge(assigned_units=(9000, 1000), expected_candidate_share=0.1)
        assert result.srm.expected_counts == (pytest.approx(9000.0), pytest.approx(1000.0))
        assert result.srm.chi_square == approx(0.0)

    @pytest.mark.parametrize(
        "settings", [{"assigned_units": (5400, 4600)}, {"expected_candidate_share": 0.5}]
    )
    def test_not_checked_without_both_counts_and_share(self, settings):
        result = judge(min_effect=0.1, **settings)
        assert result.verdict == PASS and result.srm is None

    def test_mismatch_outranks_too_few_units(self):
        result = judge(min_units=1000, assigned_units=(5400, 4600), expected_candidate_share=0.5)
        assert result.verdict == ERROR


class TestInsufficientData:
    def test_too_few_units(self):
        result = judge(min_units=300)
        assert result.verdict == INSUFFICIENT and result.improvement is None
        assert result.reasons == [
            reason(Code.TOO_FEW_UNITS, arm=Term("baseline"), n=200, need=300),
            reason(Code.TOO_FEW_UNITS, arm=Term("candidate"), n=200, need=300),
        ]

    def test_default_minimum(self):
        result = judge(baseline=RATIO_CONTROL, candidate=RATIO_TREATMENT)
        assert result.verdict == INSUFFICIENT
        assert english(result.reasons)[0] == "baseline has 5 units, the policy needs at least 100"

    def test_zero_variance(self):
        constant = MeanStats(n=150, total=300.0, total_squares=600.0)
        result = judge(baseline=constant, candidate=MeanStats(n=150, total=150.0, total_squares=150.0))
        assert result.verdict == INSUFFICIENT
        assert result.reasons == [reason(Code.NO_EFFECT, why="zero variance")]
        assert result.effect.error == "zero variance"

    def test_zero_denominator(self):
        empty = RatioStats(n=150, sum_x=0.0, sum_y=0.0, sum_x2=0.0, sum_y2=0.0, sum_xy=0.0)
        result = judge(baseline=empty, candidate=RATIO_TREATMENT, min_units=2, sequential_tau=0.2)
        assert result.verdict == INSUFFICIENT
        assert english(result.reasons) == ["the effect cannot be estimated: denominator mean is zero"]


class TestReport:
    def test_as_dict_is_json(self):
        result = judge(min_effect=0.2, assigned_units=(5050, 4950), expected_candidate_share=0.5)
        data = json.loads(json.dumps(asdict(result)))
        assert data["verdict"] == INSUFFICIENT
        assert data["improvement"]["units_needed"] == {"baseline": 542, "candidate": 542}
        assert set(data) == {
            "verdict",
            "reasons",
            "method",
            "direction",
            "min_effect",
            "alpha",
            "improvement",
            "effect",
            "baseline",
            "candidate",
            "srm",
            "sequential",
            "horizon",
            "cuped",
            "blind",
            "unblinded",
        }

    def test_control_zero_keeps_the_decision(self):
        # A zero control mean leaves the lift undefined but the difference, and so the verdict, intact.
        zero = MeanStats(n=150, total=0.0, total_squares=150.0)
        result = judge(
            baseline=zero, candidate=MeanStats(n=150, total=75.0, total_squares=187.5), direction="increase"
        )
        assert result.verdict == PASS
        assert result.effect.relative is None and result.effect.relative_error == "control mean is zero"


class TestValidation:
    @pytest.mark.parametrize(
        ("settings", "name"),
        [
            ({"direction": "down"}, "direction"),
            ({"min_effect": -0.1}, "min_effect"),
            ({"min_effect": math.nan}, "min_effect"),
            ({"alpha": 0.0}, "alpha"),
            ({"alpha": 0.5}, "alpha"),
            ({"min_units": 1}, "min_units"),
            ({"min_units": 10.5}, "min_units"),
            ({"assigned_units": (10, 10), "expected_candidate_share": 1.0}, "expected_candidate_share"),
            ({"assigned_units": (10, -1), "expected_candidate_share": 0.5}, "assigned_units"),
            ({"assigned_units": (10, 10, 10), "expected_candidate_share": 0.5}, "assigned_units"),
            ({"srm_alpha": 0.0}, "srm_alpha"),
            ({"sequential_tau": 0.0}, "sequential_tau"),
            ({"sequential_tau": math.inf}, "sequential_tau"),
        ],
    )
    def test_refuses_bad_settings(self, settings, name):
        with pytest.raises(ValueError, match=name):
            judge(**settings)

    def test_refuses_mixed_statistics(self):
        with pytest.raises(TypeError, match="RatioStats"):
            judge(baseline=CONTROL, candidate=RATIO_TREATMENT)

    def test_ratio_effect_agrees(self):
        # The judge's interval is ratio_effect's at 1 − 2·alpha, turned around for "decrease".
        effect = ratio_effect(control=RATIO_CONTROL, treatment=RATIO_TREATMENT, confidence=0.9)
        result = judge(baseline=RATIO_CONTROL, candidate=RATIO_TREATMENT, min_units=2)
        assert result.improvement.ci_low == pytest.approx(-effect.ci_high)
        assert result.effect == effect


class TestRegisteredHorizon:
    HORIZON = FixedHorizon(
        units_per_arm=300, basis="sd 1 from the policy", registered_at="2026-12-01T10:00:00Z"
    )

    def test_sized_by_hand(self):
        # z_0.95 + z_0.8 = 1.644854 + 0.841621 = 2.486475; 2 · 1² · 2.486475² / 0.2² = 309.13 → 310.
        assert fixed_horizon_units(sd=1.0, min_effect=0.0, mde=0.2, alpha=0.05, power=0.8) == 310
        # Against a bar of 0.1 the margin is 0.1: four times the units.
        assert fixed_horizon_units(sd=1.0, min_effect=0.1, mde=0.2, alpha=0.05, power=0.8) == 1237
        with pytest.raises(ValueError):
            fixed_horizon_units(sd=1.0, min_effect=0.2, mde=0.2, alpha=0.05, power=0.8)

    def test_before_the_horizon_is_insufficient_data_stating_it(self):
        # The same numbers pass without a horizon (TestFixedHorizon): 200 units are short of 300.
        result = judge(min_effect=0.1, horizon=self.HORIZON)
        assert result.verdict == INSUFFICIENT and result.improvement is None
        assert result.horizon == self.HORIZON and result.blind and result.unblinded is None
        assert english(result.reasons) == [
            "before the registered horizon of 300 units per arm (200 baseline and 200 candidate units so "
            "far; sd 1 from the policy): the fixed-horizon test is judged once, at the horizon; set "
            "business_sequential_tau (fixed before the experiment) for an interval that may be judged at "
            "every look"
        ]

    def test_at_the_horizon_it_decides_once(self):
        horizon = FixedHorizon(units_per_arm=200, basis="sd 1 from the policy")
        assert judge(min_effect=0.1, horizon=horizon).verdict == PASS
        # Where the bound misses but the estimate clears the bar, no "more units would show it": a fail.
        result = judge(min_effect=0.2, horizon=horizon)
        assert result.verdict == FAIL and result.improvement.units_needed is None
        assert "at the registered horizon of 200 units per arm" in english(result.reasons)[0]

    def test_before_the_horizon_the_result_is_blind(self):
        # Only the units per arm and the sample-ratio check: no estimate, interval, p or per-arm value.
        result = judge(
            min_effect=0.1, horizon=self.HORIZON, assigned_units=(205, 195), expected_candidate_share=0.5
        )
        assert result.blind and result.improvement is None and result.cuped is None
        assert asdict(result.baseline) == {"units": 200, "value": None}
        assert asdict(result.candidate) == {"units": 200, "value": None}
        numbers = {
            k: v for k, v in asdict(result.effect).items() if k not in ("method", "n_control", "n_treatment")
        }
        assert set(numbers.values()) == {None}
        assert result.srm is not None and result.srm.p_value is not None and not result.srm.mismatch
        text = json.dumps(asdict(result))
        for hidden in ("0.3", "0.135", "0.464", "1.7"):
            assert hidden not in text

    def test_a_sample_ratio_mismatch_under_a_horizon_is_blind_too(self):
        horizon = FixedHorizon(units_per_arm=200, basis="sd 1 from the policy")
        result = judge(
            min_effect=0.1, horizon=horizon, assigned_units=(300, 100), expected_candidate_share=0.5
        )
        assert result.verdict == ERROR and result.blind and result.improvement is None

    def test_unblinded_before_the_horizon_shows_the_interim_numbers_and_who(self):
        from gate.judges.plan import Unblinding

        unblinded = Unblinding(by="rm", at="2025-01-02T03:04:05+00:00", reason="a safety review")
        result = judge(min_effect=0.1, horizon=self.HORIZON, unblinded=unblinded)
        assert result.verdict == INSUFFICIENT and not result.blind and result.unblinded == unblinded
        assert result.improvement.estimate == approx(0.3) and result.improvement.ci_low == approx(0.135131)
        assert result.baseline.value == approx(2.0) and result.effect.p_value is not None
        assert english(result.reasons)[-1] == (
            "unblinded by rm at 2025-01-02 03:04:05: a safety review; interim numbers, not a decision: "
            "improvement (decrease is better) 0.3, 90 % interval [0.1351, 0.4649], read before the horizon"
        )

    def test_no_registered_horizon_is_insufficient_data(self):
        horizon = FixedHorizon(units_per_arm=None, basis="the policy sets no business_mde")
        result = judge(min_effect=0.1, horizon=horizon)
        assert result.verdict == INSUFFICIENT
        assert english(result.reasons)[0].startswith(
            "no fixed horizon was registered: the policy sets no business_mde"
        )

    def test_the_sequential_test_ignores_the_horizon(self):
        # V = 0.01, τ = 0.3, 90 %: half-width sqrt(0.01·0.1/0.09 · log(0.1/(0.01·0.01))) = 0.277043, so the
        # bound 0.3 − 0.277043 = 0.022957 clears 0 at 200 units, short of the 300 registered.
        result = judge(min_effect=0.0, horizon=self.HORIZON, sequential_tau=0.3)
        assert result.horizon is None and result.sequential
        assert result.verdict == PASS and result.improvement.ci_low == approx(0.022957)


class TestCuped:
    # Per user (hours, contracts, pre-period hours, pre-period contracts); one user per arm has no history.
    CONTROL = RatioCupedStats.of(
        [(2.0, 1, 2.2, 1), (5.0, 3, 4.0, 2), (1.5, 1, 0.0, 0), (6.0, 2, 5.5, 2), (3.0, 2, 3.2, 2)]
    )
    TREATMENT = RatioCupedStats.of(
        [
            (1.0, 1, 1.4, 1),
            (4.0, 3, 4.4, 3),
            (2.5, 2, 0.0, 0),
            (3.5, 3, 3.0, 2),
            (2.0, 2, 2.5, 2),
            (1.5, 1, 1.2, 1),
        ]
    )

    def test_judged_on_the_adjusted_effect_with_the_variance_reduction_reported(self):
        from engines.stats.effects import ratio_cuped_effect

        result = judge(baseline=self.CONTROL, candidate=self.TREATMENT, min_units=2, cuped_pre_days=14)
        expected = ratio_cuped_effect(control=self.CONTROL, treatment=self.TREATMENT, confidence=0.9)
        assert result.method == "cuped_ratio_delta" and result.effect == expected.effect
        assert result.cuped.theta == expected.theta and result.cuped.pre_days == 14
        assert result.cuped.variance_reduction == expected.variance_reduction > 0
        assert result.cuped.pre_units == {"baseline": 4, "candidate": 5}
        assert result.cuped.unadjusted == ratio_effect(
            control=self.CONTROL.post, treatment=self.TREATMENT.post, confidence=0.9
        )
        assert result.baseline.value == approx(17.5 / 9)
        assert result.improvement.estimate == approx(-expected.effect.estimate)
        assert english(result.reasons)[0].startswith("CUPED-adjusted improvement (decrease is better)")

    def test_sequential_on_the_adjusted_arms(self):
        from engines.stats.effects import ratio_cuped_adjust

        result = judge(baseline=self.CONTROL, candidate=self.TREATMENT, min_units=2, sequential_tau=0.5)
        adjusted = ratio_cuped_adjust(control=self.CONTROL, treatment=self.TREATMENT)
        variance = adjusted.control.variance / 5 + adjusted.treatment.variance / 6
        half = sequential_half_width(variance=variance, tau=0.5, confidence=0.9)
        assert result.improvement.ci_high - result.improvement.estimate == pytest.approx(half, rel=1e-9)
        assert result.improvement.estimate == pytest.approx(adjusted.control.mean - adjusted.treatment.mean)
