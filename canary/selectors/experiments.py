"""Experiments by name (the hot path's cached lookup too), their latest probe run and analyses, the
traffic window the gate's traffic layers read, and the experiment a gate run judges."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from canary.lookups import LookupCode
from canary.models import CanaryAnalysis, Experiment, ProbeRun
from engines.input_checks import text_problem
from engines.reasons import reason
from engines.routing import BUCKETS
from registry.errors import ApplicationError, NotFoundError
from registry.models import ModelVersion


def experiment_list() -> QuerySet[Experiment]:
    return Experiment.objects.select_related("baseline", "candidate", "created_by").order_by("-created_at")


def experiment_overview_list() -> QuerySet[Experiment]:
    """Every experiment with its latest analysis verdict (one query)."""
    latest = CanaryAnalysis.objects.filter(experiment=OuterRef("pk")).order_by("-created_at", "-pk")
    return experiment_list().annotate(
        latest_verdict=Subquery(latest.values("verdict")[:1]),
        latest_analysis_at=Subquery(latest.values("created_at")[:1]),
    )


def experiment_get(*, name: str) -> Experiment:
    # A name the database could not store is not looked up (it refuses NUL even in a query).
    experiment = None if text_problem(name) else experiment_list().filter(name=name).first()
    if experiment is None:
        raise NotFoundError(reason(LookupCode.NO_EXPERIMENT, name=name), field="experiment")
    return experiment


def probe_run_latest(*, experiment: Experiment) -> ProbeRun | None:
    """The experiment's latest finished probe run: what analyses, gate reports and dashboards read."""
    return (
        experiment.probe_runs.filter(status=ProbeRun.Status.SUCCEEDED)
        .select_related("probe_set")
        .order_by("-finished_at")
        .first()
    )


_live: dict[str, tuple[float, Experiment]] = {}


def experiment_get_live(*, name: str) -> Experiment:
    """`experiment_get` for the request hot path (assignment, proxy): this process reuses what it
    read for EVALHUB_CANARY_CACHE_SECONDS (1 s), so a status or share change applies within that
    long. Reading it costs more than the rest of an assignment (bench/router.py)."""
    now = time.monotonic()
    hit = _live.get(name)
    if hit is not None and now - hit[0] < settings.EVALHUB_CANARY_CACHE_SECONDS:
        return hit[1]
    experiment = Experiment.objects.select_related("baseline", "candidate").filter(name=name).first()
    if experiment is None:
        raise NotFoundError(reason(LookupCode.NO_EXPERIMENT, name=name), field="experiment")
    _live[name] = (now, experiment)
    return experiment


@dataclass(frozen=True)
class TrafficWindow:
    """A stretch of one experiment's traffic over which every unit stayed on one arm: from the last
    share change (start, resume or ramp) to the experiment's end, its pause, or `now`."""

    experiment: Experiment
    start: datetime
    end: datetime

    @property
    def candidate_share(self) -> float | None:
        """The candidate's share over the window, for the sample-ratio check; None for an
        all-or-nothing split, which has no ratio to check."""
        share = self.experiment.window_buckets / BUCKETS
        return share if 0 < share < 1 else None

    @property
    def traffic_percent(self) -> float:
        return self.experiment.window_buckets * 100 / BUCKETS

    def until(self, end: datetime) -> TrafficWindow:
        """The same window cut off at `end` (for day-by-day views)."""
        return TrafficWindow(experiment=self.experiment, start=self.start, end=min(end, self.end))


def traffic_window_get(*, experiment: Experiment, now: datetime | None = None) -> TrafficWindow:
    experiment_start = experiment.share_since or experiment.started_at or experiment.created_at
    end = experiment.ended_at or experiment.paused_at or now or timezone.now()
    return TrafficWindow(experiment=experiment, start=experiment_start, end=end)


def experiment_for_gate(
    *, candidate: ModelVersion, baseline: ModelVersion | None, name: str | None = None
) -> Experiment | None:
    """The experiment whose traffic judges `candidate` against a gate run's `baseline` (so that every
    layer compares the same two versions): the one named, else its running or paused experiment, else
    the latest one. A named experiment that compares other versions is an error naming the field."""
    if name:
        experiment = Experiment.objects.select_related("baseline", "candidate").filter(name=name).first()
        if experiment is None:
            raise ApplicationError(
                reason(LookupCode.NO_EXPERIMENT, name=name),
                fields={"experiment": [reason(LookupCode.UNKNOWN)]},
            )
        if experiment.candidate_id != candidate.pk:
            raise ApplicationError(
                reason(LookupCode.OTHER_CANDIDATE, name=name, ref=candidate.ref),
                fields={"experiment": [reason(LookupCode.ITS_CANDIDATE, ref=experiment.candidate.ref)]},
            )
        if baseline is not None and experiment.baseline_id != baseline.pk:
            raise ApplicationError(
                reason(
                    LookupCode.OTHER_BASELINE, name=name, baseline=experiment.baseline.ref, ref=baseline.ref
                ),
                fields={"experiment": [reason(LookupCode.ITS_BASELINE, ref=experiment.baseline.ref)]},
            )
        return experiment
    experiments = Experiment.objects.filter(candidate=candidate).exclude(status=Experiment.Status.DRAFT)
    if baseline is not None:
        experiments = experiments.filter(baseline=baseline)
    return (
        experiments.filter(status__in=Experiment.ACTIVE).first()
        or experiments.order_by("-started_at", "-pk").first()
    )


def analyses_latest(*, experiment: Experiment, limit: int = 10) -> list[CanaryAnalysis]:
    return list(experiment.analyses.order_by("-created_at", "-pk")[:limit])
