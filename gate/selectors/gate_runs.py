from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

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
    if filters.get("suite"):
        queryset = queryset.filter(suite=filters["suite"])
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
    *,
    run: GateRun,
    layer: str | None = None,
    version=None,
    correct: bool | None = None,
    item: str | None = None,
) -> QuerySet[SampleResult]:
    """The run's stored answers, narrowed by layer, version, correctness and item (its external id:
    a flaky item's every repeat)."""
    queryset = SampleResult.objects.filter(layer_result__gate_run=run).select_related(
        "item", "version", "layer_result"
    )
    if layer:
        queryset = queryset.filter(layer_result__layer=layer)
    if version is not None:
        queryset = queryset.filter(version=version)
    if correct is not None:
        queryset = queryset.filter(correct=correct)
    if item is not None:
        queryset = queryset.filter(item__external_id=item)
    return queryset.order_by(
        "layer_result_id", "version_id", "sample_index", "item__position", "repeat", "id"
    )


def adversarial_examples_export(*, run: GateRun) -> Iterator[dict[str, Any]]:
    """The run's layer-1 examples as JSONL rows, for training the next version on what broke this
    one: per version and perturbed sample, the original, the perturbed text, the true label, the
    model's answer, whether it was right, the recipe and its seed, and for a word-level attack its
    outcome (`succeeded`: the answer flipped) and swaps. Never the eval items alone: a row is a
    perturbation of one (keep them out of a suite's training data as the suite itself is)."""
    seed = (run.policy_config or {}).get("robustness_seed")
    samples = sample_result_list(run=run, layer="robustness").exclude(item=None)
    for sample in samples.iterator(chunk_size=2000):
        recipe, _, outcome = sample.perturbation.partition(":")
        yield {
            "gate_run": run.pk,
            "version": sample.version.ref,
            "item_id": sample.item.external_id,
            "language": sample.item.language,
            "original": sample.item.input,
            "perturbed": sample.input_text,
            "label": sample.item.label,
            "answer": sample.output_label,
            "correct": sample.correct,
            "recipe": recipe,
            "seed": seed,
            "outcome": outcome or None,
            "diff": sample.diff,
        }


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
