"""The next version's training data from a gate run's adversarial examples, checked against the
held-out suite: the examples a version's layer-1 attack broke (with their true labels) join its
training data and a noisy share of it, and nothing of the suite the gate judges on may be among
them (`engines.training_data.training_leaks_find`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from engines.reasons import gettext_noop, reason, wordings_register
from engines.training_data import (
    LEAK_MAX_DISTANCE,
    Leak,
    TrainingExample,
    adversarial_examples_read,
    noisy_examples_build,
    training_leaks_find,
)
from gate.models import GateRun
from gate.selectors.gate_runs import adversarial_examples_export
from registry.errors import ApplicationError
from registry.models import EvalSuite, ModelVersion

NOISE_SHARE = 0.15  # the seed's §5.1 fix: ~15 % synthetic noise
NOISE_RECIPE = "robustness-v1"


class HardeningCode(StrEnum):
    NOT_FINISHED = "hardening.not_finished"
    NO_ATTACK = "hardening.no_attack"
    HELD_OUT_SUITE = "hardening.held_out_suite"
    LEAKS = "hardening.leaks"


wordings_register(
    {
        HardeningCode.NOT_FINISHED: gettext_noop(
            "gate run {id} is {status}: only a finished run's adversarial examples can be trained on"
        ),
        HardeningCode.NO_ATTACK: gettext_noop(
            "gate run {id} has no layer-1 example that {version} answered wrongly: nothing to learn from"
        ),
        HardeningCode.HELD_OUT_SUITE: gettext_noop(
            "gate run {id} attacked suite {suite}, the held-out suite the gate judges on: training on its "
            "perturbations would score the suite on what the model was taught (attack a suite of training "
            "data instead)"
        ),
        HardeningCode.LEAKS: gettext_noop(
            "{n} training example(s) are items of the held-out suite {suite} or within {distance} of one "
            "(first: the {source} example made from {origin}, at {found} from {held_out})"
        ),
    }
)


@dataclass(frozen=True)
class HardeningSet:
    examples: list[TrainingExample]
    counts: dict[str, int]  # per source: train, noise, adversarial
    gate_run: int
    attacked: str  # the version whose broken examples were taken
    held_out_suite: str
    held_out_items: int
    nearest_held_out: float | None  # the smallest distance of any example to a held-out input


def hardening_set_build(
    *,
    run: GateRun,
    version: ModelVersion,
    train: Sequence[TrainingExample],
    languages: Mapping[str, str],
    held_out: EvalSuite,
    seed: int = 0,
) -> HardeningSet:
    """`train` (item id -> language in `languages`), a noisy `NOISE_SHARE` of it and the examples of
    `run`'s layer-1 attack that `version` answered wrongly, refused when the run attacked `held_out`
    or when any example is (near) one of its items."""
    if run.status != GateRun.Status.SUCCEEDED:
        raise ApplicationError(
            reason(HardeningCode.NOT_FINISHED, id=run.pk, status=run.status), code="conflict", status_code=409
        )
    if run.suite.name == held_out.name:
        raise ApplicationError(
            reason(HardeningCode.HELD_OUT_SUITE, id=run.pk, suite=str(run.suite)), fields={"gate_run": []}
        )
    adversarial = adversarial_examples_read(rows=adversarial_examples_export(run=run), version=version.ref)
    if not adversarial:
        raise ApplicationError(reason(HardeningCode.NO_ATTACK, id=run.pk, version=version.ref))
    noisy = noisy_examples_build(
        items=train, languages=languages, share=NOISE_SHARE, recipe=NOISE_RECIPE, seed=seed
    )
    examples = [*train, *noisy, *adversarial]
    suite_inputs = dict(held_out.items.values_list("external_id", "input"))
    check = training_leaks_find(examples=examples, held_out=suite_inputs)
    if check.leaks:
        raise _leaks_refusal(check.leaks, suite=held_out)
    return HardeningSet(
        examples=examples,
        counts=dict(Counter(e.source for e in examples)),
        gate_run=run.pk,
        attacked=version.ref,
        held_out_suite=str(held_out),
        held_out_items=len(suite_inputs),
        nearest_held_out=check.nearest,
    )


def _leaks_refusal(leaks: list[Leak], *, suite: EvalSuite) -> ApplicationError:
    first = leaks[0]
    return ApplicationError(
        reason(
            HardeningCode.LEAKS,
            n=len(leaks),
            suite=str(suite),
            distance=LEAK_MAX_DISTANCE,
            source=first.example.source,
            origin=first.example.origin,
            held_out=first.held_out_id,
            found=round(first.distance, 3),
        ),
        fields={"gate_run": []},
    )
