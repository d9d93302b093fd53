"""The gate's one look at a traffic layer's horizon (layer 3's units, layer 2's answered questions):
which units or answers count, how far each arm has come, and the statistics of the first ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from django.utils import timezone

from canary.models import OutcomeEvent, TurnEvent
from canary.selectors.experiments import TrafficWindow
from canary.selectors.sql import ByArm, sql_by_arm
from canary.selectors.stats import (
    MEAN_FIELDS,
    RATIO_CUPED_FIELDS,
    RATIO_FIELDS,
    UNIT_KEY,
    FollowUpTally,
    cuped_pre_sums,
    days_param,
)
from engines.routing import ARMS
from engines.stats.sufficient import MeanStats, RatioCupedStats, RatioStats


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
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)


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
) -> ByArm[MeanStats | RatioStats | RatioCupedStats]:
    """Per arm, the sufficient statistics of the first `limit` counted units (all of them: None), over
    their outcomes of the metric in the window up to and including `cutoff`: MeanStats per outcome,
    RatioStats per user, RatioCupedStats with `cuped_pre_days` (each unit's same
    metric over the pre-window before its first exposure, in any of the family's experiments)."""
    ctes, params = _look_ctes(window=window, metric=metric, per=per, since=since, cutoff=cutoff)
    chosen = "position <= %s AND " if limit is not None else ""
    params += [limit] if limit is not None else []
    if per == "outcome":
        sql = f"""{ctes}
            SELECT arm, COUNT(*), SUM(value), SUM(value * value) FROM counted
            WHERE {chosen}entered_at <= %s GROUP BY arm"""
        return _look_rows(sql, [*params, cutoff], MeanStats, MEAN_FIELDS)
    if cuped_pre_days is None:
        sql = f"""{ctes}
            SELECT arm, COUNT(*), SUM(x), SUM(y), SUM(x * x), SUM(y * y), SUM(x * y)
            FROM counted WHERE {chosen}y > 0 GROUP BY arm"""
        return _look_rows(sql, params, RatioStats, RATIO_FIELDS)
    sql = f"""{ctes},
        chosen AS (SELECT unit, arm, first_at, x, y FROM counted WHERE {chosen}y > 0),
        {cuped_pre_sums(exposed="chosen", units="chosen")}"""
    params += [window.experiment.family, metric, days_param(cuped_pre_days)]
    return _look_rows(sql, params, RatioCupedStats, RATIO_CUPED_FIELDS)


def _look_rows(
    sql: str,
    params: list[object],
    kind: type[MeanStats | RatioStats | RatioCupedStats],
    names: tuple[str, ...],
) -> ByArm[MeanStats | RatioStats | RatioCupedStats]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return sql_by_arm(rows, kind, names)


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
) -> tuple[ByArm[FollowUpTally], dict[str, dict[str, tuple[int, int]]]]:
    """Per arm, over the first `limit` counted answers (all of them: None), a FollowUpTally: the
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
        counts = sql_by_arm(cursor.fetchall(), FollowUpTally, ANSWER_LOOK_FIELDS)
        cursor.execute(languages, [*params, *kinds])
        judged: dict[str, dict[str, tuple[int, int]]] = {arm: {} for arm in ARMS}
        for arm, language, n, x in cursor.fetchall():
            judged[arm][language] = (int(n), int(x or 0))
    return counts, judged


@dataclass(frozen=True, kw_only=True)
class AnswerTally:
    """The counted answers per arm, and Σ over units of (the unit's answers)² over both arms."""

    baseline: int
    candidate: int
    sum_squares: int | float


def answers_split(*, window: TrafficWindow, since: datetime) -> AnswerTally:
    """The counted answers per arm and Σ over units of (the unit's answers)², both arms together: what
    the clustered sample-ratio check of layer 2 reads."""
    ctes, params = _answers_ctes(window=window, since=since)
    sql = f"""{ctes},
        per_unit AS (SELECT arm, unit, COUNT(*) AS a FROM answers GROUP BY arm, unit)
        SELECT arm, SUM(a), SUM(a * a) FROM per_unit GROUP BY arm"""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = sql_by_arm(cursor.fetchall(), _ArmAnswers, ("answers", "squares"))
    return AnswerTally(
        baseline=int(rows.baseline.answers),
        candidate=int(rows.candidate.answers),
        sum_squares=rows.baseline.squares + rows.candidate.squares,
    )


@dataclass(frozen=True)
class _ArmAnswers:
    answers: int | float
    squares: int | float
