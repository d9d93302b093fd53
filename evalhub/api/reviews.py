"""The follow-up review queue over the API: a turn to label, a label, the detector's live agreement,
and the labels as JSONL (release managers and annotators; readers may read the agreement)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from canary.selectors.experiments import experiment_get
from canary.services.live_suite import PER_STRATUM_MAX, LiveSuiteBuild, eval_suite_from_reviews
from canary.services.reviews import (
    LABELS,
    LANGUAGES,
    REFERENCE_MAX_CHARS,
    follow_up_review_next,
    follow_up_review_record,
    follow_up_reviews_export,
)
from evalhub.api.common import SlugNameField, StrictSerializer
from evalhub.api.registry import EvalSuiteOutputSerializer
from evalhub.exports import jsonl_response
from gate.layers.base import to_json
from gate.services.reviews import follow_up_review_agreement, follow_up_reviewer_agreement
from registry.roles import READ_ROLES, RELEASE_ROLES, REVIEW_ROLES
from registry.selectors.suites import eval_suite_get


class ReviewItemSerializer(serializers.Serializer):
    turn_id = serializers.IntegerField()
    language = serializers.CharField()
    previous_question = serializers.CharField()
    previous_answer = serializers.CharField()
    next_turn = serializers.CharField()
    gap_seconds = serializers.FloatField()

    class Meta:
        ref_name = "FollowUpReviewItem"


class ReviewNextApi(APIView):
    """A random live turn nobody has labelled yet (`?language=en|zh`; `?second_opinion=true`: one
    another reviewer labelled once); `turn` is null when none is left."""

    read_roles = REVIEW_ROLES

    @extend_schema(
        parameters=[
            OpenApiParameter("language", str, enum=list(LANGUAGES), required=False),
            OpenApiParameter("second_opinion", bool, required=False),
        ],
        responses=inline_serializer("FollowUpReviewNext", {"turn": ReviewItemSerializer(allow_null=True)}),
    )
    def get(self, request: Request, name: str) -> Response:
        second = request.query_params.get("second_opinion", "false")
        if second not in ("true", "false"):
            raise serializers.ValidationError({"second_opinion": ["true or false"]})
        item = follow_up_review_next(
            experiment=experiment_get(name=name),
            actor=request.user,
            language=request.query_params.get("language"),
            second_opinion=second == "true",
        )
        return Response({"turn": ReviewItemSerializer(item).data if item else None})


class ReviewListApi(APIView):
    """GET: `detector`, its agreement with the experiment's labels as layer 2 judges it now, and
    `reviewers`, first labels against second opinions. POST `{turn_id, label[, expected_label]
    [, expected_reference]}`: label a turn (follow_up, deepening, new = other; audited), and give the
    expected answer to its question (a label of the family's suite and/or a reference text)."""

    read_roles = READ_ROLES | REVIEW_ROLES
    write_roles = REVIEW_ROLES

    class InputSerializer(StrictSerializer):
        turn_id = serializers.IntegerField(min_value=1, max_value=2**63 - 1)
        label = serializers.ChoiceField(choices=LABELS)
        expected_label = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=200,
            help_text="the question's expected clause type: a label of the family's suite",
        )
        expected_reference = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=REFERENCE_MAX_CHARS,
            trim_whitespace=False,
            help_text="the question's expected answer as a reference text",
        )

        class Meta:
            ref_name = "FollowUpReviewInput"

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        turn_id = serializers.IntegerField()
        label = serializers.CharField()
        expected_label = serializers.CharField()
        expected_reference = serializers.CharField()
        reviewer = serializers.CharField(source="reviewer_name")
        created_at = serializers.DateTimeField()

        class Meta:
            ref_name = "FollowUpReviewOutput"

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, name: str) -> Response:
        experiment = experiment_get(name=name)
        return Response(
            {
                "detector": to_json(follow_up_review_agreement(experiment=experiment, actor=request.user)),
                "reviewers": to_json(follow_up_reviewer_agreement(experiment=experiment, actor=request.user)),
            }
        )

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request: Request, name: str) -> Response:
        experiment = experiment_get(name=name)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        review = follow_up_review_record(
            experiment=experiment, actor=request.user, **serializer.validated_data
        )
        return Response(self.OutputSerializer(review).data, status=status.HTTP_201_CREATED)


class ReviewExportApi(APIView):
    """The labels as JSONL in the labelled set's format (`id, language, previous_question,
    previous_answer, next_turn, gap_seconds, label`), one line per reviewed turn; `manage.py
    followup_eval --file` scores the detector on it."""

    read_roles = REVIEW_ROLES

    @extend_schema(responses={(200, "application/x-ndjson"): OpenApiTypes.STR})
    def get(self, request: Request, name: str) -> Response:
        experiment = experiment_get(name=name)
        rows = follow_up_reviews_export(experiment=experiment, actor=request.user)
        return jsonl_response(rows=rows, filename=f"{experiment.name}-follow-up-reviews.jsonl")


class LiveStratumSerializer(serializers.Serializer):
    language = serializers.CharField()
    label = serializers.CharField(help_text="empty: questions with a reference text only")
    candidates = serializers.IntegerField()
    drawn = serializers.IntegerField()

    class Meta:
        ref_name = "SuiteFromReviewsStratum"


class SuiteFromReviewsApi(APIView):
    """POST `{experiment | family[, per_stratum][, seed][, name]}`: the next version of `name`
    (default `<suite>-live`) from suite `ref` and the reviewed live questions with an expected answer,
    scrubbed, de-duplicated and drawn per (language, label) by `seed` (release managers; audited). The
    base suite itself is never written."""

    write_roles = RELEASE_ROLES

    class InputSerializer(StrictSerializer):
        experiment = serializers.CharField(required=False, max_length=100)
        family = serializers.CharField(required=False, max_length=100)
        per_stratum = serializers.IntegerField(required=False, min_value=1, max_value=PER_STRATUM_MAX)
        seed = serializers.IntegerField(required=False, min_value=0, max_value=2**32 - 1)
        name = SlugNameField(required=False)

        class Meta:
            ref_name = "SuiteFromReviewsInput"

    class OutputSerializer(serializers.Serializer):
        suite = EvalSuiteOutputSerializer()
        base = serializers.SerializerMethodField()
        added = serializers.IntegerField()
        kept = serializers.IntegerField()
        candidates = serializers.IntegerField()
        skipped = serializers.DictField(child=serializers.IntegerField())
        strata = LiveStratumSerializer(many=True)
        scrubbed = serializers.IntegerField()

        class Meta:
            ref_name = "SuiteFromReviewsOutput"

        def get_base(self, obj: LiveSuiteBuild) -> str:
            return f"{obj.base.name}@{obj.base.version}"

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request: Request, ref: str) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        suite = eval_suite_get(ref=ref)
        experiment = experiment_get(name=data["experiment"]) if "experiment" in data else None
        build = eval_suite_from_reviews(
            suite=suite,
            actor=request.user,
            experiment=experiment,
            family=data.get("family"),
            per_stratum=data.get("per_stratum", 50),
            seed=data.get("seed", 0),
            name=data.get("name"),
        )
        return Response(self.OutputSerializer(build).data, status=status.HTTP_201_CREATED)
