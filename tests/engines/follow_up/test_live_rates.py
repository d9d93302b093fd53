"""The detector's error rates from reviewed live turns (engines.follow_up.live_rates): the counts, the
choice between live and shipped per language and class, the disagreement test, and what it buys: a
corrected interval that keeps its coverage when the detector's sensitivity on live traffic is not the
shipped one."""

import numpy as np
import pytest
from scipy.stats import fisher_exact

from engines.follow_up.correction import ErrorRates, rate_correct
from engines.follow_up.live_rates import (
    LIVE,
    SHIPPED,
    confusion_error_rates,
    error_rates_choose,
    fisher_p,
)
from engines.stats.hypothesis import holm_adjust

# The shipped zh error rates of follow-up-lr-2 (its test split): Se 90/106 = 0.849, Sp 151/158 = 0.956.
SHIPPED_ZH = ErrorRates(positives=106, true_positives=90, negatives=158, true_negatives=151)


def rates(tp, p, tn, n):
    return ErrorRates(positives=p, true_positives=tp, negatives=n, true_negatives=tn)


def test_counts_from_reviewers_labels():
    confusion = {
        "follow_up": {"follow_up": 40, "deepening": 5, "new": 5},
        "deepening": {"follow_up": 10, "deepening": 20},
        "new": {"new": 18, "follow_up": 2},
    }
    assert confusion_error_rates(confusion, kinds=("follow_up",)) == rates(40, 50, 38, 50)
    # Counting deepening too: positives 50 + 30, right when the detector said either kind.
    assert confusion_error_rates(confusion, kinds=("follow_up", "deepening")) == rates(75, 80, 18, 20)
    assert confusion_error_rates({}, kinds=("follow_up",)) == rates(0, 0, 0, 0)


def test_fisher_exact_by_hand():
    # The tea-tasting table [[3, 1], [1, 3]]: the tables as or less likely, k = 0, 1, 3, 4:
    # (1 + 16 + 16 + 1) / 70.
    assert fisher_p(first=(3, 4), second=(1, 4)) == pytest.approx(34 / 70)
    assert fisher_p(first=(72, 100), second=(90, 106)) == pytest.approx(
        fisher_exact([[72, 28], [90, 16]]).pvalue
    )
    assert fisher_p(first=(0, 0), second=(90, 106)) is None


def test_a_language_is_live_once_each_class_has_enough_reviewed_turns():
    live = {"zh": rates(tp=25, p=30, tn=110, n=120), "en": rates(tp=10, p=12, tn=40, n=45)}
    shipped_en = rates(89, 105, 153, 159)
    chosen = error_rates_choose(
        shipped={"zh": SHIPPED_ZH, "en": shipped_en},
        live=live,
        languages=["zh", "en"],
        min_labels=30,
        alpha=0.05,
    )
    zh, en = chosen["zh"], chosen["en"]
    assert (zh.sensitivity.source, zh.specificity.source) == (LIVE, LIVE)
    assert zh.used == live["zh"]
    # en: 12 reviewed follow-ups are too few, so both classes stay shipped (45 others would do).
    assert (en.sensitivity.source, en.specificity.source) == (SHIPPED, SHIPPED)
    assert en.used == shipped_en
    assert en.sensitivity.value == pytest.approx(89 / 105) and en.sensitivity.live == pytest.approx(10 / 12)
    # Holm over the four tests of this judgement.
    tests = [zh.sensitivity, zh.specificity, en.sensitivity, en.specificity]
    expected = holm_adjust([t.p_value for t in tests])
    assert [t.adjusted_p for t in tests] == pytest.approx(expected)
    assert not any(t.disagrees for t in tests)


def test_a_contradicted_shipped_rate_blocks_and_a_replaced_one_does_not():
    # 12 of 25 reviewed follow-ups (0.48) against the shipped 90 of 106 (0.849): p ~ 2e-4.
    few = error_rates_choose(
        shipped={"zh": SHIPPED_ZH},
        live={"zh": rates(tp=12, p=25, tn=95, n=100)},
        languages=["zh"],
        min_labels=30,
        alpha=0.05,
    )["zh"]
    assert few.sensitivity.source == SHIPPED and few.sensitivity.disagrees and few.sensitivity.blocking
    assert few.sensitivity.adjusted_p < 0.05 and not few.specificity.blocking
    many = error_rates_choose(
        shipped={"zh": SHIPPED_ZH},
        live={"zh": rates(tp=24, p=50, tn=95, n=100)},
        languages=["zh"],
        min_labels=30,
        alpha=0.05,
    )["zh"]
    assert many.sensitivity.source == LIVE and many.sensitivity.disagrees and not many.sensitivity.blocking
    assert many.used == rates(tp=24, p=50, tn=95, n=100)


def test_a_language_nobody_measured_has_no_rates():
    chosen = error_rates_choose(shipped={}, live={}, languages=["fr"], min_labels=30, alpha=0.05)["fr"]
    assert chosen.used.youden is None and chosen.sensitivity.p_value is None
    with pytest.raises(ValueError, match="min_labels"):
        error_rates_choose(shipped={}, live={}, languages=[], min_labels=0, alpha=0.05)
    with pytest.raises(ValueError, match="alpha"):
        error_rates_choose(shipped={}, live={}, languages=[], min_labels=1, alpha=1.0)


def _simulate(*, runs, se, sp, true_rate, judged, reviewed, seed, min_labels=30):
    """Seeded runs of one language's traffic: `judged` turns, a share `true_rate` truly follow-ups, a
    detector with sensitivity `se` and specificity `sp` on them, and `reviewed` of them drawn uniformly
    for review (as the queue draws them). Per run, whether the corrected 95 % interval covers the true
    rate with the chosen (live) error rates and with the shipped ones, and whether the choice blocked."""
    rng = np.random.default_rng(seed)
    answered = int(judged * 1.1)
    target = true_rate * judged / answered
    live_covered = shipped_covered = blocked = live_used = 0
    for _ in range(runs):
        truth = rng.random(judged) < true_rate
        called = np.where(truth, rng.random(judged) < se, rng.random(judged) >= sp)
        sample = rng.choice(judged, reviewed, replace=False)
        t, c = truth[sample], called[sample]
        live = rates(int((t & c).sum()), int(t.sum()), int((~t & ~c).sum()), int((~t).sum()))
        chosen = error_rates_choose(
            shipped={"zh": SHIPPED_ZH}, live={"zh": live}, languages=["zh"], min_labels=min_labels, alpha=0.05
        )["zh"]
        counts = {"zh": (judged, int(called.sum()))}
        with_live = rate_correct(answered=answered, judged=counts, errors={"zh": chosen.used})
        with_shipped = rate_correct(answered=answered, judged=counts, errors={"zh": SHIPPED_ZH})
        live_covered += with_live.ci_low <= target <= with_live.ci_high
        shipped_covered += with_shipped.ci_low <= target <= with_shipped.ci_high
        blocked += any(rate.blocking for rate in chosen.classes)
        live_used += all(rate.source == LIVE for rate in chosen.classes)
    return {
        "live": live_covered / runs,
        "shipped": shipped_covered / runs,
        "blocked": blocked / runs,
        "live_used": live_used / runs,
    }


def test_with_a_shifted_sensitivity_live_rates_keep_the_coverage_that_shipped_ones_lose():
    """Live traffic where the detector's sensitivity is 0.72, not the shipped 0.849 (Sp 0.956 as
    shipped): 5 000 judged Chinese turns, a true follow-up share of 0.25, 400 of them reviewed
    (about 100 follow-ups, so both classes are live). 2 000 seeded runs: the 95 % interval with the
    live error rates covered the true rate in 0.963 of runs, the one with the shipped rates in 0.405.
    """
    figures = _simulate(runs=2000, se=0.72, sp=0.956, true_rate=0.25, judged=5000, reviewed=400, seed=7)
    assert figures["live_used"] == 1.0
    assert figures["live"] >= 0.93, figures
    assert figures["shipped"] <= 0.6, figures


def test_before_enough_reviews_the_shipped_rates_are_used_and_tested():
    """100 reviewed turns (about 25 follow-ups, under the 30 needed): the shipped rates are used. With
    the detector as shipped (Se 0.849), Fisher's test blocks in at most alpha = 5 % of 2 000 runs (it
    is conservative; measured 0.006) and the interval covers (measured 0.996). With the shift (Se
    0.72) it blocks in 0.112 of 1 000 runs: too few follow-ups are reviewed to see a shift of 0.13
    reliably, and the runs it misses are judged by the shipped rates, which cover the true rate in
    about half of them (measured 0.489 overall) until each class has its 30 reviewed turns."""
    unshifted = _simulate(runs=2000, se=0.849, sp=0.956, true_rate=0.25, judged=5000, reviewed=100, seed=9)
    assert unshifted["blocked"] <= 0.05, unshifted
    assert unshifted["live"] >= 0.93, unshifted
    shifted = _simulate(runs=1000, se=0.72, sp=0.956, true_rate=0.25, judged=5000, reviewed=100, seed=8)
    assert shifted["live_used"] < 0.25, shifted
    assert shifted["blocked"] > 10 * unshifted["blocked"], (shifted, unshifted)


def test_why_both_classes_switch_together():
    """A live specificity from about 30 reviewed others beside the shipped sensitivity, with no shift
    at all (Se 0.849, Sp 0.956): the specificity measured on 30 is exactly 1 in a quarter of the runs,
    with no variance, and the interval covers too rarely (measured 0.76 of 2 000 runs); the switch
    waits until each class has `min_labels`, by which time the others number about three times as
    many."""
    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(2000):
        truth = rng.random(5000) < 0.25
        called = np.where(truth, rng.random(5000) < 0.849, rng.random(5000) >= 0.956)
        others = rng.choice(np.flatnonzero(~truth), 30, replace=False)
        mixed = rates(90, 106, int((~called[others]).sum()), 30)
        result = rate_correct(answered=5500, judged={"zh": (5000, int(called.sum()))}, errors={"zh": mixed})
        covered += result.ci_low <= 0.25 * 5000 / 5500 <= result.ci_high
    assert covered / 2000 < 0.9
