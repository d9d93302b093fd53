"""Suite-vs-live shift: how far the live questions are from the suite's inputs, per language. Pure.

For each language, a bounded seeded sample of each side is compared character by character: every
live question's nearest suite input by normalised Levenshtein distance (edits / length of the longer
text, 0 identical, 1 nothing in common; `rapidfuzz`), and every suite input's nearest live question.
The median of the live side's nearest-neighbour distances is the figure a gate judges: above the bar,
a typical live question has nothing in the suite within that share of edits, so the suite does not look
like the traffic. The live sample's distance to its own other half is the reference spread of the
traffic itself. Beside them, each side's shape: length (median, IQR), the share of mixed-script texts
(Latin and CJK both) and the share with a Latin word outside a vocabulary (a typo's proxy), with
Wilson intervals. See docs/shift.md."""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from engines.backends.base import language_of
from engines.stats.intervals import wilson_interval

SAMPLE = 2000  # texts per side and language, at most
FARTHEST = 10  # live questions least like the suite, listed as examples (distinct texts)
DATA = Path(__file__).resolve().parent / "perturbation" / "data"
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


@dataclass(frozen=True, kw_only=True)
class Share:
    """`count` of `n` texts, their share and its Wilson interval (None without texts)."""

    count: int
    n: int
    share: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True, kw_only=True)
class SideShape:
    """One side's sample: how many texts, their length in characters and the two shares."""

    n: int
    length_median: float | None
    length_q1: float | None
    length_q3: float | None
    mixed_script: Share
    typos: Share


@dataclass(frozen=True, kw_only=True)
class FarQuestion:
    """A live question, its distance to the nearest suite input, and that input."""

    text: str
    distance: float
    nearest: str


@dataclass(frozen=True, kw_only=True)
class LanguageShift:
    """One language's figures. Distances are medians of nearest-neighbour normalised Levenshtein
    distances: live questions to the suite (judged), suite inputs to the live questions, and one half
    of the live sample to the other (the traffic's own spread). None where a side is empty."""

    language: str
    live_total: int
    suite_total: int
    live_to_suite: float | None
    live_to_suite_q1: float | None
    live_to_suite_q3: float | None
    suite_to_live: float | None
    live_to_live: float | None
    live: SideShape
    suite: SideShape
    farthest: list[FarQuestion] = field(default_factory=list)


def texts_by_language(texts: Sequence[str]) -> dict[str, list[str]]:
    """`texts` grouped by script (`engines.backends.base.language_of`: "zh" when CJK characters
    outnumber Latin letters, else "en"), so that both sides of a comparison are grouped alike."""
    grouped: dict[str, list[str]] = {}
    for text in texts:
        grouped.setdefault(language_of(text), []).append(text)
    return grouped


def sample_of(texts: Sequence[str], *, size: int, seed: int) -> list[str]:
    """At most `size` of `texts`, drawn without replacement by `seed` (all of them, in order, when fewer)."""
    if len(texts) <= size:
        return list(texts)
    return random.Random(seed).sample(list(texts), size)


@cache
def shipped_vocabulary() -> frozenset[str]:
    """The English words shipped offline: the WordNet synonym lists and NLTK's English stopwords
    (engines/perturbation/data), lowercased."""
    words: set[str] = set()
    for line in (DATA / "wordnet_synonyms.tsv").read_text(encoding="utf-8").splitlines():
        words.update(part.lower() for part in line.split("\t") if part.isalpha())
    stopwords = DATA / "nltk_data" / "corpora" / "stopwords" / "english"
    words.update(line.strip().lower() for line in stopwords.read_text(encoding="utf-8").splitlines())
    return frozenset(words)


def vocabulary_of(texts: Collection[str]) -> frozenset[str]:
    """The lowercased Latin words of `texts` (a suite's own vocabulary)."""
    return frozenset(word.lower() for text in texts for word in _LATIN_WORD.findall(text))


def mixed_script(text: str) -> bool:
    """Latin letters and CJK characters both in `text`."""
    return bool(_LATIN_WORD.search(text)) and bool(_CJK.search(text))


def has_typo(text: str, *, vocabulary: Collection[str], min_length: int = 3) -> bool:
    """A Latin word of at least `min_length` letters in `text` that `vocabulary` does not have."""
    return any(
        len(word) >= min_length and word.lower() not in vocabulary for word in _LATIN_WORD.findall(text)
    )


def share_of(flags: Sequence[bool], *, confidence: float) -> Share:
    count, n = sum(flags), len(flags)
    if not n:
        return Share(count=0, n=0, share=None, low=None, high=None)
    low, high = wilson_interval(successes=count, n=n, confidence=confidence)
    return Share(count=count, n=n, share=count / n, low=low, high=high)


def side_shape(texts: Sequence[str], *, vocabulary: Collection[str], confidence: float) -> SideShape:
    lengths = [len(text) for text in texts]
    q1 = median = q3 = None
    if len(lengths) >= 2:
        q1, median, q3 = statistics.quantiles(lengths, n=4, method="inclusive")
    elif lengths:
        q1 = median = q3 = float(lengths[0])
    return SideShape(
        n=len(texts),
        length_median=median,
        length_q1=q1,
        length_q3=q3,
        mixed_script=share_of([mixed_script(text) for text in texts], confidence=confidence),
        typos=share_of([has_typo(text, vocabulary=vocabulary) for text in texts], confidence=confidence),
    )


def nearest_distances(
    queries: Sequence[str], choices: Sequence[str], *, workers: int = -1
) -> tuple[np.ndarray, np.ndarray]:
    """For each of `queries`, the normalised Levenshtein distance to its nearest of `choices` and that
    choice's index (`rapidfuzz.process.cdist` on `workers` threads, -1: every core)."""
    if not queries or not choices:
        return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int64)
    matrix = process.cdist(
        queries, choices, scorer=Levenshtein.normalized_distance, dtype=np.float64, workers=workers
    )
    nearest = matrix.argmin(axis=1)
    return matrix[np.arange(len(queries)), nearest], nearest


def _quartiles(values: np.ndarray) -> tuple[float | None, float | None, float | None]:
    if not len(values):
        return None, None, None
    q1, median, q3 = np.quantile(values, [0.25, 0.5, 0.75])
    return float(q1), float(median), float(q3)


def _live_spread(live: Sequence[str], *, workers: int) -> float | None:
    """The median distance of the live sample's first half to its nearest in the second half."""
    half = len(live) // 2
    if half < 1:
        return None
    return _quartiles(nearest_distances(live[:half], live[half:], workers=workers)[0])[1]


def _farthest(live: Sequence[str], distances: np.ndarray) -> list[int]:
    """The indexes of the FARTHEST live questions from the suite, farthest first, each text once."""
    seen: set[str] = set()
    found: list[int] = []
    for i in sorted(range(len(distances)), key=lambda i: (-float(distances[i]), live[i])):
        if live[i] not in seen and len(found) < FARTHEST:
            seen.add(live[i])
            found.append(i)
    return found


def language_shift(
    *,
    language: str,
    live: Sequence[str],
    suite: Sequence[str],
    sample: int = SAMPLE,
    seed: int = 0,
    vocabulary: Collection[str],
    confidence: float = 0.95,
    workers: int = -1,
) -> LanguageShift:
    """One language's figures on at most `sample` texts of each side, drawn by `seed`."""
    live_sample = sample_of(live, size=sample, seed=seed)
    suite_sample = sample_of(suite, size=sample, seed=seed + 1)
    forward, nearest = nearest_distances(live_sample, suite_sample, workers=workers)
    backward, _ = nearest_distances(suite_sample, live_sample, workers=workers)
    q1, median, q3 = _quartiles(forward)
    order = _farthest(live_sample, forward)
    return LanguageShift(
        language=language,
        live_total=len(live),
        suite_total=len(suite),
        live_to_suite=median,
        live_to_suite_q1=q1,
        live_to_suite_q3=q3,
        suite_to_live=_quartiles(backward)[1],
        live_to_live=_live_spread(live_sample, workers=workers),
        live=side_shape(live_sample, vocabulary=vocabulary, confidence=confidence),
        suite=side_shape(suite_sample, vocabulary=vocabulary, confidence=confidence),
        farthest=[
            FarQuestion(
                text=live_sample[i], distance=float(forward[i]), nearest=suite_sample[int(nearest[i])]
            )
            for i in order
        ],
    )


def shift_measure(
    *,
    live: Mapping[str, Sequence[str]],
    suite: Mapping[str, Sequence[str]],
    sample: int = SAMPLE,
    seed: int = 0,
    vocabulary: Collection[str] | None = None,
    confidence: float = 0.95,
    workers: int = -1,
) -> list[LanguageShift]:
    """Every language either side has (texts by language, `texts_by_language`), sorted. The typo
    share counts words outside `vocabulary` (default: the shipped English words and the suite's own)."""
    if vocabulary is None:
        vocabulary = shipped_vocabulary() | vocabulary_of([t for texts in suite.values() for t in texts])
    return [
        language_shift(
            language=language,
            live=live.get(language, ()),
            suite=suite.get(language, ()),
            sample=sample,
            seed=seed,
            vocabulary=vocabulary,
            confidence=confidence,
            workers=workers,
        )
        for language in sorted({*live, *suite})
    ]
