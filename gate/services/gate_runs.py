"""Gate runs: start one, let a worker claim and execute it, finish or fail it, and recover
runs whose worker died. Model work is done through `engines.backends`, imported lazily so the
web process never loads torch."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from canary.selectors import experiment_for_gate
from engines.backends.base import BackendError
from gate.judges.verdict import gate_verdict
from gate.layers.base import ClaimLost, LayerContext, Progress
from gate.layers.registry import LAYERS, gate_policy_parse
from gate.models import GateRun
from gate.services.horizons import plan_overrides_check
from gate.services.policies import gate_policy_resolve
from registry.actors import Actor, SystemActor, actor_name, actor_require_role, actor_user
from registry.dispatch import Task, task_send
from registry.errors import ApplicationError
from registry.models import EvalSuite, ModelVersion
from registry.roles import WRITE_ROLES
from registry.services.audit import audit_record
from registry.services.suites import eval_suite_lock
from registry.services.versions import model_version_offline_gate_record, model_version_transition
from registry.services.webhooks import webhook_send

logger = logging.getLogger(__name__)
Status = GateRun.Status
VersionStatus = ModelVersion.Status
ACTIVE = (Status.QUEUED, Status.RUNNING)
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
            "A version cannot be its own baseline.", fields={"baseline": ["must differ from the candidate"]}
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
            action="gate_run.start",
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
    stale_before = now - timedelta(seconds=settings.EVALHUB_GATE_RUN_STALE_SECONDS)
    claimed = (
        GateRun.objects.filter(pk=gate_run_id)
        .filter(Q(status=Status.QUEUED) | Q(status=Status.RUNNING, heartbeat_at__lt=stale_before))
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


def gate_run_release(*, gate_run_id: int, worker: str) -> None:
    """Give a run back to the queue (before a retry of a transient failure)."""
    GateRun.objects.filter(pk=gate_run_id, status=Status.RUNNING, worker=worker).update(
        status=Status.QUEUED, worker=""
    )


def gate_run_heartbeat(*, run: GateRun, progress: int, detail: dict | None = None) -> None:
    """Report that the worker is alive, with the run's percentage and (when given) each layer's
    units done of total and the ETA, for the live page."""
    fields: dict = {"progress": progress, "heartbeat_at": timezone.now()}
    if detail is not None:
        fields["progress_detail"] = detail
    updated = GateRun.objects.filter(pk=run.pk, status=Status.RUNNING, worker=run.worker).update(**fields)
    if not updated:
        raise ClaimLost(f"gate run {run.pk} is no longer held by {run.worker}")
    run.progress = progress


def gate_run_execute(*, gate_run_id: int, worker: str) -> GateRun | None:
    """Compute the layers the policy requires, in the registry's order (model layers, then traffic
    layers), skipping those a previous attempt already finished, then close the run."""
    run = gate_run_claim(gate_run_id=gate_run_id, worker=worker)
    if run is None:
        logger.info("gate run %s is not claimable (finished or held by a live worker)", gate_run_id)
        return None
    if run.attempts > settings.EVALHUB_GATE_RUN_MAX_ATTEMPTS:
        return gate_run_fail(
            gate_run_id=run.pk, status=Status.ERROR, reason=f"gave up after {run.attempts - 1} attempts"
        )
    policy = gate_policy_parse(run.policy_config)
    baseline = [run.baseline] if run.baseline and policy.general.run_baseline else []
    finished = set(run.layers.exclude(verdict=GateRun.Verdict.PENDING).values_list("layer", flat=True))
    todo = [layer for layer in LAYERS if policy.requires(layer.name) and layer.name not in finished]
    items, versions = list(run.suite.items.all()), [run.candidate, *baseline]
    progress = Progress(
        totals={layer.name: layer.units(policy=policy, items=items, versions=versions) for layer in todo},
        report=lambda percent, detail: gate_run_heartbeat(run=run, progress=percent, detail=detail),
    )
    ctx = LayerContext(run=run, policy=policy, items=items, versions=versions, progress=progress)
    try:
        for layer in todo:
            progress.begin(layer.name)
            gate_run_heartbeat(run=run, progress=run.progress, detail=progress.detail())
            layer.run(ctx)
    except BackendError as exc:
        if exc.transient:
            raise  # the task retries with backoff; stored work is kept
        return gate_run_fail(gate_run_id=run.pk, status=Status.FAILED, reason=str(exc))
    with transaction.atomic():
        if (
            not GateRun.objects.select_for_update()
            .filter(pk=run.pk, status=Status.RUNNING, worker=worker)
            .exists()
        ):
            raise ClaimLost(f"gate run {run.pk} is no longer held by {worker}")
        return gate_run_finish(run=run)


def gate_run_finish(*, run: GateRun) -> GateRun:
    """Combine the stored layers into the verdict and close the run."""
    policy = gate_policy_parse(run.policy_config)
    layer_verdicts = dict(run.layers.values_list("layer", "verdict"))
    verdict, reasons = gate_verdict(
        required_layers=policy.general.required_layers, layer_verdicts=layer_verdicts
    )
    run.status = Status.SUCCEEDED
    run.verdict = verdict
    run.verdict_reasons = reasons
    run.progress = 100
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "verdict", "verdict_reasons", "progress", "finished_at"])
    audit_record(
        actor=SystemActor(f"worker {run.worker}"),
        action="gate_run.finish",
        target=run,
        after={"verdict": verdict, "reasons": reasons},
    )
    _candidate_settle(run=run)
    if not run.policy_overrides and all(
        layer_verdicts.get(name) == GateRun.Verdict.PASS for name in OFFLINE_LAYERS
    ):
        # Evidence for a canary to go above its ungated share (a weakened gate is none).
        model_version_offline_gate_record(version=run.candidate, gate_run_id=run.pk, actor=GATE)
    _verdict_announce(run=run, layer_verdicts=layer_verdicts)
    return run


def _verdict_announce(*, run: GateRun, layer_verdicts: dict[str, str]) -> None:
    webhook_send(
        event="gate_run.finished",
        payload={
            "gate_run": run.pk,
            "candidate": run.candidate.ref,
            "baseline": run.baseline.ref if run.baseline else None,
            "status": run.status,
            "verdict": run.verdict,
            "reasons": run.verdict_reasons,
            "layers": layer_verdicts,
        },
    )


def gate_run_fail(*, gate_run_id: int, status: str, reason: str) -> GateRun:
    with transaction.atomic():
        run = GateRun.objects.select_for_update().get(pk=gate_run_id)
        if run.is_finished:
            return run
        run.status = status
        run.verdict = GateRun.Verdict.ERROR
        run.verdict_reasons = [reason]
        run.error_message = reason
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "verdict", "verdict_reasons", "error_message", "finished_at"])
        audit_record(
            actor=GATE,
            action="gate_run.fail",
            target=run,
            after={"status": status},
            reason=reason,
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
    stale_before = now - timedelta(seconds=settings.EVALHUB_GATE_RUN_STALE_SECONDS)
    counts = {"requeued": 0, "errored": 0, "reenqueued": 0}
    for run in GateRun.objects.filter(status=Status.RUNNING, heartbeat_at__lt=stale_before):
        if run.attempts >= settings.EVALHUB_GATE_RUN_MAX_ATTEMPTS:
            gate_run_fail(
                gate_run_id=run.pk,
                status=Status.ERROR,
                reason=f"worker {run.worker or '?'} stopped reporting at "
                f"{run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC after {run.attempts} attempt(s)",
            )
            counts["errored"] += 1
            continue
        requeued = GateRun.objects.filter(
            pk=run.pk, status=Status.RUNNING, heartbeat_at__lt=stale_before
        ).update(status=Status.QUEUED, worker="")
        if requeued:
            audit_record(
                actor=SystemActor("reaper"),
                action="gate_run.requeue",
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
