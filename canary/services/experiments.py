"""Experiment lifecycle: every change of status or share goes through here and is audited.

draft → running ⇄ paused → promoted / rolled_back. At most one running or paused experiment
per family (a database constraint, so two concurrent starts cannot both win). The share only
grows while an experiment lives (so nobody already on the candidate is moved back); a
rollback sets it to 0 and ends the experiment.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from datetime import datetime
from itertools import pairwise

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from canary.models import Experiment, TrafficShareChange
from engines.input_checks import text_problem
from engines.routing import BUCKETS, share_to_buckets
from registry.actors import Actor, actor_name, actor_require_role, actor_user
from registry.errors import ApplicationError
from registry.models import AuditAction, ModelVersion
from registry.roles import RELEASE_MANAGER
from registry.services.audit import audit_record
from registry.services.serving import model_version_serving_verify
from registry.services.versions import model_version_promote
from registry.services.webhooks import WebhookEvent, webhook_send

Status = Experiment.Status
Cause = TrafficShareChange.Cause
# Who may act on an experiment (system parts, such as the canary analysis, act on their own).
LIFECYCLE_ROLES = frozenset({RELEASE_MANAGER})

# Guardrail keys and their defaults; analysis reads them (see canary.analysis).
GUARDRAIL_DEFAULTS: dict[str, float] = {
    "max_error_rate_increase": 0.02,  # candidate error rate − baseline, absolute
    "max_latency_ratio": 1.5,  # candidate median latency / baseline
    "max_fallback_rate": 0.05,  # share of candidate requests answered by the baseline
    "min_requests": 200,  # per arm, before errors and latency are judged
    "min_sessions": 100,  # per arm, before turns per session are judged
    "min_probes": 20,  # paired probe results, before probes are judged
}

TRANSITIONS = {
    Status.DRAFT: {Status.RUNNING, Status.ROLLED_BACK},
    Status.RUNNING: {Status.PAUSED, Status.PROMOTED, Status.ROLLED_BACK},
    Status.PAUSED: {Status.RUNNING, Status.PROMOTED, Status.ROLLED_BACK},
    Status.PROMOTED: set(),
    Status.ROLLED_BACK: set(),
}

# What a move to each status does to the share (a start is a move to running from a draft).
STATUS_CAUSES = {
    Status.RUNNING: Cause.RESUME,
    Status.PAUSED: Cause.PAUSE,
    Status.PROMOTED: Cause.PROMOTE,
    Status.ROLLED_BACK: Cause.ROLLBACK,
}
# The audit action of a move to each status (a draft is only created, never moved to).
STATUS_AUDIT_ACTIONS: dict[str, AuditAction] = {
    Status.RUNNING: AuditAction.EXPERIMENT_RUNNING,
    Status.PAUSED: AuditAction.EXPERIMENT_PAUSED,
    Status.PROMOTED: AuditAction.EXPERIMENT_PROMOTED,
    Status.ROLLED_BACK: AuditAction.EXPERIMENT_ROLLED_BACK,
}


def experiment_actions_allowed(*, experiment: Experiment) -> list[str]:
    """The lifecycle actions the experiment's status allows now (each action checks again)."""
    allowed = TRANSITIONS[experiment.status]
    checks = {
        "start": experiment.status == Status.DRAFT,
        "pause": Status.PAUSED in allowed,
        "resume": experiment.status == Status.PAUSED,
        "ramp": experiment.status in Experiment.ACTIVE,
        "promote": Status.PROMOTED in allowed,
        "rollback": Status.ROLLED_BACK in allowed,
    }
    return [action for action, ok in checks.items() if ok]


def qa_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _share_buckets(percent: object, field: str) -> int:
    if isinstance(percent, bool) or not isinstance(percent, (int, float)):
        raise ApplicationError(f"{field} must be a number.", fields={field: ["must be a number"]})
    if not 0 < percent <= 100:
        raise ApplicationError(
            f"{field} must be in (0, 100].", fields={field: ["must be more than 0 and at most 100"]}
        )
    try:
        buckets = share_to_buckets(float(percent))
    except ValueError as exc:
        raise ApplicationError(str(exc), fields={field: [f"steps of {100 / BUCKETS} %"]}) from None
    if buckets == 0:  # e.g. 1e-9: within share_to_buckets' rounding of 0, which would send nobody
        raise ApplicationError(
            f"{field} {percent} % is below the smallest share.",
            fields={field: [f"at least {100 / BUCKETS} % (one bucket of {BUCKETS})"]},
        )
    return buckets


def _guardrails_parse(guardrails: object) -> dict[str, float]:
    if guardrails is None:
        return dict(GUARDRAIL_DEFAULTS)
    if not isinstance(guardrails, dict):
        raise ApplicationError("guardrails must be an object.", fields={"guardrails": ["must be an object"]})
    result = dict(GUARDRAIL_DEFAULTS)
    for key, value in guardrails.items():
        field = f"guardrails.{key}"
        if key not in GUARDRAIL_DEFAULTS:
            known = ", ".join(GUARDRAIL_DEFAULTS)
            raise ApplicationError(f"Unknown guardrail {key!r}.", fields={field: [f"known: {known}"]})
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise ApplicationError(
                f"{field} must be a finite number ≥ 0.", fields={field: ["must be a finite number ≥ 0"]}
            )
        result[key] = value
    return result


def _arms_check(*, baseline: ModelVersion, candidate: ModelVersion) -> None:
    """Two versions of one family."""
    if candidate.pk == baseline.pk:
        raise ApplicationError(
            "The candidate must differ from the baseline.", fields={"candidate": ["same as the baseline"]}
        )
    if candidate.family != baseline.family:
        raise ApplicationError(
            f"{candidate.ref} and {baseline.ref} belong to different families.",
            fields={"candidate": [f"must be a version of family {baseline.family!r}"]},
        )


def _share_plan(*, traffic_percent: float | None, ramp: Sequence[float] | None) -> tuple[int, list[int]]:
    """The starting share and the ramp plan's steps, in buckets: the plan increases and starts at the
    share (which defaults to its first step, else 1 %)."""
    steps = [_share_buckets(step, f"ramp[{i}]") for i, step in enumerate(ramp or [])]
    if any(b <= a for a, b in pairwise(steps)):
        raise ApplicationError("The ramp plan must increase.", fields={"ramp": ["each step above the last"]})
    if traffic_percent is None:
        return (steps[0] if steps else 100), steps
    buckets = _share_buckets(traffic_percent, "traffic_percent")
    if steps and buckets != steps[0]:
        raise ApplicationError(
            "traffic_percent must be the ramp plan's first step.",
            fields={"traffic_percent": [f"the plan starts at {steps[0] * 100 / BUCKETS} %"]},
        )
    return buckets, steps


def experiment_create(
    *,
    name: str,
    baseline: ModelVersion,
    candidate: ModelVersion,
    actor: Actor,
    traffic_percent: float | None = None,
    ramp: Sequence[float] | None = None,
    ramp_auto: bool = False,
    guardrails: dict | None = None,
    qa_tokens: Sequence[str] = (),
    is_demo: bool = False,
) -> Experiment:
    """A draft experiment. With a ramp plan, the share starts at its first step. `is_demo` marks
    the bundled demo's own experiment (its pages say its traffic is synthetic)."""
    actor_require_role(actor, LIFECYCLE_ROLES, action="create an experiment")
    _arms_check(baseline=baseline, candidate=candidate)
    buckets, steps = _share_plan(traffic_percent=traffic_percent, ramp=ramp)
    if Experiment.objects.filter(name=name).exists():
        raise ApplicationError(
            f"An experiment named {name!r} exists.",
            code="conflict",
            fields={"name": ["taken"]},
            status_code=409,
        )
    with transaction.atomic():
        experiment = Experiment.objects.create(
            name=name,
            family=candidate.family,
            baseline=baseline,
            candidate=candidate,
            traffic_buckets=buckets,
            ramp=[b * 100 / BUCKETS for b in steps],
            ramp_auto=ramp_auto,
            guardrails=_guardrails_parse(guardrails),
            qa_token_hashes=[qa_token_hash(t) for t in qa_tokens],
            is_demo=is_demo,
            created_by=actor_user(actor),
        )
        audit_record(
            actor=actor,
            action=AuditAction.EXPERIMENT_CREATE,
            target=experiment,
            after={
                "baseline": baseline.ref,
                "candidate": candidate.ref,
                "traffic_percent": experiment.traffic_percent,
                "ramp": experiment.ramp,
            },
        )
    return experiment


def _reason_check(reason: str) -> None:
    """A reason is stored (on the experiment and its audit row): refuse what the database cannot."""
    problem = text_problem(reason)
    if problem:
        raise ApplicationError(f"The reason {problem}.", fields={"reason": [problem]})


def _locked(experiment: Experiment) -> Experiment:
    return Experiment.objects.select_for_update().get(pk=experiment.pk)


def _share_change_record(*, experiment: Experiment, cause: str, actor: Actor, at: datetime) -> None:
    """The share in force from `at` on (0 while paused or rolled back), beside the audit row."""
    buckets = 0 if cause in (Cause.PAUSE, Cause.ROLLBACK) else experiment.traffic_buckets
    TrafficShareChange.objects.create(
        experiment=experiment,
        cause=cause,
        buckets=buckets,
        at=at,
        actor=actor_user(actor),
        actor_name=actor_name(actor),
    )


def _status_set(
    *, experiment: Experiment, to: str, actor: Actor, reason: str, at: datetime, **changes: object
) -> Experiment:
    actor_require_role(actor, LIFECYCLE_ROLES, action=f"move an experiment to {to}")
    _reason_check(reason)
    with transaction.atomic():
        locked = _locked(experiment)
        if to not in TRANSITIONS[locked.status]:
            allowed = ", ".join(sorted(TRANSITIONS[locked.status])) or "none: it has ended"
            raise ApplicationError(
                f"Experiment {locked.name} cannot go from {locked.status} to {to}.",
                code="illegal_transition",
                fields={"status": [f"from {locked.status} allowed: {allowed}"]},
                status_code=409,
            )
        before = {"status": locked.status, "traffic_percent": locked.traffic_percent}
        locked.status = to
        for field, value in changes.items():
            setattr(locked, field, value)
        if "share_since" in changes:  # a new window, at the share in force now
            locked.window_buckets = locked.traffic_buckets
        try:
            with transaction.atomic():
                locked.save()
        except IntegrityError:
            raise ApplicationError(
                f"Family {locked.family!r} already has a running or paused experiment.",
                code="conflict",
                fields={"family": ["one running or paused experiment per family"]},
                status_code=409,
            ) from None
        audit_record(
            actor=actor,
            action=STATUS_AUDIT_ACTIONS[to],
            target=locked,
            before=before,
            after={"status": locked.status, "traffic_percent": locked.traffic_percent},
            reason=reason,
        )
        started = to == Status.RUNNING and before["status"] == Status.DRAFT
        cause = Cause.START if started else STATUS_CAUSES[to]
        _share_change_record(experiment=locked, cause=cause, actor=actor, at=at)
    return locked


def _share_cap_check(*, experiment: Experiment, buckets: int, field: str) -> None:
    """Above the ungated share the candidate needs a gate run whose offline layers passed (the
    traffic layers need this canary's own traffic, so they cannot come first)."""
    cap = share_to_buckets(settings.EVALHUB_CANARY_UNGATED_MAX_PERCENT)
    if buckets > cap and experiment.candidate.offline_gate_passed_at is None:
        raise ApplicationError(
            f"{experiment.candidate.ref} has no gate run whose clean accuracy and robustness passed: "
            f"its share may not go above {cap * 100 / BUCKETS:g} %.",
            code="gate_required",
            fields={field: [f"at most {cap * 100 / BUCKETS:g} % until an offline gate passes"]},
            status_code=409,
        )


def _serving_check(*, experiment: Experiment) -> None:
    """Both arms serve the models their gate judged: a serving address that answers with another
    model's config hash refuses the start (409). One that does not answer yet (its server not started)
    is checked again on the proxy's first call."""
    for version in (experiment.baseline, experiment.candidate):
        check = model_version_serving_verify(version=version)
        if check is not None and check.mismatch:
            raise ApplicationError(
                f"Experiment {experiment.name} cannot start: {check.problem}.",
                code="serving_mismatch",
                fields={"serving_url": [check.problem]},
                status_code=409,
            )


def experiment_start(*, experiment: Experiment, actor: Actor, reason: str = "") -> Experiment:
    _share_cap_check(experiment=experiment, buckets=experiment.traffic_buckets, field="traffic_percent")
    _serving_check(experiment=experiment)
    now = timezone.now()
    return _status_set(
        experiment=experiment,
        to=Status.RUNNING,
        actor=actor,
        reason=reason,
        at=now,
        started_at=now,
        share_since=now,
    )


def experiment_pause(*, experiment: Experiment, actor: Actor, reason: str = "") -> Experiment:
    now = timezone.now()
    return _status_set(
        experiment=experiment, to=Status.PAUSED, actor=actor, reason=reason, at=now, paused_at=now
    )


def experiment_resume(*, experiment: Experiment, actor: Actor, reason: str = "") -> Experiment:
    # While paused everyone was on the baseline: the traffic layers count from the resume on.
    now = timezone.now()
    return _status_set(
        experiment=experiment,
        to=Status.RUNNING,
        actor=actor,
        reason=reason,
        at=now,
        share_since=now,
        paused_at=None,
    )


def experiment_rollback(*, experiment: Experiment, actor: Actor, reason: str) -> Experiment:
    """Everyone back on the baseline at once; the experiment ends; a webhook tells the world."""
    actor_require_role(actor, LIFECYCLE_ROLES, action="roll an experiment back")
    if not reason.strip():
        raise ApplicationError("A rollback needs a reason.", fields={"reason": ["required"]})
    now = timezone.now()
    with transaction.atomic():
        rolled_back = _status_set(
            experiment=experiment,
            to=Status.ROLLED_BACK,
            actor=actor,
            reason=reason,
            at=now,
            traffic_buckets=0,
            ended_at=now,
            end_reason=reason,
        )
        webhook_send(
            event=WebhookEvent.EXPERIMENT_ROLLED_BACK,
            payload={
                "experiment": rolled_back.name,
                "baseline": rolled_back.baseline.ref,
                "candidate": rolled_back.candidate.ref,
                "reason": reason,
                "by": actor_name(actor),
            },
        )
    return rolled_back


def experiment_promote(*, experiment: Experiment, actor: Actor, reason: str = "") -> Experiment:
    """The candidate takes all traffic and the experiment ends, in one transaction with the registry:
    the candidate becomes `promoted`, the version it replaces `retired`. Only an approved candidate
    (an approval decision, or a confirmed two-person override) is promoted: 409 otherwise."""
    now = timezone.now()
    with transaction.atomic():
        promoted = _status_set(
            experiment=experiment,
            to=Status.PROMOTED,
            actor=actor,
            reason=reason,
            at=now,
            traffic_buckets=BUCKETS,
            ended_at=now,
            end_reason=reason,
        )
        candidate = ModelVersion.objects.select_for_update().get(pk=promoted.candidate_id)
        retired = model_version_promote(
            version=candidate, actor=actor, reason=f"experiment {promoted.name} promoted"
        )
        promoted.candidate = candidate
        webhook_send(
            event=WebhookEvent.EXPERIMENT_PROMOTED,
            payload={
                "experiment": promoted.name,
                "promoted": candidate.ref,
                "retired": [v.ref for v in retired],
                "reason": reason,
                "by": actor_name(actor),
            },
        )
    return promoted


def experiment_ramp(
    *,
    experiment: Experiment,
    actor: Actor,
    traffic_percent: float | None = None,
    reason: str = "",
) -> Experiment:
    """Raise the candidate's share: to `traffic_percent`, or to the ramp plan's next step. Above the
    ungated share it needs an offline gate pass; to 100 % it is a promotion (`experiment_promote`)."""
    actor_require_role(actor, LIFECYCLE_ROLES, action="ramp an experiment")
    _reason_check(reason)
    with transaction.atomic():
        locked = _locked(experiment)
        if locked.status not in Experiment.ACTIVE:
            raise ApplicationError(
                f"Experiment {locked.name} is {locked.status}; only a running or paused one can ramp.",
                code="illegal_transition",
                fields={"status": ["must be running or paused"]},
                status_code=409,
            )
        step = locked.ramp_step
        if traffic_percent is None:
            if step + 1 >= len(locked.ramp):
                raise ApplicationError(
                    "The ramp plan has no next step; give traffic_percent.",
                    fields={"traffic_percent": ["required: no further ramp step"]},
                )
            step += 1
            buckets = share_to_buckets(locked.ramp[step])
        else:
            buckets = _share_buckets(traffic_percent, "traffic_percent")
            # Where the plan has this share (or passed it), it now stands at that step.
            step = max([i for i, p in enumerate(locked.ramp) if share_to_buckets(p) <= buckets], default=step)
        if buckets <= locked.traffic_buckets:
            raise ApplicationError(
                "A ramp only raises the share (lowering it would move users off the candidate).",
                fields={"traffic_percent": [f"must be above {locked.traffic_percent} %"]},
            )
        if buckets == BUCKETS:
            return experiment_promote(experiment=locked, actor=actor, reason=reason or "ramped to 100 %")
        _share_cap_check(experiment=locked, buckets=buckets, field="traffic_percent")
        before = {"traffic_percent": locked.traffic_percent, "ramp_step": locked.ramp_step}
        locked.traffic_buckets, locked.ramp_step = buckets, step
        now = timezone.now()
        locked.share_since, locked.window_buckets = now, buckets
        locked.save(update_fields=["traffic_buckets", "ramp_step", "share_since", "window_buckets"])
        audit_record(
            actor=actor,
            action=AuditAction.EXPERIMENT_RAMP,
            target=locked,
            before=before,
            after={"traffic_percent": locked.traffic_percent, "ramp_step": step},
            reason=reason,
        )
        _share_change_record(experiment=locked, cause=Cause.RAMP, actor=actor, at=now)
    return locked


def experiment_horizon_register(
    *, experiment: Experiment, horizon: dict, actor: Actor, follow_up: dict | None = None
) -> Experiment:
    """Store layer 3's plan (`horizon`: its frozen settings and fixed horizon) and layer 2's
    (`follow_up`) on a running experiment, once (the gate sizes them when the experiment starts:
    `gate.services.horizons`); audited. A horizon is a commitment made before the data: a second
    registration is refused (409); replacing the plans is `canary.services.plans.experiment_plans_replace`."""
    actor_require_role(actor, LIFECYCLE_ROLES, action="register an experiment's horizon")
    with transaction.atomic():
        locked = _locked(experiment)
        if locked.business_horizon or locked.follow_up_horizon:
            registered = (locked.business_horizon or locked.follow_up_horizon).get("registered_at")
            raise ApplicationError(
                f"Experiment {locked.name} registered its horizon at {registered}.",
                code="conflict",
                fields={"business_horizon": ["registered once, when the experiment starts"]},
                status_code=409,
            )
        if locked.status != Status.RUNNING:
            raise ApplicationError(
                f"Experiment {locked.name} is {locked.status}: a horizon is registered when it starts.",
                code="illegal_transition",
                fields={"status": ["must be running"]},
                status_code=409,
            )
        locked.business_horizon = horizon
        locked.follow_up_horizon = follow_up or {}
        locked.save(update_fields=["business_horizon", "follow_up_horizon"])
        after = {**horizon, "follow_up": follow_up} if follow_up else horizon
        audit_record(
            actor=actor, action=AuditAction.EXPERIMENT_HORIZON_REGISTER, target=locked, before={}, after=after
        )
    return locked
