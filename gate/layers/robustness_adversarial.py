"""Layer 1 under a word-level adversarial recipe (`textfooler-v2`, `textfooler-v1`, `pwws-v1`): the
layer's figure is the share of drawn items a version still answers correctly under attack.

- Items: `robustness_samples` labelled items drawn by seed per language in the suite's mix
  (`attack_items_draw`), each attacked once (a greedy search is deterministic: drawing an item twice
  would repeat its outcome, not add evidence).
- *adaptive* (`robustness_transfer_from: null`): the search runs against each version itself: the
  worst case near each item, "accuracy under attack".
- *transfer* (`robustness_transfer_from: baseline` or a version): the set made once against that
  version is what every version answers; cheap, comparable across candidates, and it shows whether a
  candidate fixes what broke the reference.
- An attack is stored as an `AdversarialSet` per (suite, version config, recipe, seed, size, budget),
  appended chunk by chunk: a resumed run continues it and a later run of an unchanged version reuses it.
- Spread over the gpu workers: in adaptive mode the baseline's set goes to the gpu queue as its own
  task; a set is attacked under a lease (worker, heartbeat), so the run waits for one another live
  worker holds and takes over one whose holder went quiet.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from engines.backends.base import language_of
from engines.reasons import Reason, gettext_noop, reason, wordings_register
from gate.judges.robustness import (
    AdversarialReport,
    RobustnessDetails,
    RobustnessPolicy,
    RobustnessSide,
    RobustnessSummary,
    SampleOutcome,
    robustness_judge,
)
from gate.layers.base import ClaimLost, GateLayer, LayerContext, gate_run_assert_held
from gate.layers.outputs import model_outputs_predict
from gate.models import AdversarialSet, GateRun, LayerResult, SampleResult
from registry.dispatch import Task, task_send
from registry.errors import ApplicationError
from registry.leases import lease_takeable
from registry.models import EvalItem, ModelVersion
from registry.selectors.versions import model_version_get
from registry.services.versions import model_version_backend, model_version_config_hash

LANGUAGES = ("en", "zh", "mixed")
SCORING_BACKENDS = ("hf", "builtin")
EXAMPLES_SHOWN = 10
ADVERSARIAL_SETUP = ("recipe", "seed", "samples_requested", "shortfall", "mode", "transfer_from")


logger = logging.getLogger(__name__)


class AdversarialCode(StrEnum):
    NO_BASELINE = "robustness.transfer_without_baseline"
    NEEDS_CLASS_SCORES = "robustness.recipe_needs_class_scores"
    ADAPTIVE_SUMMARY = "robustness.adaptive_summary"
    TRANSFER_SUMMARY = "robustness.transfer_summary"


wordings_register(
    {
        AdversarialCode.NO_BASELINE: gettext_noop(
            "robustness_transfer_from is 'baseline' but the run has no baseline"
        ),
        AdversarialCode.NEEDS_CLASS_SCORES: gettext_noop(
            "{recipe} needs class scores, which backend '{backend}' of {ref} does not give "
            "(it works with {kinds})"
        ),
        AdversarialCode.ADAPTIVE_SUMMARY: gettext_noop(
            "adaptive {recipe}: accuracy {before:.3f} before, {after:.3f} under attack, success rate "
            "{rate:.3f}, {queries:.0f} queries per item"
        ),
        AdversarialCode.TRANSFER_SUMMARY: gettext_noop(
            "transfer {recipe}: accuracy {before:.3f} before, {after:.3f} under attack, success rate "
            "{rate:.3f}, {queries:.0f} queries per item"
        ),
    }
)


def _language(item: EvalItem) -> str:
    return item.language if item.language in LANGUAGES else language_of(item.input)


def _reference(ctx: LayerContext, transfer_from: str | None) -> ModelVersion | Reason | None:
    """The version whose attacks are transferred, or why there is none to take them from."""
    if transfer_from is None:
        return None
    if transfer_from == "baseline":
        return ctx.run.baseline or reason(AdversarialCode.NO_BASELINE)
    return model_version_get(ref=transfer_from)


def _attacked(
    ctx: LayerContext, recipe: str, transfer_from: str | None
) -> tuple[ModelVersion | None, Reason | str | None]:
    """The version transferred from (None: each is attacked itself), or why the recipe cannot run: no
    version to transfer from, or an attacked one that gives no class scores."""
    try:
        reference = _reference(ctx, transfer_from)
    except ApplicationError as exc:  # `transfer_from` names no version
        return None, exc.reason
    if isinstance(reference, Reason):
        return None, reference
    for version in [reference] if reference else ctx.versions:
        if version.backend_kind not in SCORING_BACKENDS:
            kinds = list(SCORING_BACKENDS)
            why = reason(
                AdversarialCode.NEEDS_CLASS_SCORES,
                recipe=recipe,
                backend=version.backend_kind,
                ref=version.ref,
                kinds=kinds,
            )
            return None, why
    return reference, None


def _scorer(version: ModelVersion) -> tuple[list[str], Any]:
    """The version's labels and a texts -> class probabilities function."""
    import numpy as np

    backend = model_version_backend(version=version)

    def scorer(texts: Any) -> Any:
        probs = np.asarray(backend.class_scores(list(texts)), dtype=np.float64)  # type: ignore[attr-defined]
        return probs / probs.sum(axis=1, keepdims=True)

    return backend.labels, scorer  # type: ignore[attr-defined]


def adversarial_set_claim(*, set_id: int, worker: str) -> bool:
    """Take the set's lease: free, already `worker`'s, or its holder stopped beating."""
    now = timezone.now()
    return bool(
        AdversarialSet.objects.filter(lease_takeable(worker=worker, now=now), pk=set_id).update(
            worker=worker, heartbeat_at=now
        )
    )


def adversarial_set_release(*, set_id: int, worker: str) -> None:
    AdversarialSet.objects.filter(pk=set_id, worker=worker).update(worker="")


def adversarial_set_extend(
    *,
    aset: AdversarialSet,
    worker: str,
    by_id: dict[str, EvalItem],
    chunk_size: int,
    hold: Callable[[], None],
    on_chunk: Callable[[int], None],
) -> None:
    """Attack the set's missing items, chunk by chunk, each chunk committed under `worker`'s lease
    (and `hold()`, which raises ClaimLost when the caller lost what it holds)."""
    from engines.perturbation.word_attack import word_attack_run

    labels, scorer = _scorer(aset.version)
    index = {label: i for i, label in enumerate(labels)}
    while not aset.complete:
        mark = time.perf_counter()
        chunk = aset.item_ids[len(aset.examples) : len(aset.examples) + chunk_size]
        known = [i for i in chunk if by_id[i].label in index]
        attacks, _ = word_attack_run(
            scorer=scorer,
            items=[(by_id[i].input, index[by_id[i].label]) for i in known],
            recipe=aset.recipe,
            query_budget=aset.query_budget,
        )
        outcome = dict(zip(known, attacks, strict=True))
        for item_id in chunk:
            attack = outcome.get(item_id)
            aset.examples.append(
                {
                    "item_id": item_id,
                    "status": attack.status if attack else "skipped",
                    "perturbed": attack.perturbed if attack else by_id[item_id].input,
                    "diff": attack.diff if attack else "",
                    "label_after": labels[attack.label_after] if attack else "",
                    "queries": attack.queries if attack else 0,
                    "words_changed": attack.words_changed if attack else 0,
                }
            )
        aset.seconds += time.perf_counter() - mark
        with transaction.atomic():
            hold()
            kept = AdversarialSet.objects.filter(pk=aset.pk, worker=worker).update(
                item_ids=aset.item_ids,
                examples=aset.examples,
                seconds=aset.seconds,
                heartbeat_at=timezone.now(),
                updated_at=timezone.now(),
            )
            if not kept:
                raise ClaimLost(f"adversarial set {aset.pk} is no longer held by {worker}")
        on_chunk(len(chunk))


def _set_get(*, ctx: LayerContext, version: ModelVersion, item_ids: list[str]) -> AdversarialSet:
    section = ctx.policy.section(RobustnessPolicy)
    aset, _ = AdversarialSet.objects.get_or_create(
        suite=ctx.run.suite,
        version=version,
        version_config_hash=model_version_config_hash(version=version),
        recipe=section.robustness_recipe,
        seed=section.robustness_seed,
        samples=section.robustness_samples,
        query_budget=section.attack_query_budget,
        defaults={"item_ids": item_ids},
    )
    return aset


def _attack_set(
    *, ctx: LayerContext, aset: AdversarialSet, item_ids: list[str], by_id: dict[str, EvalItem]
) -> tuple[AdversarialSet, bool]:
    """The set's attack on `item_ids`: as stored when complete; else attacked (or resumed) here chunk
    by chunk, or, while another live gpu worker holds the set, waited for with the run's heartbeat
    kept. Returns (set, whether it was complete before this call)."""
    if not aset.complete:
        aset.refresh_from_db()  # another gpu worker may have attacked it since it was read
    if aset.complete and aset.item_ids == item_ids:
        return aset, True
    worker, seen = ctx.run.worker, len(aset.examples)
    while not adversarial_set_claim(set_id=aset.pk, worker=worker):
        time.sleep(settings.EVALHUB_ADVERSARIAL_WAIT_SECONDS)
        aset.refresh_from_db()
        ctx.progress.advance(max(0, len(aset.examples) - seen))  # also the run's heartbeat
        seen = len(aset.examples)
        if aset.complete and aset.item_ids == item_ids:
            return aset, False
    try:
        aset.refresh_from_db()
        if aset.item_ids != item_ids:  # the suite's items changed under the same suite row: begin again
            aset.item_ids, aset.examples, aset.seconds = item_ids, [], 0.0
        ctx.progress.advance(max(0, len(aset.examples) - seen))
        adversarial_set_extend(
            aset=aset,
            worker=worker,
            by_id=by_id,
            chunk_size=ctx.policy.section(RobustnessPolicy).robustness_chunk_size,
            hold=lambda: gate_run_assert_held(ctx.run),
            on_chunk=ctx.progress.advance,
        )
    finally:
        adversarial_set_release(set_id=aset.pk, worker=worker)
    return aset, False


def _helpers_ask(*, sets: list[AdversarialSet], chunk_size: int) -> None:
    """Hand these sets (adaptive mode: the versions after the candidate) to the gpu queue, so an idle
    gpu worker attacks them while this one attacks the candidate (whoever comes second finds a set
    leased, then complete)."""
    for aset in sets:
        if not aset.complete:
            try:
                task_send(Task.ADVERSARIAL_SET_BUILD, aset.pk, chunk_size)
            except Exception:  # no broker: this worker attacks it after the candidate
                logger.warning("could not hand adversarial set %s to another worker", aset.pk)


def _report(
    *, version: ModelVersion, mode: str, aset: AdversarialSet, cached: bool, correct: list[bool]
) -> AdversarialReport:
    examples = aset.examples
    n = len(examples)
    skipped = sum(e["status"] == "skipped" for e in examples)
    succeeded = [e for e in examples if e["status"] == "succeeded"]
    attacked = n - skipped
    return AdversarialReport(
        version=version.ref,
        mode=mode,
        attacked=aset.version.ref,
        items=n,
        skipped=skipped,
        succeeded=len(succeeded),
        failed=attacked - len(succeeded),
        accuracy_before=attacked / n if n else None,
        accuracy_under_attack=sum(correct) / n if n else None,
        attack_success_rate=len(succeeded) / attacked if attacked else None,
        queries_per_item=sum(e["queries"] for e in examples) / attacked if attacked else None,
        budget_spent=sum(e["status"] == "failed" and e["queries"] >= aset.query_budget for e in examples),
        words_changed_per_success=(
            sum(e["words_changed"] for e in succeeded) / len(succeeded) if succeeded else None
        ),
        cached=cached,
        seconds=aset.seconds,
        examples=[
            {k: e[k] for k in ("item_id", "diff", "label_after", "perturbed")}
            for e in succeeded[:EXAMPLES_SHOWN]
        ],
    )


def adversarial_run(*, layer: GateLayer[RobustnessDetails], ctx: LayerContext) -> LayerResult:
    """The layer's run under an adversarial recipe (see the module's docstring)."""
    from engines.perturbation.word_attack import attack_items_draw

    run, general = ctx.run, ctx.policy.general
    section = ctx.policy.section(RobustnessPolicy)
    started = time.perf_counter()
    mode = "transfer" if section.robustness_transfer_from else "adaptive"
    setup = RobustnessDetails(
        recipe=section.robustness_recipe,
        seed=section.robustness_seed,
        samples_requested=section.robustness_samples,
        mode=mode,
        transfer_from=section.robustness_transfer_from,
    )
    reference, unrunnable = _attacked(ctx, section.robustness_recipe, section.robustness_transfer_from)
    if unrunnable is not None:
        return layer.store(
            run=run,
            started=started,
            verdict=GateRun.Verdict.ERROR,
            details=setup,
            reasons=[unrunnable],
            threshold=section.robustness_min,
            device="",
        )
    labelled = [i for i in ctx.items if i.label]
    by_id = {i.external_id: i for i in labelled}
    item_ids, shortfall = attack_items_draw(
        items=[(i.external_id, _language(i)) for i in labelled],
        samples=section.robustness_samples,
        seed=section.robustness_seed,
    )
    setup = replace(setup, shortfall=shortfall)
    row, _ = layer.begin(run=run, setup=setup, same=ADVERSARIAL_SETUP, threshold=section.robustness_min)
    ctx.progress.advance((section.robustness_samples - len(item_ids)) * len(ctx.versions))
    timings = {"attack": 0.0, "inference": 0.0, "storage": 0.0}
    reports: dict[str, AdversarialReport] = {}
    outcomes: dict[int, list[SampleOutcome]] = {}
    seconds: dict[int, float] = {}
    device = ""
    hashes = []
    # One stored set per attacked version: the reference's in transfer mode, each version's in adaptive.
    attacked = [reference] if reference else ctx.versions
    sets = {v.pk: _set_get(ctx=ctx, version=v, item_ids=item_ids) for v in attacked}
    if reference is None:
        _helpers_ask(sets=[sets[v.pk] for v in ctx.versions[1:]], chunk_size=section.robustness_chunk_size)
    for version in ctx.versions:
        mark = time.perf_counter()
        aset, cached = _attack_set(
            ctx=ctx, aset=sets[(reference or version).pk], item_ids=item_ids, by_id=by_id
        )
        timings["attack"] += time.perf_counter() - mark
        hashes.append(hashlib.sha256(json.dumps(aset.examples, sort_keys=True).encode()).hexdigest())
        examples = aset.examples
        if cached:
            ctx.progress.advance(len(item_ids))
        if reference is not None and version.pk != reference.pk:
            outputs = model_outputs_predict(
                version=version,
                texts=[e["perturbed"] for e in examples],
                batch_size=general.batch_size,
                on_batch=lambda n: None,
                use_cache=general.output_cache,
            )
            timings["inference"] += outputs.seconds
            labels = [p.label or "" for p in outputs.predictions]
            errors = [p.error or "" for p in outputs.predictions]
            device = device or outputs.device
        else:
            labels = [e["label_after"] for e in examples]
            errors = [""] * len(examples)
            from engines.backends import backend_device

            device = device or backend_device(version.backend_kind)
        # Right under attack: the attacked version's answer after its search (wrong before it: wrong
        # after), or in transfer mode this version's answer to that final text.
        correct = [label == by_id[e["item_id"]].label for e, label in zip(examples, labels, strict=True)]
        seconds[version.pk] = time.perf_counter() - mark
        reports[version.ref] = _report(version=version, mode=mode, aset=aset, cached=cached, correct=correct)
        mark = time.perf_counter()
        with transaction.atomic():
            gate_run_assert_held(run)
            row.samples.filter(version=version).delete()
            SampleResult.objects.bulk_create(
                [
                    SampleResult(
                        layer_result=row,
                        version=version,
                        item=by_id[e["item_id"]],
                        sample_index=k,
                        perturbation=f"{section.robustness_recipe}:{e['status']}",
                        diff=e["diff"],
                        input_text=e["perturbed"],
                        output_label=label,
                        correct=ok,
                        error=error,
                    )
                    for k, (e, label, ok, error) in enumerate(
                        zip(examples, labels, correct, errors, strict=True)
                    )
                ]
            )
        timings["storage"] += time.perf_counter() - mark
        outcomes[version.pk] = [
            SampleOutcome(
                item_id=e["item_id"],
                type=section.robustness_recipe,
                language=_language(by_id[e["item_id"]]),
                tags=tuple(by_id[e["item_id"]].tags),
                correct=ok,
                errored=bool(error),
            )
            for e, ok, error in zip(examples, correct, errors, strict=True)
        ]
    baseline = ctx.versions[1] if len(ctx.versions) > 1 else None
    result = robustness_judge(
        candidate=outcomes[run.candidate_id],
        baseline=outcomes[baseline.pk] if baseline else None,
        policy=section,
        decide_on=general.decide_on,
        confidence=general.confidence,
        shortfall=shortfall,
    )

    def side(version: ModelVersion, summary: RobustnessSummary) -> RobustnessSide:
        return RobustnessSide(
            **{name: getattr(summary, name) for name in RobustnessSummary.__dataclass_fields__},
            version=version.ref,
            seconds=seconds[version.pk],
            computed=len(item_ids),
        )

    candidate_report = reports[run.candidate.ref]
    reasons = list(result.reasons)
    if candidate_report.attack_success_rate is not None:
        summary = AdversarialCode.TRANSFER_SUMMARY if mode == "transfer" else AdversarialCode.ADAPTIVE_SUMMARY
        reasons.append(
            reason(
                summary,
                recipe=section.robustness_recipe,
                before=candidate_report.accuracy_before,
                after=candidate_report.accuracy_under_attack,
                rate=candidate_report.attack_success_rate,
                queries=candidate_report.queries_per_item,
            )
        )
    details = replace(
        setup,
        set_hash=hashes[0],
        adversarial=reports,
        candidate=side(run.candidate, result.candidate),
        baseline=side(baseline, result.baseline) if baseline and result.baseline else None,
        comparison=result.comparison,
        worst_items=result.worst,
        timings=timings,
    )
    return layer.store(
        run=run,
        started=started,
        verdict=result.verdict,
        details=details,
        reasons=reasons,
        threshold=section.robustness_min,
        estimate=result.candidate.rate,
        ci_low=result.candidate.ci_low,
        ci_high=result.candidate.ci_high,
        device=device,
    )
