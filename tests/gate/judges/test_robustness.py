import pytest

from engines.reasons import reason
from gate.judges.robustness import (
    RobustnessCode,
    RobustnessPolicy,
    SampleOutcome,
    WorstItem,
    paired_comparison,
    robustness_judge,
    worst_items,
)


class Judging:
    """A policy section with the general keys the judge also takes."""

    def __init__(self, section: RobustnessPolicy, decide_on: str = "lower_bound", confidence: float = 0.95):
        self.section, self.decide_on, self.confidence = section, decide_on, confidence

    def kwargs(self) -> dict:
        return {"policy": self.section, "decide_on": self.decide_on, "confidence": self.confidence}


def sample(item="i1", kind="char_swap", correct=True, tags=("plain",), language="en", errored=False):
    return SampleOutcome(item, kind, language, tags, correct, errored)


def samples(correct: int, wrong: int, **kwargs):
    return [sample(item=f"c{i}", correct=True, **kwargs) for i in range(correct)] + [
        sample(item=f"w{i}", correct=False, **kwargs) for i in range(wrong)
    ]


POLICY = Judging(RobustnessPolicy(robustness_min=0.85, robustness_min_samples=100), "lower_bound")


def test_pass_and_fail_on_the_lower_bound():
    # 950/1000: Wilson lower bound 0.9346 -> pass; 860/1000: lower bound 0.8372 < 0.85 -> fail
    assert robustness_judge(candidate=samples(950, 50), baseline=None, **POLICY.kwargs()).verdict == "pass"
    failed = robustness_judge(candidate=samples(860, 140), baseline=None, **POLICY.kwargs())
    assert failed.verdict == "fail"
    assert failed.reasons[0] == reason(RobustnessCode.BOUND_BELOW, value=failed.candidate.ci_low, bar=0.85)
    assert failed.candidate.ci_low == pytest.approx(0.8372, abs=1e-4)
    point = Judging(RobustnessPolicy(robustness_min=0.85, robustness_min_samples=100), "point")
    assert robustness_judge(candidate=samples(860, 140), baseline=None, **point.kwargs()).verdict == "pass"


def test_too_few_samples_is_insufficient_data_with_the_shortfall():
    result = robustness_judge(
        candidate=samples(50, 0), baseline=None, **POLICY.kwargs(), shortfall=["only 50 could be made"]
    )
    assert result.verdict == "insufficient_data"
    assert result.reasons == [reason(RobustnessCode.TOO_FEW_SAMPLES, n=50, need=100), "only 50 could be made"]


def test_breakdowns_by_type_tag_and_language():
    data = samples(9, 1, kind="qwerty", tags=("ocr_noise",)) + samples(
        2, 8, kind="zh_homophone", tags=("plain", "long_contract"), language="zh"
    )
    summary = robustness_judge(candidate=data, baseline=None, **POLICY.kwargs()).candidate
    assert summary.by_type["qwerty"].rate == pytest.approx(0.9)
    assert summary.by_type["zh_homophone"].correct == 2
    assert summary.by_tag["long_contract"].n == 10 and summary.by_tag["ocr_noise"].n == 10
    assert summary.by_language["zh"].rate == pytest.approx(0.2)
    assert summary.n == 20


def test_paired_comparison_is_mcnemar_on_discordant_pairs():
    candidate = [sample(correct=c) for c in [True] * 10 + [False] * 2 + [True] * 5]
    baseline = [sample(correct=b) for b in [False] * 10 + [True] * 2 + [True] * 5]
    comparison = paired_comparison(candidate=candidate, baseline=baseline)
    assert (comparison.only_candidate_correct, comparison.only_baseline_correct) == (10, 2)
    assert comparison.mcnemar_p == pytest.approx(158 / 4096)
    assert comparison.difference == pytest.approx(8 / 17)


def test_worst_items_rank_by_failures():
    data = [sample(item="a", correct=False)] * 3 + [sample(item="b", correct=False), sample(item="b")]
    assert worst_items(outcomes=[*data, sample(item="c")]) == [
        WorstItem(item_id="a", failed=3, samples=3),
        WorstItem(item_id="b", failed=1, samples=2),
    ]
