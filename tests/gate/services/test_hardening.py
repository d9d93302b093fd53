"""The next version's training data from a real gate run's adversarial examples, and the leak test:
nothing of the held-out suite, nor an edit of it, may be among them."""

import pytest

from engines.demo.dataset import demo_dataset_build
from engines.reasons import ENGLISH, reason_render
from engines.training_data import LEAK_MAX_DISTANCE, TrainingExample, training_leaks_find
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.hardening import HardeningCode, hardening_set_build
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.services.suites import eval_suite_import, suite_items_parse

pytestmark = pytest.mark.django_db

DATASET = demo_dataset_build(seed=0)
ATTACK = {
    "required_layers": ["robustness"],
    "robustness_recipe": "textfooler-v1",
    "robustness_samples": 16,
    "robustness_min_samples": 10,
    "robustness_chunk_size": 8,
    "attack_query_budget": 200,
    "run_baseline": False,
}


def suite_of(name, items):
    records = [{"id": i.id, "input": i.input, "label": i.label, "language": i.language} for i in items]
    return eval_suite_import(name=name, items=suite_items_parse(records=records), actor=SYSTEM)[0]


def attacked(candidate, suite):
    run = gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides=ATTACK)
    return gate_run_execute(gate_run_id=run.pk, worker="w")


@pytest.fixture
def held_out():
    return suite_of("fam", [i for i in DATASET.eval if i.language in ("en", "zh")][::10])


def training(items):
    return [TrainingExample(input=i.input, label=i.label, source="train", origin=i.id) for i in items]


def test_what_broke_the_model_on_training_data_joins_its_training_set_and_nothing_of_the_suite(
    versions, held_out
):
    candidate, _ = versions
    hardening = DATASET.train[1::30]  # 32 training items, both languages, none of the small model's own
    run = attacked(candidate, suite_of("fam-hardening", hardening))
    report = run.layers.get(layer="robustness").details["adversarial"][candidate.ref]
    assert report["succeeded"] > 0, report
    train = training(DATASET.train[::10])
    built = hardening_set_build(
        run=run,
        version=candidate,
        train=train,
        languages={i.id: i.language for i in DATASET.train},
        held_out=held_out,
    )
    adversarial = [e for e in built.examples if e.source == "adversarial"]
    # Every flipped text once (two items' searches can end on the same text), with its item's true label.
    flipped = {
        s.input_text: s.item
        for s in run.layers.get(layer="robustness").samples.filter(perturbation__endswith=":succeeded")
    }
    assert {e.input for e in adversarial} == set(flipped) and len(adversarial) == len(flipped)
    assert all(
        e.label == flipped[e.input].label and e.origin == flipped[e.input].external_id for e in adversarial
    )
    assert built.counts == {"train": 96, "noise": 14, "adversarial": len(flipped)}
    # The leak test, on the set as built: no example is an eval item or within reach of one.
    suite_inputs = dict(held_out.items.values_list("external_id", "input"))
    check = training_leaks_find(examples=built.examples, held_out=suite_inputs)
    assert check.leaks == [] and check.checked == len(built.examples)
    assert built.nearest_held_out == check.nearest > LEAK_MAX_DISTANCE
    assert built.held_out_items == held_out.item_count


def test_a_run_that_attacked_the_held_out_suite_or_a_copy_of_it_is_refused(versions, held_out):
    candidate, _ = versions
    train = training(DATASET.train[::10])
    languages = {i.id: i.language for i in [*DATASET.train, *DATASET.eval]}
    on_suite = attacked(candidate, held_out)
    with pytest.raises(ApplicationError) as refused:
        hardening_set_build(
            run=on_suite, version=candidate, train=train, languages=languages, held_out=held_out
        )
    assert refused.value.reason.code == HardeningCode.HELD_OUT_SUITE
    # The same eval items under another suite's name: every perturbation is an eval item's, by origin.
    copy = attacked(
        candidate, suite_of("fam-copy", [i for i in DATASET.eval if i.language in ("en", "zh")][::10])
    )
    with pytest.raises(ApplicationError) as leaked:
        hardening_set_build(run=copy, version=candidate, train=train, languages=languages, held_out=held_out)
    assert leaked.value.reason.code == HardeningCode.LEAKS
    assert "items of the held-out suite fam@1" in reason_render(leaked.value.reason, words=ENGLISH)


def test_an_unfinished_run_and_a_version_it_did_not_attack_are_refused(versions, held_out):
    candidate, baseline = versions
    train = training(DATASET.train[::10])
    languages = {i.id: i.language for i in DATASET.train}
    queued = gate_run_start(
        candidate=candidate,
        suite=suite_of("fam-hardening", DATASET.train[::30]),
        actor=SYSTEM,
        policy_overrides=ATTACK,
    )
    with pytest.raises(ApplicationError) as refused:
        hardening_set_build(
            run=queued, version=candidate, train=train, languages=languages, held_out=held_out
        )
    assert (refused.value.reason.code, refused.value.status_code) == (HardeningCode.NOT_FINISHED, 409)
    run = gate_run_execute(gate_run_id=queued.pk, worker="w")
    with pytest.raises(ApplicationError) as none:
        hardening_set_build(run=run, version=baseline, train=train, languages=languages, held_out=held_out)
    assert none.value.reason.code == HardeningCode.NO_ATTACK
