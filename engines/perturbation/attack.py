"""Attack mode of gate layer 1: a TextAttack `Attacker` searches, item by item, for the smallest
edit that flips a classifier's answer. Worker-only (no Django); imports textattack.

Unlike the perturbed set (random edits, same for every model), an attack adapts to the model under
test, so it measures the worst case near each item: accuracy under attack, attack success rate
(flipped / attacked) and the model queries the search needed.

Offline recipes:
- "deepwordbug" (Gao et al. 2018): character swaps, substitutions, deletions and insertions in the
  words whose removal moves the model most; at most 30 edits (Levenshtein); stopwords never edited.
- "pwws" (Ren et al. 2019): WordNet synonym swaps, where NLTK's WordNet corpus is installed (it does
  not ship with the project: `python -m nltk.downloader wordnet omw-1.4` on a machine with internet,
  then point NLTK_DATA at it).

Both are English-word attacks: only English items are attacked, Chinese and mixed items are counted
as excluded. The model must be a classifier with class scores (`ScoringBackend`): the search ranks
words by how much the true class's score drops.

    report = attack_run(backend=backend, items=items, spec=AttackSpec(recipe="deepwordbug", seed=0))
"""

from __future__ import annotations

import hashlib
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from engines.backends.base import ModelBackend, ScoringBackend, backend_scores_classes

from .recipes import RECIPES_UNAVAILABLE, PerturbationResourceError

if TYPE_CHECKING:
    import numpy as np
    from textattack import Attack
    from textattack.attack_results import AttackResult
    from textattack.models.wrappers import ModelWrapper

ATTACK_RECIPES = ("deepwordbug", "pwws")
EXAMPLES_SHOWN = 10


@dataclass(frozen=True)
class AttackSpec:
    recipe: str = "deepwordbug"
    seed: int = 0
    items: int = 50  # how many English items to attack (all of them when there are fewer)
    query_budget: int = 500  # model queries per item before the search gives up


@dataclass(frozen=True)
class AttackReport:
    recipe: str
    seed: int
    query_budget: int
    items_sampled: int
    excluded_not_english: int
    originally_wrong: int  # skipped: the model was wrong before any edit
    attacked: int
    succeeded: int
    accuracy_before: float | None
    accuracy_under_attack: float | None
    attack_success_rate: float | None
    average_queries: float | None
    average_words_changed: float | None
    seconds: float
    examples: list[dict[str, Any]]  # successful attacks: item, label before and after, original and perturbed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class AttackUnavailableError(ValueError):
    """The attack cannot run on this model (not a classifier with scores) or with this recipe."""


def _wordnet_check() -> None:
    import nltk

    for resource in ("corpora/wordnet", "corpora/wordnet.zip"):
        try:
            nltk.data.find(resource)
            return
        except LookupError:
            continue
    raise PerturbationResourceError(
        "pwws", "NLTK's WordNet corpus (corpora/wordnet in a folder on NLTK_DATA); it is not shipped"
    )


def attack_recipe_check(*, recipe: str) -> None:
    """Raises when `recipe` cannot run here: unknown, or needing a resource that is missing."""
    name = recipe.lower()
    if name in RECIPES_UNAVAILABLE:
        raise PerturbationResourceError(recipe, RECIPES_UNAVAILABLE[name])
    if name not in ATTACK_RECIPES:
        raise AttackUnavailableError(
            f"unknown attack recipe {recipe!r} (offline: {', '.join(ATTACK_RECIPES)})"
        )
    if name == "pwws":
        _wordnet_check()


def attack_recipe_build(*, recipe: str, model_wrapper: ModelWrapper) -> Attack:
    """The TextAttack `Attack` for an offline recipe."""
    attack_recipe_check(recipe=recipe)
    if recipe.lower() == "deepwordbug":
        from textattack.attack_recipes import DeepWordBugGao2018

        return DeepWordBugGao2018.build(model_wrapper)
    from textattack.attack_recipes import PWWSRen2019

    return PWWSRen2019.build(model_wrapper)


def scores_wrapper(scores: Callable[[list[str]], np.ndarray], *, model: object = None) -> ModelWrapper:
    """A TextAttack model wrapper around a texts -> class scores function."""
    from textattack.models.wrappers import ModelWrapper

    class ScoresWrapper(ModelWrapper):
        def __init__(self) -> None:
            self.model = model  # TextAttack reads `.model` for logging only

        def __call__(self, text_input_list: list[str], **kwargs: Any) -> np.ndarray:
            return scores(list(text_input_list))

    return ScoresWrapper()


def attacker_results(
    *, attack: Attack, pairs: Sequence[tuple[str, int]], query_budget: int, seed: int
) -> list[AttackResult]:
    """TextAttack's `Attacker` over (text, true class index) pairs, item after item, silently. It seeds
    Python's, numpy's and torch's global generators: the caller's are put back."""
    import numpy as np
    import textattack
    import torch

    if not pairs:
        return []
    args = textattack.AttackArgs(
        num_examples=len(pairs), query_budget=query_budget, random_seed=seed, silent=True, disable_stdout=True
    )
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    try:
        with warnings.catch_warnings():  # its summary averages over no successes: numpy warns
            warnings.simplefilter("ignore", RuntimeWarning)
            dataset = textattack.datasets.Dataset(list(pairs))
            results: list[AttackResult] = textattack.Attacker(attack, dataset, args).attack_dataset()
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
    return results


def attack_result_status(result: AttackResult) -> str:
    """ "succeeded" (the answer flipped), "failed" (it held) or "skipped" (wrong before any attack)."""
    from textattack.attack_results import SkippedAttackResult, SuccessfulAttackResult

    if isinstance(result, SkippedAttackResult):
        return "skipped"
    return "succeeded" if isinstance(result, SuccessfulAttackResult) else "failed"


def attack_sample(
    items: Sequence[tuple[str, str, str, str]], *, spec: AttackSpec
) -> list[tuple[str, str, str, str]]:
    """A seeded sample of `spec.items` items, independent of the input order."""
    ranked = sorted(items, key=lambda item: hashlib.sha256(f"{spec.seed}\x1f{item[0]}".encode()).hexdigest())
    return ranked[: spec.items]


def attack_run(
    *,
    backend: ModelBackend | ScoringBackend,
    items: Sequence[tuple[str, str, str, str]],
    spec: AttackSpec,
) -> AttackReport:
    """Attack a seeded sample of `items` (item_id, text, label, language) with `spec.recipe`."""
    if not backend_scores_classes(backend):
        raise AttackUnavailableError(
            "attack mode needs a backend that gives class scores ('hf', 'builtin', or 'openai' with the "
            "version's labels and an endpoint that returns token log-probabilities); this one only answers"
        )
    import numpy as np
    from textattack.attack_results import FailedAttackResult, SkippedAttackResult, SuccessfulAttackResult

    started = time.perf_counter()
    wrapper = scores_wrapper(
        lambda texts: np.asarray(backend.class_scores(texts), dtype=np.float32), model=backend
    )
    attack = attack_recipe_build(recipe=spec.recipe, model_wrapper=wrapper)
    index = {label: i for i, label in enumerate(backend.labels)}
    sampled = attack_sample([item for item in items if item[2] in index], spec=spec)
    english = [item for item in sampled if item[3] == "en"]
    results = attacker_results(
        attack=attack,
        pairs=[(text, index[label]) for _, text, label, _ in english],
        query_budget=spec.query_budget,
        seed=spec.seed,
    )
    skipped = [r for r in results if isinstance(r, SkippedAttackResult)]
    succeeded = [r for r in results if isinstance(r, SuccessfulAttackResult)]
    attacked = [r for r in results if isinstance(r, SuccessfulAttackResult | FailedAttackResult)]
    n = len(results)
    examples: list[dict[str, Any]] = []
    for (item_id, *_), result in zip(english, results, strict=True):
        if isinstance(result, SuccessfulAttackResult) and len(examples) < EXAMPLES_SHOWN:
            examples.append(
                {
                    "item_id": item_id,
                    "label": backend.labels[result.original_result.output],
                    "label_after": backend.labels[result.perturbed_result.output],
                    "original": result.original_result.attacked_text.text,
                    "perturbed": result.perturbed_result.attacked_text.text,
                    "queries": result.num_queries,
                }
            )
    changed = [
        len(r.original_result.attacked_text.all_words_diff(r.perturbed_result.attacked_text))
        for r in succeeded
    ]
    return AttackReport(
        recipe=spec.recipe.lower(),
        seed=spec.seed,
        query_budget=spec.query_budget,
        items_sampled=len(sampled),
        excluded_not_english=len(sampled) - len(english),
        originally_wrong=len(skipped),
        attacked=len(attacked),
        succeeded=len(succeeded),
        accuracy_before=(n - len(skipped)) / n if n else None,
        accuracy_under_attack=(len(attacked) - len(succeeded)) / n if n else None,
        attack_success_rate=len(succeeded) / len(attacked) if attacked else None,
        average_queries=sum(r.num_queries for r in attacked) / len(attacked) if attacked else None,
        average_words_changed=sum(changed) / len(changed) if changed else None,
        seconds=time.perf_counter() - started,
        examples=examples,
    )
