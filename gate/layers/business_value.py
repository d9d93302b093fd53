"""Layer 3, business value: the policy's outcome metric on the canary experiment, candidate against
baseline, users as the unit, with the sample-ratio check against the split the window ran at."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import Any

from django.utils import timezone
from django.utils.translation import pgettext_lazy

from canary.models import Experiment
from canary.selectors.attribution import (
    outcomes_by_arm_sql,
    outcomes_by_hour,
    outcomes_worst,
    outcomes_worst_sql,
)
from canary.selectors.experiments import TrafficWindow, traffic_window_get
from canary.selectors.looks import outcome_look_progress, outcome_look_stats
from canary.selectors.stats import assigned_units_by_arm, outcome_cuped_stats_by_arm, outcome_stats_by_arm
from engines.reasons import gettext_noop, reason, sentences, stored_reason_read, wordings_register
from engines.routing import BASELINE, CANDIDATE
from engines.stats.sufficient import MeanStats, RatioCupedStats, RatioStats
from gate.judges.business_value import (
    DECREASE,
    BusinessInputs,
    BusinessValueDetails,
    BusinessValuePolicy,
    BusinessValueResult,
    FixedHorizon,
    business_value_blind,
    business_value_judge,
)
from gate.judges.plan import LookRecord, Unblinding, not_registered_reason, settings_differences
from gate.judges.verdict import ERROR, FAIL, INSUFFICIENT, PASS
from gate.layers.base import GateLayer, LayerContext, LayerKind, ReportPart, estimates_of, to_json
from gate.layers.looks import Assessment, look_keep, look_returned, look_stored
from gate.layers.traffic import (
    BLIND_LEVEL,
    EXAMPLES,
    TrafficCode,
    no_experiment_reason,
    plan_counted_since,
    probe_table,
    system_level,
    traffic_inputs,
    unblinding_of,
)
from gate.models import GateRun, LayerResult
from gate.reporting import Attribution, AttributionLevel, Table


def outcome_stats(
    *, window: TrafficWindow, policy: BusinessValuePolicy, metric: str
) -> tuple[RatioStats | MeanStats, RatioStats | MeanStats]:
    """(baseline, candidate) sufficient statistics of `metric` over a window, as layer 3 judges them:
    RatioStats per user, or MeanStats per outcome (`business_per`)."""
    stats = outcome_stats_by_arm(window=window, metric=metric, per=policy.business_per)
    return stats.baseline, stats.candidate


def cuped_applies(policy: BusinessValuePolicy) -> bool:
    """CUPED needs a unit with a history: a user (per="outcome" makes each outcome its own unit)."""
    return policy.business_cuped and policy.business_per == "user"


def business_value_measure(
    *,
    window: TrafficWindow,
    policy: BusinessValuePolicy,
    metric: str,
    units: dict[str, int],
    horizon: FixedHorizon | None = None,
) -> BusinessValueResult:
    """`metric` judged over the whole window with the policy's direction, minimum effect and tau, CUPED
    when it applies, and the split checked on `units` (`assigned_units_by_arm`), at one look the caller
    stands for (`horizon` None) or against `horizon`. The dashboard's metrics that no plan gates, its
    charts and the benches call it; the gated metric goes through `business_value_assess`."""
    baseline: RatioStats | MeanStats | RatioCupedStats
    candidate: RatioStats | MeanStats | RatioCupedStats
    if cuped_applies(policy):
        cuped = outcome_cuped_stats_by_arm(
            window=window, metric=metric, pre_days=policy.business_cuped_pre_days
        )
        baseline, candidate = cuped.baseline, cuped.candidate
    else:
        baseline, candidate = outcome_stats(window=window, policy=policy, metric=metric)
    return _judge(
        window=window, policy=policy, arms=(baseline, candidate), units=units, horizon=horizon, unblinded=None
    )


Arms = tuple[RatioStats | MeanStats | RatioCupedStats, RatioStats | MeanStats | RatioCupedStats]


def _judge(
    *,
    window: TrafficWindow,
    policy: BusinessValuePolicy,
    arms: Arms,
    units: dict[str, int],
    horizon: FixedHorizon | None,
    unblinded: Unblinding | None,
    sequential: bool = True,
) -> BusinessValueResult:
    """The judge with the policy's settings (its tau only when `sequential`: a tau no plan fixed before
    the data is not the always-valid test)."""
    return business_value_judge(
        baseline=arms[0],
        candidate=arms[1],
        direction=policy.business_direction,
        min_effect=policy.business_min_effect,
        alpha=policy.business_alpha,
        min_units=policy.business_min_units,
        assigned_units=(units[BASELINE], units[CANDIDATE]),
        expected_candidate_share=window.candidate_share,
        srm_alpha=policy.business_srm_alpha,
        sequential_tau=policy.business_sequential_tau if sequential else None,
        horizon=horizon,
        cuped_pre_days=policy.business_cuped_pre_days,
        unblinded=unblinded,
    )


# Layer 3's assessment: its result and the one look it is (`gate.layers.looks.Assessment`).
BusinessAssessment = Assessment[BusinessValueResult]


class BusinessLayerCode(StrEnum):
    HORIZON_REACHED = "business_value.horizon_reached"
    NO_METRIC = "business_value.no_metric"
    DATA_SUMMARY = "business_value.data_summary"
    BY_HOUR_TITLE = "business_value.by_hour_title"
    WORST_TITLE = "business_value.worst_title"


wordings_register(
    {
        BusinessLayerCode.HORIZON_REACHED: gettext_noop(
            "the registered horizon of {units} units per arm is reached: the next gate run takes the one look"
        ),
        BusinessLayerCode.NO_METRIC: gettext_noop(
            "the policy names no outcome metric (policy key business_metric)"
        ),
        BusinessLayerCode.DATA_SUMMARY: gettext_noop(
            "the candidate's units with the worst {metric}; stress probes: {probes}"
        ),
        BusinessLayerCode.BY_HOUR_TITLE: gettext_noop("{metric} by hour"),
        BusinessLayerCode.WORST_TITLE: gettext_noop("the candidate's worst {metric}"),
    }
)


def _plan_horizon(experiment: Experiment, plan: dict[str, Any], min_units: int) -> FixedHorizon:
    """The plan's horizon (at least `min_units`: a plan registered before horizons were raised to it
    could otherwise never decide)."""
    if not plan:
        return FixedHorizon(
            units_per_arm=None,
            basis=reason(TrafficCode.STARTED_WITHOUT_PLAN, experiment=experiment.name),
        )
    units = plan.get("units_per_arm")
    return FixedHorizon(
        units_per_arm=max(int(units), min_units) if isinstance(units, int) else None,
        basis=stored_reason_read(plan.get("basis", "")),
        registered_at=plan.get("registered_at"),
    )


def _look_arms(
    *,
    window: TrafficWindow,
    policy: BusinessValuePolicy,
    since: datetime,
    cutoff: datetime,
    limit: int | None,
) -> Arms:
    """The arms' statistics of the counted units (the first `limit`, or all) up to `cutoff`."""
    metric = policy.business_metric
    assert metric is not None
    cuped = cuped_applies(policy)
    stats = outcome_look_stats(
        window=window,
        metric=metric,
        per=policy.business_per,
        since=since,
        cutoff=cutoff,
        limit=limit,
        cuped_pre_days=policy.business_cuped_pre_days if cuped else None,
    )
    return stats.baseline, stats.candidate


def business_value_assess(
    *,
    window: TrafficWindow,
    policy: BusinessValuePolicy,
    units: dict[str, int],
    take_look: bool,
    gate_run: int | None = None,
) -> BusinessAssessment:
    """Layer 3 under the experiment's registered plan (`gate.judges.plan`): an error when `policy` is
    not the registered test; the stored look when there is one; at the horizon the one look, on the first
    units per arm (`outcome_look_progress`), returned to store when it decides (`take_look`; otherwise,
    as on the dashboard, blind until a gate run takes it); before it the units counted so far, blind
    unless the experiment was unblinded; under a registered tau, the always-valid test at every run."""
    experiment = window.experiment
    plan = dict(experiment.business_horizon or {})
    unblinded = unblinding_of(experiment)
    horizon = _plan_horizon(experiment, plan, policy.business_min_units)
    since = plan_counted_since(window=window, plan=plan)
    differences = settings_differences(plan=plan, effective=policy.as_dict()) if plan else []
    so_far = _look_arms(window=window, policy=policy, since=since, cutoff=window.end, limit=None)
    judge = partial(
        _judge, window=window, policy=policy, units=units, unblinded=unblinded, sequential=bool(plan)
    )
    if differences:
        why = not_registered_reason(differences=differences, registered_at=plan.get("registered_at"))
        blind = business_value_blind(judge(arms=so_far, horizon=None))
        return BusinessAssessment(result=replace(blind, verdict=ERROR, reasons=[why], horizon=horizon))
    if plan and policy.business_sequential_tau is not None:
        return BusinessAssessment(result=judge(arms=so_far, horizon=None))
    stored = look_stored(plan, BusinessValueResult)
    if stored is not None:
        return BusinessAssessment(result=look_returned(*stored), look=stored[1])
    if horizon.units_per_arm is None:
        return BusinessAssessment(result=judge(arms=so_far, horizon=horizon))
    return _at_horizon(
        window=window,
        policy=policy,
        judge=judge,
        so_far=so_far,
        horizon=horizon,
        since=since,
        take_look=take_look,
        gate_run=gate_run,
    )


def _at_horizon(
    *,
    window: TrafficWindow,
    policy: BusinessValuePolicy,
    judge: Callable[..., BusinessValueResult],
    so_far: Arms,
    horizon: FixedHorizon,
    since: datetime,
    take_look: bool,
    gate_run: int | None,
) -> BusinessAssessment:
    """Before the horizon the units so far (blind); at it the one look on the first units per arm."""
    metric, units = policy.business_metric, horizon.units_per_arm
    assert metric is not None and units is not None
    progress = outcome_look_progress(
        window=window, metric=metric, per=policy.business_per, since=since, units=units
    )
    if progress.cutoff is None:
        return BusinessAssessment(result=judge(arms=so_far, horizon=horizon))
    arms = _look_arms(window=window, policy=policy, since=since, cutoff=progress.cutoff, limit=units)
    result = judge(arms=arms, horizon=horizon)
    if result.verdict not in (PASS, FAIL):
        return BusinessAssessment(result=result)  # undecided at the horizon: blind, nothing stored
    if not take_look:
        reached = reason(BusinessLayerCode.HORIZON_REACHED, units=units)
        blind = business_value_blind(result)
        return BusinessAssessment(result=replace(blind, verdict=INSUFFICIENT, reasons=[reached]))
    record = LookRecord(
        taken_at=timezone.now().isoformat(timespec="seconds"),
        gate_run=gate_run,
        counted_from=since.isoformat(),
        cutoff=progress.cutoff.isoformat(),
        units_per_arm=units,
    )
    return BusinessAssessment(result=result, look=record, new_look=True)


def attribution_build(*, window: TrafficWindow, metric: str, result: BusinessValueResult) -> Attribution:
    """Why the layer did not pass: the metric by hour and the candidate's worst units, or, while the
    result is blind, no figure of the metric at all (the system level shows each arm's path)."""
    if result.blind:  # the reasons above say why; the levels show nothing of the metric
        return Attribution(phenomenon=BLIND_LEVEL, data=BLIND_LEVEL, system=system_level(window))
    hours = outcomes_by_hour(window=window, metric=metric)
    highest = result.direction == DECREASE  # the worst values for the metric's direction
    worst = outcomes_worst(window=window, metric=metric, arm=CANDIDATE, highest=highest, limit=EXAMPLES)
    probes_summary, probes = probe_table(window)
    return Attribution(
        phenomenon=AttributionLevel(
            summary=sentences(result.reasons),
            reproduce=outcomes_by_arm_sql(window=window, metric=metric),
            tables=[
                Table(
                    title=reason(BusinessLayerCode.BY_HOUR_TITLE, metric=metric),
                    columns=["hour", "arm", "outcomes", "mean"],
                    rows=[[h.hour.isoformat(), h.arm, h.outcomes, h.mean] for h in hours[-48:]],
                )
            ],
        ),
        data=AttributionLevel(
            summary=reason(BusinessLayerCode.DATA_SUMMARY, metric=metric, probes=probes_summary),
            reproduce=outcomes_worst_sql(window=window, metric=metric, arm=CANDIDATE, highest=highest),
            tables=[
                Table(
                    title=reason(BusinessLayerCode.WORST_TITLE, metric=metric),
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
    title = pgettext_lazy("code", "Business value")
    kind = LayerKind.TRAFFIC
    policy = BusinessValuePolicy
    details_type = BusinessValueDetails
    metric = "business_value"
    essential = True
    method = (
        "the policy's outcome metric per user (ratio, delta method; CUPED on each user's same metric over "
        "the pre-window before their first exposure) or per outcome (Welch), candidate against baseline; "
        "one-sided test at business_alpha on the improvement's lower bound, once at the horizon registered "
        "when the experiment started, or always valid (business_sequential_tau) at every look; "
        "sample-ratio check"
    )

    def run(self, ctx: LayerContext) -> LayerResult:
        section = ctx.policy.section(BusinessValuePolicy)
        started, metric, experiment = time.perf_counter(), section.business_metric, ctx.run.experiment
        if experiment is None:
            return self.store(
                run=ctx.run,
                started=started,
                verdict=INSUFFICIENT,
                details=BusinessValueDetails(inputs=BusinessInputs(experiment=None)),
                reasons=[no_experiment_reason(ctx.run)],
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
                run=ctx.run,
                started=started,
                verdict=ERROR,
                details=BusinessValueDetails(inputs=inputs),
                reasons=[reason(BusinessLayerCode.NO_METRIC)],
                threshold=section.business_min_effect,
            )
        result, details = self._judged(ctx=ctx, experiment=experiment, window=window, inputs=inputs)
        improvement = result.improvement
        return self.store(
            run=ctx.run,
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

    def _judged(
        self, *, ctx: LayerContext, experiment: Experiment, window: TrafficWindow, inputs: BusinessInputs
    ) -> tuple[BusinessValueResult, BusinessValueDetails]:
        """The layer's one look (taken now, or the stored one returned), with its attribution when it
        did not pass."""
        section = ctx.policy.section(BusinessValuePolicy)
        mark = time.perf_counter()
        units = assigned_units_by_arm(window=window)
        assessment = business_value_assess(
            window=window, policy=section, units=units, take_look=True, gate_run=ctx.run.pk
        )
        result, look, taken_now = look_keep(
            layer=self.name,
            run=ctx.run,
            experiment=experiment,
            assessment=assessment,
            blind=business_value_blind,
            counted_answers=False,
        )
        details = BusinessValueDetails(
            inputs=replace(inputs, assigned_units=units),
            judged=result,
            timings={"aggregation": time.perf_counter() - mark},  # the judge itself takes milliseconds
            look=look,
            look_taken_now=taken_now,
        )
        if result.verdict != PASS:
            assert inputs.metric is not None
            attribution = attribution_build(window=window, metric=inputs.metric, result=result)
            details = replace(details, attribution=attribution)
        return result, details

    def report(
        self, *, run: GateRun, result: LayerResult, details: BusinessValueDetails | None
    ) -> ReportPart:
        if details is None:
            return ReportPart(inputs={}, estimates={})
        estimates = estimates_of(details.judged) if details.judged else {}
        return ReportPart(
            inputs=to_json(details.inputs), estimates=estimates, attribution=details.attribution
        )
