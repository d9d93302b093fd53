"""Gate runs: start one, let a worker claim and execute it, finish or fail it, and recover
runs whose worker died. Model work is done through `engines.backends`, imported lazily so the
web process never loads torch."""

from __future__ import annotations

import logging
from enum import StrEnum
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from canary.selectors.experiments import experiment_for_gate
from engines.backends.base import BackendError
from engines.reasons import (
    ENGLISH,
    Reason,
    Term,
    gettext_noop,
    reason,
    reason_payload,
    reason_render,
    reasons_to_json,
    sentences,
    stored_reason_read,
    wordings_register,
)
from gate.judges.verdict import gate_verdict
from gate.layers.base import (
    ClaimLost,
    LayerContext,
    LayerKind,
    Progress,
    RunParked,
    Step,
    layer_error_store,
)
from gate.layers.registry import gate_layers, gate_policy_read
from gate.models import GateRun
from gate.policy import PolicyFindings
from gate.services.horizons import plan_overrides_check
from gate.services.policies import gate_policy_resolve
from registry.actors import Actor, SystemActor, actor_name, actor_require_role, actor_user
from registry.dispatch import Task, task_send
from registry.errors import ApplicationError
from registry.leases import LeaseKeeper, lease_lapsed, lease_stale_before
from registry.models import AuditAction, EvalSuite, ModelVersion
from registry.roles import RELEASE_MANAGER, WRITE_ROLES, user_roles
from registry.services.audit import audit_record
from registry.services.serving import model_version_serving_verify
from registry.services.suites import eval_suite_lock
from registry.services.versions import model_version_offline_gate_record, model_version_transition
from registry.services.webhooks import WebhookEvent, webhook_send

logger = logging.getLogger(__name__)
Status = GateRun.Status
VersionStatus = ModelVersion.Status
ACTIVE = (Status.QUEUED, Status.RUNNING)


class GateRunsCode(StrEnum):
    OWN_BASELINE = "gate_runs.own_baseline"
    DIFFER_NOTE = "gate_runs.differ_note"
    NOT_SERVING = "gate_runs.not_serving"  # `why`: the serving check's reason
    # Why a run ended in error or failed (`error_reason`)
    GAVE_UP_AFTER = "gate_runs.gave_up_after"
    GAVE_UP = "gate_runs.gave_up"  # `why`: the backend's error, after the task's last retry
    TIME_LIMIT = "gate_runs.time_limit"
    STOPPED_REPORTING = "gate_runs.stopped_reporting"
    LAST_ERROR = "gate_runs.last_error"  # `reason` and what failed before (`why`)
    POLICY_UNRUNNABLE = "gate_runs.policy_unrunnable"
    LAYER_ERROR = "gate_runs.layer_error"  # `layer` (a term) and its stored reasons (`why`)
    NO_REASON = "gate_runs.no_reason"
    CANCELLED = "gate_runs.cancelled"  # `actor`, and their reason (`why`, may be "")
    NOT_ACTIVE = "gate_runs.not_active"
    CANCEL_NOT_YOURS = "gate_runs.cancel_not_yours"


wordings_register(
    {
        GateRunsCode.OWN_BASELINE: gettext_noop("A version cannot be its own baseline."),
        GateRunsCode.DIFFER_NOTE: gettext_noop("must differ from the candidate"),
        GateRunsCode.NOT_SERVING: gettext_noop("not the model that serves: {why}"),
        GateRunsCode.GAVE_UP_AFTER: gettext_noop("gave up after {n} attempts"),
        GateRunsCode.GAVE_UP: gettext_noop("gave up: {why}"),
        GateRunsCode.TIME_LIMIT: gettext_noop("task time limit exceeded"),
        GateRunsCode.STOPPED_REPORTING: gettext_noop(
            "worker {worker} stopped reporting at {at} UTC after {n} attempt(s)"
        ),
        GateRunsCode.LAST_ERROR: gettext_noop("{reason}; last error: {why}"),
        GateRunsCode.POLICY_UNRUNNABLE: gettext_noop(
            "the stored policy has keys this version cannot run: {keys}; start a new run"
        ),
        GateRunsCode.LAYER_ERROR: gettext_noop("{layer} error: {why}"),
        GateRunsCode.NO_REASON: gettext_noop("no reason stored"),
        GateRunsCode.CANCELLED: gettext_noop("cancelled by {actor}: {why}"),
        GateRunsCode.NOT_ACTIVE: gettext_noop(
            "gate run {id} is {status}: only a queued or running run can be cancelled"
        ),
        GateRunsCode.CANCEL_NOT_YOURS: gettext_noop(
            "only a release manager or the user who started gate run {id} may cancel it"
        ),
    }
)

GATE = SystemActor("gate")
# The layers that need no canary traffic: the evidence to let a canary grow.
OFFLINE_LAYERS = ("clean_accuracy", "robustness")


def gate_run_start(
    *,
    candidate: ModelVersion,
    suite: EvalSuite,
    actor: Actor,
    baseline: ModelVersion | None = None,
    policy_name: str | None = None,
    policy_overrides: dict | None = None,
    experiment_name: str | None = None,
) -> GateRun:
    actor_require_role(actor, WRITE_ROLES, action="start a gate run")
    baseline = baseline or candidate.baseline
    if baseline is not None and baseline.pk == candidate.pk:
        raise ApplicationError(
            reason(GateRunsCode.OWN_BASELINE), fields={"baseline": [reason(GateRunsCode.DIFFER_NOTE)]}
        )
    policy, config = gate_policy_resolve(
        name=policy_name, overrides=policy_overrides, family=candidate.family
    )
    experiment = experiment_for_gate(candidate=candidate, baseline=baseline, name=experiment_name)
    plan_overrides_check(experiment=experiment, config=config, overrides=policy_overrides)
    with transaction.atomic():
        run = GateRun.objects.create(
            candidate=candidate,
            baseline=baseline,
            suite=suite,
            policy=policy,
            policy_config=config.as_dict(),
            policy_overrides=policy_overrides or {},
            experiment=experiment,
            created_by=actor_user(actor),
        )
        eval_suite_lock(suite=suite)
        audit_record(
            actor=actor,
            action=AuditAction.GATE_RUN_START,
            target=run,
            after={
                "candidate": candidate.ref,
                "baseline": baseline.ref if baseline else None,
                "suite": str(suite),
                "policy": policy.name,
                "policy_overrides": policy_overrides or {},
                "experiment": experiment.name if experiment else None,
            },
        )
        if candidate.status in (
            VersionStatus.REGISTERED,
            VersionStatus.GATE_PASSED,
            VersionStatus.GATE_FAILED,
        ):
            model_version_transition(
                version=candidate,
                to_status=VersionStatus.EVALUATING,
                actor=GATE,
                reason=f"gate run {run.pk}, started by {actor_name(actor)}",
            )
        transaction.on_commit(lambda: gate_run_enqueue(gate_run_id=run.pk))
    return run


def gate_run_cancellable_by(*, run: GateRun, actor: Actor) -> bool:
    """Whether `actor` may cancel `run` (active or not): a release manager, or the user with a write
    role who started it (a system part acts on its own authority)."""
    if isinstance(actor, SystemActor):
        return True
    user = actor_user(actor)
    if user is None:
        return False
    roles = user_roles(user)
    return RELEASE_MANAGER in roles or (bool(roles & WRITE_ROLES) and user.pk == run.created_by_id)


def gate_run_cancel(*, gate_run_id: int, actor: Actor, why: str = "") -> GateRun:
    """Cancel a queued or running run (a release manager, or the user who started it). A queued run
    is never started; the worker of a running one finds it no longer held at its next report (at
    the end of the model call in flight: a step of the attack, which through a slow endpoint can take
    minutes) and stops, storing nothing more. The run ends `cancelled`, verdict error: a cancelled
    gate never passes."""
    actor_require_role(actor, WRITE_ROLES, action="cancel a gate run")
    with transaction.atomic():
        run = GateRun.objects.select_for_update().get(pk=gate_run_id)
        if not gate_run_cancellable_by(run=run, actor=actor):
            raise ApplicationError(
                reason(GateRunsCode.CANCEL_NOT_YOURS, id=run.pk),
                code="permission_denied",
                status_code=HTTPStatus.FORBIDDEN,
            )
        if run.is_finished:
            raise ApplicationError(
                reason(GateRunsCode.NOT_ACTIVE, id=run.pk, status=Term(run.status)),
                code="conflict",
                status_code=HTTPStatus.CONFLICT,
            )
        before = run.status
        cancelled = reason(GateRunsCode.CANCELLED, actor=actor_name(actor), why=why)
        run.status, run.verdict, run.worker = Status.CANCELLED, GateRun.Verdict.ERROR, ""
        run.verdict_reasons = reasons_to_json([cancelled])
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "verdict", "verdict_reasons", "worker", "finished_at"])
        audit_record(
            actor=actor,
            action=AuditAction.GATE_RUN_CANCEL,
            target=run,
            before={"status": before},
            after={"status": run.status},
            reason=why,
        )
        _candidate_settle(run=run)
        _verdict_announce(run=run, layer_verdicts=dict(run.layers.values_list("layer", "verdict")))
    return run


def gate_run_enqueue(*, gate_run_id: int) -> None:
    """Hand the run to the gpu queue. If the broker is down the run stays queued and the
    periodic reaper enqueues it again."""
    GateRun.objects.filter(pk=gate_run_id).update(enqueued_at=timezone.now())
    try:
        task_send(Task.GATE_RUN_EXECUTE, gate_run_id)
    except Exception:
        logger.exception("could not enqueue gate run %s; the reaper will retry", gate_run_id)


def gate_run_claim(*, gate_run_id: int, worker: str) -> GateRun | None:
    """Atomically take a queued run, or a running one whose worker stopped reporting."""
    now = timezone.now()
    claimed = (
        GateRun.objects.filter(pk=gate_run_id)
        .filter(Q(status=Status.QUEUED) | (Q(status=Status.RUNNING) & lease_lapsed(now=now)))
        .update(
            status=Status.RUNNING,
            worker=worker,
            heartbeat_at=now,
            started_at=Coalesce(F("started_at"), now),
            attempts=F("attempts") + 1,
        )
    )
    return (
        GateRun.objects.select_related("candidate", "baseline", "suite", "experiment").get(pk=gate_run_id)
        if claimed
        else None
    )


def gate_run_release(*, gate_run_id: int, worker: str, error: Reason | str = "") -> None:
    """Give a run back to the queue (before a retry of a transient failure). `error`, what failed,
    is kept as the run's error meanwhile, so the page says why it waits and a later give-up says what
    failed."""
    fields: dict[str, Any] = {"status": Status.QUEUED, "worker": ""}
    if error:
        fields.update(_error_fields(error))
    GateRun.objects.filter(pk=gate_run_id, status=Status.RUNNING, worker=worker).update(**fields)


def _error_fields(error: Reason | str) -> dict[str, Any]:
    """A run's error as stored: the English sentence and, for a reason, its JSON."""
    return {
        "error_message": reason_render(error, words=ENGLISH),
        "error_reason": error.to_json() if isinstance(error, Reason) else None,
    }


def _with_last_error(why: Reason, run: GateRun) -> Reason:
    last = gate_run_error(run=run)
    return why if last is None else reason(GateRunsCode.LAST_ERROR, reason=why, why=last)


def gate_run_error(*, run: GateRun) -> Reason | str | None:
    """Why the run ended in error or failed (or, queued again, what failed last): its reason, or the
    sentence a run from before reason codes stored; None when nothing failed."""
    if run.error_reason:
        return stored_reason_read(run.error_reason)
    return run.error_message or None


def gate_run_heartbeat(*, run: GateRun, progress: int, detail: dict | None = None) -> None:
    """Report the run's percentage and (when given) each layer's units done of total, what the
    worker does and the ETA, for the live page; raise ClaimLost when the run is no longer this
    worker's (taken over, cancelled). The stored percentage never goes down: a retry that has not
    yet caught up with the last attempt's figure leaves it."""
    fields: dict = {"progress": Greatest(F("progress"), progress), "heartbeat_at": timezone.now()}
    if detail is not None:
        fields["progress_detail"] = detail
    updated = _held(run).update(**fields)
    if not updated:
        raise ClaimLost(f"gate run {run.pk} is no longer held by {run.worker}")
    run.progress = max(run.progress, progress)


def _held(run: GateRun) -> QuerySet[GateRun]:
    """The run, while it is still running under this worker's claim."""
    return GateRun.objects.filter(pk=run.pk, status=Status.RUNNING, worker=run.worker)


def gate_run_park(*, run: GateRun, parked: RunParked, detail: dict) -> None:
    """Queue the run again without its gpu worker, parked on the set another worker attacks for it;
    the park is not an attempt (the reaper's attempt limit counts workers lost, not waits)."""
    waiting = {
        "step": Step.WAIT.value,
        "version": parked.version,
        "worker": parked.holder,
        "set": parked.set_id,
    }
    _held(run).update(
        status=Status.QUEUED,
        worker="",
        attempts=F("attempts") - 1,
        progress_detail={**detail, "activity": waiting},
        enqueued_at=timezone.now(),
    )
    logger.info("gate run %s parked: %s", run.pk, parked)


def gate_run_beat(*, run: GateRun) -> bool:
    """Renew the run's lease (its worker is alive, whatever the work in progress); False once the
    run is no longer this worker's."""
    return bool(_held(run).update(heartbeat_at=timezone.now()))


def gate_run_execute(*, gate_run_id: int, worker: str) -> GateRun | None:
    """Compute the layers the policy requires, in the registry's order (model layers, then traffic
    layers), skipping those a previous attempt already finished, then close the run."""
    run = gate_run_claim(gate_run_id=gate_run_id, worker=worker)
    if run is None:
        logger.info("gate run %s is not claimable (finished or held by a live worker)", gate_run_id)
        return None
    if run.attempts > settings.EVALHUB_GATE_RUN_MAX_ATTEMPTS:
        return gate_run_fail(
            gate_run_id=run.pk,
            status=Status.ERROR,
            reason=_with_last_error(reason(GateRunsCode.GAVE_UP_AFTER, n=run.attempts - 1), run),
        )
    stored = gate_policy_read(run.policy_config)
    if not stored.found.clean:
        # Queued under an older version: running it would judge by rules it did not ask for.
        return gate_run_fail(gate_run_id=run.pk, status=Status.ERROR, reason=_policy_unrunnable(stored.found))
    policy = stored.config
    baseline = [run.baseline] if run.baseline and policy.general.run_baseline else []
    finished = set(run.layers.exclude(verdict=GateRun.Verdict.PENDING).values_list("layer", flat=True))
    required = [layer for layer in gate_layers() if policy.requires(layer.name)]
    todo = [layer for layer in required if layer.name not in finished]
    items, versions = list(run.suite.items.all()), [run.candidate, *baseline]
    progress = Progress(
        totals={layer.name: layer.units(policy=policy, items=items, versions=versions) for layer in required},
        report=lambda percent, detail: gate_run_heartbeat(run=run, progress=percent, detail=detail),
        finished=finished,
    )
    ctx = LayerContext(run=run, policy=policy, items=items, versions=versions, progress=progress)
    serving = _serving_problems(run=run) if any(layer.kind == LayerKind.MODEL for layer in todo) else []
    try:
        with LeaseKeeper(beat=lambda: gate_run_beat(run=run), name=f"gate run {run.pk}"):
            for layer in todo:
                progress.begin(layer.name)
                if serving and layer.kind == LayerKind.MODEL:
                    layer_error_store(layer=layer, run=run, reasons=serving)
                    continue
                layer.run(ctx)
    except RunParked as parked:
        gate_run_park(run=run, parked=parked, detail=progress.detail())
        return None
    except BackendError as exc:
        if exc.transient:
            raise  # the task retries with backoff; stored work is kept
        return gate_run_fail(gate_run_id=run.pk, status=Status.FAILED, reason=exc.reason)
    with transaction.atomic():
        if (
            not GateRun.objects.select_for_update()
            .filter(pk=run.pk, status=Status.RUNNING, worker=worker)
            .exists()
        ):
            raise ClaimLost(f"gate run {run.pk} is no longer held by {worker}")
        return gate_run_finish(run=run)


def _policy_unrunnable(found: PolicyFindings) -> Reason:
    """Why a run queued under an older version is not run (its page lists each key and why)."""
    keys = sorted([*found.retired_keys, *found.invalid_keys])
    return reason(GateRunsCode.POLICY_UNRUNNABLE, keys=keys)


def _serving_problems(*, run: GateRun) -> list[Reason]:
    """Why the model layers would judge another model than the one that serves: a serving address of
    the candidate or the baseline that answers with another model's config hash. An address that does
    not answer is checked again when a canary starts and on the proxy's first call."""
    problems = []
    for version in (run.candidate, run.baseline):
        check = model_version_serving_verify(version=version) if version is not None else None
        if check is not None and check.mismatch and check.problem is not None:
            problems.append(reason(GateRunsCode.NOT_SERVING, why=check.problem))
    return problems


def gate_run_finish(*, run: GateRun) -> GateRun:
    """Combine the stored layers into the verdict and close the run."""
    policy = gate_policy_read(run.policy_config).config
    layer_verdicts = dict(run.layers.values_list("layer", "verdict"))
    verdict, reasons = gate_verdict(
        required_layers=policy.general.required_layers, layer_verdicts=layer_verdicts
    )
    run.status = Status.SUCCEEDED
    run.verdict = verdict
    run.verdict_reasons = reasons_to_json(reasons)
    # An earlier attempt's transient failure is no longer the story; a layer's error is.
    error = _error_fields(_layer_errors(run=run)) if verdict == GateRun.Verdict.ERROR else {}
    run.error_message, run.error_reason = error.get("error_message", ""), error.get("error_reason")
    run.progress = 100
    run.finished_at = timezone.now()
    run.save(
        update_fields=[
            "status",
            "verdict",
            "verdict_reasons",
            "error_message",
            "error_reason",
            "progress",
            "finished_at",
        ]
    )
    audit_record(
        actor=SystemActor(f"worker {run.worker}"),
        action=AuditAction.GATE_RUN_FINISH,
        target=run,
        after={"verdict": verdict, "reasons": run.verdict_reasons},
    )
    _candidate_settle(run=run)
    if not run.policy_overrides and all(
        layer_verdicts.get(name) == GateRun.Verdict.PASS for name in OFFLINE_LAYERS
    ):
        # Evidence for a canary to go above its ungated share (a weakened gate is none).
        model_version_offline_gate_record(version=run.candidate, gate_run_id=run.pk, actor=GATE)
    _verdict_announce(run=run, layer_verdicts=layer_verdicts)
    return run


def _layer_errors(*, run: GateRun) -> Reason:
    """What failed in the layers that ended in error (their stored reasons), or why none did: a
    required layer with no result, or one left pending."""
    errors = run.layers.filter(verdict=GateRun.Verdict.ERROR).order_by("id")
    parts = [
        reason(
            GateRunsCode.LAYER_ERROR,
            layer=Term(row.layer),
            why=_stored(row.reasons) if row.reasons else reason(GateRunsCode.NO_REASON),
        )
        for row in errors
    ]
    return sentences(parts) if parts else _stored(run.verdict_reasons)


def _stored(values: list[Any]) -> Reason:
    return sentences([stored_reason_read(value) for value in values])


def _verdict_announce(*, run: GateRun, layer_verdicts: dict[str, str]) -> None:
    webhook_send(
        event=WebhookEvent.GATE_RUN_FINISHED,
        payload={
            "gate_run": run.pk,
            "candidate": run.candidate.ref,
            "baseline": run.baseline.ref if run.baseline else None,
            "status": run.status,
            "verdict": run.verdict,
            # English for any receiver, with the codes a receiver can act on.
            "reasons": [reason_payload(value, words=ENGLISH) for value in run.verdict_reasons],
            "layers": layer_verdicts,
        },
    )


def gate_run_fail(*, gate_run_id: int, status: str, reason: Reason | str) -> GateRun:
    """End a run in `status` (error, failed) for `reason` (a sentence: an exception's own text)."""
    with transaction.atomic():
        run = GateRun.objects.select_for_update().get(pk=gate_run_id)
        if run.is_finished:
            return run
        run.status = status
        run.verdict = GateRun.Verdict.ERROR
        run.verdict_reasons = reasons_to_json([reason])
        error = _error_fields(reason)
        run.error_message, run.error_reason = error["error_message"], error["error_reason"]
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "verdict", "verdict_reasons", *error, "finished_at"])
        audit_record(
            actor=GATE,
            action=AuditAction.GATE_RUN_FAIL,
            target=run,
            after={"status": status, "error_reason": run.error_reason},
            reason=run.error_message,  # in English, as a reason written by a person reads
        )
        _candidate_settle(run=run)
        _verdict_announce(run=run, layer_verdicts=dict(run.layers.values_list("layer", "verdict")))
    return run


def _candidate_settle(*, run: GateRun) -> None:
    """Move the candidate out of `evaluating` once no other run of it is active."""
    candidate = ModelVersion.objects.get(pk=run.candidate_id)
    if candidate.status != VersionStatus.EVALUATING:
        return
    if GateRun.objects.filter(candidate=candidate, status__in=ACTIVE).exclude(pk=run.pk).exists():
        return
    to_status = {
        GateRun.Verdict.PASS: VersionStatus.GATE_PASSED,
        GateRun.Verdict.FAIL: VersionStatus.GATE_FAILED,
    }.get(run.verdict, VersionStatus.REGISTERED)
    model_version_transition(
        version=candidate,
        to_status=to_status,
        actor=GATE,
        reason=f"gate run {run.pk}: {run.verdict}",
    )


def gate_run_reap_stale(*, now=None) -> dict[str, int]:
    """Recover runs whose worker died: requeue them, or end them in `error` after too many
    attempts. Queued runs that no worker picked up (a lost message) are enqueued again."""
    now = now or timezone.now()
    stale_before = lease_stale_before(now=now)
    counts = {"requeued": 0, "errored": 0, "reenqueued": 0}
    for run in GateRun.objects.filter(lease_lapsed(now=now), status=Status.RUNNING):
        if run.attempts >= settings.EVALHUB_GATE_RUN_MAX_ATTEMPTS:
            stopped = reason(
                GateRunsCode.STOPPED_REPORTING,
                worker=run.worker or "?",
                at=f"{run.heartbeat_at:%Y-%m-%d %H:%M:%S}",
                n=run.attempts,
            )
            gate_run_fail(gate_run_id=run.pk, status=Status.ERROR, reason=_with_last_error(stopped, run))
            counts["errored"] += 1
            continue
        requeued = GateRun.objects.filter(lease_lapsed(now=now), pk=run.pk, status=Status.RUNNING).update(
            status=Status.QUEUED, worker=""
        )
        if requeued:
            audit_record(
                actor=SystemActor("reaper"),
                action=AuditAction.GATE_RUN_REQUEUE,
                target=run,
                reason=f"worker {run.worker or '?'} stopped reporting",
            )
            gate_run_enqueue(gate_run_id=run.pk)
            counts["requeued"] += 1
    lost = Q(enqueued_at__lt=stale_before) | Q(enqueued_at__isnull=True, created_at__lt=stale_before)
    for run in GateRun.objects.filter(lost, status=Status.QUEUED):
        gate_run_enqueue(gate_run_id=run.pk)
        counts["reenqueued"] += 1
    return counts
