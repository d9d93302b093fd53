"""The TextFooler-class recipe: the batched search agrees with TextAttack's own Attacker item by item,
and its constraints hold."""

import numpy as np
import pytest

from engines.backends.builtin import BowBackend
from engines.demo.dataset import demo_dataset_build
from engines.perturbation.word_attack import (
    recipe_attack_build,
    resources_load,
    word_attack_run,
)

ITEMS = demo_dataset_build(seed=0).eval


@pytest.fixture(scope="module")
def backend(small_bow):
    return BowBackend.from_dir(small_bow, device="cpu")


def _scorer(backend):
    def score(texts):
        probs = np.asarray(backend.class_scores(list(texts)), dtype=np.float64)
        return probs / probs.sum(axis=1, keepdims=True)

    return score


def _sample(language, n):
    return [i for i in ITEMS if i.language == language][::7][:n]


def test_same_outcome_as_textattack_attacker_item_by_item(backend):
    import textattack
    from textattack.attack_results import FailedAttackResult, SkippedAttackResult, SuccessfulAttackResult
    from textattack.models.wrappers import ModelWrapper

    score = _scorer(backend)

    class Wrapper(ModelWrapper):
        model = backend

        def __call__(self, text_input_list, **kwargs):
            return score(text_input_list)

    index = {label: i for i, label in enumerate(backend.labels)}
    items = _sample("en", 8) + _sample("zh", 4)
    pairs = [(i.input, index[i.label]) for i in items]
    ours, _ = word_attack_run(scorer=score, items=pairs, recipe="textfooler-v2", query_budget=300)
    attack = recipe_attack_build(recipe="textfooler-v2", model_wrapper=Wrapper())
    args = textattack.AttackArgs(
        num_examples=len(pairs), query_budget=300, silent=True, disable_stdout=True, random_seed=0
    )
    theirs = textattack.Attacker(attack, textattack.datasets.Dataset(pairs), args).attack_dataset()
    names = {
        SkippedAttackResult: "skipped",
        SuccessfulAttackResult: "succeeded",
        FailedAttackResult: "failed",
    }
    for mine, result in zip(ours, theirs, strict=True):
        assert mine.status == names[type(result)]
        if mine.status == "succeeded":
            assert mine.perturbed == result.perturbed_result.attacked_text.text
    statuses = [a.status for a in ours]
    # The sample is not trivial: the bag of words loses some items and keeps some.
    assert "succeeded" in statuses and ("failed" in statuses or "skipped" in statuses)


def test_swaps_respect_the_constraints(backend):
    resources = resources_load()
    index = {label: i for i, label in enumerate(backend.labels)}
    items = _sample("en", 10) + _sample("zh", 6)
    attacks, timings = word_attack_run(
        scorer=_scorer(backend), items=[(i.input, index[i.label]) for i in items], recipe="textfooler-v2"
    )
    assert set(timings) == {"model", "encoder", "search"}
    for attack in attacks:
        assert attack.queries <= 500
        if attack.status != "succeeded":
            continue
        assert attack.label_after != attack.label_before
        assert backend.predict([attack.perturbed])[0].label == backend.labels[attack.label_after]
        for swap in attack.diff.split("; "):
            before, after = swap.split("→")
            if before.isascii():  # an English word for a neighbour
                assert before.lower() not in resources.stopwords
                assert (before.lower(), after.lower()) not in resources.antonyms
                assert (before.lower(), after.lower()) in resources.synonyms
                assert resources.embedding.get_cos_sim(before.lower(), after.lower()) >= 0.5
            else:  # characters of Chinese words, swapped one for one
                assert len(before) == len(after) and before != after
                assert any(c in resources.zh_table.get(b, ()) for b, c in zip(before, after, strict=True))


def test_antonyms_are_never_candidates():
    from engines.perturbation.word_attack import WORD_RECIPES, _components

    resources = resources_load()
    emb = resources.embedding
    transformation, _, _ = _components(WORD_RECIPES["textfooler-v1"], resources)
    near = []
    for a, b in sorted(resources.antonyms)[:400]:
        neighbours = {emb.index2word(i) for i in emb.nearest_neighbours(emb.word2index(a), 50)}
        if b in neighbours and emb.get_cos_sim(a, b) >= 0.5:
            near.append((a, b))
    # Counter-fitting pushed most antonyms apart, not all: the shipped WordNet antonyms refuse the rest.
    assert near
    for a, b in near:
        assert b not in transformation._get_replacement_words(a)
        assert b.capitalize() not in transformation._get_replacement_words(a.capitalize())


def test_v2_never_swaps_a_chinese_word_into_another_dictionary_word():
    from engines.perturbation.word_attack import WORD_RECIPES, _components, _zh_dictionary

    resources = resources_load()
    v1, _, _ = _components(WORD_RECIPES["textfooler-v1"], resources)
    v2, _, _ = _components(WORD_RECIPES["textfooler-v2"], resources)
    words = _zh_dictionary()
    # 定金 (a deposit) → 订金 (an advance) and 终止 (terminate) → 中止 (suspend) changed the true label.
    for word, other in (("定金", "订金"), ("终止", "中止")):
        assert other in v1._get_replacement_words(word)
        assert other not in v2._get_replacement_words(word)
    for word in ("定金", "终止", "付款", "保密", "违约金", "赔偿"):
        kept = v2._get_replacement_words(word)
        assert kept and not any(w in words for w in kept)  # typos remain, other terms do not
        assert set(kept) <= set(v1._get_replacement_words(word))
    assert v2._get_replacement_words("金") == v1._get_replacement_words("金")  # one character: a typo


def test_pwws_class_recipe_swaps_wordnet_synonyms_by_weighted_saliency(backend):
    from engines.perturbation.word_attack import WORD_RECIPES

    assert WORD_RECIPES["pwws-v1"].search == "weighted-saliency"
    resources = resources_load()
    index = {label: i for i, label in enumerate(backend.labels)}
    items = _sample("en", 10) + _sample("zh", 4)
    pairs = [(i.input, index[i.label]) for i in items]
    attacks, timings = word_attack_run(scorer=_scorer(backend), items=pairs, recipe="pwws-v1")
    assert timings["model"] > 0 and [a.original for a in attacks] == [text for text, _ in pairs]
    statuses = {a.status for a in attacks}
    assert "succeeded" in statuses and statuses <= {"succeeded", "failed", "skipped"}
    for attack, (_, truth) in zip(attacks, pairs, strict=True):
        assert attack.queries <= 500
        if attack.status == "skipped":
            assert attack.label_before != truth and not attack.diff
            continue
        assert attack.label_before == truth
        if attack.status != "succeeded":
            assert attack.label_after == truth
            continue
        assert attack.label_after != truth
        assert backend.predict([attack.perturbed])[0].label == backend.labels[attack.label_after]
        for swap in attack.diff.split("; "):
            before, after = swap.split("→")
            if before.isascii():  # any WordNet synonym, not only an embedding neighbour
                assert (before.lower(), after.lower()) in resources.synonyms
                assert (before.lower(), after.lower()) not in resources.antonyms
    # The Attacker seeds the global generators; the caller's are put back.
    state = np.random.get_state()[1].copy()
    word_attack_run(scorer=_scorer(backend), items=pairs[:2], recipe="pwws-v1")
    assert (np.random.get_state()[1] == state).all()
