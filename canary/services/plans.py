"""The traffic layers' registered plans on an experiment, their one look each, and unblinding; every
change audited. The gate sizes the plans (`gate.services.horizons`) and takes the looks
(`gate.layers`); this module only stores what it is given, under a row lock, once.

A plan is a JSON document per layer (`Experiment.business_horizon` for layer 3,
`Experiment.follow_up_horizon` for layer 2) whose `sequence` counts its registrations. Replacing the
plans is a release manager's act with a reason; the new ones count units from then on, and what the
replaced plans looked at is kept, in short, under `earlier`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from django.db import transaction
from django.utils import timezone

from canary.models import Experiment
from engines.input_checks import text_problem
from engines.reasons import Term, gettext_noop, wordings_register
from engines.reasons import reason as reason_of
from registry.actors import Actor, actor_name, actor_require_role, actor_user
from registry.errors import ApplicationError, CommonCode
from registry.models import AuditAction
from registry.roles import RELEASE_MANAGER
from registry.services.audit import audit_record

# The plan's field on the experiment, by gate layer.
PLAN_FIELDS = {"business_value": "business_horizon", "follow_up_rate": "follow_up_horizon"}
UNBLIND_PERMISSION = "canary.unblind_experiment"


class PlansCode(StrEnum):
    REASON_REQUIRED = "plans.reason_required"
    NOT_ACTIVE = "plans.not_active"
    RUNNING_OR_PAUSED = "plans.running_or_paused"
    UNBLIND_PERMISSION = "plans.unblind_permission"
    UNBLINDED = "plans.unblinded"
    ALREADY_UNBLINDED = "plans.already_unblinded"


wordings_register(
    {
        PlansCode.REASON_REQUIRED: gettext_noop("A reason is required."),
        PlansCode.NOT_ACTIVE: gettext_noop(
            "Experiment {name} is {status}: only a running or paused one takes a new plan."
        ),
        PlansCode.RUNNING_OR_PAUSED: gettext_noop("must be running or paused"),
        PlansCode.UNBLIND_PERMISSION: gettext_noop(
            "Only a user with the permission {permission} may unblind an experiment."
        ),
        PlansCode.UNBLINDED: gettext_noop("Experiment {name} was unblinded by {who} at {at}."),
        PlansCode.ALREADY_UNBLINDED: gettext_noop("already unblinded"),
    }
)


def _locked(experiment: Experiment) -> Experiment:
    return Experiment.objects.select_for_update().get(pk=experiment.pk)


def _reason_require(reason: str) -> None:
    if not reason.strip():
        raise ApplicationError(
            reason_of(PlansCode.REASON_REQUIRED), fields={"reason": [reason_of(CommonCode.REQUIRED)]}
        )
    problem = text_problem(reason)
    if problem:
        raise ApplicationError(
            reason_of(CommonCode.FIELD_PROBLEM, field="reason", problem=problem), fields={"reason": [problem]}
        )


def _earlier(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The replaced plan in short (its registration and its look's verdict), after its own earlier ones."""
    look = plan.get("look") or {}
    result = look.get("result") or {}
    record = look.get("record") or {}
    summary = {
        "sequence": plan.get("sequence", 1),
        "registered_at": plan.get("registered_at"),
        "look_verdict": result.get("verdict"),
        "look_taken_at": record.get("taken_at"),
        "look_gate_run": record.get("gate_run"),
    }
    return [*plan.get("earlier", []), summary]


def experiment_plans_replace(
    *, experiment: Experiment, plans: dict[str, dict[str, Any]], actor: Actor, reason: str
) -> Experiment:
    """Register new plans (layer name -> plan document) on a running or paused experiment in place of
    the current ones: a release manager's act, with a reason, audited with the plans before and after.
    Each new plan counts units first exposed from now on (`counted_from`, set by the gate), never the
    data the old one read."""
    actor_require_role(actor, frozenset({RELEASE_MANAGER}), action="register an experiment's plan again")
    _reason_require(reason)
    with transaction.atomic():
        locked = _locked(experiment)
        if locked.status not in Experiment.ACTIVE:
            raise ApplicationError(
                reason_of(PlansCode.NOT_ACTIVE, name=locked.name, status=Term(locked.status)),
                code="illegal_transition",
                fields={"status": [reason_of(PlansCode.RUNNING_OR_PAUSED)]},
                status_code=409,
            )
        before, after = {}, {}
        for layer, plan in plans.items():
            field = PLAN_FIELDS[layer]
            old = getattr(locked, field) or {}
            new = {
                **plan,
                "sequence": int(old.get("sequence", 1)) + 1,
                "earlier": _earlier(old) if old else [],
            }
            before[layer], after[layer] = old, new
            setattr(locked, field, new)
        locked.save(update_fields=[PLAN_FIELDS[layer] for layer in plans])
        audit_record(
            actor=actor,
            action=AuditAction.EXPERIMENT_PLAN_REPLACE,
            target=locked,
            before=before,
            after=after,
            reason=reason,
        )
    return locked


def experiment_look_store(
    *, experiment: Experiment, layer: str, sequence: int, look: dict[str, Any], actor: Actor
) -> dict[str, Any] | None:
    """Store a layer's one look in its plan, audited, unless the plan already has one (then that one is
    returned: two runs at the horizon share the first) or was replaced since (`sequence`: None, nothing
    stored). Returns the look the plan holds."""
    field = PLAN_FIELDS[layer]
    with transaction.atomic():
        locked = _locked(experiment)
        plan = dict(getattr(locked, field) or {})
        if int(plan.get("sequence", 1)) != sequence:
            return None
        if plan.get("look"):
            return plan["look"]
        plan["look"] = look
        setattr(locked, field, plan)
        locked.save(update_fields=[field])
        audit_record(
            actor=actor,
            action=AuditAction.EXPERIMENT_LOOK,
            target=locked,
            before={},
            after={"layer": layer, **look},
        )
    setattr(experiment, field, plan)
    return look


def unblind_permission_require(actor: Actor) -> None:
    """Refuse (403) anyone but a user holding `canary.unblind_experiment` (no role grants it)."""
    user = actor_user(actor)
    if user is None or not user.has_perm(UNBLIND_PERMISSION):
        raise ApplicationError(
            reason_of(PlansCode.UNBLIND_PERMISSION, permission=UNBLIND_PERMISSION),
            code="permission_denied",
            status_code=403,
        )


def experiment_unblind(*, experiment: Experiment, actor: Actor, reason: str) -> Experiment:
    """Show the traffic layers' numbers before their looks, everywhere, beside who unblinded and why:
    for a person holding the permission `canary.unblind_experiment`, once, with a reason, audited. The
    verdicts before the horizon stay `insufficient_data`."""
    unblind_permission_require(actor)
    user = actor_user(actor)
    _reason_require(reason)
    with transaction.atomic():
        locked = _locked(experiment)
        if locked.unblinded_at is not None:
            raise ApplicationError(
                reason_of(
                    PlansCode.UNBLINDED,
                    name=locked.name,
                    who=locked.unblinded_by_name,
                    at=locked.unblinded_at.isoformat(),
                ),
                code="conflict",
                fields={"experiment": [reason_of(PlansCode.ALREADY_UNBLINDED)]},
                status_code=409,
            )
        locked.unblinded_at, locked.unblinded_by = timezone.now(), user
        locked.unblinded_by_name, locked.unblind_reason = actor_name(actor), reason
        locked.save(update_fields=["unblinded_at", "unblinded_by", "unblinded_by_name", "unblind_reason"])
        audit_record(
            actor=actor,
            action=AuditAction.EXPERIMENT_UNBLIND,
            target=locked,
            before={},
            after={"unblinded_at": locked.unblinded_at.isoformat()},
            reason=reason,
        )
    return locked
