"""Release decisions by release managers: approve or reject a version, approve one whose gate did
not pass through an override that two different release managers sign, or declare (two of them
again) the version that serves production when its family starts. Nothing else clears a version
for production (`gate.services.clearance`). Decisions are immutable; each one is audited and
announced by a signed webhook in its own transaction."""

from __future__ import annotations

from enum import StrEnum

from django.conf import settings
from django.db import IntegrityError, transaction

from engines.input_checks import text_problem
from engines.reasons import (
    ENGLISH,
    Reason,
    Term,
    gettext_noop,
    reason_payload,
    reasons_to_json,
    wordings_register,
)
from engines.reasons import reason as reason_of
from gate.layers.registry import gate_layers, gate_policy_read
from gate.models import Decision, GateRun
from gate.selectors.decisions import (
    gate_run_active,
    gate_run_latest_finished,
    incumbent_request_open,
    override_request_open,
)
from registry.errors import ApplicationError, CommonCode
from registry.models import AuditAction, ModelVersion
from registry.roles import RELEASE_MANAGER, user_roles
from registry.selectors.versions import model_version_in_production
from registry.services.audit import audit_record
from registry.services.versions import TRANSITIONS, model_version_incumbent_promote, model_version_transition
from registry.services.webhooks import WebhookEvent, webhook_send

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
    Action.INCUMBENT_REQUEST: VersionStatus.PROMOTED,
    Action.INCUMBENT_CONFIRM: VersionStatus.PROMOTED,
}
# Declaring the version already in production when its family starts (`_incumbent_check`).
INCUMBENT_ACTIONS = frozenset({Action.INCUMBENT_REQUEST, Action.INCUMBENT_CONFIRM})
# Acts the version's registrant may not take while EVALHUB_DECISIONS_FORBID_SELF_APPROVAL is on.
SELF_APPROVAL_ACTIONS = {Action.APPROVE, Action.OVERRIDE_REQUEST, Action.OVERRIDE_CONFIRM, *INCUMBENT_ACTIONS}


class DecisionsCode(StrEnum):
    NOT_A_FINISHED_RUN = "decisions.not_a_finished_run"
    STALE_GATE_RUN = "decisions.stale_gate_run"
    NAME_THE_REQUEST = "decisions.name_the_request"
    NOT_A_REQUEST = "decisions.not_a_request"
    OVERRIDE_CONFIRMED = "decisions.override_confirmed"
    INCUMBENT_CONFIRMED = "decisions.incumbent_confirmed"
    OVERRIDE_STALE = "decisions.override_stale"
    OVERRIDE_SAME_PERSON = "decisions.override_same_person"
    DECLARATION_SAME_PERSON = "decisions.declaration_same_person"
    RELEASE_MANAGER_ONLY = "decisions.release_manager_only"
    REASON_REQUIRED = "decisions.reason_required"
    REASON_TOO_LONG = "decisions.reason_too_long"
    UNKNOWN_ACTION = "decisions.unknown_action"
    CONFIRMS_MISPLACED = "decisions.confirms_misplaced"
    GATE_RUN_ACTIVE = "decisions.gate_run_active"
    NO_FINISHED_RUN = "decisions.no_finished_run"
    SERVES_PRODUCTION = "decisions.serves_production"
    ILLEGAL_STATUS = "decisions.illegal_status"
    OVERRIDE_REQUIRED_FAILED = "decisions.override_required_failed"
    OVERRIDE_REQUIRED_WEAKENED = "decisions.override_required_weakened"
    GATE_PASSED = "decisions.gate_passed"
    OVERRIDE_OPEN = "decisions.override_open"
    INCUMBENT_NO_RUN = "decisions.incumbent_no_run"
    INCUMBENT_NOT_REGISTERED = "decisions.incumbent_not_registered"
    INCUMBENT_EXISTS = "decisions.incumbent_exists"
    INCUMBENT_OPEN = "decisions.incumbent_open"
    SELF_APPROVAL = "decisions.self_approval"
    LAYER_NOT_REQUIRED = "decisions.layer_not_required"
    POLICY_OVERRIDDEN = "decisions.policy_overridden"


wordings_register(
    {
        DecisionsCode.NOT_A_FINISHED_RUN: gettext_noop("Gate run {pk} is not a finished run of {ref}."),
        DecisionsCode.STALE_GATE_RUN: gettext_noop(
            "Gate run {pk} is not the latest finished run of {ref} (run {latest} is)."
        ),
        DecisionsCode.NAME_THE_REQUEST: gettext_noop("Name the {kind} to confirm."),
        DecisionsCode.NOT_A_REQUEST: gettext_noop("Decision {pk} is not an {kind} of {ref}."),
        DecisionsCode.OVERRIDE_CONFIRMED: gettext_noop("Override request {pk} is already confirmed."),
        DecisionsCode.INCUMBENT_CONFIRMED: gettext_noop("Incumbent request {pk} is already confirmed."),
        DecisionsCode.OVERRIDE_STALE: gettext_noop(
            "Override request {pk} is stale: a newer gate run of {ref} has finished since; file a new "
            "request."
        ),
        DecisionsCode.OVERRIDE_SAME_PERSON: gettext_noop(
            "An override needs a second release manager: you filed the request."
        ),
        DecisionsCode.DECLARATION_SAME_PERSON: gettext_noop(
            "A declaration needs a second release manager: you filed the request."
        ),
        DecisionsCode.RELEASE_MANAGER_ONLY: gettext_noop("Only a release manager may decide on a version."),
        DecisionsCode.REASON_REQUIRED: gettext_noop("A decision needs a reason."),
        DecisionsCode.REASON_TOO_LONG: gettext_noop("At most {n} characters."),
        DecisionsCode.UNKNOWN_ACTION: gettext_noop("Unknown action '{action}'; one of {choices}."),
        DecisionsCode.CONFIRMS_MISPLACED: gettext_noop(
            "Only an override_confirm or an incumbent_confirm names a request."
        ),
        DecisionsCode.GATE_RUN_ACTIVE: gettext_noop(
            "Gate run {pk} of {ref} is still {status}: approving waits for a finished run; rejecting is "
            "possible now."
        ),
        DecisionsCode.NO_FINISHED_RUN: gettext_noop(
            "No gate run of {ref} has finished: approving, by override too, needs a finished run; "
            "rejecting is possible now."
        ),
        DecisionsCode.SERVES_PRODUCTION: gettext_noop(
            "{ref} serves production: it leaves when its replacement is promoted (it is then retired), "
            "never by a rejection."
        ),
        DecisionsCode.ILLEGAL_STATUS: gettext_noop("{ref} is {status}: it cannot be {target} now."),
        DecisionsCode.OVERRIDE_REQUIRED_FAILED: gettext_noop(
            "{ref} did not pass ({verdict}): approving it is an override; file an override_request for a "
            "second release manager to confirm."
        ),
        DecisionsCode.OVERRIDE_REQUIRED_WEAKENED: gettext_noop(
            "{ref} passed a weakened gate ({weakened}): approving it is an override; file an "
            "override_request for a second release manager to confirm."
        ),
        DecisionsCode.LAYER_NOT_REQUIRED: gettext_noop("layer {layer} not required"),
        DecisionsCode.POLICY_OVERRIDDEN: gettext_noop("policy overridden: {keys}"),
        DecisionsCode.GATE_PASSED: gettext_noop("The gate passed: approve instead."),
        DecisionsCode.OVERRIDE_OPEN: gettext_noop(
            "Override request {pk} on {ref} is already waiting for confirmation."
        ),
        DecisionsCode.INCUMBENT_NO_RUN: gettext_noop("An incumbent declaration is about no gate run."),
        DecisionsCode.INCUMBENT_NOT_REGISTERED: gettext_noop(
            "{ref} is {status}: only a registered version is declared its family's production incumbent."
        ),
        DecisionsCode.INCUMBENT_EXISTS: gettext_noop(
            "{serving} serves {family} in production already: a new version gets there by approval and "
            "promotion."
        ),
        DecisionsCode.INCUMBENT_OPEN: gettext_noop(
            "Incumbent request {pk} on {ref} is already waiting for confirmation."
        ),
        DecisionsCode.SELF_APPROVAL: gettext_noop(
            "You registered {ref}: another release manager must approve it."
        ),
    }
)


def _refuse(reason: Reason, *, field: str, code: str = "invalid", status_code: int = 400) -> ApplicationError:
    return ApplicationError(reason, code=code, fields={field: [reason]}, status_code=status_code)


def gate_run_weakened(*, gate_run: GateRun) -> list[Reason]:
    """How a run fell short of the full sandwich: essential layers its policy did not require, and
    values it overrode. Only a pass of the full gate under the policy as named approves without an
    override (a layer an app adds is not essential: a policy that leaves it out is not weakened)."""
    required = gate_policy_read(gate_run.policy_config).config.general.required_layers
    weakened = [
        reason_of(DecisionsCode.LAYER_NOT_REQUIRED, layer=Term(layer.name))
        for layer in gate_layers()
        if layer.essential and layer.name not in required
    ]
    if gate_run.policy_overrides:
        weakened.append(reason_of(DecisionsCode.POLICY_OVERRIDDEN, keys=sorted(gate_run.policy_overrides)))
    return weakened


def _gate_run_resolve(*, version: ModelVersion, gate_run: GateRun | None) -> GateRun | None:
    """The gate run the decision is about: the latest finished one. A caller naming a run says
    which one it looked at, and is refused when a newer one has finished since."""
    latest = gate_run_latest_finished(version=version)
    if gate_run is None:
        return latest
    if gate_run.candidate_id != version.pk or not gate_run.is_finished:
        raise _refuse(
            reason_of(DecisionsCode.NOT_A_FINISHED_RUN, pk=gate_run.pk, ref=version.ref), field="gate_run"
        )
    assert latest is not None  # there is one finished run of the version: `gate_run`
    if gate_run.pk != latest.pk:
        raise _refuse(
            reason_of(DecisionsCode.STALE_GATE_RUN, pk=gate_run.pk, ref=version.ref, latest=latest.pk),
            field="gate_run",
            code="stale_gate_run",
            status_code=409,
        )
    return gate_run


def _confirm_check(*, version: ModelVersion, action: str, request: Decision | None, actor, gate_run) -> None:
    """A confirmation's request: of this version, of the kind it confirms, open, and filed by someone
    else (an override's also about the latest finished gate run)."""
    kind = Decision.CONFIRMS[action]
    override = kind == Action.OVERRIDE_REQUEST
    if request is None:
        raise _refuse(reason_of(DecisionsCode.NAME_THE_REQUEST, kind=kind), field="confirms")
    if request.action != kind or request.version_id != version.pk:
        raise _refuse(
            reason_of(DecisionsCode.NOT_A_REQUEST, pk=request.pk, kind=kind, ref=version.ref),
            field="confirms",
        )
    if Decision.objects.filter(confirms=request).exists():
        confirmed = DecisionsCode.OVERRIDE_CONFIRMED if override else DecisionsCode.INCUMBENT_CONFIRMED
        raise _refuse(
            reason_of(confirmed, pk=request.pk),
            field="confirms",
            code="already_confirmed",
            status_code=409,
        )
    if kind == Action.OVERRIDE_REQUEST and request.gate_run_id != (gate_run.pk if gate_run else None):
        raise _refuse(
            reason_of(DecisionsCode.OVERRIDE_STALE, pk=request.pk, ref=version.ref),
            field="confirms",
            code="stale_override_request",
            status_code=409,
        )
    if request.decided_by_id == actor.pk:
        raise _refuse(
            reason_of(
                DecisionsCode.OVERRIDE_SAME_PERSON if override else DecisionsCode.DECLARATION_SAME_PERSON
            ),
            field="decided_by",
            code="second_release_manager_required",
            status_code=403,
        )


def _decision_input_check(*, action: str, reason: str, actor, confirms: Decision | None) -> str:
    """Who decides and what they wrote, before the version is looked at; returns the reason stripped."""
    if RELEASE_MANAGER not in user_roles(actor):
        raise _refuse(
            reason_of(DecisionsCode.RELEASE_MANAGER_ONLY),
            field="decided_by",
            code="permission_denied",
            status_code=403,
        )
    reason = (reason or "").strip()
    if not reason:
        raise _refuse(reason_of(DecisionsCode.REASON_REQUIRED), field="reason", code="required")
    if len(reason) > REASON_MAX_LENGTH:
        raise _refuse(reason_of(DecisionsCode.REASON_TOO_LONG, n=REASON_MAX_LENGTH), field="reason")
    if problem := text_problem(reason):
        raise _refuse(reason_of(CommonCode.FIELD_PROBLEM, field="reason", problem=problem), field="reason")
    if action not in Action.values:
        raise _refuse(
            reason_of(DecisionsCode.UNKNOWN_ACTION, action=action, choices=list(Action.values)),
            field="action",
        )
    if confirms is not None and action not in Decision.CONFIRMS:
        raise _refuse(reason_of(DecisionsCode.CONFIRMS_MISPLACED), field="confirms")
    return reason


def _finished_run_check(*, version: ModelVersion) -> None:
    """Approving, by override too, is a decision on a finished gate run: refused (409, naming the
    reason once) while a run is queued or running, and before any has finished. A rejection never
    waits."""
    if (active := gate_run_active(version=version)) is not None:
        raise _refuse(
            reason_of(
                DecisionsCode.GATE_RUN_ACTIVE, pk=active.pk, ref=version.ref, status=Term(active.status)
            ),
            field="gate_run",
            code="gate_run_active",
            status_code=409,
        )
    if gate_run_latest_finished(version=version) is None:
        raise _refuse(
            reason_of(DecisionsCode.NO_FINISHED_RUN, ref=version.ref),
            field="gate_run",
            code="no_finished_gate_run",
            status_code=409,
        )


def _release_check(*, version: ModelVersion, action: str, actor, gate_run, confirms) -> tuple:
    """An approval, rejection or override on `version`: the gate run it is about (the latest finished
    one), its verdict and how its gate was weakened; refuses what the release rules forbid."""
    target = TARGET_STATUS[action]
    if action != Action.REJECT:
        _finished_run_check(version=version)
    if version.status == VersionStatus.PROMOTED and action == Action.REJECT:
        raise _refuse(
            reason_of(DecisionsCode.SERVES_PRODUCTION, ref=version.ref),
            field="version",
            code="illegal_transition",
            status_code=409,
        )
    if target not in TRANSITIONS[version.status]:
        raise _refuse(
            reason_of(
                DecisionsCode.ILLEGAL_STATUS,
                ref=version.ref,
                status=Term(version.status),
                target=Term(target),
            ),
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
            reason_of(DecisionsCode.OVERRIDE_REQUIRED_WEAKENED, ref=version.ref, weakened=weakened)
            if weakened
            else reason_of(DecisionsCode.OVERRIDE_REQUIRED_FAILED, ref=version.ref, verdict=Term(verdict))
        )
        raise _refuse(
            why,
            field="action",
            code="override_required",
            status_code=409,
        )
    if action == Action.OVERRIDE_REQUEST:
        if passed:
            raise _refuse(
                reason_of(DecisionsCode.GATE_PASSED), field="action", code="gate_passed", status_code=409
            )
        if (open_request := override_request_open(version=version)) is not None:
            raise _refuse(
                reason_of(DecisionsCode.OVERRIDE_OPEN, pk=open_request.pk, ref=version.ref),
                field="action",
                code="override_request_open",
                status_code=409,
            )
    if action == Action.OVERRIDE_CONFIRM:
        _confirm_check(version=version, action=action, request=confirms, actor=actor, gate_run=gate_run)
    return gate_run, verdict, weakened


def _incumbent_check(*, version: ModelVersion, action: str, actor, gate_run, confirms) -> None:
    """Declaring the version that serves production when its family starts: a registered version of
    a family with no promoted one, about no gate run, requested by one release manager and confirmed
    by another."""
    if gate_run is not None:
        raise _refuse(reason_of(DecisionsCode.INCUMBENT_NO_RUN), field="gate_run")
    if version.status != VersionStatus.REGISTERED:
        raise _refuse(
            reason_of(DecisionsCode.INCUMBENT_NOT_REGISTERED, ref=version.ref, status=Term(version.status)),
            field="version",
            code="illegal_transition",
            status_code=409,
        )
    serving = model_version_in_production(family=version.family)
    if serving is not None:
        raise _refuse(
            reason_of(DecisionsCode.INCUMBENT_EXISTS, serving=serving.ref, family=version.family),
            field="version",
            code="incumbent_exists",
            status_code=409,
        )
    if action == Action.INCUMBENT_REQUEST:
        if (open_request := incumbent_request_open(version=version)) is not None:
            raise _refuse(
                reason_of(DecisionsCode.INCUMBENT_OPEN, pk=open_request.pk, ref=version.ref),
                field="action",
                code="incumbent_request_open",
                status_code=409,
            )
    else:
        _confirm_check(version=version, action=action, request=confirms, actor=actor, gate_run=None)


def _decision_apply(*, version: ModelVersion, action: str, actor, reason: str) -> None:
    """Move the version as the decision says (a request leaves it where it is)."""
    if action in (Action.OVERRIDE_REQUEST, Action.INCUMBENT_REQUEST):
        return
    if action == Action.INCUMBENT_CONFIRM:
        model_version_incumbent_promote(version=version, actor=actor, reason=reason)
    else:
        model_version_transition(version=version, to_status=TARGET_STATUS[action], actor=actor, reason=reason)


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
    reason = _decision_input_check(action=action, reason=reason, actor=actor, confirms=confirms)
    version = ModelVersion.objects.select_for_update().get(pk=version.pk)
    if (
        settings.EVALHUB_DECISIONS_FORBID_SELF_APPROVAL
        and action in SELF_APPROVAL_ACTIONS
        and version.created_by_id is not None
        and version.created_by_id == actor.pk
    ):
        raise _refuse(
            reason_of(DecisionsCode.SELF_APPROVAL, ref=version.ref),
            field="decided_by",
            code="self_approval",
            status_code=403,
        )
    check = {"version": version, "action": action, "actor": actor, "gate_run": gate_run, "confirms": confirms}
    if action in INCUMBENT_ACTIONS:
        _incumbent_check(**check)
        verdict, weakened = "", []
    else:
        gate_run, verdict, weakened = _release_check(**check)
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
            reason_of(
                DecisionsCode.OVERRIDE_CONFIRMED
                if action == Action.OVERRIDE_CONFIRM
                else DecisionsCode.INCUMBENT_CONFIRMED,
                pk=confirms.pk,
            ),
            field="confirms",
            code="already_confirmed",
            status_code=409,
        ) from None
    _decision_apply(version=version, action=action, actor=actor, reason=reason)
    _decision_announce(decision=decision, status_before=status_before, weakened=weakened)
    return decision


DECISION_AUDIT_ACTIONS = {
    Decision.Action.APPROVE: AuditAction.DECISION_APPROVE,
    Decision.Action.REJECT: AuditAction.DECISION_REJECT,
    Decision.Action.OVERRIDE_REQUEST: AuditAction.DECISION_OVERRIDE_REQUEST,
    Decision.Action.OVERRIDE_CONFIRM: AuditAction.DECISION_OVERRIDE_CONFIRM,
    Decision.Action.INCUMBENT_REQUEST: AuditAction.DECISION_INCUMBENT_REQUEST,
    Decision.Action.INCUMBENT_CONFIRM: AuditAction.DECISION_INCUMBENT_CONFIRM,
}


def _decision_announce(*, decision: Decision, status_before: str, weakened: list[Reason]) -> None:
    """The decision's audit row (how the gate was weakened as codes) and its webhook
    `decision.recorded` (with the codes, in English for any receiver)."""
    version, actor = decision.version, decision.decided_by
    facts = {
        "decision": decision.pk,
        "version": version.ref,
        "action": decision.action,
        "gate_run": decision.gate_run_id,
        "gate_verdict": decision.gate_verdict,
        "confirms": decision.confirms_id,
    }
    audit_record(
        actor=actor,
        action=DECISION_AUDIT_ACTIONS[Decision.Action(decision.action)],
        target=version,
        before={"status": status_before},
        after={**facts, "gate_weakened": reasons_to_json(weakened), "status": version.status},
        reason=decision.reason,
    )
    webhook_send(
        event=WebhookEvent.DECISION_RECORDED,
        payload={
            **facts,
            "gate_weakened": [reason_payload(value, words=ENGLISH) for value in weakened],
            "version_id": version.pk,
            "reason": decision.reason,
            "by": actor.get_username(),
            "status": version.status,
        },
    )


def model_version_incumbent_declare(*, version: ModelVersion, actor, reason: str) -> Decision:
    """Ask to declare `version` the production version its family already runs (the first of two
    signatures; `model_version_incumbent_confirm` is the second, by another release manager)."""
    return decision_record(version=version, action=Action.INCUMBENT_REQUEST, reason=reason, actor=actor)


def model_version_incumbent_confirm(*, request: Decision, actor, reason: str) -> Decision:
    """Confirm another release manager's incumbent request: its version becomes `promoted`."""
    return decision_record(
        version=request.version, action=Action.INCUMBENT_CONFIRM, reason=reason, actor=actor, confirms=request
    )
