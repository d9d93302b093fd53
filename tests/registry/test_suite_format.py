import json

import pytest
from django.utils import translation

from engines.input_checks import FieldCode, InputCode
from engines.reasons import ENGLISH, reason, reason_render
from evalhub.wordings import reason_words
from registry.suite_format import (
    ITEM_FIELDS,
    SuiteFormatCode,
    SuiteFormatError,
    suite_content_hash,
    suite_parse_csv,
    suite_parse_jsonl,
    suite_parse_records,
)


def jsonl(*records) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records).encode()


def issues_of(call, content):
    return set(notes_of(call, content))


def notes_of(call, content):
    """(where, field) -> the issue's note (a reason), for every issue of a refused suite."""
    with pytest.raises(SuiteFormatError) as caught:
        call(content)
    notes = {(i.where, i.field): i.message for i in caught.value.issues}
    assert len(notes) == len(caught.value.issues)
    return notes


def test_parses_jsonl_with_defaults():
    items = suite_parse_jsonl(
        jsonl(
            {"input": "Pay within 30 days.", "label": "payment"},
            {"id": "x", "input": "定金", "reference": "r", "tags": ["a"]},
        )
    )
    assert [i.id for i in items] == ["1", "x"]
    assert items[1].tags == ("a",) and items[0].label == "payment"


def test_broken_line_and_fields_are_named():
    content = jsonl(
        {"input": "ok", "label": "payment"},
        '{"input": "broken",',
        {"input": "x", "label": "a", "colour": "red"},
        {"label": "a"},
        {"input": "y"},
        {"input": "z", "label": "a", "tags": "not-a-list"},
    )
    notes = notes_of(suite_parse_jsonl, content)
    assert set(notes) == {
        ("line 2", ""),
        ("line 3", "colour"),
        ("line 4", "input"),
        ("line 5", "label"),
        ("line 6", "tags"),
    }
    assert notes[("line 2", "")].code == SuiteFormatCode.NOT_JSON
    assert set(notes[("line 2", "")].params) == {"detail", "column"}
    assert notes[("line 3", "colour")] == reason(FieldCode.UNKNOWN_KEY, known=list(ITEM_FIELDS))
    assert notes[("line 4", "input")] == reason(FieldCode.REQUIRED)
    assert notes[("line 5", "label")] == reason(SuiteFormatCode.LABEL_OR_REFERENCE)
    assert notes[("line 6", "tags")] == reason(SuiteFormatCode.TAGS)


def test_duplicate_ids_are_refused():
    content = jsonl({"id": "a", "input": "x", "label": "l"}, {"id": "a", "input": "y", "label": "l"})
    assert notes_of(suite_parse_jsonl, content) == {
        ("line 2", "id"): reason(SuiteFormatCode.DUPLICATE_ID, id="a", first="line 1")
    }


def test_empty_and_non_utf8_files():
    assert notes_of(suite_parse_jsonl, b"\n\n") == {("file", ""): reason(SuiteFormatCode.NO_ITEMS)}
    for parse in (suite_parse_jsonl, suite_parse_csv):
        (note,) = notes_of(parse, b"\xff\xfe{").values()
        assert note.code == SuiteFormatCode.NOT_UTF8
        assert "can't decode byte 0xff" in note.params["detail"]  # the decoder's own text


def test_item_fields_notes():
    def note(**record):
        (found,) = notes_of(suite_parse_records, [record]).items()
        return found

    assert note(input=3, label="a") == (("items[0]", "input"), reason(FieldCode.STRING))
    assert note(input="   ", label="a") == (("items[0]", "input"), reason(SuiteFormatCode.EMPTY))
    assert note(input="x\u0000", label="a") == (("items[0]", "input"), reason(InputCode.NUL))
    assert note(input="x", label="a", language="english-ish") == (
        ("items[0]", "language"),
        reason(SuiteFormatCode.LANGUAGE_TOO_LONG, limit=10),
    )
    assert note(input="x", label="a", tags=["ok", "\ud800"]) == (
        ("items[0]", "tags"),
        reason(SuiteFormatCode.EACH_TAG, problem=reason(InputCode.SURROGATE)),
    )
    assert note(input="x", label="a", metadata=[1]) == (("items[0]", "metadata"), reason(FieldCode.OBJECT))
    assert note(input="x", label="a", metadata={"k": ["a\u0000"]}) == (
        ("items[0]", "metadata"),
        reason(SuiteFormatCode.AT_PATH, path="metadata.k[0]", problem=reason(InputCode.NUL)),
    )


def test_jsonl_lines_too_deep_or_not_finite():
    deep = "[" * 70 + "]" * 70
    notes = notes_of(suite_parse_jsonl, jsonl('{"input": "x", "metadata": {"k": NaN}}', deep))
    assert notes == {
        ("line 1", ""): reason(InputCode.UNREADABLE, detail=reason(InputCode.NOT_JSON, name="NaN")),
        ("line 2", ""): reason(InputCode.UNREADABLE, detail=reason(InputCode.TOO_DEEP, max_depth=64)),
    }


def test_csv_with_tags_and_metadata():
    content = b'id,input,label,tags,metadata\nc1,"Pay, now",payment,a|b,"{""k"": 1}"\n'
    (item,) = suite_parse_csv(content)
    assert (item.id, item.input, item.tags, item.metadata) == ("c1", "Pay, now", ("a", "b"), {"k": 1})
    assert notes_of(suite_parse_csv, b"input,label,extra\nx,a,1\n") == {
        ("line 2", "extra"): reason(FieldCode.UNKNOWN_KEY, known=list(ITEM_FIELDS))
    }


def test_csv_notes():
    assert notes_of(suite_parse_csv, b"input,label\nx,a,1\n") == {
        ("line 2", ""): reason(SuiteFormatCode.EXTRA_CELLS)
    }
    (note,) = notes_of(suite_parse_csv, b'input,label,metadata\nx,a,"{oops"\n').items()
    assert note[0] == ("line 2", "metadata") and note[1].code == SuiteFormatCode.METADATA_JSON
    assert note[1].params["detail"].startswith("Expecting property name")  # the parser's own text
    huge = b'input,label\nx,"' + b"a" * 200_000 + b'"\n'
    (note,) = notes_of(suite_parse_csv, huge).items()
    assert note[0] == ("line 2", "") and note[1].code == SuiteFormatCode.NOT_CSV
    assert "field larger than field limit" in note[1].params["detail"]


def test_records_must_be_a_list_of_objects():
    assert notes_of(suite_parse_records, {"input": "x"}) == {
        ("items", ""): reason(SuiteFormatCode.NOT_A_LIST)
    }
    assert notes_of(suite_parse_records, [{"input": "x", "label": "a"}, 3]) == {
        ("items[1]", ""): reason(FieldCode.OBJECT)
    }


def test_the_error_sums_up_its_problems_in_english_and_in_chinese():
    content = jsonl({"id": "a", "input": "x", "label": "l"}, {"id": "a", "input": "y", "label": "l"})
    with pytest.raises(SuiteFormatError) as caught:
        suite_parse_jsonl(content)
    error = caught.value
    assert error.reason == reason(
        SuiteFormatCode.PROBLEMS, problems=1, first="line 2.id", problem=error.issues[0].message
    )
    english = "1 problem(s) in the suite; first: line 2.id: duplicate id 'a' (first at line 1)"
    assert str(error) == english == reason_render(error.reason, words=ENGLISH)
    assert error.issues[0].english == "duplicate id 'a' (first at line 1)"
    with translation.override("zh-hans"):
        assert (
            reason_words(error.reason)
            == "评测集中有 1 个问题；第一个：line 2.id：重复的 id“a”（首次出现在 line 1）"
        )


def test_content_hash_is_order_and_content_sensitive():
    a = suite_parse_jsonl(jsonl({"input": "x", "label": "a"}, {"input": "y", "label": "b"}))
    b = suite_parse_jsonl(jsonl({"input": "x", "label": "a"}, {"input": "y", "label": "c"}))
    assert suite_content_hash(a) == suite_content_hash(list(a))
    assert suite_content_hash(a) != suite_content_hash(b)
    assert suite_content_hash(a) != suite_content_hash(list(reversed(a)))
