from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Avg, Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import TruncHour
from django.utils import timezone

from canary.models import (
    CanaryAnalysis,
    Experiment,
    FollowUpReview,
    OutcomeEvent,
    Probe,
    ProbeRun,
    ProbeSet,
    TrafficShareChange,
    TurnEvent,
)
from engines.input_checks import text_problem
from engines.routing import ARMS, BUCKETS
from registry.errors import ApplicationError, NotFoundError
from registry.models import AuditAction, AuditLog, ModelVersion


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
    out: dict[str, dict[str, int | float]] = {arm: dict.fromkeys(names, 0) for arm in ARMS}
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


def follow_up_counts_by_arm(*, window: TrafficWindow, kinds: Sequence[str]) -> dict[str, dict[str, int]]:
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
    return _arms(rows, FOLLOW_UP_FIELDS)


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
    return int(_number(answered)), int(_number(follow_ups))


RATIO_FIELDS = ("n", "sum_x", "sum_y", "sum_x2", "sum_y2", "sum_xy")
MEAN_FIELDS = ("n", "total", "total_squares")


def outcome_stats_by_arm(*, window: TrafficWindow, metric: str, per: str) -> dict[str, dict[str, float]]:
    """Per arm, the sufficient statistics of an outcome metric.

    per="user": one row per user (x = the user's sum of values, y = their number of outcomes; an
    outcome without a user stands for its own unit), as RatioStats fields. per="outcome": every
    outcome a unit, as MeanStats fields."""
    table = OutcomeEvent._meta.db_table
    where = "experiment_id = %s AND metric = %s AND occurred_at >= %s AND occurred_at < %s"
    params = [window.experiment.pk, metric, window.start, window.end]
    if per == "outcome":
        sql = f"SELECT arm, COUNT(*), SUM(value), SUM(value * value) FROM {table} WHERE {where} GROUP BY arm"
        names: tuple[str, ...] = MEAN_FIELDS
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
    return {name: _number(value) for name, value in zip(names, values, strict=True)}


RATIO_CUPED_FIELDS = (
    "n",
    "pre_units",
    "sum_x",
    "sum_y",
    "sum_px",
    "sum_py",
    "sum_x2",
    "sum_y2",
    "sum_px2",
    "sum_py2",
    "sum_xy",
    "sum_x_px",
    "sum_x_py",
    "sum_y_px",
    "sum_y_py",
    "sum_px_py",
)


def _days_before(column: str) -> str:
    """SQL for `column` minus %s days (the one parameter it takes: an int on PostgreSQL, '-N days' on
    SQLite, see `_days_param`)."""
    if connection.vendor == "postgresql":
        return f"{column} - make_interval(days => %s)"
    return f"datetime({column}, %s)"


def _days_param(days: int) -> object:
    return days if connection.vendor == "postgresql" else f"-{int(days)} days"


def _cuped_pre_sums(*, exposed: str, units: str) -> str:
    """The end of a CUPED query, after its CTEs `exposed` (unit, first_at: a unit's first exposure) and
    `units` (arm, unit, x, y: its metric in the window): a CTE `pre` with each unit's same metric over the
    pre-window before its first exposure, in any of the family's experiments (before the start everyone
    was on the baseline), and the per-arm sums of RATIO_CUPED_FIELDS. Its parameters, in order: the
    family, the metric, the pre-window's days (`_days_param`)."""
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
    params = [family, metric, start, end, family, metric, _days_param(pre_days)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        values = cursor.fetchone()
    return {name: _number(value) for name, value in zip(RATIO_CUPED_FIELDS, values, strict=True)}


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
        {_cuped_pre_sums(exposed="exposure", units="post")}
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
        _days_param(pre_days),
    ]
    return sql, params


def outcome_cuped_stats_by_arm(
    *, window: TrafficWindow, metric: str, pre_days: int
) -> dict[str, dict[str, float]]:
    """Per arm, RatioCupedStats fields of an outcome metric per user over the window and each user's
    pre-period covariate: the user's same metric (Σ values, number of outcomes) over the `pre_days` days
    before their first exposure (their first user turn or outcome since the experiment started), from
    the outcome events of all the family's experiments. Units without a user have no history."""
    sql, params = outcome_cuped_sql(window=window, metric=metric, pre_days=pre_days)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return _arms(rows, RATIO_CUPED_FIELDS)


# ---------------------------------------------------------------------------------------------
# Layer 3's one look at its horizon: the first units per arm, by when they entered. A unit counts when
# it was first exposed (its first user turn or outcome of the metric since the experiment started) at
# or after `since` (the later of the plan's registration and the window's start: units first exposed
# before never count), and it enters at its first outcome of the metric in the window (per outcome:
# every outcome of such a unit is a unit of its own, entering when it happened). Ties go by unit id.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class LookProgress:
    """Per arm: the units counted so far, and when the arm's `units`-th one entered (None: not yet)."""

    units: int
    entered: dict[str, int]
    reached_at: dict[str, datetime | None]

    @property
    def cutoff(self) -> datetime | None:
        """When both arms had their `units` (the later arm's moment); None until then."""
        reached = list(self.reached_at.values())
        if any(at is None for at in reached):
            return None
        return max(at for at in reached if at is not None)


def _when(value: object) -> datetime | None:
    """A timestamp from a raw query: SQLite returns text for MAX(...) of a timestamp."""
    if value is None or isinstance(value, datetime):
        return value
    parsed = datetime.fromisoformat(str(value))
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, timezone.utc)


def _look_ctes(
    *, window: TrafficWindow, metric: str, per: str, since: datetime, cutoff: datetime
) -> tuple[str, list[object]]:
    """`exposures` (every user turn and outcome of the metric since the experiment started, by unit) and
    `counted`: each unit (or, per outcome, each outcome) that counts, with its arm, entry time, first
    exposure (`first_at`), position in its arm and (per user) its sums x, y up to `cutoff`. One pass and
    window functions, no join: the plan stays linear even on tables the planner has no statistics of."""
    turns, outcomes = TurnEvent._meta.db_table, OutcomeEvent._meta.db_table
    experiment = window.experiment
    started = experiment.started_at or window.start
    exposures = f"""
        exposures AS (
            SELECT user_id AS unit, occurred_at AS seen_at, '' AS arm, 0 AS in_window, 0.0 AS value, 0 AS id
            FROM {turns}
            WHERE experiment_id = %s AND source <> 'probe' AND role = 'user' AND user_id <> ''
              AND occurred_at >= %s
            UNION ALL
            SELECT {UNIT_KEY}, occurred_at, arm,
                   CASE WHEN occurred_at >= %s AND occurred_at < %s THEN 1 ELSE 0 END, value, id
            FROM {outcomes}
            WHERE experiment_id = %s AND metric = %s AND occurred_at >= %s
        )"""
    params: list[object] = [experiment.pk, started, window.start, window.end, experiment.pk, metric, started]
    if per == "outcome":
        counted = """
        marked AS (SELECT *, MIN(seen_at) OVER (PARTITION BY unit) AS first_at FROM exposures),
        counted AS (
            SELECT arm, id AS unit, seen_at AS entered_at, first_at, value,
                   ROW_NUMBER() OVER (PARTITION BY arm ORDER BY seen_at, id) AS position
            FROM marked WHERE in_window = 1 AND first_at >= %s
        )"""
        return f"WITH {exposures},{counted}", [*params, since]
    counted = """
        per_unit AS (
            SELECT unit, MIN(seen_at) AS first_at,
                   MIN(CASE WHEN in_window = 1 THEN seen_at END) AS entered_at,
                   MIN(CASE WHEN in_window = 1 THEN arm END) AS arm,
                   SUM(CASE WHEN in_window = 1 AND seen_at <= %s THEN value ELSE 0 END) AS x,
                   SUM(CASE WHEN in_window = 1 AND seen_at <= %s THEN 1 ELSE 0 END) AS y
            FROM exposures GROUP BY unit
        ),
        counted AS (
            SELECT arm, unit, entered_at, first_at, x, y,
                   ROW_NUMBER() OVER (PARTITION BY arm ORDER BY entered_at, unit) AS position
            FROM per_unit WHERE entered_at IS NOT NULL AND first_at >= %s
        )"""
    return f"WITH {exposures},{counted}", [*params, cutoff, cutoff, since]


def outcome_look_progress(
    *, window: TrafficWindow, metric: str, per: str, since: datetime, units: int
) -> LookProgress:
    """How far each arm is to the look at `units` per arm (one query)."""
    ctes, params = _look_ctes(window=window, metric=metric, per=per, since=since, cutoff=window.end)
    sql = f"""{ctes}
        SELECT arm, COUNT(*), MAX(CASE WHEN position = %s THEN entered_at END) FROM counted GROUP BY arm"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, units])
        rows = {arm: (int(n), _when(at)) for arm, n, at in cursor.fetchall()}
    return LookProgress(
        units=units,
        entered={arm: rows.get(arm, (0, None))[0] for arm in ARMS},
        reached_at={arm: rows.get(arm, (0, None))[1] for arm in ARMS},
    )


def outcome_look_stats(
    *,
    window: TrafficWindow,
    metric: str,
    per: str,
    since: datetime,
    cutoff: datetime,
    limit: int | None = None,
    cuped_pre_days: int | None = None,
) -> dict[str, dict[str, float]]:
    """Per arm, the sufficient statistics of the first `limit` counted units (all of them: None), over
    their outcomes of the metric in the window up to and including `cutoff`: MeanStats fields per
    outcome, RatioStats fields per user, RatioCupedStats fields with `cuped_pre_days` (each unit's same
    metric over the pre-window before its first exposure, in any of the family's experiments)."""
    ctes, params = _look_ctes(window=window, metric=metric, per=per, since=since, cutoff=cutoff)
    chosen = "position <= %s AND " if limit is not None else ""
    params += [limit] if limit is not None else []
    if per == "outcome":
        sql = f"""{ctes}
            SELECT arm, COUNT(*), SUM(value), SUM(value * value) FROM counted
            WHERE {chosen}entered_at <= %s GROUP BY arm"""
        return _look_rows(sql, [*params, cutoff], MEAN_FIELDS)
    if cuped_pre_days is None:
        sql = f"""{ctes}
            SELECT arm, COUNT(*), SUM(x), SUM(y), SUM(x * x), SUM(y * y), SUM(x * y)
            FROM counted WHERE {chosen}y > 0 GROUP BY arm"""
        return _look_rows(sql, params, RATIO_FIELDS)
    sql = f"""{ctes},
        chosen AS (SELECT unit, arm, first_at, x, y FROM counted WHERE {chosen}y > 0),
        {_cuped_pre_sums(exposed="chosen", units="chosen")}"""
    params += [window.experiment.family, metric, _days_param(cuped_pre_days)]
    return _look_rows(sql, params, RATIO_CUPED_FIELDS)


def _look_rows(sql: str, params: list[object], names: tuple[str, ...]) -> dict[str, dict[str, float]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return _arms(rows, names)


# ---------------------------------------------------------------------------------------------
# Layer 2's one look at its horizon: the first answered questions per arm, by when they were answered.
# An answer counts when its unit (the user, or the session without one) was first exposed (its first
# user turn since the experiment started) at or after `since`; its follow-up is the session's next turn
# (turn index + 1) when that is a user turn of a counted kind. One pass, window functions, no join.
# ---------------------------------------------------------------------------------------------
def _answers_ctes(*, window: TrafficWindow, since: datetime) -> tuple[str, list[object]]:
    table = TurnEvent._meta.db_table
    experiment = window.experiment
    sql = f"""
        WITH marked AS (
            SELECT id, arm, session_id, turn_index, role, occurred_at, error, fallback,
                   CASE WHEN user_id = '' THEN 'session:' || session_id ELSE user_id END AS unit,
                   LEAD(role) OVER (PARTITION BY arm, session_id ORDER BY turn_index) AS next_role,
                   LEAD(turn_index) OVER (PARTITION BY arm, session_id ORDER BY turn_index) AS next_index,
                   LEAD(follow_up_kind) OVER (PARTITION BY arm, session_id ORDER BY turn_index) AS next_kind,
                   LEAD(follow_up_language) OVER (PARTITION BY arm, session_id ORDER BY turn_index)
                       AS next_language
            FROM {table}
            WHERE experiment_id = %s AND source <> 'probe' AND occurred_at >= %s
        ),
        exposed AS (
            SELECT *, MIN(CASE WHEN role = 'user' THEN occurred_at END) OVER (PARTITION BY unit) AS first_at
            FROM marked
        ),
        answers AS (
            SELECT arm, session_id, unit, occurred_at AS entered_at,
                   CASE WHEN next_role = 'user' AND next_index = turn_index + 1 THEN 1 ELSE 0 END AS has_next,
                   next_kind, next_language,
                   ROW_NUMBER() OVER (PARTITION BY arm ORDER BY occurred_at, id) AS position
            FROM exposed
            WHERE role = 'assistant' AND (error = '' OR fallback) AND occurred_at >= %s AND occurred_at < %s
              AND first_at >= %s
        )"""
    return sql, [experiment.pk, experiment.started_at or window.start, window.start, window.end, since]


def answers_look_progress(*, window: TrafficWindow, since: datetime, answers: int) -> LookProgress:
    """How far each arm is to layer 2's look at `answers` answered questions per arm (one query)."""
    ctes, params = _answers_ctes(window=window, since=since)
    sql = f"""{ctes}
        SELECT arm, COUNT(*), MAX(CASE WHEN position = %s THEN entered_at END) FROM answers GROUP BY arm"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, answers])
        rows = {arm: (int(n), _when(at)) for arm, n, at in cursor.fetchall()}
    return LookProgress(
        units=answers,
        entered={arm: rows.get(arm, (0, None))[0] for arm in ARMS},
        reached_at={arm: rows.get(arm, (0, None))[1] for arm in ARMS},
    )


ANSWER_LOOK_FIELDS = (
    "answered",
    "follow_ups",
    "deepening",
    "sessions",
    "user_turns_sum",
    "user_turns_sumsq",
    "unjudged",
)


def answers_look_counts(
    *, window: TrafficWindow, since: datetime, kinds: Sequence[str], limit: int | None = None
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, tuple[int, int]]]]:
    """Per arm, over the first `limit` counted answers (all of them: None), `FollowUpCounts` fields: the
    answers, their follow-ups of the counted `kinds` and deepening ones, their sessions with Σ and Σ² of
    the counted answers per session (the look's "turns per session"), and next user turns the detector
    has not judged; and per arm and language, (next turns the trained detector judged, of which of the
    counted kinds)."""
    ctes, params = _answers_ctes(window=window, since=since)
    chosen = "WHERE position <= %s" if limit is not None else ""
    params += [limit] if limit is not None else []
    kind_list = ", ".join(["%s"] * len(kinds))
    sql = f"""{ctes},
        chosen AS (SELECT * FROM answers {chosen}),
        per_session AS (
            SELECT arm, session_id, COUNT(*) AS answered,
                   SUM(CASE WHEN has_next = 1 AND next_kind IN ({kind_list}) THEN 1 ELSE 0 END) AS follow_ups,
                   SUM(CASE WHEN has_next = 1 AND next_kind = 'deepening' THEN 1 ELSE 0 END) AS deepening,
                   SUM(CASE WHEN has_next = 1 AND next_kind IS NULL THEN 1 ELSE 0 END) AS unjudged
            FROM chosen GROUP BY arm, session_id
        )
        SELECT arm, SUM(answered), SUM(follow_ups), SUM(deepening), COUNT(*), SUM(answered),
               SUM(answered * answered), SUM(unjudged)
        FROM per_session GROUP BY arm"""
    languages = f"""{ctes},
        chosen AS (SELECT * FROM answers {chosen})
        SELECT arm, next_language, COUNT(*),
               SUM(CASE WHEN next_kind IN ({kind_list}) THEN 1 ELSE 0 END)
        FROM chosen WHERE has_next = 1 AND next_language IS NOT NULL GROUP BY arm, next_language"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *kinds])
        counts = _arms(cursor.fetchall(), ANSWER_LOOK_FIELDS)
        cursor.execute(languages, [*params, *kinds])
        judged: dict[str, dict[str, tuple[int, int]]] = {arm: {} for arm in ARMS}
        for arm, language, n, x in cursor.fetchall():
            judged[arm][language] = (int(n), int(x or 0))
    return counts, judged


def answers_split(*, window: TrafficWindow, since: datetime) -> dict[str, int | float]:
    """The counted answers per arm and Σ over units of (the unit's answers)², both arms together: what
    the clustered sample-ratio check of layer 2 reads."""
    ctes, params = _answers_ctes(window=window, since=since)
    sql = f"""{ctes},
        per_unit AS (SELECT arm, unit, COUNT(*) AS a FROM answers GROUP BY arm, unit)
        SELECT arm, SUM(a), SUM(a * a) FROM per_unit GROUP BY arm"""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = _arms(cursor.fetchall(), ("answers", "squares"))
    return {
        "baseline": rows["baseline"]["answers"],
        "candidate": rows["candidate"]["answers"],
        "sum_squares": sum(row["squares"] for row in rows.values()),
    }


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
    return {arm: counts["units"] for arm, counts in _arms(rows, ("units",)).items()}


def experiment_for_gate(
    *, candidate: ModelVersion, baseline: ModelVersion | None, name: str | None = None
) -> Experiment | None:
    """The experiment whose traffic judges `candidate` against a gate run's `baseline` (so that every
    layer compares the same two versions): the one named, else its running or paused experiment, else
    the latest one. A named experiment that compares other versions is an error naming the field."""
    if name:
        experiment = Experiment.objects.select_related("baseline", "candidate").filter(name=name).first()
        if experiment is None:
            raise ApplicationError(f"No experiment named {name!r}.", fields={"experiment": ["unknown"]})
        if experiment.candidate_id != candidate.pk:
            raise ApplicationError(
                f"Experiment {name!r} does not have {candidate.ref} as its candidate.",
                fields={"experiment": [f"its candidate is {experiment.candidate.ref}"]},
            )
        if baseline is not None and experiment.baseline_id != baseline.pk:
            raise ApplicationError(
                f"Experiment {name!r} compares with {experiment.baseline.ref}, the run with {baseline.ref}.",
                fields={"experiment": [f"its baseline is {experiment.baseline.ref}"]},
            )
        return experiment
    experiments = Experiment.objects.filter(candidate=candidate).exclude(status=Experiment.Status.DRAFT)
    if baseline is not None:
        experiments = experiments.filter(baseline=baseline)
    return (
        experiments.filter(status__in=Experiment.ACTIVE).first()
        or experiments.order_by("-started_at", "-pk").first()
    )


# ---------------------------------------------------------------------------------------------
# What a gate report shows when a traffic layer did not pass (its attribution). Each comes with
# the SQL that reproduces it, to paste into psql.
# ---------------------------------------------------------------------------------------------
def sql_text(sql: str, params: Sequence[object]) -> str:
    """A query with its parameters written in."""
    for param in params:
        value = param.isoformat() if isinstance(param, datetime) else param
        literal = "'" + value.replace("'", "''") + "'" if isinstance(value, str) else str(value)
        sql = sql.replace("%s", literal, 1)
    return " ".join(sql.split())


def _user_traffic(window: TrafficWindow) -> QuerySet[TurnEvent]:
    return TurnEvent.objects.filter(
        experiment=window.experiment, occurred_at__gte=window.start, occurred_at__lt=window.end
    ).exclude(source=TurnEvent.Source.PROBE)


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
        _user_traffic(window)
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
    turns = _user_traffic(window)
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
    answers = _user_traffic(window).filter(role="assistant")
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


def analyses_latest(*, experiment: Experiment, limit: int = 10) -> list[CanaryAnalysis]:
    return list(experiment.analyses.order_by("-created_at", "-pk")[:limit])


# ---------------------------------------------------------------------------------------------
# The API's experiment and probe-set listings: a fixed number of queries whatever the page size.
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# The follow-up review queue: people's labels of live user turns against the detector's kinds.
# ---------------------------------------------------------------------------------------------
def follow_up_reviews_first(*, experiment: Experiment) -> QuerySet[FollowUpReview]:
    """One label per reviewed turn of the experiment, the first given (a later reviewer's label of the
    same turn is a second opinion and does not count twice)."""
    return FollowUpReview.objects.filter(experiment=experiment, is_first=True)


def follow_up_review_confusion(*, experiment: Experiment) -> dict[str, dict[str, int]]:
    """Reviewer's label -> the detector's kind of the turn -> reviewed turns: one grouped query on the
    reviews' own index, whatever the traffic."""
    rows = (
        follow_up_reviews_first(experiment=experiment)
        .values_list("label", "detector_kind")
        .annotate(turns=Count("pk"))
        .order_by()
    )
    confusion: dict[str, dict[str, int]] = {}
    for label, kind, turns in rows:
        confusion.setdefault(label, {})[kind] = turns
    return confusion


def follow_up_review_confusion_by_language(
    *, experiment: Experiment, detector: str
) -> dict[str, dict[str, dict[str, int]]]:
    """Per language the trained detector `detector` stored on the turn: reviewer's label -> the
    detector's kind -> reviewed turns (first labels only; turns judged by a rule or by another
    detector version are left out, their errors are not this detector's). One grouped query."""
    rows = (
        follow_up_reviews_first(experiment=experiment)
        .filter(turn__follow_up_detector=detector, turn__follow_up_language__isnull=False)
        .values_list("turn__follow_up_language", "label", "detector_kind")
        .annotate(turns=Count("pk"))
        .order_by()
    )
    confusion: dict[str, dict[str, dict[str, int]]] = {}
    for language, label, kind, turns in rows:
        confusion.setdefault(language, {}).setdefault(label, {})[kind] = turns
    return confusion


def follow_up_review_pairs(*, experiment: Experiment) -> dict[str, dict[str, int]]:
    """First label -> a second reviewer's label -> turns, over the turns labelled twice or more (each
    second opinion against the turn's first label; one grouped query)."""
    first = FollowUpReview.objects.filter(turn=OuterRef("turn"), is_first=True).values("label")[:1]
    rows = (
        FollowUpReview.objects.filter(experiment=experiment, is_first=False)
        .annotate(first_label=Subquery(first))
        .values_list("first_label", "label")
        .annotate(turns=Count("pk"))
        .order_by()
    )
    pairs: dict[str, dict[str, int]] = {}
    for first_label, label, turns in rows:
        pairs.setdefault(first_label, {})[label] = turns
    return pairs


def experiments_for_review() -> QuerySet[Experiment]:
    """Every experiment with its number of reviewed turns (one query)."""
    return experiment_list().annotate(reviews=Count("follow_up_reviews"))


def follow_up_reviews_count(*, experiment: Experiment, reviewer_name: str) -> int:
    return FollowUpReview.objects.filter(experiment=experiment, reviewer_name=reviewer_name).count()


# The dashboard's history: the traffic windows (each share the candidate had), the per-arm
# figures of each, and the experiment's audited actions.
# ---------------------------------------------------------------------------------------------
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
        for row in _user_traffic(window)
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
        followed_up = {arm: _number(n) for arm, n in cursor.fetchall()}
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
