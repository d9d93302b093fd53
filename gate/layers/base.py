"""What a gate layer is. Each layer declares, in one class: its name and title, its policy section
(`gate.judges.<layer>`), the type of what it stores (its details, a dataclass the report, the
Markdown, the templates and the dashboards read as attributes), its run function and its part of
the report. `gate.layers.registry` lists them; the runner (`gate.services.gate_runs`) runs the
ones a policy requires, in that order.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Generic, TypeVar

from django.db import transaction
from django.utils.functional import Promise
from pydantic import TypeAdapter, ValidationError

from engines.reasons import Reason, Words, reasons_to_json
from gate.charts import Chart
from gate.models import GateRun, LayerResult
from gate.policy import GatePolicyConfig, PolicySection
from gate.reporting import Attribution
from registry.models import EvalItem, ModelVersion

logger = logging.getLogger(__name__)
D = TypeVar("D")
V = TypeVar("V")


class ClaimLost(Exception):
    """Another worker (or the reaper) took the run over; stop without writing."""


class RunParked(Exception):
    """The run needs work another live worker is doing for it (an adversarial set that worker holds):
    rather than hold a gpu worker idle meanwhile, the run goes back to the queue, parked on `set_id`,
    and is enqueued again when that set's lease is given back (or, should its holder die, by the
    reaper)."""

    def __init__(self, *, set_id: int, version: str, holder: str):
        super().__init__(f"waiting for {holder}, which attacks {version} (adversarial set {set_id})")
        self.set_id, self.version, self.holder = set_id, version, holder


def gate_run_assert_held(run: GateRun) -> None:
    """Raise ClaimLost when another worker (or the reaper) has taken the run over: store nothing.
    Every write of a layer checks it first, so a worker that lost its run stores nothing."""
    if not GateRun.objects.filter(pk=run.pk, status=GateRun.Status.RUNNING, worker=run.worker).exists():
        raise ClaimLost(f"gate run {run.pk} is no longer held by {run.worker}")


class LayerKind(StrEnum):
    MODEL = "model"  # model work on a gpu worker: the suite, perturbed or not
    TRAFFIC = "traffic"  # canary traffic aggregated in SQL


class Step(StrEnum):
    """What a worker does within a layer, for the live page (`Progress.doing`)."""

    ATTACK = "attack"  # searching adversarial texts against `version`
    WAIT = "wait"  # waiting for `worker`, which attacks `version` for this run too
    ANSWER = "answer"  # `version` answering the texts


def worker_hostname(worker: str) -> str:
    """The Celery hostname in a lease's `worker` ("machine:gpu@machine:task id")."""
    parts = worker.split(":")
    return parts[1] if len(parts) == 3 and parts[1] else worker


class Progress:
    """Counts units of model work done, per layer, and reports the run's percentage with each
    layer's units done of total, what the worker is doing and an ETA from this attempt's pace
    (`report(percent, detail)`). Layers a previous attempt finished count as done (`finished`), so
    a retry's progress starts where the last attempt's stored work ends, not at 0. Reports come at
    most every REPORT_SECONDS (a counter may move per item); the lease is kept by time elsewhere."""

    REPORT_SECONDS = 1.0

    def __init__(
        self,
        *,
        totals: dict[str, int],
        report: Callable[[int, dict[str, Any]], None],
        finished: Collection[str] = (),
    ):
        self.totals, self.report = totals, report
        self.done = {name: total if name in finished else 0 for name, total in totals.items()}
        self.total = max(sum(totals.values()), 1)
        self.layer: str | None = None
        self.activity: dict[str, str] = {}
        self.started, self.reported = time.monotonic(), -math.inf
        self.done_before = sum(self.done.values())  # this attempt's pace counts its own units only

    def begin(self, layer: str) -> None:
        """The layer whose units the next `advance` calls count."""
        self.layer, self.activity = layer, {}
        self.totals.setdefault(layer, 0)
        self.done.setdefault(layer, 0)
        self._report()

    def doing(self, *, step: Step, version: str = "", worker: str = "") -> None:
        """What the worker does now within the layer: a step, the version it works on and, while it
        waits, the worker it waits for (Celery's hostname)."""
        self.activity = {"step": step.value, "version": version, "worker": worker}
        self._report()

    def detail(self) -> dict[str, Any]:
        done = sum(self.done.values())
        elapsed = time.monotonic() - self.started
        pace = done - self.done_before
        eta = elapsed * (self.total - done) / pace if pace > 0 and done < self.total else None
        return {
            "layers": {
                name: {"done": self.done[name], "total": total} for name, total in self.totals.items()
            },
            "current": self.layer,
            "activity": self.activity,
            "eta_seconds": round(eta, 1) if eta is not None else None,
        }

    def advance(self, count: int) -> None:
        if self.layer is not None:
            self.done[self.layer] = min(self.totals[self.layer], self.done[self.layer] + count)
        layer_done = self.layer is not None and self.done[self.layer] >= self.totals[self.layer]
        if layer_done or time.monotonic() - self.reported >= self.REPORT_SECONDS:
            self._report()

    def _report(self) -> None:
        self.reported = time.monotonic()
        self.report(min(99, int(100 * sum(self.done.values()) / self.total)), self.detail())


@dataclass
class LayerContext:
    """What a layer's run gets: the claimed run, its parsed policy, the suite's items, the versions
    to evaluate (candidate first, then the baseline when the policy runs it) and the progress meter."""

    run: GateRun
    policy: GatePolicyConfig
    items: list[EvalItem]
    versions: list[ModelVersion]
    progress: Progress

    @property
    def baseline(self) -> ModelVersion | None:
        """The baseline, when the policy runs it (the second of `versions`)."""
        return self.versions[1] if len(self.versions) > 1 else None

    def baseline_of(self, by_version: Mapping[int, V]) -> V | None:
        """The baseline's entry of `by_version` (version pk -> value), None without a baseline."""
        return by_version[self.baseline.pk] if self.baseline is not None else None


@dataclass(frozen=True, kw_only=True)
class ReportPart:
    """A layer's own part of the report: what went in, the numbers, and (when it did not pass) why."""

    inputs: dict[str, Any]
    estimates: dict[str, Any]
    attribution: Attribution | None = None


@functools.cache
def _adapter(kind: type) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def to_json(value: object, *, words: Words | None = None) -> Any:
    """A dataclass (or anything pydantic can dump) as plain JSON values; with `words`, each reason in
    it also carries its `message` in them."""
    kind: type = type(value)  # as a plain `type`: mypy reads type[object] as unhashable for the cache
    return _adapter(kind).dump_python(value, mode="json", context={"words": words} if words else None)


@dataclass(frozen=True, kw_only=True)
class StoredDetails:
    """A layer's stored details as this version reads them: the dataclass (None when absent or
    unreadable), the stored keys it does not know (path -> value) and, when unreadable, why."""

    details: Any
    retired_keys: dict[str, Any] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)


def _unread(stored: Any, read: Any, prefix: str = "") -> dict[str, Any]:
    """The keys of `stored` (a JSON document) missing from `read` (it as read back), as dotted paths."""
    found: dict[str, Any] = {}
    if isinstance(stored, dict) and isinstance(read, dict):
        for key, value in stored.items():
            path = f"{prefix}{key}"
            if key not in read:
                found[path] = value
            else:
                found.update(_unread(value, read[key], f"{path}."))
    elif isinstance(stored, list) and isinstance(read, list) and len(stored) == len(read):
        for index, (value, again) in enumerate(zip(stored, read, strict=True)):
            found.update(_unread(value, again, f"{prefix}{index}."))
    return found


class GateLayer(ABC, Generic[D]):
    name: ClassVar[str]
    # The layer's name for people, `pgettext_lazy("code", ...)`: it names itself in each language.
    title: ClassVar[str | Promise]
    kind: ClassVar[LayerKind]
    policy: ClassVar[type[PolicySection]]
    details_type: ClassVar[type]
    metric: ClassVar[str]
    # One line for the report: how the layer measures and judges.
    method: ClassVar[str]
    # Part of the full sandwich: a run whose policy leaves an essential layer out is a weakened gate
    # (approving on it takes an override). The gate's own layers are; one an app adds is not.
    essential: ClassVar[bool] = False
    # Required by a policy that names no layers. False: only a policy that names it requires it (a check
    # offered, not imposed: saving a policy, or a new run's defaults, leave it out).
    required_by_default: ClassVar[bool] = True

    @property
    def template(self) -> str:
        return f"gate/layers/{self.name}.html"

    def units(self, *, policy: GatePolicyConfig, items: list[EvalItem], versions: list[ModelVersion]) -> int:
        """Units of model work the layer will do, for the progress meter."""
        return 0

    @abstractmethod
    def run(self, ctx: LayerContext) -> LayerResult: ...

    @abstractmethod
    def report(self, *, run: GateRun, result: LayerResult, details: D | None) -> ReportPart: ...

    def charts(self, *, details: D, threshold: float | None) -> list[Chart]:
        """The run page's charts of the layer's stored details (in the active language); none by default."""
        return []

    def details(self, result: LayerResult) -> D | None:
        """The stored details as the layer's dataclass; None when they are not there (yet) or were
        stored in a shape this version does not read (the report then says so)."""
        return self.details_read(result).details

    def details_read(self, result: LayerResult) -> StoredDetails:
        """The stored details read leniently: keys this version does not know are set aside (and
        named), missing ones with a default take it; what cannot be read at all is named."""
        if not result.details:
            return StoredDetails(details=None)
        try:
            details = _adapter(self.details_type).validate_python(result.details)
        except ValidationError as exc:
            logger.warning("%s of run %s: details unreadable: %s", self.name, result.gate_run_id, exc)
            problems = [f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()]
            return StoredDetails(details=None, unreadable=problems[:10])
        return StoredDetails(details=details, retired_keys=_unread(result.details, to_json(details)))

    def begin(
        self, *, run: GateRun, setup: D, same: tuple[str, ...], threshold: float | None
    ) -> tuple[LayerResult, D | None]:
        """The layer's pending row for a resumable run, and the setup stored there when it matches
        `setup` on the fields `same` (a resumed run keeps its committed samples). A row begun with
        another setup is started over: its samples dropped, `setup` stored, None returned."""
        row, created = LayerResult.objects.get_or_create(
            gate_run=run,
            layer=self.name,
            defaults={
                "verdict": GateRun.Verdict.PENDING,
                "metric": self.metric,
                "threshold": threshold,
                "details": to_json(setup),
            },
        )
        if created:
            return row, None
        stored = self.details(row)
        if stored is None or any(getattr(stored, key) != getattr(setup, key) for key in same):
            row.samples.all().delete()
            row.details = to_json(setup)
            row.save(update_fields=["details"])
            return row, None
        return row, stored

    def store(
        self,
        *,
        run: GateRun,
        started: float,
        verdict: str,
        details: D,
        reasons: Sequence[Reason | str],
        threshold: float | None,
        estimate: float | None = None,
        ci_low: float | None = None,
        ci_high: float | None = None,
        device: str = "cpu",
        metric: str | None = None,
    ) -> LayerResult:
        """Write the layer's result, if the run is still this worker's."""
        with transaction.atomic():
            gate_run_assert_held(run)
            result, _ = LayerResult.objects.update_or_create(
                gate_run=run,
                layer=self.name,
                defaults={
                    "verdict": verdict,
                    "metric": metric or self.metric,
                    "estimate": estimate,
                    "ci_low": ci_low,
                    "ci_high": ci_high,
                    "threshold": threshold,
                    "reasons": reasons_to_json(reasons),
                    "details": to_json(details),
                    "wall_seconds": time.perf_counter() - started,
                    "device": device,
                },
            )
        return result


def layer_error_store(*, layer: GateLayer[Any], run: GateRun, reasons: Sequence[Reason | str]) -> LayerResult:
    """`layer` not computed for a reason outside it (its model is not the one that serves): `error`,
    with what failed, no details."""
    with transaction.atomic():
        gate_run_assert_held(run)
        result, _ = LayerResult.objects.update_or_create(
            gate_run=run,
            layer=layer.name,
            defaults={
                "verdict": GateRun.Verdict.ERROR,
                "metric": layer.metric,
                "estimate": None,
                "ci_low": None,
                "ci_high": None,
                "reasons": reasons_to_json(reasons),
                "details": {},
            },
        )
    return result


def estimates_of(value: object, *, without: tuple[str, ...] = ("verdict", "reasons")) -> dict[str, Any]:
    """A judge's result as report estimates: its numbers, without what the layer row already says."""
    data = to_json(value)
    return {key: item for key, item in data.items() if key not in without}
