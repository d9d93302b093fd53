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
from enum import StrEnum
from itertools import accumulate

from engines.reasons import ENGLISH, Reason, gettext_noop, reason, reason_render, wordings_register

# Arrays and objects nested deeper than this are refused (EVALHUB_JSON_MAX_DEPTH in the web process).
JSON_MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")


class InputCode(StrEnum):
    NUL = "input.nul"
    SURROGATE = "input.surrogate"
    NOT_FINITE = "input.not_finite"
    KEY = "input.key"
    MALFORMED = "input.malformed"
    UNREADABLE = "input.unreadable"
    TOO_DEEP = "input.too_deep"
    NOT_JSON = "input.not_json"
    NOT_DATETIME = "input.not_datetime"
    NO_SUCH_DATETIME = "input.no_such_datetime"
    DATETIME_RANGE = "input.datetime_range"


wordings_register(
    {
        InputCode.NUL: gettext_noop("must not contain NUL (\\u0000)"),
        InputCode.SURROGATE: gettext_noop("must not contain an unpaired surrogate (\\ud800-\\udfff)"),
        InputCode.NOT_FINITE: gettext_noop("must be a finite number"),
        InputCode.KEY: gettext_noop("a key {problem}"),
        # `detail` is the JSON parser's own message (Python's, in English), with where it stopped.
        InputCode.MALFORMED: gettext_noop("not valid JSON: {detail} (line {line}, column {column})"),
        InputCode.UNREADABLE: gettext_noop("not valid JSON: {detail}"),
        InputCode.TOO_DEEP: gettext_noop("nested deeper than {max_depth} levels"),
        InputCode.NOT_JSON: gettext_noop("{name} is not JSON"),
        InputCode.NOT_DATETIME: gettext_noop(
            "must be an ISO 8601 date-time with a time zone, e.g. 2026-11-29T10:00:00Z"
        ),
        InputCode.NO_SUCH_DATETIME: gettext_noop("is not a date-time that exists"),
        InputCode.DATETIME_RANGE: gettext_noop("is outside the range of dates"),
    }
)


class FieldCode(StrEnum):
    """What is wrong with a field's value, as any floor's checks say it (the field is named beside it)."""

    REQUIRED = "field.required"
    STRING = "field.string"
    INTEGER = "field.integer"
    NUMBER = "field.number"
    BOOLEAN = "field.boolean"
    OBJECT = "field.object"
    NOT_NULL = "field.not_null"
    AT_MOST_CHARS = "field.at_most_chars"
    SHORT_STRING = "field.short_string"
    STRINGS = "field.strings"
    LIST_OF = "field.list_of"
    ONE_OF = "field.one_of"
    BETWEEN = "field.between"
    NON_NEGATIVE = "field.non_negative"
    INTEGER_BETWEEN = "field.integer_between"
    UNKNOWN_KEY = "field.unknown_key"


wordings_register(
    {
        FieldCode.REQUIRED: gettext_noop("required"),
        FieldCode.STRING: gettext_noop("must be a string"),
        FieldCode.INTEGER: gettext_noop("must be an integer"),
        FieldCode.NUMBER: gettext_noop("must be a number"),
        FieldCode.BOOLEAN: gettext_noop("must be true or false"),
        FieldCode.OBJECT: gettext_noop("must be an object"),
        FieldCode.NOT_NULL: gettext_noop("must not be null"),
        FieldCode.AT_MOST_CHARS: gettext_noop("at most {limit} characters"),
        FieldCode.SHORT_STRING: gettext_noop("must be a non-empty string of at most {limit} characters"),
        FieldCode.STRINGS: gettext_noop("must be a non-empty list of strings"),
        FieldCode.LIST_OF: gettext_noop("must be a non-empty list of {choices}"),
        FieldCode.ONE_OF: gettext_noop("one of {choices}"),
        FieldCode.BETWEEN: gettext_noop("must be between {low} and {high}"),
        FieldCode.NON_NEGATIVE: gettext_noop("must be ≥ 0"),
        FieldCode.INTEGER_BETWEEN: gettext_noop("must be an integer from {low} to {high}"),
        FieldCode.UNKNOWN_KEY: gettext_noop("unknown key; known: {known}"),
    }
)


class InputProblem(ValueError):
    """A value refused, with why as a reason (its English as the exception's text, for logs)."""

    def __init__(self, why: Reason):
        super().__init__(reason_render(why, words=ENGLISH))
        self.reason = why


def text_problem(value: str) -> Reason | None:
    """Why `value` cannot be stored as text, or None. A str that came out of a JSON parser holds a
    surrogate only when it was unpaired (a valid pair decodes to one code point)."""
    if "\x00" in value:
        return reason(InputCode.NUL)
    if not value.isascii() and _SURROGATE.search(value):
        return reason(InputCode.SURROGATE)
    return None


def text_storable(value: str) -> str:
    """`value` with what `text_problem` refuses replaced by U+FFFD, for text that is recorded as it
    came (e.g. a model's answer) rather than refused."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    return _SURROGATE.sub("\ufffd", value) if not value.isascii() else value


def json_problem(value: object, *, path: str = "") -> tuple[str, Reason] | None:
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
                return where, reason(InputCode.NOT_FINITE)
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                problem = text_problem(key) if isinstance(key, str) else None
                if problem:
                    return where, reason(InputCode.KEY, problem=problem)
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
    raise InputProblem(reason(InputCode.NOT_JSON, name=name))


def json_loads(
    document: bytes | str, *, max_depth: int = JSON_MAX_DEPTH, parse_float: Callable[[str], float] = float
) -> object:
    """`json.loads` for untrusted documents: ValueError (a JSONDecodeError when malformed) also for
    nesting deeper than `max_depth`, checked before parsing, and for NaN and Infinity. A number
    beyond float's range is infinite, as in `json.loads`: `json_problem` refuses it."""
    raw = document.encode("utf-8", "surrogatepass") if isinstance(document, str) else document
    if raw.count(b"[") + raw.count(b"{") > max_depth and json_depth(raw) > max_depth:
        raise InputProblem(reason(InputCode.TOO_DEEP, max_depth=max_depth))
    return json.loads(document, parse_constant=_no_constant, parse_float=parse_float)


class JSONInputError(ValueError):
    """A refused document, why as a reason (`message`: its English, for logs). `path` is empty when
    the document as a whole is at fault (malformed, too deep), else it says where the value that
    cannot be stored is (`events[3].text`)."""

    def __init__(self, why: Reason, *, path: str = ""):
        self.message = reason_render(why, words=ENGLISH)
        super().__init__(self.message)
        self.reason = why
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
    except json.JSONDecodeError as exc:
        raise JSONInputError(
            reason(InputCode.MALFORMED, detail=exc.msg, line=exc.lineno, column=exc.colno)
        ) from None
    except InputProblem as exc:
        raise JSONInputError(exc.reason) from None
    except (ValueError, RecursionError) as exc:  # a number literal too long to convert, say
        raise JSONInputError(reason(InputCode.MALFORMED, detail=str(exc), line=None, column=None)) from None
    if floats.overflowed or _SUSPECT.search(document):
        problem = json_problem(value)
        if problem:
            raise JSONInputError(problem[1], path=problem[0])
    return value


_ISO_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})", re.ASCII
)


def iso_datetime_parse(value: object) -> datetime:
    """An ISO 8601 date-time with a time zone (`2026-11-29T10:00:00Z`, `...+08:00`), in UTC. InputProblem
    for anything else: no time zone, an impossible date or time, or outside datetime's range in UTC."""
    if not isinstance(value, str) or not _ISO_DATETIME.fullmatch(value):
        raise InputProblem(reason(InputCode.NOT_DATETIME))
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InputProblem(reason(InputCode.NO_SUCH_DATETIME)) from None
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise InputProblem(reason(InputCode.DATETIME_RANGE)) from None
