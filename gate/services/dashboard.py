"""The release manager's canary dashboard: what it shows, read from the stored events (nothing here
writes).

Per experiment: the follow-up rate per arm judged as the gate's layer 2 would judge it now, each
business metric judged as layer 3 would, the sample-ratio check, and a "watch it daily" table of
always-valid intervals (normal-mixture confidence sequence), cumulative from the window's start to
the end of each day, so a manager may look every day without inflating the false-positive rate. The
numbers come from canary's selectors and the gate's own layer measurements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from canary.models import CanaryAnalysis, Experiment, ProbeRun
from canary.selectors import (
    ProbeFinding,
    TrafficWindow,
    analyses_latest,
    assigned_units_by_arm,
    outcome_metrics,
    probe_findings,
    probe_run_latest,
    traffic_window_get,
)
from canary.services.experiments import GUARDRAIL_DEFAULTS, experiment_actions_allowed
from engines.routing import BASELINE, CANDIDATE
from engines.stats.effects import sequential_interval
from engines.stats.hypothesis import SrmResult, srm_check
from engines.stats.sufficient import RatioStats
from gate.judges.business_value import BUSINESS_DIRECTIONS, DECREASE, BusinessValuePolicy, BusinessValueResult
from gate.judges.follow_up_rate import ArmFollowUps, FollowUpRatePolicy, FollowUpRateResult
from gate.judges.follow_up_review import LiveAgreement
from gate.layers.business_value import business_value_measure, outcome_stats
from gate.layers.follow_up_rate import follow_up_rate_measure
from gate.layers.follow_up_review import follow_up_rate_with_live_agreement
from gate.layers.registry import gate_policy_parse
from gate.models import GateRun
from gate.policy import GatePolicyConfig
from gate.selectors.gate_runs import gate_run_list
from gate.selectors.policies import gate_policy_get
from gate.services.policies import gate_policy_resolve
from registry.errors import ApplicationError

DAY = timedelta(days=1)
MAX_DAYS = 14
BAR_WIDTH = 300  # px of the follow-up rate bars' SVG


@dataclass(frozen=True)
class RateBar:
    """x positions (px) of a rate and its interval's whiskers."""

    rate: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class ArmRow:
    arm: str
    figures: ArmFollowUps
    bar: RateBar | None


@dataclass(frozen=True)
class FollowUpPanel:
    result: FollowUpRateResult
    arms: list[ArmRow]
    kinds: list[str]
    threshold_x: float
    bar_width: int
    unjudged: int
    live_agreement: LiveAgreement


@dataclass(frozen=True)
class DailyRow:
    day: int
    until: datetime
    baseline_units: int
    candidate_units: int
    error: str = ""
    baseline_value: float | None = None
    candidate_value: float | None = None
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    reading: str = ""


@dataclass(frozen=True)
class MetricPanel:
    metric: str
    gated: bool
    result: BusinessValueResult
    min_effect: float
    confidence: float
    tau: float | None
    daily: list[DailyRow]
    daily_skipped: str


@dataclass(frozen=True)
class BusinessPanel:
    direction: str
    per: str
    units: dict[str, int]
    expected_share: float | None
    srm: SrmResult | None
    metrics: list[MetricPanel]


@dataclass(frozen=True)
class RampStep:
    percent: float
    current: bool


@dataclass(frozen=True)
class ExperimentDashboard:
    window: TrafficWindow
    hours: float
    policy_name: str
    policy: GatePolicyConfig
    is_demo: bool
    ramp: list[RampStep]
    next_step: float | None
    guardrails: dict[str, float]
    follow_up: FollowUpPanel
    business: BusinessPanel
    analyses: list[CanaryAnalysis]
    probe_run: ProbeRun | None
    probe_rows: list[ProbeFinding]
    gate_runs: list[GateRun]
    actions: list[str]

    @property
    def follow_up_policy(self) -> FollowUpRatePolicy:
        return self.policy.section(FollowUpRatePolicy)

    @property
    def business_policy(self) -> BusinessValuePolicy:
        return self.policy.section(BusinessValuePolicy)


def dashboard_policy(*, family: str) -> tuple[str, GatePolicyConfig]:
    """The policy a gate run of this family would use: the family's own, else the stored `default`,
    else the built-in defaults (without creating the `default` row on a page view)."""
    if gate_policy_get(name=family) or gate_policy_get(name="default"):
        try:
            policy, config = gate_policy_resolve(name=None, overrides=None, family=family)
        except ApplicationError as exc:  # a stored policy a gate run would refuse too
            return f"built-in defaults (the stored policy is invalid: {exc.message})", gate_policy_parse({})
        return policy.name, config
    return "built-in defaults", gate_policy_parse({})


def experiment_dashboard(
    *, experiment: Experiment, direction: str | None = None, now: datetime | None = None
) -> ExperimentDashboard:
    """Everything the detail page shows. `direction` ("decrease"/"increase") overrides the policy's
    business direction for display; anything else keeps the policy's."""
    window = traffic_window_get(experiment=experiment, now=now)
    policy_name, policy = dashboard_policy(family=experiment.family)
    business = policy.section(BusinessValuePolicy)
    if direction not in BUSINESS_DIRECTIONS:
        direction = business.business_direction
    next_step = (
        experiment.ramp[experiment.ramp_step + 1] if experiment.ramp_step + 1 < len(experiment.ramp) else None
    )
    probe_run = probe_run_latest(experiment=experiment)
    return ExperimentDashboard(
        window=window,
        hours=(window.end - window.start).total_seconds() / 3600,
        policy_name=policy_name,
        policy=policy,
        is_demo=experiment.baseline.is_demo or experiment.candidate.is_demo,
        ramp=[RampStep(percent=p, current=i == experiment.ramp_step) for i, p in enumerate(experiment.ramp)],
        next_step=next_step,
        guardrails={**GUARDRAIL_DEFAULTS, **experiment.guardrails},
        follow_up=_follow_up(window=window, policy=policy),
        business=_business(window=window, policy=business, direction=direction),
        analyses=analyses_latest(experiment=experiment),
        probe_run=probe_run,
        probe_rows=probe_findings(run=probe_run) if probe_run else [],
        gate_runs=list(gate_run_list().filter(experiment=experiment)[:20]),
        actions=experiment_actions_allowed(experiment=experiment),
    )


# ---------------------------------------------------------------------------------------------
# Layer 2 as the gate would judge it now
# ---------------------------------------------------------------------------------------------
def _follow_up(*, window: TrafficWindow, policy: GatePolicyConfig) -> FollowUpPanel:
    section = policy.section(FollowUpRatePolicy)
    result, live = follow_up_rate_with_live_agreement(
        result=follow_up_rate_measure(window=window, policy=policy),
        experiment=window.experiment,
        policy=policy,
    )
    reports = {CANDIDATE: result.candidate, BASELINE: result.baseline}
    # One scale for both bars: the highest upper bound or the bar, with some room.
    scale = 1.15 * max(
        [section.follow_up_max, 0.01] + [r.ci_high for r in reports.values() if r and r.answered]
    )

    def bar(report: ArmFollowUps) -> RateBar | None:
        if not report.answered or report.rate is None:
            return None
        return RateBar(
            rate=round(BAR_WIDTH * report.rate / scale, 1),
            ci_low=round(BAR_WIDTH * report.ci_low / scale, 1),
            ci_high=round(BAR_WIDTH * report.ci_high / scale, 1),
        )

    arms = [
        ArmRow(arm=name, figures=report, bar=bar(report))
        for name, report in reports.items()
        if report is not None
    ]
    return FollowUpPanel(
        result=result,
        arms=arms,
        kinds=list(section.follow_up_kinds),
        threshold_x=round(BAR_WIDTH * section.follow_up_max / scale, 1),
        bar_width=BAR_WIDTH,
        unjudged=result.unjudged,
        live_agreement=live,
    )


# ---------------------------------------------------------------------------------------------
# Layer 3 as the gate would judge it now, and the daily always-valid intervals
# ---------------------------------------------------------------------------------------------
def _business(*, window: TrafficWindow, policy: BusinessValuePolicy, direction: str) -> BusinessPanel:
    units = assigned_units_by_arm(window=window)
    expected_share = window.candidate_share
    srm = None
    if expected_share is not None:
        srm = srm_check(
            counts=[units[BASELINE], units[CANDIDATE]],
            expected_shares=(1 - expected_share, expected_share),
            alpha=policy.business_srm_alpha,
        )
    return BusinessPanel(
        direction=direction,
        per=policy.business_per,
        units=units,
        expected_share=expected_share,
        srm=srm,
        metrics=[
            _metric(window=window, policy=policy, metric=metric, direction=direction, units=units)
            for metric in outcome_metrics(experiment=window.experiment)
        ],
    )


def _metric(
    *, window: TrafficWindow, policy: BusinessValuePolicy, metric: str, direction: str, units: dict[str, int]
) -> MetricPanel:
    # The policy's minimum effect and tau are in the unit of its metric: they apply to that metric
    # (or to every metric when the policy names none), never to another metric's unit.
    applies = policy.business_metric in (None, metric)
    min_effect = policy.business_min_effect if applies else 0.0
    tau = policy.business_sequential_tau if applies else None
    judged_as = replace(
        policy,
        business_metric=metric,
        business_direction=direction,
        business_min_effect=min_effect,
        business_sequential_tau=tau,
    )
    result = business_value_measure(window=window, policy=judged_as, metric=metric, units=units)
    daily_tau = tau or (min_effect if min_effect > 0 else None)
    daily: list[DailyRow] = []
    skipped = ""
    if daily_tau is None:
        skipped = (
            f"the policy's minimum effect and tau are for {policy.business_metric}, not {metric}"
            if not applies
            else "the policy sets neither business_sequential_tau nor a business_min_effect above 0: "
            "the mixture needs a scale of effects, fixed before the data, to bet on"
        )
    else:
        daily = _daily(
            window=window,
            policy=policy,
            metric=metric,
            direction=direction,
            tau=daily_tau,
            min_effect=min_effect,
        )
    return MetricPanel(
        metric=metric,
        gated=policy.business_metric == metric,
        result=result,
        min_effect=min_effect,
        confidence=1 - 2 * policy.business_alpha,
        tau=daily_tau,
        daily=daily,
        daily_skipped=skipped,
    )


def _day_ends(*, start: datetime, end: datetime) -> list[tuple[int, datetime]]:
    """(day number, end of that day in the window) for the last MAX_DAYS days; the last one is `end`."""
    days = max(1, math.ceil((end - start) / DAY))
    return [(day, min(start + DAY * day, end)) for day in range(max(1, days - MAX_DAYS + 1), days + 1)]


def _daily(
    *,
    window: TrafficWindow,
    policy: BusinessValuePolicy,
    metric: str,
    direction: str,
    tau: float,
    min_effect: float,
) -> list[DailyRow]:
    """Per day, cumulative from the window's start: the always-valid interval of the improvement."""
    rows, lowest_p = [], 1.0
    for day, until in _day_ends(start=window.start, end=window.end):
        baseline, candidate = outcome_stats(window=window.until(until), policy=policy, metric=metric)
        row = DailyRow(day=day, until=until, baseline_units=baseline.n, candidate_units=candidate.n)
        if isinstance(baseline, RatioStats) and isinstance(candidate, RatioStats):
            try:
                baseline, candidate = baseline.linearised(), candidate.linearised()
            except ValueError:
                rows.append(replace(row, error="too few units"))
                continue
        assert not isinstance(baseline, RatioStats) and not isinstance(candidate, RatioStats)
        effect = sequential_interval(
            control=baseline, treatment=candidate, tau=tau, confidence=1 - 2 * policy.business_alpha
        )
        if effect.error is not None:
            rows.append(replace(row, error=effect.error))
            continue
        assert effect.ci_low is not None and effect.ci_high is not None and effect.estimate is not None
        assert effect.p_value is not None
        sign = -1 if direction == DECREASE else 1
        low, high = sorted((sign * effect.ci_low, sign * effect.ci_high))
        # The always-valid p may be read at every look; its running minimum is the one to report.
        lowest_p = min(lowest_p, effect.p_value)
        if (low >= min_effect) if min_effect > 0 else (low > 0):
            reading = "improvement shown"
        elif high < 0:
            reading = "candidate worse"
        else:
            reading = "not decided yet"
        rows.append(
            replace(
                row,
                baseline_value=effect.control_value,
                candidate_value=effect.treatment_value,
                estimate=sign * effect.estimate,
                ci_low=low,
                ci_high=high,
                p_value=lowest_p,
                reading=reading,
            )
        )
    return rows
