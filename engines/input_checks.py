"""Checks on untrusted input that every floor shares. Pure: no Django.

PostgreSQL, the real database, stores neither NUL (U+0000) in text or JSON nor a lone surrogate
(U+D800..U+DFFF: JSON's `\\ud800` escape makes one, UTF-8 cannot encode it); JSON has no NaN or
infinity, though `1e999` parses to one; and a document nested 100 000 deep exhausts a recursive
parser. Each check says what is wrong, so that its caller can name the field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import accumulate

# Arrays and objects nested deeper than this are refused (EVALHUB_JSON_MAX_DEPTH in the web process).
JSON_MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None. A str that came out of a JSON parser holds a
    surrogate only when it was unpaired (a valid pair decodes to one code point)."""
    if "\x00" in value:
        return "must not contain NUL (\\u0000)"
    if not value.isascii() and _SURROGATE.search(value):
        return "must not contain an unpaired surrogate (\\ud800-\\udfff)"
    return None


def text_storable(value: str) -> str:
    """`value` with what `text_problem` refuses replaced by U+FFFD, for text that is recorded as it
    came (e.g. a model's answer) rather than refused."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    return _SURROGATE.sub("\ufffd", value) if not value.isascii() else value


def json_problem(value: object, *, path: str = "") -> tuple[str, str] | None:
    """The first string, key or number of a parsed JSON value that cannot be stored, as (path,
    message), e.g. ("events[3].text", "must not contain NUL ..."); a bad key names its object.
    Iterative, so any depth is safe."""
    stack: list[tuple[str, object]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return where, problem
        elif isinstance(item, float):
            if not math.isfinite(item):
                return where, "must be a finite number"
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                problem = text_problem(key) if isinstance(key, str) else None
                if problem:
                    return where, f"a key {problem}"
                children.append((f"{where}.{key}" if where else str(key), child))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in reversed(list(enumerate(item))))
    return None


_KEEP_QUOTES_AND_BRACKETS = bytes(b for b in range(256) if b not in b'"[]{}')
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def json_depth(document: bytes) -> int:
    """How deep a JSON document's arrays and objects nest, without parsing it: linear, in C-speed
    steps, no recursion (a few ms for 1 MB). Meaningless, but safe, for malformed JSON."""
    if b"\\" in document:  # escaped backslashes and quotes delimit no string
        document = document.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Quotes and brackets only. Two adjacent quotes hold no bracket between them, so dropping them
    # keeps every bracket inside or outside its string; then the text between quotes goes.
    marks = document.translate(None, _KEEP_QUOTES_AND_BRACKETS).replace(b'""', b"")
    brackets = b"".join(marks.split(b'"')[::2])
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def json_loads(
    document: bytes | str, *, max_depth: int = JSON_MAX_DEPTH, parse_float: Callable[[str], float] = float
) -> object:
    """`json.loads` for untrusted documents: ValueError (a JSONDecodeError when malformed) also for
    nesting deeper than `max_depth`, checked before parsing, and for NaN and Infinity. A number
    beyond float's range is infinite, as in `json.loads`: `json_problem` refuses it."""
    raw = document.encode("utf-8", "surrogatepass") if isinstance(document, str) else document
    if raw.count(b"[") + raw.count(b"{") > max_depth and json_depth(raw) > max_depth:
        raise ValueError(f"nested deeper than {max_depth} levels")
    return json.loads(document, parse_constant=_no_constant, parse_float=parse_float)


class JSONInputError(ValueError):
    """A refused document. `path` is empty when the document as a whole is at fault (malformed, too
    deep), else it says where the value that cannot be stored is (`events[3].text`)."""

    def __init__(self, message: str, *, path: str = ""):
        super().__init__(message)
        self.message = message
        self.path = path


class _Floats:
    """parse_float for one document, remembering whether a number overflowed to infinity."""

    def __init__(self) -> None:
        self.overflowed = False

    def __call__(self, literal: str) -> float:
        value = float(literal)
        if math.isinf(value):
            self.overflowed = True
        return value


# NUL and surrogate escapes: where a document's strings may hold what `text_problem` refuses.
_SUSPECT = re.compile(rb"\\u0000|\\u[dD][89a-fA-F]")


def json_parse_storable(document: bytes, *, max_depth: int = JSON_MAX_DEPTH) -> object:
    """`json_loads`, and every string, key and number of the value storable (`json_problem`); the
    walk over the value runs only when the bytes hold a NUL or surrogate escape or a number
    overflowed (a scan in C: under a millisecond per MB). Raises JSONInputError."""
    floats = _Floats()
    try:
        value = json_loads(document, max_depth=max_depth, parse_float=floats)
    except ValueError as exc:
        raise JSONInputError(str(exc)) from None
    if floats.overflowed or _SUSPECT.search(document):
        problem = json_problem(value)
        if problem:
            raise JSONInputError(problem[1], path=problem[0])
    return value


_ISO_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})", re.ASCII
)


def iso_datetime_parse(value: object) -> datetime:
    """An ISO 8601 date-time with a time zone (`2026-11-29T10:00:00Z`, `...+08:00`), in UTC. ValueError
    for anything else: no time zone, an impossible date or time, or outside datetime's range in UTC."""
    if not isinstance(value, str) or not _ISO_DATETIME.fullmatch(value):
        raise ValueError("must be an ISO 8601 date-time with a time zone, e.g. 2026-11-29T10:00:00Z")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("is not a date-time that exists") from None
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise ValueError("is outside the range of dates") from None
