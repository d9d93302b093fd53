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
