"""The simulated users' voices: plain is the suite's text; casual wraps it as people ask in a chat box."""

import random

import pytest

from engines.demo.dataset import CLAUSE_TYPES, demo_dataset_build
from engines.demo.voice import _REQUESTS, voice_apply

ITEMS = demo_dataset_build(seed=0).eval


def test_plain_is_the_suite_text_and_casual_is_seeded():
    item = ITEMS[0]
    assert (
        voice_apply(text=item.input, language=item.language, voice="plain", rng=random.Random(1))
        == item.input
    )
    casual = [
        voice_apply(text=i.input, language=i.language, voice="casual", rng=random.Random(7)) for i in ITEMS
    ]
    again = [
        voice_apply(text=i.input, language=i.language, voice="casual", rng=random.Random(7)) for i in ITEMS
    ]
    assert casual == again and all(c != i.input for c, i in zip(casual, ITEMS, strict=True))
    with pytest.raises(ValueError, match="voice must be one of"):
        voice_apply(text="x", language="en", voice="shouting", rng=random.Random(0))


def test_chinese_clauses_are_asked_in_chinese_word_for_word_and_english_ones_with_a_few_slips():
    rng = random.Random(3)
    for item in ITEMS:
        asked = voice_apply(text=item.input, language=item.language, voice="casual", rng=rng)
        if item.language == "zh":
            assert item.input in asked
            continue
        # English: the clause's words are there, a few lower-cased or with one letter slipped.
        words, said = item.input.lower().split(" "), asked.lower()
        kept = sum(word in said for word in words)
        assert kept >= 0.8 * len(words), (item.input, asked)


def test_no_request_names_a_clause_type():
    names = {label.replace("_", " ") for label in CLAUSE_TYPES} | set(CLAUSE_TYPES)
    for requests in _REQUESTS.values():
        for request in requests:
            assert not any(name in request.lower() for name in names), request
