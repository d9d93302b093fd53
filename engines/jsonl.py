"""JSON Lines, the one way every export writes it: a JSON object a line, UTF-8 as written (Chinese is
not `\\u`-escaped), streamed row by row so an export of 10⁶ rows never holds them all. Pure.

U+2028 and U+2029 are escaped: JSON allows them raw inside a string, but Python's `str.splitlines`
(and JavaScript before ES2019) break a line there, and a reader must see one line per row."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TextIO

MEDIA_TYPE = "application/x-ndjson"


def jsonl_line(row: Mapping[str, Any]) -> str:
    """One row as its line, newline included."""
    text = json.dumps(row, ensure_ascii=False)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n"


def jsonl_lines(rows: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """The rows' lines, one at a time, as the rows come."""
    for row in rows:
        yield jsonl_line(row)


def jsonl_write(*, rows: Iterable[Mapping[str, Any]], target: TextIO) -> int:
    """Writes the rows' lines to `target` as they come; the number of rows written."""
    count = 0
    for line in jsonl_lines(rows):
        target.write(line)
        count += 1
    return count
