"""What the model layers (clean accuracy, robustness) share: judging answers, and their attribution
from the stored samples."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from django.conf import settings
from django.db.models import Avg, Count, Q
from django.utils.translation import gettext as _

from engines.backends.base import Prediction, Usage
from engines.reasons import Reason, gettext_noop, reason, sentences, stored_reason_read, wordings_register
from engines.scoring.answers import answer_correct
from gate.charts import Cell, Chart, bars_chart
from gate.cost import Prices, VersionCost, version_cost
from gate.layers.outputs import VersionOutputs
from gate.models import GateRun, LayerResult
from gate.reporting import Attribution, AttributionLevel, Table
from registry.models import ModelVersion


class ModelAttributionCode(StrEnum):
    """The model layers' attribution: its summaries and its tables' titles."""

    WRONG_ANSWERS = "model.wrong_answers"
    SYSTEM = "model.system"
    SYSTEM_NO_DEVICE = "model.system_no_device"
    WRONG_ANSWERS_TITLE = "model.wrong_answers_title"
    WEAKEST_TAGS_TITLE = "model.weakest_tags_title"
    BY_LANGUAGE_TITLE = "model.by_language_title"
    WEAKEST_TYPES_TITLE = "model.weakest_types_title"
    ITEMS_FAILING_TITLE = "model.items_failing_title"
    FAILURES_BY_TYPE_TITLE = "model.failures_by_type_title"


wordings_register(
    {
        ModelAttributionCode.WRONG_ANSWERS: gettext_noop("the candidate's wrong answers"),
        ModelAttributionCode.SYSTEM: gettext_noop(
            "{errors} of {samples} candidate answers errored, mean latency {latency:.1f} ms on {device}"
        ),
        ModelAttributionCode.SYSTEM_NO_DEVICE: gettext_noop(
            "{errors} of {samples} candidate answers errored, mean latency {latency:.1f} ms on an "
            "unknown device"
        ),
        ModelAttributionCode.WRONG_ANSWERS_TITLE: gettext_noop("wrong answers"),
        ModelAttributionCode.WEAKEST_TAGS_TITLE: gettext_noop("weakest tags"),
        ModelAttributionCode.BY_LANGUAGE_TITLE: gettext_noop("by language"),
        ModelAttributionCode.WEAKEST_TYPES_TITLE: gettext_noop("weakest perturbation types"),
        ModelAttributionCode.ITEMS_FAILING_TITLE: gettext_noop("items failing most often"),
        ModelAttributionCode.FAILURES_BY_TYPE_TITLE: gettext_noop("failures by perturbation type"),
    }
)


def layer_reasons(result: LayerResult) -> Reason:
    """A layer's stored reasons as one summary (an attribution's phenomenon)."""
    return sentences([stored_reason_read(r) for r in result.reasons])


class Expectation(Protocol):
    """What an answer is judged against (read only: a suite item, or a frozen `Expected`)."""

    @property
    def label(self) -> str: ...
    @property
    def reference(self) -> str: ...
    @property
    def language(self) -> str: ...


@dataclass(frozen=True)
class Expected:
    """What counts as a right answer when it is not the item's own label or reference: in
    consistency mode, the model's answer to the clean item."""

    label: str
    reference: str
    language: str


class FreeTextJudge(Protocol):
    """Decides free-text answers: (question, reference, answer) triples in, correct or not out."""

    def __call__(self, triples: Sequence[tuple[str, str, str]]) -> list[bool]: ...


def answers_judge(
    *,
    items: Sequence[Expectation],
    predictions: Sequence[Prediction],
    cutoffs: dict[str, float] | None = None,
    judge: FreeTextJudge | None = None,
    questions: Sequence[str] | None = None,
) -> list[bool]:
    """Label match where the item has a label (the label wins: similarity misses negation);
    otherwise the answer equals the reference, or scores at least the cut-off against it
    (BERTScore F1 for English, chrF for Chinese; `cutoffs` overrides the shipped ones by
    metric), or, with a `judge`, the judge says it is right (asked with the item's question from
    `questions`, in the items' order). An errored answer is wrong."""
    verdicts: list[bool] = []
    to_score: list[int] = []
    for index, (item, prediction) in enumerate(zip(items, predictions, strict=True)):
        exact = answer_correct(
            expected_label=item.label, reference=item.reference, label=prediction.label, text=prediction.text
        )
        verdicts.append(prediction.error is None and exact)
        if prediction.error is None and not exact and not item.label and item.reference:
            to_score.append(index)
    if to_score and judge is not None:
        if questions is None or len(questions) != len(items):
            raise ValueError("a judge needs each item's question")
        decided = judge([(questions[i], items[i].reference, predictions[i].text) for i in to_score])
        for index, correct in zip(to_score, decided, strict=True):
            verdicts[index] = correct
    elif to_score:
        from engines.device import device_select  # torch: only when free text is judged
        from engines.scoring.text import TEXT_CUTOFFS, text_scores

        limits = {**TEXT_CUTOFFS, **(cutoffs or {})}
        scores = text_scores(
            references=[items[i].reference for i in to_score],
            candidates=[predictions[i].text for i in to_score],
            languages=[items[i].language for i in to_score],
            device=device_select(),
        )
        for index, score in zip(to_score, scores, strict=True):
            verdicts[index] = score.value >= limits[score.metric]
    return verdicts


def breakdown_table(
    *, title: Reason, key: str, candidate: dict[str, Any], baseline: dict[str, Any] | None, limit: int = 6
) -> Table:
    """The breakdown cells where the candidate is weakest, with the baseline beside them. Cells are
    dataclasses with an `accuracy` (clean accuracy) or a `rate` (robustness)."""

    def value(cell: Any) -> float | None:
        return getattr(cell, "accuracy", None) if hasattr(cell, "accuracy") else getattr(cell, "rate", None)

    rows = []
    for name, cell in candidate.items():
        mine = value(cell)
        theirs = value(baseline[name]) if baseline and name in baseline else None
        rows.append(
            [name, cell.n, mine, theirs, mine - theirs if mine is not None and theirs is not None else None]
        )
    rows.sort(key=lambda row: row[2] if row[2] is not None else 2.0)
    return Table(title=title, columns=[key, "n", "candidate", "baseline", "difference"], rows=rows[:limit])


def model_attribution(
    *, run: GateRun, result: LayerResult, phenomenon: list[Table], data: list[Table]
) -> Attribution:
    """Attribution of a model layer that did not pass, from its stored samples: where the candidate is
    weakest (`phenomenon`), which items and perturbations failed (`data` plus the wrong answers), and
    what its path did (errors, latency, device)."""
    samples = result.samples.filter(version=run.candidate)
    wrong = samples.filter(correct=False)
    wrong_rows = [
        [s["item__external_id"], s["item__label"], s["output_label"]]
        for s in wrong.values("item__external_id", "output_label", "item__label")[:10]
    ]
    system = samples.aggregate(
        samples=Count("id"), errors=Count("id", filter=~Q(error="")), mean_latency_ms=Avg("latency_ms")
    )
    samples_url = f"/api/v1/gate-runs/{run.pk}/samples/?layer={result.layer}"
    latency = system["mean_latency_ms"] or 0.0
    system_summary = (
        reason(
            ModelAttributionCode.SYSTEM,
            errors=system["errors"],
            samples=system["samples"],
            latency=latency,
            device=result.device,
        )
        if result.device
        else reason(
            ModelAttributionCode.SYSTEM_NO_DEVICE,
            errors=system["errors"],
            samples=system["samples"],
            latency=latency,
        )
    )
    return Attribution(
        phenomenon=AttributionLevel(
            summary=layer_reasons(result),
            reproduce=f"GET /api/v1/gate-runs/{run.pk}/  (layers[].details)",
            tables=phenomenon,
        ),
        data=AttributionLevel(
            summary=reason(ModelAttributionCode.WRONG_ANSWERS),
            reproduce=f"GET {samples_url}&correct=false",
            tables=[
                *data,
                Table(
                    title=reason(ModelAttributionCode.WRONG_ANSWERS_TITLE),
                    columns=["item", "expected", "answered"],
                    rows=wrong_rows,
                ),
            ],
        ),
        system=AttributionLevel(
            summary=system_summary, reproduce=f"GET {samples_url}  (fields error, latency_ms)"
        ),
    )


def _cells(breakdown: dict[str, Any], *, rate: str) -> dict[str, Cell]:
    return {
        key: Cell(rate=getattr(cell, rate), ci_low=cell.ci_low, ci_high=cell.ci_high)
        for key, cell in breakdown.items()
    }


def breakdown_chart(
    *, details: Any, breakdown: str, rate: str, id: str, title: str, y_name: str, threshold: float | None
) -> Chart:
    """A model layer's breakdown (`by_tag`, `by_type`) as bars: candidate beside baseline, each bar
    with its interval, and the layer's bar as a line."""
    sides = {details.candidate.version: _cells(getattr(details.candidate, breakdown), rate=rate)}
    if details.baseline is not None:
        sides[details.baseline.version] = _cells(getattr(details.baseline, breakdown), rate=rate)
    return bars_chart(
        id=id,
        title=title,
        sides=sides,
        threshold=threshold,
        threshold_label=_("bar %(value)s") % {"value": threshold} if threshold is not None else "",
        y_name=y_name,
    )


@dataclass
class ModelWork:
    """What an attempt of a model layer spent: seconds per phase (`timings`, the `phases` named up
    front at 0, others as first used) and per version its model seconds and its answers computed and
    taken from the cache; the device the candidate ran on."""

    phases: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    seconds: defaultdict[int, float] = field(default_factory=lambda: defaultdict(float))
    computed: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    cached: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    device: str = ""
    usage: defaultdict[int, Usage] = field(default_factory=lambda: defaultdict(Usage))
    devices: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.timings = {**dict.fromkeys(self.phases, 0.0), **self.timings}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        mark = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - mark

    def outputs_add(self, *, version: ModelVersion, outputs: VersionOutputs, candidate: bool) -> None:
        """A model call's answers: its seconds (the `inference` phase too), what it computed or reused."""
        self.seconds[version.pk] += outputs.seconds
        self.timings["inference"] = self.timings.get("inference", 0.0) + outputs.seconds
        self.computed[version.pk] += outputs.computed
        self.cached[version.pk] += outputs.cached
        self.usage[version.pk] += outputs.usage
        self.devices[version.pk] = outputs.device
        if candidate:
            self.device = outputs.device


def version_prices(version: ModelVersion) -> Prices:
    """The version's prices: its endpoint's per 1 000 tokens (its backend config), the deployment's
    per device-hour (EVALHUB_DEVICE_HOUR_PRICE), in EVALHUB_COST_CURRENCY."""
    config = version.backend_config if isinstance(version.backend_config, dict) else {}
    return Prices(
        per_1k_input=config.get("price_per_1k_input"),
        per_1k_output=config.get("price_per_1k_output"),
        device_hour=settings.EVALHUB_DEVICE_HOUR_PRICE,
        currency=settings.EVALHUB_COST_CURRENCY,
    )


def versions_cost(
    *,
    versions: Sequence[ModelVersion],
    usage: dict[int, Usage],
    seconds: dict[int, float],
    devices: dict[int, str],
) -> list[VersionCost]:
    """Each version's model work in a layer, priced (by version pk: its usage, model seconds, device)."""
    return [
        version_cost(
            version=v.ref,
            usage=usage.get(v.pk, Usage()),
            wall_seconds=seconds.get(v.pk, 0.0),
            device=devices.get(v.pk, ""),
            prices=version_prices(v),
        )
        for v in versions
    ]
