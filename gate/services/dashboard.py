"""The release manager's canary dashboard: what it shows, read from the stored events (nothing here
writes).

Per experiment: the follow-up rate per arm judged as the gate's layer 2 would judge it now, each
business metric judged as layer 3 would, the sample-ratio check, and a "watch it daily" table of
always-valid intervals (normal-mixture confidence sequence), cumulative from the window's start to
the end of each day, so a manager may look every day without inflating the false-positive rate. The
numbers come from canary's selectors and the gate's own layer measurements.

The gated metrics (layer 2's follow-up rate, and layer 3's registered metric) go through the layers'
own assessment under the experiment's plan (`follow_up_rate_assess`, `business_value_assess`), so the
page is blind where the layers are: before a layer's stored look (unless the experiment was unblinded,
or its plan is the always-valid test) it shows counts, the sample-ratio check and the progress to the
horizon, and no rate, interval, p-value or per-arm value of that metric, in its panel, its daily table,
its charts or the per-window "first answer accepted". Nothing here writes: a look that could be taken
now waits for the next gate run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.utils.translation import gettext as _

from canary.models import CanaryAnalysis, Experiment, ProbeRun
from canary.selectors.attribution import ProbeFinding, outcome_metrics, probe_findings
from canary.selectors.experiments import TrafficWindow, analyses_latest, probe_run_latest, traffic_window_get
from canary.selectors.history import (
    ArmFigures,
    SharePoint,
    ShareWindow,
    arm_figures,
    experiment_action_name,
    experiment_audit_rows,
    share_history,
    share_windows,
)
from canary.selectors.readout import Readout, readout_get
from canary.selectors.stats import assigned_units_by_arm
from canary.services.experiments import GUARDRAIL_DEFAULTS, experiment_actions_allowed
from engines.follow_up.correction import ErrorRates
from engines.reasons import Reason, gettext_noop, reason, wordings_register
from engines.routing import BASELINE, CANDIDATE
from engines.stats.effects import sequential_interval
from engines.stats.hypothesis import SrmResult, srm_check
from engines.stats.intervals import newcombe_interval, wilson_interval
from engines.stats.sufficient import RatioStats
from gate.charts import Cell, Chart, LineSeries, bars_chart
from gate.judges.business_value import BUSINESS_DIRECTIONS, DECREASE, BusinessValuePolicy, BusinessValueResult
from gate.judges.follow_up_rate import ROGAN_GLADEN, ArmFollowUps, FollowUpRatePolicy, FollowUpRateResult
from gate.judges.follow_up_review import LiveAgreement
from gate.layers.business_value import business_value_assess, business_value_measure, outcome_stats
from gate.layers.follow_up_rate import (
    follow_up_detector_accuracy,
    follow_up_rate_assess,
    follow_up_rate_measure,
)
from gate.layers.registry import gate_policy_parse
from gate.models import GateRun
from gate.policy import GatePolicyConfig
from gate.selectors.gate_runs import gate_run_list
from gate.selectors.policies import gate_policy_get
from gate.services.policies import gate_policy_resolve
from gate.services.shadow_panel import ShadowPanel, shadow_panel_build
from gate.services.speed_panel import SpeedPanel, speed_readout
from registry.errors import ApplicationError

DAY = timedelta(days=1)
MAX_DAYS = 14


@dataclass(frozen=True)
class ArmRow:
    arm: str
    figures: ArmFollowUps


@dataclass(frozen=True)
class CorrectionRow:
    """One language of the correction for the detector's errors: the error rates it used, and per arm
    (in the arms' order) the turns the detector judged and those it called follow-ups."""

    language: str
    rates: ErrorRates
    arms: list[tuple[int, int]]


@dataclass(frozen=True)
class FollowUpPanel:
    result: FollowUpRateResult
    arms: list[ArmRow]
    kinds: list[str]
    unjudged: int
    live_agreement: LiveAgreement
    # Whether the judged rates are corrected for the detector's errors, and what from (shown, so
    # that each interval can be recomputed from the page).
    corrected: bool
    corrections: list[CorrectionRow]
    # The observed candidate − baseline with its Newcombe interval (the corrected one is the result's).
    observed_difference: tuple[float, float, float] | None
    plan: dict

    @property
    def blind(self) -> bool:
        return self.result.blind


@dataclass(frozen=True)
class DailyRow:
    day: int
    until: datetime
    baseline_units: int
    candidate_units: int
    error: Reason | str = ""
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
    daily_skipped: Reason | str

    @property
    def blind(self) -> bool:
        return self.result.blind


@dataclass(frozen=True)
class BusinessPanel:
    direction: str
    per: str
    units: dict[str, int]
    expected_share: float | None
    srm: SrmResult | None
    metrics: list[MetricPanel]
    plan: dict


@dataclass(frozen=True)
class RampStep:
    percent: float
    current: bool


@dataclass(frozen=True)
class WindowFigures:
    """One traffic window (one share of the candidate) with each arm's figures in it."""

    share: ShareWindow
    arms: list[ArmFigures]


@dataclass(frozen=True, kw_only=True)
class HistoryRow:
    """An audited action on the experiment, or one canary analysis, for the history table."""

    at: datetime
    kind: str  # "action" or "analysis"
    who: str
    what: str
    change: str
    reason: str  # a person's words, as written
    verdict: str = ""
    system: bool = False  # `who` is a part of the system (its name is shown in the reader's language)
    # An analysis's reasons as stored: codes and parameters, or the sentences of analyses from before.
    reasons: tuple[Any, ...] = ()


def _change(before: dict | None, after: dict | None) -> str:
    before, after = before or {}, after or {}
    parts = []
    if "status" in after:
        status = after["status"]
        parts.append(f"{before['status']} → {status}" if before.get("status") else status)
    if "traffic_percent" in after:
        new, old = after["traffic_percent"], before.get("traffic_percent")
        moved = isinstance(old, int | float) and old != new
        parts.append(f"{old:g} % → {new:g} %" if moved else f"{new:g} %")
    return ", ".join(parts)


def experiment_history(*, experiment: Experiment, limit: int = 50) -> list[HistoryRow]:
    """Actions (from the audit rows) and analyses, newest first."""
    rows = [
        HistoryRow(
            at=row.created_at,
            kind="action",
            who=row.actor_name,
            what=experiment_action_name(row),
            change=_change(row.before, row.after),
            reason=row.reason,
            system=row.actor_id is None,
        )
        for row in experiment_audit_rows(experiment=experiment)
    ]
    rows += [
        HistoryRow(
            at=analysis.created_at,
            kind="analysis",
            who="canary analysis",
            what=analysis.action or "analysis",
            change="",
            reason="",
            verdict=analysis.verdict,
            system=True,
            reasons=tuple(analysis.reasons),
        )
        for analysis in analyses_latest(experiment=experiment, limit=limit)
    ]
    return sorted(rows, key=lambda row: row.at, reverse=True)[:limit]


@dataclass(frozen=True)
class ExperimentDashboard:
    window: TrafficWindow
    hours: float
    policy_name: str | None  # None: the built-in defaults
    policy_invalid: Reason | None
    policy: GatePolicyConfig
    is_demo: bool
    ramp: list[RampStep]
    next_step: float | None
    guardrails: dict[str, float]
    readout: Readout  # the latest canary analysis: what decided, kept after a rollback or promotion
    speed: SpeedPanel
    follow_up: FollowUpPanel
    business: BusinessPanel
    analyses: list[CanaryAnalysis]
    probe_run: ProbeRun | None
    probe_rows: list[ProbeFinding]
    gate_runs: list[GateRun]
    actions: list[str]
    windows: list[WindowFigures]
    history: list[HistoryRow]
    charts: list[Chart]
    shadow: ShadowPanel | None = None  # the shadow window (gate.services.shadow_panel)

    @property
    def follow_up_policy(self) -> FollowUpRatePolicy:
        return self.policy.section(FollowUpRatePolicy)

    @property
    def business_policy(self) -> BusinessValuePolicy:
        return self.policy.section(BusinessValuePolicy)


@dataclass(frozen=True, kw_only=True)
class DashboardPolicy:
    """The policy a gate run of a family would use: `name` None for the built-in defaults, with why a
    stored policy was passed over (`invalid`: a gate run would refuse it too)."""

    name: str | None
    config: GatePolicyConfig
    invalid: Reason | None = None


def dashboard_policy(*, family: str) -> DashboardPolicy:
    """The family's own policy, else the stored `default`, else the built-in defaults (without creating
    the `default` row on a page view)."""
    if gate_policy_get(name=family) or gate_policy_get(name="default"):
        try:
            policy, config = gate_policy_resolve(name=None, overrides=None, family=family)
        except ApplicationError as exc:
            return DashboardPolicy(name=None, config=gate_policy_parse({}), invalid=exc.reason)
        return DashboardPolicy(name=policy.name, config=config)
    return DashboardPolicy(name=None, config=gate_policy_parse({}))


def experiment_dashboard(
    *, experiment: Experiment, direction: str | None = None, now: datetime | None = None
) -> ExperimentDashboard:
    """Everything the detail page shows. `direction` ("decrease"/"increase") overrides the policy's
    business direction for display; anything else keeps the policy's."""
    window = traffic_window_get(experiment=experiment, now=now)
    chosen = dashboard_policy(family=experiment.family)
    policy = chosen.config
    business = policy.section(BusinessValuePolicy)
    if direction not in BUSINESS_DIRECTIONS:
        direction = business.business_direction
    next_step = (
        experiment.ramp[experiment.ramp_step + 1] if experiment.ramp_step + 1 < len(experiment.ramp) else None
    )
    probe_run = probe_run_latest(experiment=experiment)
    probe_rows = probe_findings(run=probe_run) if probe_run else []
    guardrails = {**GUARDRAIL_DEFAULTS, **experiment.guardrails}
    speed, speed_charts_all = speed_readout(window=window, guardrails=guardrails)
    follow_up = _follow_up(window=window, policy=policy)
    business_panel = _business(window=window, policy=business, direction=direction)
    speed_shown = [c for c in speed_charts_all if c.has_data]
    return ExperimentDashboard(
        window=window,
        hours=(window.end - window.start).total_seconds() / 3600,
        policy_name=chosen.name,
        policy_invalid=chosen.invalid,
        policy=policy,
        is_demo=experiment.is_demo,
        ramp=[RampStep(percent=p, current=i == experiment.ramp_step) for i, p in enumerate(experiment.ramp)],
        next_step=next_step,
        guardrails=guardrails,
        readout=readout_get(experiment=experiment),
        speed=speed,
        follow_up=follow_up,
        business=business_panel,
        analyses=analyses_latest(experiment=experiment),
        probe_run=probe_run,
        probe_rows=probe_rows,
        gate_runs=list(gate_run_list().filter(experiment=experiment)[:20]),
        actions=experiment_actions_allowed(experiment=experiment),
        windows=_window_figures(experiment=experiment, now=now, blind=follow_up.blind),
        history=experiment_history(experiment=experiment),
        charts=experiment_charts(
            window=window,
            policy=policy,
            follow_up=follow_up,
            business=business_panel,
            probe_rows=probe_rows,
            now=now,
        )
        + speed_shown,
        shadow=shadow_panel_build(experiment=experiment),
    )


def _window_figures(*, experiment: Experiment, now: datetime | None, blind: bool) -> list[WindowFigures]:
    """Each traffic window's figures per arm, newest first; "first answer accepted" is read from the
    follow-ups, so it is blind while they are."""
    figures = [
        WindowFigures(share=share, arms=arm_figures(window=share.window))
        for share in reversed(share_windows(experiment=experiment, now=now))
    ]
    if blind:
        figures = [
            replace(w, arms=[replace(arm, first_answer_accepted=None) for arm in w.arms]) for w in figures
        ]
    return figures


# ---------------------------------------------------------------------------------------------
# Layer 2 as the gate would judge it now
# ---------------------------------------------------------------------------------------------
def _follow_up(*, window: TrafficWindow, policy: GatePolicyConfig) -> FollowUpPanel:
    section = policy.section(FollowUpRatePolicy)
    assessment = follow_up_rate_assess(window=window, policy=policy, take_look=False)
    result = assessment.result
    reports = {CANDIDATE: result.candidate, BASELINE: result.baseline}
    arms = [ArmRow(arm=name, figures=report) for name, report in reports.items() if report is not None]
    candidate, baseline = result.candidate, result.baseline
    observed = None
    if (
        not result.blind
        and baseline is not None
        and candidate.follow_ups is not None
        and baseline.follow_ups is not None
        and candidate.answered
        and baseline.answered
    ):
        observed = newcombe_interval(
            successes_1=candidate.follow_ups,
            n_1=candidate.answered,
            successes_2=baseline.follow_ups,
            n_2=baseline.answered,
            confidence=result.confidence,
        )
    return FollowUpPanel(
        result=result,
        arms=arms,
        kinds=list(section.follow_up_kinds),
        unjudged=result.unjudged,
        live_agreement=assessment.live,
        corrected=result.correction == ROGAN_GLADEN,
        corrections=[] if result.blind else _corrections(result=result, arms=arms, policy=policy),
        observed_difference=None if result.blind else observed,
        plan=window.experiment.follow_up_horizon or {},
    )


def _corrections(
    *, result: FollowUpRateResult, arms: list[ArmRow], policy: GatePolicyConfig
) -> list[CorrectionRow]:
    detector = follow_up_detector_accuracy(policy=policy) if result.correction == ROGAN_GLADEN else None
    if detector is None:
        return []
    # The rates the correction used: live from the experiment's reviews where there were enough.
    detector = replace(
        detector, errors={**detector.errors, **{lang: r.used for lang, r in result.error_rates.items()}}
    )
    judged = [
        {c.language: (c.judged, c.detected) for c in row.figures.corrected.languages}
        if row.figures.corrected
        else {}
        for row in arms
    ]
    languages = sorted({language for per_arm in judged for language in per_arm})
    return [
        CorrectionRow(
            language=language,
            rates=detector.errors[language],
            arms=[per_arm.get(language, (0, 0)) for per_arm in judged],
        )
        for language in languages
    ]


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
    plan = window.experiment.business_horizon or {}
    gated = plan.get("metric") if plan else policy.business_metric
    return BusinessPanel(
        direction=direction,
        per=policy.business_per,
        units=units,
        expected_share=expected_share,
        srm=srm,
        metrics=[
            _gated_metric(window=window, policy=policy, metric=metric, units=units)
            if metric == gated
            else _metric(window=window, policy=policy, metric=metric, direction=direction, units=units)
            for metric in outcome_metrics(experiment=window.experiment)
        ],
        plan=plan,
    )


class DashboardCode(StrEnum):
    """Why a metric has no daily table, or a day no figures."""

    BLIND_DAILY = "dashboard.blind_daily"
    OTHER_METRIC = "dashboard.other_metric"
    NO_SCALE = "dashboard.no_scale"
    TOO_FEW_UNITS = "dashboard.too_few_units"


wordings_register(
    {
        DashboardCode.BLIND_DAILY: gettext_noop(
            "blind until the one look at the registered horizon (or the experiment is unblinded)"
        ),
        DashboardCode.OTHER_METRIC: gettext_noop(
            "the policy's minimum effect and tau are for {gated}, not {metric}"
        ),
        DashboardCode.NO_SCALE: gettext_noop(
            "the policy sets neither business_sequential_tau nor a business_min_effect above 0: the mixture "
            "needs a scale of effects, fixed before the data, to bet on"
        ),
        DashboardCode.TOO_FEW_UNITS: gettext_noop("too few units"),
    }
)


def _gated_metric(
    *, window: TrafficWindow, policy: BusinessValuePolicy, metric: str, units: dict[str, int]
) -> MetricPanel:
    """The metric layer 3 judges, as it would judge it now under the plan (blind before its look; the
    registered direction, whatever the page's): its daily table only where its numbers may be read."""
    result = business_value_assess(window=window, policy=policy, units=units, take_look=False).result
    if result.blind:
        return MetricPanel(
            metric=metric,
            gated=True,
            result=result,
            min_effect=policy.business_min_effect,
            confidence=1 - 2 * policy.business_alpha,
            tau=policy.business_sequential_tau,
            daily=[],
            daily_skipped=reason(DashboardCode.BLIND_DAILY),
        )
    panel = _metric(window=window, policy=policy, metric=metric, direction=result.direction, units=units)
    return replace(panel, gated=True, result=result)


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
    skipped: Reason | str = ""
    if daily_tau is None:
        skipped = (
            reason(DashboardCode.OTHER_METRIC, gated=policy.business_metric, metric=metric)
            if not applies
            else reason(DashboardCode.NO_SCALE)
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
                rows.append(replace(row, error=reason(DashboardCode.TOO_FEW_UNITS)))
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


# ---------------------------------------------------------------------------------------------
# Charts (drawn by the page's ECharts from gate.charts shapes)
# ---------------------------------------------------------------------------------------------
CUTS = 12  # points over the window of the cumulative charts


def _cuts(*, start: datetime, end: datetime) -> list[datetime]:
    """CUTS evenly spaced ends over the window, the last one its end (cumulative from its start)."""
    if end <= start:
        return [end]
    step = (end - start) / CUTS
    return [start + step * i for i in range(1, CUTS + 1)]


def _follow_up_chart(*, window: TrafficWindow, policy: GatePolicyConfig) -> Chart:
    section = policy.section(FollowUpRatePolicy)
    points: dict[str, list[tuple[str, float | None]]] = {CANDIDATE: [], BASELINE: []}
    low: dict[str, list[float | None]] = {CANDIDATE: [], BASELINE: []}
    high: dict[str, list[float | None]] = {CANDIDATE: [], BASELINE: []}
    for until in _cuts(start=window.start, end=window.end):
        result = follow_up_rate_measure(window=window.until(until), policy=policy)
        for arm, report in ((CANDIDATE, result.candidate), (BASELINE, result.baseline)):
            shown = report is not None and report.answered > 0 and report.rate is not None
            points[arm].append((until.isoformat(), report.rate if report and shown else None))
            low[arm].append(report.ci_low if report and shown else None)
            high[arm].append(report.ci_high if report and shown else None)
    return Chart(
        id="follow-up-over-time",
        title=_("Follow-up rate over time (cumulative, with its interval)"),
        kind="lines",
        y_name=_("follow-ups per answer"),
        lines=[LineSeries(name=_(arm), points=points[arm], low=low[arm], high=high[arm]) for arm in points],
        threshold=section.follow_up_max,
        threshold_label=_("bar %(value)s") % {"value": section.follow_up_max},
        rate_axis=True,
    )


def _curve_policy(*, policy: GatePolicyConfig, panel: MetricPanel) -> BusinessValuePolicy:
    """Layer 3's section as a curve of `panel`'s metric judges it: in the panel's direction, minimum
    effect and tau, and measured plainly at every cut."""
    return replace(
        policy.section(BusinessValuePolicy),
        business_direction=panel.result.direction,
        business_min_effect=panel.min_effect,
        # A curve is looked at every day: its interval is always the always-valid one (the daily
        # table's tau), never the fixed-horizon test's, which is read once, at the registered horizon.
        business_sequential_tau=panel.tau,
        # The curve is the plain metric at each cut: CUPED's covariate query per cut would cost a
        # pre-period join each time, and the panel above shows the adjusted result that decides.
        business_cuped=False,
        # The curve describes; the gate's minimum of units decides only the verdict in the panel.
        business_min_units=2,
    )


@dataclass(frozen=True, kw_only=True)
class _Lift:
    """One cut's improvement, with its interval where there is one to read a decision from."""

    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


def _lift(*, result: BusinessValueResult, sequential: bool) -> _Lift:
    """The improvement a cut's curve shows: the always-valid interval's, or the estimate alone."""
    improvement = result.improvement
    if (
        (improvement is None or not sequential)
        and result.effect is not None
        and result.effect.estimate is not None
    ):
        # No always-valid tau: the estimate alone, with no interval to read a decision from (the
        # fixed-horizon interval is for the one look at the horizon, not for a curve watched daily).
        sign = -1 if result.direction == DECREASE else 1
        return _Lift(estimate=sign * result.effect.estimate)
    if improvement is None:
        return _Lift()
    return _Lift(estimate=improvement.estimate, ci_low=improvement.ci_low, ci_high=improvement.ci_high)


@dataclass(frozen=True, kw_only=True)
class _BusinessCurves:
    """A metric's values per arm and its improvement at each cut (ISO time of the cut's end)."""

    values: dict[str, list[tuple[str, float | None]]]
    lifts: list[tuple[str, _Lift]]


def _business_curves(*, window: TrafficWindow, policy: BusinessValuePolicy, metric: str) -> _BusinessCurves:
    """`metric` judged under `policy` at each cut, cumulative from the window's start."""
    values: dict[str, list[tuple[str, float | None]]] = {CANDIDATE: [], BASELINE: []}
    lifts: list[tuple[str, _Lift]] = []
    for until in _cuts(start=window.start, end=window.end):
        cut = window.until(until)
        result = business_value_measure(
            window=cut, policy=policy, metric=metric, units=assigned_units_by_arm(window=cut)
        )
        stamp = until.isoformat()
        values[BASELINE].append((stamp, result.baseline.value))
        values[CANDIDATE].append((stamp, result.candidate.value))
        lifts.append((stamp, _lift(result=result, sequential=policy.business_sequential_tau is not None)))
    return _BusinessCurves(values=values, lifts=lifts)


def _business_charts(*, window: TrafficWindow, policy: GatePolicyConfig, panel: MetricPanel) -> list[Chart]:
    """The metric per arm and the improvement with its always-valid interval (the daily table's),
    cumulative over the window, without CUPED."""
    judged_as = _curve_policy(policy=policy, panel=panel)
    curves = _business_curves(window=window, policy=judged_as, metric=panel.metric)
    kind = _("always-valid") if judged_as.business_sequential_tau else _("fixed-horizon")
    return [
        Chart(
            id=f"metric-{panel.metric}",
            title=_("%(metric)s per arm over time (cumulative)") % {"metric": panel.metric},
            kind="lines",
            y_name=panel.metric,
            lines=[LineSeries(name=_(arm), points=points) for arm, points in curves.values.items()],
        ),
        Chart(
            id=f"lift-{panel.metric}",
            title=_("Improvement in %(metric)s (cumulative, %(kind)s interval)")
            % {"metric": panel.metric, "kind": kind},
            kind="lines",
            y_name=_("improvement"),
            lines=[
                LineSeries(
                    name=_("candidate − baseline"),
                    points=[(stamp, lift.estimate) for stamp, lift in curves.lifts],
                    low=[lift.ci_low for _stamp, lift in curves.lifts],
                    high=[lift.ci_high for _stamp, lift in curves.lifts],
                )
            ],
            threshold=panel.min_effect,
            threshold_label=_("minimum effect %(value)s") % {"value": panel.min_effect},
        ),
    ]


def _share_chart(*, history: list[SharePoint]) -> Chart:
    """Every share the candidate had, from each change to the next: down to 0 at a pause or a
    rollback, up to 100 at a promotion, held to the experiment's end (or now)."""
    points: list[tuple[str, float | None]] = [(point.at.isoformat(), point.percent) for point in history]
    return Chart(
        id="traffic-share",
        title=_("Candidate's traffic share and ramp history"),
        kind="lines",
        y_name="%",
        lines=[LineSeries(name=_("candidate share"), points=points, step=True)],
    )


def _probe_chart(*, rows: list[ProbeFinding]) -> Chart:
    def cells(rate_of) -> dict[str, Cell]:
        out = {}
        for row in rows:
            rate = rate_of(row)
            low, high = (
                wilson_interval(successes=round(rate * row.pairs), n=row.pairs) if row.pairs else (None, None)
            )
            out[row.weakness] = Cell(rate=rate, ci_low=low, ci_high=high)
        return out

    return bars_chart(
        id="probes",
        title=_("Probe pass rate per weakness"),
        sides={
            _("candidate"): cells(lambda row: row.candidate_rate),
            _("baseline"): cells(lambda row: row.baseline_rate),
        },
        y_name=_("pass rate"),
    )


def experiment_charts(
    *,
    window: TrafficWindow,
    policy: GatePolicyConfig,
    follow_up: FollowUpPanel,
    business: BusinessPanel,
    probe_rows: list[ProbeFinding],
    now: datetime | None,
) -> list[Chart]:
    """The dashboard's charts, those with data: follow-up rate per arm over time, each business
    metric (the gate's first) per arm and its improvement over time, the share's history and the
    probes' pass rates per weakness; not those of a gated metric that is blind."""
    charts = [] if follow_up.blind else [_follow_up_chart(window=window, policy=policy)]
    for panel in sorted(business.metrics, key=lambda panel: not panel.gated):
        if not panel.blind:
            charts += _business_charts(window=window, policy=policy, panel=panel)
    charts += [
        _share_chart(history=share_history(experiment=window.experiment, now=now)),
        _probe_chart(rows=probe_rows),
    ]
    return [chart for chart in charts if chart.has_data]
