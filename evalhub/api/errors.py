"""One JSON error shape for every API failure:

{"error": {"code": "...", "message": "...", "fields": {"<field>": ["..."]}}}
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from registry.errors import ApplicationError


def error_body(
    *, code: str, message: str, fields: dict[str, list[str]] | None = None
) -> dict[str, dict[str, Any]]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


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
        body = error_body(code=exc.code, message=exc.message, fields=exc.fields)
        return Response(body, status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        body = error_body(
            code="too_large",
            message="The request body is over the size limit.",
            fields={"body": ["The request body is over the size limit."]},
        )
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
        message = "Invalid input: " + ", ".join(sorted(fields))
        response.data = error_body(code="invalid", message=message, fields=fields)
    elif isinstance(exc, exceptions.ParseError):
        message = str(exc.detail)
        response.data = error_body(code="malformed_body", message=message, fields={"body": [message]})
    else:
        code = getattr(exc, "default_code", "error")
        response.data = error_body(code=code, message=str(getattr(exc, "detail", exc)))
    return response
