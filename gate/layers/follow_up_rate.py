"""Layer 2, follow-up rate: follow-ups per answered question on each arm of the canary experiment's
user traffic (probe traffic excluded), labelled by the trained follow-up detector, counted in SQL, and
corrected for the detector's error rates measured on its test split (stored beside its artefact)."""

from __future__ import annotations

import time
from dataclasses import replace

from canary.selectors import (
    TrafficWindow,
    follow_up_counts_by_arm,
    follow_up_examples,
    follow_up_examples_sql,
    follow_ups_by_arm_sql,
    follow_ups_by_hour,
    follow_ups_judged_by_language,
    traffic_window_get,
)
from canary.services.follow_ups import follow_up_thresholds_get, follow_ups_label
from engines.follow_up.classifier import TrainedDetector, detector_load, error_rates
from engines.follow_up.correction import ErrorRates
from engines.routing import BASELINE, CANDIDATE
from gate.judges.follow_up_rate import (
    ROGAN_GLADEN,
    DetectorAccuracy,
    FollowUpCounts,
    FollowUpInputs,
    FollowUpRateDetails,
    FollowUpRatePolicy,
    FollowUpRateResult,
    follow_up_rate_judge,
)
from gate.judges.verdict import INSUFFICIENT, PASS
from gate.layers.base import GateLayer, LayerContext, LayerKind, ReportPart, estimates_of, to_json
from gate.layers.follow_up_review import follow_up_rate_with_live_agreement
from gate.layers.traffic import EXAMPLES, no_experiment_reason, probe_table, system_level, traffic_inputs
from gate.models import GateRun, LayerResult
from gate.policy import GatePolicyConfig
from gate.reporting import Attribution, AttributionLevel, Table

METHOD = (
    "follow-ups / answered questions per arm, corrected per language for the detector's measured "
    "sensitivity and specificity (Rogan–Gladen, delta-method interval with the error rates' uncertainty); "
    "non-inferiority on the corrected difference; observed rates with Wilson and Newcombe intervals beside; "
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


def _measure(*, window: TrafficWindow, policy: GatePolicyConfig) -> tuple[FollowUpRateResult, list[str]]:
    """The judgement, and the detector versions that judged the window's turns."""
    section = policy.section(FollowUpRatePolicy)
    kinds = tuple(section.follow_up_kinds)
    counts = follow_up_counts_by_arm(window=window, kinds=kinds)
    versions: list[str] = []
    judged: dict[str, dict[str, tuple[int, int]]] = {CANDIDATE: {}, BASELINE: {}}
    detector = follow_up_detector_accuracy(policy=policy)
    if detector is not None:
        judged, versions = follow_ups_judged_by_language(window=window, kinds=kinds)
    result = follow_up_rate_judge(
        candidate=FollowUpCounts(**counts[CANDIDATE], judged_by_language=judged[CANDIDATE]),
        baseline=FollowUpCounts(**counts[BASELINE], judged_by_language=judged[BASELINE]),
        detector=detector,
        max_rate=section.follow_up_max,
        decide_on=section.follow_up_decide_on,
        margin=section.follow_up_margin,
        min_answered=section.follow_up_min_answered,
        confidence=policy.general.confidence,
    )
    return result, versions


def _rate_phrase(result: FollowUpRateResult) -> str:
    candidate, baseline = result.candidate, result.baseline
    if candidate.rate is None:
        return "no answered questions on the candidate arm"
    text = f"candidate follow-up rate {candidate.rate:.3f} ({candidate.follow_ups}/{candidate.answered})"
    if candidate.corrected is not None and candidate.corrected.estimate is not None:
        text += f", corrected for the detector's errors {candidate.corrected.estimate:.3f}"
    if baseline is not None and baseline.rate is not None:
        text += (
            f" vs baseline {baseline.rate:.3f} ({baseline.follow_ups}/{baseline.answered}), "
            f"difference {candidate.rate - baseline.rate:+.3f}"
        )
    return text


def attribution_build(
    *, window: TrafficWindow, kinds: tuple[str, ...], result: FollowUpRateResult
) -> Attribution:
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
                    title="follow-ups by hour",
                    columns=hour_columns,
                    rows=[[h.hour.isoformat(), h.arm, h.answered, h.follow_ups, h.rate] for h in hours[-48:]],
                )
            ],
        ),
        data=AttributionLevel(
            summary="the candidate's hours with the highest follow-up rate, its latest follow-ups with the "
            f"question and answer before them, and the stress probes ({probes_summary})",
            reproduce=follow_up_examples_sql(window=window, kinds=kinds, arm=CANDIDATE),
            tables=[
                Table(
                    title="the candidate's worst hours",
                    columns=hour_columns,
                    rows=[[h.hour.isoformat(), h.arm, h.answered, h.follow_ups, h.rate] for h in worst],
                ),
                Table(
                    title="the candidate's latest follow-ups",
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
    title = "Follow-up rate"
    kind = LayerKind.TRAFFIC
    policy = FollowUpRatePolicy
    details_type = FollowUpRateDetails
    metric = "follow_up_rate"
    method = METHOD

    def run(self, ctx: LayerContext) -> LayerResult:
        run = ctx.run
        section = ctx.policy.section(FollowUpRatePolicy)
        started = time.perf_counter()
        experiment = run.experiment
        if experiment is None:
            return self.store(
                run=run,
                started=started,
                verdict=INSUFFICIENT,
                details=FollowUpRateDetails(inputs=FollowUpInputs(experiment=None)),
                reasons=[no_experiment_reason(run)],
                threshold=section.follow_up_max,
            )
        window = traffic_window_get(experiment=experiment)
        mark = time.perf_counter()
        labelled = follow_ups_label(experiment=experiment, until=window.end)
        label_seconds = time.perf_counter() - mark
        mark = time.perf_counter()
        result, versions = _measure(window=window, policy=ctx.policy)
        result, live = follow_up_rate_with_live_agreement(
            result=result, experiment=experiment, policy=ctx.policy
        )
        sql_seconds = time.perf_counter() - mark
        inputs = FollowUpInputs(
            **vars(traffic_inputs(window)),
            counted_kinds=list(section.follow_up_kinds),
            detector_thresholds=follow_up_thresholds_get(family=experiment.family).as_dict(),
            unjudged_turns=result.unjudged,
            detector_version=detector_load().version,
            detector_versions_in_traffic=versions,
        )
        details = FollowUpRateDetails(
            inputs=inputs,
            method=METHOD,
            judged=result,
            live_agreement=live,
            labelled_now=labelled,
            timings={"labelling": label_seconds, "aggregation": sql_seconds},
        )
        if result.verdict != PASS:
            attribution = attribution_build(window=window, kinds=section.follow_up_kinds, result=result)
            details = replace(details, attribution=attribution)
        return self.store(
            run=run,
            started=started,
            verdict=result.verdict,
            details=details,
            reasons=list(result.reasons),
            threshold=section.follow_up_max,
            estimate=result.candidate.judged_rate,
            ci_low=result.candidate.judged_low,
            ci_high=result.candidate.judged_high,
        )

    def report(self, *, run: GateRun, result: LayerResult, details: FollowUpRateDetails | None) -> ReportPart:
        if details is None:
            return ReportPart(inputs={}, estimates={})
        estimates = estimates_of(details.judged) if details.judged else {}
        if details.live_agreement is not None:
            estimates["live_agreement"] = to_json(details.live_agreement)
        return ReportPart(
            inputs=to_json(details.inputs), estimates=estimates, attribution=details.attribution
        )
