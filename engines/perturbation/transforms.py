"""The perturbation types, built on TextAttack transformations, constraints and data. Imports textattack.

Every transformation is built once (`perturbers_load`) with `random_one=False`, so it lists all its
candidates for a word and the engine's own seeded RNG picks one: nothing reads the global `random`
or numpy state. The engine calls `_get_replacement_words` on single words instead of going through
`Transformation.__call__`/`Augmenter`, which build a full `AttackedText` per candidate. The built
objects are shared and take the sample's RNG per call: one build at a time per process (Celery's
prefork workers are fine; threads are not).

Label safety, for every type: stopwords (which hold the negations) are never edited and no edit may
produce one ("note" → "not"); numbers (digits, Chinese numerals) are only touched by
`number_change`; Chinese negation characters (不, 没, 无...) are never replaced nor introduced.
"""

from __future__ import annotations

import functools
import logging
import random
import re
import string
from dataclasses import dataclass
from pathlib import Path

import jieba
from textattack.constraints.pre_transformation import StopwordModification
from textattack.shared import AttackedText
from textattack.shared.data import CHN_STOPWORD, EXTENSION_MAP, MORPHONYM_LS
from textattack.transformations import (
    WordSwap,
    WordSwapChangeNumber,
    WordSwapDeletions,
    WordSwapInvisibleCharacters,
    WordSwapNeighboringCharacterSwap,
    WordSwapQWERTY,
    WordSwapRandomCharacterDeletion,
    WordSwapRandomCharacterInsertion,
    WordSwapRandomCharacterSubstitution,
    WordSwapReorderings,
)
from textattack.transformations.word_swaps.word_swap_change_number import STR_NUM

from .recipes import TYPES, PerturbationType

DATA_DIR = Path(__file__).resolve().parent / "data"

_DIGIT = re.compile(r"\d")
_LATIN_WORD = re.compile(r"[A-Za-z]+(?:['-][A-Za-z]+)*")
_CJK_WORD = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_ZH_NUMERALS = frozenset("零〇一二三四五六七八九十百千万亿两壹贰叁肆伍陆柒捌玖拾佰仟")
_ZH_NEGATIONS = frozenset("不没无非未否勿莫别")
_ZH_PROTECTED = _ZH_NUMERALS | _ZH_NEGATIONS
_EN_NUMBERS = frozenset(STR_NUM) - {"and", "point"}
_ARTICLES = frozenset({"a", "an", "the", "An", "The"})  # not "A": "Schedule A" names a document

MIN_LATIN_LENGTH = 4  # typos in shorter words mostly make another word


def _is_latin(word: str) -> bool:
    return _LATIN_WORD.fullmatch(word) is not None


def _is_cjk(word: str) -> bool:
    return _CJK_WORD.fullmatch(word) is not None


class _CaselessStopwordModification(StopwordModification):
    """TextAttack's stopword constraint, compared case-insensitively ("Not" is a stopword too)."""

    def _get_modifiable_indices(self, current_text: AttackedText) -> set[int]:
        return {i for i, word in enumerate(current_text.words) if word.lower() not in self.stopwords}


@dataclass(frozen=True)
class ItemText:
    """One item's text cut into words the TextAttack way, with each word's character span."""

    text: str
    words: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    modifiable: frozenset[int]  # words that are neither English nor Chinese stopwords


@dataclass(frozen=True)
class Site:
    """Words [start, stop) that one edit replaces; `phrase` is their text as it stands."""

    start: int
    stop: int
    phrase: str


def item_text_build(*, text: str) -> ItemText:
    attacked = AttackedText(text)
    words = tuple(attacked.words)
    spans = []
    cursor = 0
    for word in words:  # words are substrings, in order (as AttackedText itself assumes)
        begin = text.index(word, cursor)
        cursor = begin + len(word)
        spans.append((begin, cursor))
    loaded = perturbers_load()
    english = loaded.english_stopwords(attacked, loaded.probe)
    chinese = loaded.chinese_stopwords(attacked, loaded.probe)
    modifiable = frozenset(
        i
        for i, word in enumerate(words)
        if (i in english and _is_latin(word)) or (i in chinese and _is_cjk(word))
    )
    return ItemText(text=text, words=words, spans=tuple(spans), modifiable=modifiable)


class _SeededLetters:
    """Random letters come from the sample's RNG (set before each call), not the global `random`."""

    rng: random.Random
    letters_to_insert: str

    def _get_random_letter(self) -> str:
        return self.rng.choice(self.letters_to_insert)


class _CharInsertion(_SeededLetters, WordSwapRandomCharacterInsertion):
    pass


class _CharSubstitution(_SeededLetters, WordSwapRandomCharacterSubstitution):
    pass


class _NumberChange(WordSwapChangeNumber):
    """TextAttack's number change (same range: 1 to twice the number) drawn from the sample's RNG."""

    rng: random.Random

    def _alter_number(self, num: float) -> list[int]:
        change = abs(int(num * self.max_change)) + 1
        low, high = int(max(num - change, 1)), int(num + change)
        return [self.rng.randrange(low, high) for _ in range(self.n)] if low < high else []


class _CharacterTableSwap(WordSwap):
    """Replaces one character of a word by a table entry, never touching or producing `protected`."""

    def __init__(self, *, table: dict[str, tuple[str, ...]], protected: frozenset[str]) -> None:
        super().__init__()
        self.table = table
        self.protected = protected

    def _get_replacement_words(self, word: str) -> list[str]:
        return [
            word[:i] + new + word[i + 1 :]
            for i, char in enumerate(word)
            if char not in self.protected
            for new in self.table.get(char, ())
            if new not in self.protected
        ]


def _morphonym_table() -> dict[str, tuple[str, ...]]:
    """TextAttack's similar-shape groups (MORPHONYM_LS) indexed by character. Its own
    ChineseMorphonymCharacterSwap scans all 504 groups per character, keeps the groups' '' entries
    (deletions) and edits its word in place, so one candidate can carry several changes."""
    table: dict[str, set[str]] = {}
    for group in MORPHONYM_LS:
        chars = [c for c in group if c]
        for char in chars:
            table.setdefault(char, set()).update(c for c in chars if c != char)
    return {char: tuple(sorted(others)) for char, others in sorted(table.items())}


def _tsv_table(*, name: str) -> dict[str, tuple[str, ...]]:
    lines = (DATA_DIR / name).read_text(encoding="utf-8").splitlines()
    return {key: tuple(values) for key, values in (line.split("\t") for line in lines)}


class Perturber:
    """One perturbation type: where it can edit an item (`sites`) and what it writes there (`replacement`)."""

    def __init__(
        self, *, ptype: PerturbationType, transformation: WordSwap | None, stopwords: frozenset[str]
    ) -> None:
        self.type = ptype
        self.transformation = transformation
        self.stopwords = stopwords

    def _word_ok(self, word: str) -> bool:
        latin = _is_latin(word) and len(word) >= MIN_LATIN_LENGTH and word.lower() not in _EN_NUMBERS
        if self.type.script == "latin":
            return latin
        if self.type.script == "cjk":
            return _is_cjk(word)  # the character tables skip numerals and negations themselves
        return latin or (_is_cjk(word) and len(word) >= 2 and not _ZH_PROTECTED.intersection(word))

    def sites(self, *, item: ItemText) -> list[Site]:
        return [
            Site(i, i + 1, item.words[i]) for i in sorted(item.modifiable) if self._word_ok(item.words[i])
        ]

    def candidates(self, *, phrase: str, rng: random.Random) -> list[str]:
        assert self.transformation is not None  # the types without one override this
        self.transformation.rng = rng  # read only by the types that draw letters or numbers
        words: list[str] = self.transformation._get_replacement_words(phrase)  # textattack is untyped
        return words

    def valid(self, *, phrase: str, candidate: str) -> bool:
        # No new stopword ("note" → "not") and no digit (control_delete may insert one).
        new_stopword = candidate.lower() in self.stopwords
        return candidate != phrase and not new_stopword and not _DIGIT.search(candidate)

    def replacement(self, *, phrase: str, rng: random.Random) -> str | None:
        """A valid candidate drawn at random, checking only the ones drawn (some types list thousands)."""
        candidates = self.candidates(phrase=phrase, rng=rng)
        while candidates:
            i = rng.randrange(len(candidates))
            if self.valid(phrase=phrase, candidate=candidates[i]):
                return candidates[i]
            candidates[i] = candidates[-1]
            candidates.pop()
        return None


class _ArticleDelete(Perturber):
    def sites(self, *, item: ItemText) -> list[Site]:
        return [Site(i, i + 1, w) for i, w in enumerate(item.words) if w in _ARTICLES]

    def candidates(self, *, phrase: str, rng: random.Random) -> list[str]:
        return [""]  # as TextAttack's WordDeletion: the word goes, the engine closes up the space

    def valid(self, *, phrase: str, candidate: str) -> bool:
        return True


class _NumberPerturber(Perturber):
    def sites(self, *, item: ItemText) -> list[Site]:
        return [Site(i, i + 1, w) for i, w in enumerate(item.words) if w.isascii() and w.isdigit()]

    def candidates(self, *, phrase: str, rng: random.Random) -> list[str]:
        assert self.transformation is not None
        self.transformation.rng = rng
        return [str(n) for n in self.transformation._get_new_number(phrase)]

    def valid(self, *, phrase: str, candidate: str) -> bool:
        return candidate != phrase


class _Contraction(Perturber):
    """Contracts ("does not" → "doesn't") or expands ("it's" → "it is") with TextAttack's EXTENSION_MAP.
    Upstream WordSwapContract confuses list and word indices, so only the map is used."""

    expand = {short.lower(): long.lower() for short, long in EXTENSION_MAP.items()}
    # Where two short forms share a long one, the first in sorted order wins (it is written last).
    contract = {long.lower(): short.lower() for short, long in sorted(EXTENSION_MAP.items(), reverse=True)}

    def sites(self, *, item: ItemText) -> list[Site]:
        found = []
        words, spans = item.words, item.spans
        for i, word in enumerate(words):
            if not _is_latin(word):
                continue
            if word.lower() in self.expand or word.lower() in self.contract:  # "it's", "cannot"
                found.append(Site(i, i + 1, word))
            pair = f"{word} {words[i + 1]}".lower() if i + 1 < len(words) else ""
            if pair in self.contract and item.text[spans[i][1] : spans[i + 1][0]] == " ":
                found.append(Site(i, i + 2, item.text[spans[i][0] : spans[i + 1][1]]))
        return found

    def candidates(self, *, phrase: str, rng: random.Random) -> list[str]:
        key = phrase.lower()
        new = self.contract.get(key) or self.expand[key]
        return [new[0].upper() + new[1:] if phrase[0].isupper() else new]

    def valid(self, *, phrase: str, candidate: str) -> bool:
        return candidate != phrase  # a contraction is a stopword ("doesn't") by design


@dataclass(frozen=True)
class Loaded:
    perturbers: dict[str, Perturber]
    english_stopwords: StopwordModification
    chinese_stopwords: StopwordModification
    probe: WordSwap  # a word swap, so the stopword constraints apply (they skip other transformations)


@functools.cache
def perturbers_load() -> Loaded:
    """Builds every perturbation type once per process (TextAttack objects, tables, jieba's dictionary)."""
    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    english_stopwords = _CaselessStopwordModification()  # NLTK's "english", shipped in data/nltk_data
    chinese_stopwords = _CaselessStopwordModification(stopwords=CHN_STOPWORD | set(string.punctuation))
    stop_en = frozenset(english_stopwords.stopwords)
    letters = string.ascii_lowercase
    inner = {"random_one": False, "skip_first_char": True, "skip_last_char": True}
    transformations: dict[str, WordSwap | None] = {
        "char_swap": WordSwapNeighboringCharacterSwap(**inner),
        "char_delete": WordSwapRandomCharacterDeletion(**inner),
        "char_insert": _CharInsertion(letters_to_insert=letters, **inner),
        "char_substitute": _CharSubstitution(random_one=False, letters_to_insert=letters),
        "qwerty": WordSwapQWERTY(random_one=False, skip_first_char=True),
        "contraction": None,
        "word_delete": None,
        "homoglyph": _CharacterTableSwap(table=_tsv_table(name="homoglyphs.tsv"), protected=frozenset()),
        "invisible_chars": WordSwapInvisibleCharacters(random_one=False),
        "bidi_reorder": WordSwapReorderings(random_one=False),
        "control_delete": WordSwapDeletions(random_one=False),
        "number_change": _NumberChange(n=3),
        "zh_homophone": _CharacterTableSwap(
            table=_tsv_table(name="chinese_homophones.tsv"), protected=_ZH_PROTECTED
        ),
        "zh_morphonym": _CharacterTableSwap(table=_morphonym_table(), protected=_ZH_PROTECTED),
    }
    kinds = {"contraction": _Contraction, "word_delete": _ArticleDelete, "number_change": _NumberPerturber}
    perturbers = {
        name: kinds.get(name, Perturber)(ptype=TYPES[name], transformation=t, stopwords=stop_en)
        for name, t in transformations.items()
    }
    return Loaded(
        perturbers=perturbers,
        english_stopwords=english_stopwords,
        chinese_stopwords=chinese_stopwords,
        probe=transformations["char_swap"],
    )
