import json
import math
from dataclasses import asdict

import numpy as np
import pytest

from engines.follow_up.correction import ROGAN_GLADEN, ErrorRates  # the method's name
from engines.reasons import Term, reason
from gate.judges.clean_accuracy import CleanAccuracyPolicy, ItemOutcome, clean_accuracy_judge
from gate.judges.follow_up_rate import NEWCOMBE, DetectorAccuracy, FollowUpCounts, follow_up_rate_judge
from gate.judges.follow_up_rate import FollowUpRateCode as Code
from gate.judges.verdict import FAIL, INSUFFICIENT, PASS, VerdictCode, gate_verdict
from tests.wordings import english


def approx(value):
    return pytest.approx(value, abs=5e-6)


def observed(*, rate, low, high, follow_ups, answered, level=95.0):
    """The candidate's rate as the bar's reason describes it."""
    return reason(
        Code.OBSERVED, rate=rate, level=level, low=low, high=high, follow_ups=follow_ups, answered=answered
    )


def bar(code, *, what, judged, described, bar=0.18):
    return reason(code, what=reason(what), judged=judged, bar=bar, described=described)


def margin(code, *, what, judged, estimate, low, high, rate, follow_ups, answered, margin=0.01, level=95.0):
    return reason(
        code,
        what=reason(what),
        judged=judged,
        margin=margin,
        estimate=estimate,
        level=level,
        low=low,
        high=high,
        method=reason(Code.BY_NEWCOMBE),
        rate=rate,
        follow_ups=follow_ups,
        answered=answered,
    )


def counts(follow_ups: int, answered: int, **report) -> FollowUpCounts:
    return FollowUpCounts(answered=answered, follow_ups=follow_ups, **report)


class TestVerdicts:
    def test_pass_with_baseline(self):
        # Candidate 100/1000: upper bound 0.120152 <= 0.18; difference upper bound −0.021046 <= 0.01.
        result = follow_up_rate_judge(candidate=counts(100, 1000), baseline=counts(150, 1000))
        assert result.verdict == PASS
        assert asdict(result.checks) == {"bar": True, "non_inferiority": True}
        assert result.candidate.rate == approx(0.1)
        assert (result.candidate.ci_low, result.candidate.ci_high) == (
            approx(0.082909),
            approx(0.120152),
        )
        assert (result.baseline.ci_low, result.baseline.ci_high) == (approx(0.129210), approx(0.173469))
        assert asdict(result.difference) == {
            "estimate": approx(-0.05),
            "ci_low": approx(-0.079032),
            "ci_high": approx(-0.021046),
            "confidence": 0.95,
            "margin": 0.01,
            "method": NEWCOMBE,
            "corrected": None,
        }
        assert result.reasons == [
            bar(
                Code.BAR_CLEARS,
                what=Code.RATE_BOUND,
                judged=approx(0.120152),
                described=observed(
                    rate=approx(0.1),
                    low=approx(0.082909),
                    high=approx(0.120152),
                    follow_ups=100,
                    answered=1000,
                ),
            ),
            margin(
                Code.MARGIN_CLEARS,
                what=Code.DIFFERENCE_BOUND,
                judged=approx(-0.021046),
                estimate=approx(-0.05),
                low=approx(-0.079032),
                high=approx(-0.021046),
                rate=approx(0.15),
                follow_ups=150,
                answered=1000,
            ),
        ]
        assert result.threshold == 0.18 and result.decide_on == "upper_bound"

    def test_the_reasons_read_as_sentences(self):
        # The one rendering check here: the bar's and the margin's reasons, nested, in English.
        result = follow_up_rate_judge(candidate=counts(100, 1000), baseline=counts(150, 1000))
        assert english(result.reasons) == [
            "follow-up rate upper bound 0.120 <= bar 0.18 (rate 0.100, 95 % CI [0.083, 0.120], "
            "100 follow-ups of 1000 answers)",
            "difference from the baseline upper bound -0.021 <= margin 0.01 (difference -0.050, 95 % CI "
            "[-0.079, -0.021] by Newcombe's hybrid score; baseline rate 0.150, 150 follow-ups of 1000 "
            "answers)",
        ]

    def test_bar_fails_alone(self):
        # 312/1590 = 0.196226, Wilson [0.177448, 0.216469]: the upper bound is over 0.18. Against a worse
        # baseline 400/1600 = 0.25 the difference's upper bound is −0.024891: non-inferior.
        result = follow_up_rate_judge(candidate=counts(312, 1590), baseline=counts(400, 1600))
        assert result.verdict == FAIL
        assert asdict(result.checks) == {"bar": False, "non_inferiority": True}
        assert result.reasons == [
            bar(
                Code.BAR_EXCEEDED,
                what=Code.RATE_BOUND,
                judged=approx(0.216469),
                described=observed(
                    rate=approx(312 / 1590),
                    low=approx(0.177448),
                    high=approx(0.216469),
                    follow_ups=312,
                    answered=1590,
                ),
            )
        ]
        assert result.difference.ci_high == approx(-0.024891)

    def test_non_inferiority_fails_alone(self):
        # 100/1000 is under the bar (upper bound 0.120152), but against 60/1000 (Wilson [0.046896, 0.076471])
        # d = 0.04, upper bound 0.04 + sqrt(0.020152² + 0.013104²) = 0.04 + 0.024038 = 0.064038 > 0.01.
        result = follow_up_rate_judge(candidate=counts(100, 1000), baseline=counts(60, 1000))
        assert result.verdict == FAIL
        assert asdict(result.checks) == {"bar": True, "non_inferiority": False}
        assert result.difference.ci_low == approx(0.016264)
        assert result.difference.ci_high == approx(0.064038)
        assert result.reasons == [
            margin(
                Code.MARGIN_EXCEEDED,
                what=Code.DIFFERENCE_BOUND,
                judged=approx(0.064038),
                estimate=approx(0.04),
                low=approx(0.016264),
                high=approx(0.064038),
                rate=approx(0.06),
                follow_ups=60,
                answered=1000,
            )
        ]

    def test_both_fail_one_reason_each(self):
        # 312/1590 vs 250/1590: bar upper bound 0.216469 > 0.18; difference upper bound 0.065469 > 0.01.
        result = follow_up_rate_judge(candidate=counts(312, 1590), baseline=counts(250, 1590))
        assert result.verdict == FAIL
        assert asdict(result.checks) == {"bar": False, "non_inferiority": False}
        assert [r.code for r in result.reasons] == [Code.BAR_EXCEEDED, Code.MARGIN_EXCEEDED]
        assert result.reasons[0].params["judged"] == approx(0.216469)
        assert result.reasons[1].params["what"] == reason(Code.DIFFERENCE_BOUND)
        assert result.difference.ci_high == approx(0.065469)

    def test_point_decides_where_the_bound_does_not(self):
        # 40/250 = 0.16, Wilson upper bound 0.210537 > 0.18, but the point 0.16 <= 0.18. Against 45/250:
        # d = −0.02, Newcombe upper bound −0.02 + sqrt(0.050537² + 0.042667²) = 0.046139 > 0.01, point −0.02.
        candidate, baseline = counts(40, 250), counts(45, 250)
        bound = follow_up_rate_judge(candidate=candidate, baseline=baseline)
        point = follow_up_rate_judge(candidate=candidate, baseline=baseline, decide_on="point")
        # Both checks fail on their bounds, though they pass on their points: at the one look that is a
        # fail, with no "more answers would show it" (following that advice is peeking).
        assert bound.verdict == FAIL and asdict(bound.checks) == {
            "bar": False,
            "non_inferiority": False,
        }
        assert bound.difference.ci_high == approx(0.046139)
        assert [r.code for r in bound.reasons] == [Code.BAR_EXCEEDED, Code.MARGIN_EXCEEDED]
        assert point.verdict == PASS and asdict(point.checks) == {"bar": True, "non_inferiority": True}
        # On its point the bar judges the rate itself, and the margin the difference's estimate.
        assert point.reasons[0] == bar(
            Code.BAR_CLEARS,
            what=Code.RATE,
            judged=approx(0.16),
            described=observed(
                rate=approx(0.16), low=approx(0.119754), high=approx(0.210537), follow_ups=40, answered=250
            ),
        )
        assert (point.reasons[1].code, point.reasons[1].params["what"]) == (
            Code.MARGIN_CLEARS,
            reason(Code.DIFFERENCE),
        )
        assert (point.reasons[1].params["judged"], point.reasons[1].params["margin"]) == (approx(-0.02), 0.01)

    def test_a_bound_over_the_bar_is_a_fail_with_no_advice_to_wait(self):
        # 40/250 under the bar on its point (0.16) but not on its bound: no "about 1291 answered questions
        # would show it" any more.
        result = follow_up_rate_judge(candidate=counts(40, 250), baseline=counts(4500, 25000))
        assert result.verdict == FAIL
        # Only the two failed checks: no reason of more answers to come.
        assert [r.code for r in result.reasons] == [Code.BAR_EXCEEDED, Code.MARGIN_EXCEEDED]

    def test_a_point_over_the_bar_is_a_fail_however_few_the_answers(self):
        result = follow_up_rate_judge(candidate=counts(50, 250), baseline=counts(4500, 25000))
        assert result.verdict == FAIL and result.checks.bar is False

    def test_fewer_wrong_answers_do_not_rescue_a_follow_up_rate_over_the_bar(self):
        # The candidate answers more golden items right (95/100 vs 88/100: clean accuracy passes, Wilson
        # lower bound 0.888250 >= 0.80) and even draws fewer follow-ups than the baseline (480/2000 = 0.24
        # vs 560/2000 = 0.28, Newcombe upper bound −0.012814: non-inferior), but 0.24 is over the 18 % bar
        # (Wilson [0.221792, 0.259205]): layer 2 fails, and so does the gate.
        required = ("clean_accuracy", "follow_up_rate")
        items = [ItemOutcome(item_id=str(i), tags=(), language="en", correct=i < 95) for i in range(100)]
        baseline_items = [
            ItemOutcome(item_id=str(i), tags=(), language="en", correct=i < 88) for i in range(100)
        ]
        accuracy = clean_accuracy_judge(
            candidate=items,
            baseline=baseline_items,
            policy=CleanAccuracyPolicy(),
            decide_on="lower_bound",
            confidence=0.95,
        )
        assert accuracy.verdict == PASS and accuracy.candidate.ci_low == approx(0.888250)
        assert accuracy.candidate.accuracy > accuracy.baseline.accuracy

        follow_up = follow_up_rate_judge(candidate=counts(480, 2000), baseline=counts(560, 2000))
        assert follow_up.verdict == FAIL
        assert asdict(follow_up.checks) == {"bar": False, "non_inferiority": True}
        assert follow_up.difference.ci_high == approx(-0.012814)
        assert follow_up.reasons == [
            bar(
                Code.BAR_EXCEEDED,
                what=Code.RATE_BOUND,
                judged=approx(0.259205),
                described=observed(
                    rate=approx(0.24),
                    low=approx(0.221792),
                    high=approx(0.259205),
                    follow_ups=480,
                    answered=2000,
                ),
            )
        ]
        verdict, reasons = gate_verdict(
            required_layers=required,
            layer_verdicts={"clean_accuracy": accuracy.verdict, "follow_up_rate": follow_up.verdict},
        )
        assert verdict == FAIL
        assert reasons == [
            reason(VerdictCode.LAYER_VERDICT, layer=Term("follow_up_rate"), verdict=Term(FAIL))
        ]


class TestWithoutBaseline:
    def test_pass_on_the_bar_alone(self):
        result = follow_up_rate_judge(candidate=counts(100, 1000), baseline=None)
        assert result.verdict == PASS
        assert result.baseline is None and result.difference is None
        assert asdict(result.checks) == {"bar": True, "non_inferiority": None}
        assert result.reasons[-1] == reason(Code.NO_BASELINE)

    def test_fail_still_says_non_inferiority_was_not_checked(self):
        result = follow_up_rate_judge(candidate=counts(312, 1590), baseline=None)
        assert result.verdict == FAIL
        assert [r.code for r in result.reasons] == [Code.BAR_EXCEEDED, Code.NO_BASELINE]
        assert result.reasons[0].params["what"] == reason(Code.RATE_BOUND)
        assert (result.reasons[0].params["judged"], result.reasons[0].params["bar"]) == (
            approx(0.216469),
            0.18,
        )


class TestInsufficientData:
    def test_both_arms_short(self):
        result = follow_up_rate_judge(candidate=counts(10, 150), baseline=counts(5, 199))
        assert result.verdict == INSUFFICIENT
        assert result.reasons == [
            reason(Code.TOO_FEW_ANSWERED, arm=Term("candidate"), n=150, need=200),
            reason(Code.TOO_FEW_ANSWERED, arm=Term("baseline"), n=199, need=200),
        ]
        assert asdict(result.checks) == {"bar": None, "non_inferiority": None}
        # The numbers are still reported.
        assert result.candidate.rate == approx(10 / 150)
        assert result.difference is not None

    def test_baseline_short_even_when_the_candidate_has_enough(self):
        result = follow_up_rate_judge(candidate=counts(10, 500), baseline=counts(1, 20))
        assert result.verdict == INSUFFICIENT
        assert result.reasons == [reason(Code.TOO_FEW_ANSWERED, arm=Term("baseline"), n=20, need=200)]

    def test_no_answers_at_all(self):
        result = follow_up_rate_judge(candidate=counts(0, 0), baseline=None, min_answered=1)
        assert result.verdict == INSUFFICIENT
        assert result.candidate.rate is None and result.candidate.deepening_rate is None
        assert (result.candidate.ci_low, result.candidate.ci_high) == (0.0, 1.0)

    def test_no_baseline_answers_no_difference(self):
        result = follow_up_rate_judge(candidate=counts(10, 500), baseline=counts(0, 0))
        assert result.verdict == INSUFFICIENT and result.difference is None


class TestReport:
    def test_turns_and_deepening(self):
        # Candidate sessions with 1, 2, 3, 6 user turns: Σ = 12, Σ² = 50, mean 3, s² = (50 − 12²/4)/3 = 14/3,
        # sd 2.160247; deepening 25 of 1000 answers = 0.025. Baseline: one session, no sd.
        candidate = counts(100, 1000, deepening=25, sessions=4, user_turns_sum=12, user_turns_sumsq=50)
        baseline = counts(150, 1000, deepening=40, sessions=1, user_turns_sum=5, user_turns_sumsq=25)
        result = follow_up_rate_judge(candidate=candidate, baseline=baseline)
        assert result.candidate.turns_per_session_mean == approx(3.0)
        assert result.candidate.turns_per_session_sd == approx(2.160247)
        assert result.candidate.deepening_rate == approx(0.025)
        assert result.candidate.sessions == 4 and result.candidate.deepening == 25
        assert result.baseline.turns_per_session_mean == approx(5.0)
        assert result.baseline.turns_per_session_sd is None
        assert result.baseline.deepening_rate == approx(0.04)

    def test_report_does_not_decide(self):
        quiet = follow_up_rate_judge(candidate=counts(100, 1000), baseline=counts(150, 1000))
        busy = follow_up_rate_judge(
            candidate=counts(
                100, 1000, deepening=900, sessions=10, user_turns_sum=400, user_turns_sumsq=20000
            ),
            baseline=counts(150, 1000),
        )
        assert quiet.verdict == busy.verdict == PASS and quiet.reasons == busy.reasons

    def test_as_dict_is_json(self):
        result = follow_up_rate_judge(
            candidate=counts(
                np.int64(100), 1000, sessions=np.int64(3), user_turns_sum=6, user_turns_sumsq=14
            ),
            baseline=counts(150, 1000),
        )
        data = json.loads(json.dumps(asdict(result)))
        assert data["verdict"] == PASS and data["candidate"]["follow_ups"] == 100
        assert data["difference"]["method"] == NEWCOMBE
        assert set(data) == {
            "verdict",
            "reasons",
            "candidate",
            "baseline",
            "difference",
            "checks",
            "threshold",
            "decide_on",
            "confidence",
            "min_answered",
            "unjudged",
            "correction",
            "detector_version",
            "horizon",
            "srm",
            "sequential",
            "blind",
            "unblinded",
            "error_rates",
        }

    def test_confidence_widens_the_intervals(self):
        narrow = follow_up_rate_judge(candidate=counts(100, 1000), baseline=counts(150, 1000), confidence=0.9)
        wide = follow_up_rate_judge(candidate=counts(100, 1000), baseline=counts(150, 1000), confidence=0.99)
        assert wide.candidate.ci_high > narrow.candidate.ci_high
        assert wide.difference.ci_high > narrow.difference.ci_high
        assert wide.reasons[0].params["described"].params["level"] == pytest.approx(99)
        assert narrow.reasons[0].params["described"].params["level"] == pytest.approx(90)


class TestValidation:
    @pytest.mark.parametrize(
        ("settings", "name"),
        [
            ({"max_rate": 1.5}, "max_rate"),
            ({"max_rate": -0.1}, "max_rate"),
            ({"max_rate": math.nan}, "max_rate"),
            ({"decide_on": "lower_bound"}, "decide_on"),
            ({"margin": -0.01}, "margin"),
            ({"min_answered": 0}, "min_answered"),
            ({"min_answered": 2.5}, "min_answered"),
            ({"confidence": 1.0}, "confidence"),
        ],
    )
    def test_refuses_bad_settings(self, settings, name):
        with pytest.raises(ValueError, match=name):
            follow_up_rate_judge(candidate=counts(10, 300), baseline=None, **settings)

    @pytest.mark.parametrize(
        ("fields", "name"),
        [
            ({"answered": -1, "follow_ups": 0}, "answered"),
            ({"answered": 10, "follow_ups": -1}, "follow_ups"),
            ({"answered": 10, "follow_ups": 11}, "follow_ups"),
            ({"answered": 10, "follow_ups": 1, "deepening": 12}, "deepening"),
            ({"answered": 10.0, "follow_ups": 1}, "answered"),
            ({"answered": 10, "follow_ups": True}, "follow_ups"),
            ({"answered": 10, "follow_ups": 1, "sessions": -2}, "sessions"),
            ({"answered": 10, "follow_ups": 1, "sessions": 2, "user_turns_sum": math.inf}, "user_turns_sum"),
            ({"answered": 10, "follow_ups": 1, "sessions": 2, "user_turns_sumsq": -1.0}, "user_turns_sumsq"),
            ({"answered": 10, "follow_ups": 1, "user_turns_sum": 3.0}, "user_turns_sum"),
        ],
    )
    def test_refuses_impossible_counts(self, fields, name):
        with pytest.raises(ValueError, match=name):
            FollowUpCounts(**fields)


# Se 0.85 (85/100), Sp 0.95 (190/200) in both languages.
DETECTOR = DetectorAccuracy(
    version="follow-up-test-1",
    errors={
        language: ErrorRates(positives=100, true_positives=85, negatives=200, true_negatives=190)
        for language in ("en", "zh")
    },
)


class TestCorrected:
    """Layer 2 judged on the rate corrected for the detector's error rates."""

    def test_an_inflated_observed_rate_passes_once_corrected(self):
        # Se 0.9, Sp 0.85: 400 of 2000 judged turns called follow-ups (observed 0.20, over the 0.18 bar);
        # corrected (0.20 + 0.85 - 1) / 0.75 = 0.0667.
        loose = DetectorAccuracy(
            version="follow-up-test-1",
            errors={"en": ErrorRates(positives=100, true_positives=90, negatives=200, true_negatives=170)},
        )
        plain = follow_up_rate_judge(candidate=counts(400, 2000), baseline=None, max_rate=0.18)
        assert plain.verdict == FAIL and plain.correction == "none" and plain.detector_version is None
        result = follow_up_rate_judge(
            candidate=counts(400, 2000, judged_by_language={"en": (2000, 400)}),
            baseline=None,
            max_rate=0.18,
            detector=loose,
        )
        corrected = result.candidate.corrected
        assert corrected.estimate == approx(0.05 / 0.75)
        assert result.candidate.rate == approx(0.2)  # observed, still reported
        assert result.correction == "rogan_gladen" and result.detector_version == "follow-up-test-1"
        assert result.verdict == PASS and result.checks.bar is True and corrected.ci_high <= 0.18
        described = result.reasons[0].params["described"]
        assert described.code == Code.CORRECTED
        assert (described.params["rate"], described.params["detector"]) == (
            approx(0.05 / 0.75),
            "follow-up-test-1",
        )
        assert described.params["observed"] == approx(0.2)

    def test_the_bar_is_judged_on_the_corrected_upper_bound(self):
        # Observed 0.10 passes by itself; corrected (0.10 + 0.95 - 1) / 0.8 = 0.0625 ... rates of a
        # detector that misses follow-ups raise it instead: Se 0.5, Sp 0.99 -> (0.1 - 0.01) / 0.49 = 0.184.
        missing = DetectorAccuracy(
            version="misses",
            errors={"en": ErrorRates(positives=400, true_positives=200, negatives=400, true_negatives=396)},
        )
        observed = counts(200, 2000, judged_by_language={"en": (2000, 200)})
        assert follow_up_rate_judge(candidate=observed, baseline=None).verdict == PASS
        result = follow_up_rate_judge(candidate=observed, baseline=None, detector=missing)
        assert result.candidate.corrected.estimate == approx(0.09 / 0.49)
        assert result.verdict == FAIL and result.checks.bar is False

    def test_non_inferiority_on_the_corrected_difference(self):
        judged_c, judged_b = {"en": (1500, 300)}, {"en": (1500, 270)}
        result = follow_up_rate_judge(
            candidate=counts(300, 1500, judged_by_language=judged_c),
            baseline=counts(270, 1500, judged_by_language=judged_b),
            max_rate=0.5,
            margin=0.05,
            detector=DETECTOR,
        )
        difference = result.difference
        assert difference.method == ROGAN_GLADEN
        # Both arms: w = 1; corrected (0.2 - 0.05)/0.8 - (0.18 - 0.05)/0.8 = 0.025.
        assert difference.estimate == approx(0.025)
        assert difference.corrected.error_variance < result.candidate.corrected.error_variance
        assert result.checks.non_inferiority is (difference.ci_high <= 0.05)

    def test_uninformative_error_rates_are_insufficient_data_with_the_reason(self):
        coin = DetectorAccuracy(
            version="coin",
            errors={"en": ErrorRates(positives=10, true_positives=5, negatives=10, true_negatives=5)},
        )
        result = follow_up_rate_judge(
            candidate=counts(300, 2000, judged_by_language={"en": (2000, 300), "zh": (10, 1)}),
            baseline=None,
            detector=coin,
        )
        assert result.verdict == INSUFFICIENT
        assert result.reasons == [
            reason(Code.UNINFORMATIVE_LANGUAGE, detector="coin", language="en"),
            reason(Code.UNINFORMATIVE_LANGUAGE, detector="coin", language="zh"),
        ]
        assert result.candidate.corrected is None and result.correction == "none"

    def test_a_bound_the_error_rates_keep_over_the_bar_is_a_fail(self):
        # A point estimate under the bar by less than the error rates' own uncertainty: a fail at the look
        # (the horizon's sizing says when no traffic could show it, before the experiment).
        result = follow_up_rate_judge(
            candidate=counts(3400, 20000, judged_by_language={"en": (20000, 3400)}),
            baseline=None,
            detector=DETECTOR,
        )
        assert result.verdict == FAIL and result.checks.bar is False
        assert [r.code for r in result.reasons] == [Code.BAR_EXCEEDED, Code.NO_BASELINE]
