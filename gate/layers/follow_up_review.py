"""Layer 2's check of the follow-up detector on live traffic: reviewers' labels of sampled live turns
(`canary.services.reviews`) against the detector's kinds, judged by `gate.judges.follow_up_review`.
The layer, its report and the review page read it from here."""

from __future__ import annotations

from canary.models import Experiment
from canary.selectors import follow_up_review_confusion
from gate.judges.follow_up_rate import FollowUpRatePolicy
from gate.judges.follow_up_review import LiveAgreement, live_agreement_judge
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
