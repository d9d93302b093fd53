"""Layer 2, follow-up rate: follow-ups per answered question on each arm of the canary experiment's
user traffic (probe traffic excluded), labelled by the trained follow-up detector, counted in SQL, and
corrected for the detector's error rates per language: measured on the experiment's reviewed live
turns where there are enough of them, else on its test split (stored beside its artefact)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any

from django.utils import timezone
from django.utils.translation import pgettext_lazy

from canary.models import Experiment
from canary.selectors.attribution import (
    follow_up_examples,
    follow_up_examples_sql,
    follow_ups_by_arm_sql,
    follow_ups_by_hour,
)
from canary.selectors.experiments import TrafficWindow, traffic_window_get
from canary.selectors.looks import answers_look_counts, answers_look_progress, answers_split
from canary.selectors.stats import FollowUpTally, follow_up_counts_by_arm, follow_ups_judged_by_language
from canary.services.follow_ups import follow_up_thresholds_get, follow_ups_label
from engines.follow_up.classifier import TrainedDetector, detector_load, error_rates
from engines.follow_up.correction import ErrorRates
from engines.follow_up.live_rates import LanguageErrorRates
from engines.reasons import Reason, gettext_noop, reason, stored_reason_read, wordings_register
from engines.routing import BASELINE, CANDIDATE
from gate.judges.follow_up_rate import (
    ROGAN_GLADEN,
    AnswerHorizon,
    AnswerSplit,
    DetectorAccuracy,
    FollowUpCounts,
    FollowUpInputs,
    FollowUpRateDetails,
    FollowUpRatePolicy,
    FollowUpRateResult,
    follow_up_rate_blind,
    follow_up_rate_judge,
)
from gate.judges.follow_up_review import LiveAgreement, live_agreement_apply
from gate.judges.plan import LookRecord, moment, not_registered_reason, settings_differences
from gate.judges.verdict import ERROR, FAIL, INSUFFICIENT, PASS
from gate.layers.base import GateLayer, LayerContext, LayerKind, ReportPart, estimates_of, to_json
from gate.layers.follow_up_review import (
    follow_up_error_rates_measure,
    follow_up_live_agreement_measure,
    follow_up_rate_with_error_rates,
)
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
from gate.policy import GatePolicyConfig
from gate.reporting import Attribution, AttributionLevel, Table

METHOD = (
    "follow-ups / answered questions per arm, corrected per language for the detector's measured "
    "sensitivity and specificity (Rogan–Gladen, delta-method interval with the error rates' uncertainty); "
    "non-inferiority on the corrected difference; observed rates with Wilson and Newcombe intervals beside; "
    "judged once, on the first answered questions per arm at the horizon registered when the experiment "
    "started (or always valid with follow_up_sequential_tau); clustered sample-ratio check of the answers; "
    "probe traffic excluded"
)


def detector_accuracy(*, detector: TrainedDetector, kinds: tuple[str, ...]) -> DetectorAccuracy:
    """The detector's error rates per language for "is one of `kinds`", from the confusion matrices of
    its test split stored with the artefact."""
    errors = {}
    for language, figures in detector.meta["test"]["languages"].items():
        rates = error_rates(figures["confusion"], kinds=kinds)
        errors[language] = ErrorRates(
            positives=rates["positives"],
            true_positives=rates["true_positives"],
            negatives=rates["negatives"],
            true_negatives=rates["true_negatives"],
        )
    return DetectorAccuracy(version=detector.version, errors=errors)


def follow_up_detector_accuracy(*, policy: GatePolicyConfig) -> DetectorAccuracy | None:
    """The error rates layer 2 corrects by under `policy` (None: it does not correct). The dashboard
    shows them beside the corrected rates, so each interval can be recomputed from the page."""
    section = policy.section(FollowUpRatePolicy)
    if section.follow_up_correction != ROGAN_GLADEN:
        return None
    return detector_accuracy(detector=detector_load(), kinds=tuple(section.follow_up_kinds))


def follow_up_rate_measure(*, window: TrafficWindow, policy: GatePolicyConfig) -> FollowUpRateResult:
    """Layer 2's judgement of a window from the stored detector labels (it labels nothing). The layer
    and the dashboards call it."""
    return _measure(window=window, policy=policy)[0]


def _follow_up_counts(tally: FollowUpTally, *, judged: dict[str, tuple[int, int]]) -> FollowUpCounts:
    """An arm's stored counts, with what the trained detector judged per language, as layer 2 judges them."""
    return FollowUpCounts(
        answered=tally.answered,
        follow_ups=tally.follow_ups,
        deepening=tally.deepening,
        sessions=tally.sessions,
        user_turns_sum=tally.user_turns_sum,
        user_turns_sumsq=tally.user_turns_sumsq,
        unjudged=tally.unjudged,
        judged_by_language=judged,
    )


def _measure(*, window: TrafficWindow, policy: GatePolicyConfig) -> tuple[FollowUpRateResult, list[str]]:
    """The judgement, and the detector versions that judged the window's turns."""
    section = policy.section(FollowUpRatePolicy)
    kinds = tuple(section.follow_up_kinds)
    counts = follow_up_counts_by_arm(window=window, kinds=kinds)
    versions: list[str] = []
    judged: dict[str, dict[str, tuple[int, int]]] = {CANDIDATE: {}, BASELINE: {}}
    rates: dict[str, LanguageErrorRates] = {}
    detector = follow_up_detector_accuracy(policy=policy)
    if detector is not None:
        judged, versions = follow_ups_judged_by_language(window=window, kinds=kinds)
        detector, rates = _error_rates(
            experiment=window.experiment, judged=judged, shipped=detector, policy=policy
        )
    result = follow_up_rate_judge(
        candidate=_follow_up_counts(counts.candidate, judged=judged[CANDIDATE]),
        baseline=_follow_up_counts(counts.baseline, judged=judged[BASELINE]),
        detector=detector,
        max_rate=section.follow_up_max,
        decide_on=section.follow_up_decide_on,
        margin=section.follow_up_margin,
        min_answered=section.follow_up_min_answered,
        confidence=policy.general.confidence,
    )
    if rates:
        result = follow_up_rate_with_error_rates(result=result, rates=rates)
    return result, versions


def _error_rates(
    *,
    experiment: Experiment,
    judged: dict[str, dict[str, tuple[int, int]]],
    shipped: DetectorAccuracy,
    policy: GatePolicyConfig,
) -> tuple[DetectorAccuracy, dict[str, LanguageErrorRates]]:
    """The detector's error rates per judged language (`judged`: arm -> language -> (judged, called)),
    live from the experiment's reviews where there are enough, else `shipped` (measured on its test
    split), and where each comes from."""
    languages = sorted({language for arm in judged.values() for language, (n, _) in arm.items() if n})
    rates = follow_up_error_rates_measure(
        experiment=experiment, shipped=shipped, languages=languages, policy=policy
    )
    return replace(shipped, errors={language: r.used for language, r in rates.items()}), rates


def follow_up_plan_settings(policy: GatePolicyConfig) -> dict[str, Any]:
    """What layer 2's plan freezes: its section, and the confidence its intervals are at."""
    return {**policy.section(FollowUpRatePolicy).as_dict(), "confidence": policy.general.confidence}


@dataclass(frozen=True, kw_only=True)
class FollowUpAssessment(Assessment[FollowUpRateResult]):
    """Layer 2's assessment (`gate.layers.looks.Assessment`), with the detector's live agreement."""

    live: LiveAgreement


class FollowUpLayerCode(StrEnum):
    HORIZON_REACHED_SETTLING = "follow_up_rate.horizon_reached_settling"
    HORIZON_REACHED_NEXT_RUN = "follow_up_rate.horizon_reached_next_run"
    NO_ANSWERS = "follow_up_rate.no_answers"
    CANDIDATE_RATE = "follow_up_rate.candidate_rate"
    CANDIDATE_RATE_CORRECTED = "follow_up_rate.candidate_rate_corrected"
    VERSUS_BASELINE = "follow_up_rate.versus_baseline"
    DATA_SUMMARY = "follow_up_rate.data_summary"
    BY_HOUR_TITLE = "follow_up_rate.by_hour_title"
    WORST_HOURS_TITLE = "follow_up_rate.worst_hours_title"
    LATEST_TITLE = "follow_up_rate.latest_title"


wordings_register(
    {
        FollowUpLayerCode.HORIZON_REACHED_SETTLING: gettext_noop(
            "the registered horizon of {units} answered questions per arm is reached: the one look is taken "
            "once the follow-ups of its last answers are in, from {at}"
        ),
        FollowUpLayerCode.HORIZON_REACHED_NEXT_RUN: gettext_noop(
            "the registered horizon of {units} answered questions per arm is reached: the next gate run "
            "takes the one look"
        ),
        FollowUpLayerCode.NO_ANSWERS: gettext_noop("no answered questions on the candidate arm"),
        FollowUpLayerCode.CANDIDATE_RATE: gettext_noop(
            "candidate follow-up rate {rate:.3f} ({follow_ups}/{answered}){versus}"
        ),
        FollowUpLayerCode.CANDIDATE_RATE_CORRECTED: gettext_noop(
            "candidate follow-up rate {rate:.3f} ({follow_ups}/{answered}), corrected for the detector's "
            "errors {corrected:.3f}{versus}"
        ),
        FollowUpLayerCode.VERSUS_BASELINE: gettext_noop(
            " vs baseline {rate:.3f} ({follow_ups}/{answered}), difference {difference:+.3f}"
        ),
        FollowUpLayerCode.DATA_SUMMARY: gettext_noop(
            "the candidate's hours with the highest follow-up rate, its latest follow-ups with the question "
            "and answer before them, and the stress probes ({probes})"
        ),
        FollowUpLayerCode.BY_HOUR_TITLE: gettext_noop("follow-ups by hour"),
        FollowUpLayerCode.WORST_HOURS_TITLE: gettext_noop("the candidate's worst hours"),
        FollowUpLayerCode.LATEST_TITLE: gettext_noop("the candidate's latest follow-ups"),
    }
)


def _horizon(experiment: Experiment, plan: dict[str, Any]) -> AnswerHorizon:
    if not plan:
        return AnswerHorizon(
            answers_per_arm=None,
            basis=reason(TrafficCode.STARTED_WITHOUT_PLAN, experiment=experiment.name),
        )
    return AnswerHorizon(
        answers_per_arm=plan.get("answers_per_arm"),
        basis=stored_reason_read(plan.get("basis", "")),
        registered_at=plan.get("registered_at"),
    )


def follow_up_rate_assess(
    *,
    window: TrafficWindow,
    policy: GatePolicyConfig,
    take_look: bool,
    gate_run: int | None = None,
    settle_seconds: float = 0.0,
) -> FollowUpAssessment:
    """Layer 2 under the experiment's registered plan, as `gate.layers.business_value.
    business_value_assess` for layer 3: an error when `policy` is not the registered test; the stored
    look when there is one (returned as stored); at the horizon the one look on the first answered
    questions per arm, once `settle_seconds` (the detector's follow-up window) have passed since the later
    arm's last of them; before it the answers so far, blind unless unblinded; under a registered tau,
    always valid. The live agreement with reviewers applies to every judgement but a stored one."""
    experiment = window.experiment
    plan = dict(experiment.follow_up_horizon or {})
    section = policy.section(FollowUpRatePolicy)
    since = plan_counted_since(window=window, plan=plan)
    live = follow_up_live_agreement_measure(experiment=experiment, policy=policy)
    stored = look_stored(plan, FollowUpRateResult)
    if stored is not None and not settings_differences(plan=plan, effective=follow_up_plan_settings(policy)):
        return FollowUpAssessment(result=look_returned(*stored), live=live, look=stored[1])
    arms = _arms_counted(window=window, kinds=section.follow_up_kinds, since=since, limit=None)
    detector = follow_up_detector_accuracy(policy=policy)
    rates: dict[str, LanguageErrorRates] = {}
    if detector is not None:
        judged = {name: counts.judged_by_language for name, counts in arms.items()}
        detector, rates = _error_rates(experiment=experiment, judged=judged, shipped=detector, policy=policy)
    judge = _judge_with(window=window, policy=policy, since=since, detector=detector)
    horizon = _horizon(experiment, plan)
    result, look = _assess(
        judge=judge,
        arms=arms,
        plan=plan,
        policy=policy,
        horizon=horizon,
        window=window,
        since=since,
        take_look=take_look,
        gate_run=gate_run,
        settle_seconds=settle_seconds,
    )
    if rates and result.verdict != ERROR:
        result = follow_up_rate_with_error_rates(result=result, rates=rates)
    verdict, reasons = live_agreement_apply(verdict=result.verdict, reasons=result.reasons, live=live)
    result = replace(result, verdict=verdict, reasons=reasons)
    if result.horizon is not None and verdict not in (PASS, FAIL):
        look = None  # undecided at the horizon (the live agreement too low): nothing stored, blind
        if result.unblinded is None:
            result = follow_up_rate_blind(result)
    return FollowUpAssessment(result=result, live=live, look=look, new_look=look is not None)


def _judge_with(
    *, window: TrafficWindow, policy: GatePolicyConfig, since: datetime, detector: DetectorAccuracy | None
) -> Callable[..., FollowUpRateResult]:
    """Layer 2's judge with the policy's settings, the detector's error rates when it corrects (live
    or shipped, `_error_rates`), the clustered sample-ratio check of the counted answers, and who
    unblinded the experiment."""
    section = policy.section(FollowUpRatePolicy)
    split = answers_split(window=window, since=since)
    return partial(
        follow_up_rate_judge,
        max_rate=section.follow_up_max,
        decide_on=section.follow_up_decide_on,
        margin=section.follow_up_margin,
        min_answered=section.follow_up_min_answered,
        confidence=policy.general.confidence,
        detector=detector,
        split=AnswerSplit(
            baseline=split.baseline,
            candidate=split.candidate,
            sum_squares=float(split.sum_squares),
            candidate_share=window.candidate_share,
        ),
        srm_alpha=section.follow_up_srm_alpha,
        unblinded=unblinding_of(window.experiment),
    )


def _arms_counted(
    *, window: TrafficWindow, kinds: tuple[str, ...], since: datetime, limit: int | None
) -> dict[str, FollowUpCounts]:
    counts, judged = answers_look_counts(window=window, since=since, kinds=kinds, limit=limit)
    return {
        "candidate": _follow_up_counts(counts.candidate, judged=judged[CANDIDATE]),
        "baseline": _follow_up_counts(counts.baseline, judged=judged[BASELINE]),
    }


def _assess(
    *,
    judge: Callable[..., FollowUpRateResult],
    arms: dict[str, FollowUpCounts],
    plan: dict[str, Any],
    policy: GatePolicyConfig,
    horizon: AnswerHorizon,
    window: TrafficWindow,
    since: datetime,
    take_look: bool,
    gate_run: int | None,
    settle_seconds: float,
) -> tuple[FollowUpRateResult, LookRecord | None]:
    """The judgement before the live agreement applies, and the look taken now (None: none)."""
    section = policy.section(FollowUpRatePolicy)
    differences = settings_differences(plan=plan, effective=follow_up_plan_settings(policy)) if plan else []
    if differences:
        why = not_registered_reason(differences=differences, registered_at=plan.get("registered_at"))
        blind = follow_up_rate_blind(judge(**arms, horizon=horizon))
        return replace(blind, verdict=ERROR, reasons=[why]), None
    if plan and section.follow_up_sequential_tau is not None:
        return judge(**arms, sequential_tau=section.follow_up_sequential_tau), None
    if horizon.answers_per_arm is None:
        return judge(**arms, horizon=horizon), None
    progress = answers_look_progress(window=window, since=since, answers=horizon.answers_per_arm)
    if progress.cutoff is None:
        return judge(**arms, horizon=horizon), None
    settled = progress.cutoff + timedelta(seconds=settle_seconds)
    if not take_look or timezone.now() < settled:
        reached = (
            reason(
                FollowUpLayerCode.HORIZON_REACHED_SETTLING,
                units=horizon.answers_per_arm,
                at=moment(settled.isoformat()),
            )
            if take_look
            else reason(FollowUpLayerCode.HORIZON_REACHED_NEXT_RUN, units=horizon.answers_per_arm)
        )
        blind = follow_up_rate_blind(judge(**arms, horizon=horizon))
        return replace(blind, verdict=INSUFFICIENT, reasons=[reached]), None
    look = _arms_counted(
        window=window, kinds=section.follow_up_kinds, since=since, limit=horizon.answers_per_arm
    )
    record = LookRecord(
        taken_at=timezone.now().isoformat(timespec="seconds"),
        gate_run=gate_run,
        counted_from=since.isoformat(),
        cutoff=progress.cutoff.isoformat(),
        units_per_arm=horizon.answers_per_arm,
    )
    result = judge(**look, horizon=horizon)
    return result, record if result.verdict in (PASS, FAIL) else None


def _rate_phrase(result: FollowUpRateResult) -> Reason:
    candidate, baseline = result.candidate, result.baseline
    if candidate.rate is None:
        return reason(FollowUpLayerCode.NO_ANSWERS)
    versus = (
        reason(
            FollowUpLayerCode.VERSUS_BASELINE,
            rate=baseline.rate,
            follow_ups=baseline.follow_ups,
            answered=baseline.answered,
            difference=candidate.rate - baseline.rate,
        )
        if baseline is not None and baseline.rate is not None
        else ""
    )
    counts = {"rate": candidate.rate, "follow_ups": candidate.follow_ups, "answered": candidate.answered}
    if candidate.corrected is not None and candidate.corrected.estimate is not None:
        corrected = candidate.corrected.estimate
        return reason(
            FollowUpLayerCode.CANDIDATE_RATE_CORRECTED, **counts, corrected=corrected, versus=versus
        )
    return reason(FollowUpLayerCode.CANDIDATE_RATE, **counts, versus=versus)


def attribution_build(
    *, window: TrafficWindow, kinds: tuple[str, ...], result: FollowUpRateResult
) -> Attribution:
    """Why the layer did not pass: follow-ups by hour and the candidate's worst hours and latest
    follow-ups, or, while the result is blind, no figure of the rate at all (the system level shows each
    arm's path)."""
    if result.blind:  # the reasons above say why; the levels show nothing of the metric
        return Attribution(phenomenon=BLIND_LEVEL, data=BLIND_LEVEL, system=system_level(window))
    hours = follow_ups_by_hour(window=window, kinds=kinds)
    worst = sorted(
        (h for h in hours if h.arm == CANDIDATE and h.rate is not None),
        key=lambda h: (-(h.rate or 0.0), -h.answered),
    )[:5]
    examples = follow_up_examples(window=window, kinds=kinds, arm=CANDIDATE, limit=EXAMPLES)
    probes_summary, probes = probe_table(window)
    hour_columns = ["hour", "arm", "answered", "follow-ups", "rate"]
    return Attribution(
        phenomenon=AttributionLevel(
            summary=_rate_phrase(result),
            reproduce=follow_ups_by_arm_sql(window=window, kinds=kinds),
            tables=[
                Table(
                    title=reason(FollowUpLayerCode.BY_HOUR_TITLE),
                    columns=hour_columns,
                    rows=[[h.hour.isoformat(), h.arm, h.answered, h.follow_ups, h.rate] for h in hours[-48:]],
                )
            ],
        ),
        data=AttributionLevel(
            summary=reason(FollowUpLayerCode.DATA_SUMMARY, probes=probes_summary),
            reproduce=follow_up_examples_sql(window=window, kinds=kinds, arm=CANDIDATE),
            tables=[
                Table(
                    title=reason(FollowUpLayerCode.WORST_HOURS_TITLE),
                    columns=hour_columns,
                    rows=[[h.hour.isoformat(), h.arm, h.answered, h.follow_ups, h.rate] for h in worst],
                ),
                Table(
                    title=reason(FollowUpLayerCode.LATEST_TITLE),
                    columns=["session", "question", "answer", "follow-up"],
                    rows=[[e.session_id, e.question, e.answer, e.follow_up] for e in examples],
                ),
                *([probes] if probes else []),
            ],
        ),
        system=system_level(window),
    )


class FollowUpRateLayer(GateLayer[FollowUpRateDetails]):
    name = "follow_up_rate"
    title = pgettext_lazy("code", "Follow-up rate")
    kind = LayerKind.TRAFFIC
    policy = FollowUpRatePolicy
    details_type = FollowUpRateDetails
    metric = "follow_up_rate"
    essential = True
    method = METHOD

    def run(self, ctx: LayerContext) -> LayerResult:
        section = ctx.policy.section(FollowUpRatePolicy)
        started, experiment = time.perf_counter(), ctx.run.experiment
        if experiment is None:
            return self.store(
                run=ctx.run,
                started=started,
                verdict=INSUFFICIENT,
                details=FollowUpRateDetails(inputs=FollowUpInputs(experiment=None)),
                reasons=[no_experiment_reason(ctx.run)],
                threshold=section.follow_up_max,
            )
        window = traffic_window_get(experiment=experiment)
        mark = time.perf_counter()
        labelled = follow_ups_label(experiment=experiment, until=window.end)
        label_seconds = time.perf_counter() - mark
        result, details = self._judged(ctx=ctx, experiment=experiment, window=window)
        details = replace(
            details, labelled_now=labelled, timings={"labelling": label_seconds, **details.timings}
        )
        return self.store(
            run=ctx.run,
            started=started,
            verdict=result.verdict,
            details=details,
            reasons=list(result.reasons),
            threshold=section.follow_up_max,
            estimate=result.candidate.judged_rate,
            ci_low=result.candidate.judged_low,
            ci_high=result.candidate.judged_high,
        )

    def _judged(
        self, *, ctx: LayerContext, experiment: Experiment, window: TrafficWindow
    ) -> tuple[FollowUpRateResult, FollowUpRateDetails]:
        """The layer's one look (taken now, or the stored one returned) over the labelled answers, with
        what went in and, when it did not pass, its attribution."""
        section = ctx.policy.section(FollowUpRatePolicy)
        mark = time.perf_counter()
        thresholds = follow_up_thresholds_get(family=experiment.family)
        assessment = follow_up_rate_assess(
            window=window,
            policy=ctx.policy,
            take_look=True,
            gate_run=ctx.run.pk,
            settle_seconds=thresholds.window_seconds,
        )
        result, look, taken_now = look_keep(
            layer=self.name,
            run=ctx.run,
            experiment=experiment,
            assessment=assessment,
            blind=follow_up_rate_blind,
            counted_answers=True,
        )
        _, versions = follow_ups_judged_by_language(window=window, kinds=tuple(section.follow_up_kinds))
        sql_seconds = time.perf_counter() - mark
        inputs = FollowUpInputs(
            **vars(traffic_inputs(window)),
            counted_kinds=list(section.follow_up_kinds),
            detector_thresholds=thresholds.as_dict(),
            unjudged_turns=result.unjudged,
            detector_version=detector_load().version,
            detector_versions_in_traffic=versions,
        )
        details = FollowUpRateDetails(
            inputs=inputs,
            method=METHOD,
            judged=result,
            live_agreement=assessment.live,
            timings={"aggregation": sql_seconds},
            look=look,
            look_taken_now=taken_now,
        )
        if result.verdict != PASS:
            attribution = attribution_build(window=window, kinds=section.follow_up_kinds, result=result)
            details = replace(details, attribution=attribution)
        return result, details

    def report(self, *, run: GateRun, result: LayerResult, details: FollowUpRateDetails | None) -> ReportPart:
        if details is None:
            return ReportPart(inputs={}, estimates={})
        estimates = estimates_of(details.judged) if details.judged else {}
        if details.live_agreement is not None:
            estimates["live_agreement"] = to_json(details.live_agreement)
        return ReportPart(
            inputs=to_json(details.inputs), estimates=estimates, attribution=details.attribution
        )
