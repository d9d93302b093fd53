"""Release decisions by release managers: approve or reject a version, or approve one whose gate
did not pass through an override that two different release managers sign. Decisions are
immutable; each one is audited and announced by a signed webhook in its own transaction."""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction

from engines.input_checks import text_problem
from gate.layers.registry import LAYER_NAMES, gate_policy_read
from gate.models import Decision, GateRun
from gate.selectors.decisions import gate_run_latest_finished, override_request_open
from registry.errors import ApplicationError
from registry.models import ModelVersion
from registry.roles import RELEASE_MANAGER, user_roles
from registry.services.audit import audit_record
from registry.services.versions import TRANSITIONS, model_version_transition
from registry.services.webhooks import webhook_send

Action = Decision.Action
VersionStatus = ModelVersion.Status
REASON_MAX_LENGTH = 2000
# Where each decision takes the version; an override request leaves it where it is, but is only
# worth filing where an approval could follow.
TARGET_STATUS = {
    Action.APPROVE: VersionStatus.APPROVED,
    Action.REJECT: VersionStatus.REJECTED,
    Action.OVERRIDE_REQUEST: VersionStatus.APPROVED,
    Action.OVERRIDE_CONFIRM: VersionStatus.APPROVED,
}
# Acts the version's registrant may not take while EVALHUB_DECISIONS_FORBID_SELF_APPROVAL is on.
SELF_APPROVAL_ACTIONS = {Action.APPROVE, Action.OVERRIDE_REQUEST, Action.OVERRIDE_CONFIRM}


def _refuse(message: str, *, field: str, code: str = "invalid", status_code: int = 400) -> ApplicationError:
    return ApplicationError(message, code=code, fields={field: [message]}, status_code=status_code)


def gate_run_weakened(*, gate_run: GateRun) -> list[str]:
    """How a run fell short of the full sandwich: layers its policy did not require, and values it
    overrode. Only a pass of the full gate under the policy as named approves without an override."""
    required = gate_policy_read(gate_run.policy_config).config.general.required_layers
    weakened = [f"layer {layer} not required" for layer in LAYER_NAMES if layer not in required]
    if gate_run.policy_overrides:
        weakened.append(f"policy overridden: {', '.join(sorted(gate_run.policy_overrides))}")
    return weakened


def _gate_run_resolve(*, version: ModelVersion, gate_run: GateRun | None) -> GateRun | None:
    """The gate run the decision is about: the latest finished one. A caller naming a run says
    which one it looked at, and is refused when a newer one has finished since."""
    latest = gate_run_latest_finished(version=version)
    if gate_run is None:
        return latest
    if gate_run.candidate_id != version.pk or not gate_run.is_finished:
        raise _refuse(f"Gate run {gate_run.pk} is not a finished run of {version.ref}.", field="gate_run")
    assert latest is not None  # there is one finished run of the version: `gate_run`
    if gate_run.pk != latest.pk:
        raise _refuse(
            f"Gate run {gate_run.pk} is not the latest finished run of {version.ref} (run {latest.pk} is).",
            field="gate_run",
            code="stale_gate_run",
            status_code=409,
        )
    return gate_run


def _override_confirm_check(*, version: ModelVersion, request: Decision | None, actor, gate_run) -> None:
    if request is None:
        raise _refuse("Name the override request to confirm.", field="confirms")
    if request.action != Action.OVERRIDE_REQUEST or request.version_id != version.pk:
        raise _refuse(f"Decision {request.pk} is not an override request of {version.ref}.", field="confirms")
    if Decision.objects.filter(confirms=request).exists():
        raise _refuse(
            f"Override request {request.pk} is already confirmed.",
            field="confirms",
            code="already_confirmed",
            status_code=409,
        )
    if request.gate_run_id != (gate_run.pk if gate_run else None):
        raise _refuse(
            f"Override request {request.pk} is stale: a newer gate run of {version.ref} has finished "
            "since; file a new request.",
            field="confirms",
            code="stale_override_request",
            status_code=409,
        )
    if request.decided_by_id == actor.pk:
        raise _refuse(
            "An override needs a second release manager: you filed the request.",
            field="decided_by",
            code="second_release_manager_required",
            status_code=403,
        )


@transaction.atomic
def decision_record(
    *,
    version: ModelVersion,
    action: str,
    reason: str,
    actor,
    gate_run: GateRun | None = None,
    confirms: Decision | None = None,
) -> Decision:
    """Record one decision on `version` and apply it to its status; refuses what the release rules
    forbid. The version row stays locked to the end, so two confirmations cannot both land."""
    if RELEASE_MANAGER not in user_roles(actor):
        raise _refuse(
            "Only a release manager may decide on a version.",
            field="decided_by",
            code="permission_denied",
            status_code=403,
        )
    reason = (reason or "").strip()
    if not reason:
        raise _refuse("A decision needs a reason.", field="reason", code="required")
    if len(reason) > REASON_MAX_LENGTH:
        raise _refuse(f"At most {REASON_MAX_LENGTH} characters.", field="reason")
    if problem := text_problem(reason):
        raise _refuse(f"The reason {problem}.", field="reason")
    if action not in Action.values:
        raise _refuse(f"Unknown action {action!r}; one of {', '.join(Action.values)}.", field="action")
    if confirms is not None and action != Action.OVERRIDE_CONFIRM:
        raise _refuse("Only an override_confirm names an override request.", field="confirms")

    version = ModelVersion.objects.select_for_update().get(pk=version.pk)
    if (
        settings.EVALHUB_DECISIONS_FORBID_SELF_APPROVAL
        and action in SELF_APPROVAL_ACTIONS
        and version.created_by_id is not None
        and version.created_by_id == actor.pk
    ):
        raise _refuse(
            f"You registered {version.ref}: another release manager must approve it.",
            field="decided_by",
            code="self_approval",
            status_code=403,
        )
    target = TARGET_STATUS[action]
    if target not in TRANSITIONS[version.status]:
        raise _refuse(
            f"{version.ref} is {version.status}: it cannot be {target} now.",
            field="version",
            code="illegal_transition",
            status_code=409,
        )
    gate_run = _gate_run_resolve(version=version, gate_run=gate_run)
    verdict = gate_run.verdict if gate_run else ""
    weakened = gate_run_weakened(gate_run=gate_run) if gate_run else []
    passed = verdict == GateRun.Verdict.PASS and not weakened
    if action == Action.APPROVE and not passed:
        why = (
            f"passed a weakened gate ({'; '.join(weakened)})"
            if weakened
            else f"did not pass ({verdict or 'no finished run'})"
        )
        raise _refuse(
            f"{version.ref} {why}: approving it is an override; file an override_request for a second "
            "release manager to confirm.",
            field="action",
            code="override_required",
            status_code=409,
        )
    if action == Action.OVERRIDE_REQUEST:
        if passed:
            raise _refuse(
                "The gate passed: approve instead.",
                field="action",
                code="gate_passed",
                status_code=409,
            )
        if (open_request := override_request_open(version=version)) is not None:
            raise _refuse(
                f"Override request {open_request.pk} on {version.ref} is already waiting for confirmation.",
                field="action",
                code="override_request_open",
                status_code=409,
            )
    if action == Action.OVERRIDE_CONFIRM:
        _override_confirm_check(version=version, request=confirms, actor=actor, gate_run=gate_run)

    status_before = version.status
    try:
        with transaction.atomic():
            decision = Decision.objects.create(
                version=version,
                gate_run=gate_run,
                gate_verdict=verdict,
                action=action,
                reason=reason,
                confirms=confirms,
                decided_by=actor,
            )
    except IntegrityError:  # the one-to-one `confirms`: another confirmation got there first
        assert confirms is not None
        raise _refuse(
            f"Override request {confirms.pk} is already confirmed.",
            field="confirms",
            code="already_confirmed",
            status_code=409,
        ) from None
    if action != Action.OVERRIDE_REQUEST:
        model_version_transition(version=version, to_status=target, actor=actor, reason=reason)
    facts = {
        "decision": decision.pk,
        "version": version.ref,
        "action": action,
        "gate_run": gate_run.pk if gate_run else None,
        "gate_verdict": verdict,
        "gate_weakened": weakened,
        "confirms": confirms.pk if confirms else None,
    }
    audit_record(
        actor=actor,
        action=f"decision.{action}",
        target=version,
        before={"status": status_before},
        after={**facts, "status": version.status},
        reason=reason,
    )
    webhook_send(
        event="decision.recorded",
        payload={
            **facts,
            "version_id": version.pk,
            "reason": reason,
            "by": actor.get_username(),
            "status": version.status,
        },
    )
    return decision
