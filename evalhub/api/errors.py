"""One JSON error shape for every API failure:

{"error": {"code": "...", "reason": "...", "params": {...}, "message": "...", "fields": {"<field>": ["..."]}}}

`code` is coarse and stable (`invalid`, `not_found`, `gate_run_active`, ...); `reason` is the fine
reason code (`decisions.gate_run_active`) and `params` its parameters, for clients that branch on
them; `message` and the field notes are in the request's language (`Accept-Language`). DRF's own
refusals (validation, authentication, throttling) keep DRF's words, which it translates itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from engines.reasons import Reason, gettext_noop, reason, wordings_register
from evalhub.wordings import reason_words
from registry.errors import ApplicationError


class ApiCode(StrEnum):
    INVALID_INPUT = "api.invalid_input"
    BODY_TOO_LARGE = "api.body_too_large"
    UPLOAD_TOO_LARGE = "api.upload_too_large"
    FILE_TOO_LARGE = "api.file_too_large"
    AT_MOST_BYTES = "api.at_most_bytes"
    NO_OBJECT = "api.no_object"
    NO_ENDPOINT = "api.no_endpoint"
    NO_SUITE = "api.no_suite"
    # DRF's refusals: the message is DRF's detail, already in the request's language.
    REFUSED = "api.refused"


wordings_register(
    {
        ApiCode.INVALID_INPUT: gettext_noop("Invalid input: {fields}"),
        ApiCode.BODY_TOO_LARGE: gettext_noop("The request body is over the size limit."),
        ApiCode.UPLOAD_TOO_LARGE: gettext_noop("The upload is {size} bytes, over the limit of {limit}."),
        ApiCode.FILE_TOO_LARGE: gettext_noop("{name} is {size} bytes, over the limit of {limit}."),
        ApiCode.AT_MOST_BYTES: gettext_noop("at most {limit} bytes"),
        ApiCode.NO_OBJECT: gettext_noop("No {noun} {pk}."),
        ApiCode.NO_ENDPOINT: gettext_noop("No API endpoint at {path}."),
        ApiCode.NO_SUITE: gettext_noop("No suite named '{name}'; name one."),
        ApiCode.REFUSED: gettext_noop("{detail}"),
    }
)


def error_body(
    *, code: str, reason: Reason, fields: Mapping[str, Sequence[Reason | str]] | None = None
) -> dict[str, Any]:
    return {
        "error": {
            "code": code,
            "reason": reason.code,
            "params": reason.to_json()["params"],
            "message": reason_words(reason),
            "fields": {
                name: [reason_words(note) for note in notes] for name, notes in (fields or {}).items()
            },
        }
    }


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail -> {"a.b[0].c": ["message", ...]}."""
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix and not str(key).startswith("[") else f"{prefix}{key}"
            out.update(_flatten(value, name))
        return out
    if isinstance(detail, list):
        if all(not isinstance(v, (dict, list)) for v in detail):
            return {prefix or "non_field_errors": [str(v) for v in detail]}
        out = {}
        for index, value in enumerate(detail):
            if value:
                out.update(_flatten(value, f"{prefix}[{index}]"))
        return out
    return {prefix or "non_field_errors": [str(detail)]}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        body = error_body(code=exc.code, reason=exc.reason, fields=exc.fields)
        return Response(body, status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        too_large = reason(ApiCode.BODY_TOO_LARGE)
        body = error_body(code="too_large", reason=too_large, fields={"body": [too_large]})
        return Response(body, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    from rest_framework.views import exception_handler  # late: DRF's views import our settings

    response = exception_handler(exc, context)
    if response is None:
        return None  # a real bug: let Django log it and answer 500
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        invalid = reason(ApiCode.INVALID_INPUT, fields=sorted(fields))
        response.data = error_body(code="invalid", reason=invalid, fields=fields)
    elif isinstance(exc, exceptions.ParseError):
        detail = str(exc.detail)
        response.data = error_body(
            code="malformed_body", reason=reason(ApiCode.REFUSED, detail=detail), fields={"body": [detail]}
        )
    else:
        code = getattr(exc, "default_code", "error")
        detail = str(getattr(exc, "detail", exc))
        response.data = error_body(code=code, reason=reason(ApiCode.REFUSED, detail=detail))
    return response
