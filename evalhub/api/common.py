"""REST API v1. Thin: validate input, call a service or selector, serialize the result."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from registry.errors import NotFoundError
from registry.selectors.suites import eval_suite_get
from registry.selectors.versions import model_version_get

if TYPE_CHECKING:
    from rest_framework.authentication import BaseAuthentication
    from rest_framework.permissions import BasePermission


class StrictSerializer(serializers.Serializer):
    """Refuses keys it does not know, instead of silently dropping them."""

    def to_internal_value(self, data):
        unknown = sorted(set(data.keys()) - set(self.fields)) if hasattr(data, "keys") else []
        errors = {key: ["Unknown field."] for key in unknown}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            raise serializers.ValidationError({**exc.detail, **errors}) from None
        if errors:
            raise serializers.ValidationError(errors)
        return value


class VersionRefField(serializers.Field):
    """A model version given by id or "family:label"."""

    def to_internal_value(self, data):
        if not isinstance(data, (str, int)) or isinstance(data, bool):
            raise serializers.ValidationError("Give an id or family:label.")
        try:
            return model_version_get(ref=data)
        except NotFoundError as exc:
            raise serializers.ValidationError(exc.message) from None

    def to_representation(self, value):
        return value.ref


class SuiteRefField(serializers.CharField):
    """An eval suite given by id, "name@version" or name (its latest version)."""

    def to_internal_value(self, data):
        ref = super().to_internal_value(data)
        try:
            return eval_suite_get(ref=ref)
        except NotFoundError as exc:
            raise serializers.ValidationError(exc.message) from None


def absolute_url(context: dict, url: str) -> str:
    """`url` made absolute with the serializer context's request, when there is one."""
    request = context.get("request")
    return request.build_absolute_uri(url) if request else url


class Pagination(LimitOffsetPagination):
    max_limit = 10_000
    max_offset = 2**63 - 1  # SQL's OFFSET is a 64-bit integer

    def get_offset(self, request):
        offset = super().get_offset(request)
        if offset > self.max_offset:
            raise serializers.ValidationError({self.offset_query_param: [f"at most {self.max_offset}"]})
        return offset


def filter_params(request, serializer_class) -> dict:
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def paginated(request, view, queryset, serializer_class) -> Response:
    paginator = Pagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(
        serializer_class(page, many=True, context={"request": request}).data
    )


# ---------------------------------------------------------------------------------------------
# Model versions
# ---------------------------------------------------------------------------------------------
@extend_schema(exclude=True)
class ApiNotFound(APIView):
    permission_classes: list[type[BasePermission]] = []
    authentication_classes: list[type[BaseAuthentication]] = []

    def get(self, request, *args, **kwargs):
        raise NotFoundError(f"No API endpoint at {request.path}.")

    post = put = patch = delete = get
