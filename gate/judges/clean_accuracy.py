"""Layer 0, clean accuracy: how often each version answers the golden items correctly. Pure."""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any

from engines.input_checks import FieldCode, text_problem
from engines.perturbation.recipes import RECIPES
from engines.reasons import Reason, gettext_noop, reason, wordings_register
from engines.scoring.judge import Agreement
from engines.stats.hypothesis import mcnemar_exact
from engines.stats.intervals import clustered_mean_interval, paired_difference_interval, wilson_interval
from gate.cost import VersionCost
from gate.judges.verdict import FAIL, INSUFFICIENT, PASS
from gate.policy import LOWER_BOUND, PolicyError, PolicySection, setting


class CleanAccuracyCode(StrEnum):
    TOO_FEW_ITEMS = "clean_accuracy.too_few_items"
    BOUND_CLEARS = "clean_accuracy.bound_clears"
    BOUND_BELOW = "clean_accuracy.bound_below"
    ACCURACY_CLEARS = "clean_accuracy.accuracy_clears"
    ACCURACY_BELOW = "clean_accuracy.accuracy_below"
    ITEMS_ERRORED = "clean_accuracy.items_errored"
    JUDGE_ADMITTED = "clean_accuracy.judge_admitted"
    JUDGE_BOUND_BELOW = "clean_accuracy.judge_bound_below"
    JUDGE_KAPPA_BELOW = "clean_accuracy.judge_kappa_below"
    JUDGE_KAPPA_UNDEFINED = "clean_accuracy.judge_kappa_undefined"
    JUDGE_TOO_FEW_LABELS = "clean_accuracy.judge_too_few_labels"
    JUDGE_NO_LABELS = "clean_accuracy.judge_no_labels"
    JUDGE_UNREADABLE = "clean_accuracy.judge_unreadable"
    JUDGE_UNUSABLE = "clean_accuracy.judge_unusable"
    LABELS_UNREADABLE = "clean_accuracy.labels_unreadable"
    NOT_A_REF = "clean_accuracy.not_a_ref"
    LABELS_PATH = "clean_accuracy.labels_path"
    NOISY_MIX = "clean_accuracy.noisy_mix"
    NOISY_NONE = "clean_accuracy.noisy_none"
    NOISY_UNAVAILABLE = "clean_accuracy.noisy_unavailable"


wordings_register(
    {
        CleanAccuracyCode.TOO_FEW_ITEMS: gettext_noop("{n} items scored, the policy needs at least {need}"),
        CleanAccuracyCode.BOUND_CLEARS: gettext_noop("lower bound {value:.3f} >= bar {bar:.3f}"),
        CleanAccuracyCode.BOUND_BELOW: gettext_noop("lower bound {value:.3f} < bar {bar:.3f}"),
        CleanAccuracyCode.ACCURACY_CLEARS: gettext_noop("accuracy {value:.3f} >= bar {bar:.3f}"),
        CleanAccuracyCode.ACCURACY_BELOW: gettext_noop("accuracy {value:.3f} < bar {bar:.3f}"),
        CleanAccuracyCode.ITEMS_ERRORED: gettext_noop("{errors} of {n} items errored (counted as wrong)"),
        CleanAccuracyCode.JUDGE_ADMITTED: gettext_noop(
            "answer judge {judge} decides free-text answers: Cohen's kappa {kappa:.3f} "
            "[{low:.3f}, {high:.3f}] on {n} labelled answers clears the bar {bar:.3f}"
        ),
        CleanAccuracyCode.JUDGE_BOUND_BELOW: gettext_noop(
            "answer judge {judge} may not decide: Cohen's kappa {kappa:.3f} [{low:.3f}, {high:.3f}] on {n} "
            "labelled answers, lower bound below the bar {bar:.3f}"
        ),
        CleanAccuracyCode.JUDGE_KAPPA_BELOW: gettext_noop(
            "answer judge {judge} may not decide: Cohen's kappa {kappa:.3f} [{low:.3f}, {high:.3f}] on {n} "
            "labelled answers, below the bar {bar:.3f}"
        ),
        CleanAccuracyCode.JUDGE_KAPPA_UNDEFINED: gettext_noop(
            "answer judge {judge} may not decide: Cohen's kappa is undefined on the {n} labelled answers "
            "(they and the judge give one verdict only)"
        ),
        CleanAccuracyCode.JUDGE_TOO_FEW_LABELS: gettext_noop(
            "answer judge {judge} may not decide: {n} labelled answers, at least {need} are needed to "
            "measure its agreement with people"
        ),
        CleanAccuracyCode.JUDGE_NO_LABELS: gettext_noop(
            "answer judge {judge} may not decide: no labelled answers (answer_judge_labels) to measure its "
            "agreement with people"
        ),
        CleanAccuracyCode.JUDGE_UNREADABLE: gettext_noop(
            "{unreadable} of {n} verdicts of the answer judge could not be read (those answers counted "
            "as wrong)"
        ),
        CleanAccuracyCode.JUDGE_UNUSABLE: gettext_noop("answer judge {judge}: {why}"),
        # `why`: the parser's own message (English: a line number and what is wrong there).
        CleanAccuracyCode.LABELS_UNREADABLE: gettext_noop("labelled answers {path}: {why}"),
        CleanAccuracyCode.NOT_A_REF: gettext_noop("must name a version as family:label"),
        CleanAccuracyCode.LABELS_PATH: gettext_noop(
            "must be a relative path inside the labels folder (EVALHUB_LABELS_DIR), without '..'"
        ),
        CleanAccuracyCode.NOISY_MIX: gettext_noop(
            "with {replaced} of {items} items replaced by noisy versions ({recipe}): accuracy {value:.3f} "
            "against {clean:.3f} clean, a drop of {drop:.3f} [{low:.3f}, {high:.3f}] (reported, not judged)"
        ),
        CleanAccuracyCode.NOISY_NONE: gettext_noop(
            "noisy mix: none of the {items} items could be replaced by a noisy version ({recipe})"
        ),
        CleanAccuracyCode.NOISY_UNAVAILABLE: gettext_noop("noisy mix not made: {why}"),
    }
)


def _version_ref(key: str, value: Any) -> str:
    if not isinstance(value, str) or len(value) > 200 or value.count(":") < 1 or value.strip() != value:
        raise PolicyError(key, reason(CleanAccuracyCode.NOT_A_REF))
    family, _, label = value.partition(":")
    if not family or not label:
        raise PolicyError(key, reason(CleanAccuracyCode.NOT_A_REF))
    if problem := text_problem(value):
        raise PolicyError(key, problem)
    return value


def _labels_path(key: str, value: Any) -> str:
    """A labelled file's path, relative to the labels folder: no absolute path, no `..` (where it
    resolves to, symlinks followed, is checked again when it is read)."""
    if not isinstance(value, str) or not value.strip() or len(value) > 300:
        raise PolicyError(key, reason(FieldCode.SHORT_STRING, limit=300))
    path = PurePosixPath(value.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or ":" in value:
        raise PolicyError(key, reason(CleanAccuracyCode.LABELS_PATH))
    if problem := text_problem(value):
        raise PolicyError(key, problem)
    return value


@dataclass(frozen=True)
class CleanAccuracyPolicy(PolicySection):
    clean_accuracy_min: float = setting(
        0.80, low=0.0, high=1.0, help="the bar for the candidate's accuracy on the suite"
    )
    clean_min_items: int = setting(30, low=1, high=10**7, help="fewer scored items is insufficient data")
    repeats: int = setting(
        1,
        low=1,
        high=20,
        help="answers asked per item (a model sampled at temperature > 0 answers differently each time): "
        "the accuracy is then the mean over all answers, its interval clustered by item; 1 asks once",
    )
    repeats_seed: int = setting(
        0,
        low=0,
        high=2**31 - 1,
        help="with repeats > 1, the seed the request of each item and repeat derives from",
    )
    answer_judge: str | None = setting(
        None,
        check=_version_ref,
        help="a registered chat version (family:label) that judges free-text answers against the "
        "reference with a rubric, in place of the BERTScore/chrF cut-offs, once its agreement with "
        "people on answer_judge_labels clears answer_judge_kappa_min; null: the cut-offs judge",
    )
    answer_judge_labels: str | None = setting(
        None,
        check=_labels_path,
        help="the labelled answers the judge is measured on: a JSONL file (id, question, reference, "
        "answer, verdict correct|incorrect, language) relative to the labels folder EVALHUB_LABELS_DIR",
    )
    answer_judge_kappa_min: float = setting(
        0.6,
        low=0.0,
        high=1.0,
        help="the bar for the judge's Cohen's kappa with people (its interval's lower bound, or the "
        "estimate, as decide_on says); 0.6 is where Landis & Koch's 'substantial' agreement begins",
    )
    answer_judge_min_labels: int = setting(
        30, low=1, high=10**6, help="fewer labelled answers leave the judge unmeasured (insufficient data)"
    )
    clean_noise_share: float | None = setting(
        None,
        low=0.001,
        high=1.0,
        help="the seed's fix for a suite too clean: also score the suite with this share of its items "
        "(0.15 in the seed) replaced by noisy versions from clean_noise_recipe, reported beside the "
        "clean figure (the verdict stays on the clean one); null: off",
    )
    clean_noise_recipe: str = setting(
        "robustness-v1",
        choices=tuple(RECIPES),
        help="the random-noise perturbation recipe the noisy versions come from",
    )
    clean_noise_seed: int = setting(
        0, low=0, high=2**31 - 1, help="seed of the draw of replaced items and of their noise"
    )


@dataclass(frozen=True)
class ItemOutcome:
    item_id: str
    tags: tuple[str, ...]
    language: str
    correct: bool
    errored: bool = False
    snippet: str = ""  # the item's input, shortened (what a flaky item is shown with)


@dataclass(frozen=True, kw_only=True)
class AccuracyCell:
    n: int
    correct: int
    accuracy: float | None
    ci_low: float
    ci_high: float


@dataclass(frozen=True, kw_only=True)
class FlakyItem:
    """An item right in some of its repeats and wrong in others."""

    item_id: str
    snippet: str
    right: int
    of: int


FLAKY_LISTED = 200  # the flaky items stored, fewest right first (`flaky_count` counts them all)


@dataclass(frozen=True, kw_only=True)
class RepeatSummary:
    """What asking each item `k` times showed: `pass_all` (pass^k) the share of items right in every
    repeat, `pass_any` (pass@k) right in at least one, `se` the cluster-robust standard error of the
    mean accuracy, `deterministic` when the backend answers alike each time and was asked once (its
    answer counted k times)."""

    k: int
    items: int
    pass_all: float | None
    pass_any: float | None
    se: float | None
    flaky_count: int
    flaky: tuple[FlakyItem, ...] = ()
    deterministic: bool = False


@dataclass(frozen=True, kw_only=True)
class AccuracySummary(AccuracyCell):
    errors: int
    by_tag: dict[str, AccuracyCell]
    by_language: dict[str, AccuracyCell]
    repeats: RepeatSummary | None = None  # None: each item asked once


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
class AnswerJudgeDetails:
    """The answer judge's measurement and work: its agreement with people on the labelled answers,
    the BERTScore/chrF cut-offs' agreement on the same answers (the offline default, for comparison),
    whether it was admitted, and what it decided (`items_judged` free-text answers of all versions,
    `unreadable` of them without a verdict) and cost (`cost`: its queries and tokens, both phases)."""

    judge: str
    labels: str
    labels_hash: str
    kappa_min: float
    decide_on: str
    admitted: bool
    judge_agreement: Agreement
    default_agreement: Agreement | None
    cutoffs: dict[str, float]
    items_judged: int = 0
    unreadable: int = 0
    cost: VersionCost | None = None


@dataclass(frozen=True, kw_only=True)
class NoisyItem:
    """A replaced item: its noisy version's perturbation type, edits and opening."""

    item_id: str
    language: str
    type: str
    diff: str
    snippet: str


NOISY_LISTED = 50  # replaced items stored with their edits (`replaced` counts them all)


@dataclass(frozen=True, kw_only=True)
class NoisyCell(AccuracyCell):
    """The noisy mix's accuracy over a group of items (`accuracy`, `ci_low`, `ci_high`: every answer,
    the interval as for the clean figure) and its drop from the same items' clean accuracy: clean −
    mix, paired by item, with the t interval of the per-item differences (`drop_low`, `drop_high`)."""

    items: int
    replaced: int
    clean_accuracy: float | None
    drop: float | None
    drop_low: float
    drop_high: float


@dataclass(frozen=True, kw_only=True)
class NoisySide(NoisyCell):
    """One version on the noisy mix. `only_clean_right` / `only_noisy_right`: replaced items right in
    one form only (each item's first answer), and the exact McNemar p-value of the two."""

    version: str
    by_language: dict[str, NoisyCell]
    only_clean_right: int
    only_noisy_right: int
    mcnemar_p: float
    seconds: float = 0.0
    computed: int = 0
    cached: int = 0


@dataclass(frozen=True, kw_only=True)
class NoisyMixDetails:
    """The suite with `share` of its items (per language, seeded) replaced by their noisy version from
    `recipe`, answered by each version. Reported beside the clean figure; the verdict does not read it."""

    share: float
    recipe: str
    seed: int
    items: int
    replaced: int = 0
    replaced_by_language: dict[str, int] = field(default_factory=dict)
    set_hash: str = ""
    notes: list[str] = field(default_factory=list)
    examples: list[NoisyItem] = field(default_factory=list)
    candidate: NoisySide | None = None
    baseline: NoisySide | None = None
    difference: float | None = None  # the candidate's mix accuracy − the baseline's


def noisy_counts(*, sizes: dict[str, int], share: float) -> dict[str, int]:
    """How many items of each language (`sizes`: language → items) to replace: `share` of the whole
    suite, rounded half up, dealt by largest remainder so each language gets `share` of its own items
    rounded down or up (ties to the larger language, then by name)."""
    total = math.floor(share * sum(sizes.values()) + 0.5)
    counts = {language: math.floor(share * n) for language, n in sizes.items()}
    by_remainder = sorted(sizes, key=lambda lang: (-(share * sizes[lang] - counts[lang]), -sizes[lang], lang))
    for language in by_remainder[: max(0, total - sum(counts.values()))]:
        counts[language] += 1
    return {language: min(count, sizes[language]) for language, count in sorted(counts.items())}


def _noisy_cell(
    clean: list[list[bool]], mix: list[list[bool]], replaced: int, confidence: float, repeated: bool
) -> NoisyCell:
    cell = accuracy_cell(mix, confidence, repeated)
    clean_means = [sum(m) / len(m) for m in clean]
    drop, low, high = paired_difference_interval(
        differences=[c - sum(m) / len(m) for c, m in zip(clean_means, mix, strict=True)],
        confidence=confidence,
    )
    return NoisyCell(
        n=cell.n,
        correct=cell.correct,
        accuracy=cell.accuracy,
        ci_low=cell.ci_low,
        ci_high=cell.ci_high,
        items=len(clean),
        replaced=replaced,
        clean_accuracy=math.fsum(clean_means) / len(clean) if clean else None,
        drop=None if math.isnan(drop) else drop,
        drop_low=low,
        drop_high=high,
    )


def noisy_side_summarize(
    *,
    version: str,
    clean: Sequence[ItemOutcome],
    mix: Sequence[ItemOutcome],
    replaced: set[str] | frozenset[str],
    confidence: float,
    repeats: int = 1,
) -> NoisySide:
    """A version's figures on the noisy mix: `clean` its outcomes on the suite, `mix` on the suite with
    the `replaced` items in their noisy version, both in the same order (each item's repeats grouped
    by `item_id`). The clean accuracy beside each figure is that of the same items and answers."""
    if len(clean) != len(mix):
        raise ValueError("the clean and the mixed outcomes must pair up")
    repeated = repeats > 1
    clean_items, mix_items = _by_item(clean, True), _by_item(mix, True)
    groups: dict[str, list[int]] = defaultdict(list)
    for index, answers in enumerate(clean_items):
        groups[answers[0].language or "unknown"].append(index)
    clean_marks = [[o.correct for o in answers] for answers in clean_items]
    mix_marks = [[o.correct for o in answers] for answers in mix_items]
    first = [
        (c[0].correct, m[0].correct)
        for c, m in zip(clean_items, mix_items, strict=True)
        if c[0].item_id in replaced
    ]
    only_clean = sum(c and not m for c, m in first)
    only_noisy = sum(m and not c for c, m in first)

    def cell(indexes: Sequence[int]) -> NoisyCell:
        return _noisy_cell(
            [clean_marks[i] for i in indexes],
            [mix_marks[i] for i in indexes],
            sum(clean_items[i][0].item_id in replaced for i in indexes),
            confidence,
            repeated,
        )

    overall = cell(range(len(clean_items)))
    return NoisySide(
        **{name: getattr(overall, name) for name in NoisyCell.__dataclass_fields__},
        version=version,
        by_language={language: cell(indexes) for language, indexes in sorted(groups.items())},
        only_clean_right=only_clean,
        only_noisy_right=only_noisy,
        mcnemar_p=mcnemar_exact(only_first=only_clean, only_second=only_noisy),
    )


def noisy_reason(*, noisy: NoisyMixDetails) -> Reason | None:
    """The candidate's noisy-mix figure as a reason beside the verdict's (None when not computed)."""
    if noisy.replaced == 0:
        return reason(CleanAccuracyCode.NOISY_NONE, items=noisy.items, recipe=noisy.recipe)
    side = noisy.candidate
    if side is None or side.accuracy is None or side.clean_accuracy is None or side.drop is None:
        return None
    return reason(
        CleanAccuracyCode.NOISY_MIX,
        replaced=noisy.replaced,
        items=noisy.items,
        recipe=noisy.recipe,
        value=side.accuracy,
        clean=side.clean_accuracy,
        drop=side.drop,
        low=side.drop_low,
        high=side.drop_high,
    )


@dataclass(frozen=True, kw_only=True)
class ItemComparison:
    """Candidate against baseline on the same items: the mean of the per-item differences in
    correctness (each item's mean over its answers) with their t interval, and the exact McNemar
    p-value on the items exactly one version got right (each item's first answer)."""

    items: int
    only_candidate_correct: int
    only_baseline_correct: int
    difference: float | None
    ci_low: float
    ci_high: float
    mcnemar_p: float


def items_compare(
    *, candidate: Sequence[ItemOutcome], baseline: Sequence[ItemOutcome], confidence: float, repeats: int = 1
) -> ItemComparison:
    """Pairs the two versions' answers by item (both answered the same items, in the same order)."""
    ours, theirs = _by_item(candidate, repeats > 1), _by_item(baseline, repeats > 1)
    if [a[0].item_id for a in ours] != [a[0].item_id for a in theirs]:
        raise ValueError("paired outcomes must cover the same items in the same order")
    only_candidate = sum(c[0].correct and not b[0].correct for c, b in zip(ours, theirs, strict=True))
    only_baseline = sum(b[0].correct and not c[0].correct for c, b in zip(ours, theirs, strict=True))
    difference, low, high = paired_difference_interval(
        differences=[
            sum(o.correct for o in c) / len(c) - sum(o.correct for o in b) / len(b)
            for c, b in zip(ours, theirs, strict=True)
        ],
        confidence=confidence,
    )
    return ItemComparison(
        items=len(ours),
        only_candidate_correct=only_candidate,
        only_baseline_correct=only_baseline,
        difference=None if math.isnan(difference) else difference,
        ci_low=low,
        ci_high=high,
        mcnemar_p=mcnemar_exact(only_first=only_candidate, only_second=only_baseline),
    )


@dataclass(frozen=True, kw_only=True)
class CleanAccuracyDetails:
    """What the layer stores (LayerResult.details) and the report, templates and dashboards read."""

    suite: str
    suite_hash: str
    candidate: AccuracySide | None  # None: not asked (an answer judge that may not decide)
    baseline: AccuracySide | None = None
    difference: float | None = None
    comparison: ItemComparison | None = None  # paired by item, when the baseline answered too
    costs: list[VersionCost] = field(default_factory=list)  # each version's model work, priced
    answer_judge: AnswerJudgeDetails | None = None  # None: the policy names no judge
    noisy: NoisyMixDetails | None = None  # policy clean_noise_share: the suite with noisy items mixed in


def repeat_seed(*, seed: int, item_id: str, repeat: int) -> int:
    """The `seed` of an item's `repeat`-th request (0 ≤ seed < 2**31): a hash of the policy's
    `repeats_seed`, the item and the repeat, so a rerun sends the same seeds."""
    digest = hashlib.sha256(f"{seed}\n{item_id}\n{repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def accuracy_cell(answers: Sequence[Sequence[bool]], confidence: float, repeated: bool) -> AccuracyCell:
    """The accuracy of the items' answers (one list per item): a Wilson interval when each item was
    asked once, else the interval clustered by item (`clustered_mean_interval`)."""
    n = sum(len(marks) for marks in answers)
    correct = sum(sum(marks) for marks in answers)
    if repeated:
        _, _, low, high = clustered_mean_interval(
            cluster_means=[sum(m) / len(m) for m in answers], confidence=confidence
        )
    else:
        low, high = wilson_interval(successes=correct, n=n, confidence=confidence)
    return AccuracyCell(n=n, correct=correct, accuracy=correct / n if n else None, ci_low=low, ci_high=high)


def _by_item(outcomes: Sequence[ItemOutcome], repeated: bool) -> list[list[ItemOutcome]]:
    """The outcomes grouped by item, in first-seen order; each outcome its own group when not repeated."""
    if not repeated:
        return [[o] for o in outcomes]
    grouped: dict[str, list[ItemOutcome]] = {}
    for outcome in outcomes:
        grouped.setdefault(outcome.item_id, []).append(outcome)
    return list(grouped.values())


def _repeats_summarize(items: list[list[ItemOutcome]], k: int, confidence: float) -> RepeatSummary:
    marks = [[o.correct for o in answers] for answers in items]
    n = len(marks)
    flaky = sorted(
        (
            FlakyItem(item_id=answers[0].item_id, snippet=answers[0].snippet, right=sum(m), of=len(m))
            for answers, m in zip(items, marks, strict=True)
            if 0 < sum(m) < len(m)
        ),
        key=lambda f: (f.right / f.of, f.item_id),
    )
    _, se, _, _ = clustered_mean_interval(
        cluster_means=[sum(m) / len(m) for m in marks], confidence=confidence
    )
    return RepeatSummary(
        k=k,
        items=n,
        pass_all=sum(all(m) for m in marks) / n if n else None,
        pass_any=sum(any(m) for m in marks) / n if n else None,
        se=None if math.isnan(se) else se,
        flaky_count=len(flaky),
        flaky=tuple(flaky[:FLAKY_LISTED]),
    )


def accuracy_summarize(
    *, outcomes: Sequence[ItemOutcome], confidence: float, repeats: int = 1
) -> AccuracySummary:
    """Each version's accuracy, by tag and language. With `repeats` > 1 the outcomes hold each item's
    answers (grouped by `item_id`), the accuracy is their mean and the intervals are clustered by item."""
    repeated = repeats > 1
    items = _by_item(outcomes, repeated)
    tag_groups: dict[str, list[list[bool]]] = defaultdict(list)
    language_groups: dict[str, list[list[bool]]] = defaultdict(list)
    for answers in items:
        marks = [o.correct for o in answers]
        for tag in answers[0].tags or ("untagged",):
            tag_groups[tag].append(marks)
        language_groups[answers[0].language or "unknown"].append(marks)
    overall = accuracy_cell([[o.correct for o in answers] for answers in items], confidence, repeated)
    return AccuracySummary(
        n=overall.n,
        correct=overall.correct,
        accuracy=overall.accuracy,
        ci_low=overall.ci_low,
        ci_high=overall.ci_high,
        errors=sum(o.errored for o in outcomes),
        by_tag={t: accuracy_cell(g, confidence, repeated) for t, g in sorted(tag_groups.items())},
        by_language={
            lang: accuracy_cell(g, confidence, repeated) for lang, g in sorted(language_groups.items())
        },
        repeats=_repeats_summarize(items, repeats, confidence) if repeated else None,
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
    `clean_accuracy_min`; insufficient data below `clean_min_items` items. With `repeats` > 1 the
    outcomes hold every answer to every item: the accuracy judged is their mean, its interval
    clustered by item (the bar is the same one, read against the mean)."""
    repeats = policy.repeats
    summary = accuracy_summarize(outcomes=candidate, confidence=confidence, repeats=repeats)
    baseline_summary = (
        accuracy_summarize(outcomes=baseline, confidence=confidence, repeats=repeats) if baseline else None
    )
    bar = policy.clean_accuracy_min
    items = summary.repeats.items if summary.repeats else summary.n
    if items < policy.clean_min_items:
        too_few = reason(CleanAccuracyCode.TOO_FEW_ITEMS, n=items, need=policy.clean_min_items)
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


def answer_judge_admit(
    *, judge: str, agreement: Agreement | None, policy: CleanAccuracyPolicy, decide_on: str
) -> tuple[bool, Reason]:
    """Whether the answer judge may decide free-text answers: its Cohen's kappa with people on at
    least `answer_judge_min_labels` labelled answers (by default its interval's lower bound) reaches
    `answer_judge_kappa_min`. `agreement` None: no labelled answers were given."""
    bar = policy.answer_judge_kappa_min
    if agreement is None:
        return False, reason(CleanAccuracyCode.JUDGE_NO_LABELS, judge=judge)
    if agreement.n < policy.answer_judge_min_labels:
        need = policy.answer_judge_min_labels
        return False, reason(CleanAccuracyCode.JUDGE_TOO_FEW_LABELS, judge=judge, n=agreement.n, need=need)
    if agreement.kappa is None or agreement.ci_low is None or agreement.ci_high is None:
        return False, reason(CleanAccuracyCode.JUDGE_KAPPA_UNDEFINED, judge=judge, n=agreement.n)
    numbers = {
        "judge": judge,
        "kappa": agreement.kappa,
        "low": agreement.ci_low,
        "high": agreement.ci_high,
        "n": agreement.n,
        "bar": bar,
    }
    use_bound = decide_on == LOWER_BOUND
    if (agreement.ci_low if use_bound else agreement.kappa) >= bar:
        return True, reason(CleanAccuracyCode.JUDGE_ADMITTED, **numbers)
    below = CleanAccuracyCode.JUDGE_BOUND_BELOW if use_bound else CleanAccuracyCode.JUDGE_KAPPA_BELOW
    return False, reason(below, **numbers)
