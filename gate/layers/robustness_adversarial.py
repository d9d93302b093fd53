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
- *access* (`robustness_access`): the search reads class scores where the attacked version gives them
  (`word_attack_run`, score-based) and the answer's label alone where it does not, e.g. a chat endpoint
  without log-probabilities (`hard_label_attack_run`, hard-label); `scores` or `labels` forces one. Each
  version's report says which search ran and why, and its queries per item (mean, max).
- An attack is stored as an `AdversarialSet` per (suite, version config, recipe, seed, size, budget,
  access), appended chunk by chunk: a resumed run continues it and a later run of an unchanged version
  reuses it.
- Spread over the gpu workers: in adaptive mode the baseline's set goes to the gpu queue as its own
  task; a set is attacked under a lease (worker, heartbeat), so the run waits for one another live
  worker holds and takes over one whose holder went quiet.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from django.db import transaction
from django.utils import timezone

from engines.backends.base import TokenTally, Usage, language_of
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
from gate.layers.base import (
    ClaimLost,
    GateLayer,
    LayerContext,
    RunParked,
    Step,
    gate_run_assert_held,
    worker_hostname,
)
from gate.layers.model import ModelWork, versions_cost
from gate.layers.outputs import model_outputs_predict
from gate.models import AdversarialSet, GateRun, LayerResult, SampleResult
from registry.dispatch import Task, task_send
from registry.errors import ApplicationError
from registry.leases import LeaseKeeper, lease_takeable
from registry.models import EvalItem, ModelVersion
from registry.selectors.versions import model_version_get
from registry.services.versions import model_version_backend, model_version_config_hash

LANGUAGES = ("en", "zh", "mixed")
EXAMPLES_SHOWN = 10
ADVERSARIAL_SETUP = ("recipe", "seed", "samples_requested", "shortfall", "mode", "access", "transfer_from")


logger = logging.getLogger(__name__)


class AdversarialCode(StrEnum):
    NO_BASELINE = "robustness.transfer_without_baseline"
    NEEDS_CLASS_SCORES = "robustness.recipe_needs_class_scores"
    ADAPTIVE_SUMMARY = "robustness.adaptive_summary"
    TRANSFER_SUMMARY = "robustness.transfer_summary"
    HARD_LABEL_SUMMARY = "robustness.hard_label_summary"
    # Why a version's set was searched as it was (robustness_access).
    SCORES_GIVEN = "robustness.search_scores_given"
    LABELS_ONLY = "robustness.search_labels_only"
    SCORES_ASKED = "robustness.search_scores_asked"
    LABELS_ASKED = "robustness.search_labels_asked"


wordings_register(
    {
        AdversarialCode.NO_BASELINE: gettext_noop(
            "robustness_transfer_from is 'baseline' but the run has no baseline"
        ),
        AdversarialCode.NEEDS_CLASS_SCORES: gettext_noop(
            "{recipe} with robustness_access 'scores' needs class scores, which backend '{backend}' of "
            "{ref} does not give: attack it on its answers' labels alone (robustness_access: auto or "
            "labels, the hard-label search), score it in transfer mode (robustness_transfer_from: "
            "baseline, or a version with class scores), or, for an endpoint that returns token "
            "log-probabilities, name the version's labels (backend_config.labels)"
        ),
        AdversarialCode.ADAPTIVE_SUMMARY: gettext_noop(
            "adaptive {recipe}: accuracy {before:.3f} before, {after:.3f} under attack, success rate "
            "{rate:.3f}, {queries:.0f} queries per item"
        ),
        AdversarialCode.TRANSFER_SUMMARY: gettext_noop(
            "transfer {recipe}: accuracy {before:.3f} before, {after:.3f} under attack, success rate "
            "{rate:.3f}, {queries:.0f} queries per item"
        ),
        AdversarialCode.HARD_LABEL_SUMMARY: gettext_noop(
            "{mode} {recipe}, hard-label search: accuracy {before:.3f} before, {after:.3f} under attack, "
            "success rate {rate:.3f}, {queries:.0f} queries per item ({queries_max} at most)"
        ),
        AdversarialCode.SCORES_GIVEN: gettext_noop(
            "{ref}: score-based search (backend '{backend}' gives class scores)"
        ),
        AdversarialCode.LABELS_ONLY: gettext_noop(
            "{ref}: hard-label search on the answers' labels alone (backend '{backend}' gives no class "
            "scores)"
        ),
        AdversarialCode.SCORES_ASKED: gettext_noop("{ref}: score-based search (robustness_access: scores)"),
        AdversarialCode.LABELS_ASKED: gettext_noop(
            "{ref}: hard-label search on the answers' labels alone (robustness_access: labels)"
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


@dataclass(frozen=True)
class _Access:
    """How a version's set is searched: "scores" (score-based) or "labels" (hard-label), and why."""

    access: str
    why: Reason

    @property
    def search(self) -> str:
        return "score-based" if self.access == "scores" else "hard-label"


def version_access(*, version: ModelVersion, asked: str, recipe: str) -> _Access | Reason:
    """How `version` is attacked under robustness_access `asked` (auto: scores where its backend gives
    them, else labels), or why it cannot be (scores asked of a version without them)."""
    scores = version_scores_classes(version=version)
    params = {"ref": version.ref, "backend": version.backend_kind}
    if asked == "labels":
        return _Access("labels", reason(AdversarialCode.LABELS_ASKED, ref=version.ref))
    if asked == "scores":
        if not scores:
            return reason(AdversarialCode.NEEDS_CLASS_SCORES, recipe=recipe, **params)
        return _Access("scores", reason(AdversarialCode.SCORES_ASKED, ref=version.ref))
    if scores:
        return _Access("scores", reason(AdversarialCode.SCORES_GIVEN, **params))
    return _Access("labels", reason(AdversarialCode.LABELS_ONLY, **params))


def _attacked(
    ctx: LayerContext, recipe: str, transfer_from: str | None
) -> tuple[ModelVersion | None, dict[int, _Access], Reason | str | None]:
    """The version transferred from (None: each is attacked itself) and how each attacked version is
    searched, or why the recipe cannot run: no version to transfer from, or scores asked of an attacked
    version that gives none. In transfer mode only the version attacked is searched: the others answer
    its final texts."""
    try:
        reference = _reference(ctx, transfer_from)
    except ApplicationError as exc:  # `transfer_from` names no version
        return None, {}, exc.reason
    if isinstance(reference, Reason):
        return None, {}, reference
    asked = ctx.policy.section(RobustnessPolicy).robustness_access
    access: dict[int, _Access] = {}
    for version in [reference] if reference else ctx.versions:
        found = version_access(version=version, asked=asked, recipe=recipe)
        if isinstance(found, Reason):
            return None, {}, found
        access[version.pk] = found
    return reference, access, None


def version_scores_classes(*, version: ModelVersion) -> bool:
    """Whether the version's backend gives class scores (`engines.backends.base.backend_scores_classes`):
    asked of the backend itself (loaded once, as the attack then uses it), not of a list of kinds."""
    from engines.backends.base import backend_scores_classes

    return backend_scores_classes(model_version_backend(version=version))


def _tally(backend: object) -> TokenTally | None:
    """A tally of the tokens the attack's queries spend, for a backend that counts them (an endpoint);
    None for a model run here (its cost is its device time)."""
    return TokenTally() if getattr(backend, "counts_tokens", False) else None


def _scorer(version: ModelVersion) -> tuple[list[str], Any, TokenTally | None]:
    """The version's labels, a texts -> class probabilities function and the tally of its tokens."""
    from engines.perturbation.word_attack import backend_scorer

    backend: Any = model_version_backend(version=version)
    tally = _tally(backend)
    scores = backend.class_scores if tally is None else functools.partial(backend.class_scores, tally=tally)
    return backend.labels, backend_scorer(scores), tally


def _labeler(version: ModelVersion, labels: list[str]) -> tuple[Any, TokenTally | None]:
    """A texts -> label index function from the version's answers (`predict`: the label alone, what an
    endpoint without log-probabilities gives), and the tally of its tokens. A label not in `labels` is
    appended to it (an answer with no label is ""); an answer that failed raises BackendError, as a
    failed score does."""
    from engines.backends.base import BackendError

    backend = model_version_backend(version=version)
    tally = _tally(backend)

    def labeler(texts: list[str]) -> list[int]:
        out = []
        for prediction in backend.predict(list(texts)):
            if prediction.error:
                raise BackendError(prediction.error, transient=True)
            if tally is not None:
                tally.add(tokens_in=prediction.tokens_in, tokens_out=prediction.tokens_out)
            label = prediction.label or ""
            if label not in labels:
                labels.append(label)
            out.append(labels.index(label))
        return out

    return labeler, tally


def adversarial_set_claim(*, set_id: int, worker: str) -> bool:
    """Take the set's lease: free, already `worker`'s, or its holder stopped beating."""
    now = timezone.now()
    return bool(
        AdversarialSet.objects.filter(lease_takeable(worker=worker, now=now), pk=set_id).update(
            worker=worker, heartbeat_at=now
        )
    )


def adversarial_set_release(*, set_id: int, worker: str) -> None:
    """Give the lease back, and wake the runs parked on the set (`RunParked`): each is enqueued again
    and finds the set complete, or takes it over where it stopped."""
    AdversarialSet.objects.filter(pk=set_id, worker=worker).update(worker="")
    parked = GateRun.objects.filter(status=GateRun.Status.QUEUED, progress_detail__activity__set=set_id)
    for run_id in parked.values_list("pk", flat=True):
        GateRun.objects.filter(pk=run_id).update(enqueued_at=timezone.now())
        try:
            task_send(Task.GATE_RUN_EXECUTE, run_id)
        except Exception:  # no broker: the reaper enqueues queued runs again
            logger.warning("could not wake gate run %s parked on adversarial set %s", run_id, set_id)


def adversarial_set_beat(*, set_id: int, worker: str) -> bool:
    """Renew `worker`'s lease on the set; False once it holds it no more."""
    return bool(AdversarialSet.objects.filter(pk=set_id, worker=worker).update(heartbeat_at=timezone.now()))


def adversarial_set_extend(
    *,
    aset: AdversarialSet,
    worker: str,
    by_id: dict[str, EvalItem],
    chunk_size: int,
    hold: Callable[[], None],
    on_items: Callable[[int], None],
) -> None:
    """Attack the set's missing items, chunk by chunk, each chunk committed under `worker`'s lease
    (kept by time meanwhile) and `hold()`, which raises ClaimLost when the caller lost what it
    holds. `on_items` hears of items as their attacks finish (stored once their chunk is)."""
    beat = functools.partial(adversarial_set_beat, set_id=aset.pk, worker=worker)
    with LeaseKeeper(beat=beat, name=f"adversarial set {aset.pk}"):
        while not aset.complete:
            chunk = aset.item_ids[len(aset.examples) : len(aset.examples) + chunk_size]
            _chunk_attack(aset=aset, worker=worker, by_id=by_id, chunk=chunk, hold=hold, on_items=on_items)


def _chunk_attack(
    *,
    aset: AdversarialSet,
    worker: str,
    by_id: dict[str, EvalItem],
    chunk: list[str],
    hold: Callable[[], None],
    on_items: Callable[[int], None],
) -> None:
    """Attack one chunk of the set's items and store it."""
    from engines.perturbation.hard_label import hard_label_attack_run
    from engines.perturbation.word_attack import word_attack_run

    mark = time.perf_counter()
    if aset.access == "labels":
        # The truths first, in a fixed order; answers outside them are appended as they come.
        labels = sorted({by_id[i].label for i in chunk})
        index = {label: i for i, label in enumerate(labels)}
        known = list(chunk)
        labeler, tally = _labeler(aset.version, labels)
        attacks, _ = hard_label_attack_run(
            labeler=labeler,
            items=[(by_id[i].input, index[by_id[i].label]) for i in known],
            recipe=aset.recipe,
            query_budget=aset.query_budget,
            seed=aset.seed,
            on_done=on_items,
        )
    else:
        labels, scorer, tally = _scorer(aset.version)
        index = {label: i for i, label in enumerate(labels)}
        known = [i for i in chunk if by_id[i].label in index]
        attacks, _ = word_attack_run(
            scorer=scorer,
            items=[(by_id[i].input, index[by_id[i].label]) for i in known],
            recipe=aset.recipe,
            query_budget=aset.query_budget,
            on_done=on_items,
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
    if tally is not None:  # a set resumed from before tokens were counted stays uncounted
        started = len(aset.examples) == len(chunk)
        before = Usage(tokens_in=aset.tokens_in, tokens_out=aset.tokens_out) if not started else Usage()
        spent = before + Usage(tokens_in=tally.tokens_in, tokens_out=tally.tokens_out)
        aset.tokens_in, aset.tokens_out = spent.tokens_in, spent.tokens_out
    with transaction.atomic():
        hold()
        kept = AdversarialSet.objects.filter(pk=aset.pk, worker=worker).update(
            item_ids=aset.item_ids,
            examples=aset.examples,
            seconds=aset.seconds,
            tokens_in=aset.tokens_in,
            tokens_out=aset.tokens_out,
            heartbeat_at=timezone.now(),
            updated_at=timezone.now(),
        )
        if not kept:
            raise ClaimLost(f"adversarial set {aset.pk} is no longer held by {worker}")
    on_items(len(chunk) - len(known))  # items with a label the model does not know: skipped


def _set_get(*, ctx: LayerContext, version: ModelVersion, access: str, item_ids: list[str]) -> AdversarialSet:
    section = ctx.policy.section(RobustnessPolicy)
    aset, _ = AdversarialSet.objects.get_or_create(
        access=access,
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
    by chunk. While another live gpu worker holds the set the run is parked (`RunParked`): it gives
    its gpu worker back and is woken when the set's lease is released. Returns (set, whether it was
    complete before this call)."""
    if not aset.complete:
        aset.refresh_from_db()  # another gpu worker may have attacked it since it was read
    if aset.complete and aset.item_ids == item_ids:
        return aset, True
    worker, seen = ctx.run.worker, len(aset.examples)
    if not adversarial_set_claim(set_id=aset.pk, worker=worker):
        aset.refresh_from_db()
        raise RunParked(set_id=aset.pk, version=aset.version.ref, holder=worker_hostname(aset.worker))
    ctx.progress.doing(step=Step.ATTACK, version=aset.version.ref)
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
            on_items=ctx.progress.advance,
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
    *,
    version: ModelVersion,
    mode: str,
    aset: AdversarialSet,
    access: _Access,
    cached: bool,
    correct: list[bool],
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
        queries_max=max((e["queries"] for e in examples if e["status"] != "skipped"), default=None),
        search=access.search,
        search_reason=access.why.to_json(),
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

    section = ctx.policy.section(RobustnessPolicy)
    started = time.perf_counter()
    setup = RobustnessDetails(
        recipe=section.robustness_recipe,
        seed=section.robustness_seed,
        samples_requested=section.robustness_samples,
        mode="transfer" if section.robustness_transfer_from else "adaptive",
        access=section.robustness_access,
        transfer_from=section.robustness_transfer_from,
    )
    reference, access, unrunnable = _attacked(
        ctx, section.robustness_recipe, section.robustness_transfer_from
    )
    if unrunnable is not None:
        return layer.store(
            run=ctx.run,
            started=started,
            verdict=GateRun.Verdict.ERROR,
            details=setup,
            reasons=[unrunnable],
            threshold=section.robustness_min,
            device="",
        )
    by_id = {i.external_id: i for i in ctx.items if i.label}
    item_ids, shortfall = attack_items_draw(
        items=[(item_id, _language(item)) for item_id, item in by_id.items()],
        samples=section.robustness_samples,
        seed=section.robustness_seed,
    )
    setup = replace(setup, shortfall=shortfall)
    row, _ = layer.begin(run=ctx.run, setup=setup, same=ADVERSARIAL_SETUP, threshold=section.robustness_min)
    work = ModelWork(phases=("attack", "inference", "storage"))
    # One stored set per attacked version: the reference's in transfer mode, each version's in adaptive.
    sets = {
        v.pk: _set_get(ctx=ctx, version=v, access=access[v.pk].access, item_ids=item_ids)
        for v in ([reference] if reference else ctx.versions)
    }
    if reference is None:
        _helpers_ask(sets=[sets[v.pk] for v in ctx.versions[1:]], chunk_size=section.robustness_chunk_size)
    attack = _Attack(row=row, reference=reference, access=access, item_ids=item_ids, by_id=by_id, work=work)
    answered = {
        v.pk: _version_answer(ctx=ctx, attack=attack, version=v, aset=sets[(reference or v).pk])
        for v in ctx.versions
    }
    return _judged_store(layer=layer, ctx=ctx, setup=setup, attack=attack, answered=answered, started=started)


@dataclass(frozen=True, kw_only=True)
class _Attack:
    """What every version's part of an adversarial run shares: the layer's row, the version attacked
    in transfer mode (None: each is attacked itself), the drawn items and the attempt's timings."""

    row: LayerResult
    reference: ModelVersion | None
    access: dict[int, _Access]  # how each attacked version's set is searched, and why
    item_ids: list[str]
    by_id: dict[str, EvalItem]
    work: ModelWork


@dataclass(frozen=True, kw_only=True)
class _Answered:
    """One version's answers under attack: its report, its outcomes for the judge, its seconds, the
    hash of the examples it answered and the device it ran on."""

    report: AdversarialReport
    outcomes: list[SampleOutcome]
    seconds: float
    set_hash: str
    device: str
    usage: Usage  # the attack's queries when this call attacked the set (none when it was reused)


def _version_answer(
    *, ctx: LayerContext, attack: _Attack, version: ModelVersion, aset: AdversarialSet
) -> _Answered:
    """`version`'s answers to its set's final texts (attacked first where they are not yet), stored as
    the layer's samples."""
    mark = time.perf_counter()
    with attack.work.phase("attack"):
        aset, cached = _attack_set(ctx=ctx, aset=aset, item_ids=attack.item_ids, by_id=attack.by_id)
    examples = aset.examples
    if cached:
        ctx.progress.advance(len(attack.item_ids))
    ctx.progress.doing(step=Step.ANSWER, version=version.ref)
    labels, errors, device = _answers(ctx=ctx, attack=attack, version=version, examples=examples)
    # Right under attack: the attacked version's answer after its search (wrong before it: wrong
    # after), or in transfer mode this version's answer to that final text.
    correct = [label == attack.by_id[e["item_id"]].label for e, label in zip(examples, labels, strict=True)]
    seconds = time.perf_counter() - mark
    report = _report(
        version=version,
        mode=_mode(ctx),
        aset=aset,
        access=attack.access[aset.version_id],
        cached=cached,
        correct=correct,
    )
    with attack.work.phase("storage"):
        _samples_store(
            ctx=ctx,
            attack=attack,
            version=version,
            examples=examples,
            labels=labels,
            correct=correct,
            errors=errors,
        )
    recipe = ctx.policy.section(RobustnessPolicy).robustness_recipe
    outcomes = [
        SampleOutcome(
            item_id=e["item_id"],
            type=recipe,
            language=_language(attack.by_id[e["item_id"]]),
            tags=tuple(attack.by_id[e["item_id"]].tags),
            correct=ok,
            errored=bool(error),
        )
        for e, ok, error in zip(examples, correct, errors, strict=True)
    ]
    set_hash = hashlib.sha256(json.dumps(examples, sort_keys=True).encode()).hexdigest()
    return _Answered(
        report=report,
        outcomes=outcomes,
        seconds=seconds,
        set_hash=set_hash,
        device=device,
        usage=_attack_usage(aset=aset, cached=cached, device=device)
        if aset.version_id == version.pk
        else Usage(),
    )


def _attack_usage(*, aset: AdversarialSet, cached: bool, device: str) -> Usage:
    """What attacking the set spent, for the version attacked: its search's queries, their tokens (an
    endpoint's count; None for a model run here) and its seconds, on a local device; nothing when the
    set was reused (attacked before this call; in transfer mode the reference's set is)."""
    if cached:
        return Usage()
    return Usage(
        queries=sum(e["queries"] for e in aset.examples),
        tokens_in=aset.tokens_in,
        tokens_out=aset.tokens_out,
        device_seconds=None if device == "remote" else aset.seconds,
    )


def _mode(ctx: LayerContext) -> str:
    return "transfer" if ctx.policy.section(RobustnessPolicy).robustness_transfer_from else "adaptive"


def _answers(
    *, ctx: LayerContext, attack: _Attack, version: ModelVersion, examples: list[dict[str, Any]]
) -> tuple[list[str], list[str], str]:
    """Labels and errors of `version`'s answers to the examples, and its device: in transfer mode a
    version other than the attacked one answers the final texts; the attacked one's answers are the
    labels its search ended on."""
    if attack.reference is not None and version.pk != attack.reference.pk:
        general = ctx.policy.general
        outputs = model_outputs_predict(
            version=version,
            texts=[e["perturbed"] for e in examples],
            batch_size=general.batch_size,
            on_batch=lambda n: None,
            use_cache=general.output_cache,
        )
        attack.work.outputs_add(version=version, outputs=outputs, candidate=False)
        return (
            [p.label or "" for p in outputs.predictions],
            [p.error or "" for p in outputs.predictions],
            outputs.device,
        )
    from engines.backends import backend_device

    return [e["label_after"] for e in examples], [""] * len(examples), backend_device(version.backend_kind)


def _samples_store(
    *,
    ctx: LayerContext,
    attack: _Attack,
    version: ModelVersion,
    examples: list[dict[str, Any]],
    labels: list[str],
    correct: list[bool],
    errors: list[str],
) -> None:
    """The version's answers as the layer's samples, replacing any an earlier attempt stored."""
    recipe = ctx.policy.section(RobustnessPolicy).robustness_recipe
    with transaction.atomic():
        gate_run_assert_held(ctx.run)
        attack.row.samples.filter(version=version).delete()
        SampleResult.objects.bulk_create(
            [
                SampleResult(
                    layer_result=attack.row,
                    version=version,
                    item=attack.by_id[e["item_id"]],
                    sample_index=k,
                    perturbation=f"{recipe}:{e['status']}",
                    diff=e["diff"],
                    input_text=e["perturbed"],
                    output_label=label,
                    correct=ok,
                    error=error,
                )
                for k, (e, label, ok, error) in enumerate(zip(examples, labels, correct, errors, strict=True))
            ]
        )


def _judged_store(
    *,
    layer: GateLayer[RobustnessDetails],
    ctx: LayerContext,
    setup: RobustnessDetails,
    attack: _Attack,
    answered: dict[int, _Answered],
    started: float,
) -> LayerResult:
    """Judge the versions' outcomes and write the layer's result, the candidate's attack summarised."""
    section = ctx.policy.section(RobustnessPolicy)
    baseline = ctx.baseline
    result = robustness_judge(
        candidate=answered[ctx.run.candidate_id].outcomes,
        baseline=answered[baseline.pk].outcomes if baseline else None,
        policy=section,
        decide_on=ctx.policy.general.decide_on,
        confidence=ctx.policy.general.confidence,
        shortfall=setup.shortfall,
    )

    def side(version: ModelVersion, summary: RobustnessSummary) -> RobustnessSide:
        return RobustnessSide(
            **{name: getattr(summary, name) for name in RobustnessSummary.__dataclass_fields__},
            version=version.ref,
            seconds=answered[version.pk].seconds,
            computed=len(attack.item_ids),
        )

    candidate = answered[ctx.run.candidate_id]
    details = replace(
        setup,
        set_hash=candidate.set_hash,
        adversarial={v.ref: answered[v.pk].report for v in ctx.versions},
        candidate=side(ctx.run.candidate, result.candidate),
        baseline=side(baseline, result.baseline) if baseline and result.baseline else None,
        comparison=result.comparison,
        worst_items=result.worst,
        timings=attack.work.timings,
        costs=versions_cost(
            versions=ctx.versions,
            usage={v.pk: attack.work.usage[v.pk] + answered[v.pk].usage for v in ctx.versions},
            seconds={v.pk: answered[v.pk].seconds for v in ctx.versions},
            devices={v.pk: answered[v.pk].device for v in ctx.versions},
        ),
    )
    return layer.store(
        run=ctx.run,
        started=started,
        verdict=result.verdict,
        details=details,
        reasons=[
            *result.reasons,
            *_attack_summary(report=candidate.report, ctx=ctx),
            *(a.why for a in attack.access.values()),  # how each attacked version was searched, and why
        ],
        threshold=section.robustness_min,
        estimate=result.candidate.rate,
        ci_low=result.candidate.ci_low,
        ci_high=result.candidate.ci_high,
        device=candidate.device,
    )


def _attack_summary(*, report: AdversarialReport, ctx: LayerContext) -> list[Reason]:
    """The candidate's attack in one reason (none when nothing was attacked)."""
    if report.attack_success_rate is None:
        return []
    recipe = ctx.policy.section(RobustnessPolicy).robustness_recipe
    if report.search == "hard-label":
        return [
            reason(
                AdversarialCode.HARD_LABEL_SUMMARY,
                mode=_mode(ctx),
                recipe=recipe,
                before=report.accuracy_before,
                after=report.accuracy_under_attack,
                rate=report.attack_success_rate,
                queries=report.queries_per_item,
                queries_max=report.queries_max,
            )
        ]
    code = AdversarialCode.TRANSFER_SUMMARY if _mode(ctx) == "transfer" else AdversarialCode.ADAPTIVE_SUMMARY
    return [
        reason(
            code,
            recipe=ctx.policy.section(RobustnessPolicy).robustness_recipe,
            before=report.accuracy_before,
            after=report.accuracy_under_attack,
            rate=report.attack_success_rate,
            queries=report.queries_per_item,
        )
    ]
