"""Layer 3, business value: the policy's outcome metric on the canary experiment, candidate against
baseline, users as the unit, with the sample-ratio check against the split the window ran at."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from canary.models import Experiment
from canary.selectors import (
    TrafficWindow,
    assigned_units_by_arm,
    outcome_cuped_stats_by_arm,
    outcome_stats_by_arm,
    outcomes_by_arm_sql,
    outcomes_by_hour,
    outcomes_worst,
    outcomes_worst_sql,
    traffic_window_get,
)
from engines.routing import BASELINE, CANDIDATE
from engines.stats.sufficient import MeanStats, RatioCupedStats, RatioStats
from gate.judges.business_value import (
    DECREASE,
    BusinessInputs,
    BusinessValueDetails,
    BusinessValuePolicy,
    BusinessValueResult,
    FixedHorizon,
    business_value_judge,
)
from gate.judges.verdict import ERROR, INSUFFICIENT, PASS
from gate.layers.base import GateLayer, LayerContext, LayerKind, ReportPart, estimates_of, to_json
from gate.layers.traffic import EXAMPLES, no_experiment_reason, probe_table, system_level, traffic_inputs
from gate.models import GateRun, LayerResult
from gate.reporting import Attribution, AttributionLevel, Table


def outcome_stats(
    *, window: TrafficWindow, policy: BusinessValuePolicy, metric: str
) -> tuple[RatioStats | MeanStats, RatioStats | MeanStats]:
    """(baseline, candidate) sufficient statistics of `metric` over a window, as layer 3 judges them:
    RatioStats per user, or MeanStats per outcome (`business_per`)."""
    kind: type[RatioStats] | type[MeanStats] = RatioStats if policy.business_per == "user" else MeanStats
    # The stats class's keyword arguments: `n` an int, the sums numbers.
    stats: dict[str, dict[str, Any]] = outcome_stats_by_arm(
        window=window, metric=metric, per=policy.business_per
    )
    return kind(**stats[BASELINE]), kind(**stats[CANDIDATE])


def cuped_applies(policy: BusinessValuePolicy) -> bool:
    """CUPED needs a unit with a history: a user (per="outcome" makes each outcome its own unit)."""
    return policy.business_cuped and policy.business_per == "user"


def registered_horizon(*, experiment: Experiment, policy: BusinessValuePolicy) -> FixedHorizon:
    """The fixed horizon a run judges `experiment` by: the one registered at its start, when it was
    sized for the metric and unit the run's policy judges."""
    plan = experiment.business_horizon
    if not plan:
        return FixedHorizon(
            units_per_arm=None,
            basis=f"experiment {experiment.name} started without one; start a new experiment to register it",
        )
    metric, per = policy.business_metric, policy.business_per
    if (plan.get("metric"), plan.get("per")) != (metric, per):
        return FixedHorizon(
            units_per_arm=None,
            basis=f"the horizon registered at the start is for {plan.get('metric')} per {plan.get('per')}, "
            f"this policy judges {metric} per {per}",
            registered_at=plan.get("registered_at"),
        )
    return FixedHorizon(
        units_per_arm=plan.get("units_per_arm"), basis=plan["basis"], registered_at=plan.get("registered_at")
    )


def business_value_measure(
    *, window: TrafficWindow, policy: BusinessValuePolicy, metric: str, units: dict[str, int]
) -> BusinessValueResult:
    """Layer 3's judgement of `metric` over a window, with the policy's direction, minimum effect and
    tau, CUPED when it applies, the horizon registered at the experiment's start, and the split checked
    on `units` (`assigned_units_by_arm`). The layer and the dashboards call it."""
    baseline: RatioStats | MeanStats | RatioCupedStats
    candidate: RatioStats | MeanStats | RatioCupedStats
    if cuped_applies(policy):
        # RatioCupedStats' keyword arguments: `n` and `pre_units` ints, the sums numbers.
        stats: dict[str, dict[str, Any]] = outcome_cuped_stats_by_arm(
            window=window, metric=metric, pre_days=policy.business_cuped_pre_days
        )
        baseline, candidate = RatioCupedStats(**stats[BASELINE]), RatioCupedStats(**stats[CANDIDATE])
    else:
        baseline, candidate = outcome_stats(window=window, policy=policy, metric=metric)
    return business_value_judge(
        baseline=baseline,
        candidate=candidate,
        direction=policy.business_direction,
        min_effect=policy.business_min_effect,
        alpha=policy.business_alpha,
        min_units=policy.business_min_units,
        assigned_units=(units[BASELINE], units[CANDIDATE]),
        expected_candidate_share=window.candidate_share,
        srm_alpha=policy.business_srm_alpha,
        sequential_tau=policy.business_sequential_tau,
        horizon=registered_horizon(experiment=window.experiment, policy=policy),
        cuped_pre_days=policy.business_cuped_pre_days,
    )


def attribution_build(*, window: TrafficWindow, metric: str, result: BusinessValueResult) -> Attribution:
    hours = outcomes_by_hour(window=window, metric=metric)
    highest = result.direction == DECREASE  # the worst values for the metric's direction
    worst = outcomes_worst(window=window, metric=metric, arm=CANDIDATE, highest=highest, limit=EXAMPLES)
    probes_summary, probes = probe_table(window)
    return Attribution(
        phenomenon=AttributionLevel(
            summary="; ".join(result.reasons),
            reproduce=outcomes_by_arm_sql(window=window, metric=metric),
            tables=[
                Table(
                    title=f"{metric} by hour",
                    columns=["hour", "arm", "outcomes", "mean"],
                    rows=[[h.hour.isoformat(), h.arm, h.outcomes, h.mean] for h in hours[-48:]],
                )
            ],
        ),
        data=AttributionLevel(
            summary=f"the candidate's units with the worst {metric}; stress probes: {probes_summary}",
            reproduce=outcomes_worst_sql(window=window, metric=metric, arm=CANDIDATE, highest=highest),
            tables=[
                Table(
                    title=f"the candidate's worst {metric}",
                    columns=["unit", "user", "value", "at"],
                    rows=[[u.unit_id, u.user_id, u.value, u.occurred_at.isoformat()] for u in worst],
                ),
                *([probes] if probes else []),
            ],
        ),
        system=system_level(window),
    )


class BusinessValueLayer(GateLayer[BusinessValueDetails]):
    name = "business_value"
    title = "Business value"
    kind = LayerKind.TRAFFIC
    policy = BusinessValuePolicy
    details_type = BusinessValueDetails
    metric = "business_value"
    method = (
        "the policy's outcome metric per user (ratio, delta method; CUPED on each user's same metric over "
        "the pre-window before their first exposure) or per outcome (Welch), candidate against baseline; "
        "one-sided test at business_alpha on the improvement's lower bound, once at the horizon registered "
        "when the experiment started, or always valid (business_sequential_tau) at every look; "
        "sample-ratio check"
    )

    def run(self, ctx: LayerContext) -> LayerResult:
        run = ctx.run
        section = ctx.policy.section(BusinessValuePolicy)
        started = time.perf_counter()
        metric = section.business_metric
        experiment = run.experiment
        if experiment is None:
            return self.store(
                run=run,
                started=started,
                verdict=INSUFFICIENT,
                details=BusinessValueDetails(inputs=BusinessInputs(experiment=None)),
                reasons=[no_experiment_reason(run)],
                threshold=section.business_min_effect,
                metric=metric,
            )
        window = traffic_window_get(experiment=experiment)
        inputs = BusinessInputs(
            **vars(traffic_inputs(window)),
            metric=metric,
            direction=section.business_direction,
            per=section.business_per,
        )
        if not metric:
            return self.store(
                run=run,
                started=started,
                verdict=ERROR,
                details=BusinessValueDetails(inputs=inputs),
                reasons=["the policy names no outcome metric (policy key business_metric)"],
                threshold=section.business_min_effect,
            )
        mark = time.perf_counter()
        units = assigned_units_by_arm(window=window)
        result = business_value_measure(window=window, policy=section, metric=metric, units=units)
        sql_seconds = time.perf_counter() - mark  # the judge itself takes milliseconds
        details = BusinessValueDetails(
            inputs=replace(inputs, assigned_units=units), judged=result, timings={"aggregation": sql_seconds}
        )
        if result.verdict != PASS:
            details = replace(
                details, attribution=attribution_build(window=window, metric=metric, result=result)
            )
        improvement = result.improvement
        return self.store(
            run=run,
            started=started,
            verdict=result.verdict,
            details=details,
            reasons=list(result.reasons),
            threshold=section.business_min_effect,
            # The estimate is the improvement, `business_direction` being better.
            estimate=improvement.estimate if improvement else None,
            ci_low=improvement.ci_low if improvement else None,
            ci_high=improvement.ci_high if improvement else None,
            metric=metric,
        )

    def report(
        self, *, run: GateRun, result: LayerResult, details: BusinessValueDetails | None
    ) -> ReportPart:
        if details is None:
            return ReportPart(inputs={}, estimates={})
        estimates = estimates_of(details.judged) if details.judged else {}
        return ReportPart(
            inputs=to_json(details.inputs), estimates=estimates, attribution=details.attribution
        )
