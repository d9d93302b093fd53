"""REST API v1. Thin: validate input, call a service or selector, serialize the result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from engines.reasons import reason
from evalhub.api.errors import ApiCode
from evalhub.wordings import reason_payload
from registry.errors import NotFoundError
from registry.selectors.suites import eval_suite_get
from registry.selectors.versions import model_version_get

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from rest_framework.authentication import BaseAuthentication
    from rest_framework.permissions import BasePermission

    from registry.models import EvalSuite, ModelVersion


class StrictSerializer(serializers.Serializer):
    """Refuses keys it does not know, instead of silently dropping them."""

    refuses_unknown_keys = True  # the schema says so: additionalProperties false

    def to_internal_value(self, data: Any) -> Any:
        unknown = sorted(set(data.keys()) - set(self.fields)) if hasattr(data, "keys") else []
        errors: dict[str, list[str]] = {key: ["Unknown field."] for key in unknown}
        # DRF's CharField turns a number into its text; the schema says string, so a number is refused
        # (the fuzz sent {"reason": -8.9e-42} and it was accepted).
        for name, field in self.fields.items():
            given = data.get(name) if hasattr(data, "get") else None
            if isinstance(field, serializers.CharField) and given is not None and not isinstance(given, str):
                errors[name] = ["Not a valid string."]
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            raise serializers.ValidationError({**exc.detail, **errors}) from None
        if errors:
            raise serializers.ValidationError(errors)
        return value


# registry.models.slug_validator in the schema's (ECMAScript) dialect, where `$` is the very end;
# the `not` tells generators that read `$` as Python does not to offer a trailing newline.
SLUG_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
NO_NEWLINE = {"pattern": "\n"}
SLUG_SCHEMA = {"type": "string", "pattern": SLUG_PATTERN, "not": NO_NEWLINE, "maxLength": 100}


@extend_schema_field(SLUG_SCHEMA)
class SlugNameField(serializers.RegexField):
    """A name as the registry stores it: lowercase letters, digits, '.', '_' and '-'."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 100)
        kwargs.setdefault("error_messages", {"invalid": "Use lowercase letters, digits, '.', '_' and '-'."})
        super().__init__(r"^[a-z0-9][a-z0-9._-]*\Z", **kwargs)


VERSION_REF_SCHEMA = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "description": "the version's id"},
        {
            "type": "string",
            "pattern": r"^[a-z0-9][a-z0-9._-]*:[a-z0-9][a-z0-9._-]*$",
            "not": NO_NEWLINE,
            "example": "contract-assistant:v4",
        },
    ],
    "description": "A model version: its id or `family:label`.",
}


@extend_schema_field(VERSION_REF_SCHEMA)
class VersionRefField(serializers.Field):
    """A model version given by id or "family:label"."""

    def to_internal_value(self, data: Any) -> ModelVersion:
        if not isinstance(data, (str, int)) or isinstance(data, bool):
            raise serializers.ValidationError("Give an id or family:label.")
        # A well-formed ref to nothing is a 404 naming the field, as it is in a path.
        return model_version_get(ref=data, field=self.field_name)

    def to_representation(self, value: ModelVersion) -> str:
        return value.ref


@extend_schema_field(
    {
        "type": "string",
        "description": "An eval suite: its id, `name@version`, or `name` (its latest version).",
    }
)
class SuiteRefField(serializers.CharField):
    """An eval suite given by id, "name@version" or name (its latest version)."""

    def to_internal_value(self, data: Any) -> EvalSuite:
        return eval_suite_get(ref=super().to_internal_value(data), field=self.field_name)


@extend_schema_field({"type": "integer", "minimum": 1})
class RecordRefField(serializers.IntegerField):
    """A row of `queryset` given by its id; an id of nothing is a 404 naming the field."""

    def __init__(self, *, queryset: QuerySet[Any], noun: str, **kwargs: Any) -> None:
        super().__init__(min_value=1, max_value=2**63 - 1, **kwargs)
        self.queryset, self.noun = queryset, noun

    def run_validation(self, data: Any = serializers.empty) -> Any:
        pk = super().run_validation(data)  # the type and the range first: a 400, not a lookup
        if pk is None:
            return None
        found = self.queryset.filter(pk=pk).first()
        if found is None:
            raise NotFoundError(reason(ApiCode.NO_OBJECT, noun=self.noun, pk=pk), field=self.field_name)
        return found


def absolute_url(context: dict[str, Any], url: str) -> str:
    """`url` made absolute with the serializer context's request, when there is one."""
    request = context.get("request")
    return request.build_absolute_uri(url) if request else url


class Pagination(LimitOffsetPagination):
    max_limit = 10_000
    max_offset = 2**63 - 1  # SQL's OFFSET is a 64-bit integer

    def get_offset(self, request: Request) -> int:
        offset = super().get_offset(request)
        if offset > self.max_offset:
            raise serializers.ValidationError({self.offset_query_param: [f"at most {self.max_offset}"]})
        return int(offset)


def filter_params(request: Request, serializer_class: type[serializers.Serializer]) -> dict[str, Any]:
    serializer = serializer_class(data=request.query_params)
    # DRF reads a blank form value as "not given"; a blank filter is refused instead, as documented.
    blank = {name: ["may not be blank"] for name in serializer.fields if request.query_params.get(name) == ""}
    if blank:
        raise serializers.ValidationError(blank)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def paginated(
    request: Request, view: APIView, queryset: QuerySet[Any], serializer_class: type[serializers.Serializer]
) -> Response:
    """A page of `queryset` as `{count, next, previous, results}` (the view sets `pagination_class =
    Pagination`, which is also how the schema knows it is paginated)."""
    paginator = view.pagination_class()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(
        serializer_class(page, many=True, context={"request": request}).data
    )


# ---------------------------------------------------------------------------------------------
# Model versions
# ---------------------------------------------------------------------------------------------
@extend_schema(exclude=True)
class ApiNotFound(APIView):
    """Every path under /api/v1/ that no endpoint has (its URL pattern matches any character,
    newlines included), so an API client always gets the JSON error shape."""

    permission_classes: list[type[BasePermission]] = []
    authentication_classes: list[type[BaseAuthentication]] = []

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise NotFoundError(reason(ApiCode.NO_ENDPOINT, path=request.path))

    post = put = patch = delete = get


class ReasonOutputSerializer(serializers.Serializer):
    """A reason as the API returns it (gate runs' `verdict_reasons`, layers' `reasons`): the code and
    its parameters for programs, the sentence for people in the request's language (Accept-Language)."""

    code = serializers.CharField(
        allow_null=True, help_text="`<layer>.<name>`; null for a sentence stored before reason codes"
    )
    params = serializers.DictField(
        help_text='the numbers, bounds and names the code needs; a stored code is `{"term": code}`, '
        'a nested reason `{"reason": {code, params}}`'
    )
    message = serializers.CharField(help_text="the reason in words, in the request's language")


@extend_schema_field(ReasonOutputSerializer(many=True))
class ReasonListField(serializers.Field):
    """Stored reasons (each `{code, params}` or an old sentence) as `ReasonOutputSerializer`s."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: Any) -> list[dict[str, Any]]:
        return [reason_payload(stored) for stored in value or []]
