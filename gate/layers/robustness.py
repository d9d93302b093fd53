"""Layer 1, robustness: ~1000 perturbed inputs (TextAttack transformations, seeded), answered by each
version and judged; optionally an attack search beside it.

The layer stores as it goes, so a run taken over after a worker crash resumes: samples are
committed chunk by chunk and only the missing chunks are computed again (model answers come from
the output cache); attack mode saves each version's report as it finishes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Count
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from engines.backends.base import language_of
from engines.reasons import Reason, gettext_noop, reason, wordings_register
from gate.charts import Chart
from gate.judges.robustness import (
    AttackDetails,
    RobustnessDetails,
    RobustnessPolicy,
    RobustnessResult,
    RobustnessSide,
    RobustnessSummary,
    SampleOutcome,
    robustness_judge,
)
from gate.layers.base import (
    GateLayer,
    LayerContext,
    LayerKind,
    ReportPart,
    estimates_of,
    gate_run_assert_held,
    to_json,
)
from gate.layers.model import (
    Expected,
    ModelAttributionCode,
    ModelWork,
    answers_judge,
    breakdown_chart,
    breakdown_table,
    model_attribution,
    versions_cost,
)
from gate.layers.outputs import model_outputs_predict
from gate.layers.robustness_adversarial import adversarial_run, version_scores_classes
from gate.models import GateRun, LayerResult, SampleResult
from gate.policy import GatePolicyConfig
from gate.reporting import Table
from registry.models import EvalItem, ModelVersion
from registry.services.versions import model_version_backend

if TYPE_CHECKING:
    from engines.perturbation import PerturbationSet, PerturbationSpec, PerturbedSample

LANGUAGES = ("en", "zh", "mixed")


class RobustnessLayerCode(StrEnum):
    ATTACK_NEEDS_CLASS_SCORES = "robustness.attack_needs_class_scores"
    ATTACK_UNAVAILABLE = "robustness.attack_unavailable"


wordings_register(
    {
        RobustnessLayerCode.ATTACK_NEEDS_CLASS_SCORES: gettext_noop(
            "attack mode needs class scores, which backend '{backend}' of {ref} does not give; an "
            "endpoint that returns token log-probabilities gives them once the version's labels are "
            "named (backend_config.labels)"
        ),
        RobustnessLayerCode.ATTACK_UNAVAILABLE: gettext_noop("attack mode: {why}"),
    }
)


def _unscored(versions: list[ModelVersion]) -> Reason | None:
    """Why attack mode cannot judge these versions: one of them gives no class scores."""
    for version in versions:
        if not version_scores_classes(version=version):
            return reason(
                RobustnessLayerCode.ATTACK_NEEDS_CLASS_SCORES, backend=version.backend_kind, ref=version.ref
            )
    return None


def _sides(
    *, ctx: LayerContext, result: RobustnessResult, work: ModelWork
) -> tuple[RobustnessSide, RobustnessSide | None]:
    """The candidate's and the baseline's rates with what this attempt spent on each."""

    def side(version: ModelVersion, summary: RobustnessSummary) -> RobustnessSide:
        computed, seconds = work.computed[version.pk], work.seconds[version.pk]
        return RobustnessSide(
            **{name: getattr(summary, name) for name in RobustnessSummary.__dataclass_fields__},
            version=version.ref,
            seconds=seconds,
            items_per_second=computed / seconds if seconds else None,
            computed=computed,
            cached=work.cached[version.pk],
        )

    baseline = ctx.baseline
    return side(ctx.run.candidate, result.candidate), (
        side(baseline, result.baseline) if baseline and result.baseline else None
    )


# What identifies the perturbed set and its judging: a stored layer with other values is begun again.
SETUP_FIELDS = (
    "recipe",
    "seed",
    "samples_requested",
    "set_hash",
    "shortfall",
    "notes",
    "judged_by",
    "text_cutoffs",
)


class RobustnessLayer(GateLayer[RobustnessDetails]):
    name = "robustness"
    title = pgettext_lazy("code", "Robustness")
    kind = LayerKind.MODEL
    policy = RobustnessPolicy
    details_type = RobustnessDetails
    metric = "robustness_rate"
    essential = True
    method = (
        "share of perturbed inputs still answered correctly (random-noise recipes: seeded TextAttack "
        "transformations; adversarial recipes: items drawn by seed per language, each searched by a "
        "word-level attack), Wilson interval; McNemar against the baseline on the same inputs"
    )

    def units(self, *, policy: GatePolicyConfig, items: list[EvalItem], versions: list[ModelVersion]) -> int:
        """Perturbed samples, clean answers in consistency mode, attacked items in attack mode, per
        version."""
        from engines.perturbation.word_attack import WORD_RECIPES

        section = policy.section(RobustnessPolicy)
        per_version = section.robustness_samples
        if section.robustness_recipe in WORD_RECIPES:
            # A word attack takes each labelled item once: a suite smaller than the sample size is all
            # of the work, known before it starts (else the bar jumped and the ETA read seconds).
            per_version = min(per_version, len({i.external_id for i in items if i.label}))
        if section.robustness_judge_by == "consistency":
            per_version += len(items)
        if section.attack_recipe:
            per_version += section.attack_items
        return per_version * len(versions)

    def run(self, ctx: LayerContext) -> LayerResult:
        from engines.perturbation import PerturbationResourceError, PerturbationSpec  # only on the worker
        from engines.perturbation.attack import AttackUnavailableError
        from engines.perturbation.word_attack import WORD_RECIPES

        section = ctx.policy.section(RobustnessPolicy)
        if section.robustness_recipe in WORD_RECIPES:
            return adversarial_run(layer=self, ctx=ctx)
        started = time.perf_counter()
        work = ModelWork(phases=("perturbation", "inference", "storage", "scoring"))
        spec = PerturbationSpec(
            recipe=section.robustness_recipe,
            seed=section.robustness_seed,
            samples=section.robustness_samples,
            shares=section.robustness_shares,
            numbers_matter=section.numbers_matter,
        )
        with work.phase("perturbation"):
            perturbed = self._set_build(ctx=ctx, spec=spec)
        if isinstance(perturbed, LayerResult):
            return perturbed
        setup = self._setup(ctx=ctx, spec=spec, perturbed=perturbed)
        # Another set or judging than the one begun starts the layer over.
        layer, stored_setup = self.begin(
            run=ctx.run, setup=setup, same=SETUP_FIELDS, threshold=section.robustness_min
        )
        # Units this layer was budgeted for but will not need (fewer samples could be made).
        ctx.progress.advance((section.robustness_samples - len(perturbed.samples)) * len(ctx.versions))
        self._samples_answer(ctx=ctx, layer=layer, samples=perturbed.samples, work=work)
        attack = stored_setup.attack if stored_setup else None
        if section.attack_recipe:
            try:
                with work.phase("attack"):
                    attack = self._attacks_run(ctx=ctx, layer=layer, setup=setup, attack=attack)
            except (PerturbationResourceError, AttackUnavailableError) as exc:
                why = reason(RobustnessLayerCode.ATTACK_UNAVAILABLE, why=str(exc))
                return self._error(ctx=ctx, reason=why, details=replace(setup, attack=attack))
        return self._judged_store(
            ctx=ctx,
            layer=layer,
            setup=replace(setup, attack=attack),
            perturbed=perturbed,
            work=work,
            started=started,
        )

    def _judged_store(
        self,
        *,
        ctx: LayerContext,
        layer: LayerResult,
        setup: RobustnessDetails,
        perturbed: PerturbationSet,
        work: ModelWork,
        started: float,
    ) -> LayerResult:
        """Judge every stored sample and write the layer's result."""
        section = ctx.policy.section(RobustnessPolicy)
        with work.phase("scoring"):
            outcomes = self._outcomes(ctx=ctx, layer=layer, samples=perturbed.samples)
            result = robustness_judge(
                candidate=outcomes[ctx.run.candidate_id],
                baseline=ctx.baseline_of(outcomes),
                policy=section,
                decide_on=ctx.policy.general.decide_on,
                confidence=ctx.policy.general.confidence,
                shortfall=perturbed.shortfall,
            )
        candidate, baseline = _sides(ctx=ctx, result=result, work=work)
        details = replace(
            setup,
            candidate=candidate,
            baseline=baseline,
            comparison=result.comparison,
            worst_items=result.worst,
            # Seconds of this attempt: building the set, model calls, chunk commits, judging.
            timings=work.timings,
            costs=versions_cost(
                versions=ctx.versions, usage=work.usage, seconds=work.seconds, devices=work.devices
            ),
        )
        return self.store(
            run=ctx.run,
            started=started,
            verdict=result.verdict,
            details=details,
            reasons=result.reasons,
            threshold=section.robustness_min,
            estimate=result.candidate.rate,
            ci_low=result.candidate.ci_low,
            ci_high=result.candidate.ci_high,
            device=work.device,
        )

    def _set_build(self, *, ctx: LayerContext, spec: PerturbationSpec) -> PerturbationSet | LayerResult:
        """The perturbed set, or the layer's error when it cannot be made; an
        attack that cannot run is known here too, before any model work."""
        from engines.perturbation import PerturbationResourceError, UnknownRecipeError, perturbation_set_build
        from engines.perturbation.attack import AttackUnavailableError, attack_recipe_check

        section = ctx.policy.section(RobustnessPolicy)
        unbuilt = RobustnessDetails(recipe=spec.recipe, seed=spec.seed, attack_recipe=section.attack_recipe)
        try:
            if section.attack_recipe:
                attack_recipe_check(recipe=section.attack_recipe)
                unscored = _unscored(ctx.versions)
                if unscored is not None:
                    return self._error(ctx=ctx, reason=unscored, details=unbuilt)
            return perturbation_set_build(
                items=[
                    (i.external_id, i.input, i.language if i.language in LANGUAGES else language_of(i.input))
                    for i in ctx.items
                ],
                spec=spec,
            )
        except (PerturbationResourceError, UnknownRecipeError, AttackUnavailableError, ValueError) as exc:
            return self._error(ctx=ctx, reason=str(exc), details=unbuilt)

    def _setup(
        self, *, ctx: LayerContext, spec: PerturbationSpec, perturbed: PerturbationSet
    ) -> RobustnessDetails:
        """What identifies the set and its judging (`SETUP_FIELDS`): what a resumed run must match."""
        section = ctx.policy.section(RobustnessPolicy)
        return RobustnessDetails(
            recipe=spec.recipe,
            seed=spec.seed,
            samples_requested=spec.samples,
            set_hash=perturbed.content_hash,
            shortfall=list(perturbed.shortfall),
            notes=list(perturbed.notes),
            judged_by=section.robustness_judge_by,
            text_cutoffs=ctx.policy.general.text_cutoffs,
            attack_recipe=section.attack_recipe,
        )

    def _samples_answer(
        self, *, ctx: LayerContext, layer: LayerResult, samples: Sequence[PerturbedSample], work: ModelWork
    ) -> None:
        """Every version's answers to the samples, judged and committed chunk by chunk (a resumed run
        skips the samples already stored)."""
        section = ctx.policy.section(RobustnessPolicy)
        by_id = {item.external_id: item for item in ctx.items}
        expected = (
            {v.pk: self._clean_expected(ctx=ctx, version=v, work=work) for v in ctx.versions}
            if section.robustness_judge_by == "consistency"
            else None
        )
        stored = set(layer.samples.values_list("version_id", "sample_index"))
        size = section.robustness_chunk_size
        for start in range(0, len(samples), size):
            chunk = range(start, min(start + size, len(samples)))
            for version in ctx.versions:
                todo = [i for i in chunk if (version.pk, i) not in stored]
                ctx.progress.advance(len(chunk) - len(todo))
                if todo:
                    references = expected[version.pk] if expected else by_id
                    self._chunk_answer(
                        ctx=ctx,
                        layer=layer,
                        version=version,
                        todo=[samples[i] for i in todo],
                        indexes=todo,
                        references=references,
                        by_id=by_id,
                        work=work,
                    )

    def _chunk_answer(
        self,
        *,
        ctx: LayerContext,
        layer: LayerResult,
        version: ModelVersion,
        todo: list[PerturbedSample],
        indexes: list[int],
        references: dict[str, Any],
        by_id: dict[str, EvalItem],
        work: ModelWork,
    ) -> None:
        general = ctx.policy.general
        outputs = model_outputs_predict(
            version=version,
            texts=[sample.perturbed for sample in todo],
            batch_size=general.batch_size,
            on_batch=ctx.progress.advance,
            use_cache=general.output_cache,
        )
        work.outputs_add(version=version, outputs=outputs, candidate=version.pk == ctx.run.candidate_id)
        with work.phase("scoring"):
            judged = answers_judge(
                items=[references[sample.item_id] for sample in todo],
                predictions=outputs.predictions,
                cutoffs=general.text_cutoffs,
            )
        with work.phase("storage"), transaction.atomic():
            gate_run_assert_held(ctx.run)
            SampleResult.objects.bulk_create(
                [
                    SampleResult(
                        layer_result=layer,
                        version=version,
                        item=by_id[sample.item_id],
                        sample_index=i,
                        perturbation=sample.type,
                        diff=sample.diff,
                        input_text=sample.perturbed,
                        output_label=p.label or "",
                        output_text=p.text,
                        correct=correct,
                        latency_ms=p.latency_ms,
                        error=p.error or "",
                    )
                    for i, sample, p, correct in zip(indexes, todo, outputs.predictions, judged, strict=True)
                ],
                ignore_conflicts=True,
            )

    def _outcomes(
        self, *, ctx: LayerContext, layer: LayerResult, samples: Sequence[PerturbedSample]
    ) -> dict[int, list[SampleOutcome]]:
        """Every stored sample's outcome per version, in sample order (this attempt's and earlier ones')."""
        by_id = {item.external_id: item for item in ctx.items}
        outcomes: dict[int, list[SampleOutcome]] = {v.pk: [] for v in ctx.versions}
        rows = layer.samples.order_by("sample_index").values_list(
            "version_id", "sample_index", "correct", "error"
        )
        for version_id, index, correct, error in rows:
            sample = samples[index]
            outcomes[version_id].append(
                SampleOutcome(
                    item_id=sample.item_id,
                    type=sample.type,
                    language=sample.language,
                    tags=tuple(by_id[sample.item_id].tags),
                    correct=bool(correct),
                    errored=bool(error),
                )
            )
        return outcomes

    def _clean_expected(
        self, *, ctx: LayerContext, version: ModelVersion, work: ModelWork
    ) -> dict[str, Expected]:
        """Consistency mode: the version's own answer to each clean item is what its perturbed samples
        must agree with (a clean answer that errored agrees with nothing; asking for it is the
        layer's model work too, usually taken from the output cache)."""
        outputs = model_outputs_predict(
            version=version,
            texts=[i.input for i in ctx.items],
            batch_size=ctx.policy.general.batch_size,
            on_batch=ctx.progress.advance,
            use_cache=ctx.policy.general.output_cache,
        )
        work.outputs_add(version=version, outputs=outputs, candidate=version.pk == ctx.run.candidate_id)
        return {
            item.external_id: Expected(
                label=(p.label or "") if p.error is None else "",
                reference=p.text if p.error is None else "",
                language=item.language,
            )
            for item, p in zip(ctx.items, outputs.predictions, strict=True)
        }

    def _attacks_run(
        self, *, ctx: LayerContext, layer: LayerResult, setup: RobustnessDetails, attack: AttackDetails | None
    ) -> AttackDetails:
        """Attack mode, per version; each version's report is saved as it finishes (a resumed run keeps
        it). Raises PerturbationResourceError / AttackUnavailableError when it cannot run."""
        from engines.perturbation.attack import AttackSpec, attack_run

        section = ctx.policy.section(RobustnessPolicy)
        assert section.attack_recipe is not None
        spec = AttackSpec(
            recipe=section.attack_recipe,
            seed=section.robustness_seed,
            items=section.attack_items,
            query_budget=section.attack_query_budget,
        )
        if attack is None or attack.spec != spec:
            attack = AttackDetails(spec=spec)
        labelled = [(i.external_id, i.input, i.label, i.language) for i in ctx.items if i.label]
        for version in ctx.versions:
            if version.ref not in attack.versions:
                report = attack_run(backend=model_version_backend(version=version), items=labelled, spec=spec)
                attack = replace(attack, versions={**attack.versions, version.ref: report})
                layer.details = to_json(replace(setup, attack=attack))
                with transaction.atomic():
                    gate_run_assert_held(ctx.run)
                    layer.save(update_fields=["details"])
            ctx.progress.advance(section.attack_items)
        return attack

    def _error(self, *, ctx: LayerContext, reason: Reason | str, details: RobustnessDetails) -> LayerResult:
        """The layer ends in `error` with `reason`; samples stored so far are kept."""
        return self.store(
            run=ctx.run,
            started=time.perf_counter(),
            verdict=GateRun.Verdict.ERROR,
            details=details,
            reasons=[reason],
            threshold=ctx.policy.section(RobustnessPolicy).robustness_min,
            device="",
        )

    def report(self, *, run: GateRun, result: LayerResult, details: RobustnessDetails | None) -> ReportPart:
        inputs: dict[str, Any] = {
            "suite": f"{run.suite.name}@{run.suite.version}",
            "suite_hash": run.suite.content_hash,
        }
        if details is None:
            return ReportPart(inputs=inputs, estimates={})
        inputs.update(
            recipe=details.recipe,
            seed=details.seed,
            samples_requested=details.samples_requested,
            set_hash=details.set_hash,
            judged_by=details.judged_by,
            attack_recipe=details.attack_recipe,
        )
        attribution = None
        candidate, baseline = details.candidate, details.baseline
        if result.verdict not in ("pass", "pending") and candidate is not None:
            by_perturbation = (
                result.samples.filter(version=run.candidate, correct=False)
                .values("perturbation")
                .annotate(failed=Count("id"))
                .order_by("-failed")[:10]
            )
            attribution = model_attribution(
                run=run,
                result=result,
                phenomenon=[
                    breakdown_table(
                        title=reason(ModelAttributionCode.WEAKEST_TYPES_TITLE),
                        key="type",
                        candidate=candidate.by_type,
                        baseline=baseline.by_type if baseline else None,
                    ),
                    breakdown_table(
                        title=reason(ModelAttributionCode.WEAKEST_TAGS_TITLE),
                        key="tag",
                        candidate=candidate.by_tag,
                        baseline=baseline.by_tag if baseline else None,
                    ),
                ],
                data=[
                    Table(
                        title=reason(ModelAttributionCode.ITEMS_FAILING_TITLE),
                        columns=["item", "failed", "samples"],
                        rows=[[w.item_id, w.failed, w.samples] for w in details.worst_items[:10]],
                    ),
                    Table(
                        title=reason(ModelAttributionCode.FAILURES_BY_TYPE_TITLE),
                        columns=["perturbation", "failed"],
                        rows=[[row["perturbation"], row["failed"]] for row in by_perturbation],
                    ),
                ],
            )
        estimates = estimates_of(
            details, without=(*SETUP_FIELDS, "timings", "attack_recipe", "worst_items", "costs")
        )
        return ReportPart(inputs=inputs, estimates=estimates, attribution=attribution)

    def charts(self, *, details: RobustnessDetails, threshold: float | None) -> list[Chart]:
        return [
            breakdown_chart(
                details=details,
                breakdown=breakdown,
                rate="rate",
                id=chart_id,
                title=title,
                y_name=_("still correct"),
                threshold=threshold,
            )
            for breakdown, chart_id, title in (
                ("by_type", "robustness-by-type", _("Robustness by perturbation type")),
                ("by_tag", "robustness-by-tag", _("Robustness by tag")),
            )
        ]
