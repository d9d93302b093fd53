from __future__ import annotations

import time

from django.conf import settings
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


_live: dict[str, tuple[float, Experiment]] = {}


def experiment_get_live(*, name: str) -> Experiment:
    """`experiment_get` for the request hot path (assignment, proxy): this process reuses what it
    read for EVALHUB_CANARY_CACHE_SECONDS (1 s), so a status or share change applies within that
    long. Reading it costs more than the rest of an assignment (bench/router.py)."""
    now = time.monotonic()
    hit = _live.get(name)
    if hit is not None and now - hit[0] < settings.EVALHUB_CANARY_CACHE_SECONDS:
        return hit[1]
    experiment = Experiment.objects.select_related("baseline", "candidate").filter(name=name).first()
    if experiment is None:
        raise NotFoundError(f"No experiment named {name!r}.", field="experiment")
    _live[name] = (now, experiment)
    return experiment
