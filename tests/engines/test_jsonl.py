"""The one JSONL writer: a JSON object a line, Chinese as written, line separators escaped, streamed."""

import io
import json

import pytest

from engines.jsonl import jsonl_line, jsonl_lines, jsonl_write


def test_one_object_a_line_utf8_as_written():
    rows = [{"q": "付款条款是啥", "n": 1}, {"q": "renewal", "ok": True, "x": None}]
    target = io.StringIO()
    assert jsonl_write(rows=rows, target=target) == 2
    text = target.getvalue()
    assert text == '{"q": "付款条款是啥", "n": 1}\n{"q": "renewal", "ok": true, "x": null}\n'
    assert [json.loads(line) for line in text.splitlines()] == rows


def test_line_separators_inside_a_string_stay_on_their_line():
    row = {"text": "a\u2028b\u2029c\nd"}
    line = jsonl_line(row)
    assert line.count("\n") == 1 and len(line.splitlines()) == 1
    assert json.loads(line) == row


def test_rows_are_written_as_they_come():
    def rows():
        yield {"k": 1}
        raise RuntimeError("the second row is never made")

    lines = jsonl_lines(rows())
    assert next(lines) == '{"k": 1}\n'  # the first line before the source is asked for more
    with pytest.raises(RuntimeError):
        next(lines)
    target = io.StringIO()
    with pytest.raises(RuntimeError):
        jsonl_write(rows=rows(), target=target)
    assert target.getvalue() == '{"k": 1}\n'
