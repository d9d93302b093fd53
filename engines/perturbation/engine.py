"""Builds a seeded set of perturbed samples from a suite's items (no Django, no model).

How a set is built (all choices come from sha256-derived RNGs of (seed, item, round, type, attempt),
never from global random state or from hash/set ordering):

- Items are ordered by id, then shuffled by the seed. Samples are dealt one per item per round, so
  every item gets `samples // len(items)` or one more; an item with nothing left to perturb drops
  out and the others take its turns (a shortfall is reported only when no item can take more).
- Each item draws its type from its language's cycle of the recipe's types (a smooth weighted
  round robin over the shares, normalised over the types for that language). A type that cannot
  edit the drawn item (e.g. no "does not" to contract) is owed a turn and takes the next item it can
  edit, so the shares hold as long as some items allow the type; what is still owed is noted.
- A sample edits about `recipe.rate` of the item's words (at least one; fewer when the type has
  fewer places), each place once, with one candidate of the type's TextAttack transformation.
  A sample identical to the original or to an earlier sample of the item is not counted.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .recipes import SCRIPTS_BY_LANGUAGE, TYPES, Recipe, recipe_get

if TYPE_CHECKING:
    from .transforms import ItemText, Site

Item = tuple[str, str, str]  # (item_id, text, language)

ATTEMPTS = 3  # tries per (item, type) at a new sample before the type counts as spent on the item
DIFF_EDITS_SHOWN = 5
HASH_FORMAT = "evalhub-perturbation-set/1"


@dataclass(frozen=True)
class PerturbationSpec:
    recipe: str
    seed: int
    samples: int = 1000
    shares: dict[str, float] | None = None  # replaces the recipe's shares; types left out get none
    numbers_matter: bool = True  # when True, number_change is off and no type touches a number


@dataclass(frozen=True)
class PerturbedSample:
    item_id: str
    type: str
    language: str
    original: str
    perturbed: str
    diff: str  # the edits, e.g. "payable→payble; Licensee→Licnesee"


@dataclass(frozen=True)
class PerturbationSet:
    samples: tuple[PerturbedSample, ...]
    content_hash: str  # sha256 over the samples (item, type, language, original, perturbed), in order
    shortfall: tuple[str, ...]  # why fewer than spec.samples were made; empty when all were
    notes: tuple[str, ...]  # types switched off or short of their share, and why


def perturbation_engine_load() -> None:
    """Imports textattack and builds the perturbation types (about 8 s); the first build does it anyway."""
    from . import transforms

    transforms.perturbers_load()


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _weights(*, recipe: Recipe, spec: PerturbationSpec, notes: list[str]) -> dict[str, float]:
    """Type → share, in the recipe's order, without the types that are off."""
    shares = recipe.shares if spec.shares is None else spec.shares
    unknown = sorted(set(shares) - set(recipe.shares))
    if unknown:
        raise ValueError(f"types {unknown} are not in recipe {recipe.name!r} ({', '.join(recipe.shares)})")
    bad = sorted(name for name, share in shares.items() if not (math.isfinite(share) and share >= 0))
    if bad:
        raise ValueError(f"shares must be finite and non-negative: {bad}")
    weights = {name: shares[name] for name in recipe.shares if shares.get(name, 0) > 0}
    if spec.numbers_matter and weights.pop("number_change", None) is not None:
        notes.append("number_change is off: the policy says numbers matter")
    if not weights:
        raise ValueError(f"no perturbation type of recipe {recipe.name!r} has a share")
    return weights


def _type_cycle(*, weights: dict[str, float]) -> Iterator[str]:
    """Smooth weighted round robin: every stretch of the cycle is close to the shares."""
    total = sum(weights.values())
    current = dict.fromkeys(weights, 0.0)
    while True:
        for name, weight in weights.items():
            current[name] += weight
        chosen = max(current, key=current.__getitem__)  # first of equals, in recipe order
        current[chosen] -= total
        yield chosen


def _shown(text: str) -> str:
    """Invisible and control characters as ⟨U+200B⟩, so the diff shows them."""
    return "".join(
        c if c.isprintable() and c not in "\u200b\u200c\u200d" else f"⟨U+{ord(c):04X}⟩" for c in text
    )


def _diff(edits: list[tuple[str, str]]) -> str:
    shown = [f"{_shown(old)}→{_shown(new) or '∅'}" for old, new in edits[:DIFF_EDITS_SHOWN]]
    more = len(edits) - DIFF_EDITS_SHOWN
    return "; ".join(shown) + (f"; … +{more} more" if more > 0 else "")


def _splice(*, item: ItemText, edits: list[tuple[Site, str]]) -> str:
    """The item's text with each site's words replaced; a deleted word takes one space with it."""
    text = item.text
    pieces = []
    cursor = 0
    for site, new in sorted(edits, key=lambda e: e[0].start):
        begin, end = item.spans[site.start][0], item.spans[site.stop - 1][1]
        if not new:
            if begin > cursor and text[begin - 1] == " ":
                begin -= 1
            elif end < len(text) and text[end] == " ":
                end += 1
        pieces.append(text[cursor:begin])
        pieces.append(new)
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


class _Builder:
    """The state of one build: item texts and sites (lazily), spent (item, type) pairs, owed turns."""

    def __init__(self, *, spec: PerturbationSpec, recipe: Recipe, weights: dict[str, float]) -> None:
        from . import transforms

        self.transforms = transforms
        self.perturbers = transforms.perturbers_load().perturbers
        self.seed = spec.seed
        self.rate = recipe.rate
        self.families = {
            language: [name for name in weights if TYPES[name].script in scripts]
            for language, scripts in SCRIPTS_BY_LANGUAGE.items()
        }
        self.cycles = {
            language: _type_cycle(weights={name: weights[name] for name in family})
            for language, family in self.families.items()
            if family
        }
        self.owed: dict[str, Counter[str]] = {language: Counter() for language in self.families}
        self.texts: dict[str, ItemText] = {}
        self.sites: dict[tuple[str, str], list[Site]] = {}
        self.spent: set[tuple[str, str]] = set()
        self.made: dict[str, set[str]] = {}

    def _sites(self, *, item_id: str, text: str, ptype: str) -> list[Site]:
        if (item_id, ptype) not in self.sites:
            if item_id not in self.texts:
                self.texts[item_id] = self.transforms.item_text_build(text=text)
            self.sites[item_id, ptype] = self.perturbers[ptype].sites(item=self.texts[item_id])
        return self.sites[item_id, ptype]

    def _attempt(self, *, item: Item, ptype: str, rnd: int) -> PerturbedSample | None:
        """A new sample of `ptype` on the item, or None (and the type is spent on the item)."""
        item_id, text, language = item
        if (item_id, ptype) in self.spent:
            return None
        sites = self._sites(item_id=item_id, text=text, ptype=ptype)
        made = self.made.setdefault(item_id, set())
        for attempt in range(ATTEMPTS if sites else 0):
            rng = _rng(self.seed, item_id, rnd, ptype, attempt)
            edits = self._edits(item_id=item_id, ptype=ptype, sites=sites, rng=rng)
            perturbed = _splice(item=self.texts[item_id], edits=edits)
            if edits and perturbed != text and perturbed not in made:
                made.add(perturbed)
                return PerturbedSample(
                    item_id=item_id,
                    type=ptype,
                    language=language,
                    original=text,
                    perturbed=perturbed,
                    diff=_diff([(site.phrase, new) for site, new in edits]),
                )
        self.spent.add((item_id, ptype))
        return None

    def _edits(
        self, *, item_id: str, ptype: str, sites: list[Site], rng: random.Random
    ) -> list[tuple[Site, str]]:
        """About `rate` of the item's words, at sites drawn in a seeded order, one candidate each."""
        wanted = max(1, math.ceil(self.rate * len(self.texts[item_id].words)))
        edits: list[tuple[Site, str]] = []
        taken: set[int] = set()
        for site in rng.sample(sites, len(sites)):
            if len(edits) == wanted:
                break
            if taken.isdisjoint(range(site.start, site.stop)):
                new = self.perturbers[ptype].replacement(phrase=site.phrase, rng=rng)
                if new is not None:
                    edits.append((site, new))
                    taken.update(range(site.start, site.stop))
        return sorted(edits, key=lambda edit: edit[0].start)

    def slot_fill(self, *, item: Item, rnd: int) -> PerturbedSample | None:
        """One sample for the item: a type owed a turn first, then the next of its language's cycle;
        None when every type is spent on the item."""
        language = item[2]
        family, owed = self.families[language], self.owed[language]
        for ptype in [name for name in family if owed[name] > 0]:
            sample = self._attempt(item=item, ptype=ptype, rnd=rnd)
            if sample is not None:
                owed[ptype] -= 1
                return sample
        for _ in family:
            ptype = next(self.cycles[language])
            sample = self._attempt(item=item, ptype=ptype, rnd=rnd)
            if sample is not None:
                return sample
            owed[ptype] += 1  # it will take the next item it can edit
        for ptype in family:  # types the cycle did not reach this time
            sample = self._attempt(item=item, ptype=ptype, rnd=rnd)
            if sample is not None:
                return sample
        return None


def _items_checked(*, items: Sequence[Item]) -> list[Item]:
    ordered = sorted((str(item_id), text, language) for item_id, text, language in items)
    duplicated = sorted(k for k, n in Counter(item[0] for item in ordered).items() if n > 1)
    if duplicated:
        raise ValueError(f"item ids must be unique; repeated: {duplicated[:5]}")
    unknown = sorted({item[2] for item in ordered} - set(SCRIPTS_BY_LANGUAGE))
    if unknown:
        raise ValueError(f"item languages must be one of {sorted(SCRIPTS_BY_LANGUAGE)}; got {unknown}")
    return ordered


def _content_hash(*, samples: Sequence[PerturbedSample]) -> str:
    digest = hashlib.sha256(HASH_FORMAT.encode())
    for s in samples:
        row = [s.item_id, s.type, s.language, s.original, s.perturbed]
        digest.update(json.dumps(row, ensure_ascii=False).encode() + b"\n")
    return digest.hexdigest()


def perturbation_set_build(*, items: Sequence[Item], spec: PerturbationSpec) -> PerturbationSet:
    """`spec.samples` perturbed samples of `items` ((item_id, text, language), language "en", "zh" or
    "mixed"), spread evenly over the items and the recipe's types. Same items and spec → same set.

    Raises UnknownRecipeError (unknown recipe), PerturbationResourceError (a TextAttack recipe that
    needs downloads) or ValueError (bad shares, items or sample count)."""
    recipe = recipe_get(name=spec.recipe)
    if spec.samples < 1:
        raise ValueError(f"samples must be at least 1, got {spec.samples}")
    notes: list[str] = []
    weights = _weights(recipe=recipe, spec=spec, notes=notes)
    order = _items_checked(items=items)
    _rng(spec.seed, "items").shuffle(order)
    builder = _Builder(spec=spec, recipe=recipe, weights=weights)
    uncovered = Counter(language for _, _, language in order if not builder.families[language])
    for language, count in sorted(uncovered.items()):
        notes.append(f"{count} {language} items not perturbed: no type with a share applies to {language}")
    active = [item for item in order if builder.families[item[2]]]
    samples: list[PerturbedSample] = []
    rnd = 0
    while active and len(samples) < spec.samples:
        still_active = []
        for item in active:
            if len(samples) == spec.samples:
                break
            sample = builder.slot_fill(item=item, rnd=rnd)
            if sample is not None:
                samples.append(sample)
                still_active.append(item)
        active, rnd = still_active, rnd + 1
    for language, family in builder.families.items():
        for ptype in family:
            count = builder.owed[language][ptype]
            if count > 0:
                notes.append(
                    f"{ptype}: {count} sample(s) short of its share on {language} items "
                    "(too few items it can edit); other types took those turns"
                )
    shortfall = []
    if len(samples) < spec.samples:
        shortfall.append(
            f"made {len(samples)} of {spec.samples} samples: every type of {recipe.name!r} ran out of "
            f"distinct perturbations on all {len(order) - sum(uncovered.values())} perturbable items"
        )
        shortfall.extend(note for note in notes if "not perturbed" in note)
    return PerturbationSet(
        samples=tuple(samples),
        content_hash=_content_hash(samples=samples),
        shortfall=tuple(shortfall),
        notes=tuple(notes),
    )
