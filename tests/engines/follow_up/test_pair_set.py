"""The trained detector's labelled set (engines.follow_up.pair_set): what it holds and how it is split."""

from collections import Counter

from engines.follow_up.detector import KINDS, follow_up_set_load
from engines.follow_up.pair_set import _TEMPLATES, SET_PATHS, pair_set_build, second_pass_agreement

# Templates filled only from one context's own slots: shared by both pools, never by two splits.
CONTEXT_ONLY = {"{situation}", "{switch}", "{other}"}


def rows():
    return follow_up_set_load(SET_PATHS["train"]) + follow_up_set_load(SET_PATHS["test"])


def test_the_committed_files_are_what_the_builder_makes():
    def by_id(data):
        return sorted(data, key=lambda r: r["id"])

    assert by_id(rows()) == by_id(pair_set_build())


def test_size_languages_domains_and_labels():
    data = rows()
    assert len(data) >= 2000
    languages = Counter(r["language"] for r in data)
    assert abs(languages["en"] - languages["zh"]) <= len(data) * 0.05
    for language in ("en", "zh"):
        domains = {r["domain"] for r in data if r["language"] == language}
        assert domains == {"contracts", "legal", "customer service", "general"}
        for split in ("train", "test"):
            assert {r["label"] for r in data if r["language"] == language and r["split"] == split} == set(
                KINDS
            )
    share = Counter(r["label"] for r in data)
    assert 0.35 <= share["follow_up"] / len(data) <= 0.45
    outside = [r for r in data if r["gap_seconds"] is not None and r["gap_seconds"] > 600]
    assert len(outside) >= 40 and {r["label"] for r in outside} == {"new"}


def test_split_by_context_and_by_turn_pattern():
    train, test = follow_up_set_load(SET_PATHS["train"]), follow_up_set_load(SET_PATHS["test"])
    assert {r["split"] for r in train} == {"train"} and {r["split"] for r in test} == {"test"}
    contexts = {
        split: {r["previous_question"] for r in part} for split, part in (("train", train), ("test", test))
    }
    everything = contexts["train"] | contexts["test"]
    assert not contexts["train"] & contexts["test"] and 0.2 <= len(contexts["test"]) / len(everything) <= 0.3
    for pools in _TEMPLATES.values():
        assert set(pools[0]) & set(pools[1]) <= CONTEXT_ONLY


def test_the_set_varies_on_purpose():
    turns = [r["next_turn"] for r in rows()]
    follow_ups = [r["next_turn"] for r in rows() if r["label"] == "follow_up"]
    assert any("?" not in t and "？" not in t for t in follow_ups)  # no question mark
    for phrase in ("那如果", "啥意思", "还是没懂", "好滴，弄好了", "下一个问题：", "right now, "):
        assert any(phrase in t for t in turns), phrase
    mixed = [
        t
        for t in turns
        if any("\u4e00" <= ch <= "\u9fff" for ch in t) and any(ch.isascii() and ch.isalpha() for ch in t)
    ]
    assert len(mixed) >= 50


def test_the_second_labelling_pass_agrees():
    """150 pairs relabelled blind by the set's author (a self-agreement): measured 150/150, kappa 1.0."""
    agreement = second_pass_agreement()
    assert agreement["n"] == 150
    assert agreement["kappa"] >= 0.8 and agreement["kappa_follow_up"] >= 0.8
