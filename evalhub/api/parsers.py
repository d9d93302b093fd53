"""The API's JSON parsing, for every JSON request (the default parser) and JSON held in a form field.

A document nested deeper than EVALHUB_JSON_MAX_DEPTH (64) is refused before it is parsed (400 on
`body`), as are NaN and Infinity; a string, key or number that the database cannot store (NUL, an
unpaired surrogate, a number beyond float's range) is refused naming where it is, e.g.
`events[3].text` (`engines.input_checks`).
"""

from __future__ import annotations

import codecs
from typing import IO, Any

from django.conf import settings
from rest_framework import exceptions, parsers, serializers

from engines.input_checks import JSONInputError, json_parse_storable
from evalhub.wordings import reason_words


class JSONParser(parsers.JSONParser):
    """DRF's JSONParser with the checks above; the body is read whole, as DRF's is."""

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: dict[str, Any] | None = None
    ) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        document = stream.read()
        try:
            if codecs.lookup(encoding).name != "utf-8":
                document = document.decode(encoding).encode()
            return json_parse_storable(document, max_depth=settings.EVALHUB_JSON_MAX_DEPTH)
        except (LookupError, UnicodeError) as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        except JSONInputError as exc:
            if not exc.path:
                raise exceptions.ParseError(reason_words(exc.reason)) from None
            raise exceptions.ValidationError({exc.path: [reason_words(exc.reason)]}) from None


class JSONField(serializers.JSONField):
    """A JSON value in a form field (e.g. `items` of a multipart upload), parsed as a JSON body is;
    errors are named under the field (`items[0].input`)."""

    def to_internal_value(self, data: Any) -> Any:
        if not (isinstance(data, str) and getattr(data, "is_json_string", False)):
            return super().to_internal_value(data)
        try:
            document = data.encode("utf-8", "surrogatepass")
            return json_parse_storable(document, max_depth=settings.EVALHUB_JSON_MAX_DEPTH)
        except JSONInputError as exc:
            words = reason_words(exc.reason)
            detail = {exc.path: [words]} if exc.path else [words]
            raise serializers.ValidationError(detail) from None
