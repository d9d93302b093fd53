"""The gate's traffic layers, computed from a canary experiment's user traffic:

- layer 2, follow-up rate: follow-ups per answered question on each arm (`gate.judges.follow_up_rate`);
- layer 3, business value: the policy's outcome metric, candidate against baseline
  (`gate.judges.business_value`), with the sample-ratio check against the configured split.

The traffic window runs from the experiment's last share change (a unit's arm is stable only
since then) to the moment the layer runs, or to the experiment's end. Sufficient statistics come
from SQL (`canary.selectors`); a failing layer carries an attribution in three levels
(phenomenon, data, system), each with the query that reproduces it.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Avg, Count, Q
from django.db.models.functions import TruncHour
from django.utils import timezone

from canary.models import Experiment, OutcomeEvent, TurnEvent
from canary.selectors import (
    assigned_units_by_arm,
    follow_up_counts_by_arm,
    outcome_stats_by_arm,
    probe_run_latest,
)
from engines.routing import BASELINE, BUCKETS, CANDIDATE
from gate.judges.verdict import ERROR, INSUFFICIENT
from gate.models import GateRun, LayerResult
from gate.policy import GatePolicyConfig
from gate.services.claims import gate_run_assert_held
from registry.errors import ApplicationError
from registry.models import ModelVersion

if TYPE_CHECKING:  # scipy: the judges load only when a layer runs
    from engines.stats.sufficient import MeanStats, RatioStats
    from gate.judges.business_value import BusinessValueResult
    from gate.judges.follow_up_rate import FollowUpRateResult

Layer = LayerResult.Layer
# Share of user turns the detector may still owe (answers not stored yet) before layer 2 waits.
MAX_UNJUDGED_SHARE = 0.05
EXAMPLES = 10


def gate_experiment_find(
    *, candidate: ModelVersion, baseline: ModelVersion | None, name: str | None = None
) -> Experiment | None:
    """The experiment whose traffic judges `candidate` against the run's `baseline` (so that every
    layer compares the same two versions): the one named, else its running or paused experiment,
    else the latest one."""
    if name:
        experiment = Experiment.objects.filter(name=name).first()
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


def traffic_window(*, experiment: Experiment, now: datetime | None = None) -> tuple[datetime, datetime]:
    """From the last share change to the end, the pause, or now."""
    start = experiment.share_since or experiment.started_at or experiment.created_at
    end = experiment.ended_at or experiment.paused_at or now or timezone.now()
    return start, end


def window_share(*, experiment: Experiment) -> float | None:
    """The candidate's share over the traffic window, for the sample-ratio check; None for an
    all-or-nothing split, which has no ratio to check."""
    share = experiment.window_buckets / BUCKETS
    return share if 0 < share < 1 else None


def _inputs(*, experiment: Experiment, start: datetime, end: datetime) -> dict:
    return {
        "experiment": experiment.name,
        "experiment_status": experiment.status,
        "baseline": experiment.baseline.ref,
        "candidate": experiment.candidate.ref,
        "traffic_percent": experiment.traffic_percent,
        "window_traffic_percent": experiment.window_buckets * 100 / BUCKETS,
        "window_start": start.isoformat(),
        "window_end": end.isoformat(),
    }


def _store(*, run: GateRun, layer: str, started: float, **fields) -> LayerResult:
    with transaction.atomic():
        gate_run_assert_held(run)
        result, _ = LayerResult.objects.update_or_create(
            gate_run=run,
            layer=layer,
            defaults={**fields, "wall_seconds": time.perf_counter() - started, "device": "cpu"},
        )
    return result


def _no_experiment(*, run: GateRun, layer: str, metric: str, threshold, started: float) -> LayerResult:
    return _store(
        run=run,
        layer=layer,
        started=started,
        verdict=INSUFFICIENT,
        metric=metric,
        threshold=threshold,
        reasons=[
            f"no canary experiment compares {run.candidate.ref} with "
            f"{run.baseline.ref if run.baseline else 'a baseline'}: start one "
            "(POST /api/v1/canary/experiments/) and let it collect traffic"
        ],
        details={"inputs": {"experiment": None}},
    )


def _sql_text(sql: str, params: list) -> str:
    """A query with its parameters written in, to paste into psql."""
    for param in params:
        value = param.isoformat() if isinstance(param, datetime) else param
        literal = "'" + value.replace("'", "''") + "'" if isinstance(value, str) else str(value)
        sql = sql.replace("%s", literal, 1)
    return " ".join(sql.split())


# ---------------------------------------------------------------------------------------------
# Layer 2: follow-up rate
# ---------------------------------------------------------------------------------------------
def follow_up_rate_measure(
    *, experiment: Experiment, policy: GatePolicyConfig, start: datetime, end: datetime
) -> tuple[FollowUpRateResult, dict[str, dict[str, int]]]:
    """Layer 2's judgement of a window from the stored detector labels (it labels nothing), and the
    per-arm counts from SQL it rests on, `unjudged` turns included. For the layer and dashboards."""
    from gate.judges.follow_up_rate import FollowUpCounts, follow_up_rate_judge

    counts = follow_up_counts_by_arm(
        experiment=experiment, start=start, end=end, kinds=policy.follow_up_kinds
    )

    def arm(name: str) -> FollowUpCounts:
        return FollowUpCounts(**{k: int(v) for k, v in counts[name].items() if k != "unjudged"})

    result = follow_up_rate_judge(
        candidate=arm(CANDIDATE),
        baseline=arm(BASELINE),
        max_rate=policy.follow_up_max,
        decide_on=policy.follow_up_decide_on,
        margin=policy.follow_up_margin,
        min_answered=policy.follow_up_min_answered,
        confidence=policy.confidence,
    )
    return result, counts


def follow_up_rate_layer_run(*, run: GateRun, policy: GatePolicyConfig) -> LayerResult:
    from canary.services.followups import followup_thresholds_get, followups_label

    started = time.perf_counter()
    experiment = run.experiment
    if experiment is None:
        return _no_experiment(
            run=run,
            layer=Layer.FOLLOW_UP_RATE,
            metric="follow_up_rate",
            threshold=policy.follow_up_max,
            started=started,
        )
    start, end = traffic_window(experiment=experiment)
    mark = time.perf_counter()
    labelled = followups_label(experiment=experiment, until=end)
    label_seconds = time.perf_counter() - mark
    mark = time.perf_counter()
    result, counts = follow_up_rate_measure(experiment=experiment, policy=policy, start=start, end=end)
    sql_seconds = time.perf_counter() - mark
    verdict, reasons = result.verdict, list(result.reasons)
    unjudged = sum(c["unjudged"] for c in counts.values())
    user_turns = sum(c["user_turns_sum"] for c in counts.values())
    if user_turns and unjudged / user_turns > MAX_UNJUDGED_SHARE and verdict != INSUFFICIENT:
        verdict = INSUFFICIENT
        reasons.append(
            f"the detector still owes {unjudged} of {user_turns} user turns (their answers are not "
            "stored yet); run the gate again in a few minutes"
        )
    summary = result.as_dict()
    details = {
        "inputs": {
            **_inputs(experiment=experiment, start=start, end=end),
            "counted_kinds": list(policy.follow_up_kinds),
            "detector_thresholds": followup_thresholds_get(family=experiment.family).as_dict(),
            "unjudged_turns": unjudged,
        },
        "method": (
            "follow-ups / answered questions per arm, Wilson intervals; non-inferiority on the "
            "Newcombe hybrid score interval of candidate − baseline; probe traffic excluded"
        ),
        **summary,
        "labelled_now": labelled,
        "timings": {"labelling": label_seconds, "aggregation": sql_seconds},
    }
    if verdict != "pass":
        details["attribution"] = _follow_up_attribution(
            experiment=experiment, start=start, end=end, kinds=policy.follow_up_kinds, summary=summary
        )
    candidate = summary["candidate"]
    return _store(
        run=run,
        layer=Layer.FOLLOW_UP_RATE,
        started=started,
        verdict=verdict,
        metric="follow_up_rate",
        estimate=candidate.get("rate"),
        ci_low=candidate.get("ci_low"),
        ci_high=candidate.get("ci_high"),
        threshold=policy.follow_up_max,
        reasons=reasons,
        details=details,
    )


def _follow_up_attribution(
    *, experiment: Experiment, start: datetime, end: datetime, kinds, summary: dict
) -> dict:
    turns = TurnEvent.objects.filter(
        experiment=experiment, occurred_at__gte=start, occurred_at__lt=end
    ).exclude(source=TurnEvent.Source.PROBE)
    hourly = (
        turns.annotate(hour=TruncHour("occurred_at"))
        .values("hour", "arm")
        .annotate(
            answered=Count("id", filter=Q(role="assistant") & (Q(error="") | Q(fallback=True))),
            follow_ups=Count("id", filter=Q(role="user", follow_up_kind__in=list(kinds))),
        )
        .order_by("hour", "arm")
    )
    windows = [
        {
            "hour": row["hour"].isoformat(),
            "arm": row["arm"],
            "answered": row["answered"],
            "follow_ups": row["follow_ups"],
            "rate": row["follow_ups"] / row["answered"] if row["answered"] else None,
        }
        for row in hourly
    ]
    worst = sorted(
        (w for w in windows if w["arm"] == CANDIDATE and w["rate"] is not None),
        key=lambda w: (-w["rate"], -w["answered"]),
    )[:5]
    follow_ups = list(
        turns.filter(arm=CANDIDATE, role="user", follow_up_kind__in=list(kinds))
        .order_by("-occurred_at")
        .values("session_id", "turn_index", "text")[:EXAMPLES]
    )
    answers = {
        (t["session_id"], t["turn_index"]): t["text"]
        for t in turns.filter(arm=CANDIDATE, session_id__in=[f["session_id"] for f in follow_ups]).values(
            "session_id", "turn_index", "text"
        )
    }
    examples = [
        {
            "session_id": f["session_id"],
            "question": answers.get((f["session_id"], f["turn_index"] - 2), "")[:300],
            "answer": answers.get((f["session_id"], f["turn_index"] - 1), "")[:300],
            "follow_up": f["text"][:300],
        }
        for f in follow_ups
    ]
    table = TurnEvent._meta.db_table
    rate_sql = _sql_text(
        "SELECT arm, SUM(CASE WHEN role = 'assistant' AND (error = '' OR fallback) THEN 1 ELSE 0 END) "
        "AS answered, "
        f"SUM(CASE WHEN role = 'user' AND follow_up_kind IN ({', '.join(repr(k) for k in kinds)}) "
        f"THEN 1 ELSE 0 END) AS follow_ups FROM {table} WHERE experiment_id = %s AND source <> 'probe' "
        "AND occurred_at >= %s AND occurred_at < %s GROUP BY arm",
        [experiment.pk, start, end],
    )
    examples_sql = _sql_text(
        f"SELECT session_id, turn_index, text FROM {table} WHERE experiment_id = %s AND arm = 'candidate' "
        f"AND role = 'user' AND follow_up_kind IN ({', '.join(repr(k) for k in kinds)}) "
        "AND occurred_at >= %s AND occurred_at < %s ORDER BY occurred_at DESC LIMIT 50",
        [experiment.pk, start, end],
    )
    return {
        "phenomenon": {
            "summary": _rate_phrase(summary),
            "by_hour": windows[-48:],
            "reproduce": rate_sql,
        },
        "data": {
            "summary": "the candidate's hours with the highest follow-up rate, its latest follow-ups with "
            "the question and answer before them, and the stress probes that separate the arms",
            "worst_hours": worst,
            "examples": examples,
            "probes": _probe_attribution(experiment=experiment),
            "reproduce": examples_sql,
        },
        "system": _system_attribution(experiment=experiment, start=start, end=end),
    }


def _rate_phrase(summary: dict) -> str:
    candidate, baseline = summary["candidate"], summary.get("baseline") or {}
    if candidate.get("rate") is None:
        return "no answered questions on the candidate arm"
    text = (
        f"candidate follow-up rate {candidate['rate']:.3f} "
        f"({candidate['follow_ups']}/{candidate['answered']})"
    )
    if baseline.get("rate") is not None:
        text += (
            f" vs baseline {baseline['rate']:.3f} ({baseline['follow_ups']}/{baseline['answered']}), "
            f"difference {candidate['rate'] - baseline['rate']:+.3f}"
        )
    return text


def _probe_attribution(*, experiment: Experiment) -> dict:
    run = probe_run_latest(experiment=experiment)
    if run is None:
        return {
            "summary": "no probe run yet",
            "reproduce": f"POST /api/v1/canary/experiments/{experiment.name}/probe-runs/",
        }
    weaknesses = {
        name: {
            key: cell.get(key) for key in ("pairs", "candidate_rate", "baseline_rate", "mcnemar_p", "finding")
        }
        for name, cell in run.report.items()
    }
    return {
        "probe_run": run.pk,
        "by_weakness": weaknesses,
        "summary": "; ".join(
            f"{name}: candidate {cell['candidate_rate']:.2f} vs baseline {cell['baseline_rate']:.2f} "
            f"({cell['finding']})"
            for name, cell in weaknesses.items()
            if name != "all" and cell.get("candidate_rate") is not None
        ),
        "reproduce": f"GET /api/v1/canary/experiments/{experiment.name}/probe-runs/",
    }


def _system_attribution(*, experiment: Experiment, start: datetime, end: datetime) -> dict:
    """Errors, fallbacks and latency on each arm's path in the window."""
    answers = TurnEvent.objects.filter(
        experiment=experiment, role="assistant", occurred_at__gte=start, occurred_at__lt=end
    ).exclude(source=TurnEvent.Source.PROBE)
    counts = {
        row.pop("arm"): row
        for row in answers.values("arm").annotate(
            n=Count("id"),
            errors=Count("id", filter=~Q(error="")),
            fallbacks=Count("id", filter=Q(fallback=True)),
        )
    }
    arms = {}
    for arm in (BASELINE, CANDIDATE):
        latencies = sorted(
            answers.filter(arm=arm, latency_ms__isnull=False, error="")
            .order_by("-occurred_at")
            .values_list("latency_ms", flat=True)[:5000]
        )
        arms[arm] = {
            **counts.get(arm, {"n": 0, "errors": 0, "fallbacks": 0}),
            "latency_p50_ms": latencies[len(latencies) // 2] if latencies else None,
            "latency_p95_ms": latencies[int(len(latencies) * 0.95)] if latencies else None,
        }
    table = TurnEvent._meta.db_table
    return {
        "summary": ", ".join(
            f"{arm}: {a['errors']} errors, {a['fallbacks']} fallbacks of {a['n']} answers, "
            f"p50 {a['latency_p50_ms'] or 0:.0f} ms"
            for arm, a in arms.items()
        ),
        "arms": arms,
        "reproduce": _sql_text(
            f"SELECT arm, COUNT(*), SUM(CASE WHEN error <> '' THEN 1 ELSE 0 END) AS errors, "
            f"SUM(CASE WHEN fallback THEN 1 ELSE 0 END) AS fallbacks FROM {table} "
            "WHERE experiment_id = %s AND role = 'assistant' AND source <> 'probe' "
            "AND occurred_at >= %s AND occurred_at < %s GROUP BY arm",
            [experiment.pk, start, end],
        ),
    }


# ---------------------------------------------------------------------------------------------
# Layer 3: business value
# ---------------------------------------------------------------------------------------------
def outcome_stats(
    *, experiment: Experiment, policy: GatePolicyConfig, metric: str, start: datetime, end: datetime
) -> tuple[RatioStats | MeanStats, RatioStats | MeanStats]:
    """(control, treatment) sufficient statistics of `metric` over a window, as layer 3 judges them:
    RatioStats per user, or MeanStats per outcome (`business_per`)."""
    from engines.stats.sufficient import MeanStats, RatioStats

    kind = RatioStats if policy.business_per == "user" else MeanStats
    stats = outcome_stats_by_arm(
        experiment=experiment, metric=metric, start=start, end=end, per=policy.business_per
    )
    return kind(**stats[BASELINE]), kind(**stats[CANDIDATE])


def business_value_measure(
    *,
    experiment: Experiment,
    policy: GatePolicyConfig,
    metric: str,
    start: datetime,
    end: datetime,
    units: dict[str, int],
) -> BusinessValueResult:
    """Layer 3's judgement of `metric` over a window, with the policy's direction, minimum effect
    and tau, and the split checked on `units` (`assigned_units_by_arm`). For the layer and dashboards."""
    from gate.judges.business_value import business_value_judge

    control, treatment = outcome_stats(
        experiment=experiment, policy=policy, metric=metric, start=start, end=end
    )
    return business_value_judge(
        control=control,
        treatment=treatment,
        direction=policy.business_direction,
        min_effect=policy.business_min_effect,
        alpha=policy.business_alpha,
        min_units=policy.business_min_units,
        assigned_units=(units[BASELINE], units[CANDIDATE]),
        expected_treatment_share=window_share(experiment=experiment),
        srm_alpha=policy.business_srm_alpha,
        sequential_tau=policy.business_sequential_tau,
    )


def business_value_layer_run(*, run: GateRun, policy: GatePolicyConfig) -> LayerResult:
    started = time.perf_counter()
    metric = policy.business_metric
    experiment = run.experiment
    if experiment is None:
        return _no_experiment(
            run=run,
            layer=Layer.BUSINESS_VALUE,
            metric=metric or "business_value",
            threshold=policy.business_min_effect,
            started=started,
        )
    start, end = traffic_window(experiment=experiment)
    inputs = _inputs(experiment=experiment, start=start, end=end)
    if not metric:
        return _store(
            run=run,
            layer=Layer.BUSINESS_VALUE,
            started=started,
            verdict=ERROR,
            metric="business_value",
            threshold=policy.business_min_effect,
            reasons=["the policy names no outcome metric (policy key business_metric)"],
            details={"inputs": inputs},
        )
    mark = time.perf_counter()
    units = assigned_units_by_arm(experiment=experiment, start=start, end=end)
    result = business_value_measure(
        experiment=experiment, policy=policy, metric=metric, start=start, end=end, units=units
    )
    sql_seconds = time.perf_counter() - mark  # the judge itself takes milliseconds
    summary = result.as_dict()
    details = {
        "inputs": {
            **inputs,
            "metric": metric,
            "direction": policy.business_direction,
            "per": policy.business_per,
            "assigned_units": units,
        },
        **summary,
        "timings": {"aggregation": sql_seconds},
    }
    if result.verdict != "pass":
        details["attribution"] = _business_attribution(
            experiment=experiment, metric=metric, start=start, end=end, summary=summary
        )
    improvement = summary["improvement"] or {}
    return _store(
        run=run,
        layer=Layer.BUSINESS_VALUE,
        started=started,
        verdict=result.verdict,
        metric=metric,  # the estimate is its improvement, `business_direction` being better
        estimate=improvement.get("estimate"),
        ci_low=improvement.get("ci_low"),
        ci_high=improvement.get("ci_high"),
        threshold=policy.business_min_effect,
        reasons=list(result.reasons),
        details=details,
    )


def _business_attribution(
    *, experiment: Experiment, metric: str, start: datetime, end: datetime, summary: dict
) -> dict:
    outcomes = OutcomeEvent.objects.filter(
        experiment=experiment, metric=metric, occurred_at__gte=start, occurred_at__lt=end
    )
    hourly = [
        {"hour": row["hour"].isoformat(), "arm": row["arm"], "outcomes": row["n"], "mean": row["mean"]}
        for row in outcomes.annotate(hour=TruncHour("occurred_at"))
        .values("hour", "arm")
        .annotate(n=Count("id"), mean=Avg("value"))
        .order_by("hour", "arm")
    ]
    # The worst for the metric's direction: the highest when less is better.
    worst_first = "DESC" if summary.get("direction") == "decrease" else "ASC"
    worst_units = list(
        outcomes.filter(arm=CANDIDATE)
        .order_by("-value" if worst_first == "DESC" else "value")
        .values("unit_id", "user_id", "value", "occurred_at")[:EXAMPLES]
    )
    for unit in worst_units:
        unit["occurred_at"] = unit["occurred_at"].isoformat()
    table = OutcomeEvent._meta.db_table
    return {
        "phenomenon": {
            "summary": "; ".join(summary.get("reasons") or []),
            "by_hour": hourly[-48:],
            "reproduce": _sql_text(
                f"SELECT arm, COUNT(*), AVG(value) FROM {table} WHERE experiment_id = %s AND metric = %s "
                "AND occurred_at >= %s AND occurred_at < %s GROUP BY arm",
                [experiment.pk, metric, start, end],
            ),
        },
        "data": {
            "summary": f"the candidate's units with the worst {metric}",
            "worst_units": worst_units,
            "probes": _probe_attribution(experiment=experiment),
            "reproduce": _sql_text(
                f"SELECT unit_id, user_id, value FROM {table} WHERE experiment_id = %s AND metric = %s "
                "AND arm = 'candidate' AND occurred_at >= %s AND occurred_at < %s "
                f"ORDER BY value {worst_first} LIMIT 50",
                [experiment.pk, metric, start, end],
            ),
        },
        "system": _system_attribution(experiment=experiment, start=start, end=end),
    }
