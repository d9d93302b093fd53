"""What the follow-up review queue shows beside the turn to label: the detector's live agreement as
layer 2 would judge it now, under the policy a gate run of the family would use, and how far the
reviewers agree with each other."""

from __future__ import annotations

from canary.models import Experiment
from canary.selectors.reviews import follow_up_review_pairs
from gate.judges.follow_up_review import LiveAgreement, ReviewerAgreement, reviewer_agreement_judge
from gate.layers.follow_up_review import follow_up_live_agreement_measure
from gate.services.dashboard import dashboard_policy
from registry.actors import Actor, actor_require_role
from registry.roles import READ_ROLES, REVIEW_ROLES


def follow_up_review_agreement(*, experiment: Experiment, actor: Actor) -> LiveAgreement:
    """The detector against the experiment's reviewed turns (readers and reviewers)."""
    actor_require_role(actor, READ_ROLES | REVIEW_ROLES, action="read the follow-up review agreement")
    policy = dashboard_policy(family=experiment.family).config
    return follow_up_live_agreement_measure(experiment=experiment, policy=policy)


def follow_up_reviewer_agreement(*, experiment: Experiment, actor: Actor) -> ReviewerAgreement:
    """First labels against second opinions on the experiment's turns labelled twice."""
    actor_require_role(actor, READ_ROLES | REVIEW_ROLES, action="read the follow-up review agreement")
    policy = dashboard_policy(family=experiment.family).config
    return reviewer_agreement_judge(
        pairs=follow_up_review_pairs(experiment=experiment), confidence=policy.general.confidence
    )
