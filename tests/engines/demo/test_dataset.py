import json
import re
from collections import Counter

from engines.backends.base import language_of
from engines.demo.dataset import (
    _BOILERPLATE,
    ANSWERS,
    CLAUSE_TYPES,
    HARD_TAGS,
    demo_dataset_build,
    demo_suite_jsonl,
)
from registry.suite_format import suite_parse_jsonl

DATASET = demo_dataset_build(seed=0)


def _origin_language(item) -> str:
    # Ids read eval-<label>-<en|zh>-<n>: the language of the cell the item was generated in.
    return item.id.split("-")[-2]


def test_same_seed_gives_identical_data_and_another_seed_differs():
    assert demo_dataset_build(seed=0) == DATASET
    other = demo_dataset_build(seed=1)
    assert other != DATASET
    assert [i.input for i in other.eval] != [i.input for i in DATASET.eval]
    assert [i.input for i in other.train] != [i.input for i in DATASET.train]


def test_labels_and_answers():
    assert len(CLAUSE_TYPES) >= 8
    assert {"payment", "termination", "liability", "confidentiality", "force_majeure"} <= set(CLAUSE_TYPES)
    assert {"governing_law", "liquidated_damages", "deposit"} <= set(CLAUSE_TYPES)
    assert set(ANSWERS) == set(CLAUSE_TYPES)
    for answer in ANSWERS.values():
        assert language_of(answer["en"]) == "en"
        assert language_of(answer["zh"]) == "zh"
    assert {i.label for i in DATASET.train} == {i.label for i in DATASET.eval} == set(CLAUSE_TYPES)


def test_sizes_and_train_is_clean_bilingual_text():
    assert 800 <= len(DATASET.train) <= 1500
    assert len(DATASET.eval) >= 240
    assert {i.tags for i in DATASET.train} == {("plain",)}
    assert Counter(i.language for i in DATASET.train) == {
        "en": len(DATASET.train) // 2,
        "zh": len(DATASET.train) // 2,
    }
    ids = [i.id for i in DATASET.train + DATASET.eval]
    assert len(ids) == len(set(ids))


def test_eval_is_balanced_over_labels_and_languages():
    cells = Counter((i.label, _origin_language(i)) for i in DATASET.eval)
    assert len(cells) == 2 * len(CLAUSE_TYPES)
    assert len(set(cells.values())) == 1
    languages = Counter(i.language for i in DATASET.eval)
    assert languages["en"] > 0.3 * len(DATASET.eval) and languages["zh"] > 0.3 * len(DATASET.eval)
    assert languages["mixed"] == sum("mixed_language" in i.tags for i in DATASET.eval)


def test_eval_tag_counts():
    tags = Counter(tag for i in DATASET.eval for tag in i.tags)
    assert set(tags) == {"plain", *HARD_TAGS}
    assert 0.30 <= tags["plain"] / len(DATASET.eval) <= 0.40
    hard = [tags[t] for t in HARD_TAGS]
    assert min(hard) >= 0.15 * len(DATASET.eval) and max(hard) - min(hard) <= 4
    for tag in HARD_TAGS:  # each hard tag covers both languages and every label
        tagged = [i for i in DATASET.eval if tag in i.tags]
        assert {_origin_language(i) for i in tagged} == {"en", "zh"}
        assert {i.label for i in tagged} == set(CLAUSE_TYPES)


def test_no_train_text_reappears_in_eval():
    train = {i.input for i in DATASET.train}
    assert not train & {i.input for i in DATASET.eval}
    # Not even as a sentence inside a long contract or a mixed-language item.
    for item in DATASET.eval:
        for line in item.input.split("\n"):
            assert line not in train
            assert not any(t in line for t in train if len(t) > 40), item.id
    assert len({i.input for i in DATASET.eval}) == len(DATASET.eval)


def test_references_follow_the_answer_language_rule():
    for item in DATASET.train + DATASET.eval:
        expected = item.language if item.language != "mixed" else language_of(item.input)
        assert item.reference == ANSWERS[item.label][expected], item.id
    chinese = [i for i in DATASET.eval if i.language == "zh"]
    assert chinese and all(language_of(i.input) == "zh" for i in chinese)


def test_long_contracts_bury_the_clause_in_neutral_boilerplate():
    long_items = [i for i in DATASET.eval if "long_contract" in i.tags]
    for item in long_items:
        if item.language == "en":
            assert 300 <= len(item.input.split()) <= 700, item.id
        else:
            assert 450 <= len(item.input) <= 1100, item.id
    # The surrounding sections are not themselves one of the clause types.
    keywords = {
        "en": r"pay|fee|price|invoice|terminat|cancel|liab|indemn|confidential|secre|disclos"
        r"|force majeure|act of god|govern|law\b|court|arbitrat|damages|penalt|deposit|earnest",
        "zh": r"付|价款|款项|费|解除|终止|责任|赔偿|保密|秘密|披露|不可抗力|法律|法院|仲裁|违约|定金",
    }
    for language, sentences in _BOILERPLATE.items():
        for sentence in sentences:
            assert not re.search(keywords[language], sentence.lower()), sentence


def test_mixed_items_contain_both_scripts():
    for item in DATASET.eval:
        if "mixed_language" in item.tags:
            assert item.language == "mixed"
            assert (
                re.search(r"[\u4e00-\u9fff]", item.input)
                and len(re.findall(r"[A-Za-z]{3,}", item.input)) >= 3
            )


def test_ocr_noise_changes_the_text():
    noisy = [i for i in DATASET.eval if "ocr_noise" in i.tags]
    english = " ".join(i.input for i in noisy if i.language == "en")
    assert re.search(r"[a-z][01][a-z]|[a-z]rn|[a-z]cl", english)  # 0/o, 1/l, rn/m, cl/d misreads
    clean = {i.input for i in DATASET.eval if "plain" in i.tags}
    assert not clean & {i.input for i in noisy}


def test_jsonl_is_a_valid_suite():
    text = demo_suite_jsonl(items=DATASET.eval)
    lines = text.splitlines()
    assert len(lines) == len(DATASET.eval)
    first = json.loads(lines[0])
    assert set(first) == {"id", "input", "label", "reference", "language", "tags"}
    parsed = suite_parse_jsonl(text.encode())
    assert [(p.id, p.input, p.label, p.reference, p.language, p.tags) for p in parsed] == [
        (i.id, i.input, i.label, i.reference, i.language, i.tags) for i in DATASET.eval
    ]
