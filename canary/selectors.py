from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet

from canary.models import Experiment, OutcomeEvent, ProbeRun, TurnEvent
from engines.routing import ARMS
from registry.errors import NotFoundError


def experiment_list() -> QuerySet[Experiment]:
    return Experiment.objects.select_related("baseline", "candidate", "created_by").order_by("-created_at")


def experiment_get(*, name: str) -> Experiment:
    experiment = experiment_list().filter(name=name).first()
    if experiment is None:
        raise NotFoundError(f"No experiment named {name!r}.", field="experiment")
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
        raise NotFoundError(f"No experiment named {name!r}.", field="experiment")
    _live[name] = (now, experiment)
    return experiment


# ---------------------------------------------------------------------------------------------
# Sufficient statistics for the gate's traffic layers, aggregated in SQL over a time window of
# one experiment's user traffic (probe traffic excluded). One pass over the events each; the
# result has one row per arm, so nothing in Python grows with the traffic.
# ---------------------------------------------------------------------------------------------
def _number(value) -> int | float:
    """SQL sums come back as int, float or (PostgreSQL's numeric) Decimal; None for no rows."""
    if value is None:
        return 0
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _arms(rows, names: tuple[str, ...]) -> dict[str, dict]:
    out = {arm: dict.fromkeys(names, 0) for arm in ARMS}
    for arm, *values in rows:
        out[arm] = {name: _number(value) for name, value in zip(names, values, strict=True)}
    return out


FOLLOW_UP_FIELDS = (
    "sessions",
    "answered",
    "follow_ups",
    "deepening",
    "user_turns_sum",
    "user_turns_sumsq",
    "unjudged",
)


def follow_up_counts_by_arm(
    *, experiment: Experiment, start: datetime, end: datetime, kinds: Sequence[str]
) -> dict[str, dict[str, int]]:
    """Per arm: sessions, answered questions (answers the user got: without an error, or given by
    the baseline as the candidate's fallback), user turns of the counted detector `kinds`, deepening
    turns, the sum and sum of squares of user turns per session, and user turns the detector has
    not judged yet. A session never counts more follow-ups than it had answers."""
    table = TurnEvent._meta.db_table
    kind_list = ", ".join(["%s"] * len(kinds))
    sql = f"""
        SELECT arm, COUNT(*), SUM(answered),
               SUM(CASE WHEN counted > answered THEN answered ELSE counted END),
               SUM(CASE WHEN deepening > answered THEN answered ELSE deepening END),
               SUM(user_turns), SUM(user_turns * user_turns), SUM(unjudged)
        FROM (
            SELECT arm, session_id,
                SUM(CASE WHEN role = 'assistant' AND (error = '' OR fallback) THEN 1 ELSE 0 END)
                    AS answered,
                SUM(CASE WHEN role = 'user' AND follow_up_kind IN ({kind_list}) THEN 1 ELSE 0 END)
                    AS counted,
                SUM(CASE WHEN role = 'user' AND follow_up_kind = 'deepening' THEN 1 ELSE 0 END)
                    AS deepening,
                SUM(CASE WHEN role = 'user' THEN 1 ELSE 0 END) AS user_turns,
                SUM(CASE WHEN role = 'user' AND follow_up_kind IS NULL THEN 1 ELSE 0 END) AS unjudged
            FROM {table}
            WHERE experiment_id = %s AND source <> 'probe' AND occurred_at >= %s AND occurred_at < %s
            GROUP BY arm, session_id
        ) AS per_session
        GROUP BY arm
    """
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The per-session aggregate spills to disk at the default 4 MB: 0.56× the time at
            # 10^7 events (bench/stats.py), for up to ~400 MB across the parallel workers.
            cursor.execute("SET LOCAL work_mem = '64MB'")
        cursor.execute(sql, [*kinds, experiment.pk, start, end])
        rows = cursor.fetchall()
    return _arms(rows, FOLLOW_UP_FIELDS)


RATIO_FIELDS = ("n", "sum_x", "sum_y", "sum_x2", "sum_y2", "sum_xy")
MEAN_FIELDS = ("n", "total", "total_squares")


def outcome_stats_by_arm(
    *, experiment: Experiment, metric: str, start: datetime, end: datetime, per: str
) -> dict[str, dict[str, float]]:
    """Per arm, the sufficient statistics of an outcome metric.

    per="user": one row per user (x = the user's sum of values, y = their number of outcomes; an
    outcome without a user stands for its own unit), as RatioStats fields. per="outcome": every
    outcome a unit, as MeanStats fields."""
    table = OutcomeEvent._meta.db_table
    where = "experiment_id = %s AND metric = %s AND occurred_at >= %s AND occurred_at < %s"
    params = [experiment.pk, metric, start, end]
    if per == "outcome":
        sql = f"SELECT arm, COUNT(*), SUM(value), SUM(value * value) FROM {table} WHERE {where} GROUP BY arm"
        names = MEAN_FIELDS
    else:
        sql = f"""
            SELECT arm, COUNT(*), SUM(x), SUM(y), SUM(x * x), SUM(y * y), SUM(x * y)
            FROM (
                SELECT arm, CASE WHEN user_id = '' THEN 'unit:' || unit_id ELSE user_id END AS unit,
                       SUM(value) AS x, COUNT(*) AS y
                FROM {table} WHERE {where}
                GROUP BY arm, CASE WHEN user_id = '' THEN 'unit:' || unit_id ELSE user_id END
            ) AS per_unit
            GROUP BY arm
        """
        names = RATIO_FIELDS
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return _arms(rows, names)


def assigned_units_by_arm(*, experiment: Experiment, start: datetime, end: datetime) -> dict[str, int]:
    """Randomisation units seen on each arm (users; sessions without a user), for the SRM check."""
    table = TurnEvent._meta.db_table
    # DISTINCT in a subquery, not COUNT(DISTINCT ...): a parallel scan and a hash aggregate instead
    # of walking an index in arm order and sorting each arm's units (0.22× at 10^7 events).
    sql = f"""
        SELECT arm, COUNT(*) FROM (
            SELECT DISTINCT arm, CASE WHEN user_id = '' THEN 'session:' || session_id ELSE user_id END
            FROM {table}
            WHERE experiment_id = %s AND source <> 'probe' AND role = 'user'
              AND occurred_at >= %s AND occurred_at < %s
        ) AS units
        GROUP BY arm
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [experiment.pk, start, end])
        rows = cursor.fetchall()
    return {arm: counts["units"] for arm, counts in _arms(rows, ("units",)).items()}
