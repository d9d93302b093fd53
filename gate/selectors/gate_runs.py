from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from django.db.models import QuerySet

from engines.reasons import gettext_noop, reason, wordings_register
from gate.models import GateRun, SampleResult
from registry.errors import NotFoundError
from registry.models import ModelVersion
from registry.selectors import pk_like


class GateRunLookupCode(StrEnum):
    NO_SUCH = "gate_runs.no_such_run"


wordings_register({GateRunLookupCode.NO_SUCH: gettext_noop("No gate run '{pk}'.")})


def gate_run_list(*, filters: dict | None = None) -> QuerySet[GateRun]:
    filters = filters or {}
    queryset = GateRun.objects.select_related(
        "candidate", "baseline", "suite", "policy", "experiment", "created_by"
    )
    if filters.get("candidate"):
        queryset = queryset.filter(candidate=filters["candidate"])
    if filters.get("status"):
        queryset = queryset.filter(status=filters["status"])
    if filters.get("verdict"):
        queryset = queryset.filter(verdict=filters["verdict"])
    return queryset


def gate_run_get(*, gate_run_id: int | str) -> GateRun:
    run = (
        gate_run_list().prefetch_related("layers").filter(pk=gate_run_id).first()
        if pk_like(gate_run_id)
        else None
    )
    if run is None:
        raise NotFoundError(reason(GateRunLookupCode.NO_SUCH, pk=gate_run_id), field="id")
    return run


def sample_result_list(
    *, run: GateRun, layer: str | None = None, version=None, correct: bool | None = None
) -> QuerySet[SampleResult]:
    queryset = SampleResult.objects.filter(layer_result__gate_run=run).select_related(
        "item", "version", "layer_result"
    )
    if layer:
        queryset = queryset.filter(layer_result__layer=layer)
    if version is not None:
        queryset = queryset.filter(version=version)
    if correct is not None:
        queryset = queryset.filter(correct=correct)
    return queryset.order_by("layer_result_id", "version_id", "sample_index", "item__position", "id")


@dataclass(frozen=True)
class WrongAnswerFilters:
    """What the gate run page's wrong answers may be narrowed to: the run's layers, its suite's
    tags and the perturbation types its samples carry."""

    layers: list[str]
    tags: list[str]
    perturbations: list[str]


def wrong_answer_filters(*, run: GateRun) -> WrongAnswerFilters:
    samples = SampleResult.objects.filter(layer_result__gate_run=run, correct=False)
    tags = {tag for item_tags in run.suite.items.values_list("tags", flat=True) for tag in item_tags or []}
    return WrongAnswerFilters(
        layers=sorted(set(samples.values_list("layer_result__layer", flat=True))),
        tags=sorted(tags),
        perturbations=sorted(set(samples.exclude(perturbation="").values_list("perturbation", flat=True))),
    )


def wrong_answer_list(
    *,
    run: GateRun,
    version: ModelVersion,
    layer: str | None = None,
    tag: str | None = None,
    perturbation: str | None = None,
) -> QuerySet[SampleResult]:
    """One version's wrong answers in a run, narrowed by layer, suite tag and perturbation type."""
    queryset = sample_result_list(run=run, layer=layer, version=version, correct=False)
    if tag:
        # Tags are a JSON list; SQLite has no JSON containment, and a suite is small.
        tagged = [pk for pk, tags in run.suite.items.values_list("pk", "tags") if tag in (tags or [])]
        queryset = queryset.filter(item_id__in=tagged)
    if perturbation:
        queryset = queryset.filter(perturbation=perturbation)
    return queryset
