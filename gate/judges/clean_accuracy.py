"""Layer 0, clean accuracy: how often each version answers the golden items correctly."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from engines.stats.intervals import wilson_interval
from gate.judges.verdict import FAIL, INSUFFICIENT, PASS
from gate.policy import GatePolicyConfig


@dataclass(frozen=True)
class ItemOutcome:
    item_id: str
    tags: tuple[str, ...]
    language: str
    correct: bool
    errored: bool = False


@dataclass(frozen=True)
class AccuracySummary:
    n: int
    correct: int
    errors: int
    accuracy: float | None
    ci_low: float
    ci_high: float
    by_tag: dict[str, dict]
    by_language: dict[str, dict]

    def as_dict(self) -> dict:
        return {
            "n": self.n,
            "correct": self.correct,
            "errors": self.errors,
            "accuracy": self.accuracy,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "by_tag": self.by_tag,
            "by_language": self.by_language,
        }


def _cell(correct: int, n: int, confidence: float) -> dict:
    low, high = wilson_interval(successes=correct, n=n, confidence=confidence)
    return {
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else None,
        "ci_low": low,
        "ci_high": high,
    }


def accuracy_summarize(*, outcomes: Sequence[ItemOutcome], confidence: float) -> AccuracySummary:
    n = len(outcomes)
    correct = sum(o.correct for o in outcomes)
    tag_counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    language_counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for outcome in outcomes:
        for tag in outcome.tags or ("untagged",):
            tag_counts[tag][0] += outcome.correct
            tag_counts[tag][1] += 1
        language_counts[outcome.language or "unknown"][0] += outcome.correct
        language_counts[outcome.language or "unknown"][1] += 1
    low, high = wilson_interval(successes=correct, n=n, confidence=confidence)
    return AccuracySummary(
        n=n,
        correct=correct,
        errors=sum(o.errored for o in outcomes),
        accuracy=correct / n if n else None,
        ci_low=low,
        ci_high=high,
        by_tag={t: _cell(c, k, confidence) for t, (c, k) in sorted(tag_counts.items())},
        by_language={lang: _cell(c, k, confidence) for lang, (c, k) in sorted(language_counts.items())},
    )


@dataclass(frozen=True)
class CleanAccuracyResult:
    verdict: str
    reasons: list[str]
    candidate: AccuracySummary
    baseline: AccuracySummary | None


def clean_accuracy_judge(
    *,
    candidate: Sequence[ItemOutcome],
    baseline: Sequence[ItemOutcome] | None,
    policy: GatePolicyConfig,
) -> CleanAccuracyResult:
    """Pass when the candidate's accuracy (by default its interval's lower bound) reaches
    `clean_accuracy_min`; insufficient data below `clean_min_items` items."""
    summary = accuracy_summarize(outcomes=candidate, confidence=policy.confidence)
    baseline_summary = (
        accuracy_summarize(outcomes=baseline, confidence=policy.confidence) if baseline else None
    )
    bar = policy.clean_accuracy_min
    if summary.n < policy.clean_min_items:
        reason = f"{summary.n} items scored, the policy needs at least {policy.clean_min_items}"
        return CleanAccuracyResult(INSUFFICIENT, [reason], summary, baseline_summary)
    judged = summary.ci_low if policy.decide_on == "lower_bound" else summary.accuracy
    what = "lower bound" if policy.decide_on == "lower_bound" else "accuracy"
    if judged >= bar:
        reasons = [f"{what} {judged:.3f} >= {bar:.3f}"]
        return CleanAccuracyResult(PASS, reasons, summary, baseline_summary)
    reasons = [f"{what} {judged:.3f} < {bar:.3f}"]
    if summary.errors:
        reasons.append(f"{summary.errors} of {summary.n} items errored (counted as wrong)")
    return CleanAccuracyResult(FAIL, reasons, summary, baseline_summary)
