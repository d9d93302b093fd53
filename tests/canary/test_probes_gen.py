import json
import re
from collections import Counter

import pytest
from django.utils import translation

from canary.probes_gen import (
    _CONFLICT_MENTIONS,
    WEAKNESSES,
    ProbeFormatCode,
    ProbeFormatError,
    ProbeSpec,
    demo_probes_build,
    probes_jsonl_parse,
)
from engines.demo.dataset import _CONFLICT_TEMPLATES, _EVAL_TEMPLATES, _TRAIN_TEMPLATES, CLAUSE_TYPES
from engines.input_checks import FieldCode, InputCode
from engines.reasons import ENGLISH, reason, reason_render
from evalhub.wordings import reason_words

CJK = re.compile(r"[\u4e00-\u9fff]")
LATIN = re.compile(r"[A-Za-z]")


@pytest.fixture(scope="module")
def probes() -> list[ProbeSpec]:
    return demo_probes_build(seed=0)


def by_weakness(probes, weakness):
    return [p for p in probes if p.weakness == weakness]


def template_regex(template: str) -> re.Pattern:
    pieces = re.split(r"\{\w+\}", template)
    return re.compile("(?i)" + "(.+?)".join(re.escape(piece) for piece in pieces) + "$")


def matches_any(text: str, templates) -> bool:
    return any(template_regex(t).match(text) for t in templates)


def test_same_seed_same_probes_other_seed_other_probes(probes):
    assert demo_probes_build(seed=0) == probes
    other = demo_probes_build(seed=1)
    assert [p.id for p in other] == [p.id for p in probes]
    same = sum(a.input == b.input for a, b in zip(probes, other, strict=True))
    assert same < 0.05 * len(probes)  # only short conflict clauses with few slot values may repeat
    for weakness in ("long_contract", "mixed_language", "ocr_noise"):
        assert {p.input for p in by_weakness(probes, weakness)}.isdisjoint(
            p.input for p in by_weakness(other, weakness)
        )


def test_counts_labels_and_languages_are_balanced(probes):
    assert len(probes) == 4 * 40
    assert Counter(p.weakness for p in probes) == {w: 40 for w in WEAKNESSES}
    for weakness in WEAKNESSES:
        sub = by_weakness(probes, weakness)
        assert Counter(p.expected_label for p in sub) == {label: 5 for label in CLAUSE_TYPES}
        expected_languages = {"mixed": 40} if weakness == "mixed_language" else {"en": 20, "zh": 20}
        assert Counter(p.language for p in sub) == expected_languages
        if weakness != "mixed_language":  # each label in both languages (3 + 2)
            cells = Counter((p.expected_label, p.language) for p in sub)
            assert sorted(cells.values()) == [2] * 8 + [3] * 8


def test_uneven_sizes_stay_balanced_within_one():
    probes = demo_probes_build(seed=3, per_weakness=13)
    for weakness in WEAKNESSES:
        sub = by_weakness(probes, weakness)
        assert len(sub) == 13
        labels = Counter(p.expected_label for p in sub)
        assert max(labels.values()) - min(labels.values()) <= 1
        languages = Counter(p.language for p in sub)
        assert max(languages.values()) - min(languages.values()) <= 1 or weakness == "mixed_language"
    with pytest.raises(ValueError):
        demo_probes_build(per_weakness=0)


def test_ids_inputs_and_metadata(probes):
    assert len({p.id for p in probes}) == len(probes)
    assert len({p.input for p in probes}) == len(probes)
    assert probes[0].id == "probe-long_contract-en-payment-00"
    for p in probes:
        assert re.fullmatch(rf"probe-{p.weakness}-{p.language}-{p.expected_label}-\d\d", p.id)
        assert p.metadata["synthetic"] is True
        assert json.loads(json.dumps(p.metadata)) == p.metadata


def test_clauses_come_from_eval_templates_not_training(probes):
    for p in probes:
        clause = p.metadata["clause"]
        language = "en" if p.weakness == "mixed_language" else p.language
        source = _CONFLICT_TEMPLATES if p.weakness == "clause_conflict" else _EVAL_TEMPLATES
        assert matches_any(clause, source[p.expected_label][language]), p.id
        assert not matches_any(clause, _TRAIN_TEMPLATES[p.expected_label][language]), p.id


def test_long_contracts_have_at_least_2000_tokens_and_bury_the_clause(probes):
    for p in by_weakness(probes, "long_contract"):
        measured = len(p.input.split()) if p.language == "en" else len(CJK.findall(p.input))
        assert measured == p.metadata["tokens"] >= 2000, p.id
        at = p.input.index(p.metadata["clause"])
        assert 0.1 < at / len(p.input) < 0.9, p.id
        if p.language == "zh":
            assert len(LATIN.findall(p.input)) < 40  # Chinese throughout (amounts may carry "HKD"...)


def test_mixed_probes_hold_an_english_clause_in_a_chinese_contract(probes):
    for p in by_weakness(probes, "mixed_language"):
        clause = p.metadata["clause"]
        assert clause in p.input
        assert CJK.search(p.input) and LATIN.search(p.input)
        assert not CJK.search(clause)
        assert CJK.search(p.input.replace(clause, ""))  # the host contract is Chinese
        assert matches_any(clause, _EVAL_TEMPLATES[p.expected_label]["en"])


def test_ocr_probes_differ_from_their_clean_clause(probes):
    for p in by_weakness(probes, "ocr_noise"):
        assert p.input != p.metadata["clause"]
        assert (CJK.search(p.input) is not None) == (p.language == "zh")


def test_conflict_probes_mention_another_type(probes):
    assert set(_CONFLICT_MENTIONS) == set(CLAUSE_TYPES)
    for label, mentions in _CONFLICT_MENTIONS.items():
        assert len(mentions) == len(_CONFLICT_TEMPLATES[label]["en"]) == len(_CONFLICT_TEMPLATES[label]["zh"])
        assert label not in mentions and set(mentions) <= set(CLAUSE_TYPES)
    for p in by_weakness(probes, "clause_conflict"):
        assert p.input == p.metadata["clause"]
        assert p.metadata["mentions"] in CLAUSE_TYPES and p.metadata["mentions"] != p.expected_label


# JSONL import


def jsonl(*objects) -> bytes:
    return "\n".join(o if isinstance(o, str) else json.dumps(o, ensure_ascii=False) for o in objects).encode()


GOOD = {"id": "p1", "input": "Pay within 30 days.", "expected_label": "payment", "weakness": "long_contract"}


def test_jsonl_happy_path():
    content = jsonl(
        GOOD,
        "",
        {
            "id": "p2",
            "input": "乙方应在三十日内付款。",
            "expected_label": "payment",
            "weakness": "custom",
            "metadata": {"source": "ticket-7"},
        },
        {**GOOD, "id": "p3", "language": "mixed", "metadata": None},
    )
    probes = probes_jsonl_parse(content=b"\xef\xbb\xbf" + content + b"\n")
    assert probes == [
        ProbeSpec("p1", "long_contract", "Pay within 30 days.", "payment", "en", {}),
        ProbeSpec("p2", "custom", "乙方应在三十日内付款。", "payment", "zh", {"source": "ticket-7"}),
        ProbeSpec("p3", "long_contract", "Pay within 30 days.", "payment", "mixed", {}),
    ]


def test_jsonl_round_trips_the_demo_probes():
    demo = demo_probes_build(seed=5, per_weakness=8)
    content = jsonl(*({**p.__dict__} for p in demo))
    assert probes_jsonl_parse(content=content) == demo


KNOWN_KEYS = ["id", "input", "expected_label", "weakness", "language", "metadata"]


@pytest.mark.parametrize(
    ("lines", "line", "field", "note"),
    [
        (
            [GOOD, {k: v for k, v in GOOD.items() if k != "expected_label"}],
            2,
            "expected_label",
            reason(FieldCode.REQUIRED),
        ),
        ([GOOD, "", {k: v for k, v in GOOD.items() if k != "id"}], 3, "id", reason(FieldCode.REQUIRED)),
        ([{**GOOD, "label": "payment"}], 1, "label", reason(FieldCode.UNKNOWN_KEY, known=KNOWN_KEYS)),
        ([GOOD, {**GOOD, "input": "other"}], 2, "id", reason(ProbeFormatCode.DUPLICATE, line=1)),
        ([{**GOOD, "input": "   "}], 1, "input", reason(ProbeFormatCode.EMPTY)),
        ([{**GOOD, "input": ""}], 1, "input", reason(ProbeFormatCode.EMPTY)),
        ([{**GOOD, "input": "x\u0000"}], 1, "input", reason(InputCode.NUL)),
        ([{**GOOD, "expected_label": 3}], 1, "expected_label", reason(FieldCode.STRING)),
        ([{**GOOD, "weakness": None}], 1, "weakness", reason(FieldCode.STRING)),
        ([{**GOOD, "language": ""}], 1, "language", reason(ProbeFormatCode.EMPTY)),
        ([{**GOOD, "metadata": [1]}], 1, "metadata", reason(FieldCode.OBJECT)),
        (
            [json.dumps({**GOOD, "metadata": {"k": "\ud800"}})],  # the escape: a lone surrogate
            1,
            "metadata",
            reason(ProbeFormatCode.AT_PATH, path="metadata.k", problem=reason(InputCode.SURROGATE)),
        ),
        ([GOOD, "[1, 2]"], 2, None, reason(FieldCode.OBJECT)),
        (
            [GOOD, "[" * 70 + "]" * 70],
            2,
            None,
            reason(ProbeFormatCode.UNREADABLE, detail=reason(InputCode.TOO_DEEP, max_depth=64)),
        ),
        (
            ['{"id": "p1", "n": Infinity}'],
            1,
            None,
            reason(ProbeFormatCode.UNREADABLE, detail=reason(InputCode.NOT_JSON, name="Infinity")),
        ),
        ([""], 1, None, reason(ProbeFormatCode.NO_PROBES)),
    ],
)
def test_jsonl_errors_name_line_and_field(lines, line, field, note):
    with pytest.raises(ProbeFormatError) as caught:
        probes_jsonl_parse(content=jsonl(*lines))
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.line, error.field, error.message) == (line, field, note)
    if field:
        assert error.reason == reason(ProbeFormatCode.AT_FIELD, line=line, field=field, problem=note)
    else:
        assert error.reason == reason(ProbeFormatCode.AT_LINE, line=line, problem=note)
    where = f"line {line}.{field}" if field else f"line {line}"
    assert str(error) == f"{where}: {reason_render(note, words=ENGLISH)}"


def test_jsonl_invalid_json_keeps_the_parsers_text():
    with pytest.raises(ProbeFormatError) as caught:
        probes_jsonl_parse(content=jsonl(GOOD, '{"id": "p2",'))
    error = caught.value
    assert (error.line, error.field, error.message.code) == (2, None, ProbeFormatCode.NOT_JSON)
    assert error.message.params == {
        "detail": "Expecting property name enclosed in double quotes",
        "column": 13,
    }
    assert str(error) == "line 2: invalid JSON (Expecting property name enclosed in double quotes, column 13)"


def test_jsonl_error_message_format():
    missing = {k: v for k, v in GOOD.items() if k != "expected_label"}
    with pytest.raises(ProbeFormatError, match=r"^line 3\.expected_label: required$"):
        probes_jsonl_parse(content=jsonl(GOOD, {**GOOD, "id": "p2"}, missing))


def test_jsonl_error_in_chinese():
    with pytest.raises(ProbeFormatError) as caught:
        probes_jsonl_parse(content=jsonl(GOOD, {**GOOD, "input": "other"}))
    with translation.override("zh-hans"):
        assert reason_words(caught.value.reason) == "第 2 行 id：与第 1 行重复"


def test_jsonl_refuses_bad_utf8():
    with pytest.raises(ProbeFormatError, match=r"^line 2: not valid UTF-8") as caught:
        probes_jsonl_parse(content=jsonl(GOOD) + b"\n\xff\xfe\n")
    assert caught.value.message == reason(ProbeFormatCode.NOT_UTF8)
