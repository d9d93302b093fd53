import json

import pytest

from registry.suite_format import (
    SuiteFormatError,
    suite_content_hash,
    suite_parse_csv,
    suite_parse_jsonl,
    suite_parse_records,
)


def jsonl(*records) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records).encode()


def issues_of(call, content):
    with pytest.raises(SuiteFormatError) as caught:
        call(content)
    return {(i.where, i.field) for i in caught.value.issues}


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
    assert issues_of(suite_parse_jsonl, content) == {
        ("line 2", ""),
        ("line 3", "colour"),
        ("line 4", "input"),
        ("line 5", "label"),
        ("line 6", "tags"),
    }


def test_duplicate_ids_are_refused():
    content = jsonl({"id": "a", "input": "x", "label": "l"}, {"id": "a", "input": "y", "label": "l"})
    assert issues_of(suite_parse_jsonl, content) == {("line 2", "id")}


def test_empty_and_non_utf8_files():
    assert issues_of(suite_parse_jsonl, b"\n\n") == {("file", "")}
    assert issues_of(suite_parse_jsonl, b"\xff\xfe{") == {("file", "")}


def test_csv_with_tags_and_metadata():
    content = b'id,input,label,tags,metadata\nc1,"Pay, now",payment,a|b,"{""k"": 1}"\n'
    (item,) = suite_parse_csv(content)
    assert (item.id, item.input, item.tags, item.metadata) == ("c1", "Pay, now", ("a", "b"), {"k": 1})
    assert issues_of(suite_parse_csv, b"input,label,extra\nx,a,1\n") == {("line 2", "extra")}


def test_records_must_be_a_list_of_objects():
    assert issues_of(suite_parse_records, {"input": "x"}) == {("items", "")}
    assert issues_of(suite_parse_records, [{"input": "x", "label": "a"}, 3]) == {("items[1]", "")}


def test_content_hash_is_order_and_content_sensitive():
    a = suite_parse_jsonl(jsonl({"input": "x", "label": "a"}, {"input": "y", "label": "b"}))
    b = suite_parse_jsonl(jsonl({"input": "x", "label": "a"}, {"input": "y", "label": "c"}))
    assert suite_content_hash(a) == suite_content_hash(list(a))
    assert suite_content_hash(a) != suite_content_hash(b)
    assert suite_content_hash(a) != suite_content_hash(list(reversed(a)))
