"""The perturbation engine of gate layer 1: seeded, offline sets of perturbed inputs, on TextAttack.

Worker-only (no Django). Importing this package is cheap; the first `perturbation_set_build` (or
`perturbation_engine_load`, e.g. at worker start) imports textattack, about 8 s. NLTK is pointed at
the shipped data first, so textattack imports without `~/nltk_data`.

    spec = PerturbationSpec(recipe="robustness-v1", seed=7, samples=1000)
    pset = perturbation_set_build(items=[(item.id, item.input, item.language) for item in suite], spec=spec)

Recipes and types: `recipes.py`. Data files and how they were built: `data/README.md`.
"""

from .nltk_setup import nltk_data_setup

nltk_data_setup()

from .engine import (  # noqa: E402  (NLTK must point at the shipped data first)
    PerturbationSet,
    PerturbationSpec,
    PerturbedSample,
    perturbation_engine_load,
    perturbation_set_build,
)
from .recipes import (  # noqa: E402
    RECIPES,
    RECIPES_UNAVAILABLE,
    TYPES,
    PerturbationResourceError,
    PerturbationType,
    Recipe,
    UnknownRecipeError,
    recipe_get,
)

__all__ = [
    "RECIPES",
    "RECIPES_UNAVAILABLE",
    "TYPES",
    "PerturbationResourceError",
    "PerturbationSet",
    "PerturbationSpec",
    "PerturbationType",
    "PerturbedSample",
    "Recipe",
    "UnknownRecipeError",
    "perturbation_engine_load",
    "perturbation_set_build",
    "recipe_get",
]
