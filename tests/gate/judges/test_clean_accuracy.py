import pytest

from engines.reasons import reason
from gate.judges.clean_accuracy import (
    CleanAccuracyCode,
    CleanAccuracyPolicy,
    ItemOutcome,
    accuracy_summarize,
    clean_accuracy_judge,
)


class Judging:
    """A policy section with the general keys the judge also takes."""

    def __init__(
        self, section: CleanAccuracyPolicy, decide_on: str = "lower_bound", confidence: float = 0.95
    ):
        self.section, self.decide_on, self.confidence = section, decide_on, confidence

    def kwargs(self) -> dict:
        return {"policy": self.section, "decide_on": self.decide_on, "confidence": self.confidence}


def outcomes(correct: int, wrong: int, *, tags=("plain",), language="en", errored=0):
    items = [ItemOutcome(f"c{i}", tags, language, True) for i in range(correct)]
    items += [ItemOutcome(f"w{i}", tags, language, False, errored=i < errored) for i in range(wrong)]
    return items


def test_summary_breaks_down_by_tag_and_language():
    data = outcomes(8, 2, tags=("plain",), language="en") + outcomes(
        1, 3, tags=("ocr_noise", "long_contract"), language="zh"
    )
    summary = accuracy_summarize(outcomes=data, confidence=0.95)
    assert (summary.n, summary.correct, summary.accuracy) == (14, 9, pytest.approx(9 / 14))
    assert summary.by_tag["plain"].accuracy == pytest.approx(0.8)
    assert summary.by_tag["ocr_noise"].n == 4 and summary.by_tag["long_contract"].correct == 1
    assert set(summary.by_language) == {"en", "zh"}
    assert summary.by_language["zh"].accuracy == pytest.approx(0.25)


def test_passes_on_lower_bound_by_default():
    # 81/100: point 0.81 but Wilson lower bound 0.722 -> fails a 0.80 bar on the lower bound
    policy = Judging(CleanAccuracyPolicy(clean_accuracy_min=0.80), "lower_bound")
    result = clean_accuracy_judge(candidate=outcomes(81, 19), baseline=None, **policy.kwargs())
    assert result.verdict == "fail"
    assert result.reasons[0].code == CleanAccuracyCode.BOUND_BELOW
    assert result.reasons[0].params == {"value": pytest.approx(0.7222, abs=1e-4), "bar": 0.80}
    point = Judging(CleanAccuracyPolicy(clean_accuracy_min=0.80), "point")
    assert clean_accuracy_judge(candidate=outcomes(81, 19), baseline=None, **point.kwargs()).verdict == "pass"


def test_insufficient_data_below_minimum_items():
    policy = Judging(CleanAccuracyPolicy(clean_min_items=30), "lower_bound")
    result = clean_accuracy_judge(candidate=outcomes(20, 0), baseline=None, **policy.kwargs())
    assert result.verdict == "insufficient_data"
    assert result.reasons == [reason(CleanAccuracyCode.TOO_FEW_ITEMS, n=20, need=30)]


def test_errors_count_as_wrong_and_are_reported():
    policy = Judging(CleanAccuracyPolicy(clean_accuracy_min=0.9), "lower_bound")
    result = clean_accuracy_judge(
        candidate=outcomes(50, 50, errored=30), baseline=outcomes(90, 10), **policy.kwargs()
    )
    assert result.verdict == "fail"
    assert result.candidate.errors == 30
    assert reason(CleanAccuracyCode.ITEMS_ERRORED, errors=30, n=100) in result.reasons
    assert result.baseline.accuracy == pytest.approx(0.9)


def test_repeats_give_pass_k_the_flaky_items_and_an_interval_clustered_by_item():
    # Six items, four repeats each (answers interleaved, repeat by repeat): per-item means
    # 0.75, 0.5, 0.25, 0.5, 0, 1.
    marks = {
        "a": [1, 1, 1, 0],
        "b": [1, 0, 1, 0],
        "c": [0, 0, 1, 0],
        "d": [0, 1, 0, 1],
        "e": [0, 0, 0, 0],
        "f": [1, 1, 1, 1],
    }
    data = [
        ItemOutcome(item, ("plain",), "en", bool(m[r]), snippet=f"input {item}")
        for r in range(4)
        for item, m in marks.items()
    ]
    summary = accuracy_summarize(outcomes=data, confidence=0.95, repeats=4)
    assert (summary.n, summary.correct, summary.accuracy) == (24, 12, 0.5)
    repeats = summary.repeats
    assert (repeats.k, repeats.items, repeats.flaky_count) == (4, 6, 4)
    assert (repeats.pass_all, repeats.pass_any) == (pytest.approx(1 / 6), pytest.approx(5 / 6))
    assert [(f.item_id, f.right) for f in repeats.flaky] == [("c", 1), ("b", 2), ("d", 2), ("a", 3)]
    assert repeats.flaky[0].snippet == "input c" and repeats.flaky[0].of == 4
    # By hand: squared deviations from 0.5 sum to 0.625, sd² = 0.625 / 5, se = √(sd² / 6);
    # t(0.975, 5 df) = 2.570581835636314.
    se = (0.625 / 5 / 6) ** 0.5
    assert repeats.se == pytest.approx(se, abs=1e-12)
    half = 2.570581835636314 * se
    assert (summary.ci_low, summary.ci_high) == pytest.approx((0.5 - half, 0.5 + half), abs=1e-12)
    assert summary.by_tag["plain"].ci_low == summary.ci_low
    # Asked once, the same 24 answers are 24 items with a Wilson interval (narrower), no repeats.
    once = accuracy_summarize(outcomes=data, confidence=0.95)
    assert once.repeats is None and summary.ci_low < once.ci_low


class TestAnswerJudgeAdmit:
    """The answer judge decides only when its kappa with people, on enough labelled answers, clears
    the bar."""

    def admit(self, human, judged, decide_on="lower_bound", **policy):
        from engines.scoring.judge import agreement_measure
        from gate.judges.clean_accuracy import answer_judge_admit

        agreement = agreement_measure(human=human, judged=judged) if human is not None else None
        return answer_judge_admit(
            judge="j:1", agreement=agreement, policy=CleanAccuracyPolicy(**policy), decide_on=decide_on
        )

    def test_kappa_0_8_on_50_answers_clears_0_6_on_its_estimate_not_on_its_lower_bound(self):
        # [[23, 2], [3, 22]]: p_o 0.9, p_e 0.5, kappa 0.8; its 95 % lower bound is about 0.63.
        human = [True] * 25 + [False] * 25
        judged = [True] * 23 + [False] * 2 + [True] * 3 + [False] * 22
        admitted, why = self.admit(human, judged)
        assert admitted and why.code == CleanAccuracyCode.JUDGE_ADMITTED
        assert why.params["kappa"] == pytest.approx(0.8) and 0.6 < why.params["low"] < 0.8
        refused, why = self.admit(human, judged, answer_judge_kappa_min=0.7)
        assert not refused and why.code == CleanAccuracyCode.JUDGE_BOUND_BELOW
        admitted, why = self.admit(human, judged, decide_on="point", answer_judge_kappa_min=0.7)
        assert admitted and why.code == CleanAccuracyCode.JUDGE_ADMITTED
        refused, why = self.admit(human, judged, decide_on="point", answer_judge_kappa_min=0.85)
        assert not refused and why.code == CleanAccuracyCode.JUDGE_KAPPA_BELOW and why.params["bar"] == 0.85

    def test_too_few_labels_no_labels_and_an_undefined_kappa_are_refused(self):
        few, why = self.admit([True, False] * 10, [True, False] * 10)  # perfect, but 20 < 30
        assert not few and why.code == CleanAccuracyCode.JUDGE_TOO_FEW_LABELS and why.params["need"] == 30
        none, why = self.admit(None, None)
        assert not none and why.code == CleanAccuracyCode.JUDGE_NO_LABELS
        undefined, why = self.admit([True] * 40, [True] * 40)
        assert not undefined and why.code == CleanAccuracyCode.JUDGE_KAPPA_UNDEFINED


def test_noisy_counts_are_the_share_of_the_suite_dealt_by_language():
    from gate.judges.clean_accuracy import noisy_counts

    # 0.15 × 100 = 15: en 9.0, zh 4.5, mixed 1.5 → 9 + 4 + 1 = 14, the one left to the larger remainder tie
    # by size (zh).
    assert noisy_counts(sizes={"en": 60, "zh": 30, "mixed": 10}, share=0.15) == {"en": 9, "mixed": 1, "zh": 5}
    assert noisy_counts(sizes={"en": 7, "zh": 6}, share=0.15) == {"en": 1, "zh": 1}  # 1.95 → 2
    assert noisy_counts(sizes={"en": 3}, share=0.1) == {"en": 0}
    assert noisy_counts(sizes={"en": 5, "zh": 5}, share=1.0) == {"en": 5, "zh": 5}
    for sizes in ({"en": 123, "zh": 77, "mixed": 41}, {"en": 1, "zh": 1, "mixed": 1}):
        counts = noisy_counts(sizes=sizes, share=0.15)
        assert sum(counts.values()) == int(0.15 * sum(sizes.values()) + 0.5)
        assert all(int(0.15 * n) <= counts[lang] <= int(0.15 * n) + 1 for lang, n in sizes.items())


def test_noisy_side_pairs_each_item_clean_with_its_mixed_answer():
    from engines.stats.hypothesis import mcnemar_exact
    from engines.stats.intervals import paired_difference_interval
    from gate.judges.clean_accuracy import noisy_side_summarize

    clean = outcomes(8, 2, language="en") + outcomes(0, 0) + [ItemOutcome("z1", (), "zh", True)]
    # Replaced: c0..c3, w1 (en) and z1 (zh). c0, c1 and z1 turn wrong, w1 turns right; w0 stays as it was.
    replaced = {"c0", "c1", "c2", "c3", "z1", "w1"}
    wrong_now = {"c0", "c1", "z1"}
    mix = [
        ItemOutcome(
            o.item_id, o.tags, o.language, (o.correct and o.item_id not in wrong_now) or o.item_id == "w1"
        )
        for o in clean
    ]
    side = noisy_side_summarize(version="v", clean=clean, mix=mix, replaced=replaced, confidence=0.95)
    assert (side.items, side.replaced, side.correct, side.n) == (11, 6, 7, 11)
    assert side.clean_accuracy == pytest.approx(9 / 11) and side.accuracy == pytest.approx(7 / 11)
    assert (side.only_clean_right, side.only_noisy_right) == (3, 1)
    assert side.mcnemar_p == pytest.approx(mcnemar_exact(only_first=3, only_second=1))
    drop, low, high = paired_difference_interval(differences=[1, 1, 0, 0, 0, 0, 0, 0, 0, -1, 1])
    assert (side.drop, side.drop_low, side.drop_high) == pytest.approx((drop, low, high))
    assert side.drop == pytest.approx(2 / 11)
    zh = side.by_language["zh"]
    assert (zh.items, zh.replaced, zh.accuracy, zh.clean_accuracy, zh.drop) == (1, 1, 0.0, 1.0, 1.0)
    assert side.by_language["en"].replaced == 5
    with pytest.raises(ValueError, match="pair up"):
        noisy_side_summarize(version="v", clean=clean, mix=mix[:-1], replaced=replaced, confidence=0.95)


def test_noisy_side_with_repeats_uses_each_items_mean():
    from gate.judges.clean_accuracy import noisy_side_summarize

    # Two items asked twice (repeat-major): a right twice clean, once in the mix; b wrong clean, right mixed.
    clean = [ItemOutcome("a", (), "en", True), ItemOutcome("b", (), "en", False)] * 2
    mix = [
        ItemOutcome("a", (), "en", True),
        ItemOutcome("b", (), "en", True),
        ItemOutcome("a", (), "en", False),
        ItemOutcome("b", (), "en", True),
    ]
    side = noisy_side_summarize(
        version="v", clean=clean, mix=mix, replaced={"a", "b"}, confidence=0.95, repeats=2
    )
    assert (side.n, side.correct, side.accuracy, side.clean_accuracy) == (4, 3, 0.75, 0.5)
    assert side.drop == pytest.approx(-0.25)  # per item: a 1 − 0.5, b 0 − 1
    assert (side.only_clean_right, side.only_noisy_right) == (
        0,
        1,
    )  # first answers: a right both, b turns right
