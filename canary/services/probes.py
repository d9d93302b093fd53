"""Stress probes: import probe sets, run every probe through both versions of an experiment, and
compare the paired results per weakness with an exact McNemar test.

A probe run asks each version at its serving URL (as live traffic reaches it), reads the label
from the answer (the `openai` backend's `label_regex`; a leading "[label]" by default), and
records the question and answer as turn events marked `probe`, so they never count as user
behaviour. Runs on the `cpu` queue (HTTP calls only), on a beat schedule and on demand.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from canary.models import Experiment, Probe, ProbeResult, ProbeRun, ProbeSet, TurnEvent
from engines.reasons import gettext_noop, reason, wordings_register
from engines.routing import BASELINE, CANDIDATE
from registry.actors import Actor, actor_require_role
from registry.dispatch import Task, task_enqueue
from registry.errors import ApplicationError, CommonCode, NotFoundError
from registry.models import AuditAction, ModelVersion
from registry.outbound import outbound_policy
from registry.roles import RELEASE_MANAGER, WRITE_ROLES
from registry.services.audit import audit_record
from registry.services.versions import (
    model_version_api_key,
    model_version_serving_model,
    model_version_serving_url,
)

SIGNIFICANCE = 0.05

if TYPE_CHECKING:  # the backends load only on the worker that runs the probes
    from engines.backends.base import Prediction


class ProbesCode(StrEnum):
    NAME_TAKEN = "probes.name_taken"
    TAKEN = "probes.taken"
    EMPTY_SET = "probes.empty_set"
    EMPTY = "probes.empty"
    UNREADABLE = "probes.unreadable"
    NO_SERVING_URL = "probes.no_serving_url"
    NO_SUCH_SET = "probes.no_such_set"


wordings_register(
    {
        ProbesCode.NAME_TAKEN: gettext_noop("A probe set named '{name}' exists."),
        ProbesCode.TAKEN: gettext_noop("taken"),
        ProbesCode.EMPTY_SET: gettext_noop("A probe set needs at least one probe."),
        ProbesCode.EMPTY: gettext_noop("empty"),
        ProbesCode.UNREADABLE: gettext_noop("The probe set could not be read: {problem}"),
        ProbesCode.NO_SERVING_URL: gettext_noop("{ref} has no serving URL."),
        ProbesCode.NO_SUCH_SET: gettext_noop("No probe set for family '{family}' by that name."),
    }
)


def probe_set_import(
    *, name: str, family: str, probes: list, actor: Actor, description: str = "", is_demo: bool = False
) -> ProbeSet:
    """A new probe set from `canary.probes_gen.ProbeSpec`s (generated, or parsed from JSONL)."""
    actor_require_role(actor, WRITE_ROLES, action="import a probe set")
    if ProbeSet.objects.filter(name=name).exists():
        raise ApplicationError(
            reason(ProbesCode.NAME_TAKEN, name=name),
            code="conflict",
            fields={"name": [reason(ProbesCode.TAKEN)]},
            status_code=409,
        )
    if not probes:
        raise ApplicationError(reason(ProbesCode.EMPTY_SET), fields={"probes": [reason(ProbesCode.EMPTY)]})
    with transaction.atomic():
        probe_set = ProbeSet.objects.create(
            name=name, family=family, description=description, is_demo=is_demo
        )
        Probe.objects.bulk_create(
            [
                Probe(
                    probe_set=probe_set,
                    external_id=p.id,
                    weakness=p.weakness,
                    input=p.input,
                    expected_label=p.expected_label,
                    language=p.language,
                    metadata=p.metadata,
                )
                for p in probes
            ]
        )
        audit_record(
            actor=actor, action=AuditAction.PROBE_SET_IMPORT, target=probe_set, after={"probes": len(probes)}
        )
    return probe_set


def probe_set_import_jsonl(
    *, name: str, family: str, content: bytes, actor, description: str = ""
) -> ProbeSet:
    """A probe set from a JSONL file (`canary.probes_gen.probes_jsonl_parse`); errors name the line
    and field, e.g. `file: line 3.expected_label`."""
    from canary.probes_gen import ProbeFormatError, probes_jsonl_parse

    try:
        probes = probes_jsonl_parse(content=content, max_depth=settings.EVALHUB_JSON_MAX_DEPTH)
    except ProbeFormatError as exc:
        where = f"file: line {exc.line}" + (f".{exc.field}" if exc.field else "")
        raise ApplicationError(
            reason(ProbesCode.UNREADABLE, problem=exc.reason),
            code="invalid_probes",
            fields={where: [exc.message]},
        ) from None
    return probe_set_import(name=name, family=family, probes=probes, actor=actor, description=description)


def _backend_for(version: ModelVersion):
    """The version as live traffic reaches it: an OpenAI-compatible client at its serving URL."""
    from engines.backends import backend_build

    url = model_version_serving_url(version=version)
    if not url:
        raise ApplicationError(
            reason(ProbesCode.NO_SERVING_URL, ref=version.ref),
            fields={"serving_url": [reason(CommonCode.REQUIRED)]},
        )
    # An openai backend keeps its own settings (label_regex, system prompt ...) at the serving URL.
    config = version.backend_config if version.backend_kind == ModelVersion.BackendKind.OPENAI else {}
    config = {**config, "base_url": url, "model": model_version_serving_model(version=version)}
    return backend_build(
        kind="openai",
        config=config,
        api_key=model_version_api_key(version=version),
        outbound=outbound_policy(),
        api_key_env_prefix=settings.EVALHUB_BACKEND_SECRET_ENV_PREFIX,
    )


def _probe_turns(
    *, run: ProbeRun, probe: Probe, arm: str, version: ModelVersion, prediction: Prediction, at: datetime
) -> list[TurnEvent]:
    """A probe and one version's answer as the two turns of a probe session (never user traffic)."""
    common = {
        "experiment": run.experiment,
        "session_id": f"probe-run-{run.pk}-{probe.external_id}"[:200],
        "arm": arm,
        "source": TurnEvent.Source.PROBE,
        "occurred_at": at,
    }
    return [
        TurnEvent(
            **common,
            event_id=f"probe-{run.pk}-{probe.pk}-{arm}-q",
            turn_index=0,
            role="user",
            text=probe.input,
        ),
        TurnEvent(
            **common,
            event_id=f"probe-{run.pk}-{probe.pk}-{arm}-a",
            turn_index=1,
            role="assistant",
            text=prediction.text,
            version=version,
            latency_ms=prediction.latency_ms,
            error=prediction.error or "",
        ),
    ]


def probe_run_execute(*, experiment: Experiment, probe_set: ProbeSet) -> ProbeRun:
    """Every probe through both versions; results paired per probe; the report per weakness."""
    from engines.backends import BackendError

    run = ProbeRun.objects.create(experiment=experiment, probe_set=probe_set)
    probes = list(probe_set.probes.order_by("pk"))
    try:
        results, events = [], []
        for arm, version in ((BASELINE, experiment.baseline), (CANDIDATE, experiment.candidate)):
            predictions = _backend_for(version).predict([p.input for p in probes])
            now = timezone.now()
            for probe, prediction in zip(probes, predictions, strict=True):
                correct = prediction.error is None and prediction.label == probe.expected_label
                results.append(
                    ProbeResult(
                        probe_run=run,
                        probe=probe,
                        arm=arm,
                        version=version,
                        output_label=prediction.label or "",
                        output_text=prediction.text,
                        correct=correct,
                        latency_ms=prediction.latency_ms,
                        error=prediction.error or "",
                    )
                )
                events += _probe_turns(
                    run=run, probe=probe, arm=arm, version=version, prediction=prediction, at=now
                )
    except (BackendError, ApplicationError) as exc:  # a version down, or not served
        ProbeRun.objects.filter(pk=run.pk).update(
            status=ProbeRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
        )
        run.refresh_from_db()
        return run
    with transaction.atomic():
        ProbeResult.objects.bulk_create(results, batch_size=1000)
        TurnEvent.objects.bulk_create(events, batch_size=1000, ignore_conflicts=True)
        run.report = probe_report_build(probes=probes, results=results)
        run.status, run.finished_at = ProbeRun.Status.SUCCEEDED, timezone.now()
        run.save(update_fields=["report", "status", "finished_at"])
    return run


def probe_report_build(*, probes: list[Probe], results: list[ProbeResult]) -> dict:
    """Per weakness and overall: pass rate per arm and the paired McNemar comparison."""
    from engines.stats.comparisons import probes_compare  # scipy: not on the web path, which imports sets

    outcome = {(r.probe_id, r.arm): r.correct for r in results}
    cells: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # both, only cand., only base., neither
    for probe in probes:
        candidate, baseline = outcome[(probe.pk, CANDIDATE)], outcome[(probe.pk, BASELINE)]
        index = 0 if candidate and baseline else 1 if candidate else 2 if baseline else 3
        for key in (probe.weakness, "all"):
            cells[key][index] += 1
    report = {}
    for key, (both, only_candidate, only_baseline, neither) in sorted(cells.items()):
        result = probes_compare(
            only_candidate_correct=only_candidate,
            only_baseline_correct=only_baseline,
            both_correct=both,
            neither_correct=neither,
            min_pairs=1,
            alpha=SIGNIFICANCE,
        )
        p = result.p_value
        if p is not None and p < SIGNIFICANCE and only_candidate > only_baseline:
            finding = "candidate fixes this weakness"
        elif p is not None and p < SIGNIFICANCE and only_baseline > only_candidate:
            finding = "candidate regresses"
        else:
            finding = "no clear difference"
        pairs = both + only_candidate + only_baseline + neither
        report[key] = {
            "pairs": pairs,
            "both_correct": both,
            "neither_correct": neither,
            "baseline_rate": (both + only_baseline) / pairs,
            "candidate_rate": (both + only_candidate) / pairs,
            "only_candidate_correct": only_candidate,
            "only_baseline_correct": only_baseline,
            "mcnemar_p": p,
            "finding": finding,
        }
    return report


def probe_runs_due() -> list[ProbeRun]:
    """The beat's job: every probe set of each running experiment's family, through both versions."""
    runs = []
    for experiment in Experiment.objects.filter(status=Experiment.Status.RUNNING).select_related(
        "baseline", "candidate"
    ):
        for probe_set in ProbeSet.objects.filter(family=experiment.family):
            runs.append(probe_run_execute(experiment=experiment, probe_set=probe_set))
    return runs


def probe_runs_request(
    *, experiment: Experiment, actor: Actor, probe_set_name: str | None = None
) -> list[ProbeSet]:
    """Queue a probe run of the family's sets (or the one named) through `experiment`'s versions,
    on a cpu worker once this transaction commits (release managers)."""
    actor_require_role(actor, frozenset({RELEASE_MANAGER}), action="run probes now")
    sets = list(ProbeSet.objects.filter(family=experiment.family).order_by("name"))
    if probe_set_name is not None:
        sets = [s for s in sets if s.name == probe_set_name]
    if not sets:
        raise NotFoundError(reason(ProbesCode.NO_SUCH_SET, family=experiment.family), field="probe_set")
    for probe_set in sets:
        task_enqueue(Task.PROBE_RUNS, experiment.pk, probe_set.pk)
    return sets


def probe_run_execute_by_id(*, experiment_id: int, probe_set_id: int) -> ProbeRun:
    """The task's entry: `probe_run_execute` on the rows behind the ids."""
    return probe_run_execute(
        experiment=Experiment.objects.select_related("baseline", "candidate").get(pk=experiment_id),
        probe_set=ProbeSet.objects.get(pk=probe_set_id),
    )
