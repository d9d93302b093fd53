"""Layer 1, robustness: how often a version still answers correctly when its inputs are
perturbed (typos, OCR-like noise, Chinese homophones ...), judged against a bar."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from engines.stats.hypothesis import mcnemar_exact
from engines.stats.intervals import wilson_interval
from gate.judges.verdict import FAIL, INSUFFICIENT, PASS
from gate.policy import GatePolicyConfig


@dataclass(frozen=True)
class SampleOutcome:
    item_id: str
    type: str
    language: str
    tags: tuple[str, ...]
    correct: bool
    errored: bool = False


def rate_cell(*, correct: int, n: int, confidence: float) -> dict:
    low, high = wilson_interval(successes=correct, n=n, confidence=confidence)
    return {"n": n, "correct": correct, "rate": correct / n if n else None, "ci_low": low, "ci_high": high}


def rate_breakdown(
    *, outcomes: Iterable[SampleOutcome], keys: Callable[[SampleOutcome], Iterable[str]], confidence: float
) -> dict[str, dict]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for outcome in outcomes:
        for key in keys(outcome):
            counts[key][0] += outcome.correct
            counts[key][1] += 1
    return {key: rate_cell(correct=c, n=n, confidence=confidence) for key, (c, n) in sorted(counts.items())}


@dataclass(frozen=True)
class RobustnessSummary:
    overall: dict
    by_type: dict[str, dict]
    by_tag: dict[str, dict]
    by_language: dict[str, dict]
    errors: int

    def as_dict(self) -> dict:
        return {
            **self.overall,
            "errors": self.errors,
            "by_type": self.by_type,
            "by_tag": self.by_tag,
            "by_language": self.by_language,
        }


def robustness_summarize(*, outcomes: Sequence[SampleOutcome], confidence: float) -> RobustnessSummary:
    return RobustnessSummary(
        overall=rate_cell(correct=sum(o.correct for o in outcomes), n=len(outcomes), confidence=confidence),
        by_type=rate_breakdown(outcomes=outcomes, keys=lambda o: (o.type,), confidence=confidence),
        by_tag=rate_breakdown(
            outcomes=outcomes, keys=lambda o: o.tags or ("untagged",), confidence=confidence
        ),
        by_language=rate_breakdown(outcomes=outcomes, keys=lambda o: (o.language,), confidence=confidence),
        errors=sum(o.errored for o in outcomes),
    )


def paired_comparison(*, candidate: Sequence[SampleOutcome], baseline: Sequence[SampleOutcome]) -> dict:
    """McNemar on the same perturbed inputs: which version keeps more of them right."""
    if len(candidate) != len(baseline):
        raise ValueError("paired outcomes must have the same length")
    only_candidate = sum(c.correct and not b.correct for c, b in zip(candidate, baseline, strict=True))
    only_baseline = sum(b.correct and not c.correct for c, b in zip(candidate, baseline, strict=True))
    n = len(candidate)
    return {
        "n": n,
        "only_candidate_correct": only_candidate,
        "only_baseline_correct": only_baseline,
        "difference": (only_candidate - only_baseline) / n if n else None,
        "mcnemar_p": mcnemar_exact(only_first=only_candidate, only_second=only_baseline),
    }


def worst_items(*, outcomes: Sequence[SampleOutcome], limit: int = 20) -> list[dict]:
    """Items whose perturbations failed most often, for drill-down."""
    failed, total = Counter(), Counter()
    for outcome in outcomes:
        total[outcome.item_id] += 1
        failed[outcome.item_id] += not outcome.correct
    ranked = sorted((item for item in failed if failed[item]), key=lambda i: (-failed[i], i))
    return [{"item_id": i, "failed": failed[i], "samples": total[i]} for i in ranked[:limit]]


@dataclass(frozen=True)
class RobustnessResult:
    verdict: str
    reasons: list[str]
    candidate: RobustnessSummary
    baseline: RobustnessSummary | None
    comparison: dict | None
    worst: list[dict]


def robustness_judge(
    *,
    candidate: Sequence[SampleOutcome],
    baseline: Sequence[SampleOutcome] | None,
    policy: GatePolicyConfig,
    shortfall: Sequence[str] = (),
) -> RobustnessResult:
    """Pass when the candidate's robustness rate (by default the Wilson lower bound) reaches
    `robustness_min`; insufficient data when fewer than `robustness_min_samples` samples exist."""
    summary = robustness_summarize(outcomes=candidate, confidence=policy.confidence)
    baseline_summary = (
        robustness_summarize(outcomes=baseline, confidence=policy.confidence) if baseline else None
    )
    comparison = paired_comparison(candidate=candidate, baseline=baseline) if baseline else None
    worst = worst_items(outcomes=candidate)
    n = summary.overall["n"]
    if n < policy.robustness_min_samples:
        reasons = [f"{n} perturbed samples, the policy needs at least {policy.robustness_min_samples}"]
        return RobustnessResult(
            INSUFFICIENT, reasons + list(shortfall), summary, baseline_summary, comparison, worst
        )
    bar = policy.robustness_min
    use_bound = policy.decide_on == "lower_bound"
    judged = summary.overall["ci_low"] if use_bound else summary.overall["rate"]
    what = "lower bound" if use_bound else "robustness"
    if judged >= bar:
        return RobustnessResult(
            PASS, [f"{what} {judged:.3f} >= {bar:.3f}"], summary, baseline_summary, comparison, worst
        )
    reasons = [f"{what} {judged:.3f} < {bar:.3f}"]
    weakest = sorted(summary.by_type.items(), key=lambda kv: kv[1]["rate"])[:2]
    reasons += [f"weakest: {name} {cell['correct']}/{cell['n']}" for name, cell in weakest]
    if summary.errors:
        reasons.append(f"{summary.errors} samples errored (counted as wrong)")
    return RobustnessResult(FAIL, reasons, summary, baseline_summary, comparison, worst)
