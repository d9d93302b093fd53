"""Gate runs: start one, let a worker claim and execute it, finish or fail it, and recover
runs whose worker died. Model work is done through `workers.backends`, imported lazily so the
web process never loads torch."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from evalhub.errors import ApplicationError
from evalhub.gate.clean_accuracy import ItemOutcome, clean_accuracy_judge
from evalhub.gate.policy import GatePolicyConfig, PolicyError, gate_policy_parse
from evalhub.gate.scoring import answer_correct
from evalhub.gate.verdict import gate_verdict
from evalhub.models import EvalItem, EvalSuite, GatePolicy, GateRun, LayerResult, ModelVersion, SampleResult
from evalhub.services.audit import audit_record
from evalhub.services.versions import model_version_transition

logger = logging.getLogger(__name__)
Status = GateRun.Status
VersionStatus = ModelVersion.Status
ACTIVE = (Status.QUEUED, Status.RUNNING)


class ClaimLost(Exception):
    """Another worker (or the reaper) took the run over; stop without writing."""


def gate_policy_resolve(*, name: str | None, overrides: dict | None) -> tuple[GatePolicy, GatePolicyConfig]:
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
) -> GateRun:
    baseline = baseline or candidate.baseline
    if baseline is not None and baseline.pk == candidate.pk:
        raise ApplicationError(
            "A version cannot be its own baseline.", fields={"baseline": ["must differ from the candidate"]}
        )
    policy, config = gate_policy_resolve(name=policy_name, overrides=policy_overrides)
    with transaction.atomic():
        run = GateRun.objects.create(
            candidate=candidate,
            baseline=baseline,
            suite=suite,
            policy=policy,
            policy_config=config.as_dict(),
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
        )
        audit_record(
            actor=actor,
            action="gate_run.start",
            target=run,
            after={
                "candidate": candidate.ref,
                "baseline": baseline.ref if baseline else None,
                "suite": str(suite),
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
    from workers.tasks import gate_run_execute_task

    GateRun.objects.filter(pk=gate_run_id).update(enqueued_at=timezone.now())
    try:
        gate_run_execute_task.apply_async(args=[gate_run_id])
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
        GateRun.objects.select_related("candidate", "baseline", "suite").get(pk=gate_run_id)
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


def _version_outputs(
    *, run: GateRun, version: ModelVersion, items: list[EvalItem], batch_size: int, on_batch
) -> dict:
    from workers.backends import backend_cached, backend_device

    key = (version.pk, version.backend_kind, repr(sorted(version.backend_config.items())), version.api_key)
    backend = backend_cached(
        key=key, kind=version.backend_kind, config=version.backend_config, api_key=version.api_key
    )
    predictions = []
    started = time.perf_counter()
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        predictions.extend(backend.predict([item.input for item in batch]))
        on_batch(len(batch))
    seconds = time.perf_counter() - started
    return {"predictions": predictions, "seconds": seconds, "device": backend_device(version.backend_kind)}


def gate_run_execute(*, gate_run_id: int, worker: str) -> GateRun | None:
    """Run the candidate (and baseline) on the suite and store the clean-accuracy layer."""
    from workers.backends import BackendError

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
    total = len(items) * len(versions)
    done = 0

    def on_batch(count: int) -> None:
        nonlocal done
        done += count
        gate_run_heartbeat(run=run, progress=min(99, int(100 * done / total)))

    layer_started = time.perf_counter()
    outputs = {}
    for version in versions:
        try:
            outputs[version.pk] = _version_outputs(
                run=run, version=version, items=items, batch_size=policy.batch_size, on_batch=on_batch
            )
        except BackendError as exc:
            if exc.transient:
                raise  # the task retries with backoff
            return gate_run_fail(gate_run_id=run.pk, status=Status.FAILED, reason=f"{version.ref}: {exc}")
    return _clean_accuracy_store(
        run=run, policy=policy, items=items, outputs=outputs, seconds=time.perf_counter() - layer_started
    )


def _outcomes(items: list[EvalItem], predictions) -> list[ItemOutcome]:
    return [
        ItemOutcome(
            item_id=item.external_id,
            tags=tuple(item.tags),
            language=item.language,
            correct=p.error is None
            and answer_correct(
                expected_label=item.label, reference=item.reference, label=p.label, text=p.text
            ),
            errored=p.error is not None,
        )
        for item, p in zip(items, predictions, strict=True)
    ]


def _clean_accuracy_store(
    *, run: GateRun, policy: GatePolicyConfig, items, outputs: dict, seconds: float
) -> GateRun:
    candidate_outcomes = _outcomes(items, outputs[run.candidate_id]["predictions"])
    baseline_outcomes = (
        _outcomes(items, outputs[run.baseline_id]["predictions"]) if run.baseline_id in outputs else None
    )
    result = clean_accuracy_judge(candidate=candidate_outcomes, baseline=baseline_outcomes, policy=policy)

    def side(version: ModelVersion, summary) -> dict:
        out = outputs[version.pk]
        return {
            "version": version.ref,
            **summary.as_dict(),
            "seconds": out["seconds"],
            "items_per_second": len(items) / out["seconds"] if out["seconds"] else None,
            "device": out["device"],
        }

    details = {
        "candidate": side(run.candidate, result.candidate),
        "suite": str(run.suite),
        "suite_hash": run.suite.content_hash,
    }
    if result.baseline is not None:
        details["baseline"] = side(run.baseline, result.baseline)
        details["difference"] = result.candidate.accuracy - result.baseline.accuracy
    with transaction.atomic():
        if not GateRun.objects.filter(pk=run.pk, status=Status.RUNNING, worker=run.worker).exists():
            raise ClaimLost(f"gate run {run.pk} is no longer held by {run.worker}")
        layer = LayerResult.objects.create(
            gate_run=run,
            layer=LayerResult.Layer.CLEAN_ACCURACY,
            verdict=result.verdict,
            metric="accuracy",
            estimate=result.candidate.accuracy,
            ci_low=result.candidate.ci_low,
            ci_high=result.candidate.ci_high,
            threshold=policy.clean_accuracy_min,
            reasons=result.reasons,
            details=details,
            wall_seconds=seconds,
            device=outputs[run.candidate_id]["device"],
        )
        SampleResult.objects.bulk_create(
            [
                SampleResult(
                    layer_result=layer,
                    version_id=version_id,
                    item=item,
                    input_text="",  # the item's own input
                    output_label=p.label or "",
                    output_text=p.text,
                    correct=outcome.correct,
                    latency_ms=p.latency_ms,
                    error=p.error or "",
                )
                for version_id, outcomes in [
                    (run.candidate_id, candidate_outcomes),
                    (run.baseline_id, baseline_outcomes),
                ]
                if outcomes is not None
                for item, p, outcome in zip(items, outputs[version_id]["predictions"], outcomes, strict=True)
            ],
            batch_size=500,
        )
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
    return run


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
