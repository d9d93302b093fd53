"""The shift engine's figures on examples small enough to check by hand."""

import pytest
from rapidfuzz.distance import Levenshtein

from engines.shift import (
    has_typo,
    language_shift,
    mixed_script,
    nearest_distances,
    sample_of,
    shift_measure,
    shipped_vocabulary,
    texts_by_language,
)

SUITE = ["abcd", "wxyz"]
LIVE = ["abce", "abcd", "wxy"]


def test_nearest_distances_by_hand_and_against_the_single_pair_distance():
    distances, nearest = nearest_distances(LIVE, SUITE, workers=1)
    # abce -> abcd: one substitution of 4; abcd -> itself; wxy -> wxyz: one deletion of 4.
    assert list(distances) == pytest.approx([0.25, 0.0, 0.25])
    assert list(nearest) == [0, 0, 1]
    for text, distance in zip(LIVE, distances, strict=True):
        assert distance == pytest.approx(min(Levenshtein.normalized_distance(text, s) for s in SUITE))


def test_language_shift_medians_both_ways_and_the_farthest_questions():
    figures = language_shift(language="en", live=LIVE, suite=SUITE, vocabulary=set(), workers=1)
    assert figures.live_to_suite == pytest.approx(0.25)  # median of 0.25, 0, 0.25
    # abcd -> abcd 0; wxyz -> wxy 0.25: median 0.125.
    assert figures.suite_to_live == pytest.approx(0.125)
    # first half [abce] to the second [abcd, wxy]: 0.25.
    assert figures.live_to_live == pytest.approx(0.25)
    assert [(f.text, f.nearest) for f in figures.farthest] == [
        ("abce", "abcd"),
        ("wxy", "wxyz"),
        ("abcd", "abcd"),
    ]
    assert figures.live.length_median == 4 and figures.live.length_q1 == 3.5


def test_shapes_mixed_script_and_typos_with_intervals():
    vocabulary = {"what", "the", "notice", "period"}
    assert mixed_script("这个 notice period 是多少")
    assert not mixed_script("通知期是多少") and not mixed_script("what is it")
    assert has_typo("what is the notise period", vocabulary=vocabulary)  # "is": under 3 letters
    assert not has_typo("What is the NOTICE period", vocabulary=vocabulary)
    live = ["这个 notice 多少", "what is the notise period", "通知期"]
    figures = language_shift(language="zh", live=live, suite=["通知期"], vocabulary=vocabulary, workers=1)
    assert (figures.live.mixed_script.count, figures.live.mixed_script.n) == (1, 3)
    assert figures.live.typos.count == 1
    assert figures.live.typos.low < 1 / 3 < figures.live.typos.high
    assert figures.suite.typos.share == 0.0


def test_a_language_the_suite_lacks_has_no_distance():
    figures = shift_measure(live={"zh": ["通知期"]}, suite={"en": ["notice"]}, workers=1)
    by_language = {f.language: f for f in figures}
    assert by_language["zh"].live_to_suite is None and by_language["zh"].suite_total == 0
    assert by_language["en"].live_to_suite is None and by_language["en"].suite_to_live is None


def test_samples_are_bounded_and_seeded():
    texts = [str(k) for k in range(100)]
    assert sample_of(texts, size=10, seed=3) == sample_of(texts, size=10, seed=3)
    assert len(set(sample_of(texts, size=10, seed=3))) == 10
    assert sample_of(texts[:5], size=10, seed=3) == texts[:5]
    figures = language_shift(language="en", live=texts, suite=texts, sample=7, vocabulary=set(), workers=1)
    assert (figures.live.n, figures.suite.n, figures.live_total) == (7, 7, 100)


def test_languages_read_from_the_script_alike_for_both_sides():
    grouped = texts_by_language(["hello", "你好", "hola", "Clause 15. 如南京博远医药有限公司出现重大违约"])
    assert grouped == {
        "en": ["hello", "hola"],
        "zh": ["你好", "Clause 15. 如南京博远医药有限公司出现重大违约"],
    }
    assert {"period", "notice", "the"} <= shipped_vocabulary()
