"""The release manager's canary pages: what they show, read from the stored events (nothing here writes).

Per experiment: the follow-up rate per arm judged as the gate's layer 2 would judge it now, each
business metric judged as layer 3 would, the sample-ratio check, and a "watch it daily" table of
always-valid intervals (normal-mixture confidence sequence), cumulative from the window's start to the
end of each day, so a manager may look every day without inflating the false-positive rate. The
numbers come from the SQL aggregations of `canary.selectors`; the judges are the gate's own, imported
where they are used (scipy stays off the web process until a dashboard is asked for).
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta

from django.db.models import OuterRef, QuerySet, Subquery

from canary.models import CanaryAnalysis, Experiment, OutcomeEvent, ProbeRun
from canary.selectors import (
    assigned_units_by_arm,
    experiment_list,
    probe_run_latest,
)
from canary.services.experiments import GUARDRAIL_DEFAULTS, TRANSITIONS
from engines.routing import BASELINE, CANDIDATE
from gate.models import GatePolicy
from gate.policy import BUSINESS_DIRECTIONS, GatePolicyConfig
from gate.selectors.gate_runs import gate_run_list
from gate.services.gate_runs import gate_policy_resolve
from gate.services.traffic_layers import (
    business_value_measure,
    follow_up_rate_measure,
    outcome_stats,
    traffic_window,
    window_share,
)
from registry.errors import ApplicationError

Status = Experiment.Status
DAY = timedelta(days=1)
MAX_DAYS = 14
BAR_WIDTH = 300  # px of the follow-up rate bars' SVG


def experiment_overview_list() -> QuerySet[Experiment]:
    """Every experiment with its latest analysis verdict (one query)."""
    latest = CanaryAnalysis.objects.filter(experiment=OuterRef("pk")).order_by("-created_at", "-pk")
    return experiment_list().annotate(
        latest_verdict=Subquery(latest.values("verdict")[:1]),
        latest_analysis_at=Subquery(latest.values("created_at")[:1]),
    )


def dashboard_policy(*, family: str) -> tuple[str, GatePolicyConfig]:
    """The policy a gate run of this family would use: the family's own, else the stored `default`,
    else the built-in defaults (without creating the `default` row on a page view)."""
    if GatePolicy.objects.filter(name__in=(family, "default")).exists():
        try:
            policy, config = gate_policy_resolve(name=None, overrides=None, family=family)
        except ApplicationError as exc:  # a stored policy a gate run would refuse too
            return f"built-in defaults (the stored policy is invalid: {exc.message})", GatePolicyConfig()
        return policy.name, config
    return "built-in defaults", GatePolicyConfig()


def experiment_actions_allowed(*, experiment: Experiment) -> list[str]:
    """The lifecycle actions the experiment's status allows now (the services check again)."""
    allowed = TRANSITIONS[experiment.status]
    checks = {
        "start": experiment.status == Status.DRAFT,
        "pause": Status.PAUSED in allowed,
        "resume": experiment.status == Status.PAUSED,
        "ramp": experiment.status in Experiment.ACTIVE,
        "promote": Status.PROMOTED in allowed,
        "rollback": Status.ROLLED_BACK in allowed,
    }
    return [action for action, ok in checks.items() if ok]


def experiment_dashboard(
    *, experiment: Experiment, direction: str | None = None, now: datetime | None = None
) -> dict:
    """Everything the detail page shows. `direction` ("decrease"/"increase") overrides the policy's
    business direction for display; anything else keeps the policy's."""
    start, end = traffic_window(experiment=experiment, now=now)
    policy_name, policy = dashboard_policy(family=experiment.family)
    if direction not in BUSINESS_DIRECTIONS:
        direction = policy.business_direction
    next_step = (
        experiment.ramp[experiment.ramp_step + 1] if experiment.ramp_step + 1 < len(experiment.ramp) else None
    )
    probe_run = probe_run_latest(experiment=experiment)
    return {
        "window": {"start": start, "end": end, "hours": (end - start).total_seconds() / 3600},
        "policy_name": policy_name,
        "policy": policy,
        "is_demo": experiment.baseline.is_demo or experiment.candidate.is_demo,
        "ramp": [
            {"percent": percent, "current": index == experiment.ramp_step}
            for index, percent in enumerate(experiment.ramp)
        ],
        "next_step": next_step,
        "guardrails": {**GUARDRAIL_DEFAULTS, **experiment.guardrails},
        "follow_up": _follow_up(experiment=experiment, policy=policy, start=start, end=end),
        "business": _business(
            experiment=experiment, policy=policy, direction=direction, start=start, end=end
        ),
        "analyses": list(experiment.analyses.order_by("-created_at", "-pk")[:10]),
        "probe_run": probe_run,
        "probe_rows": _probe_rows(probe_run),
        "gate_runs": list(gate_run_list().filter(experiment=experiment)[:20]),
        "actions": experiment_actions_allowed(experiment=experiment),
    }


# ---------------------------------------------------------------------------------------------
# Layer 2 as the gate would judge it now
# ---------------------------------------------------------------------------------------------
def _follow_up(*, experiment: Experiment, policy: GatePolicyConfig, start: datetime, end: datetime) -> dict:
    result, counts = follow_up_rate_measure(experiment=experiment, policy=policy, start=start, end=end)
    reports = {CANDIDATE: result.candidate, BASELINE: result.baseline}
    # One scale for both bars: the highest upper bound or the bar, with some room.
    scale = 1.15 * max(
        [policy.follow_up_max, 0.01] + [r["ci_high"] for r in reports.values() if r["answered"]]
    )
    arms = [
        {
            "arm": name,
            **report,
            "unjudged": int(counts[name]["unjudged"]),
            "svg": _bar(report=report, scale=scale) if report["answered"] else None,
        }
        for name, report in reports.items()
    ]
    return {
        "result": result,
        "arms": arms,
        "kinds": list(policy.follow_up_kinds),
        "threshold_x": round(BAR_WIDTH * policy.follow_up_max / scale, 1),
        "bar_width": BAR_WIDTH,
        "unjudged": sum(a["unjudged"] for a in arms),
    }


def _bar(*, report: dict, scale: float) -> dict:
    """x positions (px) of the rate and its interval's whiskers."""
    return {key: round(BAR_WIDTH * report[key] / scale, 1) for key in ("rate", "ci_low", "ci_high")}


# ---------------------------------------------------------------------------------------------
# Layer 3 as the gate would judge it now, and the daily always-valid intervals
# ---------------------------------------------------------------------------------------------
def _business(
    *, experiment: Experiment, policy: GatePolicyConfig, direction: str, start: datetime, end: datetime
) -> dict:
    from engines.stats.hypothesis import srm_check

    units = assigned_units_by_arm(experiment=experiment, start=start, end=end)
    expected_share = window_share(experiment=experiment)
    srm = None
    if expected_share is not None:
        srm = srm_check(
            counts=[units[BASELINE], units[CANDIDATE]],
            expected_shares=(1 - expected_share, expected_share),
            alpha=policy.business_srm_alpha,
        )
    metrics = (
        OutcomeEvent.objects.filter(experiment=experiment)
        .values_list("metric", flat=True)
        .distinct()
        .order_by("metric")
    )
    return {
        "direction": direction,
        "per": policy.business_per,
        "units": units,
        "expected_share": expected_share,
        "srm": srm,
        "metrics": [
            _metric(
                experiment=experiment,
                policy=policy,
                metric=metric,
                direction=direction,
                start=start,
                end=end,
                units=units,
            )
            for metric in metrics
        ],
    }


def _metric(
    *,
    experiment: Experiment,
    policy: GatePolicyConfig,
    metric: str,
    direction: str,
    start: datetime,
    end: datetime,
    units: dict[str, int],
) -> dict:
    # The policy's minimum effect and tau are in the unit of its metric: they apply to that metric
    # (or to every metric when the policy names none), never to another metric's unit.
    applies = policy.business_metric in (None, metric)
    min_effect = policy.business_min_effect if applies else 0.0
    tau = policy.business_sequential_tau if applies else None
    judged_as = replace(
        policy, business_direction=direction, business_min_effect=min_effect, business_sequential_tau=tau
    )
    result = business_value_measure(
        experiment=experiment, policy=judged_as, metric=metric, start=start, end=end, units=units
    )
    daily_tau = tau or (min_effect if min_effect > 0 else None)
    if daily_tau is None:
        why = (
            f"the policy's minimum effect and tau are for {policy.business_metric}, not {metric}"
            if not applies
            else "the policy sets neither business_sequential_tau nor a business_min_effect above 0: "
            "the mixture needs a scale of effects, fixed before the data, to bet on"
        )
        daily, daily_skipped = [], why
    else:
        daily = _daily(
            experiment=experiment,
            policy=policy,
            metric=metric,
            direction=direction,
            start=start,
            end=end,
            tau=daily_tau,
            min_effect=min_effect,
        )
        daily_skipped = ""
    return {
        "metric": metric,
        "gated": policy.business_metric == metric,
        "result": result,
        "min_effect": min_effect,
        "confidence": 1 - 2 * policy.business_alpha,
        "tau": daily_tau,
        "daily": daily,
        "daily_skipped": daily_skipped,
    }


def _day_ends(*, start: datetime, end: datetime) -> list[tuple[int, datetime]]:
    """(day number, end of that day in the window) for the last MAX_DAYS days; the last one is `end`."""
    days = max(1, math.ceil((end - start) / DAY))
    return [(day, min(start + DAY * day, end)) for day in range(max(1, days - MAX_DAYS + 1), days + 1)]


def _daily(
    *,
    experiment: Experiment,
    policy: GatePolicyConfig,
    metric: str,
    direction: str,
    start: datetime,
    end: datetime,
    tau: float,
    min_effect: float,
) -> list[dict]:
    """Per day, cumulative from the window's start: the always-valid interval of the improvement."""
    from engines.stats.effects import sequential_interval
    from engines.stats.sufficient import RatioStats

    rows, lowest_p = [], 1.0
    for day, until in _day_ends(start=start, end=end):
        control, treatment = outcome_stats(
            experiment=experiment, policy=policy, metric=metric, start=start, end=until
        )
        row = {"day": day, "until": until, "control_units": control.n, "treatment_units": treatment.n}
        rows.append(row)
        if isinstance(control, RatioStats):
            try:
                control, treatment = control.linearised(), treatment.linearised()
            except ValueError:
                row["error"] = "too few units"
                continue
        effect = sequential_interval(
            control=control, treatment=treatment, tau=tau, confidence=1 - 2 * policy.business_alpha
        )
        if effect.error is not None:
            row["error"] = effect.error
            continue
        sign = -1 if direction == "decrease" else 1
        low, high = sorted((sign * effect.ci_low, sign * effect.ci_high))
        # The always-valid p may be read at every look; its running minimum is the one to report.
        lowest_p = min(lowest_p, effect.p_value)
        if (low >= min_effect) if min_effect > 0 else (low > 0):
            reading = "improvement shown"
        elif high < 0:
            reading = "candidate worse"
        else:
            reading = "not decided yet"
        row.update(
            control_value=effect.control_value,
            treatment_value=effect.treatment_value,
            estimate=sign * effect.estimate,
            ci_low=low,
            ci_high=high,
            p_value=lowest_p,
            reading=reading,
        )
    return rows


def _probe_rows(run: ProbeRun | None) -> list[dict]:
    """The run's report per weakness, the overall row ("all") last."""
    if run is None:
        return []
    report = run.report
    names = sorted(name for name in report if name != "all") + (["all"] if "all" in report else [])
    return [{"weakness": name, **report[name]} for name in names]
