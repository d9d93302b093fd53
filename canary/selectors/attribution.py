"""What a gate report shows when a traffic layer did not pass (its attribution). Each comes with the
SQL that reproduces it, to paste into psql."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Avg, Count, Q, QuerySet
from django.db.models.functions import TruncHour

from canary.models import Experiment, OutcomeEvent, ProbeRun, TurnEvent
from canary.selectors.experiments import TrafficWindow
from canary.selectors.sql import sql_text, user_traffic
from engines.routing import ARMS


@dataclass(frozen=True, kw_only=True)
class HourlyFollowUps:
    hour: datetime
    arm: str
    answered: int
    follow_ups: int

    @property
    def rate(self) -> float | None:
        return self.follow_ups / self.answered if self.answered else None


def follow_ups_by_hour(*, window: TrafficWindow, kinds: Sequence[str]) -> list[HourlyFollowUps]:
    rows = (
        user_traffic(window)
        .annotate(hour=TruncHour("occurred_at"))
        .values("hour", "arm")
        .annotate(
            answered=Count("id", filter=Q(role="assistant") & (Q(error="") | Q(fallback=True))),
            follow_ups=Count("id", filter=Q(role="user", follow_up_kind__in=list(kinds))),
        )
        .order_by("hour", "arm")
    )
    return [HourlyFollowUps(**row) for row in rows]


def follow_ups_by_arm_sql(*, window: TrafficWindow, kinds: Sequence[str]) -> str:
    kind_list = ", ".join(repr(k) for k in kinds)
    return sql_text(
        "SELECT arm, SUM(CASE WHEN role = 'assistant' AND (error = '' OR fallback) THEN 1 ELSE 0 END) "
        f"AS answered, SUM(CASE WHEN role = 'user' AND follow_up_kind IN ({kind_list}) THEN 1 ELSE 0 END) "
        f"AS follow_ups FROM {TurnEvent._meta.db_table} WHERE experiment_id = %s AND source <> 'probe' "
        "AND occurred_at >= %s AND occurred_at < %s GROUP BY arm",
        [window.experiment.pk, window.start, window.end],
    )


@dataclass(frozen=True, kw_only=True)
class FollowUpExample:
    session_id: str
    question: str
    answer: str
    follow_up: str


def follow_up_examples(
    *, window: TrafficWindow, kinds: Sequence[str], arm: str, limit: int
) -> list[FollowUpExample]:
    """The arm's latest follow-ups, each with the question and the answer before it."""
    turns = user_traffic(window)
    follow_ups = list(
        turns.filter(arm=arm, role="user", follow_up_kind__in=list(kinds))
        .order_by("-occurred_at")
        .values("session_id", "turn_index", "text")[:limit]
    )
    before = {
        (t["session_id"], t["turn_index"]): t["text"]
        for t in turns.filter(arm=arm, session_id__in=[f["session_id"] for f in follow_ups]).values(
            "session_id", "turn_index", "text"
        )
    }
    return [
        FollowUpExample(
            session_id=f["session_id"],
            question=before.get((f["session_id"], f["turn_index"] - 2), "")[:300],
            answer=before.get((f["session_id"], f["turn_index"] - 1), "")[:300],
            follow_up=f["text"][:300],
        )
        for f in follow_ups
    ]


def follow_up_examples_sql(*, window: TrafficWindow, kinds: Sequence[str], arm: str) -> str:
    kind_list = ", ".join(repr(k) for k in kinds)
    return sql_text(
        f"SELECT session_id, turn_index, text FROM {TurnEvent._meta.db_table} WHERE experiment_id = %s "
        f"AND arm = %s AND role = 'user' AND follow_up_kind IN ({kind_list}) "
        "AND occurred_at >= %s AND occurred_at < %s ORDER BY occurred_at DESC LIMIT 50",
        [window.experiment.pk, arm, window.start, window.end],
    )


@dataclass(frozen=True, kw_only=True)
class ArmPath:
    """An arm's answers in a window: how many, their errors and fallbacks, and latency percentiles."""

    arm: str
    answers: int
    errors: int
    fallbacks: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None


LATENCY_SAMPLE = 5000  # latest answers per arm the percentiles are read from


def answer_paths_by_arm(*, window: TrafficWindow) -> list[ArmPath]:
    answers = user_traffic(window).filter(role="assistant")
    counts = {
        row["arm"]: row
        for row in answers.values("arm").annotate(
            n=Count("id"),
            errors=Count("id", filter=~Q(error="")),
            fallbacks=Count("id", filter=Q(fallback=True)),
        )
    }
    paths = []
    for arm in ARMS:
        latencies = sorted(
            answers.filter(arm=arm, latency_ms__isnull=False, error="")
            .order_by("-occurred_at")
            .values_list("latency_ms", flat=True)[:LATENCY_SAMPLE]
        )
        row = counts.get(arm, {"n": 0, "errors": 0, "fallbacks": 0})
        paths.append(
            ArmPath(
                arm=arm,
                answers=row["n"],
                errors=row["errors"],
                fallbacks=row["fallbacks"],
                latency_p50_ms=latencies[len(latencies) // 2] if latencies else None,
                latency_p95_ms=latencies[int(len(latencies) * 0.95)] if latencies else None,
            )
        )
    return paths


def answer_paths_sql(*, window: TrafficWindow) -> str:
    return sql_text(
        f"SELECT arm, COUNT(*), SUM(CASE WHEN error <> '' THEN 1 ELSE 0 END) AS errors, "
        f"SUM(CASE WHEN fallback THEN 1 ELSE 0 END) AS fallbacks FROM {TurnEvent._meta.db_table} "
        "WHERE experiment_id = %s AND role = 'assistant' AND source <> 'probe' "
        "AND occurred_at >= %s AND occurred_at < %s GROUP BY arm",
        [window.experiment.pk, window.start, window.end],
    )


@dataclass(frozen=True, kw_only=True)
class HourlyOutcomes:
    hour: datetime
    arm: str
    outcomes: int
    mean: float | None


def _outcomes(window: TrafficWindow, metric: str) -> QuerySet[OutcomeEvent]:
    return OutcomeEvent.objects.filter(
        experiment=window.experiment, metric=metric, occurred_at__gte=window.start, occurred_at__lt=window.end
    )


def outcomes_by_hour(*, window: TrafficWindow, metric: str) -> list[HourlyOutcomes]:
    rows = (
        _outcomes(window, metric)
        .annotate(hour=TruncHour("occurred_at"))
        .values("hour", "arm")
        .annotate(outcomes=Count("id"), mean=Avg("value"))
        .order_by("hour", "arm")
    )
    return [HourlyOutcomes(**row) for row in rows]


def outcomes_by_arm_sql(*, window: TrafficWindow, metric: str) -> str:
    return sql_text(
        f"SELECT arm, COUNT(*), AVG(value) FROM {OutcomeEvent._meta.db_table} WHERE experiment_id = %s "
        "AND metric = %s AND occurred_at >= %s AND occurred_at < %s GROUP BY arm",
        [window.experiment.pk, metric, window.start, window.end],
    )


@dataclass(frozen=True, kw_only=True)
class UnitOutcome:
    unit_id: str
    user_id: str
    value: float
    occurred_at: datetime


def outcomes_worst(
    *, window: TrafficWindow, metric: str, arm: str, highest: bool, limit: int
) -> list[UnitOutcome]:
    """The arm's units with the worst values: the highest when less is better (`highest`)."""
    rows = (
        _outcomes(window, metric)
        .filter(arm=arm)
        .order_by("-value" if highest else "value")
        .values("unit_id", "user_id", "value", "occurred_at")[:limit]
    )
    return [UnitOutcome(**row) for row in rows]


def outcomes_worst_sql(*, window: TrafficWindow, metric: str, arm: str, highest: bool) -> str:
    return sql_text(
        f"SELECT unit_id, user_id, value FROM {OutcomeEvent._meta.db_table} WHERE experiment_id = %s "
        "AND metric = %s AND arm = %s AND occurred_at >= %s AND occurred_at < %s "
        f"ORDER BY value {'DESC' if highest else 'ASC'} LIMIT 50",
        [window.experiment.pk, metric, arm, window.start, window.end],
    )


def outcome_metrics(*, experiment: Experiment) -> list[str]:
    """The outcome metrics the experiment has events for."""
    return list(
        OutcomeEvent.objects.filter(experiment=experiment)
        .values_list("metric", flat=True)
        .distinct()
        .order_by("metric")
    )


@dataclass(frozen=True, kw_only=True)
class ProbeFinding:
    """One weakness (or "all") of a probe run: pass rates per arm and the paired comparison."""

    weakness: str
    pairs: int
    both_correct: int
    neither_correct: int
    only_candidate_correct: int
    only_baseline_correct: int
    candidate_rate: float
    baseline_rate: float
    mcnemar_p: float | None
    finding: str


def probe_findings(*, run: ProbeRun) -> list[ProbeFinding]:
    """The run's report per weakness, the overall row ("all") last."""
    names = sorted(name for name in run.report if name != "all") + (["all"] if "all" in run.report else [])
    return [ProbeFinding(weakness=name, **run.report[name]) for name in names]
