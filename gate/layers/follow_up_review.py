"""Layer 2's check of the follow-up detector on live traffic: reviewers' labels of sampled live turns
(`canary.services.reviews`) against the detector's kinds, judged by `gate.judges.follow_up_review`,
and the error rates the correction uses, live or shipped (`engines.follow_up.live_rates`).
The layer, the dashboard and the review page read it from here.

Live error rates come from the reviews of this experiment only, not of its family: what they
measure is the detector on this experiment's traffic (its users, both arms' answers, this time),
which is the traffic being corrected; another experiment's candidate answers differently, and
its turns would measure another mix. Only turns the current detector version judged count (a
retrained detector starts its live counts again)."""

from __future__ import annotations

from dataclasses import replace

from canary.models import Experiment
from canary.selectors.reviews import follow_up_review_confusion, follow_up_review_confusion_by_language
from engines.follow_up.live_rates import LanguageErrorRates, confusion_error_rates, error_rates_choose
from gate.judges.follow_up_rate import DetectorAccuracy, FollowUpRatePolicy, FollowUpRateResult
from gate.judges.follow_up_review import (
    LiveAgreement,
    error_rates_apply,
    live_agreement_apply,
    live_agreement_judge,
)
from gate.policy import GatePolicyConfig


def follow_up_live_agreement_measure(*, experiment: Experiment, policy: GatePolicyConfig) -> LiveAgreement:
    """The detector's agreement with the experiment's reviewed turns, on the policy's counted kinds
    (one grouped query)."""
    section = policy.section(FollowUpRatePolicy)
    return live_agreement_judge(
        confusion=follow_up_review_confusion(experiment=experiment),
        counted_kinds=section.follow_up_kinds,
        minimum=section.follow_up_live_agreement_min,
        min_labels=section.follow_up_live_min_labels,
        confidence=policy.general.confidence,
    )


def follow_up_rate_with_live_agreement(
    *, result: FollowUpRateResult, experiment: Experiment, policy: GatePolicyConfig
) -> tuple[FollowUpRateResult, LiveAgreement]:
    """Layer 2's judgement once the live agreement is known (`insufficient_data` below the
    minimum, the agreement among the reasons), and the agreement itself."""
    live = follow_up_live_agreement_measure(experiment=experiment, policy=policy)
    verdict, reasons = live_agreement_apply(verdict=result.verdict, reasons=result.reasons, live=live)
    return replace(result, verdict=verdict, reasons=reasons), live


def follow_up_error_rates_measure(
    *, experiment: Experiment, shipped: DetectorAccuracy, languages: list[str], policy: GatePolicyConfig
) -> dict[str, LanguageErrorRates]:
    """Per language of `languages`, the error rates layer 2 corrects by: the live ones from the
    experiment's reviewed turns where there are enough, else the shipped ones (one grouped query)."""
    section = policy.section(FollowUpRatePolicy)
    confusion = follow_up_review_confusion_by_language(experiment=experiment, detector=shipped.version)
    live = {
        language: confusion_error_rates(table, kinds=section.follow_up_kinds)
        for language, table in confusion.items()
    }
    return error_rates_choose(
        shipped=shipped.errors,
        live=live,
        languages=languages,
        min_labels=section.follow_up_live_rates_min_labels,
        alpha=section.follow_up_live_rates_alpha,
    )


def follow_up_rate_with_error_rates(
    *, result: FollowUpRateResult, rates: dict[str, LanguageErrorRates]
) -> FollowUpRateResult:
    """The judgement with its error rates' sources among the reasons (`insufficient_data` where a
    shipped rate still in use is contradicted by the live labels)."""
    verdict, reasons = error_rates_apply(verdict=result.verdict, reasons=result.reasons, rates=rates)
    return replace(result, verdict=verdict, reasons=reasons, error_rates=rates)
