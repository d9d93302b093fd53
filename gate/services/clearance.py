"""Only a release decision clears a version for production (`approved`, `canary`, `promoted`).

Checked on every save of a version, whoever saves it (a service, the admin, a form, `loaddata`'s raw
saves), so a new write path cannot get round it: a version enters a cleared status only

- `approved`, from a status a decision is taken in, when its latest decision is an approval or a
  confirmed override (`decision_record` writes the decision, then moves the version);
- `promoted`, from `registered`, when its latest decision is a confirmed incumbent declaration.

Moves inside the cleared statuses (approved → canary → promoted) follow the lifecycle's TRANSITIONS.
Bulk writes skip `save()`, so `ModelVersionQuerySet` refuses them any cleared status, and on
PostgreSQL a trigger (gate 0010) holds the same rule against any SQL at all."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from engines.reasons import Term, gettext_noop, reason, wordings_register
from gate.models import Decision
from registry.errors import ApplicationError
from registry.models import ModelVersion

Status = ModelVersion.Status
Action = Decision.Action
CLEARED = ModelVersion.CLEARED_STATUSES
# cleared status -> (the statuses it may be entered from, the latest decisions that allow it)
ENTRIES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    Status.APPROVED: (
        frozenset({Status.REGISTERED, Status.GATE_PASSED, Status.GATE_FAILED}),
        frozenset({Action.APPROVE, Action.OVERRIDE_CONFIRM}),
    ),
    Status.PROMOTED: (frozenset({Status.REGISTERED}), frozenset({Action.INCUMBENT_CONFIRM})),
}


class ClearanceCode(StrEnum):
    NO_DECISION = "clearance.no_decision"
    NO_DECISION_NOTE = "clearance.no_decision_note"
    FIXTURE_DECISION = "clearance.fixture_decision"
    FIXTURE_NOTE = "clearance.fixture_note"


wordings_register(
    {
        ClearanceCode.NO_DECISION: gettext_noop(
            "{ref} cannot become {status} without a release decision: approval (or a confirmed override) "
            "after its gate, or a confirmed incumbent declaration."
        ),
        ClearanceCode.NO_DECISION_NOTE: gettext_noop(
            "{status} needs a release decision (POST /api/v1/decisions/)"
        ),
        ClearanceCode.FIXTURE_DECISION: gettext_noop(
            "A release decision is recorded by a release manager, never loaded from a fixture."
        ),
        ClearanceCode.FIXTURE_NOTE: gettext_noop(
            "recorded through POST /api/v1/decisions/ or the version page"
        ),
    }
)


def model_version_clearance_check(*, version: ModelVersion) -> None:
    """Refuse (409, naming `status`) a save that would clear `version` for production without the
    decision that does so."""
    if version.status not in CLEARED:
        return
    before = (
        ModelVersion.objects.filter(pk=version.pk).values_list("status", flat=True).first()
        if version.pk is not None
        else None
    )
    if before in CLEARED:
        return
    decisions = Decision.objects.filter(version_id=version.pk).order_by("-pk")
    latest = decisions.values_list("action", flat=True).first() if before is not None else None
    sources, decisions = ENTRIES.get(version.status, (frozenset(), frozenset()))
    if before in sources and latest in decisions:
        return
    raise ApplicationError(
        reason(ClearanceCode.NO_DECISION, ref=version.ref, status=Term(version.status)),
        code="no_release_decision",
        fields={"status": [reason(ClearanceCode.NO_DECISION_NOTE, status=Term(version.status))]},
        status_code=409,
    )


def model_version_pre_save(sender: type[ModelVersion], instance: ModelVersion, **kwargs: Any) -> None:
    """`pre_save` of ModelVersion, raw saves (`loaddata`) included."""
    model_version_clearance_check(version=instance)


def decision_pre_save(sender: type[Decision], instance: Decision, raw: bool = False, **kwargs: Any) -> None:
    """`pre_save` of Decision: a decision is a person's, recorded by `decision_record`; a fixture that
    loads one would make it up (and with it the evidence the check above reads)."""
    if raw:
        raise ApplicationError(
            reason(ClearanceCode.FIXTURE_DECISION),
            code="no_release_decision",
            fields={"decision": [reason(ClearanceCode.FIXTURE_NOTE)]},
            status_code=409,
        )
