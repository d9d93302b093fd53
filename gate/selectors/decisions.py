from __future__ import annotations

from enum import StrEnum

from django.db.models import F, QuerySet

from engines.reasons import gettext_noop, reason, wordings_register
from gate.models import Decision, GateRun
from registry.errors import NotFoundError
from registry.models import ModelVersion
from registry.selectors import pk_like


class DecisionLookupCode(StrEnum):
    NO_SUCH = "decisions.no_such_decision"


wordings_register({DecisionLookupCode.NO_SUCH: gettext_noop("No decision '{pk}'.")})

FINISHED = (GateRun.Status.SUCCEEDED, GateRun.Status.FAILED, GateRun.Status.ERROR)
ACTIVE = (GateRun.Status.QUEUED, GateRun.Status.RUNNING)


def decision_list(*, filters: dict | None = None) -> QuerySet[Decision]:
    filters = filters or {}
    queryset = Decision.objects.select_related("version", "gate_run", "decided_by", "confirmation")
    if filters.get("version"):
        queryset = queryset.filter(version=filters["version"])
    if filters.get("action"):
        queryset = queryset.filter(action=filters["action"])
    return queryset.order_by("-created_at", "-id")


def decision_get(*, decision_id: int | str) -> Decision:
    decision = decision_list().filter(pk=decision_id).first() if pk_like(decision_id) else None
    if decision is None:
        raise NotFoundError(reason(DecisionLookupCode.NO_SUCH, pk=decision_id), field="id")
    return decision


def gate_run_latest_finished(*, version: ModelVersion) -> GateRun | None:
    """The finished gate run of `version` that settled its status last: the one decisions are about."""
    return (
        GateRun.objects.filter(candidate=version, status__in=FINISHED)
        .order_by(F("finished_at").desc(nulls_last=True), "-id")
        .first()
    )


def gate_run_active(*, version: ModelVersion) -> GateRun | None:
    """The oldest gate run of `version` still queued or running: a decision to approve waits for it."""
    return GateRun.objects.filter(candidate=version, status__in=ACTIVE).order_by("pk").first()


def override_request_open(*, version: ModelVersion) -> Decision | None:
    """The override request waiting for a second release manager: unconfirmed, and about the
    version's latest finished gate run (a request about an older run is stale, not open)."""
    latest = gate_run_latest_finished(version=version)
    return (
        decision_list(filters={"version": version, "action": Decision.Action.OVERRIDE_REQUEST})
        .filter(confirmation__isnull=True, gate_run=latest)
        .first()
    )


def incumbent_request_open(*, version: ModelVersion) -> Decision | None:
    """The request to declare `version` its family's production incumbent, waiting for a second
    release manager (moot, though still shown, once the family has a promoted version)."""
    return (
        decision_list(filters={"version": version, "action": Decision.Action.INCUMBENT_REQUEST})
        .filter(confirmation__isnull=True)
        .first()
    )
