"""Layer 0, clean accuracy: how often each version answers the golden items correctly. Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from engines.reasons import Reason, gettext_noop, reason, wordings_register
from engines.stats.intervals import wilson_interval
from gate.cost import VersionCost
from gate.judges.verdict import FAIL, INSUFFICIENT, PASS
from gate.policy import LOWER_BOUND, PolicySection, setting


class CleanAccuracyCode(StrEnum):
    TOO_FEW_ITEMS = "clean_accuracy.too_few_items"
    BOUND_CLEARS = "clean_accuracy.bound_clears"
    BOUND_BELOW = "clean_accuracy.bound_below"
    ACCURACY_CLEARS = "clean_accuracy.accuracy_clears"
    ACCURACY_BELOW = "clean_accuracy.accuracy_below"
    ITEMS_ERRORED = "clean_accuracy.items_errored"


wordings_register(
    {
        CleanAccuracyCode.TOO_FEW_ITEMS: gettext_noop("{n} items scored, the policy needs at least {need}"),
        CleanAccuracyCode.BOUND_CLEARS: gettext_noop("lower bound {value:.3f} >= bar {bar:.3f}"),
        CleanAccuracyCode.BOUND_BELOW: gettext_noop("lower bound {value:.3f} < bar {bar:.3f}"),
        CleanAccuracyCode.ACCURACY_CLEARS: gettext_noop("accuracy {value:.3f} >= bar {bar:.3f}"),
        CleanAccuracyCode.ACCURACY_BELOW: gettext_noop("accuracy {value:.3f} < bar {bar:.3f}"),
        CleanAccuracyCode.ITEMS_ERRORED: gettext_noop("{errors} of {n} items errored (counted as wrong)"),
    }
)


@dataclass(frozen=True)
class CleanAccuracyPolicy(PolicySection):
    clean_accuracy_min: float = setting(
        0.80, low=0.0, high=1.0, help="the bar for the candidate's accuracy on the suite"
    )
    clean_min_items: int = setting(30, low=1, high=10**7, help="fewer scored items is insufficient data")


@dataclass(frozen=True)
class ItemOutcome:
    item_id: str
    tags: tuple[str, ...]
    language: str
    correct: bool
    errored: bool = False


@dataclass(frozen=True, kw_only=True)
class AccuracyCell:
    n: int
    correct: int
    accuracy: float | None
    ci_low: float
    ci_high: float


@dataclass(frozen=True, kw_only=True)
class AccuracySummary(AccuracyCell):
    errors: int
    by_tag: dict[str, AccuracyCell]
    by_language: dict[str, AccuracyCell]


@dataclass(frozen=True, kw_only=True)
class AccuracySide(AccuracySummary):
    """One version's summary with what computing it cost."""

    version: str
    seconds: float = 0.0
    items_per_second: float | None = None
    computed: int = 0
    cached: int = 0
    device: str = ""


@dataclass(frozen=True, kw_only=True)
class CleanAccuracyDetails:
    """What the layer stores (LayerResult.details) and the report, templates and dashboards read."""

    suite: str
    suite_hash: str
    candidate: AccuracySide
    baseline: AccuracySide | None = None
    difference: float | None = None
    costs: list[VersionCost] = field(default_factory=list)  # each version's model work, priced


def _cell(correct: int, n: int, confidence: float) -> AccuracyCell:
    low, high = wilson_interval(successes=correct, n=n, confidence=confidence)
    return AccuracyCell(n=n, correct=correct, accuracy=correct / n if n else None, ci_low=low, ci_high=high)


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
    overall = _cell(correct, n, confidence)
    return AccuracySummary(
        n=n,
        correct=correct,
        accuracy=overall.accuracy,
        ci_low=overall.ci_low,
        ci_high=overall.ci_high,
        errors=sum(o.errored for o in outcomes),
        by_tag={t: _cell(c, k, confidence) for t, (c, k) in sorted(tag_counts.items())},
        by_language={lang: _cell(c, k, confidence) for lang, (c, k) in sorted(language_counts.items())},
    )


@dataclass(frozen=True)
class CleanAccuracyResult:
    verdict: str
    reasons: list[Reason]
    candidate: AccuracySummary
    baseline: AccuracySummary | None


def clean_accuracy_judge(
    *,
    candidate: Sequence[ItemOutcome],
    baseline: Sequence[ItemOutcome] | None,
    policy: CleanAccuracyPolicy,
    decide_on: str,
    confidence: float,
) -> CleanAccuracyResult:
    """Pass when the candidate's accuracy (by default its interval's lower bound) reaches
    `clean_accuracy_min`; insufficient data below `clean_min_items` items."""
    summary = accuracy_summarize(outcomes=candidate, confidence=confidence)
    baseline_summary = accuracy_summarize(outcomes=baseline, confidence=confidence) if baseline else None
    bar = policy.clean_accuracy_min
    if summary.n < policy.clean_min_items:
        too_few = reason(CleanAccuracyCode.TOO_FEW_ITEMS, n=summary.n, need=policy.clean_min_items)
        return CleanAccuracyResult(INSUFFICIENT, [too_few], summary, baseline_summary)
    use_bound = decide_on == LOWER_BOUND
    judged = summary.ci_low if use_bound else summary.accuracy
    assert judged is not None  # n >= clean_min_items >= 1
    if judged >= bar:
        clears = CleanAccuracyCode.BOUND_CLEARS if use_bound else CleanAccuracyCode.ACCURACY_CLEARS
        return CleanAccuracyResult(PASS, [reason(clears, value=judged, bar=bar)], summary, baseline_summary)
    below = CleanAccuracyCode.BOUND_BELOW if use_bound else CleanAccuracyCode.ACCURACY_BELOW
    reasons = [reason(below, value=judged, bar=bar)]
    if summary.errors:
        reasons.append(reason(CleanAccuracyCode.ITEMS_ERRORED, errors=summary.errors, n=summary.n))
    return CleanAccuracyResult(FAIL, reasons, summary, baseline_summary)
