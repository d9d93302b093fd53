"""Canary REST API: experiments (release managers), assignment and telemetry (the chat app)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from canary.models import SHADOW_STEP, CanaryAnalysis, Experiment, ProbeRun
from canary.selectors.experiments import analyses_latest, experiment_get, experiment_get_live, experiment_list
from canary.selectors.listings import experiments_live, probe_runs_list, probe_sets_list
from canary.services import experiments as lifecycle
from canary.services.assignment import experiment_assign
from canary.services.events import events_ingest
from canary.services.plans import experiment_unblind, unblind_permission_require
from canary.services.probes import probe_runs_request, probe_set_import_jsonl
from canary.services.proxy import ProxyAnswer, chat_completion_proxy
from canary.services.proxy_stream import ProxyStream, chat_completion_stream
from engines.reasons import reason
from engines.routing import ARMS
from evalhub.api.common import SlugNameField, StrictSerializer, VersionRefField
from evalhub.api.errors import ApiCode
from evalhub.api.schema import ErrorSerializer, ReasonSerializer
from evalhub.wordings import reasons_words
from gate.services.horizons import experiment_plans_register_again, experiment_start_registered
from gate.services.shadow_panel import shadow_panel_build
from registry.errors import ApplicationError
from registry.roles import APP, CI, READ_ROLES, RELEASE_MANAGER

APP_ROLES = frozenset({APP, CI, RELEASE_MANAGER})


class AnalysisOutputSerializer(serializers.ModelSerializer):
    reasons = serializers.SerializerMethodField(help_text="Each reason in the request's language.")
    reason_codes = serializers.SerializerMethodField(
        help_text="Each reason as its code and parameters; null for an analysis stored before codes."
    )

    class Meta:
        model = CanaryAnalysis
        fields = ["id", "verdict", "reasons", "reason_codes", "metrics", "action", "created_at"]

    def get_reasons(self, analysis: CanaryAnalysis) -> list[str]:
        return reasons_words(analysis.reasons)

    @extend_schema_field(ReasonSerializer(many=True, allow_null=True))
    def get_reason_codes(self, analysis: CanaryAnalysis) -> list[dict[str, Any]] | None:
        stored = analysis.reasons
        return stored if all(isinstance(item, dict) for item in stored) else None


class ProbeRunOutputSerializer(serializers.ModelSerializer):
    probe_set = serializers.CharField(source="probe_set.name")

    class Meta:
        model = ProbeRun
        fields = ["id", "probe_set", "status", "report", "error", "started_at", "finished_at"]


@extend_schema_field({"oneOf": [{"type": "number"}, {"type": "string", "enum": [SHADOW_STEP]}]})
class RampStepField(serializers.Field):
    """A ramp plan's step: a share in percent, or "shadow" (the first step only: every user on the
    baseline, questions mirrored to the candidate)."""

    default_error_messages = {"invalid": _('a number, or "shadow" as the first step')}

    def to_internal_value(self, data: object) -> float | str:
        if data == SHADOW_STEP:
            return SHADOW_STEP
        if not isinstance(data, bool) and isinstance(data, int | float | str):
            try:
                return float(data)
            except ValueError:
                pass
        raise serializers.ValidationError(self.error_messages["invalid"], code="invalid")

    def to_representation(self, value: object) -> float | str:
        return SHADOW_STEP if value == SHADOW_STEP else float(value)  # type: ignore[arg-type]


class ShadowSummarySerializer(serializers.Serializer):
    """The shadow window (`gate.services.shadow_panel.ShadowPanel`): mirrored questions, each the
    baseline's answer and the candidate's; rates are fractions, latency in ms."""

    active = serializers.BooleanField(help_text="at the shadow step now")
    shadow_percent = serializers.FloatField()
    require_clean = serializers.BooleanField()
    first_at = serializers.DateTimeField(allow_null=True)
    last_at = serializers.DateTimeField(allow_null=True)
    verdict = serializers.CharField(source="comparison.verdict")
    reasons = serializers.SerializerMethodField(help_text="Each reason in the request's language.")
    reason_codes = serializers.SerializerMethodField()
    pairs = serializers.IntegerField(source="comparison.pairs")
    dropped = serializers.IntegerField(source="comparison.dropped")
    labelled = serializers.IntegerField(source="comparison.labelled")
    agree = serializers.IntegerField(source="comparison.agree")
    agreement = serializers.FloatField(source="comparison.agreement", allow_null=True)
    agreement_interval = serializers.ListField(
        child=serializers.FloatField(), source="comparison.agreement_interval", allow_null=True
    )
    similarity = serializers.FloatField(
        source="comparison.similarity", allow_null=True, help_text="mean chrF"
    )
    candidate_errors = serializers.IntegerField(source="comparison.candidate_errors")
    baseline_errors = serializers.IntegerField(source="comparison.baseline_errors")
    error_difference = serializers.FloatField(source="comparison.error_difference", allow_null=True)
    error_interval = serializers.ListField(
        child=serializers.FloatField(), source="comparison.error_interval", allow_null=True
    )
    candidate_latency_ms = serializers.FloatField(source="comparison.candidate_latency_ms", allow_null=True)
    baseline_latency_ms = serializers.FloatField(source="comparison.baseline_latency_ms", allow_null=True)
    latency_ratio = serializers.FloatField(source="comparison.latency_ratio", allow_null=True)
    latency_interval = serializers.ListField(
        child=serializers.FloatField(), source="comparison.latency_interval", allow_null=True
    )
    candidate_first_token_ms = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "ShadowSummary"

    def get_reasons(self, panel: Any) -> list[str]:
        return reasons_words([item.to_json() for item in panel.comparison.reasons])

    @extend_schema_field(ReasonSerializer(many=True))
    def get_reason_codes(self, panel: Any) -> list[dict[str, Any]]:
        return [item.to_json() for item in panel.comparison.reasons]


class ArmLiveSerializer(serializers.Serializer):
    users = serializers.IntegerField()
    sessions = serializers.IntegerField()
    questions = serializers.IntegerField()
    answers = serializers.IntegerField()
    errors = serializers.IntegerField()
    fallbacks = serializers.IntegerField()
    outcomes = serializers.IntegerField()


class LiveSerializer(serializers.Serializer):
    baseline = ArmLiveSerializer()
    candidate = ArmLiveSerializer()


class UnblindedSerializer(serializers.Serializer):
    """Who unblinded the traffic layers before their looks, when and why (null: blind)."""

    by = serializers.CharField(source="unblinded_by_name")
    at = serializers.DateTimeField(source="unblinded_at")
    reason = serializers.CharField(source="unblind_reason")

    def to_representation(self, instance: Experiment) -> dict[str, Any] | None:
        return None if instance.unblinded_at is None else super().to_representation(instance)


class ExperimentOutputSerializer(serializers.Serializer):
    """An experiment with its live figures per arm (users, sessions, questions, answers, errors,
    fallbacks, outcomes; probe traffic apart) and its latest analysis. Serializes `ExperimentLive`."""

    id = serializers.IntegerField(source="experiment.pk")
    name = serializers.CharField(source="experiment.name")
    family = serializers.CharField(source="experiment.family")
    baseline = serializers.CharField(source="experiment.baseline.ref")
    candidate = serializers.CharField(source="experiment.candidate.ref")
    status = serializers.CharField(source="experiment.status")
    traffic_percent = serializers.FloatField(source="experiment.traffic_percent")
    ramp = serializers.ListField(child=RampStepField(), source="experiment.ramp")
    ramp_step = serializers.IntegerField(source="experiment.ramp_step")
    shadow_percent = serializers.FloatField(source="experiment.shadow_percent")
    require_clean_shadow = serializers.BooleanField(source="experiment.require_clean_shadow")
    ramp_auto = serializers.BooleanField(source="experiment.ramp_auto")
    guardrails = serializers.DictField(source="experiment.guardrails")
    end_reason = serializers.CharField(source="experiment.end_reason")
    created_by = serializers.CharField(source="experiment.created_by.username", default=None, allow_null=True)
    created_at = serializers.DateTimeField(source="experiment.created_at")
    started_at = serializers.DateTimeField(source="experiment.started_at", allow_null=True)
    ended_at = serializers.DateTimeField(source="experiment.ended_at", allow_null=True)
    business_horizon = serializers.DictField(
        source="experiment.business_horizon",
        help_text="layer 3's plan, registered at the start: its frozen settings, units_per_arm, basis, "
        "counted_from, and its one look once taken",
    )
    follow_up_horizon = serializers.DictField(
        source="experiment.follow_up_horizon",
        help_text="layer 2's plan: its frozen settings, answers_per_arm, basis, and its one look once taken",
    )
    unblinded = UnblindedSerializer(source="experiment", allow_null=True)
    live = LiveSerializer(source="arms")
    latest_analysis = AnalysisOutputSerializer(allow_null=True)


def experiment_output(experiment: Experiment) -> dict[str, Any]:
    """One experiment as the API answers it (its live figures read in a fixed number of queries)."""
    return dict(ExperimentOutputSerializer(experiments_live(experiments=[experiment])[0]).data)


class ExperimentListApi(APIView):
    write_roles = frozenset({RELEASE_MANAGER})

    class InputSerializer(StrictSerializer):
        name = SlugNameField()
        baseline = VersionRefField()
        candidate = VersionRefField()
        traffic_percent = serializers.FloatField(required=False)
        ramp = serializers.ListField(
            child=RampStepField(),
            required=False,
            max_length=20,
            help_text='increasing shares in percent; the first may be "shadow", e.g. ["shadow", 1, 10, 100]',
        )
        ramp_auto = serializers.BooleanField(required=False, default=False)
        shadow_percent = serializers.FloatField(
            required=False, default=100.0, help_text="the share of questions mirrored at the shadow step"
        )
        require_clean_shadow = serializers.BooleanField(required=False, default=False)
        guardrails = serializers.DictField(required=False)
        qa_tokens = serializers.ListField(
            child=serializers.CharField(min_length=16, max_length=200), required=False, max_length=20
        )

    @extend_schema(operation_id="experiments_list", responses=ExperimentOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response(
            ExperimentOutputSerializer(experiments_live(experiments=experiment_list()), many=True).data
        )

    @extend_schema(
        operation_id="experiment_create", request=InputSerializer, responses={201: ExperimentOutputSerializer}
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        experiment = lifecycle.experiment_create(
            name=data["name"],
            baseline=data["baseline"],
            candidate=data["candidate"],
            traffic_percent=data.get("traffic_percent"),
            ramp=data.get("ramp"),
            ramp_auto=data["ramp_auto"],
            guardrails=data.get("guardrails"),
            qa_tokens=data.get("qa_tokens", ()),
            shadow_percent=data["shadow_percent"],
            require_clean_shadow=data["require_clean_shadow"],
            actor=request.user,
        )
        return Response(experiment_output(experiment), status=status.HTTP_201_CREATED)


class ExperimentDetailOutputSerializer(ExperimentOutputSerializer):
    """An experiment as `ExperimentOutputSerializer` has it, with its shadow window (null: no shadow
    step and no shadow answers)."""

    shadow = ShadowSummarySerializer(allow_null=True)

    class Meta:
        ref_name = "ExperimentDetail"


class ExperimentDetailApi(APIView):
    @extend_schema(operation_id="experiment_get", responses=ExperimentDetailOutputSerializer)
    def get(self, request: Request, name: str) -> Response:
        experiment = experiment_get(name=name)
        shadow = shadow_panel_build(experiment=experiment)
        return Response(
            {
                **experiment_output(experiment),
                "shadow": None if shadow is None else ShadowSummarySerializer(shadow).data,
            }
        )


class ExperimentActionApi(APIView):
    """start, pause, resume, ramp, rollback, promote (release managers; audited)."""

    write_roles = frozenset({RELEASE_MANAGER})
    ACTIONS = ("start", "pause", "resume", "ramp", "rollback", "promote")

    class InputSerializer(StrictSerializer):
        reason = serializers.CharField(max_length=2000, required=False, default="")
        traffic_percent = serializers.FloatField(required=False, help_text="ramp only; default: next step")

    @extend_schema(
        operation_id="experiment_act", request=InputSerializer, responses=ExperimentOutputSerializer
    )
    def post(self, request: Request, name: str, action: str) -> Response:
        experiment = experiment_get(name=name)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "traffic_percent" in data and action != "ramp":
            raise serializers.ValidationError({"traffic_percent": ["only for ramp"]})
        common = {"experiment": experiment, "actor": request.user, "reason": data["reason"]}
        if action == "ramp":
            experiment = lifecycle.experiment_ramp(**common, traffic_percent=data.get("traffic_percent"))
        elif action == "start":  # with layer 3's fixed horizon
            experiment = experiment_start_registered(**common)
        else:
            experiment = getattr(lifecycle, f"experiment_{action}")(**common)
        return Response(experiment_output(experiment))


class ExperimentPlanApi(APIView):
    """Register the traffic layers' plans again under the family's policy as it is now (release managers;
    audited, with a reason): the new settings bind every later run, and the new horizons count units first
    exposed from now on."""

    write_roles = frozenset({RELEASE_MANAGER})

    class InputSerializer(StrictSerializer):
        reason = serializers.CharField(max_length=2000)

    @extend_schema(
        operation_id="experiment_plan_register", request=InputSerializer, responses=ExperimentOutputSerializer
    )
    def post(self, request: Request, name: str) -> Response:
        experiment = experiment_get(name=name)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        experiment = experiment_plans_register_again(
            experiment=experiment, actor=request.user, reason=serializer.validated_data["reason"]
        )
        return Response(experiment_output(experiment))


class ExperimentUnblindApi(APIView):
    """Unblind the traffic layers before their looks (a user with the permission
    `canary.unblind_experiment`; audited, with a reason): every output then shows the numbers so far,
    beside who unblinded, when and why."""

    write_roles = READ_ROLES  # the permission, not a role, decides (the service checks it)

    class InputSerializer(StrictSerializer):
        reason = serializers.CharField(max_length=2000)

    @extend_schema(
        operation_id="experiment_unblind", request=InputSerializer, responses=ExperimentOutputSerializer
    )
    def post(self, request: Request, name: str) -> Response:
        experiment = experiment_get(name=name)
        unblind_permission_require(request.user)  # before the input: no hint to who may not
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        experiment = experiment_unblind(
            experiment=experiment, actor=request.user, reason=serializer.validated_data["reason"]
        )
        return Response(experiment_output(experiment))


def _assign_input(data: object) -> dict[str, str]:
    """ASSIGN_REQUEST's checks by hand: on this hot path a serializer instance (its deep-copied
    fields) costs 0.3 ms, about a third of the request (profiled in-process)."""
    if not isinstance(data, dict):
        raise serializers.ValidationError({"non_field_errors": ["Expected a JSON object."]})
    errors: dict[str, list[str]] = {key: ["Unknown field."] for key in data if key not in ASSIGN_FIELDS}
    for key, value in data.items():
        if key in ASSIGN_FIELDS and not (isinstance(value, str) and len(value) <= 200):
            errors[key] = ["Must be a string of at most 200 characters."]
        elif key in ("user_id", "session_id") and value == "":
            errors[key] = ["May not be blank: leave it out instead."]
    if "force_arm" in data and "force_arm" not in errors and data["force_arm"] not in ARMS:
        errors["force_arm"] = [f'"{data["force_arm"]}" is not a valid choice.']
    if errors:
        raise serializers.ValidationError(errors)
    return data


ASSIGN_FIELDS = ("user_id", "session_id", "force_arm", "qa_token")
_UNIT_TEXT = {"type": "string", "minLength": 1, "maxLength": 200}
ASSIGN_REQUEST = {
    "type": "object",
    "properties": {
        "user_id": {**_UNIT_TEXT, "description": "The sticky unit; else the session."},
        "session_id": _UNIT_TEXT,
        "force_arm": {"type": "string", "enum": list(ARMS), "description": "QA only: needs `qa_token`."},
        "qa_token": {"type": "string", "maxLength": 200, "description": "On the experiment's allow-list."},
    },
    "anyOf": [{"required": ["user_id"]}, {"required": ["session_id"]}],
    "additionalProperties": False,
}


class AssignApi(APIView):
    """Which arm and version serve this user (or session). The body's fields are checked by hand
    (`_assign_input`): on this hot path a serializer instance costs a third of the request."""

    write_roles = APP_ROLES

    class OutputSerializer(serializers.Serializer):
        experiment = serializers.CharField()
        arm = serializers.CharField()
        version = serializers.CharField()
        bucket = serializers.IntegerField()
        forced = serializers.BooleanField()

    @extend_schema(
        operation_id="canary_assign", request={"application/json": ASSIGN_REQUEST}, responses=OutputSerializer
    )
    def post(self, request: Request, name: str) -> Response:
        experiment = experiment_get_live(name=name)
        routing = experiment_assign(experiment=experiment, **_assign_input(request.data))
        return Response(
            {
                "experiment": experiment.name,
                "arm": routing.assignment.arm,
                "version": routing.version.ref,
                "bucket": routing.assignment.bucket,
                "forced": routing.assignment.forced,
            }
        )


class EventsApi(APIView):
    """A batch of turn and outcome events from the chat app; all stored or none; idempotent by event_id."""

    write_roles = frozenset({APP})

    class OutputSerializer(serializers.Serializer):
        received = serializers.IntegerField()
        accepted = serializers.IntegerField()
        duplicates = serializers.IntegerField()

    @extend_schema(
        operation_id="events_send",
        request={"application/json": {"type": "object", "properties": {"events": {"type": "array"}}}},
        responses=OutputSerializer,
    )
    def post(self, request: Request) -> Response:
        body = request.data
        events = body.get("events") if isinstance(body, dict) else body
        result = events_ingest(events=events, actor=request.user)
        return Response(
            {"received": result.received, "accepted": result.accepted, "duplicates": result.duplicates},
            status=status.HTTP_201_CREATED if result.accepted else status.HTTP_200_OK,
        )


_MESSAGE = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {
        "role": {"type": "string", "minLength": 1, "description": "system, user, assistant, ..."},
        "content": {"type": "string"},
    },
}
PROXY_REQUEST = {
    "type": "object",
    "required": ["messages"],
    "properties": {
        "model": {"type": "string", "description": "ignored: the caller's arm decides the version"},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": _MESSAGE,
            "description": "The conversation so far; the last message must be the user's.",
        },
        "user": {**_UNIT_TEXT, "description": "Who asks (the sticky unit); else the X-EvalHub-User header."},
        "stream": {"type": "boolean", "enum": [False], "description": "streaming is not supported yet"},
    },
    "description": "An OpenAI chat completion request; other keys are forwarded as they are.",
}
PROXY_ANSWER_HEADERS = {
    "X-EvalHub-Arm": "the caller's arm",
    "X-EvalHub-Model-Version": "the version that answered",
    "X-EvalHub-Fallback": "1 when the candidate failed and the baseline answered",
}


class ChatCompletionsProxyApi(APIView):
    """OpenAI-compatible chat completions, answered by the caller's arm; `stream: true` relays the
    arm's server-sent chunks as they come (`canary.services.proxy_stream`).

    Use the official client with `base_url=<server>/api/v1/canary/<experiment>/v1`. The answer
    carries X-EvalHub-Arm (the caller's arm) and X-EvalHub-Model-Version (the version that
    answered; the baseline when the candidate failed, with X-EvalHub-Fallback: 1).
    """

    write_roles = APP_ROLES

    @extend_schema(
        operation_id="canary_chat_completions",
        request={"application/json": PROXY_REQUEST},
        parameters=[
            OpenApiParameter(
                "X-EvalHub-User", str, OpenApiParameter.HEADER, description="who asks, if not `user`"
            ),
            OpenApiParameter(
                "X-EvalHub-Session", str, OpenApiParameter.HEADER, description="the unit without a user"
            ),
            OpenApiParameter(
                "X-EvalHub-Force-Arm", str, OpenApiParameter.HEADER, enum=list(ARMS), description="QA only"
            ),
            OpenApiParameter("X-EvalHub-QA-Token", str, OpenApiParameter.HEADER, description="QA only"),
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description="the same on every try of one question: a retried question is recorded once",
            ),
            *(
                OpenApiParameter(header, str, OpenApiParameter.HEADER, response=[200], description=text)
                for header, text in PROXY_ANSWER_HEADERS.items()
            ),
        ],
        responses={
            200: OpenApiResponse(
                {"type": "object"}, description="The chat completion, as the version answered it."
            ),
            502: OpenApiResponse(ErrorSerializer, description="Neither version could answer."),
        },
    )
    def post(self, request: Request, name: str) -> HttpResponseBase:
        experiment = experiment_get_live(name=name)
        who = {
            "user_id": request.headers.get("X-EvalHub-User"),
            "session_id": request.headers.get("X-EvalHub-Session"),
            "force_arm": request.headers.get("X-EvalHub-Force-Arm"),
            "qa_token": request.headers.get("X-EvalHub-QA-Token"),
            "idempotency_key": request.headers.get("Idempotency-Key"),
        }
        body = request.data
        if isinstance(body, dict) and body.get("stream") is True:
            stream = chat_completion_stream(experiment=experiment, body=body, **who)
            response = StreamingHttpResponse(
                _cycle_free(stream.chunks, request=request), content_type="text/event-stream"
            )
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"  # a proxy in front must not hold the chunks back
            for header, value in _answer_headers(stream).items():
                response[header] = value
            return response
        answer = chat_completion_proxy(experiment=experiment, body=body, **who)
        return Response(answer.body, headers=_answer_headers(answer))


def _cycle_free(chunks: Iterator[bytes], *, request: Request) -> Iterator[bytes]:
    """The stream's chunks; at its end, DRF's request is cut from its parser context (which holds the
    request and the view, each holding it): a stream keeps the request alive past the collector's
    young generations, and the cycle would be freed only by a full collection, which stops every
    stream of the worker while it runs."""
    try:
        yield from chunks
    finally:
        request.parser_context = None


def _answer_headers(answer: ProxyAnswer | ProxyStream) -> dict[str, str]:
    headers = {"X-EvalHub-Arm": answer.arm, "X-EvalHub-Model-Version": answer.version.ref}
    if answer.fallback:
        headers["X-EvalHub-Fallback"] = "1"
    return headers


class ModelsProxyApi(APIView):
    """OpenAI's `GET /models` for the proxy: the one model a chat app names, the experiment (the
    arms' own models are the proxy's business; `model` in a request is ignored)."""

    read_roles = APP_ROLES

    @extend_schema(operation_id="canary_models", responses={200: OpenApiResponse({"type": "object"})})
    def get(self, request: Request, name: str) -> Response:
        experiment = experiment_get_live(name=name)
        model = {
            "id": experiment.name,
            "object": "model",
            "created": int(experiment.created_at.timestamp()),
            "owned_by": "evalhub",
        }
        return Response({"object": "list", "data": [model]})


class ExperimentAnalysisApi(APIView):
    """GET: the latest analyses. POST: analyse now (and act on the verdict, as the beat does)."""

    write_roles = frozenset({RELEASE_MANAGER})

    @extend_schema(operation_id="experiment_analyses_list", responses=AnalysisOutputSerializer(many=True))
    def get(self, request: Request, name: str) -> Response:
        analyses = analyses_latest(experiment=experiment_get(name=name), limit=50)
        return Response(AnalysisOutputSerializer(analyses, many=True).data)

    @extend_schema(operation_id="experiment_analyse", request=None, responses=AnalysisOutputSerializer)
    def post(self, request: Request, name: str) -> Response:
        from canary.services.analysis import experiment_analyze  # scipy: only when asked

        analysis = experiment_analyze(experiment=experiment_get(name=name), actor=request.user)
        return Response(AnalysisOutputSerializer(analysis).data)


class ProbeRunListApi(APIView):
    """GET: probe runs with their reports. POST `{probe_set?}`: run probes now on a cpu worker."""

    write_roles = frozenset({RELEASE_MANAGER})

    class InputSerializer(StrictSerializer):
        probe_set = serializers.CharField(required=False, help_text="default: every set of the family")

    @extend_schema(operation_id="experiment_probe_runs_list", responses=ProbeRunOutputSerializer(many=True))
    def get(self, request: Request, name: str) -> Response:
        runs = probe_runs_list(experiment=experiment_get(name=name))
        return Response(ProbeRunOutputSerializer(runs, many=True).data)

    @extend_schema(
        operation_id="experiment_probe_runs_request", request=InputSerializer, responses={202: None}
    )
    def post(self, request: Request, name: str) -> Response:
        experiment = experiment_get(name=name)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        sets = probe_runs_request(
            experiment=experiment,
            actor=request.user,
            probe_set_name=serializer.validated_data.get("probe_set"),
        )
        return Response({"queued": [p.name for p in sets]}, status=status.HTTP_202_ACCEPTED)


class ProbeSetOutputSerializer(serializers.Serializer):
    """Serializes `ProbeSetSummary`: the set and its probe count per weakness."""

    id = serializers.IntegerField(source="probe_set.pk")
    name = serializers.CharField(source="probe_set.name")
    family = serializers.CharField(source="probe_set.family")
    description = serializers.CharField(source="probe_set.description")
    is_demo = serializers.BooleanField(source="probe_set.is_demo")
    probes = serializers.IntegerField()
    weaknesses = serializers.DictField(child=serializers.IntegerField())
    created_at = serializers.DateTimeField(source="probe_set.created_at")


class ProbeSetListApi(APIView):
    """GET: probe sets. POST (multipart): `{name, family, description?, file}`, a JSONL file of
    `{id, input, expected_label, weakness, language?, metadata?}` objects."""

    parser_classes = [MultiPartParser]
    write_roles = frozenset({CI, RELEASE_MANAGER})

    class UploadSerializer(StrictSerializer):
        name = SlugNameField()
        family = SlugNameField()
        description = serializers.CharField(required=False, allow_blank=True)
        file = serializers.FileField()

    @extend_schema(operation_id="probe_sets_list", responses=ProbeSetOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response(ProbeSetOutputSerializer(probe_sets_list(), many=True).data)

    @extend_schema(
        operation_id="probe_set_upload",
        request={"multipart/form-data": UploadSerializer},
        responses={201: ProbeSetOutputSerializer},
    )
    def post(self, request: Request) -> Response:
        serializer = self.UploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        limit = settings.EVALHUB_MAX_UPLOAD_BYTES
        if data["file"].size > limit:
            raise ApplicationError(
                reason(ApiCode.FILE_TOO_LARGE, name=data["file"].name, size=data["file"].size, limit=limit),
                code="too_large",
                fields={"file": [reason(ApiCode.AT_MOST_BYTES, limit=limit)]},
                status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        probe_set = probe_set_import_jsonl(
            name=data["name"],
            family=data["family"],
            content=data["file"].read(),
            description=data.get("description", ""),
            actor=request.user,
        )
        [summary] = probe_sets_list(ids=[probe_set.pk])
        return Response(ProbeSetOutputSerializer(summary).data, status=status.HTTP_201_CREATED)
