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
from django.views.decorators.http import require_POST

from canary.models import FollowUpReview
from canary.selectors.experiments import experiment_get
from canary.selectors.reviews import experiments_for_review, follow_up_reviews_count
from canary.services.live_suite import eval_suite_from_reviews
from canary.services.reviews import (
    LANGUAGES,
    expected_labels,
    follow_up_review_next,
    follow_up_review_record,
    follow_up_reviews_export,
)
from evalhub.exports import jsonl_response
from evalhub.permissions import error_text, roles_required
from gate.services.reviews import follow_up_review_agreement, follow_up_reviewer_agreement
from registry.errors import ApplicationError
from registry.roles import RELEASE_MANAGER, RELEASE_ROLES, REVIEW_ROLES, user_roles
from registry.selectors.suites import eval_suite_get

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
    `?language=en|zh`). POST `turn_id`, `label` and optionally `expected_label`, `expected_reference`
    (the question's expected answer): record them, then the next."""
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
                    expected_label=request.POST.get("expected_label", ""),
                    expected_reference=request.POST.get("expected_reference", ""),
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
        "expected_labels": expected_labels(experiment=experiment) if item else [],
        "mine": follow_up_reviews_count(experiment=experiment, reviewer_name=request.user.get_username()),
        "second": second,
        "live": follow_up_review_agreement(experiment=experiment, actor=request.user),
        "reviewers": follow_up_reviewer_agreement(experiment=experiment, actor=request.user),
        "can_build": RELEASE_MANAGER in user_roles(request.user),
    }
    return render(request, "canary/review.html", context)


@require_POST
@roles_required(RELEASE_ROLES)
def review_suite_build(request: HttpRequest, name: str) -> HttpResponse:
    """POST `suite`, `per_stratum`, `seed`: the next version of `<suite>-live` from this experiment's
    reviewed questions with an expected answer (`canary.services.live_suite`), then back to the queue."""
    experiment = experiment_get(name=name)
    try:
        try:
            per_stratum, seed = int(request.POST.get("per_stratum", "50")), int(request.POST.get("seed", "0"))
        except ValueError:
            raise ValueError(_("per_stratum and seed must be whole numbers.")) from None
        build = eval_suite_from_reviews(
            suite=eval_suite_get(ref=request.POST.get("suite") or experiment.family),
            experiment=experiment,
            per_stratum=per_stratum,
            seed=seed,
            actor=request.user,
        )
    except ValueError as exc:
        messages.error(request, str(exc))
    except ApplicationError as exc:
        messages.error(request, error_text(exc))
    else:
        messages.success(
            request,
            _("Built %(suite)s: %(items)d items, %(added)d live questions added, %(kept)d kept.")
            % {
                "suite": f"{build.suite.name}@{build.suite.version}",
                "items": build.suite.item_count,
                "added": build.added,
                "kept": build.kept,
            },
        )
    return redirect(reverse("review-queue", kwargs={"name": experiment.name}))


@roles_required(REVIEW_ROLES)
def review_export(request: HttpRequest, name: str) -> StreamingHttpResponse:
    experiment = experiment_get(name=name)
    rows = follow_up_reviews_export(experiment=experiment, actor=request.user)
    return jsonl_response(rows=rows, filename=f"{experiment.name}-follow-up-reviews.jsonl")
