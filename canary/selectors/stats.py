"""Sufficient statistics for the gate's traffic layers, aggregated in SQL over a time window of one
experiment's user traffic (probe traffic excluded). One pass over the events each; the result has one
row per arm, so nothing in Python grows with the traffic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from canary.models import Experiment, OutcomeEvent, TurnEvent
from canary.selectors.experiments import TrafficWindow
from canary.selectors.sql import ByArm, sql_arms, sql_by_arm, sql_number
from engines.routing import ARMS
from engines.stats.sufficient import RATIO_CUPED_SUMS, MeanStats, RatioCupedStats, RatioStats

FOLLOW_UP_FIELDS = (
    "sessions",
    "answered",
    "follow_ups",
    "deepening",
    "user_turns_sum",
    "user_turns_sumsq",
    "unjudged",
)


@dataclass(frozen=True, kw_only=True)
class FollowUpTally:
    """One arm's follow-up counts as the event store has them (layer 2 judges them as FollowUpCounts)."""

    sessions: int
    answered: int
    follow_ups: int
    deepening: int
    user_turns_sum: int | float
    user_turns_sumsq: int | float
    unjudged: int


def follow_up_counts_by_arm(*, window: TrafficWindow, kinds: Sequence[str]) -> ByArm[FollowUpTally]:
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
        cursor.execute(sql, [*kinds, window.experiment.pk, window.start, window.end])
        rows = cursor.fetchall()
    return sql_by_arm(rows, FollowUpTally, FOLLOW_UP_FIELDS)


def follow_ups_judged_by_language(
    *, window: TrafficWindow, kinds: Sequence[str]
) -> tuple[dict[str, dict[str, tuple[int, int]]], list[str]]:
    """Per arm and language, (user turns the trained detector judged, of which of the counted `kinds`),
    and the detector versions that judged them: what layer 2 corrects for the detector's errors. As in
    `follow_up_counts_by_arm`, a session never counts more judged turns than it had answers in the
    window (a turn whose answer came before the window's start)."""
    table = TurnEvent._meta.db_table
    kind_list = ", ".join(["%s"] * len(kinds))
    where = "experiment_id = %s AND source <> 'probe' AND occurred_at >= %s AND occurred_at < %s"
    sql = f"""
        SELECT j.arm, j.language, j.detector,
               SUM(CASE WHEN j.n > a.answered THEN a.answered ELSE j.n END),
               SUM(CASE WHEN j.x > a.answered THEN a.answered ELSE j.x END)
        FROM (
            SELECT arm, session_id, follow_up_language AS language, follow_up_detector AS detector,
                   COUNT(*) AS n, SUM(CASE WHEN follow_up_kind IN ({kind_list}) THEN 1 ELSE 0 END) AS x
            FROM {table}
            WHERE {where} AND role = 'user' AND follow_up_language IS NOT NULL
            GROUP BY arm, session_id, follow_up_language, follow_up_detector
        ) AS j JOIN (
            SELECT arm, session_id,
                   SUM(CASE WHEN role = 'assistant' AND (error = '' OR fallback) THEN 1 ELSE 0 END)
                       AS answered
            FROM {table}
            WHERE {where}
            GROUP BY arm, session_id
        ) AS a ON a.arm = j.arm AND a.session_id = j.session_id
        GROUP BY j.arm, j.language, j.detector
    """
    params = [window.experiment.pk, window.start, window.end]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*kinds, *params, *params])
        rows = cursor.fetchall()
    judged: dict[str, dict[str, tuple[int, int]]] = {arm: {} for arm in ARMS}
    versions = set()
    for arm, language, detector, n, x in rows:
        before = judged[arm].get(language, (0, 0))
        judged[arm][language] = (before[0] + int(n), before[1] + int(x or 0))
        versions.add(detector)
    return judged, sorted(versions)


def follow_up_counts_of_family(
    *, family: str, kinds: Sequence[str], start: datetime, end: datetime
) -> tuple[int, int]:
    """(answered questions, follow-ups of the counted `kinds`) over the user traffic of every experiment
    of `family` from `start` to `end`, both arms together, a session never counting more follow-ups than
    answers: what sizes layer 2's horizon from the family's rate before an experiment starts."""
    turns, experiments = TurnEvent._meta.db_table, Experiment._meta.db_table
    kind_list = ", ".join(["%s"] * len(kinds))
    sql = f"""
        SELECT SUM(answered), SUM(CASE WHEN counted > answered THEN answered ELSE counted END)
        FROM (
            SELECT experiment_id, session_id,
                SUM(CASE WHEN role = 'assistant' AND (error = '' OR fallback) THEN 1 ELSE 0 END) AS answered,
                SUM(CASE WHEN role = 'user' AND follow_up_kind IN ({kind_list}) THEN 1 ELSE 0 END) AS counted
            FROM {turns}
            WHERE experiment_id IN (SELECT id FROM {experiments} WHERE family = %s) AND source <> 'probe'
              AND occurred_at >= %s AND occurred_at < %s
            GROUP BY experiment_id, session_id
        ) AS per_session
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*kinds, family, start, end])
        answered, follow_ups = cursor.fetchone()
    return int(sql_number(answered)), int(sql_number(follow_ups))


RATIO_FIELDS = ("n", "sum_x", "sum_y", "sum_x2", "sum_y2", "sum_xy")
MEAN_FIELDS = ("n", "total", "total_squares")


def outcome_stats_by_arm(*, window: TrafficWindow, metric: str, per: str) -> ByArm[RatioStats | MeanStats]:
    """Per arm, the sufficient statistics of an outcome metric.

    per="user": one row per user (x = the user's sum of values, y = their number of outcomes; an
    outcome without a user stands for its own unit), as RatioStats. per="outcome": every outcome a
    unit, as MeanStats."""
    table = OutcomeEvent._meta.db_table
    where = "experiment_id = %s AND metric = %s AND occurred_at >= %s AND occurred_at < %s"
    params = [window.experiment.pk, metric, window.start, window.end]
    if per == "outcome":
        sql = f"SELECT arm, COUNT(*), SUM(value), SUM(value * value) FROM {table} WHERE {where} GROUP BY arm"
        names: tuple[str, ...] = MEAN_FIELDS
        kind: type[RatioStats] | type[MeanStats] = MeanStats
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
        names, kind = RATIO_FIELDS, RatioStats
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return sql_by_arm(rows, kind, names)


UNIT_KEY = "CASE WHEN user_id = '' THEN 'unit:' || unit_id ELSE user_id END"


def outcome_stats_of_family(
    *, family: str, metric: str, per: str, start: datetime, end: datetime
) -> dict[str, float]:
    """The sufficient statistics of an outcome metric over every experiment of `family` from `start` to
    `end`, both arms together (per="user": one row per user across experiments, as RatioStats fields;
    per="outcome": MeanStats fields). Sizes the fixed horizon from the data before an experiment starts."""
    outcomes, experiments = OutcomeEvent._meta.db_table, Experiment._meta.db_table
    where = (
        f"o.experiment_id IN (SELECT id FROM {experiments} WHERE family = %s) "
        "AND o.metric = %s AND o.occurred_at >= %s AND o.occurred_at < %s"
    )
    if per == "outcome":
        sql = f"SELECT 'all', COUNT(*), SUM(value), SUM(value * value) FROM {outcomes} o WHERE {where}"
        names: tuple[str, ...] = MEAN_FIELDS
    else:
        sql = f"""
            SELECT 'all', COUNT(*), SUM(x), SUM(y), SUM(x * x), SUM(y * y), SUM(x * y)
            FROM (SELECT SUM(value) AS x, COUNT(*) AS y FROM {outcomes} o WHERE {where} GROUP BY {UNIT_KEY})
                AS per_unit
        """
        names = RATIO_FIELDS
    with connection.cursor() as cursor:
        cursor.execute(sql, [family, metric, start, end])
        (_, *values) = cursor.fetchone()
    return {name: sql_number(value) for name, value in zip(names, values, strict=True)}


RATIO_CUPED_FIELDS = ("n", "pre_units", *RATIO_CUPED_SUMS)


def _days_before(column: str) -> str:
    """SQL for `column` minus %s days (the one parameter it takes: an int on PostgreSQL, '-N days' on
    SQLite, see `days_param`)."""
    if connection.vendor == "postgresql":
        return f"{column} - make_interval(days => %s)"
    return f"datetime({column}, %s)"


def days_param(days: int) -> object:
    return days if connection.vendor == "postgresql" else f"-{int(days)} days"


def cuped_pre_sums(*, exposed: str, units: str) -> str:
    """The end of a CUPED query, after its CTEs `exposed` (unit, first_at: a unit's first exposure) and
    `units` (arm, unit, x, y: its metric in the window): a CTE `pre` with each unit's same metric over the
    pre-window before its first exposure, in any of the family's experiments (before the start everyone
    was on the baseline), and the per-arm sums of RATIO_CUPED_FIELDS. Its parameters, in order: the
    family, the metric, the pre-window's days (`days_param`)."""
    outcomes, experiments = OutcomeEvent._meta.db_table, Experiment._meta.db_table
    return f"""pre AS (
            SELECT e.unit, SUM(o.value) AS px, COUNT(*) AS py
            FROM {exposed} e JOIN {outcomes} o ON o.user_id = e.unit
            WHERE o.experiment_id IN (SELECT id FROM {experiments} WHERE family = %s) AND o.metric = %s
              AND o.occurred_at < e.first_at AND o.occurred_at >= {_days_before("e.first_at")}
            GROUP BY e.unit
        )
        SELECT arm, COUNT(*), SUM(has_pre), SUM(x), SUM(y), SUM(px), SUM(py),
               SUM(x * x), SUM(y * y), SUM(px * px), SUM(py * py),
               SUM(x * y), SUM(x * px), SUM(x * py), SUM(y * px), SUM(y * py), SUM(px * py)
        FROM (
            -- A unit without pre-period data stays in with px = py = 0 (as GrowthBook does).
            SELECT u.arm, u.x, u.y, COALESCE(pre.px, 0) AS px, COALESCE(pre.py, 0) AS py,
                   CASE WHEN pre.py IS NULL THEN 0 ELSE 1 END AS has_pre
            FROM {units} u LEFT JOIN pre ON pre.unit = u.unit
        ) AS per_unit
        GROUP BY arm"""


def outcome_cuped_stats_of_family(
    *, family: str, metric: str, start: datetime, end: datetime, pre_days: int
) -> dict[str, float]:
    """RatioCupedStats fields of `metric` per user over every experiment of `family` from `start` to
    `end` (both arms together), each user's covariate their same metric over the `pre_days` before their
    first outcome there: a pretend experiment on the history before a start, whose CUPED variance
    reduction sizes the horizon a CUPED-adjusted test needs (`gate.services.horizons`)."""
    outcomes, experiments = OutcomeEvent._meta.db_table, Experiment._meta.db_table
    family_ids = f"SELECT id FROM {experiments} WHERE family = %s"
    sql = f"""
        WITH post AS (
            SELECT {UNIT_KEY} AS unit, MIN(occurred_at) AS first_at, SUM(value) AS x, COUNT(*) AS y
            FROM {outcomes}
            WHERE experiment_id IN ({family_ids}) AND metric = %s AND occurred_at >= %s AND occurred_at < %s
            GROUP BY {UNIT_KEY}
        ),
        pre AS (
            SELECT p.unit, SUM(o.value) AS px, COUNT(*) AS py
            FROM post p JOIN {outcomes} o ON o.user_id = p.unit
            WHERE o.experiment_id IN ({family_ids}) AND o.metric = %s AND o.occurred_at < p.first_at
              AND o.occurred_at >= {_days_before("p.first_at")}
            GROUP BY p.unit
        )
        SELECT COUNT(*), SUM(has_pre), SUM(x), SUM(y), SUM(px), SUM(py),
               SUM(x * x), SUM(y * y), SUM(px * px), SUM(py * py),
               SUM(x * y), SUM(x * px), SUM(x * py), SUM(y * px), SUM(y * py), SUM(px * py)
        FROM (
            SELECT post.x, post.y, COALESCE(pre.px, 0) AS px, COALESCE(pre.py, 0) AS py,
                   CASE WHEN pre.py IS NULL THEN 0 ELSE 1 END AS has_pre
            FROM post LEFT JOIN pre ON pre.unit = post.unit
        ) AS per_unit
    """
    params = [family, metric, start, end, family, metric, days_param(pre_days)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        values = cursor.fetchone()
    return {name: sql_number(value) for name, value in zip(RATIO_CUPED_FIELDS, values, strict=True)}


def outcome_cuped_sql(*, window: TrafficWindow, metric: str, pre_days: int) -> tuple[str, list[object]]:
    """The query behind `outcome_cuped_stats_by_arm` and its parameters."""
    turns, outcomes = TurnEvent._meta.db_table, OutcomeEvent._meta.db_table
    experiment = window.experiment
    since = experiment.started_at or window.start
    sql = f"""
        WITH exposure AS (
            -- A user's first exposure: their first user turn or outcome since the experiment started.
            SELECT unit, MIN(seen_at) AS first_at FROM (
                SELECT user_id AS unit, occurred_at AS seen_at FROM {turns}
                WHERE experiment_id = %s AND source <> 'probe' AND role = 'user' AND user_id <> ''
                  AND occurred_at >= %s
                UNION ALL
                SELECT user_id, occurred_at FROM {outcomes}
                WHERE experiment_id = %s AND metric = %s AND user_id <> '' AND occurred_at >= %s
            ) AS seen
            GROUP BY unit
        ),
        post AS (
            SELECT arm, {UNIT_KEY} AS unit, SUM(value) AS x, COUNT(*) AS y FROM {outcomes}
            WHERE experiment_id = %s AND metric = %s AND occurred_at >= %s AND occurred_at < %s
            GROUP BY arm, {UNIT_KEY}
        ),
        {cuped_pre_sums(exposed="exposure", units="post")}
    """
    params: list[object] = [
        experiment.pk,
        since,
        experiment.pk,
        metric,
        since,
        experiment.pk,
        metric,
        window.start,
        window.end,
        experiment.family,
        metric,
        days_param(pre_days),
    ]
    return sql, params


def outcome_cuped_stats_by_arm(
    *, window: TrafficWindow, metric: str, pre_days: int
) -> ByArm[RatioCupedStats]:
    """Per arm, the RatioCupedStats of an outcome metric per user over the window and each user's
    pre-period covariate: the user's same metric (Σ values, number of outcomes) over the `pre_days` days
    before their first exposure (their first user turn or outcome since the experiment started), from
    the outcome events of all the family's experiments. Units without a user have no history."""
    sql, params = outcome_cuped_sql(window=window, metric=metric, pre_days=pre_days)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return sql_by_arm(rows, RatioCupedStats, RATIO_CUPED_FIELDS)


def assigned_units_by_arm(*, window: TrafficWindow) -> dict[str, int]:
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
        cursor.execute(sql, [window.experiment.pk, window.start, window.end])
        rows = cursor.fetchall()
    return {arm: counts["units"] for arm, counts in sql_arms(rows, ("units",)).items()}
