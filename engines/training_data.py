"""Training data for the next version from what broke this one, kept apart from the held-out suite.

- `adversarial_examples_read`: a gate run's layer-1 export (`export_adversarial`, JSONL rows) as
  training examples: each perturbed text the model answered wrongly, with the item's true label.
- `noisy_examples_build`: a seeded share of items as noisy copies (a perturbation recipe's typos,
  homoglyphs, keyboard slips...), with their labels.
- `training_leaks_find`: the examples whose text is an eval item, or so near one that it is one
  edited (a perturbation of it), by normalised character-level Levenshtein distance to the nearest
  held-out input. Training on those would score the suite on what the model was taught.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engines.shift import nearest_distances

# A word attack edits a few words of an item, so its text stays near the item's; the demo's training
# and eval items are at least 0.25 apart (normalised Levenshtein, nearest neighbour: two short Chinese
# clauses with other parties and numbers; 99 % of training items are 0.39 or more from any eval item).
# Below this distance a text counts as an eval item edited. Provenance (an example made from an eval
# item's id) is checked too, whatever the distance: a heavy edit of a short item can go past it.
LEAK_MAX_DISTANCE = 0.2


@dataclass(frozen=True)
class TrainingExample:
    input: str
    label: str
    source: str  # "train", "noise" or "adversarial"
    origin: str  # the id of the item it is, or was made from


@dataclass(frozen=True)
class Leak:
    example: TrainingExample
    held_out_id: str
    distance: float
    why: str  # "same_item": made from a held-out item; "near_text": within the distance of one


def adversarial_examples_read(
    *, rows: Iterable[Mapping[str, Any]], version: str | None = None
) -> list[TrainingExample]:
    """The rows' perturbed texts that `version` (every version when None) answered wrongly, with the
    item's true label, each distinct text once in the rows' order."""
    seen: set[str] = set()
    examples = []
    for row in rows:
        if version is not None and row["version"] != version:
            continue
        text = row["perturbed"]
        if row["correct"] or text == row["original"] or text in seen:
            continue
        seen.add(text)
        examples.append(
            TrainingExample(input=text, label=row["label"], source="adversarial", origin=str(row["item_id"]))
        )
    return examples


def noisy_examples_build(
    *, items: Sequence[TrainingExample], languages: Mapping[str, str], share: float, recipe: str, seed: int
) -> list[TrainingExample]:
    """Noisy copies of a seeded `share` of `items` per language (`languages`: item id -> en/zh/mixed),
    one perturbed sample each from `recipe`, numbers left alone."""
    from engines.perturbation import PerturbationSpec, perturbation_set_build

    by_id = {item.origin: item for item in items}
    by_language: dict[str, list[tuple[str, str, str]]] = {}
    for item in items:
        language = languages[item.origin]
        by_language.setdefault(language, []).append((item.origin, item.input, language))
    spec = PerturbationSpec(recipe=recipe, seed=seed)
    noisy: list[TrainingExample] = []
    for _, group in sorted(by_language.items()):
        wanted = round(share * len(group))
        if not wanted:
            continue
        built = perturbation_set_build(items=group, spec=replace(spec, samples=wanted))
        first = {sample.item_id: sample for sample in reversed(built.samples)}  # an item's first sample
        noisy += [
            replace(by_id[item_id], input=sample.perturbed, source="noise")
            for item_id, sample in sorted(first.items())
        ]
    return noisy


@dataclass(frozen=True)
class LeakCheck:
    leaks: list[Leak]
    checked: int  # examples held against the held-out inputs
    nearest: float | None  # the smallest distance of any example to a held-out input


def training_leaks_find(
    *,
    examples: Sequence[TrainingExample],
    held_out: Mapping[str, str],
    max_distance: float = LEAK_MAX_DISTANCE,
    workers: int = -1,
) -> LeakCheck:
    """The examples that are a held-out item (`held_out`: item id -> input) or near one: made from a
    held-out id, or within `max_distance` of a held-out input (nearest neighbour, normalised by the
    longer text)."""
    ids, texts = list(held_out), list(held_out.values())
    if not texts:
        return LeakCheck(leaks=[], checked=len(examples), nearest=None)
    distances, nearest = nearest_distances([e.input for e in examples], texts, workers=workers)
    leaks = []
    for example, distance, index in zip(examples, distances, nearest, strict=True):
        if example.origin in held_out:
            leaks.append(
                Leak(example=example, held_out_id=example.origin, distance=float(distance), why="same_item")
            )
        elif distance <= max_distance:
            leaks.append(
                Leak(example=example, held_out_id=ids[index], distance=float(distance), why="near_text")
            )
    return LeakCheck(
        leaks=leaks, checked=len(examples), nearest=float(distances.min()) if len(distances) else None
    )
