"""Layer 0, clean accuracy: the suite as it is, every item's answer stored; with `clean_noise_share`,
also the suite with that share of its items replaced by noisy versions (the seed's fix for a suite
too clean), reported beside the clean figure."""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import time
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from engines.backends.base import language_of
from engines.perturbation.recipes import SCRIPTS_BY_LANGUAGE
from engines.reasons import Reason, reason, reasons_to_json
from gate.charts import Chart
from gate.judges.clean_accuracy import (
    NOISY_LISTED,
    AccuracySide,
    AccuracySummary,
    AnswerJudgeDetails,
    CleanAccuracyCode,
    CleanAccuracyDetails,
    CleanAccuracyPolicy,
    CleanAccuracyResult,
    ItemOutcome,
    NoisyItem,
    NoisyMixDetails,
    NoisySide,
    clean_accuracy_judge,
    items_compare,
    noisy_counts,
    noisy_reason,
    noisy_side_summarize,
    repeat_seed,
)
from gate.judges.robustness import RobustnessPolicy
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

if TYPE_CHECKING:
    from engines.perturbation import PerturbedSample

SNIPPET_CHARS = 120


def _deterministic(version: ModelVersion, repeats: int) -> bool:
    """Asked once and the answer counted `repeats` times: an in-process classifier answers alike."""
    from engines.backends import backend_deterministic

    return repeats > 1 and backend_deterministic(version.backend_kind)


def _asks(version: ModelVersion, repeats: int) -> int:
    return 1 if _deterministic(version, repeats) else repeats


def _repeated_predict(
    *,
    ctx: LayerContext,
    version: ModelVersion,
    repeats: int,
    items: list[EvalItem] | None = None,
    texts: list[str] | None = None,
) -> VersionOutputs:
    """The version's answers to every item (or to `items`, as `texts` when given: their noisy
    versions), `repeats` times over (repeat-major); each repeat's requests seeded (`repeat_seed` of the
    item, so a noisy version is asked with its clean item's seeds) unless it is asked once (repeats 1,
    or a deterministic backend)."""
    general, section = ctx.policy.general, ctx.policy.section(CleanAccuracyPolicy)
    items = ctx.items if items is None else items
    texts = [i.input for i in items] if texts is None else texts
    asks = _asks(version, repeats)
    rounds = [
        model_outputs_predict(
            version=version,
            texts=texts,
            batch_size=general.batch_size,
            on_batch=ctx.progress.advance,
            use_cache=general.output_cache,
            seeds=None
            if asks == 1
            else [repeat_seed(seed=section.repeats_seed, item_id=i.external_id, repeat=r) for i in items],
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
    *,
    ctx: LayerContext,
    outputs: VersionOutputs,
    items: list[EvalItem] | None = None,
    judge: AnswerJudge | None = None,
) -> list[ItemOutcome]:
    """A version's answers to the suite (or to `items`; each item's repeats in turn), each judged
    against its item (free text by the answer `judge` when one is admitted)."""
    asked = ctx.items if items is None else items
    items = asked * (len(outputs.predictions) // len(asked)) if asked else []
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
    outcomes: dict[int, list[ItemOutcome]],
    outputs: dict[int, VersionOutputs],
    judge: AnswerJudgeDetails | None,
    noisy: NoisyMixDetails | None,
    noisy_outputs: dict[int, VersionOutputs],
) -> CleanAccuracyDetails:
    """What the layer stores: each side's accuracy with its model time, and their difference; the
    noisy mix beside them (its model work in the costs)."""
    run, baseline = ctx.run, ctx.baseline
    repeats = ctx.policy.section(CleanAccuracyPolicy).repeats
    spent = {pk: [out, *([noisy_outputs[pk]] if pk in noisy_outputs else [])] for pk, out in outputs.items()}
    details = CleanAccuracyDetails(
        answer_judge=judge,
        suite=str(run.suite),
        suite_hash=run.suite.content_hash,
        candidate=_side(run.candidate, result.candidate, outputs[run.candidate_id], repeats),
        costs=[
            *versions_cost(
                versions=ctx.versions,
                usage={
                    pk: functools.reduce(operator.add, (o.usage for o in outs)) for pk, outs in spent.items()
                },
                seconds={pk: sum(o.seconds for o in outs) for pk, outs in spent.items()},
                devices={pk: out.device for pk, out in outputs.items()},
            ),
            *([judge.cost] if judge is not None and judge.cost is not None else []),  # the judge's work
        ],
        noisy=noisy,
    )
    if baseline is None or result.baseline is None:
        return details
    assert result.candidate.accuracy is not None and result.baseline.accuracy is not None
    return replace(
        details,
        baseline=_side(baseline, result.baseline, outputs[baseline.pk], repeats),
        difference=result.candidate.accuracy - result.baseline.accuracy,
        comparison=items_compare(
            candidate=outcomes[run.candidate_id],
            baseline=outcomes[baseline.pk],
            confidence=ctx.policy.general.confidence,
            repeats=repeats,
        ),
    )


def _noise_language(item: EvalItem) -> str:
    """The item's language as the perturbation engine takes it (any other, or none: by its script)."""
    return item.language if item.language in SCRIPTS_BY_LANGUAGE else language_of(item.input)


def _noise_counts(items: list[EvalItem], share: float) -> dict[str, int]:
    return noisy_counts(sizes=dict(Counter(_noise_language(i) for i in items)), share=share)


def _noisy_versions(*, ctx: LayerContext) -> tuple[dict[str, PerturbedSample], list[str]]:
    """The drawn items' noisy versions (item id -> sample) and notes on the draw. Per language, its
    share of the items (`noisy_counts`): the first the recipe can edit in the perturbation engine's
    seeded order of that language's items, one sample each (numbers left alone unless the robustness
    section says numbers do not matter). Raises what `perturbation_set_build` raises."""
    from engines.perturbation import PerturbationSpec, perturbation_set_build

    section = ctx.policy.section(CleanAccuracyPolicy)
    assert section.clean_noise_share is not None
    by_language: dict[str, list[tuple[str, str, str]]] = {}
    for item in ctx.items:
        language = _noise_language(item)
        by_language.setdefault(language, []).append((item.external_id, item.input, language))
    spec = PerturbationSpec(
        recipe=section.clean_noise_recipe,
        seed=section.clean_noise_seed,
        numbers_matter=ctx.policy.section(RobustnessPolicy).numbers_matter,
    )
    chosen: dict[str, PerturbedSample] = {}
    notes: list[str] = []
    for language, wanted in _noise_counts(ctx.items, section.clean_noise_share).items():
        if not wanted:
            continue
        built = perturbation_set_build(items=by_language[language], spec=replace(spec, samples=wanted))
        notes.extend(built.notes)
        got = {s.item_id: s for s in reversed(built.samples)}  # an item's first sample
        chosen.update(got)
        if len(got) < wanted:
            notes.append(
                f"{language}: {len(got)} of {wanted} items replaced; the recipe can edit no more of them"
            )
    return chosen, list(dict.fromkeys(notes))


def _set_hash(samples: list[PerturbedSample]) -> str:
    digest = hashlib.sha256(b"evalhub-noisy-mix/1")
    for s in samples:
        digest.update(json.dumps([s.item_id, s.type, s.language, s.perturbed], ensure_ascii=False).encode())
    return digest.hexdigest()


def _mixed(
    *, items: list[EvalItem], clean: list[ItemOutcome], replaced: list[EvalItem], noisy: list[ItemOutcome]
) -> list[ItemOutcome]:
    """The clean outcomes (repeat-major over `items`) with each replaced item's in its noisy version
    (repeat-major over `replaced`) instead."""
    at = {item.external_id: k for k, item in enumerate(replaced)}
    n, m = len(items), len(replaced)
    return [noisy[(j // n) * m + at[o.item_id]] if o.item_id in at else o for j, o in enumerate(clean)]


def _noisy_mix(
    *, ctx: LayerContext, outcomes: dict[int, list[ItemOutcome]], judge: AnswerJudge | None = None
) -> tuple[NoisyMixDetails, dict[int, VersionOutputs], Reason | None]:
    """The suite with `clean_noise_share` of its items in their noisy version, answered by each
    version: its figures, the model work, and the reason that reports it."""
    from engines.perturbation import PerturbationResourceError, UnknownRecipeError

    general, section = ctx.policy.general, ctx.policy.section(CleanAccuracyPolicy)
    assert section.clean_noise_share is not None
    planned = sum(_noise_counts(ctx.items, section.clean_noise_share).values())
    noisy = NoisyMixDetails(
        share=section.clean_noise_share,
        recipe=section.clean_noise_recipe,
        seed=section.clean_noise_seed,
        items=len(ctx.items),
    )
    try:
        chosen, notes = _noisy_versions(ctx=ctx)
    except (PerturbationResourceError, UnknownRecipeError, ValueError) as exc:
        ctx.progress.advance(planned * sum(_asks(v, section.repeats) for v in ctx.versions))
        return noisy, {}, reason(CleanAccuracyCode.NOISY_UNAVAILABLE, why=str(exc))
    replaced = [item for item in ctx.items if item.external_id in chosen]
    samples = [chosen[item.external_id] for item in replaced]
    ctx.progress.advance((planned - len(replaced)) * sum(_asks(v, section.repeats) for v in ctx.versions))
    noisy = replace(
        noisy,
        replaced=len(replaced),
        replaced_by_language=dict(sorted(Counter(s.language for s in samples).items())),
        set_hash=_set_hash(samples),
        notes=notes,
        examples=[
            NoisyItem(
                item_id=s.item_id,
                language=s.language,
                type=s.type,
                diff=s.diff,
                snippet=s.perturbed[:SNIPPET_CHARS],
            )
            for s in samples[:NOISY_LISTED]
        ],
    )
    if not replaced:
        return noisy, {}, noisy_reason(noisy=noisy)
    outputs = {
        v.pk: _repeated_predict(
            ctx=ctx, version=v, repeats=section.repeats, items=replaced, texts=[s.perturbed for s in samples]
        )
        for v in ctx.versions
    }
    sides: dict[int, NoisySide] = {}
    for version in ctx.versions:
        out = outputs[version.pk]
        side = noisy_side_summarize(
            version=version.ref,
            clean=outcomes[version.pk],
            mix=_mixed(
                items=ctx.items,
                clean=outcomes[version.pk],
                replaced=replaced,
                noisy=_outcomes(ctx=ctx, outputs=out, items=replaced, judge=judge),
            ),
            replaced=set(chosen),
            confidence=general.confidence,
            repeats=section.repeats,
        )
        sides[version.pk] = replace(side, seconds=out.seconds, computed=out.computed, cached=out.cached)
    candidate, baseline = sides[ctx.run.candidate_id], ctx.baseline_of(sides)
    noisy = replace(
        noisy,
        candidate=candidate,
        baseline=baseline,
        difference=candidate.accuracy - baseline.accuracy
        if baseline is not None and candidate.accuracy is not None and baseline.accuracy is not None
        else None,
    )
    return noisy, outputs, noisy_reason(noisy=noisy)


def _samples_store(
    *,
    ctx: LayerContext,
    layer: LayerResult,
    outputs: dict[int, VersionOutputs],
    outcomes: dict[int, list[ItemOutcome]],
) -> None:
    """Every version's answer to every item, for drill-down and the attribution; with repeats, each
    repeat the version was asked (the answers are repeat-major; a deterministic version's are one
    answer counted k times, stored once)."""
    repeats = ctx.policy.section(CleanAccuracyPolicy).repeats
    n = len(ctx.items)
    SampleResult.objects.bulk_create(
        [
            SampleResult(
                layer_result=layer,
                version_id=version.pk,
                item=item,
                repeat=r,
                input_text="",  # the item's own input
                output_label=p.label or "",
                output_text=p.text,
                correct=outcome.correct,
                latency_ms=p.latency_ms,
                error=p.error or "",
            )
            for version in ctx.versions
            if version.pk in outputs
            for r in range(_asks(version, repeats))
            for item, p, outcome in zip(
                ctx.items,
                outputs[version.pk].predictions[r * n : (r + 1) * n],
                outcomes[version.pk][r * n : (r + 1) * n],
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
        "clustered by item (t, n-1 df), pass^k and the flaky items; judged on the bound the policy names; "
        "with clean_noise_share, the suite with that share of items (seeded, per language) in a noisy "
        "version beside it: its accuracy, the paired drop (t interval) and McNemar on the replaced items"
    )

    def units(self, *, policy: GatePolicyConfig, items: list[EvalItem], versions: list[ModelVersion]) -> int:
        section = policy.section(CleanAccuracyPolicy)
        share = section.clean_noise_share
        noisy = sum(_noise_counts(items, share).values()) if share else 0
        return sum((len(items) + noisy) * _asks(v, section.repeats) for v in versions)

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
        noisy, noisy_outputs, noisy_why = (
            _noisy_mix(ctx=ctx, outcomes=outcomes, judge=judge)
            if section.clean_noise_share
            else (None, {}, None)
        )
        details = _details(
            ctx=ctx,
            result=result,
            outcomes=outcomes,
            outputs=outputs,
            judge=judge_details,
            noisy=noisy,
            noisy_outputs=noisy_outputs,
        )
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
                reasons=reasons_to_json([*result.reasons, *([noisy_why] if noisy_why else [])]),
                details=to_json(details),
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
