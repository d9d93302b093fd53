"""REST API v1. Thin: validate input, call a service or selector, serialize the result."""

from __future__ import annotations

import json
from typing import Any

from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import exceptions, renderers, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from engines.reasons import reason
from evalhub.api.common import (
    Pagination,
    ReasonListField,
    ReasonOutputSerializer,
    RecordRefField,
    StrictSerializer,
    SuiteRefField,
    VersionRefField,
    absolute_url,
    filter_params,
    paginated,
)
from evalhub.api.errors import ApiCode
from evalhub.exports import jsonl_response
from evalhub.wordings import WORDS, reason_payload
from gate.layers.base import to_json
from gate.layers.registry import gate_policy_read, layer_names
from gate.models import Decision, GateRun, LayerResult, SampleResult
from gate.reporting import gate_report_markdown
from gate.selectors.decisions import decision_get, decision_list
from gate.selectors.gate_runs import (
    adversarial_examples_export,
    gate_run_get,
    gate_run_list,
    sample_result_list,
)
from gate.services.decisions import REASON_MAX_LENGTH, decision_record
from gate.services.exports import shift_examples_export
from gate.services.gate_runs import gate_run_cancel, gate_run_error, gate_run_start
from gate.services.progress import gate_queue_snapshot, gate_run_live
from gate.services.report import gate_run_report
from registry.errors import ApplicationError, CommonCode, NotFoundError
from registry.models import EvalSuite, ModelVersion
from registry.roles import RELEASE_MANAGER
from registry.selectors.suites import eval_suite_get


class LayerResultOutputSerializer(serializers.ModelSerializer):
    samples_url = serializers.SerializerMethodField()
    reasons = ReasonListField()

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

    def get_samples_url(self, obj: LayerResult) -> str:
        url = reverse("api:gate-run-samples", kwargs={"pk": obj.gate_run_id}) + f"?layer={obj.layer}"
        return absolute_url(self.context, url)


class GateRunOutputSerializer(serializers.ModelSerializer):
    candidate = serializers.CharField(source="candidate.ref")
    baseline = serializers.CharField(source="baseline.ref", default=None, allow_null=True)
    suite = serializers.SerializerMethodField()
    policy = serializers.CharField(source="policy.name", default=None, allow_null=True)
    experiment = serializers.CharField(source="experiment.name", default=None, allow_null=True)
    layers = LayerResultOutputSerializer(many=True, read_only=True)
    verdict_reasons = ReasonListField()
    url = serializers.SerializerMethodField()
    html_url = serializers.SerializerMethodField()
    live = serializers.SerializerMethodField()
    stored_policy = serializers.SerializerMethodField()
    error_reason = serializers.SerializerMethodField()

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
            "stored_policy",
            "experiment",
            "status",
            "progress",
            "verdict",
            "verdict_reasons",
            "error_message",
            "error_reason",
            "attempts",
            "created_at",
            "started_at",
            "finished_at",
            "live",
            "layers",
        ]

    def get_suite(self, obj: GateRun) -> str:
        return f"{obj.suite.name}@{obj.suite.version}"

    def get_url(self, obj: GateRun) -> str:
        return absolute_url(self.context, reverse("api:gate-run-detail", kwargs={"pk": obj.pk}))

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_live(self, obj: GateRun) -> dict[str, Any]:
        """Per required layer: state, units done of total; elapsed and ETA (s); where the run is
        (`where`: running on `worker`, its worker silent, behind `runs_ahead` runs, next, or on a queue
        no live worker consumes; `queue_workers`: that queue's live workers, null when unknown) and
        `waiting_reason`, the same in the request's language."""
        if obj.status == GateRun.Status.QUEUED and "gate_queue" not in self.context:
            self.context["gate_queue"] = gate_queue_snapshot()  # once per list, not per row
        return dict(to_json(gate_run_live(run=obj, waiting=self.context.get("gate_queue"))))

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_stored_policy(self, obj: GateRun) -> dict[str, Any]:
        """What reading `policy_config` with this version found: `retired_keys` (keys it no longer
        knows, with their stored values; not applied), `defaulted_keys` (keys the snapshot lacks, with
        the value read for them), `invalid_keys` (stored values it would refuse, kept, with why)."""
        return dict(to_json(gate_policy_read(obj.policy_config).found))

    @extend_schema_field(ReasonOutputSerializer(allow_null=True))
    def get_error_reason(self, obj: GateRun) -> dict[str, Any] | None:
        """Why the run ended in error or failed: `code`, `params` and `message` in the request's
        language (`error_message` is the English sentence; a run from before codes has no code)."""
        error = gate_run_error(run=obj)
        return None if error is None else reason_payload(error)

    def get_html_url(self, obj: GateRun) -> str:
        """The run's page for people (reports, attribution, decisions)."""
        return absolute_url(self.context, reverse("gate-run-detail", kwargs={"pk": obj.pk}))


class GateRunListApi(APIView):
    pagination_class = Pagination

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

    @extend_schema(
        operation_id="gate_runs_list",
        parameters=[FilterSerializer],
        responses=GateRunOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        filters = filter_params(request, self.FilterSerializer)
        runs = gate_run_list(filters=filters).prefetch_related("layers")
        return paginated(request, self, runs, GateRunOutputSerializer)

    @extend_schema(
        operation_id="gate_run_start", request=InputSerializer, responses={202: GateRunOutputSerializer}
    )
    def post(self, request: Request) -> Response:
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
    def _family_suite(candidate: ModelVersion) -> EvalSuite:
        try:
            return eval_suite_get(ref=candidate.family)
        except NotFoundError:
            raise ApplicationError(
                reason(ApiCode.NO_SUITE, name=candidate.family),
                fields={"suite": [reason(CommonCode.REQUIRED)]},
            ) from None


class GateRunDetailApi(APIView):
    @extend_schema(operation_id="gate_run_get", responses=GateRunOutputSerializer)
    def get(self, request: Request, pk: int) -> Response:
        run = gate_run_get(gate_run_id=pk)
        return Response(GateRunOutputSerializer(run, context={"request": request}).data)


class GateRunCancelApi(APIView):
    class InputSerializer(StrictSerializer):
        reason = serializers.CharField(
            required=False, allow_blank=True, max_length=REASON_MAX_LENGTH, help_text="why, for the audit log"
        )

    @extend_schema(operation_id="gate_run_cancel", request=InputSerializer, responses=GateRunOutputSerializer)
    def post(self, request: Request, pk: int) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        gate_run_get(gate_run_id=pk)  # a 404 naming the run before any permission question
        gate_run_cancel(gate_run_id=pk, actor=request.user, why=serializer.validated_data.get("reason", ""))
        run = gate_run_get(gate_run_id=pk)
        return Response(GateRunOutputSerializer(run, context={"request": request}).data)


class GateRunAdversarialApi(APIView):
    """Layer 1's perturbed examples of a run as JSONL (`gate.selectors.gate_runs.
    adversarial_examples_export`): training data for the next version."""

    @extend_schema(
        operation_id="gate_run_adversarial_export",
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR},
    )
    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        run = gate_run_get(gate_run_id=pk)
        rows = adversarial_examples_export(run=run)
        return jsonl_response(rows=rows, filename=f"gate-run-{run.pk}-adversarial.jsonl")


class GateRunShiftExamplesApi(APIView):
    """The run's suite-vs-live shift examples as JSONL (`gate.services.exports.shift_examples_export`):
    per language, the live questions farthest from the suite. 404 when the run has no shift result."""

    @extend_schema(
        operation_id="gate_run_shift_examples_export",
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR},
    )
    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        run = gate_run_get(gate_run_id=pk)
        rows = shift_examples_export(run=run)
        return jsonl_response(rows=rows, filename=f"gate-run-{run.pk}-shift-examples.jsonl")


class MarkdownRenderer(renderers.BaseRenderer):
    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict[str, Any] | None = None,
    ) -> bytes:
        return data.encode(self.charset) if isinstance(data, str) else json.dumps(data).encode(self.charset)


class GateRunReportApi(APIView):
    """The run's report: JSON, or Markdown for audits (`?format=md` or `Accept: text/markdown`)."""

    renderer_classes = [renderers.JSONRenderer, MarkdownRenderer]

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        if response.status_code >= 400:  # errors keep the one JSON shape, whatever was asked for
            request.accepted_renderer, request.accepted_media_type = (
                renderers.JSONRenderer(),
                "application/json",
            )
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(
        operation_id="gate_run_report",
        responses={(200, "application/json"): OpenApiTypes.OBJECT, (200, "text/markdown"): OpenApiTypes.STR},
    )
    def get(self, request: Request, pk: int) -> Response:
        report = gate_run_report(run=gate_run_get(gate_run_id=pk))
        if request.accepted_renderer.format == "md":
            return Response(gate_report_markdown(report, words=WORDS))
        return Response(to_json(report, words=WORDS))


class SampleOutputSerializer(serializers.Serializer):
    layer = serializers.CharField(source="layer_result.layer")
    sample_index = serializers.IntegerField(allow_null=True)
    perturbation = serializers.CharField()
    diff = serializers.CharField()
    version = serializers.CharField(source="version.ref")
    item_id = serializers.CharField(source="item.external_id", default=None, allow_null=True)
    repeat = serializers.IntegerField(help_text="Which of the item's repeated answers, from 0.")
    input = serializers.SerializerMethodField()
    expected_label = serializers.CharField(source="item.label", default="")
    reference = serializers.CharField(source="item.reference", default="")
    tags = serializers.ListField(source="item.tags", default=list)
    output_label = serializers.CharField()
    output_text = serializers.CharField()
    correct = serializers.BooleanField(allow_null=True)
    latency_ms = serializers.FloatField()
    error = serializers.CharField()

    def get_input(self, obj: SampleResult) -> str:
        return obj.input_text or (obj.item.input if obj.item else "")


class GateRunSamplesApi(APIView):
    pagination_class = Pagination

    class FilterSerializer(serializers.Serializer):
        layer = serializers.ChoiceField(choices=(), required=False)
        version = VersionRefField(required=False)
        correct = serializers.BooleanField(required=False, allow_null=True, default=None)
        item = serializers.CharField(required=False, max_length=200, help_text="an item's id")
        limit = serializers.IntegerField(required=False, min_value=1)
        offset = serializers.IntegerField(required=False, min_value=0)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.fields["layer"].choices = layer_names()  # the installed apps' layers, as they are now

    @extend_schema(
        operation_id="gate_run_samples_list",
        parameters=[FilterSerializer],
        responses=SampleOutputSerializer(many=True),
        description="Per-item model outputs of a gate run, for drill-down.",
    )
    def get(self, request: Request, pk: int) -> Response:
        run = gate_run_get(gate_run_id=pk)
        filters = filter_params(request, self.FilterSerializer)
        queryset = sample_result_list(
            run=run,
            layer=filters.get("layer"),
            version=filters.get("version"),
            correct=filters.get("correct"),
            item=filters.get("item"),
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

    def get_url(self, obj: Decision) -> str:
        return absolute_url(self.context, reverse("api:decision-detail", kwargs={"pk": obj.pk}))

    def get_confirmation(self, obj: Decision) -> int | None:
        confirmation = getattr(obj, "confirmation", None)
        return confirmation.pk if confirmation else None


class ImmutableApi(APIView):
    """Decisions are never changed: PUT/PATCH/DELETE answer 405 whoever asks."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if request.method in ("PUT", "PATCH", "DELETE"):
            raise exceptions.MethodNotAllowed(request.method)
        super().initial(request, *args, **kwargs)


class DecisionListApi(ImmutableApi):
    pagination_class = Pagination

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
        gate_run = RecordRefField(
            queryset=GateRun.objects.all(),
            noun="gate run",
            required=False,
            help_text="The gate run decided on; refused when a newer one has finished. Default: the latest.",
        )
        confirms = RecordRefField(
            queryset=Decision.objects.all(),
            noun="decision",
            required=False,
            help_text="override_confirm, incumbent_confirm: the id of the request it confirms.",
        )

    @extend_schema(
        operation_id="decisions_list",
        parameters=[FilterSerializer],
        responses=DecisionOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        filters = filter_params(request, self.FilterSerializer)
        return paginated(request, self, decision_list(filters=filters), DecisionOutputSerializer)

    @extend_schema(
        operation_id="decision_record", request=InputSerializer, responses={201: DecisionOutputSerializer}
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        decision = decision_record(actor=request.user, **serializer.validated_data)
        body = DecisionOutputSerializer(decision, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": body["url"]})


class DecisionDetailApi(ImmutableApi):
    @extend_schema(operation_id="decision_get", responses=DecisionOutputSerializer)
    def get(self, request: Request, pk: int) -> Response:
        decision = decision_get(decision_id=pk)
        return Response(DecisionOutputSerializer(decision, context={"request": request}).data)
