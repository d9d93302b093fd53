"""The shared checks on untrusted input: storable text, JSON depth without recursion, strict timestamps."""

import json
import random
from datetime import UTC, datetime

import pytest

from engines.input_checks import (
    InputCode,
    JSONInputError,
    iso_datetime_parse,
    json_depth,
    json_loads,
    json_parse_storable,
    json_problem,
    text_problem,
    text_storable,
)
from engines.reasons import reason


def test_text_problem():
    assert text_problem("plain, 中文 and 😀") is None
    assert text_problem("a\x00b") == reason(InputCode.NUL)
    assert text_problem("a\ud800b") == reason(InputCode.SURROGATE)
    assert text_storable("a\x00b\udfff") == "a\ufffdb\ufffd" and text_storable("ok") == "ok"


def test_json_problem_names_the_path():
    value = {"events": [{"text": "ok"}, {"meta": {"k": ["x", "y\x00"]}}]}
    assert json_problem(value) == ("events[1].meta.k[1]", reason(InputCode.NUL))
    assert json_problem({"a": {"k\x00": 1}}) == ("a", reason(InputCode.KEY, problem=reason(InputCode.NUL)))
    assert json_problem([1.0, float("inf")]) == ("[1]", reason(InputCode.NOT_FINITE))
    assert json_problem({"ok": [1, 2.5, "x", None, True]}) is None


def nesting(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    return 0


def test_json_depth_ignores_brackets_inside_strings():
    rng = random.Random(0)
    tricky = ["[", "]", "{", "}", '"', "\\", "\\\\", '\\"', "a"]

    def build(level):
        if level > 5 or rng.random() < 0.3:
            return "".join(rng.choice(tricky) for _ in range(rng.randint(0, 5)))
        if rng.random() < 0.5:
            return [build(level + 1) for _ in range(rng.randint(0, 3))]
        return {f"k{i}{rng.choice(tricky)}": build(level + 1) for i in range(rng.randint(0, 3))}

    for _ in range(2000):
        value = build(0)
        document = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
        assert json_depth(document) == nesting(value), document


def test_json_loads_refuses_depth_and_constants_without_recursing():
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(ValueError, match="deeper than 64"):
        json_loads(deep)
    assert json_loads(b"[" * 64 + b"]" * 64) is not None
    assert json_loads('{"a": [[1]]}', max_depth=3) == {"a": [[1]]}
    with pytest.raises(ValueError, match="deeper than 2"):
        json_loads('{"a": [[1]]}', max_depth=2)
    for constant in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(ValueError, match="not JSON"):
            json_loads(f"[{constant}]")


def test_json_parse_storable():
    assert json_parse_storable(b'{"a": "\\ud83d\\ude00", "b": "\\\\u0000"}') == {"a": "😀", "b": "\\u0000"}
    for document, path in (
        (b'{"x": ["\\u0000"]}', "x[0]"),
        (b'{"x": "\\udc00"}', "x"),
        (b'{"x": 1e999}', "x"),
        (b'{"x": -1' + b"0" * 400 + b".5}", "x"),
        (b"{bad", ""),
        (b"[" * 65 + b"]" * 65, ""),
    ):
        with pytest.raises(JSONInputError) as caught:
            json_parse_storable(document)
        assert caught.value.path == path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29T10:00:00Z", datetime(2026, 11, 29, 10, tzinfo=UTC)),
        ("2026-11-29T18:00:00+08:00", datetime(2026, 11, 29, 10, tzinfo=UTC)),
        ("2026-11-29T10:00Z", datetime(2026, 11, 29, 10, tzinfo=UTC)),
        ("2026-11-29T10:00:00.123456789-01:30", datetime(2026, 11, 29, 11, 30, 0, 123456, tzinfo=UTC)),
    ],
)
def test_iso_datetime_parse(text, expected):
    assert iso_datetime_parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-13-45T00:00:00Z",
        "2026-02-29T00:00:00Z",
        "2026-11-29T24:00:00Z",
        "2026-11-29T10:00:00",
        "2026-11-29",
        "2026-11-29T10:00:00+25:00",
        "9999-12-31T23:59:59-23:59",
        "0001-01-01T00:00:00+01:00",
        "２０２６-11-29T10:00:00Z",
        " 2026-11-29T10:00:00Z",
        None,
        1764410400,
    ],
)
def test_iso_datetime_parse_refuses(text):
    with pytest.raises(ValueError):
        iso_datetime_parse(text)
