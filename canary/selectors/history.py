"""The dashboard's history: the traffic windows (each share the candidate had, from the experiment's
share changes), the per-arm figures of each, and the experiment's audited actions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Count, Q
from django.utils import timezone

from canary.models import Experiment, TrafficShareChange, TurnEvent
from canary.selectors.attribution import answer_paths_by_arm
from canary.selectors.experiments import TrafficWindow, traffic_window_get
from canary.selectors.sql import sql_number, user_traffic
from registry.models import AuditAction, AuditLog


def experiment_audit_rows(*, experiment: Experiment) -> list[AuditLog]:
    """Every audited change of the experiment (create, start, pause, resume, ramp, rollback,
    promote, by people and by the canary analysis), oldest first."""
    return list(
        AuditLog.objects.filter(target_type=Experiment._meta.label_lower, target_id=str(experiment.pk))
        .select_related("actor")
        .order_by("created_at", "id")
    )


@dataclass(frozen=True, kw_only=True)
class ShareWindow:
    """A stretch of time over which the candidate had one share of the units and every unit stayed
    on its arm: from a start, resume or ramp to the next change."""

    window: TrafficWindow
    traffic_percent: float
    opened_by: str  # start, resume or ramp
    current: bool


# What a person would call an audited action on an experiment, where its value does not say it.
ACTION_NAMES: dict[str, str] = {
    AuditAction.EXPERIMENT_PAUSED: "pause",
    AuditAction.EXPERIMENT_ROLLED_BACK: "rollback",
    AuditAction.EXPERIMENT_PROMOTED: "promote",
}


def experiment_action_name(row: AuditLog) -> str:
    """What a person would call the audited action: start, resume, pause, ramp, rollback, ..."""
    if row.action == AuditAction.EXPERIMENT_RUNNING:
        return "start" if (row.before or {}).get("status") == Experiment.Status.DRAFT else "resume"
    return ACTION_NAMES.get(row.action, row.action.removeprefix("experiment."))


def share_windows(*, experiment: Experiment, now: datetime | None = None) -> list[ShareWindow]:
    """The experiment's traffic windows, oldest first, from its share changes: a start, resume or ramp
    opens one, the next change closes it (while paused everyone is on the baseline)."""
    changes = list(TrafficShareChange.objects.filter(experiment=experiment).order_by("at", "id"))
    windows = []
    following_changes: list[TrafficShareChange | None] = [*changes[1:], None]
    for change, following in zip(changes, following_changes, strict=False):  # none at all: no windows
        if change.cause not in TrafficShareChange.OPENING:
            continue
        if following is None:  # the open window is the one the gate's traffic layers read
            window = traffic_window_get(experiment=experiment, now=now or timezone.now())
        else:
            # The experiment's own start time is the one its events are checked against.
            start = experiment.started_at if change.cause == TrafficShareChange.Cause.START else None
            window = TrafficWindow(experiment=experiment, start=start or change.at, end=following.at)
        windows.append(
            ShareWindow(
                window=window,
                traffic_percent=change.percent,
                opened_by=change.cause,
                current=following is None and experiment.status == Experiment.Status.RUNNING,
            )
        )
    return windows


@dataclass(frozen=True, kw_only=True)
class SharePoint:
    at: datetime
    percent: float


def share_history(*, experiment: Experiment, now: datetime | None = None) -> list[SharePoint]:
    """The candidate's share from each change on (a step each), the last one held to the experiment's
    end, or to now while it runs or is paused: a rollback drops to 0 and a promotion rises to 100
    where they happened."""
    points = [
        SharePoint(at=change.at, percent=change.percent)
        for change in TrafficShareChange.objects.filter(experiment=experiment).order_by("at", "id")
    ]
    if points:
        end = experiment.ended_at or now or timezone.now()
        points.append(SharePoint(at=max(end, points[-1].at), percent=points[-1].percent))
    return points


@dataclass(frozen=True, kw_only=True)
class ArmFigures:
    """One arm's user traffic in a window (probe traffic apart)."""

    arm: str
    users: int
    sessions: int
    questions: int
    answers: int
    errors: int
    fallbacks: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    # Sessions whose first answer the user did not follow up on (the next user turn, if any, is
    # not a `follow_up`): the traffic carries no labels, so this stands for first-answer accuracy.
    first_answer_accepted: float | None
    turns_per_session: float | None

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.answers if self.answers else None

    @property
    def fallback_rate(self) -> float | None:
        return self.fallbacks / self.answers if self.answers else None


def arm_figures(*, window: TrafficWindow) -> list[ArmFigures]:
    """Per arm, in four aggregate queries: users, sessions, questions, answers, errors, fallbacks,
    latency percentiles, first answers accepted and user turns per session."""
    table = TurnEvent._meta.db_table
    counts = {
        row["arm"]: row
        for row in user_traffic(window)
        .values("arm")
        .annotate(
            users=Count("user_id", distinct=True, filter=~Q(user_id="")),
            sessions=Count("session_id", distinct=True),
            questions=Count("id", filter=Q(role="user")),
        )
    }
    # The second user turn of each session is the one that may follow up on the first answer.
    sql = f"""
        SELECT arm, SUM(CASE WHEN follow_up_kind = 'follow_up' THEN 1 ELSE 0 END)
        FROM (
            SELECT arm, follow_up_kind,
                   ROW_NUMBER() OVER (PARTITION BY arm, session_id ORDER BY turn_index) AS position
            FROM {table}
            WHERE experiment_id = %s AND source <> 'probe' AND role = 'user'
              AND occurred_at >= %s AND occurred_at < %s
        ) AS user_turns
        WHERE position = 2
        GROUP BY arm
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [window.experiment.pk, window.start, window.end])
        followed_up = {arm: sql_number(n) for arm, n in cursor.fetchall()}
    figures = []
    for path in answer_paths_by_arm(window=window):
        row = counts.get(path.arm, {"users": 0, "sessions": 0, "questions": 0})
        sessions = row["sessions"]
        figures.append(
            ArmFigures(
                arm=path.arm,
                users=row["users"],
                sessions=sessions,
                questions=row["questions"],
                answers=path.answers,
                errors=path.errors,
                fallbacks=path.fallbacks,
                latency_p50_ms=path.latency_p50_ms,
                latency_p95_ms=path.latency_p95_ms,
                first_answer_accepted=1 - followed_up.get(path.arm, 0) / sessions if sessions else None,
                turns_per_session=row["questions"] / sessions if sessions else None,
            )
        )
    return figures
