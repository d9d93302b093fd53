"""The API's experiment and probe-set listings: a fixed number of queries whatever the page size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Count, OuterRef, Q, Subquery

from canary.models import CanaryAnalysis, Experiment, OutcomeEvent, Probe, ProbeRun, ProbeSet, TurnEvent
from engines.routing import ARMS


@dataclass(frozen=True, kw_only=True)
class ArmLive:
    """One arm's traffic so far (probe traffic apart)."""

    users: int = 0
    sessions: int = 0
    questions: int = 0
    answers: int = 0
    errors: int = 0
    fallbacks: int = 0
    outcomes: int = 0


@dataclass(frozen=True)
class ExperimentLive:
    experiment: Experiment
    arms: dict[str, ArmLive]
    latest_analysis: CanaryAnalysis | None


def experiments_live(*, experiments: Sequence[Experiment]) -> list[ExperimentLive]:
    """Each experiment with its live figures per arm and its latest analysis, in three queries."""
    ids = [e.pk for e in experiments]
    figures: dict[tuple[int, str], dict[str, int]] = {}
    turns = (
        TurnEvent.objects.filter(experiment_id__in=ids)
        .exclude(source=TurnEvent.Source.PROBE)
        .values("experiment_id", "arm")
        .annotate(
            users=Count("user_id", distinct=True, filter=~Q(user_id="")),
            sessions=Count("session_id", distinct=True),
            questions=Count("id", filter=Q(role="user")),
            answers=Count("id", filter=Q(role="assistant")),
            errors=Count("id", filter=Q(role="assistant") & ~Q(error="")),
            fallbacks=Count("id", filter=Q(fallback=True)),
        )
    )
    for row in turns:
        figures[(row.pop("experiment_id"), row.pop("arm"))] = row
    outcomes = (
        OutcomeEvent.objects.filter(experiment_id__in=ids)
        .values("experiment_id", "arm")
        .annotate(n=Count("id"))
    )
    for row in outcomes:
        figures.setdefault((row["experiment_id"], row["arm"]), {})["outcomes"] = row["n"]
    latest = _latest_analyses(ids)
    return [
        ExperimentLive(
            experiment=e,
            arms={arm: ArmLive(**figures.get((e.pk, arm), {})) for arm in ARMS},
            latest_analysis=latest.get(e.pk),
        )
        for e in experiments
    ]


def _latest_analyses(ids: Sequence[int]) -> dict[int, CanaryAnalysis]:
    """The latest analysis per experiment, in one query."""
    newest = CanaryAnalysis.objects.filter(experiment=OuterRef("experiment")).order_by("-created_at", "-pk")
    rows = CanaryAnalysis.objects.filter(experiment_id__in=ids, pk=Subquery(newest.values("pk")[:1]))
    return {analysis.experiment_id: analysis for analysis in rows}


def probe_runs_list(*, experiment: Experiment, limit: int = 50) -> list[ProbeRun]:
    return list(experiment.probe_runs.select_related("probe_set").order_by("-started_at")[:limit])


@dataclass(frozen=True)
class ProbeSetSummary:
    probe_set: ProbeSet
    probes: int
    weaknesses: dict[str, int]


def probe_sets_list(*, ids: Sequence[int] | None = None) -> list[ProbeSetSummary]:
    """Every probe set (or those with `ids`) with its probe count per weakness, in two queries."""
    sets = ProbeSet.objects.order_by("name")
    probes = Probe.objects.all()
    if ids is not None:
        sets, probes = sets.filter(pk__in=ids), probes.filter(probe_set_id__in=ids)
    counts: dict[int, dict[str, int]] = {}
    for row in probes.values("probe_set_id", "weakness").annotate(n=Count("id")).order_by("weakness"):
        counts.setdefault(row["probe_set_id"], {})[row["weakness"]] = row["n"]
    return [
        ProbeSetSummary(
            probe_set=s, probes=sum(counts.get(s.pk, {}).values()), weaknesses=counts.get(s.pk, {})
        )
        for s in sets
    ]
