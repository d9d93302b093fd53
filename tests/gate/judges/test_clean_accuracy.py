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
