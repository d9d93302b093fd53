"""How a next turn relates to the question and answer before it: features of the trained follow-up
detector (`engines.follow_up.classifier`) that describe the pair rather than the turn alone, so they
carry over to phrasings the labelled set never had. Pure: no Django.

- how much of the turn is already in the question and in the answer: character unigrams and
  trigrams, English words of three letters or more, CJK characters, and content words (jieba's
  segmentation for Chinese, English words less stop words, stemmed), each as the share of the
  turn's own;
- the turn's form: a question (English wh- or auxiliary opening, Chinese question particles), in
  the first person ("I", "my", "我"), continuing the previous turn ("and", "but", "那", "但"),
  saying something still fails ("still", "not", "还是", "没"), numbers and whether they come from
  the question or answer, what is left of it once acknowledgements are taken out, whether it says
  the matter is settled ("works now", "sorted", "搞定", "到账了"), an exclamation mark.

MiniLM's cosine cannot tell Chinese turns apart (it sees them mostly as [UNK]); word overlaps by
jieba can, and they cost a few microseconds a turn once its dictionary is loaded (about 1 s, once
per process).
"""

from __future__ import annotations

import functools
import logging
import math
import re

from engines.follow_up.detector import _CJK, _LATIN_WORD, _PATTERNS, TurnPair, _normalise

# Function words that say nothing about the matter.
_ZH_STOP = frozenset(
    "可以 什么 怎么 一个 这个 那个 如果 是不是 没有 还是 就是 我们 你们 他们 因为 所以 但是 然后 现在 需要 "  # noqa: SIM905
    "一般 一下 的话 这样 那么 还有 或者 已经 自己 不是 时候 怎么办 多少 为什么".split()
)
_ZH_QUESTION = re.compile(
    r"吗|呢|什么|怎么|咋|哪|多少|几|能不能|是不是|要不要|有没有|可不可以|会不会|算不算|为啥|为什么"
)
_EN_QUESTION = re.compile(
    r"^\W*(what|how|why|when|where|which|who|whose|can|could|is|are|do|does|did|will|would|should|shall|"
    r"may|am)\b"
)
_FIRST_PERSON = re.compile(r"(?<![a-z])(i|i'm|im|my|me|we|we're|our|us|mine)(?![a-z])|我|咱")
_CONTINUES = re.compile(
    r"^\W*(and|but|so|or|also|then|what about|and if|if)\b|^\W*(那|但|可是|还是|所以|如果|要是|可|而且)"
)
_STILL_FAILS = re.compile(
    r"(?<![a-z])(still|not|doesn't|doesnt|didn't|didnt|won't|wont|can't|cant|no|never|again|nothing|same)"
    r"(?![a-z])|还是|没|不|仍然|依然|又"
)
_SETTLED = re.compile(
    r"(?<![a-z])(works now|working now|fixed|sorted|solved|resolved|all good|never mind|nevermind|"
    r"that did it|did the trick|got it working|it worked|worked)(?![a-z])"
    r"|好了|可以了|搞定|没事了|解决了|成功了|到账了|找到了|收到了|弄好了|弄完了|办好了|改好了|行了"
)
_DIGITS = re.compile(r"\d+")
_EN_SUFFIXES = ("ing", "ed", "es", "s")


@functools.cache
def _en_stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def _letters(text: str) -> str:
    return "".join(ch for ch in _normalise(text) if ch.isalnum())


def _grams(text: str, n: int) -> set[str]:
    chars = _letters(text)
    return {chars[i : i + n] for i in range(len(chars) - n + 1)}


def _share(part: set[str] | frozenset[str], whole: set[str] | frozenset[str]) -> float:
    """The share of `part` that is in `whole` (0 for an empty `part`)."""
    return len(part & whole) / len(part) if part else 0.0


def _latin_words(text: str) -> set[str]:
    return {w for w in _LATIN_WORD.findall(_normalise(text)) if len(w) >= 3}


def _stem(word: str) -> str:
    for suffix in _EN_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _en_content(text: str) -> set[str]:
    stop = _en_stop_words()
    return {_stem(w) for w in _LATIN_WORD.findall(_normalise(text)) if w not in stop and len(w) >= 3}


@functools.lru_cache(maxsize=65536)
def _zh_content(text: str) -> frozenset[str]:
    """Chinese content words of `text` by jieba (two characters or more, no function words)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return frozenset(
        w for w in jieba.lcut(_normalise(text)) if len(w) >= 2 and w not in _ZH_STOP and _CJK.search(w)
    )


def _left_after_acknowledgement(text: str) -> float:
    """Words (and CJK characters / 2) left once acknowledgement and move-on markers are removed."""
    rest = _normalise(text)
    for group in ("ack", "move_on"):
        for _, pattern in _PATTERNS[group]:
            rest = pattern.sub(" ", rest)
    return len(_LATIN_WORD.findall(rest)) + len(_CJK.findall(rest)) / 2


def relation_features(pair: TurnPair) -> list[float]:
    """The 22 relation and form features of one pair (the module docstring), in a fixed order."""
    turn, question, answer = pair.next_turn, pair.previous_question, pair.previous_answer
    text = _normalise(turn)
    context = f"{question} {answer}"
    digits = set(_DIGITS.findall(text))
    zh, en = _zh_content(turn), _en_content(turn)
    return [
        _share(_grams(turn, 1), _grams(question, 1)),
        _share(_grams(turn, 1), _grams(answer, 1)),
        _share(_grams(turn, 3), _grams(question, 3)),
        _share(_grams(turn, 3), _grams(answer, 3)),
        _share(_latin_words(turn), _latin_words(question)),
        _share(_latin_words(turn), _latin_words(answer)),
        _share(set(_CJK.findall(turn)), set(_CJK.findall(context))),
        float(bool(_ZH_QUESTION.search(text))),
        float(bool(_EN_QUESTION.search(text))),
        float(bool(_FIRST_PERSON.search(text))),
        float(bool(_CONTINUES.search(text))),
        float(bool(_STILL_FAILS.search(text))),
        float(bool(digits)),
        float(bool(digits & set(_DIGITS.findall(_normalise(context))))),
        math.log1p(_left_after_acknowledgement(turn)),
        float("!" in text),
        _share(zh, _zh_content(question)),
        _share(zh, _zh_content(answer)),
        _share(en, _en_content(question)),
        _share(en, _en_content(answer)),
        float(not (zh or en)),
        float(bool(_SETTLED.search(text))),
    ]
