"""The follow-up detector measured on live traffic: people's labels of sampled live user turns (the
review queue, `canary.services.reviews`) against the kinds the detector gave them. Pure, no Django.

What layer 2 counts is whether a turn is of a counted kind (`follow_up_kinds`), so agreement is the
share of reviewed turns where the detector and the reviewer agree on that, with a Wilson interval;
the three-kind agreement and the confusion matrix are reported beside it, with the detector's
precision and recall of the counted kinds on the reviewed turns. With at least `min_labels` reviewed
turns and an agreement below `minimum` (the point estimate: the labels show the detector misjudges
more often than the policy allows), layer 2's verdict is `insufficient_data` with that reason: its
rate cannot be trusted either way. Fewer labels leave the check unapplied, and the report says so.

How far the labels themselves can be trusted: on turns a second reviewer labelled too, the share of
second opinions equal to the first label and Cohen's kappa (`reviewer_agreement_judge`).

The same labels, per language, also give the detector's live sensitivity and specificity, which
replace the shipped ones in layer 2's correction once a language has
`follow_up_live_rates_min_labels` of each class (`engines.follow_up.live_rates`); `error_rates_apply`
words that choice, and makes layer 2 `insufficient_data` naming the language where a shipped rate
still in use is contradicted by the live labels beyond chance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from engines.follow_up.live_rates import LIVE, ClassRate, LanguageErrorRates
from engines.reasons import Reason, Term, gettext_noop, reason, wordings_register
from engines.stats.intervals import wilson_interval
from gate.judges.verdict import ERROR, INSUFFICIENT
from gate.policy import PolicySection, setting

# What the check found: applied and met, applied and not met, or too few labels to apply it.
MET, BELOW_MINIMUM, TOO_FEW_LABELS = "met", "below_minimum", "too_few_labels"


@dataclass(frozen=True)
class LiveAgreementPolicy(PolicySection):
    follow_up_live_agreement_min: float = setting(
        0.80,
        low=0.0,
        high=1.0,
        help="below this agreement of the detector with reviewers' labels of live turns, layer 2 is "
        "insufficient data",
    )
    follow_up_live_min_labels: int = setting(
        50, low=1, high=10**9, help="fewer reviewed live turns leave the agreement check unapplied"
    )
    follow_up_live_rates_min_labels: int = setting(
        30,
        low=1,
        high=10**9,
        help="reviewed live follow-ups, and as many others, of one language from which the correction "
        "uses that language's live sensitivity and specificity instead of the shipped ones",
    )
    follow_up_live_rates_alpha: float = setting(
        0.05,
        low=1e-6,
        high=0.5,
        help="level of Fisher's exact test (Holm over the languages' tests) of live against shipped error "
        "rates: a shipped rate still in use that the live labels contradict makes layer 2 insufficient data",
    )


class FollowUpReviewCode(StrEnum):
    AGREEMENT = "follow_up_review.agreement"
    NONE_REVIEWED = "follow_up_review.none_reviewed"
    TOO_FEW_LABELS = "follow_up_review.too_few_labels"
    BELOW_MINIMUM = "follow_up_review.below_minimum"
    MET = "follow_up_review.met"
    LIVE_RATES = "follow_up_review.live_rates"
    SHIPPED_RATES = "follow_up_review.shipped_rates"
    UNMEASURED = "follow_up_review.unmeasured"
    DISAGREES_BLOCKING = "follow_up_review.disagrees_blocking"
    DISAGREES_LIVE_USED = "follow_up_review.disagrees_live_used"


wordings_register(
    {
        FollowUpReviewCode.AGREEMENT: gettext_noop(
            "live agreement of the detector with reviewers {agreement:.3f} ({agreeing} of {labels} reviewed "
            "turns, {level:g} % CI [{low:.3f}, {high:.3f}])"
        ),
        FollowUpReviewCode.NONE_REVIEWED: gettext_noop("no live turns reviewed yet"),
        FollowUpReviewCode.TOO_FEW_LABELS: gettext_noop(
            "{summary}: not checked, the policy needs at least {need} reviewed turns"
        ),
        FollowUpReviewCode.BELOW_MINIMUM: gettext_noop(
            "{summary} is below the policy's minimum {minimum:g}: the detector's labels cannot be trusted "
            "on this traffic"
        ),
        FollowUpReviewCode.MET: gettext_noop("{summary} >= minimum {minimum:g}"),
        FollowUpReviewCode.LIVE_RATES: gettext_noop(
            "error rates for language '{language}' from {n} reviewed live turns: sensitivity {se:.3f} "
            "({tp} of {positives}), specificity {sp:.3f} ({tn} of {negatives})"
        ),
        FollowUpReviewCode.SHIPPED_RATES: gettext_noop(
            "error rates for language '{language}' as shipped, from the detector's test split: sensitivity "
            "{se:.3f}, specificity {sp:.3f} ({positives} follow-ups and {negatives} others reviewed, the "
            "live ones need {need} of each)"
        ),
        FollowUpReviewCode.UNMEASURED: gettext_noop("unmeasured"),
        FollowUpReviewCode.DISAGREES_BLOCKING: gettext_noop(
            "language '{language}': the live {name} {live:.3f} ({k} of {n} reviewed turns) disagrees with "
            "the shipped {shipped:.3f} ({shipped_k} of {shipped_n} test pairs; Fisher's exact p {p:.3g}, "
            "Holm-adjusted {adjusted:.3g} < {alpha:g}): too few turns are reviewed to replace it, so the "
            "corrected rate cannot be trusted yet"
        ),
        FollowUpReviewCode.DISAGREES_LIVE_USED: gettext_noop(
            "language '{language}': the live {name} {live:.3f} ({k} of {n} reviewed turns) disagrees with "
            "the shipped {shipped:.3f} ({shipped_k} of {shipped_n} test pairs; Fisher's exact p {p:.3g}, "
            "Holm-adjusted {adjusted:.3g} < {alpha:g}): the live one is used"
        ),
    }
)


@dataclass(frozen=True, kw_only=True)
class LiveAgreement:
    """Reviewed turns (`labels`), those where detector and reviewer agree on counted or not
    (`agreeing`), the agreement with its Wilson interval, the three-kind agreement, `confusion`
    (reviewer's label -> detector's kind -> turns), the detector's precision and recall of the counted
    kinds (None when undefined), and the check: `status` (MET, BELOW_MINIMUM, TOO_FEW_LABELS) and its
    reason."""

    labels: int
    agreeing: int
    agreement: float | None
    ci_low: float
    ci_high: float
    confidence: float
    kind_agreement: float | None
    precision: float | None
    recall: float | None
    confusion: dict[str, dict[str, int]]
    counted_kinds: list[str]
    minimum: float
    min_labels: int
    status: str
    reason: Reason | str  # a sentence in details stored before reason codes

    @property
    def kinds(self) -> list[str]:
        """Every label or kind in the confusion matrix, sorted: its rows' and columns' order."""
        return sorted({*self.confusion, *(kind for row in self.confusion.values() for kind in row)})

    @property
    def confusion_rows(self) -> list[tuple[str, list[int]]]:
        """The confusion matrix as (reviewer's label, turns per detector kind in `kinds` order) rows."""
        kinds = self.kinds
        return [(label, [self.confusion.get(label, {}).get(k, 0) for k in kinds]) for label in kinds]


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


@dataclass(frozen=True, kw_only=True)
class _Tally:
    """The confusion counts summed the ways the agreement, precision and recall read them; `table` is
    the counts as plain dicts."""

    labels: int
    agreeing: int
    same_kind: int
    true_positive: int
    predicted: int
    actual: int
    table: dict[str, dict[str, int]]


def _confusion_tally(*, confusion: Mapping[str, Mapping[str, int]], counted: set[str]) -> _Tally:
    """Sum the reviewed turns by whether reviewer and detector agree on counted or not; a negative or
    non-integer count is a bug upstream, so it raises."""
    labels = agreeing = same_kind = true_positive = predicted = actual = 0
    table: dict[str, dict[str, int]] = {}
    for label, row in confusion.items():
        for kind, count in row.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"confusion[{label!r}][{kind!r}]={count!r} must be a non-negative integer")
            table.setdefault(label, {})[kind] = count
            labels += count
            agreeing += count if (label in counted) == (kind in counted) else 0
            same_kind += count if label == kind else 0
            true_positive += count if label in counted and kind in counted else 0
            predicted += count if kind in counted else 0
            actual += count if label in counted else 0
    return _Tally(
        labels=labels,
        agreeing=agreeing,
        same_kind=same_kind,
        true_positive=true_positive,
        predicted=predicted,
        actual=actual,
        table=table,
    )


def _agreement_check(
    *, summary: Reason, labels: int, agreement: float | None, minimum: float, min_labels: int
) -> tuple[str, Reason]:
    """The check's status and reason: unapplied below `min_labels`, since too few labels show nothing
    either way; else the agreement against `minimum`."""
    if labels < min_labels:
        return TOO_FEW_LABELS, reason(FollowUpReviewCode.TOO_FEW_LABELS, summary=summary, need=min_labels)
    if agreement is not None and agreement < minimum:
        return BELOW_MINIMUM, reason(FollowUpReviewCode.BELOW_MINIMUM, summary=summary, minimum=minimum)
    return MET, reason(FollowUpReviewCode.MET, summary=summary, minimum=minimum)


def live_agreement_judge(
    *,
    confusion: Mapping[str, Mapping[str, int]],
    counted_kinds: Sequence[str],
    minimum: float = 0.80,
    min_labels: int = 50,
    confidence: float = 0.95,
) -> LiveAgreement:
    """The detector's agreement with reviewers' labels, from the confusion counts (reviewer's label ->
    detector's kind -> turns); see the module docstring. Negative counts raise ValueError."""
    if not 0 <= minimum <= 1:
        raise ValueError(f"minimum={minimum} outside [0, 1]")
    if isinstance(min_labels, bool) or not isinstance(min_labels, int) or min_labels < 1:
        raise ValueError(f"min_labels={min_labels!r} must be a positive integer")
    counted = set(counted_kinds)
    tally = _confusion_tally(confusion=confusion, counted=counted)
    labels, agreeing = tally.labels, tally.agreeing
    low, high = wilson_interval(successes=agreeing, n=labels, confidence=confidence)
    agreement = _ratio(agreeing, labels)
    summary = (
        reason(
            FollowUpReviewCode.AGREEMENT,
            agreement=agreement,
            agreeing=agreeing,
            labels=labels,
            level=confidence * 100,
            low=low,
            high=high,
        )
        if agreement is not None
        else reason(FollowUpReviewCode.NONE_REVIEWED)
    )
    status, why = _agreement_check(
        summary=summary, labels=labels, agreement=agreement, minimum=minimum, min_labels=min_labels
    )
    return LiveAgreement(
        labels=labels,
        agreeing=agreeing,
        agreement=agreement,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        kind_agreement=_ratio(tally.same_kind, labels),
        precision=_ratio(tally.true_positive, tally.predicted),
        recall=_ratio(tally.true_positive, tally.actual),
        confusion=tally.table,
        counted_kinds=sorted(counted),
        minimum=minimum,
        min_labels=min_labels,
        status=status,
        reason=why,
    )


def live_agreement_apply(
    *, verdict: str, reasons: Sequence[Reason | str], live: LiveAgreement
) -> tuple[str, list[Reason | str]]:
    """Layer 2's verdict and reasons once the live agreement is known: `insufficient_data` when the
    agreement is below the minimum (a pass or a fail of an untrusted detector shows nothing), the
    agreement noted among the reasons whenever some turn was reviewed. An error stays an error."""
    if live.labels == 0:
        return verdict, list(reasons)
    if live.status == BELOW_MINIMUM and verdict != ERROR:
        return INSUFFICIENT, [*reasons, live.reason]
    return verdict, [*reasons, live.reason]


@dataclass(frozen=True, kw_only=True)
class ReviewerAgreement:
    """How far reviewers agree with each other, on the turns a second reviewer labelled too: the share
    where the second label equals the first (three kinds), with its Wilson interval, and Cohen's kappa
    (that agreement beyond what the two label mixes give by chance; None when chance agreement is 1).
    `pairs` is first label -> second label -> turns."""

    turns: int
    agreeing: int
    agreement: float | None
    ci_low: float
    ci_high: float
    confidence: float
    kappa: float | None
    pairs: dict[str, dict[str, int]]


def reviewer_agreement_judge(
    *, pairs: Mapping[str, Mapping[str, int]], confidence: float = 0.95
) -> ReviewerAgreement:
    """Agreement between first and second labels from their counts; negative counts raise ValueError."""
    table: dict[str, dict[str, int]] = {}
    firsts: dict[str, int] = {}
    seconds: dict[str, int] = {}
    for first, row in pairs.items():
        for second, count in row.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"pairs[{first!r}][{second!r}]={count!r} must be a non-negative integer")
            table.setdefault(first, {})[second] = count
            firsts[first] = firsts.get(first, 0) + count
            seconds[second] = seconds.get(second, 0) + count
    turns = sum(firsts.values())
    agreeing = sum(row.get(label, 0) for label, row in table.items())
    low, high = wilson_interval(successes=agreeing, n=turns, confidence=confidence)
    kappa = None
    if turns:
        observed = agreeing / turns
        chance = sum(firsts.get(label, 0) * seconds.get(label, 0) for label in firsts) / turns**2
        kappa = (observed - chance) / (1 - chance) if chance < 1 else None
    return ReviewerAgreement(
        turns=turns,
        agreeing=agreeing,
        agreement=_ratio(agreeing, turns),
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        kappa=kappa,
        pairs=table,
    )


def _rate(value: float | None) -> float | Reason:
    return value if value is not None else reason(FollowUpReviewCode.UNMEASURED)


def error_rates_reason(rates: LanguageErrorRates) -> Reason:
    """Where one language's error rates come from: its reviewed live turns, or the shipped ones."""
    se, sp = rates.classes
    if se.source == LIVE:
        return reason(
            FollowUpReviewCode.LIVE_RATES,
            language=rates.language,
            n=se.live_n + sp.live_n,
            se=_rate(se.value),
            tp=se.live_k,
            positives=se.live_n,
            sp=_rate(sp.value),
            tn=sp.live_k,
            negatives=sp.live_n,
        )
    return reason(
        FollowUpReviewCode.SHIPPED_RATES,
        language=rates.language,
        se=_rate(se.value),
        sp=_rate(sp.value),
        positives=se.live_n,
        negatives=sp.live_n,
        need=se.min_labels,
    )


def disagreement_reason(language: str, rate: ClassRate) -> Reason:
    """A class whose live and shipped rates differ beyond chance, and what follows from it."""
    assert rate.live is not None and rate.shipped is not None and rate.p_value is not None
    code = FollowUpReviewCode.DISAGREES_BLOCKING if rate.blocking else FollowUpReviewCode.DISAGREES_LIVE_USED
    return reason(
        code,
        language=language,
        name=Term(rate.name),
        live=rate.live,
        k=rate.live_k,
        n=rate.live_n,
        shipped=rate.shipped,
        shipped_k=rate.shipped_k,
        shipped_n=rate.shipped_n,
        p=rate.p_value,
        adjusted=rate.adjusted_p,
        alpha=rate.alpha,
    )


def error_rates_apply(
    *, verdict: str, reasons: Sequence[Reason | str], rates: Mapping[str, LanguageErrorRates]
) -> tuple[str, list[Reason | str]]:
    """Layer 2's verdict and reasons once its error rates are chosen: each language's sources among
    the reasons, each disagreement too, and `insufficient_data` when a shipped rate still in use is
    contradicted (an error stays an error)."""
    notes = [error_rates_reason(language_rates) for language_rates in rates.values()]
    disagreements = [
        (rate.blocking, disagreement_reason(language, rate))
        for language, language_rates in rates.items()
        for rate in language_rates.classes
        if rate.disagrees
    ]
    if any(blocking for blocking, _ in disagreements) and verdict != ERROR:
        verdict = INSUFFICIENT
    return verdict, [*reasons, *notes, *(why for _, why in disagreements)]
