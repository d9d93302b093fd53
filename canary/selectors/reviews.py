"""The follow-up review queue: people's labels of live user turns against the detector's kinds."""

from __future__ import annotations

from django.db.models import Count, OuterRef, QuerySet, Subquery

from canary.models import Experiment, FollowUpReview
from canary.selectors.experiments import experiment_list


def follow_up_reviews_first(*, experiment: Experiment) -> QuerySet[FollowUpReview]:
    """One label per reviewed turn of the experiment, the first given (a later reviewer's label of the
    same turn is a second opinion and does not count twice)."""
    return FollowUpReview.objects.filter(experiment=experiment, is_first=True)


def follow_up_review_confusion(*, experiment: Experiment) -> dict[str, dict[str, int]]:
    """Reviewer's label -> the detector's kind of the turn -> reviewed turns: one grouped query on the
    reviews' own index, whatever the traffic."""
    rows = (
        follow_up_reviews_first(experiment=experiment)
        .values_list("label", "detector_kind")
        .annotate(turns=Count("pk"))
        .order_by()
    )
    confusion: dict[str, dict[str, int]] = {}
    for label, kind, turns in rows:
        confusion.setdefault(label, {})[kind] = turns
    return confusion


def follow_up_review_confusion_by_language(
    *, experiment: Experiment, detector: str
) -> dict[str, dict[str, dict[str, int]]]:
    """Per language the trained detector `detector` stored on the turn: reviewer's label -> the
    detector's kind -> reviewed turns (first labels only; turns judged by a rule or by another
    detector version are left out, their errors are not this detector's). One grouped query."""
    rows = (
        follow_up_reviews_first(experiment=experiment)
        .filter(turn__follow_up_detector=detector, turn__follow_up_language__isnull=False)
        .values_list("turn__follow_up_language", "label", "detector_kind")
        .annotate(turns=Count("pk"))
        .order_by()
    )
    confusion: dict[str, dict[str, dict[str, int]]] = {}
    for language, label, kind, turns in rows:
        confusion.setdefault(language, {}).setdefault(label, {})[kind] = turns
    return confusion


def follow_up_review_pairs(*, experiment: Experiment) -> dict[str, dict[str, int]]:
    """First label -> a second reviewer's label -> turns, over the turns labelled twice or more (each
    second opinion against the turn's first label; one grouped query)."""
    first = FollowUpReview.objects.filter(turn=OuterRef("turn"), is_first=True).values("label")[:1]
    rows = (
        FollowUpReview.objects.filter(experiment=experiment, is_first=False)
        .annotate(first_label=Subquery(first))
        .values_list("first_label", "label")
        .annotate(turns=Count("pk"))
        .order_by()
    )
    pairs: dict[str, dict[str, int]] = {}
    for first_label, label, turns in rows:
        pairs.setdefault(first_label, {})[label] = turns
    return pairs


def experiments_for_review() -> QuerySet[Experiment]:
    """Every experiment with its number of reviewed turns (one query)."""
    return experiment_list().annotate(reviews=Count("follow_up_reviews"))


def follow_up_reviews_count(*, experiment: Experiment, reviewer_name: str) -> int:
    return FollowUpReview.objects.filter(experiment=experiment, reviewer_name=reviewer_name).count()
