"""REST API v1. Thin: validate input, call a service or selector, serialize the result."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from engines.backends.config import LIMITS, MAX_LABELS, SCHEMAS
from engines.reasons import reason
from evalhub.api.common import (
    SLUG_SCHEMA,
    VERSION_REF_SCHEMA,
    Pagination,
    SlugNameField,
    StrictSerializer,
    VersionRefField,
    filter_params,
    paginated,
)
from evalhub.api.errors import ApiCode
from evalhub.api.parsers import JSONField, JSONParser
from registry.errors import ApplicationError
from registry.models import EvalSuite, ModelVersion
from registry.roles import RELEASE_MANAGER
from registry.selectors.suites import eval_suite_get, eval_suite_list
from registry.selectors.versions import model_version_get, model_version_list
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import (
    model_version_register,
    model_version_serving_set,
    model_version_transition,
)


class ModelVersionOutputSerializer(serializers.ModelSerializer):
    ref = serializers.CharField(read_only=True)
    baseline = serializers.CharField(source="baseline.ref", default=None, allow_null=True)
    has_api_key = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True)

    class Meta:
        model = ModelVersion
        fields = [
            "id",
            "ref",
            "family",
            "label",
            "description",
            "backend_kind",
            "backend_config",
            "has_api_key",
            "serving_url",
            "baseline",
            "status",
            "is_demo",
            "created_by",
            "created_at",
            "updated_at",
        ]

    def get_has_api_key(self, obj: ModelVersion) -> bool:
        return bool(obj.api_key_encrypted)


_JSON_TYPES: dict[object, str] = {str: "string", int: "integer"}


def _backend_config_schema(kind: str) -> dict[str, Any]:
    """`engines.backends.config.SCHEMAS[kind]` as JSON Schema: each key's type, limits and default."""
    properties = {}
    for key, (kind_of, default, required) in SCHEMAS[kind].items():
        prop: dict[str, Any] = {"type": _JSON_TYPES.get(kind_of, "number")}
        if kind_of is list:  # `labels`: distinct, non-blank strings
            items = {"type": "string", "pattern": r"\S"}
            prop.update(type="array", items=items, minItems=1, maxItems=MAX_LABELS, uniqueItems=True)
        if key in LIMITS:
            prop["minimum"], prop["maximum"] = LIMITS[key]
        if required and kind_of is str:
            prop["pattern"] = r"\S"
        if default is not None and default != []:
            prop["default"] = default
        properties[key] = prop
    if "api_key_env" in properties:
        prefix = settings.EVALHUB_BACKEND_SECRET_ENV_PREFIX
        allowed = [{"pattern": f"^{re.escape(prefix)}."}] if prefix else []
        properties["api_key_env"] = {
            "type": "string",
            "anyOf": [{"maxLength": 0}, *allowed],
            "description": f"an environment variable holding the key; its name starts with {prefix!r}",
        }
    needed = [key for key, (_, _, is_required) in SCHEMAS[kind].items() if is_required]
    return {"type": "object", "properties": properties, "required": needed, "additionalProperties": False}


def _registration_schema() -> dict[str, Any]:
    """One body per backend kind, so the docs (and generated clients) say which config each needs.
    Beyond the schema: a checkpoint `path` must exist inside EVALHUB_MODEL_DIR, URLs must pass the
    operator's outbound policy, `label_regex` must compile with a group `label`."""
    common = {
        "family": SLUG_SCHEMA,
        "label": SLUG_SCHEMA,
        "api_key": {"type": "string", "maxLength": 500, "writeOnly": True, "description": "stored encrypted"},
        "baseline": {**VERSION_REF_SCHEMA, "nullable": True},
        "description": {"type": "string"},
        "serving_url": {
            "type": "string",
            "maxLength": 500,
            "description": "OpenAI-compatible base URL for live traffic, fixed once the version is "
            "evaluated; an openai version's must be empty or its base_url",
        },
    }
    return {
        "oneOf": [
            {
                "type": "object",
                "title": kind,
                "properties": {
                    **common,
                    "backend_kind": {"type": "string", "enum": [kind]},
                    "backend_config": _backend_config_schema(kind),
                },
                "required": ["family", "label", "backend_kind", "backend_config"],
                "additionalProperties": False,
            }
            for kind in SCHEMAS
        ]
    }


class ModelVersionListApi(APIView):
    pagination_class = Pagination

    class FilterSerializer(serializers.Serializer):
        family = serializers.CharField(required=False)
        label = serializers.CharField(required=False)
        status = serializers.ChoiceField(choices=ModelVersion.Status.choices, required=False)
        backend_kind = serializers.ChoiceField(choices=ModelVersion.BackendKind.choices, required=False)
        limit = serializers.IntegerField(required=False, min_value=1)
        offset = serializers.IntegerField(required=False, min_value=0)

    class InputSerializer(StrictSerializer):
        family = SlugNameField()
        label = SlugNameField()
        backend_kind = serializers.ChoiceField(choices=ModelVersion.BackendKind.choices)
        backend_config = serializers.DictField()
        api_key = serializers.CharField(required=False, allow_blank=True, write_only=True, max_length=500)
        baseline = VersionRefField(required=False, allow_null=True)
        description = serializers.CharField(required=False, allow_blank=True)
        serving_url = serializers.URLField(
            required=False,
            allow_blank=True,
            max_length=500,
            help_text="OpenAI-compatible base URL for live traffic",
        )

    @extend_schema(
        operation_id="model_versions_list",
        parameters=[FilterSerializer],
        responses=ModelVersionOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        filters = filter_params(request, self.FilterSerializer)
        return paginated(request, self, model_version_list(filters=filters), ModelVersionOutputSerializer)

    @extend_schema(
        operation_id="model_version_register",
        request={"application/json": _registration_schema()},
        responses={201: ModelVersionOutputSerializer},
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        version = model_version_register(actor=request.user, **serializer.validated_data)
        return Response(ModelVersionOutputSerializer(version).data, status=status.HTTP_201_CREATED)


class ModelVersionDetailApi(APIView):
    @extend_schema(operation_id="model_version_get", responses=ModelVersionOutputSerializer)
    def get(self, request: Request, ref: str) -> Response:
        return Response(ModelVersionOutputSerializer(model_version_get(ref=ref)).data)


class ModelVersionTransitionApi(APIView):
    """Move a version along its lifecycle (release managers only)."""

    write_roles = frozenset({RELEASE_MANAGER})

    class InputSerializer(StrictSerializer):
        # Approval and rejection are release decisions, with their own rules and record: they are
        # not statuses a transition sets, and the schema says so.
        status = serializers.ChoiceField(
            choices=[
                choice
                for choice in ModelVersion.Status.choices
                if choice[0] not in (ModelVersion.Status.APPROVED, ModelVersion.Status.REJECTED)
            ],
            error_messages={
                "invalid_choice": (
                    '"{input}" is not a status a transition sets; a version is approved or '
                    "rejected by a decision: use POST /api/v1/decisions/."
                )
            },
        )
        reason = serializers.CharField(max_length=2000)

    @extend_schema(
        operation_id="model_version_transition",
        request=InputSerializer,
        responses=ModelVersionOutputSerializer,
    )
    def post(self, request: Request, ref: str) -> Response:
        version = model_version_get(ref=ref)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        version = model_version_transition(
            version=version,
            to_status=serializer.validated_data["status"],
            reason=serializer.validated_data["reason"],
            actor=request.user,
        )
        return Response(ModelVersionOutputSerializer(version).data)


class ModelVersionServingApi(APIView):
    """Set where live traffic reaches a version (release managers only, audited), until it is
    evaluated: after that it is part of what its gate judged (409), and serving elsewhere is a new
    version."""

    write_roles = frozenset({RELEASE_MANAGER})

    class InputSerializer(StrictSerializer):
        serving_url = serializers.URLField(
            allow_blank=True,
            max_length=500,
            help_text="OpenAI-compatible base URL for live traffic; an openai version's must be its base_url",
        )
        reason = serializers.CharField(max_length=2000)

    @extend_schema(
        operation_id="model_version_serving_set",
        request=InputSerializer,
        responses=ModelVersionOutputSerializer,
    )
    def post(self, request: Request, ref: str) -> Response:
        version = model_version_get(ref=ref)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        version = model_version_serving_set(version=version, actor=request.user, **serializer.validated_data)
        return Response(ModelVersionOutputSerializer(version).data)


# ---------------------------------------------------------------------------------------------
# Eval suites
# ---------------------------------------------------------------------------------------------
class EvalSuiteOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    ref = serializers.SerializerMethodField()
    description = serializers.CharField()
    content_hash = serializers.CharField()
    item_count = serializers.IntegerField()
    is_demo = serializers.BooleanField()
    locked = serializers.BooleanField(help_text="Used by a gate run, so immutable.")
    created_at = serializers.DateTimeField()

    def get_ref(self, obj: EvalSuite) -> str:
        return f"{obj.name}@{obj.version}"


class EvalItemOutputSerializer(serializers.Serializer):
    id = serializers.CharField(source="external_id")
    input = serializers.CharField()
    label = serializers.CharField()
    reference = serializers.CharField()
    language = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    metadata = serializers.DictField()


_TEXT = {"type": "string", "pattern": "\\S"}
SUITE_ITEM = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "default: the item's position"},
        "input": _TEXT,
        "label": {"type": "string", "description": "the expected label (or give a reference)"},
        "reference": {"type": "string", "description": "a reference answer (or give a label)"},
        "language": {"type": "string", "maxLength": 10, "example": "zh"},
        "tags": {"type": "array", "items": _TEXT},
        "metadata": {"type": "object"},
    },
    "required": ["input"],
    "anyOf": [
        {"required": ["label"], "properties": {"label": _TEXT}},
        {"required": ["reference"], "properties": {"reference": _TEXT}},
    ],
    "additionalProperties": False,
}
_SUITE_COMMON = {
    "name": SLUG_SCHEMA,
    "description": {"type": "string"},
}
SUITE_UPLOAD_JSON = {
    "type": "object",
    "properties": {**_SUITE_COMMON, "items": {"type": "array", "items": SUITE_ITEM, "minItems": 1}},
    "required": ["name", "items"],
    "additionalProperties": False,
}
SUITE_UPLOAD_MULTIPART = {
    "type": "object",
    "properties": {
        **_SUITE_COMMON,
        "format": {"type": "string", "enum": ["jsonl", "csv"], "description": "default: from the file name"},
        "file": {"type": "string", "format": "binary", "description": "JSONL or CSV, one item a line"},
        "items": {"type": "string", "description": "instead of a file: the items as a JSON array"},
    },
    "required": ["name"],
    "oneOf": [{"required": ["file"]}, {"required": ["items"]}],
    "additionalProperties": False,
}


class EvalSuiteListApi(APIView):
    pagination_class = Pagination

    parser_classes = [MultiPartParser, JSONParser]

    class FilterSerializer(serializers.Serializer):
        name = serializers.CharField(required=False)
        limit = serializers.IntegerField(required=False, min_value=1)
        offset = serializers.IntegerField(required=False, min_value=0)

    class UploadSerializer(StrictSerializer):
        name = SlugNameField()
        description = serializers.CharField(required=False, allow_blank=True)
        format = serializers.ChoiceField(choices=["jsonl", "csv"], required=False)
        file = serializers.FileField(required=False)
        items = JSONField(required=False)

        def validate(self, data: dict[str, Any]) -> dict[str, Any]:
            if ("file" in data) == ("items" in data):
                raise serializers.ValidationError({"file": ["Send either a file or items, not both."]})
            return data

    @extend_schema(
        operation_id="eval_suites_list",
        parameters=[FilterSerializer],
        responses=EvalSuiteOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        filters = filter_params(request, self.FilterSerializer)
        return paginated(request, self, eval_suite_list(name=filters.get("name")), EvalSuiteOutputSerializer)

    @extend_schema(
        operation_id="eval_suite_upload",
        request={"application/json": SUITE_UPLOAD_JSON, "multipart/form-data": SUITE_UPLOAD_MULTIPART},
        responses={201: EvalSuiteOutputSerializer, 200: EvalSuiteOutputSerializer},
    )
    def post(self, request: Request) -> Response:
        limit = settings.EVALHUB_MAX_UPLOAD_BYTES
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        is_json = request.content_type.startswith("application/json")
        if length > limit:
            field = "items" if is_json else "file"
            raise ApplicationError(
                reason(ApiCode.UPLOAD_TOO_LARGE, size=length, limit=limit),
                code="too_large",
                fields={field: [reason(ApiCode.AT_MOST_BYTES, limit=limit)]},
                status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        serializer = self.UploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "file" in data:
            upload = data["file"]
            if upload.size > limit:
                raise ApplicationError(
                    reason(ApiCode.FILE_TOO_LARGE, name=upload.name, size=upload.size, limit=limit),
                    code="too_large",
                    fields={"file": [reason(ApiCode.AT_MOST_BYTES, limit=limit)]},
                    status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
                )
            fmt = data.get("format") or ("csv" if upload.name.lower().endswith(".csv") else "jsonl")
            items = suite_items_parse(content=upload.read(), fmt=fmt)
        else:
            items = suite_items_parse(records=data["items"])
        suite, created = eval_suite_import(
            name=data["name"], items=items, description=data.get("description", ""), actor=request.user
        )
        suite = eval_suite_get(ref=suite.pk)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(EvalSuiteOutputSerializer(suite).data, status=code)


class EvalSuiteDetailApi(APIView):
    @extend_schema(operation_id="eval_suite_get", responses=EvalSuiteOutputSerializer)
    def get(self, request: Request, ref: str) -> Response:
        return Response(EvalSuiteOutputSerializer(eval_suite_get(ref=ref)).data)


class EvalSuiteItemsApi(APIView):
    pagination_class = Pagination

    @extend_schema(operation_id="eval_suite_items_list", responses=EvalItemOutputSerializer(many=True))
    def get(self, request: Request, ref: str) -> Response:
        suite = eval_suite_get(ref=ref)
        return paginated(request, self, suite.items.all(), EvalItemOutputSerializer)


# ---------------------------------------------------------------------------------------------
# Gate runs
# ---------------------------------------------------------------------------------------------
