"""Gate traffic layers at scale: layers 2 and 3 over 10^6 sessions / 10^7 turn events in PostgreSQL.

In one run (ratios from one run on one machine, so they are fair on a noisy one):
  * data: --sessions chat sessions (default 10^6) of 3 to 7 question/answer pairs each (~10 turn
    events a session, ~10^7 in all) on one running experiment at 10 %, one `review_hours` outcome
    per session (~10^6), generated inside PostgreSQL (INSERT ... SELECT ... generate_series,
    deterministic from hashes of the session number). Kept between runs: a marker table records
    the size; --regenerate builds them again;
  * bare SQL: the selectors that feed the layers, called directly: `follow_up_counts_by_arm`
    (layer 2), `outcome_stats_by_arm(per="user")` + `assigned_units_by_arm` (layer 3); and one
    plain pass over each table (`SELECT arm, COUNT(*) ... GROUP BY arm`), what reading the events
    once costs;
  * layer 2 / layer 3: `follow_up_rate_layer_run` / `business_value_layer_run` end to end on a
    claimed gate run, as a worker runs them (the labelling pass inside layer 2 finds nothing to
    label: the turns are labelled as the detector does in production, as they arrive);
  * attribution: what a non-pass adds to each layer (`_follow_up_attribution`,
    `_business_attribution`), timed on their own since the generated data pass both layers;
Each is run --repeat times (default 5) in a new order each round after --warmup rounds; medians.
Prints the medians; layer / its bare SQL (what the layer costs beyond the aggregation that feeds
it; ~1 means the SQL is the layer) and each layer's seconds outside SQL (Python, judge, storing,
from a log of the queries it ran); each aggregation / one plain pass (what the aggregation costs
beyond reading the rows once); the verdicts and numbers the layers produced; with --explain the
selectors' plans (EXPLAIN ANALYZE, BUFFERS).

    python bench/stats.py [--sessions 1000000] [--repeat 5] [--warmup 1] [--regenerate]
                          [--explain] [--json]

Runs against PostgreSQL at --postgres (default postgres@127.0.0.1:5432) in database --database
(default evalhub_bench_stats, created when missing and kept, data included: ~3 GB at the default
size). Generating the default size takes several minutes on 2 cores; later runs reuse it.
Nothing else is touched: no Redis, the Celery broker is a scratch folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

EXPERIMENT = "bench-stats"
FAMILY = "bench-stats-assistant"
SUITE = "bench-stats-suite"
METRIC = "review_hours"
TRAFFIC_PERCENT = 10
WINDOW_DAYS = 14
MARKER = "bench_stats_marker"
SAVED_INDEXES = "bench_stats_saved_indexes"
# Bumped when the generated data change shape, so an older data set is rebuilt.
DATA_VERSION = 1


# ---------------------------------------------------------------------------------------------
# Set-up
# ---------------------------------------------------------------------------------------------
def database_create(*, server: str, name: str) -> bool:
    """Create database `name` on `server` when missing; True when created."""
    import psycopg

    with psycopg.connect(f"{server.rstrip('/')}/postgres", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            return False
        conn.execute(f'CREATE DATABASE "{name}"')
        return True


def django_setup(*, database_url: str, var_dir: Path) -> None:
    for name in ("CELERY_BROKER_URL", "EVALHUB_TELEMETRY_REDIS_URL", "EVALHUB_WEBHOOK_URL"):
        os.environ.pop(name, None)  # never a Redis or a webhook from the caller's environment
    os.environ.update(
        DJANGO_SETTINGS_MODULE="evalhub.settings.local",
        DATABASE_URL=database_url,
        DEBUG="0",
        EVALHUB_VAR_DIR=str(var_dir),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    import django

    django.setup()
    # gate_run_start hands the run to the (scratch, filesystem) broker; no worker reads it.
    logging.getLogger("kombu").setLevel(logging.ERROR)


def fixtures_get_or_create():
    """Two versions of a family of its own, a tiny suite and a running experiment at 10 %."""
    from django.conf import settings

    from canary.models import Experiment
    from canary.services.experiments import experiment_create, experiment_start
    from registry.actors import SYSTEM
    from registry.models import ModelVersion
    from registry.services.suites import eval_suite_import
    from registry.services.versions import model_version_register
    from registry.suite_format import SuiteItem

    versions = {}
    for label in ("v1", "v2"):
        version = ModelVersion.objects.filter(family=FAMILY, label=label).first()
        if version is None:
            # Never loaded: an empty checkpoint folder, where registration requires one to be.
            (Path(settings.EVALHUB_MODEL_DIR) / "bench-stats" / label).mkdir(parents=True, exist_ok=True)
            version = model_version_register(
                family=FAMILY,
                label=label,
                backend_kind="builtin",
                backend_config={"path": f"bench-stats/{label}"},
                actor=SYSTEM,
                baseline=versions.get("v1"),
            )
        versions[label] = version
    suite, _ = eval_suite_import(
        name=SUITE,
        items=[SuiteItem(id="q1", input="What is the notice period?", label="notice")],
        actor=SYSTEM,
    )
    experiment = Experiment.objects.filter(name=EXPERIMENT).first()
    if experiment is None:
        experiment = experiment_create(
            name=EXPERIMENT,
            baseline=versions["v1"],
            candidate=versions["v2"],
            traffic_percent=TRAFFIC_PERCENT,
            actor=SYSTEM,
        )
        experiment = experiment_start(experiment=experiment, actor=SYSTEM, reason="bench")
    return versions["v1"], versions["v2"], suite, experiment


# ---------------------------------------------------------------------------------------------
# Data, generated inside PostgreSQL
# ---------------------------------------------------------------------------------------------
def _h(expression: str, modulo: int) -> str:
    """SQL: a deterministic hash of a text expression in 0 .. modulo - 1."""
    return f"mod(hashtext({expression})::bigint + 2147483648, {modulo})"


def _sessions_cte(*, users: int, t0: datetime) -> str:
    """SQL for the sessions numbered %(lo)s .. %(hi)s: user, arm, number of pairs, start time."""
    span = (WINDOW_DAYS - 1) * 86400  # every session ends inside the window
    return f"""
        WITH s AS (
            SELECT n, 'user-' || {_h("'user:' || n", users)} AS user_id,
                   3 + {_h("'pairs:' || n", 5)} AS pairs,
                   TIMESTAMPTZ '{t0.isoformat()}' + make_interval(secs => {_h("'start:' || n", span)})
                       AS started
            FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS n
        ), a AS (
            SELECT s.*, CASE WHEN {_h("'arm:' || user_id", 100)} < {TRAFFIC_PERCENT}
                             THEN 'candidate' ELSE 'baseline' END AS arm
            FROM s
        )
    """


def _turns_sql(*, users: int, t0: datetime) -> str:
    """Turn events of a range of sessions: user / assistant alternating, user turns labelled
    (turn 0 new; later: 15 % follow_up, 10 % deepening, else new), 1 % of answers errored."""
    kind = _h("'kind:' || a.n || ':' || t", 100)
    return (
        _sessions_cte(users=users, t0=t0)
        + f"""
        INSERT INTO canary_turnevent (
            experiment_id, event_id, session_id, user_id, arm, version_id, turn_index, role, text,
            latency_ms, error, fallback, source, follow_up_kind, occurred_at, received_at, streamed,
            abandoned, follow_up_detector)
        SELECT %(experiment)s, 't-' || a.n || '-' || t, 'session-' || a.n, a.user_id, a.arm,
               CASE WHEN a.arm = 'candidate' THEN %(candidate)s ELSE %(baseline)s END,
               t,
               CASE WHEN mod(t, 2) = 0 THEN 'user' ELSE 'assistant' END,
               CASE WHEN mod(t, 2) = 0 THEN 'question ' ELSE 'answer ' END || (t / 2),
               CASE WHEN mod(t, 2) = 1 THEN 200 + {_h("'latency:' || a.n || ':' || t", 1800)} END,
               CASE WHEN mod(t, 2) = 1 AND {_h("'error:' || a.n || ':' || t", 100)} = 0
                    THEN 'upstream timeout' ELSE '' END,
               false, 'proxy',
               CASE WHEN mod(t, 2) = 1 THEN NULL
                    WHEN t = 0 THEN 'new'
                    WHEN {kind} < 15 THEN 'follow_up'
                    WHEN {kind} < 25 THEN 'deepening'
                    ELSE 'new' END,
               a.started + make_interval(secs => 40 * t),
               a.started + make_interval(secs => 40 * t + 1),
               false, false, ''
        FROM a CROSS JOIN LATERAL generate_series(0, 2 * a.pairs - 1) AS t
        """
    )


def _outcomes_sql(*, users: int, t0: datetime) -> str:
    """One review_hours outcome per session, 2 to 4 hours, the candidate %(effect)s hours faster."""
    return (
        _sessions_cte(users=users, t0=t0)
        + f"""
        INSERT INTO canary_outcomeevent (
            experiment_id, event_id, unit_id, user_id, arm, metric, value, occurred_at, received_at)
        SELECT %(experiment)s, 'o-' || a.n, 'contract-' || a.n, a.user_id, a.arm, '{METRIC}',
               2 + {_h("'value:' || a.n", 2001)} / 1000.0
                 - CASE WHEN a.arm = 'candidate' THEN %(effect)s ELSE 0 END,
               a.started + make_interval(secs => 40 * 2 * a.pairs),
               a.started + make_interval(secs => 40 * 2 * a.pairs + 1)
        FROM a
        """
    )


def marker_get(cursor) -> dict | None:
    cursor.execute(
        f"CREATE TABLE IF NOT EXISTS {MARKER} (sessions bigint, effect double precision, "
        "data_version int, t0 timestamptz, generated_seconds double precision, generated_at timestamptz)"
    )
    cursor.execute(
        f"SELECT sessions, effect, data_version, t0, generated_seconds, generated_at FROM {MARKER}"
    )
    row = cursor.fetchone()
    if row is None:
        return None
    names = ("sessions", "effect", "data_version", "t0", "generated_seconds", "generated_at")
    return dict(zip(names, row, strict=True))


def _secondary_indexes_drop(cursor, tables: tuple[str, ...]) -> None:
    """Drop the tables' unique constraints and indexes (not the primary keys) for the load, saving
    their definitions first in a table of their own, so a load that dies half-way leaves what
    `_secondary_indexes_restore` needs."""
    cursor.execute(f"CREATE TABLE IF NOT EXISTS {SAVED_INDEXES} (tbl text, name text, kind text, def text)")
    cursor.execute(f"SELECT COUNT(*) FROM {SAVED_INDEXES}")
    if cursor.fetchone()[0] == 0:  # else: a previous load died, its saved definitions stand
        for table in tables:
            cursor.execute(
                f"INSERT INTO {SAVED_INDEXES} "
                "SELECT %s, conname, 'constraint', pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = %s::regclass AND contype = 'u'",
                [table, table],
            )
            cursor.execute(
                f"INSERT INTO {SAVED_INDEXES} "
                "SELECT %s, i.relname, 'index', pg_get_indexdef(x.indexrelid) FROM pg_index x "
                "JOIN pg_class i ON i.oid = x.indexrelid "
                "WHERE x.indrelid = %s::regclass AND NOT x.indisprimary "
                "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)",
                [table, table],
            )
    cursor.execute(f"SELECT tbl, name, kind FROM {SAVED_INDEXES}")
    for table, name, kind in cursor.fetchall():
        if kind == "constraint":
            cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT IF EXISTS "{name}"')
        else:
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')


def _secondary_indexes_restore(cursor, log: Callable[[str], None]) -> None:
    cursor.execute(f"CREATE TABLE IF NOT EXISTS {SAVED_INDEXES} (tbl text, name text, kind text, def text)")
    cursor.execute(f"SELECT tbl, name, kind, def FROM {SAVED_INDEXES} ORDER BY kind, name")
    saved = cursor.fetchall()
    cursor.execute("SET maintenance_work_mem = '1GB'")
    for table, name, kind, definition in saved:
        started = time.perf_counter()
        cursor.execute("SELECT 1 FROM pg_class WHERE relname = %s", [name])
        if cursor.fetchone():
            continue
        if kind == "constraint":
            cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
        else:
            cursor.execute(definition)
        log(f"   {kind} {name} rebuilt in {time.perf_counter() - started:.1f} s")
    cursor.execute("RESET maintenance_work_mem")
    cursor.execute(f"DELETE FROM {SAVED_INDEXES}")


def data_ensure(
    *, experiment, baseline, candidate, sessions: int, effect: float, chunk: int, regenerate: bool, log
) -> dict:
    """The generated data, built when missing, of another size, or asked for; returns the marker.

    Loads in chunks of `chunk` sessions, one transaction each, with the secondary indexes dropped
    and rebuilt at the end (several times faster than maintaining them row by row), then ANALYZE."""
    from django.db import connection

    from canary.models import Experiment, OutcomeEvent, TurnEvent

    tables = (TurnEvent._meta.db_table, OutcomeEvent._meta.db_table)
    with connection.cursor() as cursor:
        _secondary_indexes_restore(cursor, log)  # a previous load that died half-way
        marker = marker_get(cursor)
        wanted = {"sessions": sessions, "effect": effect, "data_version": DATA_VERSION}
        if not regenerate and marker and all(marker[k] == v for k, v in wanted.items()):
            log(
                f"data: reusing {sessions} sessions generated {marker['generated_at']:%Y-%m-%d %H:%M} UTC "
                f"in {marker['generated_seconds']:.0f} s (--regenerate to build them again)"
            )
            return {**marker, "reused": True}
        log(f"data: generating {sessions} sessions in chunks of {chunk} (a few minutes per 10^6 on 2 cores)")
        started = time.perf_counter()
        t0 = (datetime.now(UTC) - timedelta(days=WINDOW_DAYS + 1)).replace(minute=0, second=0, microsecond=0)
        cursor.execute(f"DELETE FROM {MARKER}")
        # Only this bench's data live in this database (CASCADE: the review labels on its turns).
        cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
        _secondary_indexes_drop(cursor, tables)
        params = {
            "experiment": experiment.pk,
            "baseline": baseline.pk,
            "candidate": candidate.pk,
            "effect": effect,
        }
        turns_sql = _turns_sql(users=max(1, sessions // 2), t0=t0)
        outcomes_sql = _outcomes_sql(users=max(1, sessions // 2), t0=t0)
        for lo in range(1, sessions + 1, chunk):
            hi = min(sessions, lo + chunk - 1)
            mark = time.perf_counter()
            cursor.execute(turns_sql, {**params, "lo": lo, "hi": hi})
            turns = cursor.rowcount
            cursor.execute(outcomes_sql, {**params, "lo": lo, "hi": hi})
            log(
                f"   sessions {lo:>8} .. {hi:>8}: {turns} turn events, {cursor.rowcount} outcomes "
                f"in {time.perf_counter() - mark:.1f} s"
            )
        loaded = time.perf_counter() - started
        log(f"   rows loaded in {loaded:.1f} s; rebuilding the indexes")
        _secondary_indexes_restore(cursor, log)
        mark = time.perf_counter()
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")  # visibility map too, as an older table has
        log(f"   VACUUM ANALYZE in {time.perf_counter() - mark:.1f} s")
        seconds = time.perf_counter() - started
        cursor.execute(
            f"INSERT INTO {MARKER} VALUES (%s, %s, %s, %s, %s, now())",
            [sessions, effect, DATA_VERSION, t0, seconds],
        )
    # The window the layers read starts at the share change, before the data.
    Experiment.objects.filter(pk=experiment.pk).update(
        started_at=t0 - timedelta(hours=1), share_since=t0 - timedelta(hours=1)
    )
    log(f"data: generated in {seconds:.0f} s ({loaded:.0f} s rows, {seconds - loaded:.0f} s indexes)")
    return {**wanted, "t0": t0, "generated_seconds": seconds, "reused": False}


def table_sizes() -> dict[str, dict]:
    from django.db import connection

    out = {}
    with connection.cursor() as cursor:
        for table in ("canary_turnevent", "canary_outcomeevent"):
            cursor.execute(
                "SELECT (SELECT COUNT(*) FROM " + table + "), pg_total_relation_size(%s), "
                "pg_relation_size(%s), pg_indexes_size(%s)",
                [table, table, table],
            )
            rows, total, heap, indexes = cursor.fetchone()
            out[table] = {"rows": rows, "total": total, "heap": heap, "indexes": indexes}
    return out


def data_counts(*, experiment) -> dict[str, int]:
    """Sessions (one outcome each) and users, from the outcome table (10x smaller)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*), COUNT(DISTINCT user_id) FROM canary_outcomeevent WHERE experiment_id = %s",
            [experiment.pk],
        )
        sessions, users = cursor.fetchone()
    return {"sessions": sessions, "users": users}


# ---------------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------------
class SqlLog:
    """Every query run inside the block, with its seconds (a Django execute wrapper)."""

    def __init__(self):
        self.queries: list[tuple[str, list, float]] = []

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.queries.append((sql, params, time.perf_counter() - started))

    def __enter__(self):
        from django.db import connection

        self._wrapper = connection.execute_wrapper(self)
        self._wrapper.__enter__()
        return self

    def __exit__(self, *exc):
        self._wrapper.__exit__(*exc)

    @property
    def seconds(self) -> float:
        return sum(q[2] for q in self.queries)


def gate_run_prepare(*, candidate, suite):
    """A gate run requiring the two traffic layers, claimed by this process as a worker claims it."""
    from gate.layers.registry import gate_policy_parse
    from gate.services.gate_runs import gate_run_claim, gate_run_start
    from registry.actors import SYSTEM

    run = gate_run_start(
        candidate=candidate,
        suite=suite,
        actor=SYSTEM,
        # CUPED off: layer 3 is compared with the plain per-user aggregation below; its CUPED query
        # (`outcome_cuped_stats_by_arm`) is timed as a task of its own.
        policy_overrides={
            "required_layers": ["follow_up_rate", "business_value"],
            "business_metric": METRIC,
            "business_cuped": False,
        },
    )
    run = gate_run_claim(gate_run_id=run.pk, worker="bench")
    return run, gate_policy_parse(run.policy_config)


def plain_scan(*, table: str, experiment) -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT arm, COUNT(*) FROM {table} WHERE experiment_id = %s GROUP BY arm", [experiment.pk]
        )
        return dict(cursor.fetchall())


def tasks_build(*, run, policy, attribution: bool) -> dict[str, Callable[[], object]]:
    """Name -> a call to time. Each reads the experiment afresh, as a worker would."""

    from canary.models import Experiment
    from canary.selectors.experiments import traffic_window_get
    from canary.selectors.stats import (
        assigned_units_by_arm,
        follow_up_counts_by_arm,
        outcome_cuped_stats_by_arm,
        outcome_stats_by_arm,
    )
    from gate.judges.business_value import BusinessValuePolicy
    from gate.judges.follow_up_rate import FollowUpRatePolicy
    from gate.layers import business_value, follow_up_rate
    from gate.layers.base import LayerContext, Progress
    from gate.layers.registry import layer_get

    experiment = run.experiment
    kinds = policy.section(FollowUpRatePolicy).follow_up_kinds
    per = policy.section(BusinessValuePolicy).business_per
    ctx = LayerContext(
        run=run, policy=policy, items=[], versions=[], progress=Progress(totals={}, report=print)
    )

    def window():
        return traffic_window_get(experiment=Experiment.objects.get(pk=experiment.pk))

    def layer(name):
        def call():
            with SqlLog() as log:
                result = layer_get(name).run(ctx)
            return result, log

        return call

    tasks = {
        "scan turn events": lambda: plain_scan(table="canary_turnevent", experiment=experiment),
        "scan outcomes": lambda: plain_scan(table="canary_outcomeevent", experiment=experiment),
        "follow_up_counts_by_arm": lambda: follow_up_counts_by_arm(window=window(), kinds=kinds),
        "outcome_stats_by_arm": lambda: outcome_stats_by_arm(window=window(), metric=METRIC, per=per),
        "outcome_cuped_stats_by_arm": lambda: outcome_cuped_stats_by_arm(
            window=window(), metric=METRIC, pre_days=14
        ),
        "assigned_units_by_arm": lambda: assigned_units_by_arm(window=window()),
        "layer 2 follow_up_rate": layer("follow_up_rate"),
        "layer 3 business_value": layer("business_value"),
    }
    if attribution:

        def follow_up_attribution():
            result = follow_up_rate.follow_up_rate_measure(window=window(), policy=policy)
            return follow_up_rate.attribution_build(window=window(), kinds=kinds, result=result)

        def business_attribution():
            units = assigned_units_by_arm(window=window())
            section = policy.section(BusinessValuePolicy)
            result = business_value.business_value_measure(
                window=window(), policy=section, metric=METRIC, units=units
            )
            return business_value.attribution_build(window=window(), metric=METRIC, result=result)

        tasks["attribution layer 2"] = follow_up_attribution
        tasks["attribution layer 3"] = business_attribution
    return tasks


def measure(
    *, tasks: dict, repeat: int, warmup: int, log
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict]:
    """Rounds of every task in a new order each round (a seeded shuffle, so no task always follows
    the same one; the attributions last: they read what the layers stored). Returns seconds per
    task and, for the layers, seconds outside SQL (warm-up rounds dropped), and the last results."""
    core = [name for name in tasks if not name.startswith("attribution")]
    last = [name for name in tasks if name.startswith("attribution")]
    times: dict[str, list[float]] = {name: [] for name in tasks}
    outside_sql: dict[str, list[float]] = {}
    results: dict[str, object] = {}
    shuffler = random.Random(20261201)
    for round_ in range(warmup + repeat):
        order = shuffler.sample(core, len(core)) + last
        mark = time.perf_counter()
        for name in order:
            started = time.perf_counter()
            results[name] = tasks[name]()
            elapsed = time.perf_counter() - started
            if round_ < warmup:
                continue
            times[name].append(elapsed)
            if isinstance(results[name], tuple) and isinstance(results[name][1], SqlLog):
                outside_sql.setdefault(name, []).append(elapsed - results[name][1].seconds)
        label = f"warm-up round {round_ + 1}" if round_ < warmup else f"round {round_ + 1 - warmup}"
        log(f"   {label}: {time.perf_counter() - mark:.1f} s")
    return times, outside_sql, results


def explain(*, experiment, policy, log) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of the queries the selectors run, captured as they run them."""
    from django.db import connection, transaction

    from canary.selectors.experiments import traffic_window_get
    from canary.selectors.stats import assigned_units_by_arm, follow_up_counts_by_arm, outcome_stats_by_arm
    from gate.judges.business_value import BusinessValuePolicy
    from gate.judges.follow_up_rate import FollowUpRatePolicy

    window = traffic_window_get(experiment=experiment)
    with SqlLog() as sql_log:
        follow_up_counts_by_arm(window=window, kinds=policy.section(FollowUpRatePolicy).follow_up_kinds)
        outcome_stats_by_arm(
            window=window, metric=METRIC, per=policy.section(BusinessValuePolicy).business_per
        )
        assigned_units_by_arm(window=window)
    # A selector's own session settings (SET LOCAL work_mem) apply to the query after them.
    settings = [sql for sql, _, _ in sql_log.queries if sql.lstrip().upper().startswith("SET ")]
    queries = [query for query in sql_log.queries if query[0] not in settings]
    for name, (sql, params, _) in zip(
        ("follow_up_counts_by_arm", "outcome_stats_by_arm", "assigned_units_by_arm"), queries, strict=True
    ):
        with transaction.atomic(), connection.cursor() as cursor:
            if name == "follow_up_counts_by_arm":
                for setting in settings:
                    cursor.execute(setting)
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            plan = "\n".join(f"      {row[0]}" for row in cursor.fetchall())
        log(f"\n   EXPLAIN ANALYZE {name}:\n{plan}")


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------
def _mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"


def _f(value, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def layer_summary(name: str, result, sql_log: SqlLog) -> list[str]:
    """The verdict and key numbers a layer stored, as a sanity check of the figures."""
    from gate.layers.registry import layer_get

    details = layer_get(result.layer).details(result)
    lines = [
        f"   {name}: verdict {result.verdict}; {result.metric} {_f(result.estimate)} "
        f"[{_f(result.ci_low)}, {_f(result.ci_high)}], threshold {result.threshold}"
    ]
    lines += [f"      reason: {reason}" for reason in result.reasons]
    judged = details.judged
    if result.layer == "follow_up_rate":
        for arm, a in (("candidate", judged.candidate), ("baseline", judged.baseline)):
            lines.append(
                f"      {arm:9} rate {_f(a.rate)} [{_f(a.ci_low)}, {_f(a.ci_high)}] "
                f"= {a.follow_ups}/{a.answered} answered; {a.sessions} sessions, "
                f"{_f(a.turns_per_session_mean, '.2f')} user turns/session"
            )
        d = judged.difference
        lines.append(
            f"      difference {_f(d and d.estimate, '+.4f')} [{_f(d and d.ci_low, '+.4f')}, "
            f"{_f(d and d.ci_high, '+.4f')}] (margin {d and d.margin}); labelled now "
            f"{details.labelled_now}, unjudged {details.inputs.unjudged_turns}"
        )
    else:
        improvement, srm = judged.improvement, judged.srm
        lines.append(
            f"      {judged.method}: improvement {_f(improvement and improvement.estimate)} h "
            f"[{_f(improvement and improvement.ci_low)}, {_f(improvement and improvement.ci_high)}]; "
            f"control {judged.baseline}, treatment {judged.candidate}"
        )
        lines.append(f"      assigned units {details.inputs.assigned_units}, SRM p {_f(srm and srm.p_value)}")
    lines.append(
        f"      SQL in its last run: {len(sql_log.queries)} queries, {sql_log.seconds:.3f} s; "
        "its own timings: " + ", ".join(f"{k} {v:.3f} s" for k, v in details.timings.items())
    )
    if result.verdict != "pass":
        lines.append("      (not a pass: its wall time includes the attribution)")
    return lines


def figures_compute(*, times: dict[str, list[float]], outside_sql: dict[str, list[float]]) -> dict:
    """Medians, the layer 3 bare SQL (its two selectors, summed per round) and the ratios."""
    med = {name: statistics.median(values) for name, values in times.items()}
    layer3_sql = statistics.median(
        a + b for a, b in zip(times["outcome_stats_by_arm"], times["assigned_units_by_arm"], strict=True)
    )
    layer2, layer3 = med["layer 2 follow_up_rate"], med["layer 3 business_value"]
    scan = med["scan turn events"]
    ratios = {
        "layer 2 / follow_up_counts_by_arm": layer2 / med["follow_up_counts_by_arm"],
        "layer 3 / (outcome_stats_by_arm + assigned_units_by_arm)": layer3 / layer3_sql,
        "follow_up_counts_by_arm / scan turn events": med["follow_up_counts_by_arm"] / scan,
        "assigned_units_by_arm / scan turn events": med["assigned_units_by_arm"] / scan,
        "outcome_stats_by_arm / scan outcomes": med["outcome_stats_by_arm"] / med["scan outcomes"],
        "outcome_stats_by_arm / scan turn events": med["outcome_stats_by_arm"] / scan,
        "outcome_cuped_stats_by_arm / outcome_stats_by_arm": med["outcome_cuped_stats_by_arm"]
        / med["outcome_stats_by_arm"],
    }
    if "attribution layer 2" in med:
        ratios["attribution layer 2 / layer 2"] = med["attribution layer 2"] / layer2
        ratios["attribution layer 3 / layer 3"] = med["attribution layer 3"] / layer3
    return {
        "median_seconds": med,
        "min_seconds": {name: min(values) for name, values in times.items()},
        "max_seconds": {name: max(values) for name, values in times.items()},
        "layer3_sql_median_seconds": layer3_sql,
        "outside_sql_median_seconds": {name: statistics.median(v) for name, v in outside_sql.items()},
        "ratios": ratios,
    }


def report_print(*, figures: dict, counts: dict, turns: dict, outcomes: dict, results: dict, log) -> None:
    med, low, high = figures["median_seconds"], figures["min_seconds"], figures["max_seconds"]
    log(
        f"\nevents: {turns['rows']:,} turn events, {counts['sessions']:,} sessions "
        f"({counts['users']:,} users), {outcomes['rows']:,} outcomes"
    )
    log(f"{'':58}{'median s':>10}{'min s':>9}{'max s':>9}")
    for name in med:
        log(f"   {name:55}{med[name]:>10.3f}{low[name]:>9.3f}{high[name]:>9.3f}")
    bare3 = "layer 3 bare SQL (outcome_stats + assigned_units)"
    log(f"   {bare3:55}{figures['layer3_sql_median_seconds']:>10.3f}")
    outside = figures["outside_sql_median_seconds"]
    for name, seconds in sorted(outside.items()):
        log(f"   {name + ', outside SQL (Python, judge, store)':55}{seconds:>10.3f}")
    log("\nratios of medians:")
    for name, value in figures["ratios"].items():
        log(f"   {name:62}{value:>7.2f}")
    log("\nwhat the layers produced (last round):")
    for key, label in (("layer 2 follow_up_rate", "layer 2"), ("layer 3 business_value", "layer 3")):
        result, sql_log = results[key]
        for line in layer_summary(label, result, sql_log):
            log(line)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sessions", type=int, default=1_000_000, help="chat sessions (~10 turn events each)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="measured rounds (medians over them)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first")
    parser.add_argument("--regenerate", action="store_true", help="build the data again even if present")
    parser.add_argument("--chunk", type=int, default=100_000, help="sessions per INSERT while generating")
    parser.add_argument(
        "--effect", type=float, default=0.1, help="review hours the candidate saves per outcome (data shape)"
    )
    parser.add_argument("--no-attribution", action="store_true", help="do not time the attribution")
    parser.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of the selectors")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line too")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432", help="server URL")
    parser.add_argument("--database", default="evalhub_bench_stats", help="database (created, kept)")
    args = parser.parse_args()

    def log(line: str) -> None:
        print(line, flush=True)

    created = database_create(server=args.postgres, name=args.database)
    database_url = f"{args.postgres.rstrip('/')}/{args.database}".replace("postgresql://", "postgres://", 1)
    var_dir = Path(tempfile.mkdtemp(prefix="evalhub-bench-stats-"))
    try:
        django_setup(database_url=database_url, var_dir=var_dir)
        from django.core.management import call_command

        log(
            f"gate traffic layers at scale: database {args.database} ({'created' if created else 'existing'})"
        )
        call_command("migrate", verbosity=0)
        baseline, candidate, suite, experiment = fixtures_get_or_create()
        marker = data_ensure(
            experiment=experiment,
            baseline=baseline,
            candidate=candidate,
            sessions=args.sessions,
            effect=args.effect,
            chunk=args.chunk,
            regenerate=args.regenerate,
            log=log,
        )
        sizes = table_sizes()
        turns, outcomes = sizes["canary_turnevent"], sizes["canary_outcomeevent"]
        log(
            f"   canary_turnevent    {turns['rows']:>11,} rows  {_mb(turns['total']):>9} "
            f"(heap {_mb(turns['heap'])}, indexes {_mb(turns['indexes'])})"
        )
        log(
            f"   canary_outcomeevent {outcomes['rows']:>11,} rows  {_mb(outcomes['total']):>9} "
            f"(heap {_mb(outcomes['heap'])}, indexes {_mb(outcomes['indexes'])})"
        )
        counts = data_counts(experiment=experiment)

        run, policy = gate_run_prepare(candidate=candidate, suite=suite)
        tasks = tasks_build(run=run, policy=policy, attribution=not args.no_attribution)
        log(
            f"\nmeasuring: {len(tasks)} calls per round, {args.warmup} warm-up + {args.repeat} rounds, "
            f"a new order each round (gate run {run.pk}, claimed as worker 'bench'); "
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        )
        times, outside_sql, results = measure(tasks=tasks, repeat=args.repeat, warmup=args.warmup, log=log)
        figures = figures_compute(times=times, outside_sql=outside_sql)
        report_print(figures=figures, counts=counts, turns=turns, outcomes=outcomes, results=results, log=log)
        log(f"\nload average {os.getloadavg()[0]:.2f} at the end")
        if args.explain:
            explain(experiment=run.experiment, policy=policy, log=log)
        if args.json:
            print(
                json.dumps(
                    {
                        **counts,
                        "turn_events": turns["rows"],
                        "outcomes": outcomes["rows"],
                        "sizes_bytes": sizes,
                        "generated_seconds": marker["generated_seconds"],
                        "data_reused": marker["reused"],
                        "repeat": args.repeat,
                        **figures,
                        "verdicts": {
                            "follow_up_rate": results["layer 2 follow_up_rate"][0].verdict,
                            "business_value": results["layer 3 business_value"][0].verdict,
                        },
                    },
                    default=str,
                )
            )
    finally:
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # Django may not be set up yet
            pass
        shutil.rmtree(var_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
