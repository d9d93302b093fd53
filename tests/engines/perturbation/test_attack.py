"""Attack mode: TextAttack's Attacker with an offline recipe against a real (small) classifier."""

import nltk
import pytest

from engines.backends.base import Prediction
from engines.backends.builtin import BowBackend
from engines.demo.dataset import demo_dataset_build
from engines.perturbation import PerturbationResourceError
from engines.perturbation.attack import (
    AttackSpec,
    AttackUnavailableError,
    attack_recipe_check,
    attack_run,
    attack_sample,
)
from engines.perturbation.nltk_setup import NLTK_DATA_DIR

ITEMS = [
    (i.id, i.input, i.label, i.language) for i in demo_dataset_build(seed=0).eval if i.language != "mixed"
]


@pytest.fixture(scope="module")
def backend(small_bow):
    return BowBackend.from_dir(small_bow, device="cpu")


def test_deepwordbug_flips_some_answers_and_counts_consistently(backend):
    report = attack_run(backend=backend, items=ITEMS, spec=AttackSpec(recipe="deepwordbug", seed=0, items=16))
    english = report.items_sampled - report.excluded_not_english
    assert report.items_sampled == 16 and english > 0
    assert report.originally_wrong + report.attacked == english
    assert report.accuracy_before == pytest.approx(report.attacked / english)
    assert report.accuracy_under_attack == pytest.approx((report.attacked - report.succeeded) / english)
    assert report.accuracy_under_attack <= report.accuracy_before
    # A bag of words loses its answer to a few character edits in its key words.
    assert report.succeeded > 0 and report.attack_success_rate == report.succeeded / report.attacked
    assert 0 < report.average_queries <= report.query_budget
    for example in report.examples:
        assert example["label_after"] != example["label"]
        assert example["perturbed"] != example["original"]
        assert backend.predict([example["perturbed"]])[0].label == example["label_after"]


def test_same_seed_same_attack(backend):
    spec = AttackSpec(recipe="deepwordbug", seed=3, items=8)
    first, second = (attack_run(backend=backend, items=ITEMS, spec=spec).as_dict() for _ in range(2))
    first.pop("seconds"), second.pop("seconds")
    assert first == second
    # Another seed attacks another sample of items.
    assert attack_sample(ITEMS, spec=AttackSpec(seed=4, items=8)) != attack_sample(ITEMS, spec=spec)


def test_only_english_items_are_attacked(backend):
    chinese = [item for item in ITEMS if item[3] == "zh"]
    report = attack_run(backend=backend, items=chinese, spec=AttackSpec(items=5))
    assert (report.items_sampled, report.excluded_not_english, report.attacked) == (5, 5, 0)
    assert report.accuracy_under_attack is None and report.attack_success_rate is None


def test_recipes_needing_downloads_name_what_is_missing(monkeypatch):
    with pytest.raises(PerturbationResourceError, match="Universal Sentence Encoder"):
        attack_recipe_check(recipe="TextFooler")
    monkeypatch.setattr(nltk.data, "path", [str(NLTK_DATA_DIR)])  # the shipped data: no WordNet
    with pytest.raises(PerturbationResourceError, match="WordNet"):
        attack_recipe_check(recipe="pwws")
    with pytest.raises(AttackUnavailableError, match="unknown attack recipe 'hotflip'"):
        attack_recipe_check(recipe="hotflip")


def test_a_model_without_class_scores_cannot_be_attacked():
    class AnswersOnly:
        labels = ["payment"]

        def predict(self, inputs):
            return [Prediction(label="payment", text="payment", latency_ms=0.0) for _ in inputs]

    with pytest.raises(AttackUnavailableError, match="class scores"):
        attack_run(backend=AnswersOnly(), items=ITEMS, spec=AttackSpec())


def test_the_workers_random_state_is_put_back(backend):
    import random

    import numpy as np
    import torch

    random.seed(11), np.random.seed(11), torch.manual_seed(11)
    attack_run(backend=backend, items=ITEMS, spec=AttackSpec(recipe="deepwordbug", seed=3, items=2))
    after = (random.random(), float(np.random.random()), float(torch.rand(1)))
    random.seed(11), np.random.seed(11), torch.manual_seed(11)
    assert after == (random.random(), float(np.random.random()), float(torch.rand(1)))
