from __future__ import annotations

from django.db.models import QuerySet

from gate.models import GateRun, SampleResult
from registry.errors import NotFoundError
from registry.selectors import pk_like


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
        raise NotFoundError(f"No gate run {gate_run_id!r}.", field="id")
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
