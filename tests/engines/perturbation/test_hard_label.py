"""The hard-label search: only the answer's label is read, its texts keep the recipe's constraints, the
budget holds, and a seed gives the same attack whatever the batch."""

import math

import numpy as np
import pytest

from engines.backends.builtin import BowBackend
from engines.demo.dataset import demo_dataset_build
from engines.perturbation.hard_label import hard_label_attack_run
from engines.perturbation.word_attack import WORD_RECIPES, resources_load

ITEMS = demo_dataset_build(seed=0).eval


@pytest.fixture(scope="module")
def backend(small_bow):
    backend = BowBackend.from_dir(small_bow, device="cpu")

    def no_scores(inputs):
        raise AssertionError("the hard-label search read class probabilities")

    backend.class_scores = no_scores  # label-only access: any read of probabilities fails the test
    return backend


class Labels:
    """The answer's label and nothing else (what an endpoint without log-probabilities gives), with
    every call's texts recorded."""

    def __init__(self, backend):
        self.backend = backend
        self.index = {label: i for i, label in enumerate(backend.labels)}
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return [self.index[p.label] for p in self.backend.predict(list(texts))]


def _pairs(backend, en=8, zh=6):
    index = {label: i for i, label in enumerate(backend.labels)}
    chosen = [i for i in ITEMS if i.language == "en"][::7][:en] + [i for i in ITEMS if i.language == "zh"][
        ::7
    ][:zh]
    return [(i.input, index[i.label]) for i in chosen]


def _angular(a, b):
    cos = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    return 1 - math.acos(max(-1.0, min(1.0, cos))) / math.pi


def test_label_only_attack_flips_answers_with_valid_swaps(backend):
    from textattack.shared import AttackedText

    labels = Labels(backend)
    pairs = _pairs(backend)
    attacks, timings = hard_label_attack_run(
        labeler=labels, items=pairs, recipe="textfooler-v2", query_budget=200
    )
    assert set(timings) == {"model", "encoder", "search"}
    assert [a.original for a in attacks] == [t for t, _ in pairs]
    statuses = [a.status for a in attacks]
    assert "succeeded" in statuses and set(statuses) <= {"succeeded", "failed", "skipped"}
    # One labeler call per step for all items, each text once in a call.
    assert all(len(call) == len(set(call)) for call in labels.calls)
    assert len(labels.calls) < sum(a.queries for a in attacks)
    resources, recipe = resources_load(), WORD_RECIPES["textfooler-v2"]
    for attack, (text, truth) in zip(attacks, pairs, strict=True):
        assert 1 <= attack.queries <= 200
        answer = backend.labels.index(backend.predict([attack.perturbed])[0].label)
        assert answer == attack.label_after
        if attack.status == "skipped":
            assert attack.label_before != truth and attack.perturbed == text and attack.queries == 1
            continue
        assert attack.label_before == truth
        assert (answer != truth) == (attack.status == "succeeded")
        if attack.status != "succeeded":
            continue
        assert attack.words_changed >= 1 and attack.diff
        for swap in attack.diff.split("; "):
            before, after = swap.split("→")
            if before.isascii():  # the recipe's English swaps: counter-fitted neighbours, WordNet synonyms
                assert before.lower() not in resources.stopwords
                assert (before.lower(), after.lower()) not in resources.antonyms
                assert (before.lower(), after.lower()) in resources.synonyms
                assert resources.embedding.get_cos_sim(before.lower(), after.lower()) >= 0.5
            else:  # characters of Chinese words, swapped one for one
                assert len(before) == len(after) and before != after
                assert any(c in resources.zh_table.get(b, ()) for b, c in zip(before, after, strict=True))
        original, perturbed = AttackedText(text), AttackedText(attack.perturbed)
        if text.isascii():  # every swap's window within the recipe's similarity of the original's
            changed = [
                i for i, (a, b) in enumerate(zip(original.words, perturbed.words, strict=True)) if a != b
            ]
            assert len(changed) == attack.words_changed
            for i in changed:
                a, b = resources.encoder.encode(
                    [
                        original.text_window_around_index(i, recipe.window),
                        perturbed.text_window_around_index(i, recipe.window),
                    ]
                )
                assert _angular(a, b) >= recipe.sentence_threshold


def test_the_query_budget_is_never_exceeded(backend):
    pairs = _pairs(backend)
    attacks, _ = hard_label_attack_run(
        labeler=Labels(backend), items=pairs, recipe="textfooler-v2", query_budget=6
    )
    queries = [a.queries for a in attacks]
    assert max(queries) == 6 and all(q <= 6 for q in queries)
    one, _ = hard_label_attack_run(
        labeler=Labels(backend), items=pairs, recipe="textfooler-v2", query_budget=1
    )
    assert {a.queries for a in one} == {1} and {a.status for a in one} <= {"failed", "skipped"}


def test_a_seed_gives_the_same_attack_whatever_the_batch(backend):
    pairs = _pairs(backend, en=5, zh=4)

    def run(items, seed):
        attacks, _ = hard_label_attack_run(
            labeler=Labels(backend), items=items, recipe="textfooler-v2", query_budget=60, seed=seed
        )
        return [(a.status, a.perturbed, a.queries) for a in attacks]

    together = run(pairs, 0)
    assert together == run(pairs, 0)
    assert run(pairs[:5], 0) + run(pairs[5:], 0) == together  # chunked (a resumed attack): the same
    assert run(pairs, 1) != together  # another seed, other random draws


def test_the_pwws_class_recipe_runs_label_only(backend):
    resources = resources_load()
    pairs = _pairs(backend, en=8, zh=2)
    attacks, _ = hard_label_attack_run(
        labeler=Labels(backend), items=pairs, recipe="pwws-v1", query_budget=100
    )
    assert "succeeded" in {a.status for a in attacks}
    for attack in attacks:
        if attack.status == "succeeded":
            for swap in attack.diff.split("; "):
                before, after = swap.split("→")
                if before.isascii():
                    assert (before.lower(), after.lower()) in resources.synonyms
