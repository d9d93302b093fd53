"""Training data from adversarial exports, the noisy share, and the leak check against a held-out suite."""

import pytest

from engines.demo.dataset import demo_dataset_build
from engines.training_data import (
    LEAK_MAX_DISTANCE,
    TrainingExample,
    adversarial_examples_read,
    noisy_examples_build,
    training_leaks_find,
)

DATASET = demo_dataset_build(seed=0)
HELD_OUT = {item.id: item.input for item in DATASET.eval}


def example(item, source="train"):
    return TrainingExample(input=item.input, label=item.label, source=source, origin=item.id)


def row(**fields):
    base = {"version": "fam:v4", "item_id": "t1", "original": "pay in 30 days", "label": "payment"}
    return {**base, **fields}


def test_adversarial_rows_become_examples_only_where_the_model_was_wrong_once_per_text():
    rows = [
        row(perturbed="remit in 30 days", correct=False),  # broke the model: kept, true label
        row(perturbed="pay within 30 days", correct=True),  # the model held: nothing to learn
        row(perturbed="pay in 30 days", correct=False),  # unedited (wrong before any edit): not adversarial
        row(perturbed="remit in 30 days", correct=False, version="fam:v3"),  # another version's
        row(perturbed="remit in 30 days", correct=False, item_id="t2"),  # the same text again
    ]
    examples = adversarial_examples_read(rows=rows, version="fam:v4")
    assert examples == [
        TrainingExample(input="remit in 30 days", label="payment", source="adversarial", origin="t1")
    ]
    assert len(adversarial_examples_read(rows=rows)) == 1  # every version: still one per text


def test_the_demo_training_split_does_not_leak_into_its_eval_suite():
    check = training_leaks_find(examples=[example(i) for i in DATASET.train], held_out=HELD_OUT, workers=1)
    assert check.leaks == [] and check.checked == 960
    # The nearest: 乙方的保密义务在本合同期满后5年内继续有效。 and
    # 受托方的保密义务在本合同解除后10年内继续有效。: 6 edits (乙→受托, 期满→解除, 5→10)
    # over the longer text's 24 characters.
    assert LEAK_MAX_DISTANCE < check.nearest == pytest.approx(0.25)


def test_an_eval_item_and_its_edits_are_leaks_by_text_and_by_origin():
    item = next(i for i in DATASET.eval if i.language == "en" and "plain" in i.tags)
    words = item.input.split()
    edited = " ".join(["The", *words[1:-2], "hereof."])  # two words of a clause changed: a perturbation
    disguised = TrainingExample(input=edited, label=item.label, source="adversarial", origin="train-x")
    copied = TrainingExample(input=item.input, label=item.label, source="train", origin="anything")
    by_origin = TrainingExample(input="nothing like it", label=item.label, source="noise", origin=item.id)
    train = [example(i) for i in DATASET.train[:50]]
    check = training_leaks_find(examples=[*train, disguised, copied, by_origin], held_out=HELD_OUT, workers=1)
    found = {(leak.example.input, leak.held_out_id, leak.why) for leak in check.leaks}
    assert found == {
        (edited, item.id, "near_text"),
        (item.input, item.id, "near_text"),
        ("nothing like it", item.id, "same_item"),
    }
    assert check.nearest == 0.0


def test_noisy_copies_of_a_seeded_share_per_language_keep_their_labels():
    items = DATASET.train[::8]  # 120: 64 en, 56 zh
    train = [example(i) for i in items]
    languages = {i.id: i.language for i in items}
    noisy = noisy_examples_build(items=train, languages=languages, share=0.15, recipe="robustness-v1", seed=0)
    assert len(noisy) == 18  # round(0.15 × 64) = 10 English, round(0.15 × 56) = 8 Chinese
    by_id = {i.id: i for i in items}
    assert all(n.source == "noise" and n.label == by_id[n.origin].label for n in noisy)
    assert all(n.input != by_id[n.origin].input for n in noisy)
    assert sorted(languages[n.origin] for n in noisy) == ["en"] * 10 + ["zh"] * 8
    again = noisy_examples_build(items=train, languages=languages, share=0.15, recipe="robustness-v1", seed=0)
    assert again == noisy
