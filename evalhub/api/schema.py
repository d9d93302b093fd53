"""How the API describes itself (OpenAPI 3, by drf-spectacular), so generated clients and the docs
page say what the server does:

- a serializer nested in a view is named after the view (`GateRunListApi.InputSerializer` is the
  component `GateRunListInput`), so no two components share a name;
- every operation documents the one error shape (`evalhub.api.errors`) under each status code it can
  answer with: 401 and 403 always; 400 with parameters or a body; 404 where a path, a body or a filter
  names an object (one that does not exist is a 404 naming the field); 409, 413 and 415 for writes;
- the token scheme is declared, so Swagger's *Authorize* takes a token.
"""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

ERROR_DESCRIPTIONS = {
    "400": "Invalid input: `error.fields` names each field at fault (`a.b[0].c`).",
    "401": "No token, or a revoked or unknown one.",
    "403": "The caller's role does not allow this.",
    "404": "No such object (`error.message` says which).",
    "409": "Refused in the object's current state (e.g. an unapproved candidate, an illegal transition).",
    "413": "The body is over the upload limit (EVALHUB_MAX_UPLOAD_BYTES).",
    "415": "The body's media type is not one the operation takes.",
}


class ReasonSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="The reason's code, `<owner>.<name>`, e.g. `comparisons.z_test`.")
    params = serializers.DictField(
        help_text='Its parameters: numbers, strings, booleans, null, `{"term": code}` (a status, arm or '
        'metric), `{"reason": {code, params}}` (a nested reason), or lists of these.'
    )


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code, e.g. `invalid`, `not_approved`.")
    reason = serializers.CharField(
        help_text="The fine reason code, `<owner>.<name>`, e.g. `decisions.gate_run_active`; `api.refused` "
        "where the message is the framework's (authentication, throttling, a malformed body)."
    )
    params = serializers.DictField(
        help_text='The reason\'s parameters (numbers, names, `{"term": code}`, nested `{"reason": ...}`).'
    )
    message = serializers.CharField(help_text="What went wrong, for people, in the request's language.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Each field at fault (dotted path) with its problems, in the request's language; empty "
        "when none is.",
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


Direction = Literal["request", "response"]


class EvalHubAutoSchema(AutoSchema):
    def get_serializer_name(self, serializer: serializers.Serializer, direction: Direction) -> str:
        name = super().get_serializer_name(serializer, direction)
        owner = type(serializer).__qualname__.rpartition(".")[0]
        return owner.removesuffix("Api") + name if owner else name

    def _map_basic_serializer(
        self, serializer: serializers.Serializer, direction: Direction
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and getattr(serializer, "refuses_unknown_keys", False):
            schema["additionalProperties"] = False  # unknown keys are refused, not dropped
        return schema

    def _map_serializer_field(
        self, field: serializers.Field, direction: Direction, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer_field(field, direction, bypass_extensions)
        # DRF refuses a blank string (after trimming) unless allow_blank: say so.
        if (
            direction == "request"
            and isinstance(field, serializers.CharField)
            and not field.allow_blank
            and schema.get("type") == "string"
            and "enum" not in schema
        ):
            schema.setdefault("minLength", 1)
            if field.trim_whitespace:
                schema.setdefault("pattern", r"\S")
        return schema

    def _get_request_for_media_type(
        self, serializer: Any, direction: Direction = "request"
    ) -> tuple[dict[str, Any], bool]:
        schema, required = super()._get_request_for_media_type(serializer, direction)
        if isinstance(serializer, dict):  # a body written as JSON Schema: required if it requires a key
            required = any(serializer.get(key) for key in ("required", "anyOf", "oneOf"))
        return schema, required

    def _get_response_bodies(self, direction: Direction = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        for code in self._error_codes():
            if code not in responses:
                body = self._get_response_for_code(ErrorSerializer, code, ["application/json"], direction)
                responses[code] = {**body, "description": ERROR_DESCRIPTIONS[code]}
        return responses

    def _error_codes(self) -> list[str]:
        codes = ["401", "403"]
        writes = self.method in ("POST", "PUT", "PATCH")
        takes_input = writes or bool(self.get_override_parameters() or self._get_pagination_parameters())
        if takes_input:
            codes.append("400")
        if takes_input or "{" in self.path:  # a path, body or filter naming what does not exist
            codes.append("404")
        if writes:
            codes += ["409", "415"]
            if self.method == "POST":
                codes.append("413")
        return sorted(codes)


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "evalhub.api.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token (`manage.py create_api_token`): `Authorization: Token <key>` "
            "or `Authorization: Bearer <key>`.",
        }
