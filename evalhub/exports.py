"""JSONL exports at the edge: one streaming HTTP response for the API and the pages, one file (or
standard output) for the management commands, both written by `engines.jsonl`."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from django.http import StreamingHttpResponse

from engines.jsonl import MEDIA_TYPE, jsonl_lines, jsonl_write


def jsonl_response(*, rows: Iterable[Mapping[str, Any]], filename: str) -> StreamingHttpResponse:
    """The rows streamed as a JSONL download named `filename`."""
    response = StreamingHttpResponse(jsonl_lines(rows), content_type=MEDIA_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def jsonl_command_write(
    *, rows: Iterable[Mapping[str, Any]], out: Path | None, stdout: TextIO | None = None
) -> int:
    """The rows written to `out` (UTF-8), or to standard output without it; the number written."""
    if out is None:
        return jsonl_write(rows=rows, target=stdout or sys.stdout)
    with out.open("w", encoding="utf-8") as target:
        return jsonl_write(rows=rows, target=target)
