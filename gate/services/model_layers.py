"""The layers a worker computes inside a gate run: clean accuracy and robustness.

Each layer stores its result as it goes, so a run taken over after a worker crash resumes:
a stored clean-accuracy layer is kept, robustness samples are committed chunk by chunk and
only the missing chunks are computed again (model answers come from the output cache).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from django.db import transaction

from engines.scoring.answers import answer_correct
from gate.judges.clean_accuracy import ItemOutcome, clean_accuracy_judge
from gate.judges.robustness import SampleOutcome, robustness_judge
from gate.models import GateRun, LayerResult, SampleResult
from gate.policy import GatePolicyConfig
from gate.services.claims import gate_run_assert_held
from gate.services.model_outputs import VersionOutputs, model_outputs_predict
from registry.models import EvalItem, ModelVersion
from registry.services.versions import model_version_backend

Layer = LayerResult.Layer
LANGUAGES = ("en", "zh", "mixed")
SCORING_BACKENDS = ("hf", "builtin")  # backends with class scores, which attack mode needs


@dataclass(frozen=True)
class Expected:
    """What counts as a right answer when it is not the item's own label or reference: in
    consistency mode, the model's answer to the clean item."""

    label: str
    reference: str
    language: str


class Progress:
    """Counts units of model work done and reports them as a percentage."""

    def __init__(self, *, total: int, report: Callable[[int], None]):
        self.total, self.done, self.report = max(total, 1), 0, report

    def advance(self, count: int) -> None:
        self.done += count
        self.report(min(99, int(100 * self.done / self.total)))


def answers_judge(
    *, items: Sequence[EvalItem | Expected], predictions: Sequence, cutoffs: dict | None = None
) -> list[bool]:
    """Label match where the item has a label (the label wins: similarity misses negation);
    otherwise the answer equals the reference, or scores at least the cut-off against it
    (BERTScore F1 for English, chrF for Chinese; `cutoffs` overrides the shipped ones by
    metric). An errored answer is wrong."""
    verdicts: list[bool] = []
    to_score: list[int] = []
    for index, (item, prediction) in enumerate(zip(items, predictions, strict=True)):
        exact = answer_correct(
            expected_label=item.label, reference=item.reference, label=prediction.label, text=prediction.text
        )
        verdicts.append(prediction.error is None and exact)
        if prediction.error is None and not exact and not item.label and item.reference:
            to_score.append(index)
    if to_score:
        from engines.device import device_select
        from engines.scoring.text import TEXT_CUTOFFS, text_scores

        limits = {**TEXT_CUTOFFS, **(cutoffs or {})}

        scores = text_scores(
            references=[items[i].reference for i in to_score],
            candidates=[predictions[i].text for i in to_score],
            languages=[items[i].language for i in to_score],
            device=device_select(),
        )
        for index, score in zip(to_score, scores, strict=True):
            verdicts[index] = score.value >= limits[score.metric]
    return verdicts


def _side(version: ModelVersion, summary: dict, outputs: VersionOutputs) -> dict:
    return {
        "version": version.ref,
        **summary,
        "seconds": outputs.seconds,
        "items_per_second": outputs.computed / outputs.seconds if outputs.seconds else None,
        "computed": outputs.computed,
        "cached": outputs.cached,
        "device": outputs.device,
    }


def clean_accuracy_layer_run(
    *,
    run: GateRun,
    policy: GatePolicyConfig,
    items: list[EvalItem],
    versions: list[ModelVersion],
    progress: Progress,
) -> LayerResult:
    started = time.perf_counter()
    outputs = {
        v.pk: model_outputs_predict(
            version=v,
            texts=[i.input for i in items],
            batch_size=policy.batch_size,
            on_batch=progress.advance,
            use_cache=policy.output_cache,
        )
        for v in versions
    }
    outcomes = {
        pk: [
            ItemOutcome(
                item_id=item.external_id,
                tags=tuple(item.tags),
                language=item.language,
                correct=correct,
                errored=p.error is not None,
            )
            for item, p, correct in zip(
                items,
                out.predictions,
                answers_judge(items=items, predictions=out.predictions, cutoffs=policy.text_cutoffs),
                strict=True,
            )
        ]
        for pk, out in outputs.items()
    }
    baseline_pk = versions[1].pk if len(versions) > 1 else None
    result = clean_accuracy_judge(
        candidate=outcomes[run.candidate_id], baseline=outcomes.get(baseline_pk), policy=policy
    )
    details = {
        "suite": str(run.suite),
        "suite_hash": run.suite.content_hash,
        "candidate": _side(run.candidate, result.candidate.as_dict(), outputs[run.candidate_id]),
    }
    if baseline_pk:
        details["baseline"] = _side(versions[1], result.baseline.as_dict(), outputs[baseline_pk])
        details["difference"] = result.candidate.accuracy - result.baseline.accuracy
    with transaction.atomic():
        gate_run_assert_held(run)
        layer = LayerResult.objects.create(
            gate_run=run,
            layer=Layer.CLEAN_ACCURACY,
            verdict=result.verdict,
            metric="accuracy",
            estimate=result.candidate.accuracy,
            ci_low=result.candidate.ci_low,
            ci_high=result.candidate.ci_high,
            threshold=policy.clean_accuracy_min,
            reasons=result.reasons,
            details=details,
            wall_seconds=time.perf_counter() - started,
            device=outputs[run.candidate_id].device,
        )
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
                for item, p, outcome in zip(items, outputs[pk].predictions, outcomes[pk], strict=True)
            ],
            batch_size=500,
        )
    return layer


def robustness_units(*, policy: GatePolicyConfig, items: list[EvalItem], versions: list[ModelVersion]) -> int:
    """Model work of the layer, for progress: perturbed samples, clean answers in consistency
    mode, attacked items in attack mode; per version."""
    per_version = policy.robustness_samples
    if policy.robustness_judge_by == "consistency":
        per_version += len(items)
    if policy.attack_recipe:
        per_version += policy.attack_items
    return per_version * len(versions)


def _clean_expected(
    *, version: ModelVersion, items: list[EvalItem], policy: GatePolicyConfig, progress: Progress
) -> dict[str, Expected]:
    """Consistency mode: the version's own answer to each clean item is what its perturbed samples
    must agree with (a clean answer that errored agrees with nothing)."""
    outputs = model_outputs_predict(
        version=version,
        texts=[i.input for i in items],
        batch_size=policy.batch_size,
        on_batch=progress.advance,
        use_cache=policy.output_cache,
    )
    return {
        item.external_id: Expected(
            label=(p.label or "") if p.error is None else "",
            reference=p.text if p.error is None else "",
            language=item.language,
        )
        for item, p in zip(items, outputs.predictions, strict=True)
    }


def _attack_spec(policy: GatePolicyConfig):
    from engines.perturbation.attack import AttackSpec

    return AttackSpec(
        recipe=policy.attack_recipe,
        seed=policy.robustness_seed,
        items=policy.attack_items,
        query_budget=policy.attack_query_budget,
    )


def _attacks_run(
    *, layer: LayerResult, run: GateRun, policy: GatePolicyConfig, items, versions, progress
) -> dict:
    """Attack mode, per version; each version's report is saved as it finishes (a resumed run
    keeps it). Raises PerturbationResourceError / AttackUnavailableError when it cannot run."""
    from engines.perturbation.attack import attack_run

    spec = _attack_spec(policy)
    reports = layer.details.get("attack", {})
    if reports.get("spec") != asdict(spec):
        reports = {"spec": asdict(spec), "versions": {}}
    labelled = [(i.external_id, i.input, i.label, i.language) for i in items if i.label]
    for version in versions:
        if version.ref not in reports["versions"]:
            report = attack_run(backend=model_version_backend(version=version), items=labelled, spec=spec)
            reports["versions"][version.ref] = report.as_dict()
            layer.details = {**layer.details, "attack": reports}
            with transaction.atomic():
                gate_run_assert_held(run)
                layer.save(update_fields=["details"])
        progress.advance(policy.attack_items)
    return reports


def _layer_error(*, run: GateRun, policy: GatePolicyConfig, reason: str, details: dict) -> LayerResult:
    """The layer ends in `error` with `reason`; samples stored so far are kept."""
    with transaction.atomic():
        gate_run_assert_held(run)
        layer, _ = LayerResult.objects.update_or_create(
            gate_run=run,
            layer=Layer.ROBUSTNESS,
            defaults={
                "verdict": GateRun.Verdict.ERROR,
                "metric": "robustness_rate",
                "threshold": policy.robustness_min,
                "reasons": [reason],
                "details": details,
                "device": "",
            },
        )
    return layer


def robustness_layer_run(
    *,
    run: GateRun,
    policy: GatePolicyConfig,
    items: list[EvalItem],
    versions: list[ModelVersion],
    progress: Progress,
) -> LayerResult:
    from engines.backends.base import language_of
    from engines.perturbation import (
        PerturbationResourceError,
        PerturbationSpec,
        UnknownRecipeError,
        perturbation_set_build,
    )
    from engines.perturbation.attack import AttackUnavailableError, attack_recipe_check

    started = time.perf_counter()
    spec = PerturbationSpec(
        recipe=policy.robustness_recipe,
        seed=policy.robustness_seed,
        samples=policy.robustness_samples,
        shares=policy.robustness_shares,
        numbers_matter=policy.numbers_matter,
    )
    by_id = {item.external_id: item for item in items}
    timings = {"perturbation": 0.0, "inference": 0.0, "storage": 0.0, "scoring": 0.0}
    mark = time.perf_counter()
    try:
        if policy.attack_recipe:  # before any model work: an attack that cannot run is known now
            attack_recipe_check(recipe=policy.attack_recipe)
            for version in versions:
                if version.backend_kind not in SCORING_BACKENDS:
                    raise AttackUnavailableError(
                        f"attack mode needs class scores, which backend {version.backend_kind!r} of "
                        f"{version.ref} does not give (it works with {', '.join(SCORING_BACKENDS)})"
                    )
        perturbed = perturbation_set_build(
            items=[
                (i.external_id, i.input, i.language if i.language in LANGUAGES else language_of(i.input))
                for i in items
            ],
            spec=spec,
        )
    except (PerturbationResourceError, UnknownRecipeError, AttackUnavailableError, ValueError) as exc:
        details = {"recipe": spec.recipe, "seed": spec.seed, "attack_recipe": policy.attack_recipe}
        return _layer_error(run=run, policy=policy, reason=str(exc), details=details)
    timings["perturbation"] = time.perf_counter() - mark
    setup = {
        "recipe": spec.recipe,
        "seed": spec.seed,
        "samples_requested": spec.samples,
        "set_hash": perturbed.content_hash,
        "shortfall": list(perturbed.shortfall),
        "notes": list(perturbed.notes),
        "judged_by": policy.robustness_judge_by,
        "text_cutoffs": policy.text_cutoffs,
    }
    layer, created = LayerResult.objects.get_or_create(
        gate_run=run,
        layer=Layer.ROBUSTNESS,
        defaults={
            "verdict": GateRun.Verdict.PENDING,
            "metric": "robustness_rate",
            "threshold": policy.robustness_min,
            "details": setup,
        },
    )
    if not created and any(layer.details.get(key) != value for key, value in setup.items()):
        layer.samples.all().delete()  # another set or judging than the one begun: start it over
        layer.details = setup
        layer.save(update_fields=["details"])

    samples = perturbed.samples
    # Units this layer was budgeted for but will not need (fewer samples could be made).
    progress.advance((policy.robustness_samples - len(samples)) * len(versions))
    expected = (
        {v.pk: _clean_expected(version=v, items=items, policy=policy, progress=progress) for v in versions}
        if policy.robustness_judge_by == "consistency"
        else None
    )
    stored = {
        (version_id, index) for version_id, index in layer.samples.values_list("version_id", "sample_index")
    }
    seconds = {v.pk: 0.0 for v in versions}
    counts = {v.pk: {"computed": 0, "cached": 0} for v in versions}
    device = ""
    size = policy.robustness_chunk_size
    for start in range(0, len(samples), size):
        chunk = range(start, min(start + size, len(samples)))
        for version in versions:
            todo = [i for i in chunk if (version.pk, i) not in stored]
            progress.advance(len(chunk) - len(todo))
            if not todo:
                continue
            outputs = model_outputs_predict(
                version=version,
                texts=[samples[i].perturbed for i in todo],
                batch_size=policy.batch_size,
                on_batch=progress.advance,
                use_cache=policy.output_cache,
            )
            seconds[version.pk] += outputs.seconds
            timings["inference"] += outputs.seconds
            counts[version.pk]["computed"] += outputs.computed
            counts[version.pk]["cached"] += outputs.cached
            if version.pk == run.candidate_id:
                device = outputs.device
            mark = time.perf_counter()
            judged = answers_judge(
                items=[(expected[version.pk] if expected else by_id)[samples[i].item_id] for i in todo],
                predictions=outputs.predictions,
                cutoffs=policy.text_cutoffs,
            )
            timings["scoring"] += time.perf_counter() - mark
            mark = time.perf_counter()
            with transaction.atomic():
                gate_run_assert_held(run)
                SampleResult.objects.bulk_create(
                    [
                        SampleResult(
                            layer_result=layer,
                            version=version,
                            item=by_id[samples[i].item_id],
                            sample_index=i,
                            perturbation=samples[i].type,
                            diff=samples[i].diff,
                            input_text=samples[i].perturbed,
                            output_label=p.label or "",
                            output_text=p.text,
                            correct=correct,
                            latency_ms=p.latency_ms,
                            error=p.error or "",
                        )
                        for i, p, correct in zip(todo, outputs.predictions, judged, strict=True)
                    ],
                    ignore_conflicts=True,
                )
            timings["storage"] += time.perf_counter() - mark
    if policy.attack_recipe:
        mark = time.perf_counter()
        try:
            _attacks_run(
                layer=layer, run=run, policy=policy, items=items, versions=versions, progress=progress
            )
        except (PerturbationResourceError, AttackUnavailableError) as exc:
            return _layer_error(run=run, policy=policy, reason=f"attack mode: {exc}", details=layer.details)
        timings["attack"] = time.perf_counter() - mark
    stats = {"seconds": seconds, "counts": counts, "device": device, "timings": timings, "started": started}
    return _robustness_judge_store(
        run=run, layer=layer, policy=policy, versions=versions, perturbed=perturbed, by_id=by_id, stats=stats
    )


def _robustness_judge_store(*, run, layer, policy, versions, perturbed, by_id, stats) -> LayerResult:
    mark = time.perf_counter()
    rows = layer.samples.order_by("sample_index").values_list(
        "version_id", "sample_index", "correct", "error"
    )
    outcomes: dict[int, list[SampleOutcome]] = {v.pk: [] for v in versions}
    for version_id, index, correct, error in rows:
        sample = perturbed.samples[index]
        item = by_id[sample.item_id]
        outcomes[version_id].append(
            SampleOutcome(
                item_id=sample.item_id,
                type=sample.type,
                language=sample.language,
                tags=tuple(item.tags),
                correct=bool(correct),
                errored=bool(error),
            )
        )
    baseline = versions[1] if len(versions) > 1 else None
    result = robustness_judge(
        candidate=outcomes[run.candidate_id],
        baseline=outcomes[baseline.pk] if baseline else None,
        policy=policy,
        shortfall=perturbed.shortfall,
    )

    def side(version: ModelVersion, summary) -> dict:
        seconds = stats["seconds"][version.pk]
        computed = stats["counts"][version.pk]["computed"]
        return {
            "version": version.ref,
            **summary.as_dict(),
            "seconds": seconds,
            "items_per_second": computed / seconds if seconds else None,
            **stats["counts"][version.pk],
        }

    stats["timings"]["scoring"] += time.perf_counter() - mark
    details = {
        **layer.details,
        "candidate": side(run.candidate, result.candidate),
        "worst_items": result.worst,
        # Seconds of this attempt: building the set, model calls, chunk commits, judging.
        "timings": stats["timings"],
    }
    if baseline:
        details["baseline"] = side(baseline, result.baseline)
        details["comparison"] = result.comparison
    layer.verdict = result.verdict
    layer.estimate = result.candidate.overall["rate"]
    layer.ci_low = result.candidate.overall["ci_low"]
    layer.ci_high = result.candidate.overall["ci_high"]
    layer.reasons = result.reasons
    layer.details = details
    layer.wall_seconds = time.perf_counter() - stats["started"]
    layer.device = stats["device"]
    with transaction.atomic():
        gate_run_assert_held(run)
        layer.save()
    return layer
