"""The suite-vs-live shift check: does the suite look like the questions users ask? A seeded draw of the
canary experiment's user questions (both arms, stress probes excluded) against the suite's inputs, per
language (`engines.shift`, judged by `gate.judges.suite_shift`). Opt-in: only a policy that names it in
`required_layers` runs it. See docs/shift.md."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from django.utils.translation import pgettext_lazy

from canary.models import Experiment
from canary.selectors.experiments import traffic_window_get
from canary.selectors.shift import live_questions
from engines.shift import LanguageShift, shift_measure, texts_by_language
from gate.judges.suite_shift import METHOD, SuiteShiftDetails, SuiteShiftPolicy, suite_shift_judge
from gate.judges.traffic import TrafficInputs
from gate.judges.verdict import INSUFFICIENT
from gate.layers.base import GateLayer, LayerContext, LayerKind, ReportPart, to_json
from gate.layers.traffic import no_experiment_reason, traffic_inputs
from gate.models import GateRun, LayerResult
from gate.policy import GatePolicyConfig
from registry.models import EvalItem, EvalSuite


def suite_shift_measure(
    *, experiment: Experiment, items: list[EvalItem], policy: GatePolicyConfig
) -> tuple[list[LanguageShift], int, int]:
    """Each language's figures for the experiment's traffic against `items` under `policy`, with how
    many user questions the experiment has and how many were read. The layer and the pages call it."""
    section = policy.section(SuiteShiftPolicy)
    window = traffic_window_get(experiment=experiment)
    live = live_questions(
        experiment=experiment,
        sample=section.suite_shift_sample,
        seed=section.suite_shift_seed,
        until=window.end,
    )
    # Both sides by the same rule, the script: live questions declare no language, so a suite item
    # declared "mixed" (or anything but en/zh) would meet no live question, and a mixed live question
    # would be held against the other suite items of its majority script only.
    figures = shift_measure(
        live=texts_by_language(live.texts),
        suite=texts_by_language([i.input for i in items]),
        sample=section.suite_shift_sample,
        seed=section.suite_shift_seed,
        confidence=policy.general.confidence,
    )
    return figures, live.total, len(live.texts)


class SuiteShiftLayer(GateLayer[SuiteShiftDetails]):
    name = "suite_shift"
    title = pgettext_lazy("code", "Suite-vs-live shift")
    kind = LayerKind.TRAFFIC
    policy = SuiteShiftPolicy
    details_type = SuiteShiftDetails
    metric = "live_to_suite_distance"
    method = METHOD
    required_by_default = False

    def run(self, ctx: LayerContext) -> LayerResult:
        section = ctx.policy.section(SuiteShiftPolicy)
        started, experiment = time.perf_counter(), ctx.run.experiment
        details = SuiteShiftDetails(
            inputs=TrafficInputs(experiment=None),
            suite=f"{ctx.run.suite.name}@{ctx.run.suite.version}",
            bar=section.suite_shift_max,
            min_live=section.suite_shift_min_live,
            sample=section.suite_shift_sample,
            seed=section.suite_shift_seed,
        )
        if experiment is None:
            return self.store(
                run=ctx.run,
                started=started,
                verdict=INSUFFICIENT,
                details=details,
                reasons=[no_experiment_reason(ctx.run)],
                threshold=section.suite_shift_max,
            )
        figures, total, read = suite_shift_measure(experiment=experiment, items=ctx.items, policy=ctx.policy)
        result = suite_shift_judge(
            languages=figures,
            live_read=read,
            bar=section.suite_shift_max,
            min_live=section.suite_shift_min_live,
        )
        details = replace(
            details,
            inputs=traffic_inputs(traffic_window_get(experiment=experiment)),
            live_total=total,
            live_read=read,
            languages=figures,
            judged=result.judged,
        )
        return self.store(
            run=ctx.run,
            started=started,
            verdict=result.verdict,
            details=details,
            reasons=result.reasons,
            threshold=section.suite_shift_max,
            estimate=result.worst,
        )

    def report(self, *, run: GateRun, result: LayerResult, details: SuiteShiftDetails | None) -> ReportPart:
        if details is None:
            return ReportPart(inputs={}, estimates={})
        inputs = {
            **to_json(details.inputs),
            "suite": details.suite,
            "live_total": details.live_total,
            "live_read": details.live_read,
            "sample": details.sample,
            "seed": details.seed,
        }
        estimates = {"languages": to_json(details.languages), "judged": details.judged}
        return ReportPart(inputs=inputs, estimates=estimates)


@dataclass(frozen=True, kw_only=True)
class StoredShift:
    """The latest suite-vs-live shift check stored for an experiment: its run, verdict and details."""

    run: GateRun
    verdict: str
    details: SuiteShiftDetails


def suite_shift_latest(
    *, experiment: Experiment | None = None, suite: EvalSuite | None = None
) -> StoredShift | None:
    """The latest finished suite_shift result of a gate run on `experiment`, or on `suite` (the
    experiment's and the suite's page panels: they show what a run measured, and measure nothing)."""
    results = LayerResult.objects.select_related("gate_run", "gate_run__suite").filter(
        layer=SuiteShiftLayer.name
    )
    if experiment is not None:
        results = results.filter(gate_run__experiment=experiment)
    if suite is not None:
        results = results.filter(gate_run__suite=suite)
    for result in results.exclude(verdict=GateRun.Verdict.PENDING).order_by("-gate_run__created_at")[:5]:
        details = SuiteShiftLayer().details(result)
        if details is not None and details.inputs.experiment:
            return StoredShift(run=result.gate_run, verdict=result.verdict, details=details)
    return None
