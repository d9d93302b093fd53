"""Hard-label (decision-based) word-level attacks: the recipe's swaps and constraints (`word_attack`),
searched with nothing but the model's answer, for endpoints that give a label and no class scores.
Worker-only (no Django); imports textattack.

The search follows Maheshwary, Maheshwary and Pudi, "Generating Natural Language Attacks in a Hard Label
Black Box Setting", AAAI 2021 (arXiv:2012.14956), for many items in lock step:

1. initialisation: the item's swappable words in a random order (seeded per item), each swapped for a
   random candidate of the recipe (`word_attack._components`: the same transformation, stopwords and
   embedding / synonym constraints as the score-based search), the answer asked after each swap, until
   it is no longer the true label. The paper stops at 30 % of the words; here all swappable words may
   be tried (clauses are short), and the search-space reduction below takes back what was not needed.
   A pass that never flips is followed by another with fresh draws, up to `passes`. At most
   `INIT_TRIES` random candidates are tried at a word (one that breaks a window is not asked about);
2. search-space reduction: the swaps, the one whose window is least similar to the original first, are
   undone one at a time, each kept undone when the answer stays wrong;
3. refinement: at each remaining swap, the other candidates whose window is more similar to the original
   than the current word's are asked (most similar first, at most `refine_candidates`), and the most
   similar one that keeps the answer wrong replaces it. The paper's genetic optimisation is this greedy
   pass here: it needs fewer queries, and the budget is what a gate pays for.

Every swap of a final text passes the recipe's window constraint against the original text: the
multilingual USE's angular similarity of the window around the swap (`recipe.window` words) at least
`recipe.sentence_threshold` (stricter than the score-based search, which compares each swap with the text
before it; a hard-label text has all its swaps at once). Queries are counted per item (each distinct text
the item asks about, its clean text included), never more than `query_budget`; at each step all items'
texts go to the labeler in one call, deduplicated. An item's search depends on its text, truth and the
seed only, not on the other items in the call, so a resumed attack gives the same texts.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .word_attack import WORD_RECIPES, ItemAttack, Resources, _components, _diff, resources_load

if TYPE_CHECKING:
    from textattack.shared import AttackedText

# texts -> the answer's label per text, as an index into the caller's labels (one outside them, e.g. an
# answer with no label, is any index no true label has, such as -1).
INIT_TRIES = 3  # random candidates tried at a word in the initialisation (those breaking a window skipped)

Labeler = Callable[[Sequence[str]], Sequence[int]]


@dataclass
class _Item:
    index: int
    original: AttackedText
    truth: int
    budget: int
    rng: np.random.Generator
    candidates: dict[int, list[str]]  # word index -> the recipe's replacements there
    swaps: dict[int, str] = field(default_factory=dict)  # the current text's replaced words
    asked: dict[str, int] = field(default_factory=dict)  # text -> label, each text asked once
    label: int = -1  # the current text's answer
    phase: str = "init"  # init, reduce, refine, done
    queue: list[int] = field(default_factory=list)  # word indices still to visit in this phase
    passes_left: int = 0
    skipped: bool = False
    pending: list[tuple[str, dict[int, str]]] = field(default_factory=list)  # asked this step
    texts: dict[tuple[tuple[int, str], ...], AttackedText] = field(default_factory=dict)

    @property
    def queries(self) -> int:
        return len(self.asked)

    @property
    def adversarial(self) -> bool:
        return self.label != self.truth

    def text(self, swaps: dict[int, str]) -> AttackedText:
        """The original with `swaps` (built once per set of swaps: TextAttack re-splits each text)."""
        key = tuple(sorted(swaps.items()))
        if key not in self.texts:
            if not swaps:
                self.texts[key] = self.original
            else:
                indices = sorted(swaps)
                self.texts[key] = self.original.replace_words_at_indices(indices, [swaps[i] for i in indices])
        return self.texts[key]


def _item_rng(seed: int, text: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}\x1f{text}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


class _Windows:
    """Angular similarity of the window around a word, original against perturbed (the recipe's
    constraint), with the encoder's cache."""

    def __init__(self, resources: Resources, window: int, threshold: float, timings: dict[str, float]):
        self.resources, self.window, self.threshold, self.timings = resources, window, threshold, timings

    def similarities(self, item: _Item, swaps: dict[int, str], at: Sequence[int]) -> list[float]:
        """The similarity at each of the word indices `at`, in one encoder call."""
        perturbed = item.text(swaps)
        inside = [i for i in at if i < perturbed.num_words]
        windows = []
        for i in inside:
            windows += [
                item.original.text_window_around_index(i, self.window),
                perturbed.text_window_around_index(i, self.window),
            ]
        mark = time.perf_counter()
        encoded = self.resources.encoder.encode(windows) if windows else np.zeros((0, 1))
        self.timings["encoder"] += time.perf_counter() - mark
        found = {}
        for k, i in enumerate(inside):
            a, b = encoded[2 * k], encoded[2 * k + 1]
            cos = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
            found[i] = 1.0 - math.acos(max(-1.0, min(1.0, cos))) / math.pi
        return [found.get(i, -math.inf) for i in at]

    def similarity(self, item: _Item, swaps: dict[int, str], at: int) -> float:
        return self.similarities(item, swaps, [at])[0]

    def valid(self, item: _Item, swaps: dict[int, str]) -> bool:
        return all(s >= self.threshold for s in self.similarities(item, swaps, sorted(swaps)))


def hard_label_candidates(
    *, original: AttackedText, components: tuple[Any, list[Any], list[Any]]
) -> dict[int, list[str]]:
    """The recipe's replacements for each word of `original` it may swap (`components`: the recipe's
    `word_attack._components`): its transformation's words, kept where a one-word swap passes the
    recipe's constraints other than the window encoder (which the search checks on its multi-swap
    texts)."""
    transformation, pre, constraints = components
    out: dict[int, list[str]] = {}
    for i in transformation(original, pre_transformation_constraints=pre, return_indices=True):
        word = original.words[i]
        kept = []
        for replacement in dict.fromkeys(transformation._get_replacement_words(word)):
            if replacement == word:
                continue
            single = original.replace_word_at_index(i, replacement)
            single.attack_attrs["last_transformation"] = transformation  # as the transformation sets it
            if all(len(c.call_many([single], original)) == 1 for c in constraints[:-1]):
                kept.append(replacement)
        if kept:
            out[int(i)] = sorted(kept)
    return out


def hard_label_attack_run(
    *,
    labeler: Labeler,
    items: Sequence[tuple[str, int]],
    recipe: str,
    query_budget: int = 500,
    seed: int = 0,
    passes: int = 2,
    refine_candidates: int = 5,
    on_done: Callable[[int], None] | None = None,
) -> tuple[list[ItemAttack], dict[str, float]]:
    """Attack every (text, true label index) with `recipe`'s swaps, reading only `labeler`'s answers (see
    the module's docstring); returns each item's attack (`queries`: the texts it asked about) and the
    seconds spent in the labeler, the sentence encoder and the rest. `on_done` hears how many more items
    finished after each step."""
    from textattack.shared import AttackedText as Text

    started = time.perf_counter()
    spec = WORD_RECIPES[recipe]
    timings = {"model": 0.0, "encoder": 0.0}
    resources = resources_load()
    components = _components(spec, resources)
    windows = _Windows(resources, spec.window, spec.sentence_threshold, timings)
    states = []
    for i, (text, truth) in enumerate(items):
        original = Text(text)
        states.append(
            _Item(
                index=i,
                original=original,
                truth=truth,
                budget=query_budget,
                rng=_item_rng(seed, text),
                candidates={},
                passes_left=passes,
            )
        )
        states[-1].pending = [(text, {})]
    _ask(labeler, states, timings)
    for state in states:
        state.label = state.asked.get(state.original.text, state.truth)
        if state.adversarial:
            state.skipped, state.phase = True, "done"
        else:
            state.candidates = hard_label_candidates(original=state.original, components=components)
            _init_start(state)
    told = 0
    while True:
        finished = sum(s.phase == "done" for s in states)
        if on_done is not None and finished > told:
            on_done(finished - told)
            told = finished
        active = [s for s in states if s.phase != "done"]
        if not active:
            break
        for state in active:
            _propose(state, windows, refine_candidates)
        _ask(labeler, [s for s in active if s.pending], timings)
        for state in active:
            _accept(state, windows)
    attacks = []
    for state in states:
        final = state.text(state.swaps)
        status = "skipped" if state.skipped else "succeeded" if state.adversarial else "failed"
        attacks.append(
            ItemAttack(
                status=status,
                original=state.original.text,
                perturbed=final.text,
                label_before=state.label if state.skipped else state.truth,
                label_after=state.label,
                queries=state.queries,
                words_changed=len(state.swaps),
                diff=_diff(state.original, final) if state.swaps else "",
            )
        )
    timings["search"] = time.perf_counter() - started - timings["model"] - timings["encoder"]
    return attacks, timings


def _ask(labeler: Labeler, states: list[_Item], timings: dict[str, float]) -> None:
    """One labeler call for every state's pending texts, each distinct text once; each state counts the
    texts it asked (within its budget: `_propose` never proposes more)."""
    texts = list(dict.fromkeys(t for s in states for t, _ in s.pending if t not in s.asked))
    if not texts:
        return
    mark = time.perf_counter()
    labels = dict(zip(texts, (int(x) for x in labeler(texts)), strict=True))
    timings["model"] += time.perf_counter() - mark
    for state in states:
        for text, _ in state.pending:
            state.asked.setdefault(text, labels[text])


def _init_start(state: _Item) -> None:
    """A fresh initialisation pass: no swaps, the swappable words in a new random order."""
    state.swaps = {}
    state.label = state.truth
    order = sorted(state.candidates)
    state.queue = [order[k] for k in state.rng.permutation(len(order))]
    state.passes_left -= 1
    state.phase = "init" if state.queue else "done"


def _room(state: _Item) -> int:
    return state.budget - state.queries


def _propose(state: _Item, windows: _Windows, refine_candidates: int) -> None:
    """The texts this state asks about at this step (none when it has no budget or nothing left to
    try: then it moves on or ends)."""
    state.pending = []
    while state.phase != "done" and not state.pending:
        if _room(state) <= 0:  # the budget is spent: the text stays as it is (valid at every step)
            state.phase = "done"
            return
        if not state.queue:
            _phase_next(state, windows)
            continue
        at = state.queue.pop(0)
        if state.phase == "init":
            options = list(state.candidates[at])
            for k in state.rng.permutation(len(options))[:INIT_TRIES]:
                swaps = {**state.swaps, at: options[k]}
                if windows.valid(state, swaps):  # a random candidate that keeps every window
                    state.pending = [(state.text(swaps).text, swaps)]
                    break
        elif state.phase == "reduce":
            swaps = {i: w for i, w in state.swaps.items() if i != at}
            if windows.valid(state, swaps):
                state.pending = [(state.text(swaps).text, swaps)]
        else:  # refine
            now = windows.similarity(state, state.swaps, at)
            better = []
            for word in state.candidates[at]:
                if word == state.swaps[at]:
                    continue
                swaps = {**state.swaps, at: word}
                similarity = windows.similarity(state, swaps, at)
                if similarity > now and windows.valid(state, swaps):
                    better.append((-similarity, word, swaps))
            better.sort(key=lambda b: (b[0], b[1]))
            limit = min(refine_candidates, _room(state))
            state.pending = [(state.text(swaps).text, swaps) for _, _, swaps in better[:limit]]
        # A text asked before (another order reached it) costs nothing: answered at once.
        if state.pending and all(text in state.asked for text, _ in state.pending):
            _accept(state, windows)


def _accept(state: _Item, windows: _Windows) -> None:
    """Take the answers to the state's pending texts: a swap kept when the initialisation flips or the
    text stays adversarial (the first adversarial one, most similar first, in refinement)."""
    pending, state.pending = state.pending, []
    for text, swaps in pending:
        label = state.asked.get(text)
        if label is None:
            continue
        if state.phase == "init":
            state.swaps, state.label = swaps, label
            if state.adversarial:
                _reduce_start(state, windows)
            return
        if label != state.truth:
            state.swaps, state.label = swaps, label
            return


def _reduce_start(state: _Item, windows: _Windows) -> None:
    state.phase = "reduce"
    state.queue = _least_similar_first(state, windows)


def _least_similar_first(state: _Item, windows: _Windows) -> list[int]:
    at = sorted(state.swaps)
    similarity = dict(zip(at, windows.similarities(state, state.swaps, at), strict=True))
    return sorted(at, key=lambda i: (similarity[i], i))


def _phase_next(state: _Item, windows: _Windows) -> None:
    """The state's phase has visited every word: the next phase, another pass, or the end."""
    if state.phase == "init":
        if state.passes_left > 0:
            _init_start(state)
        else:
            state.phase = "done"  # never flipped: the search failed; the last pass's text stays
    elif state.phase == "reduce":
        state.phase = "refine"
        state.queue = _least_similar_first(state, windows)
    else:
        state.phase = "done"


def hard_label_summary(attacks: Sequence[ItemAttack]) -> dict[str, Any]:
    """Queries per attacked (not skipped) item: mean and max."""
    queries = [a.queries for a in attacks if a.status != "skipped"]
    return {
        "queries_mean": sum(queries) / len(queries) if queries else None,
        "queries_max": max(queries) if queries else None,
    }
