"""Named, versioned perturbation recipes and the perturbation types they mix. Pure data, no textattack.

A recipe's name carries its version ("typos-v1"): a change to its types, shares or rate is a new
name, so a stored perturbed set can always be regenerated from (recipe, seed, samples, shares).

Each type works on one script:
- "latin": English words (ASCII letters, no digits): typos, contractions, articles, homoglyphs.
- "cjk": Chinese words (jieba segments of CJK characters): homophones, similar-shape characters.
- "any": script-neutral edits (invisible/control characters, digits) on Latin or Chinese words.
An item gets only the types for its language: "en" latin+any, "zh" cjk+any, "mixed" all of them,
each type editing only the words of its own script (English typo rules never touch Chinese).
"""

from __future__ import annotations

from dataclasses import dataclass

SCRIPTS_BY_LANGUAGE = {"en": ("latin", "any"), "zh": ("cjk", "any"), "mixed": ("latin", "cjk", "any")}


@dataclass(frozen=True)
class PerturbationType:
    name: str
    script: str  # "latin", "cjk" or "any"
    summary: str


TYPES: dict[str, PerturbationType] = {
    t.name: t
    for t in (
        PerturbationType(
            "char_swap", "latin", "two neighbouring inner letters swapped (contract → conrtact)"
        ),
        PerturbationType("char_delete", "latin", "one inner letter deleted (payable → payble)"),
        PerturbationType("char_insert", "latin", "one random lowercase letter inserted inside the word"),
        PerturbationType("char_substitute", "latin", "one letter replaced by a random lowercase letter"),
        PerturbationType("qwerty", "latin", "one letter replaced by a neighbouring QWERTY key"),
        PerturbationType("contraction", "latin", "contract or expand (does not ↔ doesn't, it is ↔ it's)"),
        PerturbationType("word_delete", "latin", "an article (a, an, the) deleted"),
        PerturbationType("homoglyph", "latin", "one letter replaced by a look-alike (Cyrillic а for a)"),
        PerturbationType("invisible_chars", "any", "a zero-width character inserted inside the word"),
        PerturbationType("bidi_reorder", "any", "two characters swapped and put back by bidi controls"),
        PerturbationType("control_delete", "any", "a character plus a backspace control inserted"),
        PerturbationType("number_change", "any", "a digit number changed (only when numbers do not matter)"),
        PerturbationType("zh_homophone", "cjk", "one character replaced by a same-reading one (付 → 副)"),
        PerturbationType("zh_morphonym", "cjk", "one character replaced by a similar-shape one (扬 → 杨)"),
    )
}


@dataclass(frozen=True)
class Recipe:
    name: str
    shares: dict[str, float]  # default share (relative weight) of each type, in a fixed order
    rate: float  # fraction of an item's words edited per sample (at least one)
    summary: str


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "typos-v1",
            {
                "char_swap": 1.0,
                "char_delete": 1.0,
                "char_insert": 1.0,
                "char_substitute": 1.0,
                "qwerty": 1.0,
                "zh_homophone": 1.0,
                "zh_morphonym": 1.0,
            },
            rate=0.1,
            summary="keyboard and spelling typos; pinyin-input homophones and look-alike characters",
        ),
        Recipe(
            "robustness-v1",
            {
                "char_swap": 1.0,
                "char_delete": 1.0,
                "qwerty": 1.0,
                "contraction": 1.0,
                "word_delete": 1.0,
                "invisible_chars": 1.0,
                "number_change": 1.0,
                "zh_homophone": 1.0,
                "zh_morphonym": 1.0,
            },
            rate=0.1,
            summary="the default mix for the gate: typos, contractions, dropped articles, zero-width "
            "characters, number changes where numbers do not matter; Chinese homophones and look-alikes",
        ),
        Recipe(
            "imperceptible-v1",
            {
                "invisible_chars": 1.0,
                "homoglyph": 1.0,
                "bidi_reorder": 1.0,
                "control_delete": 1.0,
                "zh_morphonym": 1.0,
            },
            rate=0.1,
            summary="Bad Characters (Boucher et al. 2021) edits that render (almost) unchanged, offline",
        ),
    )
}

# TextAttack recipes that need downloads this project cannot make (S3, TF Hub, the model hub).
RECIPES_UNAVAILABLE: dict[str, str] = {
    "textfooler": "counter-fitted word embeddings (paragramcf, TextAttack S3) + Universal Sentence "
    "Encoder (TF Hub); the offline TextFooler-class recipe is robustness_recipe 'textfooler-v1'",
    "textbugger": "counter-fitted word embeddings (paragramcf, TextAttack S3) + Universal Sentence "
    "Encoder (TF Hub) + Unicode intentional-homoglyph table (missing from the textattack wheel)",
    "pso": "HowNet synonym candidates (TextAttack S3, OpenHowNet data download)",
    "alzantot": "counter-fitted word embeddings (paragramcf, TextAttack S3) + Google 1-billion-words "
    "language model (TextAttack S3)",
    "bae": "BERT masked language model (bert-base-uncased, model hub) + Universal Sentence Encoder (TF Hub)",
    "bert-attack": "BERT masked language model (bert-base-uncased, model hub) + Universal Sentence "
    "Encoder (TF Hub)",
    "clare": "DistilRoBERTa masked language model (distilroberta-base, model hub) + Universal Sentence "
    "Encoder (TF Hub)",
}


class PerturbationResourceError(RuntimeError):
    """A recipe needs a resource (embeddings, encoder, model) that is not available offline."""

    def __init__(self, recipe: str, resource: str) -> None:
        super().__init__(f"perturbation recipe {recipe!r} cannot run offline: it needs {resource}")
        self.recipe = recipe
        self.resource = resource


class UnknownRecipeError(ValueError):
    def __init__(self, recipe: str) -> None:
        known = ", ".join(sorted(RECIPES))
        super().__init__(f"unknown perturbation recipe {recipe!r} (known: {known})")
        self.recipe = recipe


def recipe_get(*, name: str) -> Recipe:
    """The recipe called `name`; PerturbationResourceError for an offline-unavailable TextAttack one."""
    if name in RECIPES:
        return RECIPES[name]
    if name.lower() in RECIPES_UNAVAILABLE:
        raise PerturbationResourceError(name, RECIPES_UNAVAILABLE[name.lower()])
    raise UnknownRecipeError(name)
