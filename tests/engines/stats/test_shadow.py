"""A shadow window's comparison, its numbers checked by hand on four pairs."""

import pytest

from engines.stats.shadow import ShadowBars, ShadowCode, ShadowPair, shadow_compare

BARS = ShadowBars(
    min_pairs=4, min_agreement=0.9, min_similarity=0.3, max_error_increase=0.02, max_latency_ratio=1.5
)


def pair(b_label, b_text, b_ms, c_label, c_text, c_ms, *, b_error=False, c_error=False):
    return ShadowPair(
        baseline_label=b_label,
        baseline_text=b_text,
        baseline_latency_ms=b_ms,
        baseline_error=b_error,
        candidate_label=c_label,
        candidate_text=c_text,
        candidate_latency_ms=c_ms,
        candidate_error=c_error,
    )


PAIRS = [
    pair("yes", "pay in 30 days", 100, "yes", "pay in 30 days", 150),
    pair("no", "no cap", 200, "yes", "no cap", 300),
    pair("yes", "pay", 100, None, "", 50, c_error=True),
    pair("no", "abc", 300, "no", "abd", 600),
]


def test_four_pairs_by_hand():
    c = shadow_compare(pairs=PAIRS, dropped=2, bars=BARS)
    # Labelled and answered: pairs 1, 2 and 4 (3 failed); labels agree on 1 and 4.
    assert (c.pairs, c.dropped, c.labelled, c.agree) == (4, 2, 3, 2)
    assert c.agreement == pytest.approx(2 / 3)
    # Wilson at 95 %, z = 1.959964: centre (2/3 + z²/6) / (1 + z²/3), half z·√(2/9/3 + z²/36) / (1 + z²/3).
    assert c.agreement_interval == pytest.approx((0.20765, 0.93851), abs=1e-5)
    # chrF: identical texts 1, "abc" vs "abd" (orders 1-3: 2/3, 1/2, 0 for precision and recall) 7/18.
    assert c.similarity == pytest.approx((1 + 1 + 7 / 18) / 3) and c.similarity_n == 3
    assert (c.candidate_errors, c.baseline_errors, c.error_difference) == (1, 0, 0.25)
    # Newcombe from Wilson (1/4): [0.04559, 0.69936] and (0/4): [0, 0.48989]:
    # 0.25 − √(0.20441² + 0.48989²), 0.25 + √(0.44936² + 0²).
    assert c.error_interval == pytest.approx((-0.28083, 0.69936), abs=1e-5)
    # Latency over the pairs both answered: medians 300 and 200.
    assert (c.latency_n, c.candidate_latency_ms, c.baseline_latency_ms, c.latency_ratio) == (3, 300, 200, 1.5)
    low, high = c.latency_interval
    assert low <= 1.5 <= high
    assert shadow_compare(pairs=PAIRS, dropped=2, bars=BARS).latency_interval == (low, high)  # seeded
    assert c.verdict == "fail"
    # 1.5 is not above the 1.5 bar: only agreement and errors fail.
    assert [r.code for r in c.reasons] == [ShadowCode.AGREEMENT_LOW, ShadowCode.ERRORS_UP]
    assert c.reasons[1].params == {"candidate": 0.25, "baseline": 0.0, "limit": 0.02}


def test_too_few_pairs_is_insufficient_data_whatever_the_figures():
    c = shadow_compare(pairs=PAIRS, dropped=0, bars=ShadowBars(**{**BARS.__dict__, "min_pairs": 5}))
    assert c.verdict == "insufficient_data" and c.reasons[0].code == ShadowCode.TOO_FEW_PAIRS
    assert c.reasons[0].params == {"pairs": 4, "min_pairs": 5}


def test_a_clean_window_and_free_text_judged_by_chrf():
    same = [pair(None, "the buyer pays", 100, None, "the buyer pays", 110) for _ in range(4)]
    clean = shadow_compare(pairs=same, dropped=0, bars=BARS)
    assert (clean.verdict, clean.labelled, clean.agreement, clean.similarity) == ("pass", 0, None, 1.0)
    # Every pair at 110 ms against 100 ms: the ratio 1.1, no spread to resample.
    assert clean.latency_ratio == pytest.approx(1.1) and clean.latency_interval is None
    other = [pair(None, "the buyer pays", 100, None, "zzzz", 100) for _ in range(4)]
    failed = shadow_compare(pairs=other, dropped=0, bars=BARS)
    assert failed.verdict == "fail" and [r.code for r in failed.reasons] == [ShadowCode.SIMILARITY_LOW]


def test_a_slow_candidate_fails_on_the_ratio_of_medians():
    slow = [pair("a", "x", 100 + i, "a", "x", 400 + i) for i in range(5)]
    c = shadow_compare(pairs=slow, dropped=0, bars=BARS)
    assert c.latency_ratio == pytest.approx(402 / 102)
    assert c.verdict == "fail" and [r.code for r in c.reasons] == [ShadowCode.SLOWER]
