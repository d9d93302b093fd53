"""The trained detector's labelled set (engines.follow_up.pair_set): what it holds, how it is split,
and how reviewed live turns join it without reaching the test split."""

from collections import Counter

import pytest

from engines.follow_up.detector import KINDS, follow_up_set_load
from engines.follow_up.dialogues import DIALOGUES, _parse
from engines.follow_up.pair_set import (
    _TEMPLATES,
    HAND_WRITTEN,
    REVIEWED,
    SET_PATHS,
    TEMPLATED,
    TEST_FAMILIES,
    dialogue_rows,
    pair_set_build,
    reviewed_rows_join,
    row_source,
    row_weights,
    second_pass_agreement,
)

# Templates filled only from one context's own slots: shared by both pools, never by two splits.
CONTEXT_ONLY = {"{situation}", "{switch}", "{other}"}


def rows():
    return follow_up_set_load(SET_PATHS["train"]) + follow_up_set_load(SET_PATHS["test"])


def test_the_committed_files_are_what_the_builder_makes():
    def by_id(data):
        return sorted(data, key=lambda r: r["id"])

    assert by_id(rows()) == by_id(pair_set_build() + dialogue_rows())


def test_size_languages_domains_and_labels():
    data = rows()
    assert len(data) >= 2900
    languages = Counter(r["language"] for r in data)
    assert abs(languages["en"] - languages["zh"]) <= len(data) * 0.05
    templated = {"contracts", "legal", "customer service", "general"}
    for language in ("en", "zh"):
        domains = {r["domain"] for r in data if r["language"] == language}
        assert templated < domains and len(domains) == 16
        for split in ("train", "test"):
            assert {r["label"] for r in data if r["language"] == language and r["split"] == split} == set(
                KINDS
            )
    share = Counter(r["label"] for r in data)
    assert 0.38 <= share["follow_up"] / len(data) <= 0.46
    outside = [r for r in data if r["gap_seconds"] is not None and r["gap_seconds"] > 600]
    assert len(outside) >= 80 and {r["label"] for r in outside} == {"new"}


def test_the_second_authors_dialogues():
    """103 hand-written contexts in 16 domains, every kind in each language, one turn per line; the
    domains held out as test are test whole."""
    hand = [r for r in rows() if row_source(r) == HAND_WRITTEN]
    assert len(DIALOGUES) == 103 and len(hand) == sum(len(d.turns) for d in DIALOGUES) >= 900
    for language in ("en", "zh"):
        assert {label for d in DIALOGUES if d.language == language for label, _ in d.turns} == set(KINDS)
    by_domain = {}
    for row in hand:
        by_domain.setdefault(row["domain"], set()).add(row["split"])
    assert {d for d, splits in by_domain.items() if splits == {"test"}} == TEST_FAMILIES
    assert all(splits == {"train"} for d, splits in by_domain.items() if d not in TEST_FAMILIES)
    turns = [r["next_turn"] for r in hand]
    for phrase in ("I'm on a Mac", "这个 App", "thx", "搞定", "how do I stop pipes freezing in winter?"):
        assert any(phrase in turn for turn in turns), phrase
    assert row_weights(hand[:1] + rows()[:1]) == [2.0, 1.0] and row_source(rows()[0]) == TEMPLATED
    with pytest.raises(ValueError, match="must start with f:, d: or n:"):
        _parse("# it | en\nQ: q\nA: a\nx: what")


def test_reviewed_turns_join_train_and_take_their_context_out_of_the_test_split():
    train, test = follow_up_set_load(SET_PATHS["train"]), follow_up_set_load(SET_PATHS["test"])
    shared = test[0]["previous_question"]
    reviewed = [
        {**test[0], "id": "exp-1", "next_turn": "and if it happens twice?", "label": "follow_up"},
        {**train[0], "id": "exp-2", "next_turn": "ok thanks", "label": "new"},
    ]
    for row in reviewed:
        row.pop("split"), row.pop("domain"), row.pop("note", None)
    reviewed[0]["previous_question"] = "  " + shared.upper() + " "  # another spacing and case: same context
    joined, kept, moved = reviewed_rows_join(train=train, test=test, reviewed=reviewed, source="exp")
    sharing = [r for r in test if r["previous_question"] == shared]
    assert moved == len(sharing) > 0 and len(kept) == len(test) - moved
    assert not any(r["previous_question"] == shared for r in kept)
    assert {r["id"] for r in joined} >= {"exp-1", "exp-2"} | {r["id"] for r in sharing}
    assert all(r["split"] == "train" for r in joined)
    assert [row_source(r) for r in joined if r["id"].startswith("exp-")] == [REVIEWED, REVIEWED]
    assert {r["domain"] for r in joined if row_source(r) == REVIEWED} == {"live:exp"}


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
    """150 templated pairs relabelled blind by the set's author (a self-agreement): measured 150/150,
    kappa 1.0."""
    agreement = second_pass_agreement()
    assert agreement["n"] == 150
    assert agreement["kappa"] >= 0.8 and agreement["kappa_follow_up"] >= 0.8
