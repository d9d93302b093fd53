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

from gate.judges.verdict import gate_verdict
from gate.models import GatePolicy, GateRun, LayerResult
from gate.policy import GatePolicyConfig, PolicyError, gate_policy_parse
from gate.services.claims import ClaimLost
from registry.dispatch import Task, task_send
from registry.errors import ApplicationError
from registry.models import EvalSuite, ModelVersion
from registry.services.audit import audit_record
from registry.services.suites import eval_suite_lock
from registry.services.versions import model_version_transition
from registry.services.webhooks import webhook_send

logger = logging.getLogger(__name__)
Status = GateRun.Status
VersionStatus = ModelVersion.Status
ACTIVE = (Status.QUEUED, Status.RUNNING)


def gate_policy_resolve(
    *, name: str | None, overrides: dict | None, family: str | None = None
) -> tuple[GatePolicy, GatePolicyConfig]:
    """The named policy; unnamed: the policy named as the family when there is one, else `default`."""
    if not name and family and GatePolicy.objects.filter(name=family).exists():
        name = family
    name = name or "default"
    if name == "default":
        policy, _ = GatePolicy.objects.get_or_create(
            name="default", defaults={"description": "Built-in defaults."}
        )
    else:
        policy = GatePolicy.objects.filter(name=name).first()
        if policy is None:
            raise ApplicationError(
                f"No gate policy named {name!r}.", code="not_found", fields={"policy": ["unknown policy"]}
            )
    if overrides is not None and not isinstance(overrides, dict):
        raise ApplicationError(
            "policy_overrides must be an object.", fields={"policy_overrides": ["must be an object"]}
        )
    try:
        config = gate_policy_parse({**policy.config, **(overrides or {})})
    except PolicyError as exc:
        raise ApplicationError(
            f"Invalid policy: {exc}", fields={f"policy_overrides.{exc.field}": [exc.message]}
        ) from None
    return policy, config


def gate_run_start(
    *,
    candidate: ModelVersion,
    suite: EvalSuite,
    actor,
    baseline: ModelVersion | None = None,
    policy_name: str | None = None,
    policy_overrides: dict | None = None,
    experiment_name: str | None = None,
) -> GateRun:
    from gate.services.traffic_layers import gate_experiment_find

    baseline = baseline or candidate.baseline
    if baseline is not None and baseline.pk == candidate.pk:
        raise ApplicationError(
            "A version cannot be its own baseline.", fields={"baseline": ["must differ from the candidate"]}
        )
    policy, config = gate_policy_resolve(
        name=policy_name, overrides=policy_overrides, family=candidate.family
    )
    experiment = gate_experiment_find(candidate=candidate, baseline=baseline, name=experiment_name)
    with transaction.atomic():
        run = GateRun.objects.create(
            candidate=candidate,
            baseline=baseline,
            suite=suite,
            policy=policy,
            policy_config=config.as_dict(),
            policy_overrides=policy_overrides or {},
            experiment=experiment,
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
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
                actor=actor,
                reason=f"gate run {run.pk}",
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


def gate_run_heartbeat(*, run: GateRun, progress: int) -> None:
    updated = GateRun.objects.filter(pk=run.pk, status=Status.RUNNING, worker=run.worker).update(
        progress=progress, heartbeat_at=timezone.now()
    )
    if not updated:
        raise ClaimLost(f"gate run {run.pk} is no longer held by {run.worker}")
    run.progress = progress


def gate_run_execute(*, gate_run_id: int, worker: str) -> GateRun | None:
    """Compute the layers the policy requires (model layers: clean accuracy, robustness; traffic
    layers: follow-up rate, business value), skipping those a previous attempt already stored,
    then close the run."""
    from engines.backends import BackendError
    from gate.services import model_layers as gate_layers
    from gate.services import traffic_layers as gate_traffic

    run = gate_run_claim(gate_run_id=gate_run_id, worker=worker)
    if run is None:
        logger.info("gate run %s is not claimable (finished or held by a live worker)", gate_run_id)
        return None
    if run.attempts > settings.EVALHUB_GATE_RUN_MAX_ATTEMPTS:
        return gate_run_fail(
            gate_run_id=run.pk, status=Status.ERROR, reason=f"gave up after {run.attempts - 1} attempts"
        )
    policy = gate_policy_parse(run.policy_config)
    items = list(run.suite.items.all())
    versions = [run.candidate] + ([run.baseline] if run.baseline and policy.run_baseline else [])
    finished = set(run.layers.exclude(verdict=GateRun.Verdict.PENDING).values_list("layer", flat=True))
    runners = {
        LayerResult.Layer.CLEAN_ACCURACY: (gate_layers.clean_accuracy_layer_run, len(items) * len(versions)),
        LayerResult.Layer.ROBUSTNESS: (
            gate_layers.robustness_layer_run,
            gate_layers.robustness_units(policy=policy, items=items, versions=versions),
        ),
    }
    todo = [layer for layer in runners if layer in policy.required_layers and layer not in finished]
    progress = gate_layers.Progress(
        total=sum(runners[layer][1] for layer in todo),
        report=lambda percent: gate_run_heartbeat(run=run, progress=percent),
    )
    try:
        for layer in todo:
            runners[layer][0](run=run, policy=policy, items=items, versions=versions, progress=progress)
        traffic = {
            LayerResult.Layer.FOLLOW_UP_RATE: gate_traffic.follow_up_rate_layer_run,
            LayerResult.Layer.BUSINESS_VALUE: gate_traffic.business_value_layer_run,
        }
        for layer, layer_run in traffic.items():
            if layer in policy.required_layers and layer not in finished:
                layer_run(run=run, policy=policy)
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
    verdict, reasons = gate_verdict(required_layers=policy.required_layers, layer_verdicts=layer_verdicts)
    run.status = Status.SUCCEEDED
    run.verdict = verdict
    run.verdict_reasons = reasons
    run.progress = 100
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "verdict", "verdict_reasons", "progress", "finished_at"])
    audit_record(
        actor=None,
        system=f"worker {run.worker}",
        action="gate_run.finish",
        target=run,
        after={"verdict": verdict, "reasons": reasons},
    )
    _candidate_settle(run=run)
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
            actor=None,
            system="gate",
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
        actor=None,
        system="gate",
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
                actor=None,
                system="reaper",
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
