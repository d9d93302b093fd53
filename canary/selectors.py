from __future__ import annotations

from django.db.models import QuerySet

from canary.models import Experiment
from evalhub.errors import NotFoundError


def experiment_list() -> QuerySet[Experiment]:
    return Experiment.objects.select_related("baseline", "candidate", "created_by").order_by("-created_at")


def experiment_get(*, name: str) -> Experiment:
    experiment = experiment_list().filter(name=name).first()
    if experiment is None:
        raise NotFoundError(f"No experiment named {name!r}.", field="experiment")
    return experiment
