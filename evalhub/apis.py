"""REST API v1. Thin: validate input, call a service or selector, serialize the result."""

from __future__ import annotations

import json

from django.conf import settings
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, renderers, serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from evalhub.errors import ApplicationError, NotFoundError
from evalhub.gate.report_md import gate_report_markdown
from evalhub.models import Decision, GateRun, LayerResult, ModelVersion
from evalhub.roles import RELEASE_MANAGER
from evalhub.selectors.decisions import decision_get, decision_list
from evalhub.selectors.gate_runs import gate_run_get, gate_run_list, sample_result_list
from evalhub.selectors.suites import eval_suite_get, eval_suite_list
from evalhub.selectors.versions import model_version_get, model_version_list
from evalhub.services.decisions import REASON_MAX_LENGTH, decision_record
from evalhub.services.gate_report import gate_run_report
from evalhub.services.gate_runs import gate_run_start
from evalhub.services.suites import eval_suite_import, suite_items_parse
from evalhub.services.versions import model_version_register, model_version_transition


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
class ModelVersionOutputSerializer(serializers.ModelSerializer):
    ref = serializers.CharField(read_only=True)
    baseline = serializers.CharField(source="baseline.ref", default=None)
    has_api_key = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", default=None)

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

    def get_has_api_key(self, obj) -> bool:
        return bool(obj.api_key)


class ModelVersionListApi(APIView):
    class FilterSerializer(serializers.Serializer):
        family = serializers.CharField(required=False)
        label = serializers.CharField(required=False)
        status = serializers.ChoiceField(choices=ModelVersion.Status.choices, required=False)
        backend_kind = serializers.ChoiceField(choices=ModelVersion.BackendKind.choices, required=False)
        limit = serializers.IntegerField(required=False, min_value=1)
        offset = serializers.IntegerField(required=False, min_value=0)

    class InputSerializer(StrictSerializer):
        family = serializers.CharField(max_length=100)
        label = serializers.CharField(max_length=100)
        backend_kind = serializers.ChoiceField(choices=ModelVersion.BackendKind.choices)
        backend_config = serializers.DictField()
        api_key = serializers.CharField(required=False, allow_blank=True, write_only=True, max_length=500)
        baseline = VersionRefField(required=False, allow_null=True)
        description = serializers.CharField(required=False, allow_blank=True)
        status = serializers.ChoiceField(choices=["registered", "promoted"], required=False)
        serving_url = serializers.URLField(
            required=False,
            allow_blank=True,
            max_length=500,
            help_text="OpenAI-compatible base URL for live traffic",
        )

    @extend_schema(parameters=[FilterSerializer], responses=ModelVersionOutputSerializer(many=True))
    def get(self, request):
        filters = filter_params(request, self.FilterSerializer)
        return paginated(request, self, model_version_list(filters=filters), ModelVersionOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: ModelVersionOutputSerializer})
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        version = model_version_register(actor=request.user, **serializer.validated_data)
        return Response(ModelVersionOutputSerializer(version).data, status=status.HTTP_201_CREATED)


class ModelVersionDetailApi(APIView):
    @extend_schema(responses=ModelVersionOutputSerializer)
    def get(self, request, ref: str):
        return Response(ModelVersionOutputSerializer(model_version_get(ref=ref)).data)


class ModelVersionTransitionApi(APIView):
    """Move a version along its lifecycle (release managers only)."""

    write_roles = frozenset({RELEASE_MANAGER})

    class InputSerializer(StrictSerializer):
        status = serializers.ChoiceField(choices=ModelVersion.Status.choices)
        reason = serializers.CharField(max_length=2000)

        def validate_status(self, value):
            # Approval and rejection are release decisions, with their own rules and record.
            if value in (ModelVersion.Status.APPROVED, ModelVersion.Status.REJECTED):
                raise serializers.ValidationError(
                    f"A version is {value} by a decision: use POST /api/v1/decisions/."
                )
            return value

    @extend_schema(request=InputSerializer, responses=ModelVersionOutputSerializer)
    def post(self, request, ref: str):
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

    def get_ref(self, obj) -> str:
        return f"{obj.name}@{obj.version}"


class EvalItemOutputSerializer(serializers.Serializer):
    id = serializers.CharField(source="external_id")
    input = serializers.CharField()
    label = serializers.CharField()
    reference = serializers.CharField()
    language = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    metadata = serializers.DictField()


class EvalSuiteListApi(APIView):
    parser_classes = [MultiPartParser, JSONParser]

    class FilterSerializer(serializers.Serializer):
        name = serializers.CharField(required=False)
        limit = serializers.IntegerField(required=False, min_value=1)
        offset = serializers.IntegerField(required=False, min_value=0)

    class UploadSerializer(StrictSerializer):
        name = serializers.SlugField(max_length=100)
        description = serializers.CharField(required=False, allow_blank=True)
        format = serializers.ChoiceField(choices=["jsonl", "csv"], required=False)
        file = serializers.FileField(required=False)
        items = serializers.JSONField(required=False)

        def validate(self, data):
            if ("file" in data) == ("items" in data):
                raise serializers.ValidationError({"file": ["Send either a file or items, not both."]})
            return data

    @extend_schema(parameters=[FilterSerializer], responses=EvalSuiteOutputSerializer(many=True))
    def get(self, request):
        filters = filter_params(request, self.FilterSerializer)
        return paginated(request, self, eval_suite_list(name=filters.get("name")), EvalSuiteOutputSerializer)

    @extend_schema(
        request={"multipart/form-data": UploadSerializer, "application/json": UploadSerializer},
        responses={201: EvalSuiteOutputSerializer, 200: EvalSuiteOutputSerializer},
    )
    def post(self, request):
        limit = settings.EVALHUB_MAX_UPLOAD_BYTES
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        is_json = request.content_type.startswith("application/json")
        if length > limit:
            field = "items" if is_json else "file"
            raise ApplicationError(
                f"The upload is {length} bytes, over the limit of {limit}.",
                code="too_large",
                fields={field: [f"at most {limit} bytes"]},
                status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        serializer = self.UploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "file" in data:
            upload = data["file"]
            if upload.size > limit:
                raise ApplicationError(
                    f"{upload.name} is {upload.size} bytes, over the limit of {limit}.",
                    code="too_large",
                    fields={"file": [f"at most {limit} bytes"]},
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
    @extend_schema(responses=EvalSuiteOutputSerializer)
    def get(self, request, ref: str):
        return Response(EvalSuiteOutputSerializer(eval_suite_get(ref=ref)).data)


class EvalSuiteItemsApi(APIView):
    @extend_schema(responses=EvalItemOutputSerializer(many=True))
    def get(self, request, ref: str):
        suite = eval_suite_get(ref=ref)
        return paginated(request, self, suite.items.all(), EvalItemOutputSerializer)


# ---------------------------------------------------------------------------------------------
# Gate runs
# ---------------------------------------------------------------------------------------------
class LayerResultOutputSerializer(serializers.ModelSerializer):
    samples_url = serializers.SerializerMethodField()

    class Meta:
        model = LayerResult
        fields = [
            "layer",
            "verdict",
            "metric",
            "estimate",
            "ci_low",
            "ci_high",
            "threshold",
            "reasons",
            "details",
            "wall_seconds",
            "device",
            "samples_url",
        ]

    def get_samples_url(self, obj) -> str:
        url = reverse("api:gate-run-samples", kwargs={"pk": obj.gate_run_id}) + f"?layer={obj.layer}"
        return absolute_url(self.context, url)


class GateRunOutputSerializer(serializers.ModelSerializer):
    candidate = serializers.CharField(source="candidate.ref")
    baseline = serializers.CharField(source="baseline.ref", default=None)
    suite = serializers.SerializerMethodField()
    policy = serializers.CharField(source="policy.name", default=None)
    experiment = serializers.CharField(source="experiment.name", default=None)
    layers = LayerResultOutputSerializer(many=True, read_only=True)
    url = serializers.SerializerMethodField()
    html_url = serializers.SerializerMethodField()

    class Meta:
        model = GateRun
        fields = [
            "id",
            "url",
            "html_url",
            "candidate",
            "baseline",
            "suite",
            "policy",
            "policy_config",
            "experiment",
            "status",
            "progress",
            "verdict",
            "verdict_reasons",
            "error_message",
            "attempts",
            "created_at",
            "started_at",
            "finished_at",
            "layers",
        ]

    def get_suite(self, obj) -> str:
        return f"{obj.suite.name}@{obj.suite.version}"

    def get_url(self, obj) -> str:
        return absolute_url(self.context, reverse("api:gate-run-detail", kwargs={"pk": obj.pk}))

    def get_html_url(self, obj) -> str:
        """The run's page for people (reports, attribution, decisions)."""
        return absolute_url(self.context, reverse("gate-run-detail", kwargs={"pk": obj.pk}))


class GateRunListApi(APIView):
    class FilterSerializer(serializers.Serializer):
        candidate = VersionRefField(required=False)
        status = serializers.ChoiceField(choices=GateRun.Status.choices, required=False)
        verdict = serializers.ChoiceField(choices=GateRun.Verdict.choices, required=False)
        limit = serializers.IntegerField(required=False, min_value=1)
        offset = serializers.IntegerField(required=False, min_value=0)

    class InputSerializer(StrictSerializer):
        candidate = VersionRefField()
        baseline = VersionRefField(required=False, allow_null=True)
        suite = SuiteRefField(
            required=False,
            help_text="id, name@version or name; default: the latest suite named as the family.",
        )
        policy = serializers.CharField(
            required=False, help_text="default: the policy named as the family if any, else `default`"
        )
        policy_overrides = serializers.DictField(required=False)
        experiment = serializers.CharField(
            required=False,
            help_text="the canary experiment whose traffic feeds layers 2 and 3; default: the candidate's "
            "running or latest experiment",
        )

    @extend_schema(parameters=[FilterSerializer], responses=GateRunOutputSerializer(many=True))
    def get(self, request):
        filters = filter_params(request, self.FilterSerializer)
        return paginated(request, self, gate_run_list(filters=filters), GateRunOutputSerializer)

    @extend_schema(request=InputSerializer, responses={202: GateRunOutputSerializer})
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        candidate = data["candidate"]
        suite = data.get("suite") or self._family_suite(candidate)
        run = gate_run_start(
            candidate=candidate,
            baseline=data.get("baseline"),
            suite=suite,
            policy_name=data.get("policy"),
            policy_overrides=data.get("policy_overrides"),
            experiment_name=data.get("experiment"),
            actor=request.user,
        )
        body = GateRunOutputSerializer(gate_run_get(gate_run_id=run.pk), context={"request": request}).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})

    @staticmethod
    def _family_suite(candidate):
        try:
            return eval_suite_get(ref=candidate.family)
        except NotFoundError:
            raise ApplicationError(
                f"No suite named {candidate.family!r}; name one.", fields={"suite": ["required"]}
            ) from None


class GateRunDetailApi(APIView):
    @extend_schema(responses=GateRunOutputSerializer)
    def get(self, request, pk: int):
        run = gate_run_get(gate_run_id=pk)
        return Response(GateRunOutputSerializer(run, context={"request": request}).data)


class MarkdownRenderer(renderers.BaseRenderer):
    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data.encode(self.charset) if isinstance(data, str) else json.dumps(data).encode(self.charset)


class GateRunReportApi(APIView):
    """The run's report: JSON, or Markdown for audits (`?format=md` or `Accept: text/markdown`)."""

    renderer_classes = [renderers.JSONRenderer, MarkdownRenderer]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, pk: int):
        report = gate_run_report(run=gate_run_get(gate_run_id=pk))
        if request.accepted_renderer.format == "md":
            return Response(gate_report_markdown(report))
        return Response(report)


class SampleOutputSerializer(serializers.Serializer):
    layer = serializers.CharField(source="layer_result.layer")
    sample_index = serializers.IntegerField(allow_null=True)
    perturbation = serializers.CharField()
    diff = serializers.CharField()
    version = serializers.CharField(source="version.ref")
    item_id = serializers.CharField(source="item.external_id", default=None)
    input = serializers.SerializerMethodField()
    expected_label = serializers.CharField(source="item.label", default="")
    reference = serializers.CharField(source="item.reference", default="")
    tags = serializers.ListField(source="item.tags", default=list)
    output_label = serializers.CharField()
    output_text = serializers.CharField()
    correct = serializers.BooleanField(allow_null=True)
    latency_ms = serializers.FloatField()
    error = serializers.CharField()

    def get_input(self, obj) -> str:
        return obj.input_text or (obj.item.input if obj.item else "")


class GateRunSamplesApi(APIView):
    class FilterSerializer(serializers.Serializer):
        layer = serializers.ChoiceField(choices=LayerResult.Layer.choices, required=False)
        version = VersionRefField(required=False)
        correct = serializers.BooleanField(required=False, allow_null=True, default=None)
        limit = serializers.IntegerField(required=False, min_value=1)
        offset = serializers.IntegerField(required=False, min_value=0)

    @extend_schema(
        parameters=[FilterSerializer],
        responses=SampleOutputSerializer(many=True),
        description="Per-item model outputs of a gate run, for drill-down.",
    )
    def get(self, request, pk: int):
        run = gate_run_get(gate_run_id=pk)
        filters = filter_params(request, self.FilterSerializer)
        queryset = sample_result_list(
            run=run,
            layer=filters.get("layer"),
            version=filters.get("version"),
            correct=filters.get("correct"),
        )
        return paginated(request, self, queryset, SampleOutputSerializer)


# ---------------------------------------------------------------------------------------------
# Release decisions
# ---------------------------------------------------------------------------------------------
class DecisionOutputSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    version = serializers.CharField(source="version.ref")
    gate_run = serializers.IntegerField(source="gate_run_id", allow_null=True)
    confirms = serializers.IntegerField(source="confirms_id", allow_null=True)
    confirmation = serializers.SerializerMethodField(help_text="For an override request: its confirmation.")
    decided_by = serializers.CharField(source="decided_by.username")

    class Meta:
        model = Decision
        fields = [
            "id",
            "url",
            "version",
            "action",
            "reason",
            "gate_run",
            "gate_verdict",
            "confirms",
            "confirmation",
            "decided_by",
            "created_at",
        ]

    def get_url(self, obj) -> str:
        return absolute_url(self.context, reverse("api:decision-detail", kwargs={"pk": obj.pk}))

    def get_confirmation(self, obj) -> int | None:
        confirmation = getattr(obj, "confirmation", None)
        return confirmation.pk if confirmation else None


class ImmutableApi(APIView):
    """Decisions are never changed: PUT/PATCH/DELETE answer 405 whoever asks."""

    def initial(self, request, *args, **kwargs):
        if request.method in ("PUT", "PATCH", "DELETE"):
            raise exceptions.MethodNotAllowed(request.method)
        super().initial(request, *args, **kwargs)


class DecisionListApi(ImmutableApi):
    write_roles = frozenset({RELEASE_MANAGER})

    class FilterSerializer(serializers.Serializer):
        version = VersionRefField(required=False)
        action = serializers.ChoiceField(choices=Decision.Action.choices, required=False)
        limit = serializers.IntegerField(required=False, min_value=1)
        offset = serializers.IntegerField(required=False, min_value=0)

    class InputSerializer(StrictSerializer):
        version = VersionRefField()
        action = serializers.ChoiceField(choices=Decision.Action.choices)
        reason = serializers.CharField(max_length=REASON_MAX_LENGTH)
        gate_run = serializers.PrimaryKeyRelatedField(
            queryset=GateRun.objects.all(),
            required=False,
            help_text="The gate run decided on; refused when a newer one has finished. Default: the latest.",
        )
        confirms = serializers.PrimaryKeyRelatedField(
            queryset=Decision.objects.all(), required=False, help_text="override_confirm: the request's id."
        )

    @extend_schema(parameters=[FilterSerializer], responses=DecisionOutputSerializer(many=True))
    def get(self, request):
        filters = filter_params(request, self.FilterSerializer)
        return paginated(request, self, decision_list(filters=filters), DecisionOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: DecisionOutputSerializer})
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        decision = decision_record(actor=request.user, **serializer.validated_data)
        body = DecisionOutputSerializer(decision, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": body["url"]})


class DecisionDetailApi(ImmutableApi):
    @extend_schema(responses=DecisionOutputSerializer)
    def get(self, request, pk: int):
        decision = decision_get(decision_id=pk)
        return Response(DecisionOutputSerializer(decision, context={"request": request}).data)


@extend_schema(exclude=True)
class ApiNotFound(APIView):
    permission_classes = []
    authentication_classes = []

    def get(self, request, *args, **kwargs):
        raise NotFoundError(f"No API endpoint at {request.path}.")

    post = put = patch = delete = get
