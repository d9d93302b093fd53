import pytest
from scipy.stats import binomtest, fisher_exact
from sklearn.metrics import cohen_kappa_score

from engines.follow_up.correction import ErrorRates
from engines.follow_up.live_rates import error_rates_choose
from engines.reasons import Term, reason
from gate.judges.follow_up_rate import FollowUpRatePolicy
from gate.judges.follow_up_review import (
    BELOW_MINIMUM,
    MET,
    TOO_FEW_LABELS,
    error_rates_apply,
    live_agreement_apply,
    live_agreement_judge,
    reviewer_agreement_judge,
)
from gate.judges.follow_up_review import FollowUpReviewCode as Code
from gate.judges.verdict import ERROR, FAIL, INSUFFICIENT, PASS
from gate.policy import PolicyError

# Reviewer's label -> detector's kind -> turns: 100 reviewed turns.
CONFUSION = {
    "follow_up": {"follow_up": 40, "deepening": 5, "new": 5},
    "deepening": {"follow_up": 10, "deepening": 20},
    "new": {"new": 18, "follow_up": 2},
}


def approx(value):
    return pytest.approx(value, abs=5e-6)


class TestAgreement:
    def test_counted_follow_ups_only(self):
        # Agree on "counted or not": 40 (follow_up, follow_up) + 20 (deepening, deepening) + 18 (new, new)
        # = 78 of 100; (follow_up, deepening) and (deepening, follow_up) disagree.
        live = live_agreement_judge(confusion=CONFUSION, counted_kinds=["follow_up"])
        assert (live.labels, live.agreeing, live.agreement) == (100, 78, 0.78)
        # Wilson 78/100 by hand: centre 0.769523, half 0.080346; scipy agrees below.
        assert (live.ci_low, live.ci_high) == (approx(0.689296), approx(0.849987))
        scipy_ci = binomtest(78, 100).proportion_ci(method="wilson")
        assert (live.ci_low, live.ci_high) == (approx(scipy_ci.low), approx(scipy_ci.high))
        assert live.kind_agreement == 0.78  # 40 + 20 + 18 on the diagonal
        assert live.precision == approx(40 / 52)  # detector said follow_up 40 + 10 + 2 times
        assert live.recall == approx(40 / 50)  # reviewers said follow_up 50 times
        assert live.status == BELOW_MINIMUM  # 0.78 < 0.80 with 100 >= 50 labels
        summary = reason(
            Code.AGREEMENT,
            agreement=0.78,
            agreeing=78,
            labels=100,
            level=95.0,
            low=live.ci_low,
            high=live.ci_high,
        )
        assert live.reason == reason(Code.BELOW_MINIMUM, summary=summary, minimum=0.8)
        assert live.kinds == ["deepening", "follow_up", "new"]
        assert live.confusion_rows == [
            ("deepening", [20, 10, 0]),
            ("follow_up", [5, 40, 5]),
            ("new", [0, 2, 18]),
        ]

    def test_both_kinds_counted(self):
        # Counted = follow_up or deepening: 40 + 5 + 10 + 20 agree as counted, 18 as not: 93 of 100.
        live = live_agreement_judge(confusion=CONFUSION, counted_kinds=["follow_up", "deepening"])
        assert (live.agreeing, live.status) == (93, MET)
        assert (live.ci_low, live.ci_high) == (approx(0.862505), approx(0.965681))
        assert live.precision == approx(75 / 77) and live.recall == approx(75 / 80)
        assert (live.reason.code, live.reason.params["minimum"]) == (Code.MET, 0.8)
        assert live.reason.params["summary"].params["agreeing"] == 93

    def test_too_few_labels_leave_it_unchecked(self):
        live = live_agreement_judge(confusion=CONFUSION, counted_kinds=["follow_up"], min_labels=101)
        assert live.status == TOO_FEW_LABELS
        assert (live.reason.code, live.reason.params["need"]) == (Code.TOO_FEW_LABELS, 101)

    def test_no_labels(self):
        live = live_agreement_judge(confusion={}, counted_kinds=["follow_up"])
        assert (live.labels, live.agreement, live.precision, live.recall) == (0, None, None, None)
        assert (live.ci_low, live.ci_high, live.status) == (0.0, 1.0, TOO_FEW_LABELS)
        assert live.reason.params["summary"] == reason(Code.NONE_REVIEWED)

    def test_minimum_is_met_at_equality(self):
        live = live_agreement_judge(confusion=CONFUSION, counted_kinds=["follow_up"], minimum=0.78)
        assert live.status == MET

    @pytest.mark.parametrize(
        "kwargs, message",
        [
            ({"confusion": {"new": {"new": -1}}}, "must be a non-negative integer"),
            ({"confusion": {"new": {"new": 1.5}}}, "must be a non-negative integer"),
            ({"minimum": 1.5}, "minimum=1.5 outside"),
            ({"min_labels": 0}, "min_labels=0 must be a positive integer"),
        ],
    )
    def test_bad_input_raises(self, kwargs, message):
        with pytest.raises(ValueError, match=message):
            live_agreement_judge(**{"confusion": CONFUSION, "counted_kinds": ["follow_up"], **kwargs})


class TestApply:
    below = live_agreement_judge(confusion=CONFUSION, counted_kinds=["follow_up"])
    met = live_agreement_judge(confusion=CONFUSION, counted_kinds=["follow_up"], minimum=0.5)

    @pytest.mark.parametrize("verdict", [PASS, FAIL, INSUFFICIENT])
    def test_below_the_minimum_is_insufficient_data_with_the_reason(self, verdict):
        assert live_agreement_apply(verdict=verdict, reasons=["r"], live=self.below) == (
            INSUFFICIENT,
            ["r", self.below.reason],
        )

    def test_an_error_stays_an_error(self):
        assert live_agreement_apply(verdict=ERROR, reasons=[], live=self.below)[0] == ERROR

    def test_met_keeps_the_verdict_and_notes_the_agreement(self):
        applied = live_agreement_apply(verdict=PASS, reasons=["r"], live=self.met)
        assert applied == (PASS, ["r", self.met.reason])

    def test_no_labels_change_nothing(self):
        none = live_agreement_judge(confusion={}, counted_kinds=["follow_up"])
        assert live_agreement_apply(verdict=PASS, reasons=["r"], live=none) == (PASS, ["r"])


def test_policy_keys_join_layer_2():
    section = FollowUpRatePolicy.parse({"follow_up_live_agreement_min": 0.9, "follow_up_live_min_labels": 20})
    assert (section.follow_up_live_agreement_min, section.follow_up_live_min_labels) == (0.9, 20)
    assert FollowUpRatePolicy().follow_up_live_agreement_min == 0.8
    with pytest.raises(PolicyError, match="follow_up_live_min_labels"):
        FollowUpRatePolicy.parse({"follow_up_live_min_labels": 0})


class TestErrorRatesApply:
    """Where layer 2's error rates come from, worded, and the disagreement that makes it insufficient."""

    SHIPPED = {
        "zh": ErrorRates(positives=106, true_positives=90, negatives=158, true_negatives=151),
        "en": ErrorRates(positives=105, true_positives=89, negatives=159, true_negatives=153),
    }
    LIVE = {
        # zh: 25 reviewed follow-ups (under 30), 12 caught: far below the shipped 0.849.
        "zh": ErrorRates(positives=25, true_positives=12, negatives=100, true_negatives=95),
        # en: enough of both, its sensitivity 0.667 also below the shipped 0.848.
        "en": ErrorRates(positives=60, true_positives=40, negatives=200, true_negatives=190),
    }

    def choose(self, live):
        return error_rates_choose(
            shipped=self.SHIPPED, live=live, languages=["en", "zh"], min_labels=30, alpha=0.05
        )

    @pytest.mark.parametrize("verdict", [PASS, FAIL, INSUFFICIENT])
    def test_a_contradicted_shipped_rate_is_insufficient_data_naming_the_language(self, verdict):
        applied, reasons = error_rates_apply(verdict=verdict, reasons=["r"], rates=self.choose(self.LIVE))
        assert applied == INSUFFICIENT
        assert reasons[0] == "r"
        assert [(r.code, r.params["language"]) for r in reasons[1:]] == [
            (Code.LIVE_RATES, "en"),
            (Code.SHIPPED_RATES, "zh"),
            (Code.DISAGREES_LIVE_USED, "en"),
            (Code.DISAGREES_BLOCKING, "zh"),
        ]
        live_en = reasons[1].params
        assert (live_en["n"], live_en["tp"], live_en["positives"], live_en["tn"], live_en["negatives"]) == (
            260,
            40,
            60,
            190,
            200,
        )
        assert (live_en["se"], live_en["sp"]) == (approx(40 / 60), approx(0.95))
        assert reasons[2].params["se"] == approx(90 / 106) and reasons[2].params["need"] == 30
        blocking = reasons[4].params
        assert blocking["name"] == Term("sensitivity") and (blocking["k"], blocking["n"]) == (12, 25)
        assert (blocking["shipped_k"], blocking["shipped_n"], blocking["alpha"]) == (90, 106, 0.05)
        assert blocking["p"] == approx(0.000225) and blocking["adjusted"] == approx(0.000901)
        # Fisher's and Holm's figures, by scipy and by hand: four tests, the smallest p times 4.
        zh = self.choose(self.LIVE)["zh"].sensitivity
        assert zh.p_value == approx(fisher_exact([[12, 13], [90, 16]]).pvalue)
        assert zh.adjusted_p == approx(4 * zh.p_value)

    def test_a_replaced_rate_that_disagrees_only_says_so(self):
        live = {
            **self.LIVE,
            "zh": ErrorRates(positives=40, true_positives=34, negatives=100, true_negatives=95),
        }
        applied, reasons = error_rates_apply(verdict=PASS, reasons=[], rates=self.choose(live))
        assert applied == PASS and reasons[-1].code == Code.DISAGREES_LIVE_USED

    def test_no_reviews_keep_the_verdict_and_say_the_rates_are_shipped(self):
        applied, reasons = error_rates_apply(verdict=FAIL, reasons=["r"], rates=self.choose({}))
        assert applied == FAIL and len(reasons) == 3
        assert reasons[2] == reason(
            Code.SHIPPED_RATES, language="zh", se=90 / 106, sp=151 / 158, positives=0, negatives=0, need=30
        )

    def test_an_error_stays_an_error(self):
        assert error_rates_apply(verdict=ERROR, reasons=[], rates=self.choose(self.LIVE))[0] == ERROR

    def test_policy_keys(self):
        section = FollowUpRatePolicy.parse(
            {"follow_up_live_rates_min_labels": 50, "follow_up_live_rates_alpha": 0.01}
        )
        assert (section.follow_up_live_rates_min_labels, section.follow_up_live_rates_alpha) == (50, 0.01)
        assert (
            FollowUpRatePolicy().follow_up_live_rates_min_labels,
            FollowUpRatePolicy().follow_up_live_rates_alpha,
        ) == (30, 0.05)
        for bad in ({"follow_up_live_rates_min_labels": 0}, {"follow_up_live_rates_alpha": 0.9}):
            with pytest.raises(PolicyError, match=next(iter(bad))):
                FollowUpRatePolicy.parse(bad)


class TestReviewerAgreement:
    PAIRS = {
        "follow_up": {"follow_up": 30, "deepening": 5},
        "deepening": {"follow_up": 4, "deepening": 16},
        "new": {"follow_up": 1, "new": 24},
    }

    def test_agreement_and_kappa(self):
        result = reviewer_agreement_judge(pairs=self.PAIRS)
        assert (result.turns, result.agreeing, result.agreement) == (80, 70, 0.875)
        # Chance: first labels 35 / 20 / 25, second 35 / 21 / 24 of 80: (35·35 + 20·21 + 25·24) / 6400.
        chance = (35 * 35 + 20 * 21 + 25 * 24) / 6400
        assert result.kappa == approx((0.875 - chance) / (1 - chance))
        first = [a for a, row in self.PAIRS.items() for b, n in row.items() for _ in range(n)]
        second = [b for a, row in self.PAIRS.items() for b, n in row.items() for _ in range(n)]
        assert result.kappa == approx(cohen_kappa_score(first, second))
        scipy_ci = binomtest(70, 80).proportion_ci(method="wilson")
        assert (result.ci_low, result.ci_high) == (approx(scipy_ci.low), approx(scipy_ci.high))

    def test_no_pairs_and_one_label_only(self):
        empty = reviewer_agreement_judge(pairs={})
        assert (empty.turns, empty.agreement, empty.kappa) == (0, None, None)
        # Everyone said "new": perfect agreement, but nothing beyond chance to measure.
        same = reviewer_agreement_judge(pairs={"new": {"new": 5}})
        assert (same.agreement, same.kappa) == (1.0, None)

    def test_negative_counts_raise(self):
        with pytest.raises(ValueError, match="must be a non-negative integer"):
            reviewer_agreement_judge(pairs={"new": {"new": -1}})
