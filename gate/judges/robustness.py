"""Layer 1, robustness: how often a version still answers correctly when its inputs are
perturbed (typos, OCR-like noise, Chinese homophones ...), judged against a bar. Pure."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from engines.perturbation.attack import AttackReport, AttackSpec
from engines.reasons import Reason, gettext_noop, reason, wordings_register
from engines.stats.hypothesis import mcnemar_exact
from engines.stats.intervals import wilson_interval
from gate.cost import VersionCost
from gate.judges.verdict import FAIL, INSUFFICIENT, PASS
from gate.policy import LOWER_BOUND, PolicyError, PolicySection, setting

JUDGE_BY = ("reference", "consistency")
ACCESS = ("auto", "scores", "labels")


class RobustnessCode(StrEnum):
    TOO_FEW_SAMPLES = "robustness.too_few_samples"
    BOUND_CLEARS = "robustness.bound_clears"
    BOUND_BELOW = "robustness.bound_below"
    RATE_CLEARS = "robustness.rate_clears"
    RATE_BELOW = "robustness.rate_below"
    WEAKEST = "robustness.weakest"
    SAMPLES_ERRORED = "robustness.samples_errored"
    SHARES = "robustness.shares"


wordings_register(
    {
        RobustnessCode.SHARES: gettext_noop("must map perturbation types to non-negative numbers"),
        RobustnessCode.TOO_FEW_SAMPLES: gettext_noop(
            "{n} perturbed samples, the policy needs at least {need}"
        ),
        RobustnessCode.BOUND_CLEARS: gettext_noop("lower bound {value:.3f} >= bar {bar:.3f}"),
        RobustnessCode.BOUND_BELOW: gettext_noop("lower bound {value:.3f} < bar {bar:.3f}"),
        RobustnessCode.RATE_CLEARS: gettext_noop("robustness {value:.3f} >= bar {bar:.3f}"),
        RobustnessCode.RATE_BELOW: gettext_noop("robustness {value:.3f} < bar {bar:.3f}"),
        RobustnessCode.WEAKEST: gettext_noop("weakest: {name} {correct}/{n}"),
        RobustnessCode.SAMPLES_ERRORED: gettext_noop("{errors} samples errored (counted as wrong)"),
    }
)


def _shares(key: str, value: object) -> dict[str, float]:
    if not (
        isinstance(value, dict)
        and value
        and all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            for k, v in value.items()
        )
    ):
        raise PolicyError(key, reason(RobustnessCode.SHARES))
    return {k: float(v) for k, v in value.items()}


@dataclass(frozen=True)
class RobustnessPolicy(PolicySection):
    robustness_recipe: str = setting(
        "robustness-v1",
        help="the perturbation recipe: a random-noise one (robustness-v1, typos-v1, imperceptible-v1) or a "
        "word-level adversarial one (textfooler-v2, textfooler-v1, pwws-v1), which attacks each drawn item",
    )
    robustness_seed: int = setting(0, low=0, high=2**31 - 1, help="seed of the perturbed set")
    robustness_samples: int = setting(1000, low=1, high=100_000, help="perturbed samples to make")
    robustness_transfer_from: str | None = setting(
        None,
        help="adversarial recipes: null attacks each version itself (adaptive); 'baseline' or a version "
        "(family:label) scores every version on the set made once against that version (transfer)",
    )
    robustness_access: str = setting(
        "auto",
        choices=ACCESS,
        help="adversarial recipes: what the search reads of the attacked version: scores (class "
        "probabilities: the score-based search), labels (the answer's label alone: the hard-label search) "
        "or auto (scores where the version gives them, else labels)",
    )
    robustness_min_samples: int = setting(500, low=1, high=100_000, help="fewer is insufficient data")
    robustness_min: float = setting(0.85, low=0.0, high=1.0, help="the bar for the robustness rate")
    robustness_chunk_size: int = setting(
        100, low=1, high=10_000, help="samples committed together (a resumed run redoes at most one chunk)"
    )
    robustness_shares: dict[str, float] | None = setting(
        None, check=_shares, help="perturbation type -> share; null keeps the recipe's own shares"
    )
    numbers_matter: bool = setting(
        True, help="false allows perturbations that change numbers (amounts, days) in the inputs"
    )
    robustness_judge_by: str = setting(
        "reference",
        choices=JUDGE_BY,
        help="reference: a sample counts when its answer is right for the item; consistency: when it "
        "agrees with the model's own answer to the clean item",
    )
    attack_recipe: str | None = setting(
        None,
        help="attack mode (classifiers): a TextAttack recipe searched against a sample of items, reported "
        "beside the rate (it does not change the verdict); null: off",
    )
    attack_items: int = setting(50, low=1, high=10_000, help="items attack mode searches")
    attack_query_budget: int = setting(500, low=1, high=1_000_000, help="model calls per attacked item")


@dataclass(frozen=True)
class SampleOutcome:
    item_id: str
    type: str
    language: str
    tags: tuple[str, ...]
    correct: bool
    errored: bool = False


@dataclass(frozen=True, kw_only=True)
class RateCell:
    n: int
    correct: int
    rate: float | None
    ci_low: float
    ci_high: float


def rate_cell(*, correct: int, n: int, confidence: float) -> RateCell:
    low, high = wilson_interval(successes=correct, n=n, confidence=confidence)
    return RateCell(n=n, correct=correct, rate=correct / n if n else None, ci_low=low, ci_high=high)


def rate_breakdown(
    *, outcomes: Iterable[SampleOutcome], keys: Callable[[SampleOutcome], Iterable[str]], confidence: float
) -> dict[str, RateCell]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for outcome in outcomes:
        for key in keys(outcome):
            counts[key][0] += outcome.correct
            counts[key][1] += 1
    return {key: rate_cell(correct=c, n=n, confidence=confidence) for key, (c, n) in sorted(counts.items())}


@dataclass(frozen=True, kw_only=True)
class RobustnessSummary(RateCell):
    errors: int
    by_type: dict[str, RateCell]
    by_tag: dict[str, RateCell]
    by_language: dict[str, RateCell]


@dataclass(frozen=True, kw_only=True)
class RobustnessSide(RobustnessSummary):
    """One version's summary with what computing it cost."""

    version: str
    seconds: float = 0.0
    items_per_second: float | None = None
    computed: int = 0
    cached: int = 0


@dataclass(frozen=True, kw_only=True)
class PairedComparison:
    """McNemar on the same perturbed inputs: which version keeps more of them right."""

    n: int
    only_candidate_correct: int
    only_baseline_correct: int
    difference: float | None
    mcnemar_p: float


@dataclass(frozen=True, kw_only=True)
class WorstItem:
    item_id: str
    failed: int
    samples: int


@dataclass(frozen=True, kw_only=True)
class AttackDetails:
    spec: AttackSpec
    versions: dict[str, AttackReport] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AdversarialReport:
    """One version under a word-level attack: adaptive (the search ran against this version) or
    transfer (this version answered the set made against `attacked`)."""

    version: str
    mode: str
    attacked: str  # the version the search ran against
    items: int
    skipped: int  # the attacked version was wrong before any edit
    succeeded: int
    failed: int
    accuracy_before: float | None
    accuracy_under_attack: float | None
    attack_success_rate: float | None  # succeeded / (succeeded + failed), of the attacked version
    queries_per_item: float | None
    queries_max: int | None = None  # the most queries one attacked item took
    # How the set was searched: "score-based" (class probabilities) or "hard-label" (the answer's label
    # alone), and why (a reason's JSON: the version's backend, or the policy's robustness_access).
    search: str = "score-based"
    search_reason: dict[str, Any] | None = None
    budget_spent: int  # searches that ended on the query budget (counted as not flipped)
    words_changed_per_success: float | None
    cached: bool  # the set came from an earlier run (same suite, version config, recipe, seed, size)
    seconds: float
    examples: list[dict[str, object]] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class RobustnessDetails:
    """What the layer stores (LayerResult.details): the perturbed set's recipe, seed and hash, each
    version's rates, the paired comparison, the worst items, attack mode's reports and timings. An
    errored layer keeps what it knew (the recipe, seed and attack recipe)."""

    recipe: str
    seed: int
    samples_requested: int | None = None
    set_hash: str = ""
    shortfall: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judged_by: str = "reference"
    text_cutoffs: dict[str, float] | None = None
    attack_recipe: str | None = None
    attack: AttackDetails | None = None
    mode: str = "noise"  # noise, adaptive or transfer
    access: str = "auto"  # adversarial recipes: the policy's robustness_access
    transfer_from: str | None = None
    adversarial: dict[str, AdversarialReport] = field(default_factory=dict)
    candidate: RobustnessSide | None = None
    baseline: RobustnessSide | None = None
    comparison: PairedComparison | None = None
    worst_items: list[WorstItem] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    costs: list[VersionCost] = field(default_factory=list)  # each version's model work (this attempt), priced


def robustness_summarize(*, outcomes: Sequence[SampleOutcome], confidence: float) -> RobustnessSummary:
    overall = rate_cell(correct=sum(o.correct for o in outcomes), n=len(outcomes), confidence=confidence)
    return RobustnessSummary(
        n=overall.n,
        correct=overall.correct,
        rate=overall.rate,
        ci_low=overall.ci_low,
        ci_high=overall.ci_high,
        by_type=rate_breakdown(outcomes=outcomes, keys=lambda o: (o.type,), confidence=confidence),
        by_tag=rate_breakdown(
            outcomes=outcomes, keys=lambda o: o.tags or ("untagged",), confidence=confidence
        ),
        by_language=rate_breakdown(outcomes=outcomes, keys=lambda o: (o.language,), confidence=confidence),
        errors=sum(o.errored for o in outcomes),
    )


def paired_comparison(
    *, candidate: Sequence[SampleOutcome], baseline: Sequence[SampleOutcome]
) -> PairedComparison:
    if len(candidate) != len(baseline):
        raise ValueError("paired outcomes must have the same length")
    only_candidate = sum(c.correct and not b.correct for c, b in zip(candidate, baseline, strict=True))
    only_baseline = sum(b.correct and not c.correct for c, b in zip(candidate, baseline, strict=True))
    n = len(candidate)
    return PairedComparison(
        n=n,
        only_candidate_correct=only_candidate,
        only_baseline_correct=only_baseline,
        difference=(only_candidate - only_baseline) / n if n else None,
        mcnemar_p=mcnemar_exact(only_first=only_candidate, only_second=only_baseline),
    )


def worst_items(*, outcomes: Sequence[SampleOutcome], limit: int = 20) -> list[WorstItem]:
    """Items whose perturbations failed most often, for drill-down."""
    failed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for outcome in outcomes:
        total[outcome.item_id] += 1
        failed[outcome.item_id] += not outcome.correct
    ranked = sorted((item for item in failed if failed[item]), key=lambda i: (-failed[i], i))
    return [WorstItem(item_id=i, failed=failed[i], samples=total[i]) for i in ranked[:limit]]


@dataclass(frozen=True)
class RobustnessResult:
    verdict: str
    reasons: list[Reason | str]
    candidate: RobustnessSummary
    baseline: RobustnessSummary | None
    comparison: PairedComparison | None
    worst: list[WorstItem]


def robustness_judge(
    *,
    candidate: Sequence[SampleOutcome],
    baseline: Sequence[SampleOutcome] | None,
    policy: RobustnessPolicy,
    decide_on: str,
    confidence: float,
    shortfall: Sequence[str] = (),
) -> RobustnessResult:
    """Pass when the candidate's robustness rate (by default the Wilson lower bound) reaches
    `robustness_min`; insufficient data when fewer than `robustness_min_samples` samples exist."""
    summary = robustness_summarize(outcomes=candidate, confidence=confidence)
    baseline_summary = robustness_summarize(outcomes=baseline, confidence=confidence) if baseline else None
    comparison = paired_comparison(candidate=candidate, baseline=baseline) if baseline else None
    worst = worst_items(outcomes=candidate)
    n = summary.n
    if n < policy.robustness_min_samples:
        reasons: list[Reason | str] = [
            reason(RobustnessCode.TOO_FEW_SAMPLES, n=n, need=policy.robustness_min_samples),
            *shortfall,  # the perturbation engine's notes, as it wrote them
        ]
        return RobustnessResult(INSUFFICIENT, reasons, summary, baseline_summary, comparison, worst)
    bar = policy.robustness_min
    use_bound = decide_on == LOWER_BOUND
    judged = summary.ci_low if use_bound else summary.rate
    assert judged is not None  # n >= robustness_min_samples >= 1
    if judged >= bar:
        clears = RobustnessCode.BOUND_CLEARS if use_bound else RobustnessCode.RATE_CLEARS
        reasons = [reason(clears, value=judged, bar=bar)]
        return RobustnessResult(PASS, reasons, summary, baseline_summary, comparison, worst)
    below = RobustnessCode.BOUND_BELOW if use_bound else RobustnessCode.RATE_BELOW
    reasons = [reason(below, value=judged, bar=bar)]
    weakest = sorted(summary.by_type.items(), key=lambda kv: kv[1].rate or 0.0)[:2]
    reasons += [
        reason(RobustnessCode.WEAKEST, name=name, correct=cell.correct, n=cell.n) for name, cell in weakest
    ]
    if summary.errors:
        reasons.append(reason(RobustnessCode.SAMPLES_ERRORED, errors=summary.errors))
    return RobustnessResult(FAIL, reasons, summary, baseline_summary, comparison, worst)
