"""Layer 2's check of the follow-up detector on live traffic: reviewers' labels of sampled live turns
(`canary.services.reviews`) against the detector's kinds, judged by `gate.judges.follow_up_review`.
The layer, the dashboard and the review page read it from here."""

from __future__ import annotations

from dataclasses import replace

from canary.models import Experiment
from canary.selectors import follow_up_review_confusion
from gate.judges.follow_up_rate import FollowUpRatePolicy, FollowUpRateResult
from gate.judges.follow_up_review import LiveAgreement, live_agreement_apply, live_agreement_judge
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
