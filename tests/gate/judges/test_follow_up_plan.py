"""Layer 2's discipline, pure: a horizon of answered questions sized from the baseline's rate, the bar,
the margin, alpha and power (checked against statsmodels and by simulating the judge itself), blind
before it, a clustered sample-ratio check of the answers, the always-valid option, and A/A-style runs at
the null's boundary: one stored look over re-runs keeps the false-pass rate at alpha."""

import math

import numpy as np
import pytest
from scipy.stats import binom
from statsmodels.stats.power import NormalIndPower

from engines.follow_up.correction import ErrorRates
from engines.reasons import reason
from gate.judges.aa_simulation import follow_up_rerun_rates
from gate.judges.follow_up_rate import (
    AnswerHorizon,
    AnswerSplit,
    FollowUpCounts,
    FollowUpRateCode,
    follow_up_horizon_answers,
    follow_up_rate_judge,
)
from gate.judges.plan import PlanCode, Unblinding
from gate.judges.verdict import ERROR, FAIL, INSUFFICIENT, PASS

ALPHA = 0.025  # one-sided, the upper end of a two-sided 95 % interval


def size(**settings):
    values = {
        "rate": 0.12,
        "max_rate": 0.18,
        "margin": 0.05,
        "alpha": ALPHA,
        "power": 0.8,
        "decide_on": "upper_bound",
    }
    return follow_up_horizon_answers(**{**values, **settings})


class TestHorizon:
    def test_each_check_alone_is_statsmodels_normal_power(self):
        # With a margin of 1 only the bar can fail: a one-sample z-test of 0.12 against 0.18.
        bar = NormalIndPower().solve_power(
            effect_size=0.06 / math.sqrt(0.12 * 0.88), alpha=ALPHA, power=0.8, ratio=0, alternative="larger"
        )
        assert size(margin=1.0) == math.ceil(bar) == 231
        # With the bar at 1 only non-inferiority can fail: two arms of 0.12 against a margin of 0.05.
        margin = NormalIndPower().solve_power(
            effect_size=0.05 / math.sqrt(0.12 * 0.88), alpha=ALPHA, power=0.8, ratio=1, alternative="larger"
        )
        assert size(max_rate=1.0) == math.ceil(margin) == 664

    def test_both_checks_at_the_horizon_pass_a_good_candidate_with_the_power_asked(self):
        """The real judge (Wilson, Newcombe) on simulated arms at the horizon sized for both checks."""
        horizon = size(margin=0.03)
        assert horizon > size(margin=1.0) and horizon >= size(max_rate=1.0, margin=0.03)
        rng = np.random.default_rng(1)
        runs = 2000
        passed = 0
        for baseline, candidate in rng.binomial(horizon, 0.12, size=(runs, 2)):
            passed += (
                follow_up_rate_judge(
                    candidate=FollowUpCounts(answered=horizon, follow_ups=int(candidate)),
                    baseline=FollowUpCounts(answered=horizon, follow_ups=int(baseline)),
                    margin=0.03,
                ).verdict
                == PASS
            )
        assert abs(passed / runs - 0.8) <= 3 * math.sqrt(0.8 * 0.2 / runs)

    def test_the_correction_costs_answers_and_its_error_rates_may_make_it_unsizable(self):
        shipped = ErrorRates(positives=105, true_positives=89, negatives=159, true_negatives=151)
        assert size(errors=shipped) > 2 * size()
        many = ErrorRates(positives=10, true_positives=8, negatives=10, true_negatives=9)
        assert size(errors=many) == reason(FollowUpRateCode.ERROR_RATES_TOO_WIDE)

    def test_what_cannot_be_sized_says_why(self):
        assert size(rate=0.18) == reason(FollowUpRateCode.PLANNING_RATE_NOT_UNDER_BAR, rate=0.18, bar=0.18)
        assert size(margin=0.0) == reason(FollowUpRateCode.ZERO_MARGIN)


def counts(follow_ups, answered):
    # Two answered questions per session.
    return FollowUpCounts(
        answered=answered,
        follow_ups=follow_ups,
        sessions=answered // 2,
        user_turns_sum=answered,
        user_turns_sumsq=2 * answered,
    )


HORIZON = AnswerHorizon(answers_per_arm=1000, basis="rate 0.12 from follow_up_planning_rate")


class TestBlind:
    def test_before_the_horizon_only_answers_sessions_and_the_check(self):
        result = follow_up_rate_judge(
            candidate=counts(41, 400),
            baseline=counts(37, 380),
            horizon=HORIZON,
            split=AnswerSplit(baseline=380, candidate=400, sum_squares=1600, candidate_share=0.5),
        )
        assert result.verdict == INSUFFICIENT and result.blind
        assert result.reasons[0] == reason(
            FollowUpRateCode.BEFORE_HORIZON,
            units=1000,
            basis="rate 0.12 from follow_up_planning_rate",
            candidate=400,
            baseline=380,
        )
        for arm in (result.candidate, result.baseline):
            assert (arm.rate, arm.ci_low, arm.ci_high, arm.follow_ups, arm.corrected) == (None,) * 5
        assert (result.candidate.answered, result.candidate.sessions) == (400, 200)
        assert result.difference is None and result.srm.p_value is not None

    def test_unblinded_shows_the_numbers_so_far_and_who(self):
        unblinded = Unblinding(by="rm", at="2025-01-02T03:04:05+00:00", reason="a complaint")
        result = follow_up_rate_judge(
            candidate=counts(41, 400), baseline=counts(37, 380), horizon=HORIZON, unblinded=unblinded
        )
        assert result.verdict == INSUFFICIENT and not result.blind and result.candidate.follow_ups == 41
        assert result.reasons[-1] == reason(
            FollowUpRateCode.INTERIM,
            unblinded=reason(PlanCode.UNBLINDED, by="rm", at="2025-01-02 03:04:05", why="a complaint"),
        )

    def test_at_the_horizon_it_decides(self):
        result = follow_up_rate_judge(
            candidate=counts(100, 1000), baseline=counts(150, 1000), horizon=HORIZON
        )
        assert result.verdict == PASS and not result.blind and result.horizon == HORIZON

    def test_a_sample_ratio_mismatch_of_the_answers_is_an_error(self):
        split = AnswerSplit(baseline=1000, candidate=1500, sum_squares=5000, candidate_share=0.5)
        result = follow_up_rate_judge(
            candidate=counts(150, 1500), baseline=counts(100, 1000), horizon=HORIZON, split=split
        )
        assert result.verdict == ERROR and result.blind
        mismatch = result.reasons[0]
        assert mismatch.code == FollowUpRateCode.SAMPLE_RATIO_MISMATCH
        assert {name: mismatch.params[name] for name in ("baseline", "candidate", "share")} == {
            "baseline": 1000,
            "candidate": 1500,
            "share": 0.5,
        }
        assert mismatch.params["p"] < mismatch.params["alpha"]


class TestAlwaysValid:
    def test_wider_than_the_fixed_interval_and_judged_without_a_horizon(self):
        fixed = follow_up_rate_judge(candidate=counts(100, 1000), baseline=counts(150, 1000))
        always = follow_up_rate_judge(
            candidate=counts(100, 1000), baseline=counts(150, 1000), sequential_tau=0.02, horizon=HORIZON
        )
        assert always.sequential and always.horizon is None and not always.blind
        assert always.verdict == PASS and always.reasons[0].code == FollowUpRateCode.BAR_CLEARS
        assert always.reasons[0].params["what"] == reason(FollowUpRateCode.RATE_ALWAYS_VALID_BOUND)
        assert always.reasons[0].params["judged"] > fixed.candidate.ci_high

    def test_a_bound_not_clear_yet_is_insufficient_with_no_answers_named(self):
        result = follow_up_rate_judge(
            candidate=counts(40, 250), baseline=counts(42, 250), sequential_tau=0.02
        )
        assert result.verdict == INSUFFICIENT
        assert result.reasons[-1] == reason(FollowUpRateCode.NOT_SHOWN_YET)
        assert (
            follow_up_rate_judge(
                candidate=counts(60, 250), baseline=counts(42, 250), sequential_tau=0.02
            ).verdict
            == FAIL
        )


RUNS = 2000


@pytest.mark.parametrize(
    ("candidate_rate", "baseline_rate"),
    [(0.18, 0.18), (0.11, 0.10)],
    ids=["at the bar", "worse by the margin"],
)
def test_at_the_nulls_boundary_re_runs_pass_at_most_alpha(candidate_rate, baseline_rate):
    """11 gate runs from the horizon (2 000 answers per arm) to twice it: the stored look passes no more
    often than alpha's binomial range allows; judging the grown window each run does; the always-valid
    option, judged at 22 runs from a tenth of the horizon on, stays under alpha."""
    rates = follow_up_rerun_rates(
        runs=RUNS, seed=0, candidate_rate=candidate_rate, baseline_rate=baseline_rate
    )
    high = binom.interval(0.95, RUNS, ALPHA)[1] / RUNS
    assert rates["rerun_stored_look"] <= high
    assert rates["rerun_grown_window"] > high
    assert rates["sequential_looks"] <= ALPHA
