"""The follow-up review queue: release managers and annotators label sampled live turns of an
experiment (keyboard: 1 / f follow-up, 2 / d deepening, 3 / o other, s skip) and download the labels
as JSONL in the labelled set's format."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _

from canary.models import FollowUpReview
from canary.selectors.experiments import experiment_get
from canary.selectors.reviews import experiments_for_review, follow_up_reviews_count
from canary.services.reviews import (
    LANGUAGES,
    follow_up_review_next,
    follow_up_review_record,
    follow_up_reviews_export,
)
from evalhub.exports import jsonl_response
from evalhub.permissions import error_text, roles_required
from gate.services.reviews import follow_up_review_agreement, follow_up_reviewer_agreement
from registry.errors import ApplicationError
from registry.roles import REVIEW_ROLES

LABEL_NAMES = dict(FollowUpReview.Label.choices)

# label -> its keyboard shortcuts; the buttons come in this order.
SHORTCUTS = {"follow_up": ("1", "f"), "deepening": ("2", "d"), "new": ("3", "o")}


@roles_required(REVIEW_ROLES)
def review_list(request: HttpRequest) -> HttpResponse:
    return render(request, "canary/review_list.html", {"experiments": experiments_for_review()})


def _language(request: HttpRequest) -> str | None:
    language = request.GET.get("language") or request.POST.get("language") or None
    return language if language in LANGUAGES else None


@roles_required(REVIEW_ROLES)
def review_queue(request: HttpRequest, name: str) -> HttpResponse:
    """GET: a random turn nobody labelled yet (`?second=1`: one another reviewer labelled once;
    `?language=en|zh`). POST `turn_id`, `label`: record the label, then the next."""
    experiment = experiment_get(name=name)
    language = _language(request)
    second = (request.GET.get("second") or request.POST.get("second")) == "1"
    query = urlencode({**({"language": language} if language else {}), **({"second": 1} if second else {})})
    if request.method == "POST":
        try:
            turn_id = int(request.POST.get("turn_id", ""))
        except ValueError:
            messages.error(request, _("turn_id must be a number."))
        else:
            try:
                follow_up_review_record(
                    experiment=experiment,
                    turn_id=turn_id,
                    label=request.POST.get("label", ""),
                    actor=request.user,
                )
            except ApplicationError as exc:
                messages.error(request, error_text(exc))
        url = reverse("review-queue", kwargs={"name": experiment.name})
        return redirect(f"{url}?{query}" if query else url)
    item = follow_up_review_next(
        experiment=experiment, actor=request.user, language=language, second_opinion=second
    )
    context = {
        "experiment": experiment,
        "item": item,
        "language": language,
        "languages": LANGUAGES,
        "buttons": [(value, LABEL_NAMES[value], *keys) for value, keys in SHORTCUTS.items()],
        "mine": follow_up_reviews_count(experiment=experiment, reviewer_name=request.user.get_username()),
        "second": second,
        "live": follow_up_review_agreement(experiment=experiment, actor=request.user),
        "reviewers": follow_up_reviewer_agreement(experiment=experiment, actor=request.user),
    }
    return render(request, "canary/review.html", context)


@roles_required(REVIEW_ROLES)
def review_export(request: HttpRequest, name: str) -> StreamingHttpResponse:
    experiment = experiment_get(name=name)
    rows = follow_up_reviews_export(experiment=experiment, actor=request.user)
    return jsonl_response(rows=rows, filename=f"{experiment.name}-follow-up-reviews.jsonl")
