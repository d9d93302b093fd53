"""Helpers for tests of suites built from live questions: a session whose question a reviewer gave an
expected answer in the review queue."""

from __future__ import annotations

from canary.models import Experiment, FollowUpReview
from canary.services.reviews import follow_up_review_record
from tests.canary.traffic import chat_session


def reviewed_question(
    experiment: Experiment,
    *,
    session: str,
    question: str,
    reviewer,
    expected_label: str = "",
    expected_reference: str = "",
    label: str = "new",
    arm: str = "baseline",
    next_turn: str = "Thanks.",
) -> FollowUpReview:
    """A session (the question, an answer, `next_turn`) in the event store, its third turn labelled by
    `reviewer` with the question's expected answer. Returns the review."""
    turns = chat_session(
        experiment,
        session=session,
        turns=[question, "[answer] See the clause.", next_turn],
        kind="new",
        arm=arm,
    )
    return follow_up_review_record(
        experiment=experiment,
        turn_id=turns[2].pk,
        label=label,
        expected_label=expected_label,
        expected_reference=expected_reference,
        actor=reviewer,
    )
