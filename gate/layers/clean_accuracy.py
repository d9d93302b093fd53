"""Layer 0, clean accuracy: the suite as it is, every item's answer stored."""

from __future__ import annotations

import functools
import operator
import time
from dataclasses import replace

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from engines.reasons import reason, reasons_to_json
from gate.charts import Chart
from gate.judges.clean_accuracy import (
    AccuracySide,
    AccuracySummary,
    AnswerJudgeDetails,
    CleanAccuracyCode,
    CleanAccuracyDetails,
    CleanAccuracyPolicy,
    CleanAccuracyResult,
    ItemOutcome,
    clean_accuracy_judge,
    repeat_seed,
)
from gate.judges.verdict import INSUFFICIENT
from gate.layers.answer_judge import (
    AnswerJudge,
    AnswerJudgeUnusable,
    JudgePrepared,
    answer_cutoffs,
    answer_judge_prepare,
)
from gate.layers.base import (
    GateLayer,
    LayerContext,
    LayerKind,
    ReportPart,
    estimates_of,
    gate_run_assert_held,
    layer_error_store,
    to_json,
)
from gate.layers.model import (
    ModelAttributionCode,
    answers_judge,
    breakdown_chart,
    breakdown_table,
    model_attribution,
    versions_cost,
)
from gate.layers.outputs import VersionOutputs, model_outputs_predict
from gate.models import GateRun, LayerResult, SampleResult
from gate.policy import GatePolicyConfig
from registry.models import EvalItem, ModelVersion

SNIPPET_CHARS = 120


def _deterministic(version: ModelVersion, repeats: int) -> bool:
    """Asked once and the answer counted `repeats` times: an in-process classifier answers alike."""
    from engines.backends import backend_deterministic

    return repeats > 1 and backend_deterministic(version.backend_kind)


def _asks(version: ModelVersion, repeats: int) -> int:
    return 1 if _deterministic(version, repeats) else repeats


def _repeated_predict(*, ctx: LayerContext, version: ModelVersion, repeats: int) -> VersionOutputs:
    """The version's answers to every item, `repeats` times over (repeat-major); each repeat's requests
    seeded (`repeat_seed`) unless it is asked once (repeats 1, or a deterministic backend)."""
    general, section = ctx.policy.general, ctx.policy.section(CleanAccuracyPolicy)
    asks = _asks(version, repeats)
    rounds = [
        model_outputs_predict(
            version=version,
            texts=[i.input for i in ctx.items],
            batch_size=general.batch_size,
            on_batch=ctx.progress.advance,
            use_cache=general.output_cache,
            seeds=None
            if asks == 1
            else [repeat_seed(seed=section.repeats_seed, item_id=i.external_id, repeat=r) for i in ctx.items],
        )
        for r in range(asks)
    ]
    return VersionOutputs(
        predictions=[p for _ in range(repeats // asks) for out in rounds for p in out.predictions],
        seconds=sum(out.seconds for out in rounds),
        computed=sum(out.computed for out in rounds),
        cached=sum(out.cached for out in rounds),
        device=rounds[0].device,
        usage=functools.reduce(operator.add, (out.usage for out in rounds)),
    )


def _side(
    version: ModelVersion, summary: AccuracySummary, outputs: VersionOutputs, repeats: int
) -> AccuracySide:
    fields = {name: getattr(summary, name) for name in AccuracySummary.__dataclass_fields__}
    if summary.repeats is not None:
        fields["repeats"] = replace(summary.repeats, deterministic=_deterministic(version, repeats))
    return AccuracySide(
        **fields,
        version=version.ref,
        seconds=outputs.seconds,
        items_per_second=outputs.computed / outputs.seconds if outputs.seconds else None,
        computed=outputs.computed,
        cached=outputs.cached,
        device=outputs.device,
    )


def _outcomes(
    *, ctx: LayerContext, outputs: VersionOutputs, judge: AnswerJudge | None = None
) -> list[ItemOutcome]:
    """A version's answers to the suite (each item's repeats in turn), each judged against its item
    (free text by the answer `judge` when one is admitted)."""
    items = ctx.items * (len(outputs.predictions) // len(ctx.items)) if ctx.items else []
    judged = answers_judge(
        items=items,
        predictions=outputs.predictions,
        cutoffs=ctx.policy.general.text_cutoffs,
        judge=judge,
        questions=[i.input for i in items],
    )
    return [
        ItemOutcome(
            item_id=item.external_id,
            tags=tuple(item.tags),
            language=item.language,
            correct=correct,
            errored=p.error is not None,
            snippet=item.input[:SNIPPET_CHARS],
        )
        for item, p, correct in zip(items, outputs.predictions, judged, strict=True)
    ]


def _details(
    *,
    ctx: LayerContext,
    result: CleanAccuracyResult,
    outputs: dict[int, VersionOutputs],
    judge: AnswerJudgeDetails | None,
) -> CleanAccuracyDetails:
    """What the layer stores: each side's accuracy with its model time, and their difference."""
    run, baseline = ctx.run, ctx.baseline
    repeats = ctx.policy.section(CleanAccuracyPolicy).repeats
    details = CleanAccuracyDetails(
        answer_judge=judge,
        suite=str(run.suite),
        suite_hash=run.suite.content_hash,
        candidate=_side(run.candidate, result.candidate, outputs[run.candidate_id], repeats),
        costs=[
            *versions_cost(
                versions=ctx.versions,
                usage={pk: out.usage for pk, out in outputs.items()},
                seconds={pk: out.seconds for pk, out in outputs.items()},
                devices={pk: out.device for pk, out in outputs.items()},
            ),
            *([judge.cost] if judge is not None and judge.cost is not None else []),  # the judge's work
        ],
    )
    if baseline is None or result.baseline is None:
        return details
    assert result.candidate.accuracy is not None and result.baseline.accuracy is not None
    return replace(
        details,
        baseline=_side(baseline, result.baseline, outputs[baseline.pk], repeats),
        difference=result.candidate.accuracy - result.baseline.accuracy,
    )


def _samples_store(
    *,
    ctx: LayerContext,
    layer: LayerResult,
    outputs: dict[int, VersionOutputs],
    outcomes: dict[int, list[ItemOutcome]],
) -> None:
    """Every version's answer to every item, for drill-down and the attribution (with repeats, the
    first repeat's: the items come first in the answers)."""
    SampleResult.objects.bulk_create(
        [
            SampleResult(
                layer_result=layer,
                version_id=pk,
                item=item,
                input_text="",  # the item's own input
                output_label=p.label or "",
                output_text=p.text,
                correct=outcome.correct,
                latency_ms=p.latency_ms,
                error=p.error or "",
            )
            for pk in outputs
            for item, p, outcome in zip(
                ctx.items,
                outputs[pk].predictions[: len(ctx.items)],
                outcomes[pk][: len(ctx.items)],
                strict=True,
            )
        ],
        batch_size=500,
    )


class CleanAccuracyLayer(GateLayer[CleanAccuracyDetails]):
    name = "clean_accuracy"
    title = pgettext_lazy("code", "Clean accuracy")
    kind = LayerKind.MODEL
    policy = CleanAccuracyPolicy
    details_type = CleanAccuracyDetails
    metric = "accuracy"
    essential = True
    method = (
        "share of suite items answered correctly (label match, else BERTScore/chrF cut-off against the "
        "reference, or the policy's answer judge once its Cohen's kappa with labelled answers clears its "
        "bar), Wilson interval; with repeats, the mean over every item's k answers with an interval "
        "clustered by item (t, n-1 df), pass^k and the flaky items; judged on the bound the policy names"
    )

    def units(self, *, policy: GatePolicyConfig, items: list[EvalItem], versions: list[ModelVersion]) -> int:
        repeats = policy.section(CleanAccuracyPolicy).repeats
        return sum(len(items) * _asks(v, repeats) for v in versions)

    def run(self, ctx: LayerContext) -> LayerResult:
        general = ctx.policy.general
        section = ctx.policy.section(CleanAccuracyPolicy)
        started = time.perf_counter()
        try:
            prepared = answer_judge_prepare(ctx=ctx)
        except AnswerJudgeUnusable as exc:
            return layer_error_store(layer=self, run=ctx.run, reasons=[exc.reason])
        if prepared is not None and not prepared.admitted:
            return self._judge_refused(ctx=ctx, prepared=prepared, started=started)
        judge = prepared.judge if prepared is not None else None
        outputs = {v.pk: _repeated_predict(ctx=ctx, version=v, repeats=section.repeats) for v in ctx.versions}
        outcomes = {pk: _outcomes(ctx=ctx, outputs=out, judge=judge) for pk, out in outputs.items()}
        result = clean_accuracy_judge(
            candidate=outcomes[ctx.run.candidate_id],
            baseline=ctx.baseline_of(outcomes),
            policy=section,
            decide_on=general.decide_on,
            confidence=general.confidence,
        )
        judge_details = None
        if prepared is not None:
            judge_details = prepared.details(
                section=section, decide_on=general.decide_on, cutoffs=answer_cutoffs(general.text_cutoffs)
            )
            notes = [prepared.why]
            if judge_details.unreadable:
                notes.append(
                    reason(
                        CleanAccuracyCode.JUDGE_UNREADABLE,
                        unreadable=judge_details.unreadable,
                        n=judge_details.items_judged,
                    )
                )
            result = replace(result, reasons=[*result.reasons, *notes])
        with transaction.atomic():
            gate_run_assert_held(ctx.run)
            layer = LayerResult.objects.create(
                gate_run=ctx.run,
                layer=self.name,
                verdict=result.verdict,
                metric=self.metric,
                estimate=result.candidate.accuracy,
                ci_low=result.candidate.ci_low,
                ci_high=result.candidate.ci_high,
                threshold=section.clean_accuracy_min,
                reasons=reasons_to_json(result.reasons),
                details=to_json(_details(ctx=ctx, result=result, outputs=outputs, judge=judge_details)),
                wall_seconds=time.perf_counter() - started,
                device=outputs[ctx.run.candidate_id].device,
            )
            _samples_store(ctx=ctx, layer=layer, outputs=outputs, outcomes=outcomes)
        return layer

    def _judge_refused(self, *, ctx: LayerContext, prepared: JudgePrepared, started: float) -> LayerResult:
        """The answer judge may not decide: insufficient data, no version asked; the details hold its
        measurement (and the cut-offs' on the same labelled answers)."""
        general, section = ctx.policy.general, ctx.policy.section(CleanAccuracyPolicy)
        judge = prepared.details(
            section=section, decide_on=general.decide_on, cutoffs=answer_cutoffs(general.text_cutoffs)
        )
        details = CleanAccuracyDetails(
            suite=str(ctx.run.suite),
            suite_hash=ctx.run.suite.content_hash,
            candidate=None,
            costs=[judge.cost] if judge.cost is not None else [],
            answer_judge=judge,
        )
        with transaction.atomic():
            gate_run_assert_held(ctx.run)
            return LayerResult.objects.create(
                gate_run=ctx.run,
                layer=self.name,
                verdict=INSUFFICIENT,
                metric=self.metric,
                threshold=section.clean_accuracy_min,
                reasons=reasons_to_json([prepared.why]),
                details=to_json(details),
                wall_seconds=time.perf_counter() - started,
                device=judge.cost.device if judge.cost else "",
            )

    def report(
        self, *, run: GateRun, result: LayerResult, details: CleanAccuracyDetails | None
    ) -> ReportPart:
        inputs = {"suite": f"{run.suite.name}@{run.suite.version}", "suite_hash": run.suite.content_hash}
        if details is None:
            return ReportPart(inputs=inputs, estimates={})
        attribution = None
        if result.verdict not in ("pass", "pending") and details.candidate is not None:
            candidate, baseline = details.candidate, details.baseline
            attribution = model_attribution(
                run=run,
                result=result,
                phenomenon=[
                    breakdown_table(
                        title=reason(ModelAttributionCode.WEAKEST_TAGS_TITLE),
                        key="tag",
                        candidate=candidate.by_tag,
                        baseline=baseline.by_tag if baseline else None,
                    ),
                    breakdown_table(
                        title=reason(ModelAttributionCode.BY_LANGUAGE_TITLE),
                        key="language",
                        candidate=candidate.by_language,
                        baseline=baseline.by_language if baseline else None,
                    ),
                ],
                data=[],
            )
        return ReportPart(
            inputs=inputs,
            estimates=estimates_of(details, without=("suite", "suite_hash", "costs")),
            attribution=attribution,
        )

    def charts(self, *, details: CleanAccuracyDetails, threshold: float | None) -> list[Chart]:
        if details.candidate is None:
            return []
        return [
            breakdown_chart(
                details=details,
                breakdown="by_tag",
                rate="accuracy",
                id="clean-by-tag",
                title=_("Clean accuracy by tag"),
                y_name=_("accuracy"),
                threshold=threshold,
            )
        ]
